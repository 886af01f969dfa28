"""An answer and a cancel of the same waiting run that race: they cannot both succeed.

The answer service records the answer and claims the waiting run in one store transaction, holding the run
as a cancel does: an answer recorded first continues the run (a cancel then cancels that continuation); it is
never answered 200 while the cancel ends the run as still waiting (the answer lost). The race is pinned by
holding the answer right after its store write until the cancel has reached the server (no sleeping).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

import teamrun
from teamrun.serve.runs import RunRegistry
from teamrun.store import open_store
from teamrun.store.pending import PendingRepository
from teamrun.testing.scripted import ScriptedModel, tool_call
from tests.serve.conftest import TOKEN, until_run, until_status
from tests.serve.test_web_pending import ask_team, said

AUTH = {"Authorization": f"Bearer {TOKEN}"}
HANG_GUARD_S = 60.0
"""Only so a broken test fails instead of hanging; nothing is timed."""


def _held_after(monkeypatch: pytest.MonkeyPatch, recorded: threading.Event, release: threading.Event) -> None:
    """The answer's store write (whichever method the server uses) signals ``recorded``, then waits for
    ``release`` before the server goes on."""
    for name in ("answer", "answer_and_claim"):
        original = getattr(PendingRepository, name)

        def held(self: PendingRepository, *args: Any, __original: Any = original, **kwargs: Any) -> Any:
            done = __original(self, *args, **kwargs)
            recorded.set()
            assert release.wait(HANG_GUARD_S)
            return done

        monkeypatch.setattr(PendingRepository, name, held)


def _cancel_arrives(monkeypatch: pytest.MonkeyPatch, arrived: threading.Event) -> None:
    original = RunRegistry.request_cancel

    async def seen(self: RunRegistry, *args: Any, **kwargs: Any) -> Any:
        arrived.set()
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(RunRegistry, "request_cancel", seen)


def test_an_answer_recorded_first_continues_the_run_and_the_cancel_cancels_that(
    serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(tmp_path / "runs.db")
    model = ScriptedModel({"lead": [tool_call("ask_region", question="Which region?"), said]})
    server = serve(
        [teamrun.load_team(ask_team(tmp_path), chat_model=model, store=store)], tokens=frozenset({TOKEN}), store=store
    )
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "asker", "input": "deploy"}).json()["id"]
        until_status(client, run_id, "waiting")

    recorded, release, arrived = threading.Event(), threading.Event(), threading.Event()
    _held_after(monkeypatch, recorded, release)
    _cancel_arrives(monkeypatch, arrived)
    answers: dict[str, httpx.Response] = {}

    def post(key: str, path: str, body: dict[str, Any] | None = None) -> None:
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
            answers[key] = client.post(path, json=body)

    answering = threading.Thread(target=post, args=("answer", f"/v1/runs/{run_id}/pending/q1", {"answer": "eu-west-1"}))
    answering.start()
    assert recorded.wait(HANG_GUARD_S)  # the answer is in the store; the server has not gone on yet
    cancelling = threading.Thread(target=post, args=("cancel", f"/v1/runs/{run_id}/cancel"))
    cancelling.start()
    assert arrived.wait(HANG_GUARD_S)  # the cancel reached the server while the answer was held
    release.set()
    answering.join(HANG_GUARD_S)
    cancelling.join(HANG_GUARD_S)

    answer, cancel = answers["answer"], answers["cancel"]
    assert answer.status_code == 200, answer.text  # recorded first: it is taken
    assert cancel.status_code in (202, 409), cancel.text
    if cancel.status_code == 202:  # it cancelled the continuation, not a run still waiting for the answer
        assert cancel.json()["cancel_reason"] == "cancelled by request", cancel.json()
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        record = until_run(client, run_id, lambda r: r["status"] not in ("running", "waiting"), "its end")
    assert record["status"] in ("cancelled", "done"), record
    if record["status"] == "cancelled":
        assert record["error"] != "cancelled by request while waiting for people", record
