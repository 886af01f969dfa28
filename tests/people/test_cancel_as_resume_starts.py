"""A cancel that lands as `teamrun resume` starts (a server cancelled the waiting run between the resume's look at
it and its claim) is said as a cancel, with the command that continues the run all the same: it was said as
"being continued by another process", which nothing was (issue 42 item 6; a cancel within ~0.4 s of a resume)."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrun.cli import main
from teamrun.engine.durability import pending
from teamrun.store import open_store
from teamrun.store.pending import PendingRepository
from tests.people.test_answer_errors import _one_question


def test_a_cancel_between_the_look_and_the_claim_is_said_as_a_cancel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, run_id, item = _one_question(tmp_path, capsys, "ask_colour", "{}")
    assert main(["answer", run_id, item, "blue", "--store", store, "--progress", "none", "--no-resume"]) == 0
    capsys.readouterr()
    claim = pending.claim_run

    def cancelled_first(items: PendingRepository, claimed: str) -> bool:
        PendingRepository(open_store(store)).cancel_waiting(
            claimed, reason="cancelled by request while waiting for people"
        )
        return claim(items, claimed)  # the claim now finds the run cancelled

    monkeypatch.setattr(pending, "claim_run", cancelled_first)

    code = main(["resume", run_id, "--store", store, "--progress", "none"])

    err = capsys.readouterr().err
    assert code == 2, err
    assert f"run {run_id} was cancelled (cancelled by request while waiting for people)" in err
    assert "another process" not in err
    assert f"teamrun resume {run_id}" in err
