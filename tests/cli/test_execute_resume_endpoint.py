"""`teamrun execute TEAM --resume ID` continues the run with what the store keeps of it, as `teamrun resume ID`
does: its endpoint (--api-base) too (docs/cli.md), not the provider's public one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from teamrun.cli import main
from tests.fakeserver import FakeOpenAI, text
from tests.killed_store import DEAD_PID

TEAM = """\
version: 1
name: endpoint
supervisor: lead
defaults: {api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, request_timeout_s: 20}
agents:
  lead: {model: openai/lead}
"""


def _killed_before_its_answer(store: Path, run_id: str) -> None:
    """Leave the store as a run SIGKILLed while its model call was in flight."""
    engine = sa.create_engine(f"sqlite:///{store}")
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM journal WHERE kind = 'model'"))
        meta = json.loads(conn.execute(sa.text("SELECT meta FROM runs WHERE id = :id"), {"id": run_id}).scalar_one())
        meta["pid"] = DEAD_PID
        conn.execute(
            sa.text("UPDATE runs SET status = 'running', meta = :meta WHERE id = :id"),
            {"meta": json.dumps(meta), "id": run_id},
        )
    engine.dispose()


@pytest.mark.parametrize("how", ["execute", "resume"])
def test_a_resume_calls_the_endpoint_the_run_was_started_with(
    how: str,
    tmp_path: Path,
    fake_openai: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("TEAMRUN_API_BASE", raising=False)  # only --api-base names the endpoint
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    monkeypatch.delenv("TEAMRUN_STORE", raising=False)
    team = tmp_path / "team.yaml"
    team.write_text(TEAM, encoding="utf-8")
    store = tmp_path / "runs.db"
    fake_openai.script("lead", [text("first attempt"), text("second attempt")])
    common = ["--store", str(store), "--json", "--progress", "none"]
    assert main(["execute", str(team), "-i", "go", "--api-base", fake_openai.url, *common]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    _killed_before_its_answer(store, run_id)

    again = ["execute", str(team), "--resume", run_id] if how == "execute" else ["resume", run_id]
    code = main([*again, *common])

    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["final_text"] == "second attempt"
    fake_openai.assert_complete()  # both attempts asked the run's own endpoint
