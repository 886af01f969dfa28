"""Done-when of issue 25: a fan-out whose three workers each ask a person suspends, and three answers given
from three other processes finish it, paying no finished call twice (counted at the local fake server).

On SQLite and on PostgreSQL (the ``store_url`` fixture). The uninterrupted run answers the same questions in
process (a desk that answers at once), for the request count to compare with.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.tools.people import Answer, AskSite, PendingItem
from tests.fakeserver import FakeOpenAI, Reply, text, tool_calls

ANSWERS = {"w1": "eu-west-1", "w2": "approved", "w3": '{"seats": 3}'}
"""The answer each worker's question gets (w3's is JSON, checked against its answer_schema)."""


def write_team(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "team.yaml"
    path.write_text(
        f"""version: 1
name: ask-fan
supervisor: lead
defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0}}
tools:
  ask_ops: {{person: {{choices: [eu-west-1, us-east-1]}}}}
  ask_legal: {{person: {{choices: [approved, changes-needed]}}}}
  ask_owner:
    person: {{answer_schema: {{type: object, properties: {{seats: {{type: integer, minimum: 1}}}}, required: [seats]}}}}
agents:
  lead: {{model: openai/lead, delegates_to: [w1, w2, w3]}}
  w1: {{model: openai/w1, description: Picks the region., tools: [ask_ops]}}
  w2: {{model: openai/w2, description: Gets sign-off., tools: [ask_legal]}}
  w3: {{model: openai/w3, description: Counts seats., tools: [ask_owner]}}
""",
        encoding="utf-8",
    )
    return path


def serve(server: FakeOpenAI) -> None:
    """Stateless handlers: a reply depends only on the request, so a resumed run gets the same answers."""
    tools = {"w1": "ask_ops", "w2": "ask_legal", "w3": "ask_owner"}

    def lead(request: dict[str, Any]) -> Reply:
        results = [m for m in request["messages"] if m["role"] == "tool"]
        if not results:
            return tool_calls(*((f"ask_{w}", {"task": f"task of {w}"}) for w in tools))
        return text("final: " + "; ".join(sorted(json.loads(m["content"])["response"] for m in results)))

    def worker(name: str) -> Any:
        def answer(request: dict[str, Any]) -> Reply:
            results = [m for m in request["messages"] if m["role"] == "tool"]
            if not results:
                return tool_calls((tools[name], {"question": f"what does {name} need?"}))
            return text(f"{name} got {results[-1]['content']}")

        return answer

    server.handler("lead", lead)
    for name in tools:
        server.handler(name, worker(name))


def teamrun_cmd(*args: str) -> list[str]:
    return [sys.executable, "-c", "from teamrun.cli import main; main()", *args]


def env() -> dict[str, str]:
    environ = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TEAMRUN_TEST_KEY": "sk-test-people"}
    environ.pop("TEAMRUN_STORE", None)
    for name in ("NO_PROXY", "no_proxy"):
        environ[name] = "127.0.0.1,localhost"
    return environ


class AnswersAtOnce:
    """A desk that answers every question at once, as a person at the terminal would."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def ask(self, item: PendingItem, site: AskSite) -> Answer:
        self.asked.append(site.agent)
        value = self.answers[site.agent]
        return Answer(json.loads(value) if item.answer_schema else value, "test")


def test_three_questions_suspend_the_run_and_three_answers_from_other_processes_finish_it(
    tmp_path: Path,
    store_url: str,
    monkeypatch: pytest.MonkeyPatch,
    fake_openai: FakeOpenAI,
) -> None:
    monkeypatch.setenv("TEAMRUN_TEST_KEY", "sk-test-people")
    server = fake_openai
    serve(server)
    team_file = write_team(tmp_path, server.url)

    team = teamrun.load_team(team_file)
    desk = AnswersAtOnce(ANSWERS)
    team.desk = desk
    whole = team.run_sync("go")
    assert whole.status == "done", whole.error
    assert sorted(desk.asked) == ["w1", "w2", "w3"]
    uninterrupted = len(server.requests())
    assert uninterrupted == 8  # the lead twice, each worker twice
    server.log.clear()

    first = subprocess.run(
        teamrun_cmd("execute", str(team_file), "-i", "go", "--store", store_url, "--json", "--progress", "none"),
        capture_output=True,
        text=True,
        env=env(),
        timeout=300,
    )
    assert first.returncode == 4, first.stderr
    suspended = json.loads(first.stdout)
    assert suspended["status"] == "waiting"
    run_id = suspended["run_id"]
    assert f"teamrun answer {run_id} ITEM VALUE --store" in first.stderr

    listed = subprocess.run(
        teamrun_cmd("runs", "list", "--store", store_url, "--json"),
        capture_output=True,
        text=True,
        env=env(),
        timeout=120,
    )
    [run] = json.loads(listed.stdout)
    assert run["status"] == "waiting"
    items = {item["agent"]: item for item in run["pending"]}
    assert {agent: item["question"] for agent, item in items.items()} == {
        w: f"what does {w} need?" for w in ("w1", "w2", "w3")
    }
    assert items["w1"]["choices"] == ["eu-west-1", "us-east-1"]

    codes = []
    for worker in ("w2", "w3", "w1"):  # one by one, each from its own process
        done = subprocess.run(
            teamrun_cmd(
                "answer",
                run_id,
                items[worker]["item"],
                ANSWERS[worker],
                "--store",
                store_url,
                "--json",
                "--progress",
                "none",
                "--by",
                f"person-{worker}",
            ),
            capture_output=True,
            text=True,
            env=env(),
            timeout=300,
        )
        codes.append(done.returncode)
        assert "Traceback" not in done.stderr
    assert codes == [4, 4, 0], done.stderr
    result = json.loads(done.stdout)

    assert result["status"] == "done"
    assert result["final_text"] == whole.final_text
    assert len(server.requests()) == uninterrupted  # no finished call was paid twice
    assert all(r.status == 200 for r in server.requests())
    bodies = [json.dumps([r.model, r.request["messages"]], sort_keys=True) for r in server.requests()]
    assert len(set(bodies)) == len(bodies)  # and none was asked twice

    shown = subprocess.run(
        teamrun_cmd("runs", "show", run_id, "--store", store_url, "--json"),
        capture_output=True,
        text=True,
        env=env(),
        timeout=120,
    )
    view = json.loads(shown.stdout)
    assert view["status"] == "done" and view["usage"]["requests"] == uninterrupted
