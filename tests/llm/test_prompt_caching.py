"""Prompt caching (issue 45.2): cache breakpoints on the Anthropic wire where the docs say, a byte-stable prompt
prefix between turns, cached input tokens read from every provider's usage and charged at their price."""

from __future__ import annotations

import io
import itertools
import json
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.cli.progress import PlainProgress
from teamrun.conventions import workspace_index_block
from teamrun.engine.durability.journal import request_hash
from teamrun.events import Event, LlmEnd
from teamrun.llm.adapter import import_litellm
from teamrun.llm.caching import (
    RUNNER_CONTEXT_HEADER,
    is_runner_context,
    needs_breakpoints,
    runner_context,
    with_breakpoints,
)
from teamrun.llm.types import Message, ModelSettings, ToolSchema
from teamrun.testing import scripted
from tests.fake_anthropic import FakeAnthropic, breakpoints
from tests.fakeserver import FakeOpenAI, malformed_body, text, tool_calls

MODEL = "anthropic/claude-haiku-4-5"
ANTHROPIC_SERVER = pytest.mark.outofprocess("the fake Anthropic HTTP server (tests/fake_anthropic.py)")
INSTRUCTIONS = "You lead a small writing team. " * 40


@pytest.fixture
def anthropic(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    monkeypatch.setenv("FAKE_ANTHROPIC_KEY", "sk-ant-test")
    with FakeAnthropic() as server:
        yield server


def team(tmp_path: Path, api_base: str, *, cache: str = "") -> Path:
    body = textwrap.dedent(f"""\
        version: 1
        name: cached
        supervisor: lead
        defaults:
          model: {MODEL}
          api_base: {api_base}
          api_key_env: FAKE_ANTHROPIC_KEY
          num_retries: 0
        {cache}
        agents:
          lead:
            instructions: "{INSTRUCTIONS}"
            delegates_to: [writer, checker]
          writer:
            instructions: Write.
          checker:
            instructions: Check.
        """)
    path = tmp_path / "cached.yaml"
    path.write_text(body, encoding="utf-8")
    return path


def run(path: Path) -> tuple[teamrun.RunResult, list[Event]]:
    events: list[Event] = []
    result = teamrun.load_team(path).run_sync("Write a poem.", subscribers=[events.append])
    return result, events


def lead_bodies(server: FakeAnthropic) -> list[dict[str, Any]]:
    return [b for b in server.bodies if isinstance(b.get("system"), list) and "writing team" in json.dumps(b["system"])]


@ANTHROPIC_SERVER
def test_cache_auto_sends_anthropic_breakpoints_on_tools_system_and_the_conversation(
    tmp_path: Path, anthropic: FakeAnthropic
) -> None:
    anthropic.script(
        "claude-haiku-4-5",
        [
            tool_calls(("ask_writer", {"task": "line 0"})),
            text("line zero"),
            tool_calls(("ask_writer", {"task": "line 1"})),
            text("line one"),
            text("done"),
        ],
    )

    result, events = run(team(tmp_path, anthropic.url))

    assert result.status == "done", result.error
    assert not anthropic.violations
    first, second, third = lead_bodies(anthropic)
    tools = len(first["tools"])
    assert breakpoints(first) == [f"tools[{tools - 1}]", "system[0]", "messages[0].content[0]"]
    # turn 2: the new tool result, and the user message that ended turn 1 (what turn 1 wrote to the cache)
    assert breakpoints(second) == [
        f"tools[{tools - 1}]",
        "system[0]",
        "messages[0].content[0]",
        "messages[2].content[0]",
    ]
    assert breakpoints(third)[-2:] == ["messages[2].content[0]", "messages[4].content[0]"]
    reads = [u["cache_read_input_tokens"] for u in anthropic.usages]
    assert reads[0] == 0 and all(r > 0 for r in reads[2:])
    ends = [e for e in events if isinstance(e, LlmEnd)]
    assert [e.usage.get("cached_tokens", 0) for e in ends] == reads
    usage = result.as_dict()["usage"]
    assert usage["cached_tokens"] == sum(reads) > 0
    console = io.StringIO()
    progress = PlainProgress(console)
    for event in events:
        progress(event)
    summary = console.getvalue().splitlines()[-1]
    assert f" tok ({sum(reads) / 1000:.1f}k cached), " in summary or f" tok ({sum(reads)} cached), " in summary


@ANTHROPIC_SERVER
def test_cache_off_sends_no_breakpoints_and_nothing_is_cached(tmp_path: Path, anthropic: FakeAnthropic) -> None:
    anthropic.script("claude-haiku-4-5", [tool_calls(("ask_writer", {"task": "x"})), text("w"), text("done")])

    result, _ = run(team(tmp_path, anthropic.url, cache="  cache: 'off'"))

    assert result.status == "done", result.error
    assert [breakpoints(b) for b in anthropic.bodies] == [[], [], []]
    assert "cached_tokens" not in result.as_dict()["usage"]


@ANTHROPIC_SERVER
def test_cached_tokens_are_charged_at_the_cached_price(tmp_path: Path, anthropic: FakeAnthropic) -> None:
    """The same run with and without the cache: LiteLLM's price table charges reads at a tenth."""
    costs = {}
    for cache in ("auto", "off"):
        anthropic.script(
            "claude-haiku-4-5", [*(tool_calls(("ask_writer", {"task": "x"})), text("w")) * 4, text("done")]
        )
        result, _ = run(team(tmp_path, anthropic.url, cache=f"  cache: '{cache}'"))
        assert result.status == "done", result.error
        costs[cache] = result.cost
    assert costs["auto"] < costs["off"]


# -- OpenAI's usage: prompt_tokens_details.cached_tokens -----------------------------------
def _completion(usage: object) -> Any:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "four"}, "finish_reason": "stop"}],
        "usage": usage,
    }
    return malformed_body(json.dumps(body))


def solo(tmp_path: Path, fake_openai: FakeOpenAI) -> Path:
    path = tmp_path / "solo.yaml"
    model = f"{{model: openai/gpt-4o, api_base: '{fake_openai.url}', num_retries: 0}}"
    path.write_text(f"version: 1\nname: one\nsupervisor: solo\nagents:\n  solo: {model}\n", encoding="utf-8")
    return path


def test_openai_cached_tokens_are_read_counted_and_priced(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    plain = {"prompt_tokens": 10000, "completion_tokens": 10, "total_tokens": 10010}
    cached = {**plain, "prompt_tokens_details": {"cached_tokens": 9000}}
    fake_openai.script("gpt-4o", [_completion(plain), _completion(cached)])

    full, _ = run(solo(tmp_path, fake_openai))
    hit, events = run(solo(tmp_path, fake_openai))

    (end,) = [e for e in events if isinstance(e, LlmEnd)]
    assert end.usage["cached_tokens"] == 9000 and end.usage["input_tokens"] == 10000
    shown = hit.as_dict()
    assert shown["usage"]["cached_tokens"] == 9000
    assert shown["agents"]["solo"]["usage"]["cached_tokens"] == 9000
    assert 0 < hit.cost < 0.6 * full.cost


@pytest.mark.parametrize(
    "bad",
    [
        {"prompt_tokens_details": {"cached_tokens": -1}},
        {"prompt_tokens_details": {"cached_tokens": 20000}},  # more than was sent
        {"cache_creation_input_tokens": 1.5},
    ],
)
def test_a_malformed_cache_figure_is_unknown_never_zero(
    tmp_path: Path, fake_openai: FakeOpenAI, bad: dict[str, Any]
) -> None:
    fake_openai.script("gpt-4o", [_completion({"prompt_tokens": 10000, "completion_tokens": 10, **bad})])

    result, events = run(solo(tmp_path, fake_openai))

    assert result.status == "done", result.error
    (end,) = [e for e in events if isinstance(e, LlmEnd)]
    assert end.usage_known is False
    assert result.as_dict()["usage_known"] is False


# -- the prefix stays byte-stable between turns ----------------------------------------------
def serialized(messages: Sequence[Message], tools: Sequence[ToolSchema]) -> str:
    """The request as the provider sees its prefix: tools, then messages, as JSON without the closing bracket."""
    return json.dumps([list(tools), *messages], ensure_ascii=False)[:-1]


def test_the_prompt_prefix_of_each_supervisor_turn_is_a_byte_prefix_of_the_next(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        textwrap.dedent("""\
            version: 1
            name: stable
            supervisor: lead
            defaults: {model: openai/x}
            agents:
              lead:
                instructions: Lead the team.
                delegates_to: [writer, checker]
              writer: {instructions: Write.}
              checker: {instructions: Check.}
            """),
        encoding="utf-8",
    )
    lead_turns = [
        scripted.tool_calls(("ask_writer", {"task": f"part {i}"}), ("ask_checker", {"task": f"check {i}"}))
        for i in range(9)
    ]
    model = scripted.ScriptedModel(
        {
            "lead": [*lead_turns, scripted.text("all done")],
            "writer": [scripted.text(f"part {i}") for i in range(9)],
            "checker": [scripted.text(f"ok {i}") for i in range(9)],
        }
    )

    result = teamrun.load_team(path, chat_model=model).run_sync("Write.")

    assert result.status == "done", result.error
    model.assert_complete()
    lead = [serialized(c.messages, c.tools) for c in model.calls_of("lead")]
    assert len(lead) == 10
    for turn, (before, after) in enumerate(itertools.pairwise(lead), 1):
        assert after.startswith(before), f"turn {turn + 1} changed the prefix of turn {turn}"


# -- which providers get marks, and Bedrock's form of them -------------------------------------
@pytest.mark.parametrize(
    ("provider", "model", "marked"),
    [
        ("anthropic", "claude-haiku-4-5", True),
        ("bedrock", "anthropic.claude-3-5-haiku-20241022-v1:0", True),
        ("bedrock", "us.amazon.nova-pro-v1:0", True),
        ("bedrock", "meta.llama3-70b-instruct-v1:0", False),
        ("vertex_ai", "claude-3-5-haiku@20241022", True),
        ("vertex_ai", "gemini-2.0-flash", False),
        ("openai", "gpt-4o", False),  # caches on its own
        ("hosted_vllm", "claude-lookalike", False),
    ],
)
def test_only_providers_that_cache_what_is_marked_get_marks(provider: str, model: str, marked: bool) -> None:
    assert needs_breakpoints(provider, model) is marked


def test_on_bedrock_litellm_sends_the_marks_as_cache_points() -> None:
    from litellm.llms.bedrock.chat.converse_transformation import AmazonConverseConfig

    call = {"id": "c1", "type": "function", "function": {"name": "ask_w", "arguments": "{}"}}
    messages: list[Message] = [
        {"role": "system", "content": "You lead."},
        {"role": "user", "content": "Do it."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
    tools: list[ToolSchema] = [
        {"type": "function", "function": {"name": "ask_w", "description": "d", "parameters": {"type": "object"}}}
    ]
    marked, marked_tools = with_breakpoints(messages, tools)
    import_litellm()

    body = AmazonConverseConfig().transform_request(
        model="anthropic.claude-3-5-haiku-20241022-v1:0",
        messages=marked,
        optional_params={"tools": marked_tools},
        litellm_params={},
        headers={},
    )

    point = {"cachePoint": {"type": "default"}}
    assert body["toolConfig"]["tools"][-1] == point
    assert body["system"][-1] == point
    assert [m["content"][-1] == point for m in body["messages"]] == [True, False, True]
    assert messages[1]["content"] == "Do it."  # the request's own messages are left as they were


# -- what changes between turns goes after the conversation --------------------------------------
TASKS_TEAM = """\
version: 1
name: ledger
supervisor: lead
defaults:
  model: MODEL
DEFAULTS
agents:
  lead:
    instructions: "INSTRUCTIONS"
    delegates_to: [writer]
  writer: {instructions: Write.}
"""
LEDGER_TURNS: list[tuple[str, dict[str, str]]] = [
    ("ask_writer", {"task": "Draft the intro", "task_id": "intro"}),
    ("ask_writer", {"task": "Shorter, please", "follow_up_of": "intro"}),
    ("ask_writer", {"task": "Draft the outro", "task_id": "outro"}),
]
"""The supervisor's turns: each changes its task ledger (a new task, a follow-up's attempt, another task)."""


def tasks_team(tmp_path: Path, model: str, *, defaults: str = "") -> Path:
    """The team, its lead on ``model``; ``defaults``: more lines of ``defaults:``."""
    path = tmp_path / "ledger.yaml"
    body = TASKS_TEAM.replace("MODEL", model).replace("DEFAULTS", defaults).replace("INSTRUCTIONS", INSTRUCTIONS)
    path.write_text(body, encoding="utf-8")
    return path


def test_a_supervisor_whose_task_ledger_changes_sends_a_byte_identical_prefix_and_the_ledger_last(
    tmp_path: Path,
) -> None:
    model = scripted.ScriptedModel(
        {
            "lead": [*(scripted.tool_calls(turn) for turn in LEDGER_TURNS), scripted.text("all done")],
            "writer": [scripted.text("draft 1"), scripted.text("draft 2"), scripted.text("outro 1")],
        }
    )

    result = teamrun.load_team(tasks_team(tmp_path, "openai/x"), chat_model=model).run_sync("Write.")

    assert result.status == "done", result.error
    model.assert_complete()
    calls = [list(c.messages) for c in model.calls_of("lead")]
    assert len(calls) == 4
    first, *later = calls
    assert not any(is_runner_context(m) for m in first)  # no tasks yet: nothing changes, nothing is added
    # from the second turn on, the ledger is the request's one last message, marked as the runner's
    ledgers = [str(sent[-1]["content"]) for sent in later]
    assert all(is_runner_context(sent[-1]) and sum(map(is_runner_context, sent)) == 1 for sent in later)
    assert all(text.startswith(RUNNER_CONTEXT_HEADER) and "## Your tasks" in text for text in ledgers)
    assert "intro | writer | ok | 1" in ledgers[0] and "intro | writer | ok | 2" in ledgers[1]
    assert "outro | writer | ok | 1" in ledgers[2]
    assert len(set(ledgers)) == 3  # it changed every turn...
    # ...and the system prompt, the tools and the earlier turns did not: each turn's prefix starts the next's
    tools = [c.tools for c in model.calls_of("lead")]
    assert all(t == tools[0] for t in tools)
    assert len({str(sent[0]["content"]) for sent in calls}) == 1 and "## Your tasks" not in str(first[0]["content"])
    conversations = [serialized([m for m in sent if not is_runner_context(m)], tools[0]) for sent in calls]
    for turn, (before, after) in enumerate(itertools.pairwise(conversations), 1):
        assert after.startswith(before), f"turn {turn + 1} changed the prefix of turn {turn}"


@ANTHROPIC_SERVER
def test_with_a_changing_ledger_the_breakpoints_stay_off_it_and_each_turn_reads_the_one_before(
    tmp_path: Path, anthropic: FakeAnthropic
) -> None:
    anthropic.script(
        "claude-haiku-4-5",
        [
            tool_calls(LEDGER_TURNS[0]),
            text("draft 1"),
            tool_calls(LEDGER_TURNS[1]),
            text("draft 2"),
            tool_calls(LEDGER_TURNS[2]),
            text("outro 1"),
            text("all done"),
        ],
    )
    endpoint = f"  api_base: {anthropic.url}\n  api_key_env: FAKE_ANTHROPIC_KEY\n  num_retries: 0"

    result, _ = run(tasks_team(tmp_path, MODEL, defaults=endpoint))

    assert result.status == "done", result.error
    assert not anthropic.violations
    bodies = lead_bodies(anthropic)
    assert len(bodies) == 4
    for body in bodies[1:]:
        *_, last = body["messages"]
        *conversation, tail = last["content"]  # LiteLLM joins the trailing context to the tool result's message
        assert tail["type"] == "text" and tail["text"].startswith(RUNNER_CONTEXT_HEADER)
        assert "cache_control" not in tail  # the ledger changes: no breakpoint on it
        assert "cache_control" in conversation[-1]  # the conversation's last block is marked
    assert all(RUNNER_CONTEXT_HEADER not in json.dumps(b["system"]) for b in bodies)
    lead_usages = [u for b, u in zip(anthropic.bodies, anthropic.usages, strict=True) if b in bodies]
    reads = [u["cache_read_input_tokens"] for u in lead_usages]
    assert reads[1] > 0 and reads[1] < reads[2] < reads[3]  # each turn reads what the one before wrote


def test_the_journal_hashes_the_trailing_context_with_the_workspace_index_masked() -> None:
    settings = ModelSettings(model="openai/x")
    conversation: list[Message] = [{"role": "system", "content": "You lead."}, {"role": "user", "content": "Go."}]

    def sent(ledger: str, index: str) -> str:
        context = runner_context(f"{ledger}\n\n{workspace_index_block(index)}")
        return request_hash([*conversation, context], settings, (), None, today="2026-01-01")

    plain = request_hash(conversation, settings, (), None, today="2026-01-01")
    assert sent("## Your tasks\nintro | writer | ok | 1", "- plan (version 1)") == sent(
        "## Your tasks\nintro | writer | ok | 1", "- plan (version 2)"
    )  # what others wrote meanwhile: a resumed run sees it at its latest
    assert sent("## Your tasks\nintro | writer | ok | 2", "") != sent("## Your tasks\nintro | writer | ok | 1", "")
    assert plain not in {sent("", ""), sent("## Your tasks", "")}


def test_the_trailing_context_takes_no_breakpoint_the_conversations_last_message_does() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "ask_w", "arguments": "{}"}}
    conversation: list[Message] = [
        {"role": "system", "content": "You lead."},
        {"role": "user", "content": "Do it."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
    context = runner_context("## Your tasks\nw-1 | w | ok | 1 | open")

    marked, _ = with_breakpoints([*conversation, context], [])

    assert marked[-1] == context  # unmarked: it changes every turn
    assert "cache_control" in marked[3]  # the conversation's last message
    assert marked[:4] == with_breakpoints(conversation, [])[0]  # the same marks as without it
