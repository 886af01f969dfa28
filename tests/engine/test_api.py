"""The Python API: ``load_team(path).run_sync(...)``, ``await team.run(...)`` and their result."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import teamrun
from tests.fakeserver import FakeOpenAI, hang, text, tool_calls
from tests.waiting import wait_until_async

REPO = Path(__file__).resolve().parents[2]

TWO_WORKERS = """\
    supervisor: lead
    agents:
      lead: {model: openai/lead, delegates_to: [alpha, beta]}
      alpha: {model: openai/alpha, description: Researches alpha.}
      beta: {model: openai/beta, description: Researches beta.}
    """


def _script_two_workers(server: FakeOpenAI) -> None:
    server.script(
        "lead",
        [
            tool_calls(("ask_alpha", {"task": "look at alpha"}), ("ask_beta", {"task": "look at beta"})),
            text("alpha and beta compared"),
        ],
    )
    server.script("alpha", [text("alpha is fast")])
    server.script("beta", [text("beta is small")])


def _check_result(result: Any, server: FakeOpenAI) -> None:
    assert isinstance(result, teamrun.RunResult)
    assert result.status == "done"
    assert result.final_text == "alpha and beta compared"
    assert result.error is None and result.stopped_by is None

    assert set(result.agents) == {"lead", "alpha", "beta"}
    assert result.agents["lead"].invocations == 1
    assert result.agents["alpha"].invocations == 1 and result.agents["beta"].invocations == 1
    assert result.agents["lead"].usage.requests == 2
    for name, spend in result.agents.items():
        assert spend.usage.total_tokens > 0, name
        assert spend.cost == 0.0, name  # "openai/<agent>" is not in LiteLLM's price table: 0.0, never a guess
    assert result.usage.total_tokens == sum(s.usage.total_tokens for s in result.agents.values())

    by_agent = {d.agent: d for d in result.delegations}
    assert set(by_agent) == {"alpha", "beta"}
    assert isinstance(by_agent["alpha"], teamrun.DelegationResult)
    assert by_agent["alpha"].status == "ok" and by_agent["alpha"].response == "alpha is fast"
    assert by_agent["beta"].status == "ok" and by_agent["beta"].response == "beta is small"
    assert by_agent["alpha"].task == "look at alpha"
    # a delegation's usage is the worker's own usage
    assert by_agent["alpha"].usage == result.agents["alpha"].usage

    data = json.loads(json.dumps(result.as_dict()))  # JSON-serialisable, round-trips
    assert data["status"] == "done" and data["final_text"] == "alpha and beta compared"
    assert data["agents"]["alpha"]["invocations"] == 1
    assert data["agents"]["lead"]["usage"]["total_tokens"] > 0
    assert data["usage"]["total_tokens"] == result.usage.total_tokens
    records = {d["agent"]: d for d in data["delegations"]}
    for name in ("alpha", "beta"):
        assert {"agent", "status", "response", "usage", "cost"} <= set(records[name])
        assert records[name]["status"] == "ok"
        assert records[name]["usage"]["total_tokens"] > 0
        assert isinstance(records[name]["cost"], float)
    assert records["beta"]["response"] == "beta is small"
    server.assert_complete()


def test_run_sync_returns_a_full_result(fake_openai: FakeOpenAI, write_team: Any) -> None:
    _script_two_workers(fake_openai)
    team = teamrun.load_team(write_team(TWO_WORKERS))

    result = team.run_sync("compare alpha and beta")

    _check_result(result, fake_openai)
    assert result.duration_s > 0
    first = fake_openai.requests("lead")[0].request
    assert first["messages"][-1] == {"role": "user", "content": "compare alpha and beta"}


def test_await_run_inside_a_running_loop(fake_openai: FakeOpenAI, write_team: Any) -> None:
    _script_two_workers(fake_openai)
    team = teamrun.load_team(write_team(TWO_WORKERS))
    seen: list[str] = []

    async def main() -> Any:
        return await team.run("compare alpha and beta", subscribers=[lambda e: seen.append(e.kind)])

    result = asyncio.run(main())

    _check_result(result, fake_openai)
    assert seen[0] == "run_start" and seen[-1] == "run_end"
    assert seen.count("delegation_start") == 2 and seen.count("agent_start") == 3


def test_one_team_runs_twice_with_separate_results(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.script("solo", [text("first"), text("second")])
    team = teamrun.load_team(
        write_team("""\
        supervisor: solo
        agents:
          solo: {model: openai/solo}
        """)
    )

    one, two = team.run_sync("a"), team.run_sync("b")

    assert (one.final_text, two.final_text) == ("first", "second")
    assert one.run_id != two.run_id
    assert one.agents["solo"].invocations == 1 and two.agents["solo"].invocations == 1
    fake_openai.assert_complete()


def test_priced_models_report_cost_per_agent(fake_openai: FakeOpenAI, write_team: Any) -> None:
    # the fake server answers any model name; gpt-4o-mini is in LiteLLM's bundled price table
    fake_openai.script(
        "gpt-4o-mini",
        [
            tool_calls(("ask_helper", {"task": "help"})),
            text("helped"),
            text("all done"),
        ],
    )
    team = teamrun.load_team(
        write_team("""\
        supervisor: lead
        agents:
          lead: {model: openai/gpt-4o-mini, delegates_to: [helper]}
          helper: {model: openai/gpt-4o-mini, description: Helps.}
        """)
    )

    result = team.run_sync("go")

    assert result.status == "done" and result.final_text == "all done"
    lead, helper = result.agents["lead"], result.agents["helper"]
    assert lead.cost > 0 and helper.cost > 0
    assert result.cost == pytest.approx(lead.cost + helper.cost)
    assert result.delegations[0].cost == pytest.approx(helper.cost)
    data = result.as_dict()
    assert data["cost"] == pytest.approx(result.cost)
    assert data["agents"]["helper"]["cost"] == pytest.approx(helper.cost)
    fake_openai.assert_complete()


async def _cancel_when(ready: Any, cancel: asyncio.Event) -> None:
    await wait_until_async(ready, "quick's delegation ended and slow's call at the provider")
    cancel.set()


CANCEL_TEAM = """\
    supervisor: lead
    agents:
      lead: {model: openai/lead, delegates_to: [quick, slow]}
      quick: {model: openai/quick, description: Answers at once.}
      slow: {model: openai/slow, description: Never answers.}
    """


def _run_and_cancel(server: FakeOpenAI, path: Path) -> tuple[Any, list[Any]]:
    server.script("lead", [tool_calls(("ask_quick", {"task": "q"}), ("ask_slow", {"task": "s"}))])
    server.script("quick", [text("quick answer")])
    server.script("slow", [hang(30)])
    team = teamrun.load_team(path)
    events: list[Any] = []

    async def main() -> Any:
        cancel = asyncio.Event()

        def ready() -> bool:
            ended = {e.data["worker"] for e in events if e.kind == "delegation_end"}
            return "quick" in ended and bool(server.requests("slow"))

        watcher = asyncio.create_task(_cancel_when(ready, cancel))
        result = await team.run("go", subscribers=[events.append], cancel=cancel)
        await watcher
        return result

    return asyncio.run(asyncio.wait_for(main(), 20)), events


def test_cancel_keeps_finished_work(fake_openai: FakeOpenAI, write_team: Any) -> None:
    result, events = _run_and_cancel(fake_openai, write_team(CANCEL_TEAM))

    assert result.status == "cancelled" and result.stopped_by == "cancelled"
    statuses = {d.agent: d.status for d in result.delegations}
    assert statuses == {"quick": "ok", "slow": "cancelled"}
    assert "quick answer" in result.final_text  # partial results are not lost
    json.dumps(result.as_dict())
    assert events[-1].kind == "run_end" and events[-1].data["status"] == "cancelled"


def test_cancelled_agents_end_with_status_cancelled(fake_openai: FakeOpenAI, write_team: Any) -> None:
    _, events = _run_and_cancel(fake_openai, write_team(CANCEL_TEAM))

    ends = {e.agent: e.data["status"] for e in events if e.kind == "agent_end"}
    assert ends == {"quick": "ok", "slow": "cancelled", "lead": "cancelled"}


def test_invalid_file_raises_config_error_with_diagnostics(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "version: 1\nname: t\nsupervisor: lead\nagents:\n"
        "  lead: {delegates_to: [ghost]}\n"
        "  other: {tools: [nosuchtool]}\n",
        encoding="utf-8",
    )

    with pytest.raises(teamrun.ConfigError) as caught:
        teamrun.load_team(bad)

    error = caught.value
    assert isinstance(error, teamrun.UserError)
    assert len(error.diagnostics) >= 2, "every problem is reported, not just the first"
    ghost = next(d for d in error.diagnostics if "ghost" in d.message)
    assert (ghost.line, ghost.column, ghost.severity) == (5, 25, "error")
    assert ghost.file == str(bad)
    assert any("nosuchtool" in d.message for d in error.diagnostics)
    assert f"{bad}:5:25: error:" in str(error)


def test_missing_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(teamrun.UserError):
        teamrun.load_team(tmp_path / "missing.yaml")


def test_importing_teamrun_does_not_import_litellm() -> None:
    code = (
        "import sys, teamrun\n"
        "assert teamrun.__version__\n"
        "_ = teamrun.ConfigError, teamrun.RunResult\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('litellm', 'openai')]\n"
        "print(','.join(sorted(heavy)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"litellm imported by `import teamrun`: {done.stdout.strip()}"


def test_a_failing_subscriber_never_breaks_the_run(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.script("solo", [text("fine")])
    team = teamrun.load_team(
        write_team("""\
        supervisor: solo
        agents:
          solo: {model: openai/solo}
        """)
    )
    calls: list[str] = []

    def broken(event: Any) -> None:
        calls.append(event.kind)
        raise BrokenPipeError("stderr is gone")

    result = team.run_sync("hi", subscribers=[broken])

    assert result.status == "done" and result.final_text == "fine"
    assert calls == ["run_start"]  # dropped after its first failure
