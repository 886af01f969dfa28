"""A small deterministic "model" for the local OpenAI-compatible test server.

It answers any agent of any team the way a cooperative model would, reading
only the request (so one handler serves every agent, whatever its name):

1. a ``transfer_to_<agent>`` tool is offered and nobody transferred yet: transfer once;
2. a delegation tool (``ask_<agent>``) has not been called yet: call the first
   such tool, passing the ids of earlier results in ``context_from_refs`` when
   the tool takes them — one worker per turn, so the run order is fixed;
3. a peer around a board (``board_claim`` offered): claim a task, complete it, claim again, until a
   claim says the work ended;
4. a plain tool has not been called yet: call every uncalled one, once, with
   arguments built from its schema;
5. otherwise answer: JSON valid against the response format when one is asked
   for, else a line of text naming the task and how many tool results it saw.

Different from the built-in ``offline`` simulator on purpose: it goes through
LiteLLM's real HTTP path, delegates in sequence, and uses references.
"""

from __future__ import annotations

import json
import re
from typing import Any

from teamrun.llm.offline import example_from_schema
from tests.fakeserver import Reply, text, tool_calls

ANSWER_PREFIX = "[simple model]"
_REF = re.compile(r'"ref":\s*"([A-Za-z][A-Za-z0-9_-]*-\d+)"')


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def task_of(request: dict[str, Any]) -> str:
    """The first user message: the task the agent was given (or the user's input)."""
    for message in request.get("messages") or []:
        if message.get("role") == "user":
            return _content(message)
    return ""


def simple_model(request: dict[str, Any]) -> Reply:
    """The reply for one chat-completions request."""
    messages: list[dict[str, Any]] = request.get("messages") or []
    tools = [t["function"] for t in request.get("tools") or [] if "function" in t]
    called: set[str] = set()
    results: list[str] = []
    for message in messages:
        if message.get("role") == "assistant":
            called |= {c["function"]["name"] for c in message.get("tool_calls") or []}
        elif message.get("role") == "tool":
            results.append(_content(message))
    task = task_of(request)
    short_task = " ".join(task.split())[:80]

    handoffs = [t["name"] for t in tools if t["name"].startswith("transfer_to_")]
    if handoffs and not any(name.startswith("transfer_to_") for name in called):
        return tool_calls((handoffs[0], {"reason": f"this is for {handoffs[0].removeprefix('transfer_to_')}"}))

    delegations = [t for t in tools if t["name"].startswith("ask_") and t["name"] not in called]
    if delegations:
        tool = delegations[0]
        args: dict[str, Any] = {"task": f"{short_task} (for {tool['name'].removeprefix('ask_')})"}
        refs = sorted({ref for result in results for ref in _REF.findall(result)})
        if refs and "context_from_refs" in (tool.get("parameters") or {}).get("properties", {}):
            args["context_from_refs"] = refs
        return tool_calls((tool["name"], args))

    if any(t["name"] == "board_claim" for t in tools):  # a peer around a board: claim, complete, until done
        move = _board_move(results)
        if move is not None:
            return tool_calls(move)

    plain = [
        t for t in tools if not t["name"].startswith(("ask_", "transfer_to_", "board_")) and t["name"] not in called
    ]
    if plain:
        return tool_calls(
            *[(t["name"], example_from_schema(t.get("parameters") or {}, task=short_task)) for t in plain]
        )

    response_format = request.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema") or {}
        value = example_from_schema(
            schema, task=short_task, all_properties=True, texts=[f"{ANSWER_PREFIX} {short_task}"]
        )
        return text(json.dumps(value))
    return text(f"{ANSWER_PREFIX} {short_task} — from {len(results)} tool result(s).")


def _board_move(results: list[str]) -> tuple[str, dict[str, Any]] | None:
    """A peer's next board call: claim; complete what it holds; ``None`` once a claim says the work ended."""
    held: dict[str, Any] | None = None
    for result in results:
        try:
            value = json.loads(result)
        except ValueError:
            continue
        status = value.get("status") if isinstance(value, dict) else None
        if status in ("done", "stopped", "deadlock"):
            return None
        if status == "claimed":
            held = value["task"]
        elif status in ("completed", "released") or (status == "refused" and value.get("reason") == "lease"):
            held = None
    if held is None:
        return ("board_claim", {})
    return ("board_complete", {"task_id": held["id"], "result": f"{ANSWER_PREFIX} did {held['id']}"})
