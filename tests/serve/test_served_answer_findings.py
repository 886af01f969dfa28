"""Issue 42 (attack a42people), the serve side of answering people: who answers (``by``) and a note over HTTP are
checked as ``teamrun answer`` checks ``--by`` and ``--note``; the other items of a run cancelled while an answer
raced it end with the run."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

import teamrun
from teamrun.store import open_store
from teamrun.store.pending import PendingRepository
from teamrun.testing.scripted import ScriptedModel, tool_call, tool_calls
from tests.serve.conftest import TOKEN, until_run, until_status
from tests.serve.test_web_pending import ask_team, said

AUTH = {"Authorization": f"Bearer {TOKEN}"}
HANG_GUARD_S = 60.0
"""Only so a broken test fails instead of hanging; nothing is timed."""


def test_by_and_note_over_http_are_refused_with_a_nul_or_an_escape_and_nothing_is_recorded(
    serve: Any, tmp_path: Path
) -> None:
    store = open_store(tmp_path / "runs.db")
    model = ScriptedModel({"lead": [tool_call("ask_region", question="Which region?"), said]})
    server = serve(
        [teamrun.load_team(ask_team(tmp_path), chat_model=model, store=store)], tokens=frozenset({TOKEN}), store=store
    )
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "asker", "input": "deploy"}).json()["id"]
        until_status(client, run_id, "waiting")
        (item,) = client.get("/v1/pending").json()["data"]
        url = f"/v1/runs/{run_id}/pending/{item['id']}"
        refused = [
            client.post(url, json={"answer": "eu-west-1", "by": "a\u001b]52;c;SGk=\u0007b"}),
            client.post(url, json={"answer": "eu-west-1", "by": "a\u0000b"}),
            client.post(url, json={"answer": "eu-west-1", "by": "two\nlines"}),
        ]
        still = client.get("/v1/pending").json()["data"]
    assert [r.status_code for r in refused] == [400, 400, 400], [r.text for r in refused]
    assert {r.json()["error"]["code"] for r in refused} == {"invalid_text"}
    assert "control character" in refused[0].json()["error"]["message"]
    assert "NUL" in refused[1].json()["error"]["message"]
    assert [i["status"] for i in still] == ["pending"]
    (kept,) = PendingRepository(store).items(run_id)
    assert kept.status == "pending" and kept.answered_by is None


def test_a_note_with_a_nul_is_refused_over_http() -> None:
    from teamrun.serve.answers import AnswerNotTaken, PendingAnswer, _read
    from teamrun.store.pending import PendingRecord

    item = PendingRecord(
        run_id="run_x",
        item_id="a1",
        kind="approval",
        call_key="k",
        agent="lead",
        question="run stamp?",
        spec={"tool": "stamp"},
        status="pending",
        answer=None,
        answered_by=None,
        asked_at=0.0,
        answered_at=None,
        used=False,
    )
    try:
        _read(item, PendingAnswer(approve=True, note="ok\u0000"), "http")
    except AnswerNotTaken as exc:
        assert exc.because == "invalid_text" and "the note" in str(exc) and "NUL" in str(exc)
    else:
        raise AssertionError("a note with a NUL was taken")


def test_a_run_cancelled_after_an_answer_continued_it_ends_its_other_questions(
    serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answer q1 (the run continues here), cancel while the continuation is held, then let it go: the run ends
    cancelled and q2 ends with it: not listed pending, and an answer to it is 409 run_cancelled."""
    from teamrun.engine.durability import resume

    db = tmp_path / "runs.db"
    store = open_store(db)
    asks = tool_calls(("ask_region", {"question": "Which region?"}), ("ask_region", {"question": "And the backup?"}))
    model = ScriptedModel({"lead": [asks, said]})
    server = serve(
        [teamrun.load_team(ask_team(tmp_path), chat_model=model, store=store)], tokens=frozenset({TOKEN}), store=store
    )
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "asker", "input": "deploy"}).json()["id"]
        until_status(client, run_id, "waiting")
        assert [i["id"] for i in client.get("/v1/pending").json()["data"]] == ["q1", "q2"]

        entered, release = threading.Event(), threading.Event()
        original = resume.open_resume

        def held(*args: Any, **kwargs: Any) -> Any:  # the continuation waits here, in its thread, until released
            entered.set()
            assert release.wait(HANG_GUARD_S)
            return original(*args, **kwargs)

        monkeypatch.setattr(resume, "open_resume", held)
        answered = client.post(f"/v1/runs/{run_id}/pending/q1", json={"answer": "eu-west-1"})
        assert answered.status_code == 200, answered.text
        assert entered.wait(HANG_GUARD_S)  # the answer continues the run here: it is running, held
        cancelled = client.post(f"/v1/runs/{run_id}/cancel")
        release.set()
        record = until_run(client, run_id, lambda r: r["status"] not in ("running", "waiting"), "its end")
        listed = client.get("/v1/pending").json()["data"]
        late = client.post(f"/v1/runs/{run_id}/pending/q2", json={"answer": "us-east-1"})
    assert cancelled.status_code == 202, cancelled.text
    assert record["status"] == "cancelled", record
    assert listed == []
    assert late.status_code == 409, late.text
    assert late.json()["error"]["code"] == "run_cancelled", late.text
    statuses = {i.item_id: (i.status, i.answered_by) for i in PendingRepository(open_store(db)).items(run_id)}
    assert statuses == {"q1": ("answered", "http"), "q2": ("expired", "cancelled")}


def test_a_chat_completion_whose_run_waits_for_a_person_says_so_and_how_to_answer(serve: Any, tmp_path: Path) -> None:
    """Not a successful empty answer (content "", finish_reason stop): the content names the waiting question and
    the route that answers it, whole and streamed; ``teamrun.status`` stays ``waiting``."""
    import openai

    store = open_store(tmp_path / "runs.db")
    ask = tool_call("ask_region", question="Which region?")
    model = ScriptedModel({"lead": [ask, ask]})  # two runs: each asks, then waits
    server = serve(
        [teamrun.load_team(ask_team(tmp_path), chat_model=model, store=store)], tokens=frozenset({TOKEN}), store=store
    )
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=TOKEN, max_retries=0, timeout=60)
    whole = client.chat.completions.create(model="asker", messages=[{"role": "user", "content": "deploy"}])
    chunks = list(
        client.chat.completions.create(model="asker", messages=[{"role": "user", "content": "deploy"}], stream=True)
    )
    said_whole = whole.choices[0].message.content or ""
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    run_id = (whole.model_extra or {})["teamrun"]["run_id"]
    assert (whole.model_extra or {})["teamrun"]["status"] == "waiting"
    assert said_whole.startswith("The run is waiting for a person: q1 (lead): Which region?"), said_whole
    assert f"POST /v1/runs/{run_id}/pending/{{item}}" in said_whole
    assert streamed.startswith("The run is waiting for a person: q1 (lead): Which region?"), streamed
    assert f"/v1/runs/{chunks[0].id.replace('chatcmpl-', 'run_')}/pending/" in streamed
