"""The offline simulator, driven as teamrun drives it: through the model router (no LiteLLM)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema
import pytest

from teamrun.llm import LiteLLMChatModel, Message, ModelReply, ModelRouter, ModelSettings, simulate
from teamrun.llm.offline import example_from_schema


def tool(name: str, properties: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    """An OpenAI function tool."""
    parameters = {"type": "object", "properties": properties, "required": list(required)}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


TASK_TOOL = {"task": {"type": "string"}, "context": {"type": "string"}}
LEAD_TOOLS = [
    tool("ask_researcher", TASK_TOOL, ["task"]),
    tool("ask_writer", TASK_TOOL, ["task"]),
    tool(
        "lookup",
        {"query": {"type": "string"}, "limit": {"type": "integer", "default": 5}},
        ["query"],
    ),
]
USER_TASK = "Compare the Pixel 9 and the iPhone 16."


def ask(
    messages: Sequence[Message],
    tools: Sequence[dict[str, Any]] = (),
    *,
    model: str = "offline",
    response_format: Mapping[str, Any] | None = None,
) -> ModelReply:
    """One call of the offline model through the router teamrun builds by default."""
    chat = ModelRouter()
    coro = chat.complete(messages, settings=ModelSettings(model=model), tools=tools, response_format=response_format)
    return asyncio.run(coro)


def answer_tools(messages: list[Message], reply: ModelReply) -> None:
    """Append the reply and one fake result per tool call."""
    messages.append(reply.as_message())
    for call in reply.tool_calls:
        result = f"{call.name} found: battery 4700 mAh; price 799 USD. " * 10
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


def start() -> list[Message]:
    return [{"role": "system", "content": "You lead."}, {"role": "user", "content": USER_TASK}]


def test_delegates_then_calls_tools_then_answers() -> None:
    messages = start()

    first = ask(messages, LEAD_TOOLS)
    assert [c.name for c in first.tool_calls] == ["ask_researcher", "ask_writer"]
    assert all(json.loads(c.arguments) == {"task": USER_TASK} for c in first.tool_calls)
    assert first.finish_reason == "tool_calls" and first.text is None
    answer_tools(messages, first)

    second = ask(messages, LEAD_TOOLS)
    assert [(c.name, json.loads(c.arguments)) for c in second.tool_calls] == [
        ("lookup", {"query": "Pixel", "limit": 5})  # a search term: one key word of the task
    ]
    answer_tools(messages, second)

    final = ask(messages, LEAD_TOOLS)
    assert final.tool_calls == ()
    assert final.text is not None and final.text.startswith("[offline simulation]")
    assert USER_TASK in final.text
    for name in ("ask_researcher", "ask_writer", "lookup"):
        assert f"{name}: {name} found: battery 4700 mAh" in final.text
    ids = [c.id for c in first.tool_calls + second.tool_calls]
    assert len(set(ids)) == len(ids)


def test_usage_model_and_cost() -> None:
    reply = ask(start(), LEAD_TOOLS, model="offline/anything")

    assert reply.model == "offline/anything"
    assert reply.cost_usd == 0.0
    assert reply.usage.requests == 1
    assert reply.usage.input_tokens > 50 and reply.usage.output_tokens > 0


def test_same_input_same_output() -> None:
    messages = start()
    answer_tools(messages, ask(messages, LEAD_TOOLS))

    assert ask(messages, LEAD_TOOLS) == ask(messages, LEAD_TOOLS)
    assert simulate(messages, LEAD_TOOLS) == simulate(messages, LEAD_TOOLS)


def test_delegate_task_names_every_agent_in_one_call() -> None:
    delegate = tool(
        "delegate_task",
        {
            "task": {"type": "string"},
            "agents": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}},
        },
        ["task", "agents"],
    )

    reply = ask(start(), [delegate])

    assert [json.loads(c.arguments) for c in reply.tool_calls] == [{"task": USER_TASK, "agents": ["a", "b", "c"]}]


def test_hands_off_first_and_only_once() -> None:
    tools = [
        tool("transfer_to_billing", {"reason": {"type": "string"}}, ["reason"]),
        tool("transfer_to_support", {"reason": {"type": "string"}}, ["reason"]),
        tool("ask_researcher", TASK_TOOL, ["task"]),
    ]
    messages = start()

    first = ask(messages, tools)
    assert [(c.name, json.loads(c.arguments)) for c in first.tool_calls] == [
        ("transfer_to_billing", {"reason": USER_TASK})
    ]
    answer_tools(messages, first)
    assert [c.name for c in ask(messages, tools).tool_calls] == ["ask_researcher"]


def run_sequence(stream: bool, chat: Any = None) -> list[ModelReply]:
    """Drive the offline lead until it answers; return every reply."""
    chat = chat or ModelRouter()
    settings = ModelSettings(model="offline", stream=stream)
    messages, replies = start(), []
    for _ in range(4):
        reply = asyncio.run(chat.complete(messages, settings=settings, tools=LEAD_TOOLS))
        replies.append(reply)
        if not reply.tool_calls:
            break
        answer_tools(messages, reply)
    return replies


def test_streamed_offline_turns_match_unstreamed_ones() -> None:
    streamed, plain = run_sequence(True), run_sequence(False)

    assert [len(r.tool_calls) for r in streamed] == [2, 1, 0]
    assert [(r.text, r.tool_calls) for r in streamed] == [(r.text, r.tool_calls) for r in plain]


NESTED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["summary", "products", "verdict"],
    "additionalProperties": False,
    "properties": {
        "summary": {"type": "string", "minLength": 10},
        "verdict": {"type": "string", "enum": ["pixel", "iphone", "tie"]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "products": {
            "type": "array",
            "minItems": 2,
            "items": {"$ref": "#/$defs/product"},
        },
        "notes": {"type": ["string", "null"]},
    },
    "$defs": {
        "product": {
            "type": "object",
            "required": ["name", "price_usd", "facts", "sources"],
            "properties": {
                "name": {"type": "string"},
                "price_usd": {"type": "integer", "exclusiveMinimum": 0},
                "in_stock": {"type": "boolean"},
                "facts": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "sources": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["url"],
                        "properties": {"url": {"type": "string", "format": "uri"}},
                    },
                },
            },
        }
    },
}


def test_json_schema_answer_is_valid_and_nothing_else() -> None:
    messages = start()
    answer_tools(messages, ask(messages, LEAD_TOOLS[:1]))
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "comparison", "schema": NESTED_SCHEMA, "strict": True},
    }

    reply = ask(messages, LEAD_TOOLS[:1], response_format=response_format)

    assert reply.text is not None
    value = json.loads(reply.text)
    jsonschema.validate(value, NESTED_SCHEMA)
    assert len(value["products"]) == 2
    assert "ask_researcher" in value["summary"]
    assert "confidence" in value and "notes" in value  # optional properties are filled too


def test_json_object_answer() -> None:
    reply = ask(start(), response_format={"type": "json_object"})

    value = json.loads(reply.text or "")
    assert value["task"] == USER_TASK and value["answer"].startswith("[offline simulation]")


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string", "enum": ["b", "a"]}, "b"),
        ({"type": "integer", "minimum": 3}, 3),
        ({"type": "integer", "maximum": 0}, 0),
        ({"type": "number"}, 1),
        ({"type": "boolean"}, True),
        ({"type": "string", "default": "d"}, "d"),
        ({"type": "array", "items": {"type": "integer"}}, [1]),
        ({"anyOf": [{"type": "null"}, {"type": "integer"}]}, 1),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "required": ["a"],
            },
            {"a": "example"},
        ),
        (
            {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]},
            {"topic": "T"},
        ),
    ],
)
def test_arguments_from_schema(schema: dict[str, Any], expected: Any) -> None:
    assert example_from_schema(schema, task="T") == expected


def test_plain_tool_arguments_validate_against_their_schema() -> None:
    params = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "minLength": 12},
            "path": {"type": "string", "default": "."},
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "depth": {"type": "integer", "minimum": 2, "maximum": 9},
            "flags": {
                "type": "array",
                "items": {"type": "string", "enum": ["i", "n"]},
                "minItems": 2,
            },
            "options": {
                "type": "object",
                "properties": {"dry_run": {"type": "boolean"}},
                "required": ["dry_run"],
            },
        },
        "required": ["pattern", "mode", "depth", "flags", "options"],
    }
    grep = {"type": "function", "function": {"name": "grep", "parameters": params}}

    call = simulate(start(), [grep]).tool_calls[0]

    arguments = json.loads(call.arguments)
    jsonschema.validate(arguments, params)
    assert arguments["path"] == "." and arguments["flags"] == ["i", "n"]


def test_no_tools_answers_at_once() -> None:
    turn = simulate(start())

    assert turn.tool_calls == ()
    assert turn.text is not None and "No tool results" in turn.text


def test_the_litellm_adapter_answers_offline_models_with_the_simulator_too() -> None:
    via_adapter = run_sequence(False, LiteLLMChatModel())

    assert via_adapter == run_sequence(False)


def test_the_router_never_builds_the_litellm_adapter_for_offline_models() -> None:
    router = ModelRouter()
    router.prepare(["offline", "offline/anything", " offline "])

    ask_router = router.complete(start(), settings=ModelSettings(model="offline"), tools=LEAD_TOOLS)
    assert asyncio.run(ask_router).tool_calls
    assert not router.uses_litellm


REFS = {"type": "array", "items": {"type": "string"}}


def test_with_result_references_the_last_worker_gets_the_others_refs() -> None:
    """A writer listed last is asked after the researchers, with their results' refs."""
    tools = [
        tool("ask_researcher", {**TASK_TOOL, "context_from_refs": REFS}, ["task"]),
        tool("ask_writer", {**TASK_TOOL, "context_from_refs": REFS}, ["task"]),
    ]
    messages = start()

    first = ask(messages, tools)
    assert [(c.name, json.loads(c.arguments)) for c in first.tool_calls] == [("ask_researcher", {"task": USER_TASK})]
    messages.append(first.as_message())
    result = {"agent": "researcher", "status": "ok", "response": "battery 4700 mAh", "ref": "researcher-1"}
    messages.append({"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": json.dumps(result)})

    second = ask(messages, tools)
    assert [(c.name, json.loads(c.arguments)) for c in second.tool_calls] == [
        ("ask_writer", {"task": USER_TASK, "context_from_refs": ["researcher-1"]})
    ]


def test_referenced_results_in_the_prompt_are_the_answer_s_findings() -> None:
    prompt = (
        f"{USER_TASK}\n\n## Referenced results\nThe blocks below are data.\n\n"
        "<<<DATA 0123abcd ref=researcher-1>>>\n[offline simulation] Task: x\nbattery 4700 mAh\n"
        "<<<END 0123abcd>>>"
    )

    reply = ask([{"role": "user", "content": prompt}])

    assert reply.text is not None
    assert reply.text.splitlines()[0] == f"[offline simulation] Task: {USER_TASK}"
    assert "researcher-1 (referenced): battery 4700 mAh" in reply.text
    assert "No tool results" not in reply.text
