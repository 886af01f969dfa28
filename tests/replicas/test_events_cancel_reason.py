"""Attack a46b item 6: a cancel that reaches a run as it ends (forwarded by another replica: the run's own replica
applies it on its heartbeat) leaves no ``cancel_reason`` on a run that ended otherwise: the replica that ran it
says what every other replica says from the store, ``done`` without a reason."""

from __future__ import annotations

import pytest

from teamrun.engine.result import RunResult
from teamrun.secrets import Redactor
from teamrun.serve.runs import RunHandle, RunRegistry

pytestmark = pytest.mark.inprocess


def test_a_cancel_that_came_as_the_run_ended_done_gives_it_no_cancel_reason() -> None:
    registry = RunRegistry()
    handle = RunHandle(id="run_late_cancel", team="t", input="x", redactor=Redactor(include_env=False))
    registry._runs[handle.id] = handle
    registry.cancel(handle.id, "cancelled by request")  # the heartbeat applies the cancel another replica left
    assert handle.record()["cancel_reason"] == "cancelled by request"  # while it runs: it is being cancelled
    handle.result = RunResult(run_id=handle.id, team="t", status="done", final_text="done: 7")  # its last step won
    shown = handle.record()
    assert (shown["status"], shown["cancel_reason"]) == ("done", None)
    handle.result.status = "cancelled"
    assert handle.record()["cancel_reason"] == "cancelled by request"
