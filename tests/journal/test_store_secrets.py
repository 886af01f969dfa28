"""Issue 22, item 16: values that traces mask never reach the store; a resume reads them back from the environment.

A team file interpolates ``${SERVICE_TOKEN}`` into its instructions. The (fake) model calls a tool with the
token, and its answer repeats it. The store (SQLite or PostgreSQL) holds ``***${SERVICE_TOKEN}***`` in the
journal, the run record and the thread, never the value. The run is then cut after the model's tool call;
the resume replays that call with the token put back from the environment, so the tool gets the real token
and the answer is the same.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tests.fakeserver import FakeOpenAI, Reply, text, tool_calls

TOKEN = "tok-9f8e7d6c5b4a-secret"
MASKED = "***${SERVICE_TOKEN}***"

TEAM = """\
version: 1
name: keeper
supervisor: lead
defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0}}
tools:
  check: {{python: 'checks:check'}}
agents:
  lead:
    model: openai/lead
    instructions: "Your service token is ${{SERVICE_TOKEN}}."
    tools: [check]
"""

CHECKS = """\
import os


def check(token: str) -> str:
    "Check a service token."
    return "valid" if token == os.environ["SERVICE_TOKEN"] else "INVALID"
"""


def _serve(server: FakeOpenAI) -> None:
    def lead(request: dict[str, Any]) -> Reply:
        system = str(request["messages"][0]["content"])
        token = system.split("Your service token is ", 1)[1].split(".")[0]
        results = [m for m in request["messages"] if m["role"] == "tool"]
        if not results:
            return tool_calls(("check", {"token": token}))
        return text(f"the token {token} is {results[-1]['content']}")

    server.handler("lead", lead)


def _env() -> dict[str, str]:
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "TEAMRUN_TEST_KEY": "sk-test-journal",
        "SERVICE_TOKEN": TOKEN,
    }
    env.pop("TEAMRUN_STORE", None)
    for name in ("NO_PROXY", "no_proxy"):
        env[name] = "127.0.0.1,localhost"
    return env


def _teamrun(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from teamrun.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=cwd,
        timeout=300,
    )


def _engine(store_url: str) -> sa.Engine:
    return sa.create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))


def _everything(store_url: str) -> str:
    """Every row of every table of the store, as text."""
    engine = _engine(store_url)
    try:
        with engine.connect() as conn:
            tables = sa.MetaData()
            tables.reflect(conn)
            return "\n".join(str(row) for table in tables.sorted_tables for row in conn.execute(sa.select(table)))
    finally:
        engine.dispose()


def test_secrets_are_masked_in_the_store_and_read_back_on_resume(
    tmp_path: Path, store_url: str, fake_openai: FakeOpenAI
) -> None:
    (tmp_path / "checks.py").write_text(CHECKS, encoding="utf-8")
    server = fake_openai
    _serve(server)
    team = tmp_path / "team.yaml"
    team.write_text(TEAM.format(url=server.url), encoding="utf-8")

    first = _teamrun(
        tmp_path, "execute", str(team), "-i", "check my token", "--store", store_url, "--json", "--progress", "none"
    )
    assert first.returncode == 0, first.stderr
    answer = json.loads(first.stdout)
    assert answer["final_text"] == f"the token {TOKEN} is valid"

    stored = _everything(store_url)
    assert TOKEN not in stored
    assert stored.count(MASKED) >= 3  # the tool call and the answer in the journal, the answer of the run

    # cut the run after the model asked for the tool: its result and the final answer are not journaled
    engine = _engine(store_url)
    with engine.begin() as conn:
        conn.execute(
            sa.text("DELETE FROM journal WHERE run_id = :id AND NOT (kind = 'model' AND call_key = '1.0')"),
            {"id": answer["run_id"]},
        )
        conn.execute(sa.text("UPDATE runs SET status = 'cancelled' WHERE id = :id"), {"id": answer["run_id"]})
    engine.dispose()
    server.log.clear()

    resumed = _teamrun(tmp_path, "resume", answer["run_id"], "--store", store_url, "--json", "--progress", "none")
    assert resumed.returncode == 0, resumed.stderr
    again = json.loads(resumed.stdout)
    assert again["final_text"] == answer["final_text"]  # the tool got the real token: "valid"
    (request,) = server.requests()  # the tool call was replayed; only the answer was asked for
    assert request.model == "lead"
    assert TOKEN not in _everything(store_url)

    # a thread keeps the masked answer; its next turn sees the token again
    for turn in ("check my token", "and again"):
        done = _teamrun(
            tmp_path, "execute", str(team), "-i", turn, "--store", store_url, "--thread", "t1", "--progress", "none"
        )
        assert done.returncode == 0, done.stderr
    shown = _teamrun(tmp_path, "threads", "show", "t1", "--store", store_url, "--json")
    contents = [m["content"] for m in json.loads(shown.stdout)["messages"]]
    assert f"the token {MASKED} is valid" in contents
    assert TOKEN not in _everything(store_url)
    second_turn = server.requests()[-1].request["messages"]
    assert any(m.get("content") == f"the token {TOKEN} is valid" for m in second_turn)
