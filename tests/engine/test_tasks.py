"""Delegation as managed tasks (issue 17), end to end against the local OpenAI-compatible server.

Task contracts and bounded follow-ups, narrowed tools per task, hooks that see
how a worker ended, and workers whose failure fails the run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import teamrun
from teamrun.llm.caching import RUNNER_CONTEXT_HEADER
from tests.fakeserver import FakeOpenAI, hang, http_error, text, tool_calls

TOOLS = '''\
def read_notes(topic: str) -> str:
    """Read the notes on a topic.

    Args:
        topic: The topic.
    """
    return f"notes on {topic}"


def send_mail(to: str) -> str:
    """Send a mail.

    Args:
        to: The address.
    """
    return f"SENT to {to}"
'''


def _messages(server: FakeOpenAI, model: str, index: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = server.requests(model)[index].request["messages"]
    return messages


def _tool_contents(server: FakeOpenAI, model: str, index: int) -> list[str]:
    return [m["content"] for m in _messages(server, model, index) if m.get("role") == "tool"]


def _user_text(server: FakeOpenAI, model: str, index: int = 0) -> str:
    return "\n".join(m["content"] for m in _messages(server, model, index) if m.get("role") == "user")


# -- 5. worker errors can be fatal -----------------------------------------------------------

FATAL = """\
supervisor: lead
agents:
  lead: {{model: openai/lead, delegates_to: [broken, fine]}}
  broken: {{model: openai/broken, description: Breaks., on_error: {on_error}}}
  fine: {{model: openai/fine, description: Fine.}}
"""


def test_a_worker_with_on_error_fail_run_fails_the_whole_run(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.script("lead", [tool_calls(("ask_broken", {"task": "b"}), ("ask_fine", {"task": "f"}))])
    fake_openai.script("broken", [http_error(400, message="bad request from the provider")])
    fake_openai.handler("fine", lambda request: text("fine result"))
    team = teamrun.load_team(write_team(FATAL.format(on_error="fail_run")))

    result = team.run_sync("go")

    assert result.status == "failed"
    assert result.error is not None and "broken failed and has on_error: fail_run" in result.error
    assert len(fake_openai.requests("lead")) == 1  # the supervisor was not asked to carry on
    assert [d.status for d in result.delegations if d.agent == "broken"] == ["error"]


def test_without_fail_run_the_supervisor_carries_on_after_a_worker_error(
    fake_openai: FakeOpenAI, write_team: Any
) -> None:
    fake_openai.script(
        "lead", [tool_calls(("ask_broken", {"task": "b"}), ("ask_fine", {"task": "f"})), text("carried on")]
    )
    fake_openai.script("broken", [http_error(400, message="bad request from the provider")])
    fake_openai.script("fine", [text("fine result")])
    team = teamrun.load_team(write_team(FATAL.format(on_error="continue")))

    result = team.run_sync("go")

    assert result.status == "done" and result.final_text == "carried on"


# -- 4. hooks see more ---------------------------------------------------------------------------


def test_on_complete_hooks_tell_budget_exhausted_error_and_timeout_apart(
    fake_openai: FakeOpenAI, write_team: Any, tmp_path: Path
) -> None:
    (tmp_path / "task_tools.py").write_text(TOOLS, encoding="utf-8")
    fake_openai.script(
        "lead",
        [
            tool_calls(
                ("ask_spender", {"task": "s"}),
                ("ask_broken", {"task": "b"}),
                ("ask_slow", {"task": "w"}),
                content="delegating three",
            ),
            text("done"),
        ],
    )
    fake_openai.script("spender", [tool_calls(("read_notes", {"topic": "x"})), text("what I have")])
    fake_openai.script("broken", [http_error(400)])
    fake_openai.script("slow", [hang(30)])
    team = teamrun.load_team(
        write_team("""\
        supervisor: lead
        tools:
          read_notes: {python: "task_tools:read_notes"}
        agents:
          lead:
            model: openai/lead
            delegates_to: [spender, broken, slow]
            delegation:
              append_guidelines: "Accept a result only when it names its source."
              hooks:
                on_complete:
                  - result_text: >-
                      {{ agent }}: {{ status }} success={{ success }} finish={{ finish_reason }}
                      tools={{ tool_results | map(attribute='tool') | join(',') }}
                      tokens={{ usage.total_tokens > 0 }}
                on_iteration:
                  - feedback: "You last said: {{ text }}"
          spender: {model: openai/spender, description: S., tools: [read_notes], budget: {max_steps: 1}}
          broken: {model: openai/broken, description: B.}
          slow: {model: openai/slow, description: W., budget: {timeout_s: 0.5}}
        """)
    )

    result = team.run_sync("go")

    assert result.status == "done"
    seen = [json.loads(c)["response"] for c in _tool_contents(fake_openai, "lead", 1)]
    assert seen == [
        "spender: budget_exhausted success=False finish=stop tools=read_notes tokens=True",
        "broken: error success=False finish=None tools= tokens=False",
        "slow: timeout success=False finish=None tools= tokens=False",
    ]
    assert "You last said: delegating three" in _user_text(fake_openai, "lead", 1)
    system = _messages(fake_openai, "lead", 0)[0]["content"]
    assert "## Your workers" in system  # the generated text is kept...
    assert system.rstrip().endswith("Accept a result only when it names its source.")  # ...and added to


# -- 1. task contracts and bounded follow-ups ---------------------------------------------------

FOLLOW_UPS = """\
supervisor: lead
agents:
  lead:
    model: openai/lead
    delegates_to: [writer]
    delegation: {max_follow_ups: 2}
  writer: {model: openai/writer, description: Writes.}
"""


def test_follow_ups_limited_to_two_refuse_the_third(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.script(
        "lead",
        [
            tool_calls(
                ("ask_writer", {"task": "Draft the intro", "task_id": "intro", "expected_output": "Three sentences."})
            ),
            tool_calls(("ask_writer", {"task": "Shorter, please", "follow_up_of": "intro"})),
            tool_calls(("ask_writer", {"task": "Add a date", "follow_up_of": "intro"})),
            tool_calls(("ask_writer", {"task": "One more pass", "follow_up_of": "intro"})),
            text("final intro"),
        ],
    )
    fake_openai.script("writer", [text("draft 1"), text("draft 2"), text("draft 3")])
    team = teamrun.load_team(write_team(FOLLOW_UPS))

    result = team.run_sync("write an intro")

    assert result.status == "done" and result.final_text == "final intro"
    assert len(fake_openai.requests("writer")) == 3  # the first attempt and two follow-ups; the third never ran
    first = json.loads(_tool_contents(fake_openai, "lead", 1)[0])
    assert first == {"task_id": "intro", "agent": "writer", "status": "ok", "response": "draft 1"}
    refused = json.loads(_tool_contents(fake_openai, "lead", 4)[-1])
    assert refused["status"] == "rejected" and refused["task_id"] == "intro"
    assert "already had 2 follow-up(s)" in refused["error"]
    # the worker gets the contract and, on a follow-up, its previous answer
    assert "## Expected output\nThree sentences." in _user_text(fake_openai, "writer", 0)
    follow_up = _user_text(fake_openai, "writer", 1)
    assert follow_up.startswith("Shorter, please") and "Your previous answer:\ndraft 1" in follow_up
    # the supervisor sees the compact ledger each turn, current, without it piling up: after the conversation,
    # never in the (byte-stable) system prompt
    sent = _messages(fake_openai, "lead", 3)
    assert "## Your tasks" not in sent[0]["content"]
    assert sent[-1]["role"] == "user" and sent[-1]["content"].startswith(RUNNER_CONTEXT_HEADER)
    assert "intro | writer | ok | 3 | open" in sent[-1]["content"]
    assert sum("## Your tasks" in str(m.get("content")) for m in _messages(fake_openai, "lead", 3)) == 1
    (task,) = result.tasks
    assert (task.task_id, task.attempts, task.status, task.review) == ("intro", 3, "ok", "accepted")
    assert result.as_dict()["tasks"][0]["review"] == "accepted"


def test_a_follow_up_of_an_unknown_task_is_refused(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.script(
        "lead",
        [
            tool_calls(("ask_writer", {"task": "again", "follow_up_of": "nope"})),
            text("gave up"),
        ],
    )
    team = teamrun.load_team(write_team(FOLLOW_UPS))

    result = team.run_sync("go")

    assert result.status == "done" and fake_openai.requests("writer") == []
    seen = json.loads(_tool_contents(fake_openai, "lead", 1)[0])
    assert seen["status"] == "rejected" and "there is no task 'nope'" in seen["error"]


# -- 2. narrowed tools per task ------------------------------------------------------------------

NARROW = """\
supervisor: lead
tools:
  read_notes: {python: "task_tools:read_notes"}
  send_mail: {python: "task_tools:send_mail"}
agents:
  lead: {model: openai/lead, delegates_to: [assistant]}
  assistant: {model: openai/assistant, description: Assists., tools: [read_notes, send_mail]}
"""


def test_a_narrowed_tool_set_refuses_a_tool_outside_it(
    fake_openai: FakeOpenAI, write_team: Any, tmp_path: Path
) -> None:
    (tmp_path / "task_tools.py").write_text(TOOLS, encoding="utf-8")
    fake_openai.script(
        "lead",
        [
            tool_calls(("ask_assistant", {"task": "summarise the notes", "tools": ["read_notes"]})),
            text("summary"),
        ],
    )
    fake_openai.script(
        "assistant",
        [
            tool_calls(("send_mail", {"to": "boss@example.com"}), ("read_notes", {"topic": "q3"})),
            text("notes summarised"),
        ],
    )
    team = teamrun.load_team(write_team(NARROW))

    result = team.run_sync("go")

    assert result.status == "done"
    offered = [t["function"]["name"] for t in fake_openai.requests("assistant")[0].request["tools"]]
    assert offered == ["read_notes"]
    refused, read = _tool_contents(fake_openai, "assistant", 1)
    assert refused.startswith("Error: the tool 'send_mail' is not allowed for this task")
    assert read == "notes on q3"
    assert "SENT" not in json.dumps([r.request for r in fake_openai.requests()])
    # the lead is offered exactly the worker's declared tools to choose from
    lead_tools = fake_openai.requests("lead")[0].request["tools"][0]["function"]["parameters"]["properties"]
    assert lead_tools["tools"]["items"]["enum"] == ["read_notes", "send_mail"]


def test_a_task_cannot_widen_a_workers_tools(fake_openai: FakeOpenAI, write_team: Any, tmp_path: Path) -> None:
    (tmp_path / "task_tools.py").write_text(TOOLS, encoding="utf-8")
    fake_openai.script(
        "lead",
        [
            tool_calls(("ask_assistant", {"task": "t", "tools": ["read_notes", "delete_everything"]})),
            text("ok then"),
        ],
    )
    team = teamrun.load_team(write_team(NARROW))

    result = team.run_sync("go")

    assert result.status == "done" and fake_openai.requests("assistant") == []
    (seen,) = _tool_contents(fake_openai, "lead", 1)
    assert "assistant cannot be given 'delete_everything'" in seen
    assert "only narrow the worker's own tools (read_notes, send_mail)" in seen


# -- 3. background delegations ---------------------------------------------------------------------

BACKGROUND = """\
supervisor: lead
agents:
  lead:
    model: openai/lead
    delegates_to: [alpha, beta, gamma]
    delegation: {background: true, background_timeout_s: 0.5}
  alpha: {model: openai/alpha, description: A.}
  beta: {model: openai/beta, description: B.}
  gamma: {model: openai/gamma, description: C.}
"""


def test_three_background_workers_one_timing_out(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.script(
        "lead",
        [
            tool_calls(("ask_alpha", {"task": "a"}), ("ask_beta", {"task": "b"}), ("ask_gamma", {"task": "c"})),
            tool_calls(("wait_for", {"handles": ["bg-1", "bg-2", "bg-3"], "timeout_s": 20})),
            text("two results and a timeout"),
        ],
    )
    fake_openai.script("alpha", [text("alpha result", delay=0.1)])
    fake_openai.script("beta", [text("beta result", delay=0.1)])
    fake_openai.script("gamma", [hang(30)])
    team = teamrun.load_team(write_team(BACKGROUND))

    result = team.run_sync("go")

    assert result.status == "done" and result.final_text == "two results and a timeout"
    handles = [json.loads(c) for c in _tool_contents(fake_openai, "lead", 1)]
    assert [(h["handle"], h["agent"], h["status"]) for h in handles] == [
        ("bg-1", "alpha", "running"),
        ("bg-2", "beta", "running"),
        ("bg-3", "gamma", "running"),
    ]
    (waited,) = _tool_contents(fake_openai, "lead", 2)[-1:]
    seen = {v["agent"]: v for v in json.loads(waited)}
    assert seen["alpha"]["status"] == "ok" and seen["alpha"]["response"] == "alpha result"
    assert seen["beta"]["status"] == "ok" and seen["beta"]["response"] == "beta result"
    assert seen["gamma"]["status"] == "timeout"
    assert seen["gamma"]["error"] == "agents.lead.delegation.background_timeout_s (0.5) reached"
    by_agent = {d.agent: d for d in result.delegations}
    assert by_agent["gamma"].timed_out and by_agent["gamma"].status == "budget_exhausted"
    fake_openai.assert_complete()


def test_the_supervisor_cannot_finish_before_background_work_is_announced(
    fake_openai: FakeOpenAI, write_team: Any
) -> None:
    fake_openai.script(
        "lead",
        [
            tool_calls(("ask_alpha", {"task": "a", "task_id": "alpha-job"})),
            text("too early"),
            text("final, with alpha's result"),
        ],
    )
    fake_openai.script("alpha", [text("alpha result", delay=0.3)])
    team = teamrun.load_team(write_team(BACKGROUND.replace("background_timeout_s: 0.5", "background_timeout_s: 20")))

    result = team.run_sync("go")

    assert result.status == "done" and result.final_text == "final, with alpha's result"
    *_, announced, context = _messages(fake_openai, "lead", 2)
    assert context["content"].startswith(RUNNER_CONTEXT_HEADER)  # the task ledger, after the conversation
    assert announced["role"] == "user" and announced["content"].startswith("## Background results")
    (view,) = json.loads(announced["content"].split("\n", 1)[1])
    assert view == {
        "handle": "bg-1",
        "task_id": "alpha-job",
        "agent": "alpha",
        "status": "ok",
        "response": "alpha result",
    }
    assert [(t.task_id, t.review) for t in result.tasks] == [("alpha-job", "accepted")]


def test_cancel_task_reaches_a_background_worker(fake_openai: FakeOpenAI, write_team: Any) -> None:
    fake_openai.script(
        "lead",
        [
            tool_calls(("ask_gamma", {"task": "slow work"})),
            tool_calls(("cancel_task", {"handle": "bg-1"}), delay=0.3),  # the worker is waiting on its model by then
            text("cancelled it"),
        ],
    )
    fake_openai.script("gamma", [hang(30)])
    team = teamrun.load_team(write_team(BACKGROUND.replace("background_timeout_s: 0.5", "background_timeout_s: 60")))
    events: list[Any] = []

    result = team.run_sync("go", subscribers=[events.append])

    assert result.status == "done" and result.final_text == "cancelled it"
    assert json.loads(_tool_contents(fake_openai, "lead", 2)[-1])["status"] == "cancelled"
    assert [(d.agent, d.status) for d in result.delegations] == [("gamma", "cancelled")]
    ends = [e.data["status"] for e in events if e.kind == "agent_end" and e.agent_path[-1] == "gamma"]
    assert ends == ["cancelled"]  # the worker itself was stopped, mid model call


def test_background_tools_clash_with_a_team_tool_of_the_same_name(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from teamrun.cli.app import cli

    team = tmp_path / "team.yaml"
    team.write_text(
        """\
version: 1
name: t
supervisor: lead
tools:
  wait_for: {command: [echo, hi]}
agents:
  lead:
    delegates_to: [w]
    tools: [wait_for]
    delegation: {background: [w, nobody]}
  w: {description: W.}
""",
        encoding="utf-8",
    )

    out = CliRunner().invoke(cli, ["validate", str(team)]).output

    assert "'nobody' is not in agents.lead.delegates_to (w)" in out
    assert "the tool 'wait_for' and the background-task tool 'wait_for' would both be offered" in out


def test_the_background_team_runs_offline(capsys: Any) -> None:
    from teamrun.cli import main

    team = Path(__file__).resolve().parents[2] / "teams" / "background-research.yaml"
    code = main(["execute", str(team), "-i", "Rust traits", "--json", "--progress", "none", "--model", "offline"])

    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["status"] == "done"
    assert [(d["agent"], d["status"]) for d in result["delegations"]] == [("scout", "ok")]
    assert "scout (ok)" in result["final_text"]
