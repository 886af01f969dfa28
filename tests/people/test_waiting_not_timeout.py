"""A detached run that asks a person ends `waiting` (exit 4), not `budget_exhausted` by `timeout_s` (exit 3),
however long the store takes to record the question (issue 42, item 7).

`execute --thread ... --detach` exited 3 once on a loaded machine: the run's clock (`limits.timeout_s`) ran while
the question was written to the store — a SQLite write waits up to 30 s for the lock under load — since only the
time a call sat parked for its answer counted as a person's. Here the store's write of the item is held until
the run's whole `timeout_s` has passed, as the loaded machine did.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from teamrun.cli import main
from teamrun.store.pending import PendingRepository

TIMEOUT_S = 0.5

TEAM = f"""version: 1
name: slow-store
supervisor: lead
limits: {{timeout_s: {TIMEOUT_S}}}
tools:
  ask_ops: {{person: {{choices: [eu-west-1, us-east-1]}}}}
agents:
  lead: {{tools: [ask_ops]}}
"""


def test_a_question_the_store_is_slow_to_record_leaves_the_run_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    record = PendingRepository.open_item

    def slow_open_item(self: PendingRepository, *args: Any, **kwargs: Any) -> Any:
        until = time.monotonic() + 2 * TIMEOUT_S  # the run's timeout_s passes while the store records it
        while time.monotonic() < until:
            time.sleep(0.01)
        return record(self, *args, **kwargs)

    monkeypatch.setattr(PendingRepository, "open_item", slow_open_item)
    team = tmp_path / "team.yaml"
    team.write_text(TEAM, encoding="utf-8")
    store = str(tmp_path / "runs.db")

    args = ["execute", str(team), "-i", "Launch", "--thread", "t1", "--store", store, "--detach", "--json"]
    code = main([*args, "--progress", "none"])

    out, err = capsys.readouterr()
    assert code == 4, err
    result = json.loads(out)
    assert (result["status"], result["stopped_by"]) == ("waiting", "waiting for a person")
