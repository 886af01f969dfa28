"""Cancelling a served run that waits for people (``POST /v1/runs/{id}/cancel``, the page's Cancel): the store
ends it (the run ``cancelled``, its pending items ``expired`` with no answer), before and after a restart; an
answer afterwards (HTTP or ``teamrun answer``) is refused saying the run was cancelled. Also: an answer that
misses a ``pattern`` is refused naming the pattern as written in the team file (HTTP and the page)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect

import teamrun
from teamrun.cli import main
from teamrun.store import open_store
from teamrun.store.journal import StoreJournal
from teamrun.store.pending import PendingRepository
from teamrun.testing.scripted import ScriptedModel, tool_call
from tests.serve.conftest import TOKEN, until_status
from tests.serve.test_web_pending import ask_team, said
from tests.serve.test_workbench_teams import chromium

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _team(tmp_path: Path, store: Any) -> teamrun.Team:
    model = ScriptedModel({"lead": [tool_call("ask_region", question="Which region?"), said]})
    return teamrun.load_team(ask_team(tmp_path), chat_model=model, store=store)


def _answer_cli(run_id: str, item: str, store: Path) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["answer", run_id, item, "us-east-1", "--store", str(store)])
    return code, err.getvalue()


def _check_cancelled(client: httpx.Client, run_id: str, item: str, store: Path) -> None:
    """What a user sees of a run cancelled while it waited: HTTP, `teamrun answer`, the store."""
    assert client.get(f"/v1/runs/{run_id}").json()["status"] == "cancelled"
    assert client.get("/v1/pending").json()["data"] == []
    refused = client.post(f"/v1/runs/{run_id}/pending/{item}", json={"answer": "us-east-1"})
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "run_cancelled"
    assert f"run {run_id} was cancelled at " in error["message"] and "while it waited for people" in error["message"]
    code, err = _answer_cli(run_id, item, store)
    assert code == 2 and "Traceback" not in err, err
    assert f"error: run {run_id} was cancelled at " in err and f"item {item} takes no answer any more" in err
    backend = open_store(store)
    run = StoreJournal(backend).get_run(run_id)
    assert run is not None and run.status == "cancelled"
    (ended,) = PendingRepository(backend).items(run_id)
    assert (ended.status, ended.answer, ended.answered_by) == ("expired", None, "cancelled")


def _waiting(client: httpx.Client) -> tuple[str, dict[str, Any]]:
    """A new run of the asker team, once it waits; its one pending item."""
    run_id = client.post("/v1/runs", json={"team": "asker", "input": "deploy"}).json()["id"]
    until_status(client, run_id, "waiting")
    (item,) = client.get("/v1/pending").json()["data"]
    return run_id, item


def test_cancel_ends_a_waiting_run_and_its_questions(serve: Any, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = open_store(db)
    server = serve([_team(tmp_path, store)], tokens=frozenset({TOKEN}), store=store)
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        run_id, item = _waiting(client)

        cancelled = client.post(f"/v1/runs/{run_id}/cancel")
        assert cancelled.status_code == 202, cancelled.text
        assert cancelled.json()["status"] == "cancelled"
        assert "waiting for people" in cancelled.json()["cancel_reason"]
        assert cancelled.json()["result"]["stopped_by"] is None, cancelled.json()["result"]  # not "waiting for..."
        _check_cancelled(client, run_id, item["id"], db)

        again = client.post(f"/v1/runs/{run_id}/cancel")  # over now: nothing to cancel, held or not
        assert again.status_code == 409 and again.json()["error"]["code"] == "run_not_running", again.text
        assert "is not running (it is cancelled)" in again.json()["error"]["message"]

    # `teamrun resume` of it goes on with the question unanswered: the agent hears nobody answered
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["resume", run_id, "--store", str(db), "--yes", "--json", "--progress", "none"])
    assert code == 0 and "Traceback" not in err.getvalue() and "TypeError" not in err.getvalue(), err.getvalue()
    resumed = json.loads(out.getvalue())
    assert resumed["status"] == "done", resumed
    assert "Nobody answered: the question was withdrawn (its run was cancelled)" in resumed["final_text"], resumed


def test_cancel_ends_a_run_that_waited_through_a_restart(serve: Any, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    first = serve([_team(tmp_path, open_store(db))], tokens=frozenset({TOKEN}), store=open_store(db))
    with httpx.Client(base_url=first.url, headers=AUTH, timeout=120) as client:
        run_id, item = _waiting(client)
    first.stop()

    store = open_store(db)
    second = serve([_team(tmp_path, store)], tokens=frozenset({TOKEN}), store=store)
    with httpx.Client(base_url=second.url, headers=AUTH, timeout=120) as client:
        assert client.get(f"/v1/runs/{run_id}").json()["status"] == "waiting"  # read from the store
        cancelled = client.post(f"/v1/runs/{run_id}/cancel")
        assert cancelled.status_code == 202, cancelled.text
        assert cancelled.json()["status"] == "cancelled" and cancelled.json()["source"] == "store"
        _check_cancelled(client, run_id, item["id"], db)


def test_the_page_cancels_a_waiting_run(serve: Any, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = open_store(db)
    server = serve([_team(tmp_path, store)], tokens=frozenset({TOKEN}), store=store)
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "asker", "input": "deploy"}).json()["id"]
        until_status(client, run_id, "waiting")
        with chromium() as browser:
            page = browser.new_page()
            page.goto(server.url + f"/#run={run_id}")
            page.fill("#token", TOKEN)
            page.dispatch_event("#token", "input")
            expect(page.locator(f'#pending-list li[data-run="{run_id}"]')).to_have_count(1, timeout=30_000)
            page.locator(f'#pending-list li[data-run="{run_id}"] button.pending-open').click()
            expect(page.locator("#status")).to_have_text("waiting", timeout=30_000)
            expect(page.locator("#cancel")).to_be_visible()
            page.locator("#cancel").click()
            expect(page.locator("#status")).to_have_text("cancelled", timeout=30_000)
            expect(page.locator("#cancel")).to_be_hidden()
            expect(page.locator("#pending-list li")).to_have_count(0, timeout=30_000)
            expect(page.locator("#error")).to_have_text("")
        assert client.get(f"/v1/runs/{run_id}").json()["status"] == "cancelled"


def test_a_missed_pattern_is_named_as_written_over_http_and_on_the_page(serve: Any, tmp_path: Path) -> None:
    path = tmp_path / "code.yaml"
    path.write_text(
        """\
version: 1
name: coder
supervisor: lead
agents:
  lead:
    description: Asks for a code.
    tools: [ask_code]
tools:
  ask_code:
    person: {answer_schema: {type: string, pattern: '^\\d{3}$'}}
""",
        encoding="utf-8",
    )
    store = open_store(tmp_path / "runs.db")
    model = ScriptedModel({"lead": [tool_call("ask_code", question="Which code?"), said]})
    server = serve([teamrun.load_team(path, chat_model=model, store=store)], tokens=frozenset({TOKEN}), store=store)
    said_right = 'the answer does not fit the question\'s answer_schema: "abc" does not match the pattern ^\\d{3}$'
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "coder", "input": "go"}).json()["id"]
        until_status(client, run_id, "waiting")
        (item,) = client.get("/v1/pending").json()["data"]
        refused = client.post(f"/v1/runs/{run_id}/pending/{item['id']}", json={"answer": "abc"})
        assert refused.status_code == 422 and refused.json()["error"]["message"] == said_right, refused.text
        with chromium() as browser:
            page = browser.new_page()
            page.goto(server.url + "/")
            page.fill("#token", TOKEN)
            page.dispatch_event("#token", "input")
            shown = page.locator(f'#pending-list li[data-run="{run_id}"]')
            expect(shown).to_have_count(1, timeout=30_000)
            shown.locator("input.pending-value").fill("abc")
            shown.locator("button.pending-send").click()
            expect(shown.locator(".pending-problem")).to_have_text(said_right, timeout=30_000)


def test_cancel_of_a_run_another_server_process_runs_says_to_cancel_it_there(serve: Any, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = open_store(db)
    store.runs.start("run-elsewhere", "asker", "deploy")  # running, with a live heartbeat, in no process of this one
    server = serve([_team(tmp_path, store)], tokens=frozenset({TOKEN}), store=store)
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        refused = client.post("/v1/runs/run-elsewhere/cancel")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "run_not_running", refused.text
    said = refused.json()["error"]["message"]
    assert "runs in another process on the same store" in said and "cancel it there" in said, said
