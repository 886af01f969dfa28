"""teamrun's pytest plugin: fixtures, the strict scripted model, assertions and the network guard."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from teamrun.engine.result import RunResult
from teamrun.llm.cassette import RecordingModel
from teamrun.testing import (
    ScriptedModel,
    assert_delegated_to,
    assert_final_text_matches,
    assert_tools_called,
    assert_within_budget,
    delegate,
    tool_call,
)

RunTeam = Callable[..., RunResult]
MakeModel = Callable[..., ScriptedModel]

TEAM = """\
version: 1
name: plugin-team
supervisor: lead
agents:
  lead:
    model: openai/gpt-4o-mini
    delegates_to: [researcher, writer]
  researcher:
    description: Finds facts.
    tools: [lookup]
  writer:
    description: Writes prose.
tools:
  lookup:
    command: [echo, "facts about {{ topic }}"]
    parameters: {topic: {type: string}}
"""

DELEGATE_TASK_TEAM = TEAM.replace(
    "delegates_to: [researcher, writer]", "delegates_to: [researcher, writer]\n    delegation: {tool: delegate_task}"
)


def _script() -> dict[str, list[object]]:
    return {
        "lead": [delegate("researcher", "writer", task="Rust vs Go"), "Rust and Go compared."],
        "researcher": [tool_call("lookup", topic="rust"), "Rust is fast."],
        "writer": ["A nice paragraph."],
    }


def test_scripted_run_and_assertions(run_team: RunTeam, scripted_model: MakeModel) -> None:
    model = scripted_model(_script())

    result = run_team(TEAM, "Compare Rust and Go", chat_model=model)

    assert result.status == "done"
    assert_delegated_to(result, ["writer", "researcher"], status="ok")
    assert_tools_called(result, ["lookup"])
    assert_tools_called(result, {"researcher": ["lookup"]}, exactly=True)
    assert_within_budget(result, max_tokens=5_000, max_delegations=2, max_requests=5)
    assert_final_text_matches(result, r"^Rust and Go compared\.$")
    assert model.calls_of("lead/researcher")[1].tool_results == ["facts about rust\n"]
    assert model.calls_of("writer")[0].task == "Rust vs Go"


def test_delegate_step_uses_the_delegate_task_tool(run_team: RunTeam, scripted_model: MakeModel) -> None:
    model = scripted_model(_script())

    result = run_team(DELEGATE_TASK_TEAM, "Compare Rust and Go", chat_model=model)

    assert_delegated_to(result, ["researcher", "writer"])
    assert model.calls_of("lead")[0].tool_names == ["delegate_task"]


def test_offline_run_by_default(run_team: RunTeam) -> None:
    result = run_team(TEAM, "Compare Rust and Go")

    assert_final_text_matches(result, r"^\[offline simulation\]")
    assert_delegated_to(result, ["researcher", "writer"], status="ok")
    assert_tools_called(result, ["lookup"])


def test_assertion_messages_say_what_happened(run_team: RunTeam, scripted_model: MakeModel) -> None:
    result: RunResult = run_team(TEAM, "Compare", chat_model=scripted_model(_script()))

    with pytest.raises(AssertionError, match=r"expected delegations to \['writer'\], got \['(researcher|writer)'"):
        assert_delegated_to(result, ["writer"])
    with pytest.raises(AssertionError, match=r"in this order"):
        assert_delegated_to(
            result,
            ["writer", "researcher"] if result.delegated_to[0] == "researcher" else ["researcher", "writer"],
            ordered=True,
        )
    with pytest.raises(AssertionError, match=r"not called: \['grep'\].*\n  tool calls by agent: lead/researcher"):
        assert_tools_called(result, ["lookup", "grep"])
    with pytest.raises(AssertionError, match=r"agent writer: not called: \['lookup'\]"):
        assert_tools_called(result, {"writer": ["lookup"]})
    with pytest.raises(AssertionError, match=r"over budget: tokens: \d+ > 10; delegations: 2 > 1"):
        assert_within_budget(result, max_tokens=10, max_delegations=1)
    with pytest.raises(AssertionError, match=r"final text does not match 'Python'"):
        assert_final_text_matches(result, "Python")
    stray = RunResult(run_id="nobody-watched", team="t", status="done", final_text="")
    with pytest.raises(AssertionError, match=r"no events were recorded for run nobody-watched"):
        assert_tools_called(stray, ["lookup"])


def test_plugin_is_registered_once(pytestconfig: pytest.Config) -> None:
    import teamrun.testing.plugin as plugin

    names = [name for name, p in pytestconfig.pluginmanager.list_name_plugin() if p is plugin]
    assert names == ["teamrun.testing.plugin"]


# -- behaviour that fails a test: checked in small inner pytest sessions -------------------------

_INNER_ARGS = ("-p", "teamrun.testing.plugin", "-p", "no:cacheprovider", "-p", "no:asyncio")


def _inner(pytester: pytest.Pytester, test_source: str, *args: str) -> pytest.RunResult:
    pytester.makefile(".yaml", team=TEAM)
    pytester.makepyfile(test_inner=textwrap.dedent(test_source))
    return pytester.runpytest_inprocess(*_INNER_ARGS, *args)


def test_unused_script_steps_fail_at_teardown(pytester: pytest.Pytester) -> None:
    result = _inner(
        pytester,
        """
        from teamrun.testing import delegate

        def test_leftover(run_team, scripted_model):
            model = scripted_model({"lead": ["direct answer", "never used"]})
            run_team("team.yaml", "hi", chat_model=model)
        """,
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*lead: 1 scripted step(s) never used*"])


def test_a_call_past_the_script_fails_the_test(pytester: pytest.Pytester) -> None:
    result = _inner(
        pytester,
        """
        from teamrun.testing import delegate

        def test_too_many_calls(run_team, scripted_model):
            model = scripted_model({"lead": [delegate("writer", task="write"), "done"]})
            result = run_team("team.yaml", "hi", chat_model=model)
            assert result.delegations[0].status == "error"  # the run itself copes...
        """,
    )
    result.assert_outcomes(passed=1, errors=1)  # ...but the test does not pass
    result.stdout.fnmatch_lines(["*unexpected model call: agent lead/writer (turn 1) has no script*"])


def test_network_guard_blocks_real_hosts_unless_marked(pytester: pytest.Pytester) -> None:
    result = _inner(
        pytester,
        """
        import socket
        import pytest
        from teamrun.testing import NetworkBlockedError

        def test_blocked():
            with pytest.raises(NetworkBlockedError, match="must not reach the network"):
                socket.create_connection(("192.0.2.1", 443), timeout=0.2)

        def test_swallowed():
            try:
                socket.create_connection(("192.0.2.1", 443), timeout=0.2)
            except Exception:
                pass  # an HTTP client retrying quietly still fails the test

        def test_loopback_is_fine():
            server = socket.socket()
            server.bind(("127.0.0.1", 0))
            server.listen()
            socket.create_connection(server.getsockname(), timeout=1).close()
            server.close()

        @pytest.mark.teamrun_allow_network
        def test_allowed(_teamrun_network_guard):
            assert _teamrun_network_guard is None
        """,
    )
    result.assert_outcomes(passed=4, errors=2)  # an attempt fails the test even when the error was caught
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_blocked*",
            "*test tried to reach the network*",
            "*ERROR at teardown of test_swallowed*",
        ]
    )


def test_cassette_fixture_replays_a_recording(pytester: pytest.Pytester, tmp_path: Path) -> None:
    cassette = pytester.path / "cassettes" / "test_replayed.jsonl"
    team = pytester.makefile(".yaml", team=TEAM)
    recorder = RecordingModel(ScriptedModel(_script()), cassette)
    from teamrun.engine.team import load_team

    recorded = load_team(team, chat_model=recorder).run_sync("Compare Rust and Go")
    assert recorded.status == "done"

    pytester.makepyfile(
        test_inner=textwrap.dedent(f"""
        import pytest
        from teamrun.testing import assert_delegated_to, assert_final_text_matches

        def test_replayed(run_team, teamrun_cassette):
            result = run_team("team.yaml", "Compare Rust and Go", chat_model=teamrun_cassette)
            assert_delegated_to(result, ["researcher", "writer"], status="ok")
            assert result.final_text == {recorded.final_text!r}

        @pytest.mark.teamrun_cassette("cassettes/test_replayed.jsonl")
        def test_changed_input(run_team, teamrun_cassette):
            result = run_team("team.yaml", "Compare Rust and Zig", chat_model=teamrun_cassette)
            assert result.status == "failed"
            assert "agent lead (turn 1)" in result.error

        def test_not_recorded_yet(teamrun_cassette):
            pass
        """)
    )
    result = pytester.runpytest_inprocess(*_INNER_ARGS)
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        ["*test_not_recorded_yet.jsonl does not exist; record it with: pytest --teamrun-record*"]
    )
