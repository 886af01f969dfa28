"""Issue 25, served with a store: a run that waits for people suspends in the store and survives a restart.

A real `teamrun serve --store` process starts a fan-out whose three workers each ask a question (the
team of tests/people/test_suspend_fan_out.py, against the fake provider); the run ends ``waiting``;
the server is stopped (SIGTERM) and a new one on the same store lists the three items at
``GET /v1/pending``, refuses bad answers in the OpenAI error shape, and takes three good ones over
HTTP, continuing the run through its journal: the provider's request count equals an uninterrupted
run's. On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

import teamrun
from tests.fakeserver import FakeOpenAI
from tests.people.test_suspend_fan_out import ANSWERS, AnswersAtOnce, serve, write_team
from tests.serve.conftest import until_run, until_status
from tests.serve.test_threads import AUTH, served


def test_a_waiting_served_run_survives_a_restart_and_three_http_answers_finish_it(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAI
) -> None:
    monkeypatch.setenv("TEAMRUN_TEST_KEY", "sk-test-people")
    serve(fake_openai)
    team_file = write_team(tmp_path, fake_openai.url)
    team = teamrun.load_team(team_file)
    team.desk = AnswersAtOnce(ANSWERS)
    whole = team.run_sync("go")
    assert whole.status == "done", whole.error
    uninterrupted = len(fake_openai.requests())
    fake_openai.log.clear()

    with (
        served(str(team_file), "--store", store_url) as url,
        httpx.Client(base_url=url, headers=AUTH, timeout=120) as client,
    ):
        run_id = client.post("/v1/runs", json={"team": "ask-fan", "input": "go"}).json()["id"]
        waiting = until_status(client, run_id, "waiting")
        listed = client.get("/v1/pending").json()["data"]
    assert waiting["final_text"] in ("", None)
    assert len(fake_openai.requests()) == 4  # the lead once, each worker once: then all three wait
    assert sorted(item["agent"] for item in listed) == ["w1", "w2", "w3"]

    with (
        served(str(team_file), "--store", store_url) as url,
        httpx.Client(base_url=url, headers=AUTH, timeout=120) as client,
    ):
        assert client.get(f"/v1/runs/{run_id}").json()["status"] == "waiting"  # from the store
        items = {item["agent"]: item for item in client.get("/v1/pending").json()["data"]}
        assert {a: i["question"] for a, i in items.items()} == {w: f"what does {w} need?" for w in ("w1", "w2", "w3")}
        assert items["w1"]["choices"] == ["eu-west-1", "us-east-1"] and items["w1"]["run_id"] == run_id
        assert items["w3"]["answer_schema"]["required"] == ["seats"] and items["w1"]["asked_at"] > 0

        unknown_run = client.post(f"/v1/runs/run_nope/pending/{items['w1']['id']}", json={"answer": "eu-west-1"})
        unknown_item = client.post(f"/v1/runs/{run_id}/pending/q99", json={"answer": "eu-west-1"})
        off_schema = client.post(f"/v1/runs/{run_id}/pending/{items['w3']['id']}", json={"answer": {"seats": 0}})
        off_choices = client.post(f"/v1/runs/{run_id}/pending/{items['w1']['id']}", json={"answer": "mars-1"})
        assert [r.status_code for r in (unknown_run, unknown_item, off_schema, off_choices)] == [404, 404, 422, 422]
        assert unknown_run.json()["error"]["code"] == "run_not_found"
        assert unknown_item.json()["error"]["code"] == "item_not_found"
        assert "answer_schema" in off_schema.json()["error"]["message"]
        assert "one of: eu-west-1, us-east-1" in off_choices.json()["error"]["message"]
        assert len(fake_openai.requests()) == 4  # refused answers continue nothing

        for worker in ("w2", "w3", "w1"):  # one by one: the run continues, then waits again until the last
            value: Any = json.loads(ANSWERS[worker]) if worker == "w3" else ANSWERS[worker]
            said = client.post(
                f"/v1/runs/{run_id}/pending/{items[worker]['id']}", json={"answer": value, "by": f"p-{worker}"}
            )
            assert said.status_code == 200, said.text
            assert said.json()["answered_by"] == f"p-{worker}"
            if worker != "w1":
                until_status(client, run_id, "waiting")
        again = client.post(f"/v1/runs/{run_id}/pending/{items['w2']['id']}", json={"answer": "approved"})
        done = until_status(client, run_id, "done")
        left = client.get("/v1/pending").json()["data"]
    assert again.status_code == 409 and again.json()["error"]["code"] == "item_answered"
    assert "already answered by p-w2" in again.json()["error"]["message"]
    assert done["final_text"] == whole.final_text
    assert left == []
    assert len(fake_openai.requests()) == uninterrupted  # nothing finished was paid twice
    bodies = [json.dumps([r.model, r.request["messages"]], sort_keys=True) for r in fake_openai.requests()]
    assert len(set(bodies)) == len(bodies)


def test_with_a_store_a_tool_approval_waits_in_the_store_and_post_approve_runs_it(serve: Any, tmp_path: Path) -> None:
    from teamrun.store import open_store
    from teamrun.testing.scripted import ScriptedModel, tool_call
    from tests.serve.test_approvals import last_tool_result, stamp_team

    marker = tmp_path / "stamp.txt"
    model = ScriptedModel({"lead": [tool_call("stamp", path=str(marker)), last_tool_result]})
    store = open_store(tmp_path / "runs.db")
    server = serve([teamrun.load_team(stamp_team(tmp_path), chat_model=model, store=store)], store=store)
    with httpx.Client(base_url=server.url, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "stamper", "input": "stamp it"}).json()["id"]
        until_status(client, run_id, "waiting")
        listed = client.get("/v1/runs", params={"status": "waiting"}).json()["data"]
        [item] = client.get("/v1/pending").json()["data"]
        wrong = client.post(f"/v1/runs/{run_id}/pending/{item['id']}", json={"answer": "yes"})
        said = client.post(f"/v1/runs/{run_id}/pending/{item['id']}", json={"approve": True, "note": "go"})
        done = until_status(client, run_id, "done")
        events = client.get(f"/v1/runs/{run_id}/events").text
    assert item["kind"] == "approval" and item["tool"] == "stamp" and item["arguments"] == {"path": str(marker)}
    assert item["run_id"] == run_id and item["team"] == "stamper"
    assert [run["id"] for run in listed] == [run_id]
    assert wrong.status_code == 422 and wrong.json()["error"]["code"] == "invalid_answer"
    assert said.status_code == 200 and said.json()["answer"] == {"approved": True, "note": "go"}
    assert marker.read_text() == "ran"
    assert "stamped" in done["final_text"]
    assert events.index("person_asked") < events.index("run_continued") < events.index("person_answered")


def test_without_a_store_there_are_no_pending_items(serve: Any, tmp_path: Path) -> None:
    from tests.serve.test_approvals import stamp_team

    server = serve([teamrun.load_team(stamp_team(tmp_path))])
    with httpx.Client(base_url=server.url, timeout=120) as client:
        listed = client.get("/v1/pending")
        answered = client.post("/v1/runs/run_x/pending/q1", json={"answer": "yes"})
    assert listed.status_code == answered.status_code == 400
    assert listed.json()["error"]["code"] == "pending_unavailable"
    assert "--store" in listed.json()["error"]["message"]


def test_serve_approval_timeout_outcome_fail_fails_the_run_of_a_server_without_a_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAI
) -> None:
    import sys

    from tests.fakeserver import text, tool_calls

    monkeypatch.setenv("TEAMRUN_TEST_KEY", "sk-test-people")
    marker = tmp_path / "stamp.txt"
    fake_openai.script("lead", [tool_calls(("stamp", {"path": str(marker)})), text("never read")])
    team_file = tmp_path / "stamp.yaml"
    team_file.write_text(
        f"""version: 1
name: stamper
supervisor: lead
defaults: {{api_base: '{fake_openai.url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0}}
agents:
  lead: {{model: openai/lead, tools: [stamp]}}
tools:
  stamp:
    command: [{json.dumps(sys.executable)}, "-c", "print('stamped')", "{{{{ path }}}}"]
    parameters: {{path: {{type: string}}}}
    require_approval: true
""",
        encoding="utf-8",
    )
    args = ("--approval-timeout", "0.3", "--approval-timeout-outcome", "fail")
    with served(str(team_file), *args) as url, httpx.Client(base_url=url, headers=AUTH, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "stamper", "input": "stamp it"}).json()["id"]
        record = until_run(client, run_id, lambda r: r["status"] != "running", "the approval's deadline")
    assert record["status"] == "failed"
    assert record["error"] == "nobody approved the call to tool 'stamp' within 0.3 seconds"
    assert [a["status"] for a in record["approvals"]] == ["denied"]
    assert len(fake_openai.requests()) == 1  # the run stopped: the model was not asked again


def test_two_answers_to_one_item_at_once_one_wins_and_the_other_is_told(serve: Any, tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from teamrun.store import open_store
    from teamrun.testing.scripted import ScriptedModel, tool_call
    from tests.serve.test_approvals import last_tool_result, stamp_team

    marker = tmp_path / "stamp.txt"
    model = ScriptedModel({"lead": [tool_call("stamp", path=str(marker)), last_tool_result]})
    store = open_store(tmp_path / "runs.db")
    server = serve([teamrun.load_team(stamp_team(tmp_path), chat_model=model, store=store)], store=store)
    with httpx.Client(base_url=server.url, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "stamper", "input": "stamp it"}).json()["id"]
        until_status(client, run_id, "waiting")
        [item] = client.get("/v1/pending").json()["data"]
        url = f"/v1/runs/{run_id}/pending/{item['id']}"
        bodies = [{"approve": True, "by": "alice"}, {"approve": False, "by": "bob"}]
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda body: client.post(url, json=body), bodies))
        done = until_status(client, run_id, "done")
    codes = sorted(a.status_code for a in answers)
    assert codes == [200, 409], [a.text for a in answers]
    winner = next(a for a in answers if a.status_code == 200).json()["answered_by"]
    loser = next(a for a in answers if a.status_code == 409).json()["error"]
    assert loser["code"] == "item_answered" and f"already answered by {winner}" in loser["message"]
    assert marker.exists() == (winner == "alice")
    assert done["status"] == "done"


def test_a_waiting_run_answered_with_teamrun_answer_reads_as_done_from_the_server(
    serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAI
) -> None:
    from click.testing import CliRunner

    from teamrun.cli import cli
    from teamrun.store import open_store
    from tests.fakeserver import text, tool_calls

    monkeypatch.setenv("TEAMRUN_TEST_KEY", "sk-test-people")
    fake_openai.script("lead", [tool_calls(("ask_region", {"question": "Which region?"})), text("to eu-west-1")])
    team_file = tmp_path / "ask.yaml"
    team_file.write_text(
        f"""version: 1
name: asker
supervisor: lead
defaults: {{api_base: '{fake_openai.url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0}}
agents:
  lead: {{model: openai/lead, tools: [ask_region]}}
tools:
  ask_region: {{person: {{choices: [eu-west-1, us-east-1]}}}}
""",
        encoding="utf-8",
    )
    path = tmp_path / "runs.db"
    store = open_store(path)
    server = serve([teamrun.load_team(team_file, store=store)], store=store)
    with httpx.Client(base_url=server.url, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": "asker", "input": "deploy"}).json()["id"]
        until_status(client, run_id, "waiting")
        answered = CliRunner().invoke(
            cli, ["answer", run_id, "q1", "eu-west-1", "--store", str(path), "--progress", "none"]
        )
        record = client.get(f"/v1/runs/{run_id}").json()
    assert answered.exit_code == 0, answered.output
    assert record["status"] == "done" and record["final_text"] == "to eu-west-1" and record["source"] == "store"
