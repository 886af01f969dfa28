"""A served run another process continues (``teamrun answer``) and that waits again: what the server says of it
follows the store, and its events stay in the order they happened (attack a4243b 1-3, 11).

The team's run asks a person (``q1``), then stamps under an approval (``a2``): the server runs it to ``q1``;
``teamrun answer`` (another process for the store; here in-process) continues it to ``a2``; then the server
holding the run continues it again (the approval answered over HTTP), to its end.
"""

from __future__ import annotations

import contextlib
import io
import json
import threading
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

import teamrun
from teamrun.cli import main
from teamrun.store import open_store
from teamrun.store.schema import run_events
from teamrun.testing.scripted import ScriptedModel, tool_call
from tests.fakeserver import FakeOpenAI, Reply, text
from tests.serve.conftest import TOKEN, until_status
from tests.waiting import wait_until

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _ask_then_stamp(tmp_path: Path, model: str = "offline") -> Path:
    path = tmp_path / "ask.yaml"
    path.write_text(
        f"""\
version: 1
name: asker
supervisor: lead
defaults:
  model: {model}
agents:
  lead:
    instructions: Ask the person for a region, then stamp it.
    tools: [ask_region, stamp]
tools:
  ask_region:
    person: {{choices: [eu-west-1, us-east-1]}}
  stamp:
    command: ["echo", "stamped {{{{ what }}}}"]
    parameters:
      what: {{type: string}}
    require_approval: true
""",
        encoding="utf-8",
    )
    return path


def _answer(*args: str) -> str:
    """``teamrun answer ARGS``: its output (it exits 0 when the run ends, else with the waiting code)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        main(["answer", *args, "--progress", "none"])
    assert "Traceback" not in err.getvalue(), err.getvalue()
    return out.getvalue()


def _events(stream: str) -> list[tuple[int, str, dict[str, Any]]]:
    """The stream's events before its result: (id, kind, data)."""
    found = []
    for block in stream.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":"))
        if "id" in fields:
            found.append((int(fields["id"]), fields["event"], json.loads(fields["data"])))
    return found


def _result(stream: str) -> dict[str, Any]:
    return dict(json.loads(stream.rsplit("event: result\ndata: ", 1)[1].split("\n", 1)[0]))


def _parts(db: Path, run_id: str) -> list[tuple[int, int]]:
    """The run's kept parts: (part, events)."""
    engine = sa.create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            query = sa.select(run_events.c.part, run_events.c.count).where(run_events.c.run_id == run_id)
            return [(int(part), int(count)) for part, count in conn.execute(query.order_by(run_events.c.part))]
    finally:
        engine.dispose()


def _run_ends(events: list[tuple[int, str, dict[str, Any]]]) -> list[str]:
    return [data["data"]["status"] for _, kind, data in events if kind == "run_end"]


def _wait_for_answer_cli(server: Any, store: Any, tmp_path: Path, db: Path) -> tuple[str, list[tuple[int, int]]]:
    """A served run answered by ``teamrun answer`` and waiting again (on ``a2``): its id and kept parts."""
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "asker", "input": "deploy"}).json()["id"]
        until_status(client, run_id, "waiting")
    wait_until(lambda: run_id in store.run_events.kept([run_id]), "the server keeps the run's events")
    _answer(run_id, "q1", "us-east-1", "--store", str(db))
    parts = _parts(db, run_id)
    assert len(parts) == 2, parts  # the server's, then the command's
    return run_id, parts


def test_a_server_continuing_a_run_another_process_continued_since_keeps_its_events_as_a_new_part(
    serve: Any, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    store = open_store(db)
    server = serve([teamrun.load_team(_ask_then_stamp(tmp_path), store=store)], tokens=frozenset({TOKEN}), store=store)
    run_id, before = _wait_for_answer_cli(server, store, tmp_path, db)
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        approved = client.post(f"/v1/runs/{run_id}/pending/a2", json={"approve": True})
        assert approved.status_code == 200, approved.text
        ended = until_status(client, run_id, "done")
        wait_until(lambda: _parts(db, run_id) != before, "the server keeps the events of its continuation")
        stream = client.get(f"/v1/runs/{run_id}/events").text
    after = _parts(db, run_id)
    again = serve([teamrun.load_team(_ask_then_stamp(tmp_path), store=store)], tokens=frozenset({TOKEN}), store=store)
    with httpx.Client(base_url=again.url, headers=AUTH, timeout=120) as client:
        restarted = client.get(f"/v1/runs/{run_id}/events").text

    assert "source" not in ended, ended  # its own continuation: the server holds the run, as the store says it
    assert after[:2] == before, (before, after)  # the server's first part is never rewritten
    events = _events(stream)
    kinds = [kind for _, kind, _ in events]
    assert [i for i, _, _ in events] == list(range(len(events))), kinds
    assert len(events) == sum(count for _, count in after), (kinds, after)  # every part, each once
    assert _run_ends(events) == ["waiting", "waiting", "done"], kinds  # in the order they happened
    assert kinds.count("run_continued") == 2, kinds
    assert _result(stream)["status"] == "done"
    assert _events(restarted) == events


def test_the_server_says_what_the_store_says_of_a_run_continued_elsewhere_that_waits_again(
    serve: Any, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    store = open_store(db)
    server = serve([teamrun.load_team(_ask_then_stamp(tmp_path), store=store)], tokens=frozenset({TOKEN}), store=store)
    run_id, parts = _wait_for_answer_cli(server, store, tmp_path, db)
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        record = client.get(f"/v1/runs/{run_id}").json()
        listed = {row["id"]: row for row in client.get("/v1/runs").json()["data"]}[run_id]
        stream = client.get(f"/v1/runs/{run_id}/events").text
    shown = json.loads(_cli_json("runs", "show", run_id, "--store", str(db), "--json"))

    assert record["status"] == "waiting" and record["source"] == "store", record  # not the server's old record
    assert record["usage"]["total_tokens"] == shown["usage"]["total_tokens"], (record, shown)
    assert listed["source"] == "store" and listed["tokens"] == shown["usage"]["total_tokens"], listed
    events = _events(stream)
    assert len(events) == sum(count for _, count in parts), [kind for _, kind, _ in events]
    assert _run_ends(events) == ["waiting", "waiting"], events  # the server's stretch, then the command's
    assert _result(stream)["source"] == "store"


def _cli_json(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(args)) == 0
    return out.getvalue()


def test_the_events_of_a_held_run_follow_its_continuation_in_another_process_to_its_end(
    serve: Any, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    db = tmp_path / "runs.db"
    store = open_store(db)
    asking = ScriptedModel({"lead": [tool_call("ask_region", question="Which region?")]})
    team = teamrun.load_team(_ask_then_stamp(tmp_path, "openai/lead"), chat_model=asking, store=store)
    server = serve([team], tokens=frozenset({TOKEN}), store=store)
    gate, asked = threading.Event(), threading.Event()

    def answer_when_let(request: dict[str, Any]) -> Reply:
        asked.set()
        gate.wait(60)
        return text("deployed to us-east-1")

    fake_openai.handler("*", answer_when_let)  # the command's model call, after the one it replays
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "asker", "input": "deploy"}).json()["id"]
        until_status(client, run_id, "waiting")
        wait_until(lambda: run_id in store.run_events.kept([run_id]), "the server keeps the run's events")
        served = _events(client.get(f"/v1/runs/{run_id}/events").text)
        command = threading.Thread(target=_answer, args=(run_id, "q1", "us-east-1", "--store", str(db)))
        command.start()
        try:
            assert asked.wait(60), "the command calls the model"
            until_status(client, run_id, "running")
            with client.stream("GET", f"/v1/runs/{run_id}/events") as response:
                chunks = response.iter_text()
                stream = next(chunks)  # the stream started while the command runs
                gate.set()
                stream += "".join(chunks)
        finally:
            gate.set()
            command.join(60)

    events = _events(stream)
    kinds = [kind for _, kind, _ in events]
    assert events[: len(served)] == served, kinds
    assert kinds[len(served)] == "run_continued" and kinds[-1] == "run_end", kinds  # the command's part followed
    assert [i for i, _, _ in events] == list(range(len(events))), kinds
    assert _result(stream)["status"] == "done", _result(stream)


def test_a_held_runs_record_and_stream_result_say_its_events_are_kept_as_the_list_does(
    serve: Any, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    store = open_store(db)
    server = serve([teamrun.load_team(_ask_then_stamp(tmp_path), store=store)], tokens=frozenset({TOKEN}), store=store)
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "asker", "input": "deploy"}).json()["id"]
        record = until_status(client, run_id, "waiting")
        streamed = _result(client.get(f"/v1/runs/{run_id}/events").text)
        listed = {row["id"]: row for row in client.get("/v1/runs").json()["data"]}[run_id]

    assert listed["events"] is True, listed
    assert record.get("events") is True, record
    assert streamed.get("events") is True, streamed
