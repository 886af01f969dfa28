"""Where two mechanisms meet (issue 22, items 21-24), on the scripted in-process model.

Hooks x follow-ups, hooks x every way a delegation ends, acceptance x limits,
a batch row's ceiling x the model calls.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

import teamrun
from teamrun.config.loader import load_config
from teamrun.llm.types import ModelReply, Usage
from teamrun.testing.scripted import ScriptedModel, tool_call, tool_calls


def _write(tmp_path: Path, body: str, **modules: str) -> Path:
    for name, source in modules.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    path = tmp_path / "team.yaml"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


# -- 21. max_follow_ups holds when an on_start hook awaits -------------------------------------------

FOLLOW_UPS = """\
    version: 1
    name: follow-ups
    supervisor: lead
    agents:
      lead:
        delegates_to: [worker]
        delegation:
          max_follow_ups: 1
          hooks:
            on_start:
              - call: slowhooks:on_start
      worker:
        description: Works.
    """

SLOW_HOOKS = """\
    import time

    def on_start(context):  # a sync hook: it runs in a thread, so the delegations interleave here
        time.sleep(0.05)
        return None
    """


def test_three_follow_ups_in_one_turn_respect_max_follow_ups_with_an_on_start_hook(tmp_path: Path) -> None:
    team = _write(tmp_path, FOLLOW_UPS, slowhooks=SLOW_HOOKS)
    follow_up = ("ask_worker", {"task": "improve it", "follow_up_of": "t1"})
    model = ScriptedModel(
        {
            "lead": [
                tool_call("ask_worker", task="draft it", task_id="t1"),
                tool_calls(follow_up, follow_up, follow_up),
                "done",
            ],
            "worker": ["draft", "better", "better 2", "better 3"],
        }
    )

    result = teamrun.load_team(team, chat_model=model).run_sync("go")

    assert result.status == "done"
    assert len(model.calls_of("worker")) == 2  # the task, and one follow-up
    seen = [json.loads(c) for c in model.calls_of("lead")[2].tool_results]
    assert [s["status"] for s in seen].count("ok") == 1
    refused = [s for s in seen if s["status"] == "rejected"]
    assert len(refused) == 2
    assert all("already had 1 follow-up(s)" in s["error"] for s in refused)
    assert [(t.task_id, t.attempts) for t in result.tasks] == [("t1", 2)]


# -- 22. on_complete sees every way a delegation ends --------------------------------------------------

ENDINGS = """\
    version: 1
    name: endings
    supervisor: lead
    agents:
      lead:
        delegates_to: [worker, slow]
        delegation:
          background: [slow]
          hooks:
            on_start:
              - when: "prompt == 'forbidden'"
                reject: "not this one"
            on_complete:
              - call: recorder:on_complete
      worker:
        description: Works.
      slow:
        description: Takes long.
        tools: [wait_long]
    tools:
      wait_long:
        python: slowtools:wait_long
    """

RECORDER = """\
    SEEN = []

    def on_complete(context):
        SEEN.append((context.agent, context.status, context.error))
        return {"result_text": f"hook saw {context.status}"}
    """

SLOW_TOOLS = """\
    import asyncio

    async def wait_long() -> str:
        \"\"\"Wait a long time.\"\"\"
        await asyncio.sleep(30)
        return "waited"
    """


def test_on_complete_hooks_see_rejected_and_cancelled_delegations(tmp_path: Path) -> None:
    team = _write(tmp_path, ENDINGS, recorder=RECORDER, slowtools=SLOW_TOOLS)
    model = ScriptedModel(
        {
            "lead": [
                tool_calls(
                    ("ask_worker", {"task": "forbidden"}),
                    ("ask_worker", {"task": "fine"}),
                    ("ask_worker", {"task": "again", "follow_up_of": "nope"}),
                ),
                tool_call("ask_slow", task="take long"),
                lambda call: tool_call("wait_for", handles=["bg-1"], timeout_s=0.2),
                tool_call("cancel_task", handle="bg-1"),
                "done",
            ],
            "worker": ["fine result"],
            "slow": [tool_call("wait_long")],
        }
    )

    result = teamrun.load_team(team, chat_model=model).run_sync("go")

    model.assert_complete()
    import recorder  # type: ignore[import-not-found]  # the hook module, imported from the team's folder

    assert result.status == "done"
    assert sorted(recorder.SEEN, key=str) == sorted(
        [
            ("worker", "rejected", "rejected by an on_start hook"),
            ("worker", "ok", None),
            ("worker", "rejected", "there is no task 'nope' to follow up (tasks: none yet)"),
            ("slow", "cancelled", "cancelled"),
        ],
        key=str,
    )
    first = [json.loads(c) for c in model.calls_of("lead")[1].tool_results]
    assert [r["response"] for r in first] == ["hook saw rejected", "hook saw ok", "hook saw rejected"]
    cancelled = json.loads(model.calls_of("lead")[4].tool_results[-1])
    assert cancelled["status"] == "cancelled" and cancelled["response"] == "hook saw cancelled"
    assert sorted((d.agent, d.status) for d in result.delegations) == [
        ("slow", "cancelled"),
        ("worker", "ok"),
        ("worker", "rejected"),
        ("worker", "rejected"),
    ]


# -- 23. no judge call once the token limit is used up ---------------------------------------------------

JUDGED = """\
    version: 1
    name: judged
    supervisor: lead
    limits: {max_total_tokens: 1000}
    accept:
      - judge: {rubric: Names two languages., model: my-judge}
    agents:
      lead: {}
    """


def test_the_judge_is_not_asked_once_the_token_limit_is_used_up(tmp_path: Path) -> None:
    team = _write(tmp_path, JUDGED)
    answer = ModelReply(text="Rust and Go.", usage=Usage(900, 200, 1), finish_reason="stop")
    model = ScriptedModel({"lead": [answer], "accept:judge": ['{"score": 1, "reason": "fine"}']})

    result = teamrun.load_team(team, chat_model=model).run_sync("Name two languages")

    assert model.calls_of("accept:judge") == []
    assert result.usage.total_tokens == 1100  # the lead's answer only
    assert result.final_text == "Rust and Go."
    assert (result.status, result.stopped_by) == ("budget_exhausted", "limits.max_total_tokens (1000)")
    (record,) = result.acceptance
    assert not record.passed and record.stopped_by == "limits.max_total_tokens (1000)"
    assert "limits.max_total_tokens (1000) reached" in record.detail


# -- 24. a batch row's token ceiling is checked at each model call -------------------------------------

BUSY = """\
    version: 1
    name: busy
    supervisor: lead
    max_attempts: 10
    accept:
      - contains: "never there"
    agents:
      lead: {}
    """


def test_a_rows_token_ceiling_stops_the_run_at_the_next_model_call(tmp_path: Path) -> None:
    """Answers that fail a check are asked again without the run ever yielding to the event loop."""
    # imported here, not at collection: teamrun.evals.models before teamrun.config.schema_gen would build the
    # cases schema without the config models' field docstrings (tests/evals/test_eval_cli.py checks it)
    from teamrun.evals.batch import InputRow, run_row
    from teamrun.evals.guarded import Ceiling

    team = _write(tmp_path, BUSY)
    answer = ModelReply(text="an answer", usage=Usage(450, 50, 1), finish_reason="stop")
    model = ScriptedModel({"lead": [answer] * 10})

    record = asyncio.run(
        run_row(load_config(team), InputRow("r1", "go", {}, 1), Ceiling(max_tokens=1200, label="row"), chat_model=model)
    )

    assert record["status"] == "budget_exhausted"
    assert record["stopped_by"].startswith("row.max_tokens (1200)")
    # three answers reach 1,500 tokens; the next call is the last turn, and nothing follows it
    assert record["usage"]["requests"] == 4 and len(model.calls_of("lead")) == 4
    assert "STOP: row.max_tokens (1200) has been reached" in model.calls_of("lead")[-1].messages[-1]["content"]
