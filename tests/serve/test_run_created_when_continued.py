"""A served run continued later (by a restarted server, or by `teamrun answer` in another process) is the same run:
its ``created`` stays its first start's time (attack a42people D15), and its record and its event stream say the
same of its kept events (attack a43serve 4).

The run's start is moved back in the store (to 2020) before it is continued, so a continuation that took its own
time as the run's would show at once, without waiting for the clock.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

import teamrun
from teamrun.cli import main
from teamrun.store import open_store
from teamrun.store.schema import runs
from teamrun.testing.scripted import ScriptedModel, tool_call
from tests.serve.conftest import TOKEN, until_status
from tests.serve.test_web_pending import ask_team

AUTH = {"Authorization": f"Bearer {TOKEN}"}
FIRST_START = dt.datetime(2020, 1, 2, 12, 4, 5, tzinfo=dt.UTC)


def backdate(db: Path, run_id: str) -> None:
    """Move the run's first start back to :data:`FIRST_START` in the store."""
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(runs.update().where(runs.c.id == run_id).values(started_at=FIRST_START))
    engine.dispose()


def _cli(*args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    assert code == 0 and "Traceback" not in err.getvalue(), err.getvalue()
    return out.getvalue()


def _result_event(stream: str) -> dict[str, Any]:
    return dict(json.loads(stream.rsplit("event: result\ndata: ", 1)[1].split("\n", 1)[0]))


def test_a_run_continued_by_a_restarted_server_keeps_its_created_time(serve: Any, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = open_store(db)
    asking = ScriptedModel({"lead": [tool_call("ask_region", question="Which region?")]})
    first = serve([teamrun.load_team(ask_team(tmp_path), chat_model=asking, store=store)], store=store)
    with httpx.Client(base_url=first.url, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "asker", "input": "deploy"}).json()["id"]
        until_status(client, run_id, "waiting")
    first.stop()
    backdate(db, run_id)

    answering = ScriptedModel({"lead": ["deployed to us-east-1"]})  # the first call is answered from the journal
    again = serve([teamrun.load_team(ask_team(tmp_path), chat_model=answering, store=store)], store=store)
    with httpx.Client(base_url=again.url, timeout=120) as client:
        before = client.get(f"/v1/runs/{run_id}").json()
        answered = client.post(f"/v1/runs/{run_id}/pending/q1", json={"answer": "us-east-1"})
        after = until_status(client, run_id, "done")
        listed = {row["id"]: row for row in client.get("/v1/runs").json()["data"]}

    assert answered.status_code == 200, answered.text
    assert before["created"] == int(FIRST_START.timestamp()), before
    assert after["created"] == int(FIRST_START.timestamp()), after
    assert listed[run_id]["started_at"] == FIRST_START.isoformat(), listed[run_id]
    shown = json.loads(_cli("runs", "show", run_id, "--store", str(db), "--json"))
    assert shown["started_at"].startswith("2020-01-02"), shown


def test_a_run_continued_by_teamrun_answer_keeps_its_created_time_and_its_events_flag(
    serve: Any, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    store = open_store(db)
    script = [tool_call("ask_region", question="Which region?")]
    team = teamrun.load_team(ask_team(tmp_path), chat_model=ScriptedModel({"lead": script}), store=store)
    server = serve([team], tokens=frozenset({TOKEN}), store=store)
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "asker", "input": "deploy"}).json()["id"]
        until_status(client, run_id, "waiting")
        backdate(db, run_id)
        _cli("answer", run_id, "q1", "us-east-1", "--store", str(db))  # another process continues it, to its end

        record = client.get(f"/v1/runs/{run_id}").json()
        streamed = _result_event(client.get(f"/v1/runs/{run_id}/events").text)

    assert record["status"] == "done" and streamed["status"] == "done", (record, streamed)
    assert record["created"] == streamed["created"] == int(FIRST_START.timestamp()), (record, streamed)
    assert record["events"] is True, record  # what this server ran of it, kept as it suspended
    assert streamed["events"] == record["events"], streamed


def _events(stream: str) -> list[tuple[int, str, dict[str, Any]]]:
    """The stream's events before its result: (id, kind, data)."""
    found = []
    for block in stream.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":"))
        if "id" in fields:
            found.append((int(fields["id"]), fields["event"], json.loads(fields["data"])))
    return found


def test_the_events_of_a_continuation_by_teamrun_answer_follow_the_servers_in_its_stream(
    serve: Any, tmp_path: Path
) -> None:
    from tests.waiting import wait_until

    db = tmp_path / "runs.db"
    store = open_store(db)
    script = [tool_call("ask_region", question="Which region?")]
    team = teamrun.load_team(ask_team(tmp_path), chat_model=ScriptedModel({"lead": script}), store=store)
    server = serve([team], tokens=frozenset({TOKEN}), store=store)
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "asker", "input": "deploy"}).json()["id"]
        until_status(client, run_id, "waiting")
        served = _events(client.get(f"/v1/runs/{run_id}/events").text)
        wait_until(lambda: run_id in store.run_events.kept([run_id]), "the server keeps the run's events")
        _cli("answer", run_id, "q1", "us-east-1", "--store", str(db))  # another process continues it, to its end
        stream = client.get(f"/v1/runs/{run_id}/events").text
    again = serve([teamrun.load_team(ask_team(tmp_path), store=store)], tokens=frozenset({TOKEN}), store=store)
    with httpx.Client(base_url=again.url, headers=AUTH, timeout=120) as client:
        restarted = client.get(f"/v1/runs/{run_id}/events").text

    events = _events(stream)
    kinds = [kind for _, kind, _ in events]
    assert [i for i, _, _ in events] == list(range(len(events))), kinds  # numbered on from the server's
    assert events[: len(served)] == served  # what the server ran, as it streamed it
    assert kinds[len(served)] == "run_continued", kinds
    assert "tool_end" in kinds[len(served) :] and kinds[-1] == "run_end", kinds  # the answer taken, the run ended
    assert events[-1][2]["data"]["status"] == "done", events[-1]
    assert _result_event(stream)["status"] == "done"
    assert _events(restarted) == events  # any server on the store streams the same run
