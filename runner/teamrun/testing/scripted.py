"""A strict scripted model for tests: each agent gets its replies in order, and nothing else.

    model = ScriptedModel({
        "lead": [delegate("researcher", task="find facts"), "Here is the report."],
        "researcher": [tool_call("lookup", query="rust"), "Rust is fast."],
    })
    team = load_team("team.yaml", chat_model=model)
    ...
    model.assert_complete()

A key is an agent name (any invocation of that agent) or a full agent path
(``"lead/researcher"``, which wins over the name). A step is a reply text, a
:class:`~teamrun.llm.types.ModelReply`, or a function of the :class:`ScriptedCall`
returning one of those. A call past the end of an agent's script raises a
:class:`ScriptExhausted` (a :class:`~teamrun.errors.ModelError`, so the run
fails cleanly) and is remembered: :meth:`ScriptedModel.assert_complete` fails
on it, and on steps left unused.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

from teamrun.conventions import DELEGATE_TASK, delegation_tool_name
from teamrun.errors import ModelError
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolCall, ToolSchema, Usage, current_scope

__all__ = ["ScriptExhausted", "ScriptedCall", "ScriptedModel", "Step", "delegate", "text", "tool_call", "tool_calls"]


class ScriptExhausted(ModelError):
    """A model call the script did not plan for."""


@dataclass(frozen=True)
class ScriptedCall:
    """One model call as the scripted model saw it."""

    agent_path: tuple[str, ...]
    turn: int
    messages: tuple[Message, ...]
    tools: tuple[ToolSchema, ...]
    settings: ModelSettings
    response_format: Mapping[str, Any] | None = None

    @property
    def agent(self) -> str:
        return self.agent_path[-1] if self.agent_path else ""

    @property
    def tool_names(self) -> list[str]:
        return [str(t.get("function", {}).get("name", "")) for t in self.tools]

    @property
    def task(self) -> str:
        """The first user message: the task this agent was given."""
        return next((str(m.get("content") or "") for m in self.messages if m.get("role") == "user"), "")

    @property
    def tool_results(self) -> list[str]:
        """Contents of the tool messages since the model last spoke."""
        results: list[str] = []
        for message in reversed(self.messages):
            if message.get("role") == "assistant":
                break
            if message.get("role") == "tool":
                results.insert(0, str(message.get("content") or ""))
        return results


Step = Union[str, ModelReply, Callable[[ScriptedCall], "str | ModelReply"]]  # noqa: UP007 - a forward reference


_ID_PREFIX = "scripted_"
"""Ids of the helpers' tool calls; made unique per turn when the reply is served."""


def _usage(call: ScriptedCall, reply: ModelReply) -> Usage:
    sent = sum(len(json.dumps(m, default=str)) for m in call.messages)
    said = len(reply.text or "") + sum(len(c.name) + len(c.arguments) for c in reply.tool_calls)
    return Usage(max(1, sent // 4), max(1, said // 4), 1)


def text(content: str) -> ModelReply:
    """A plain text answer."""
    return ModelReply(text=content, finish_reason="stop")


def tool_calls(*calls: tuple[str, Mapping[str, Any]], content: str | None = None) -> ModelReply:
    """An answer calling several tools at once (they run concurrently)."""
    return ModelReply(
        text=content,
        tool_calls=tuple(
            ToolCall(f"{_ID_PREFIX}{i}_{name}", name, json.dumps(dict(args), ensure_ascii=False))
            for i, (name, args) in enumerate(calls)
        ),
        finish_reason="tool_calls",
    )


def tool_call(name: str, /, **arguments: Any) -> ModelReply:
    """An answer calling one tool with ``arguments``."""
    return tool_calls((name, arguments))


def delegate(*workers: str, task: str, context: str | None = None) -> Callable[[ScriptedCall], ModelReply]:
    """Delegate ``task`` to ``workers`` with whichever delegation tool the agent was offered.

    ``ask_<worker>`` tools (``delegation.tool: per_agent``) get one call each, in
    one turn; a ``delegate_task`` tool gets one call naming all the workers.
    """
    if not workers:
        raise ValueError("delegate() needs at least one worker name")

    def step(call: ScriptedCall) -> ModelReply:
        offered = call.tool_names
        extra = {"context": context} if context else {}
        if all(delegation_tool_name(w) in offered for w in workers):
            return tool_calls(*((delegation_tool_name(w), {"task": task, **extra}) for w in workers))
        if DELEGATE_TASK in offered:
            return tool_call(DELEGATE_TASK, task=task, agents=list(workers), **extra)
        raise ScriptExhausted(
            f"the script delegates {call.agent} → {', '.join(workers)}, but {call.agent} was "
            f"offered no such delegation tool (it has: {', '.join(offered) or 'none'})"
        )

    return step


@dataclass
class _Script:
    steps: deque[Step] = field(default_factory=deque)


class ScriptedModel:
    """A :class:`~teamrun.llm.types.ChatModel` answering each agent from its script."""

    def __init__(self, script: Mapping[str, Sequence[Step]] | None = None) -> None:
        self._scripts: dict[str, _Script] = {}
        self.calls: list[ScriptedCall] = []
        """Every call answered (or refused), in order."""
        self.violations: list[str] = []
        for key, steps in (script or {}).items():
            self.add(key, *steps)

    def add(self, key: str, *steps: Step) -> ScriptedModel:
        """Append ``steps`` to the script of ``key`` (an agent name or a ``/``-joined agent path)."""
        self._scripts.setdefault(key, _Script()).steps.extend(steps)
        return self

    def calls_of(self, key: str) -> list[ScriptedCall]:
        """The calls made by an agent (name or ``/``-joined path)."""
        return [c for c in self.calls if "/".join(c.agent_path) == key or c.agent == key]

    def leftovers(self) -> dict[str, int]:
        return {key: len(script.steps) for key, script in self._scripts.items() if script.steps}

    def assert_complete(self) -> None:
        """Fail if any call went past the script or any scripted step was not used."""
        problems = list(self.violations)
        problems += [f"{key}: {count} scripted step(s) never used" for key, count in self.leftovers().items()]
        if problems:
            raise AssertionError("scripted model not used as scripted:\n  " + "\n  ".join(problems))

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        scope = current_scope.get()
        path, turn = (scope.agent_path, scope.turn) if scope is not None else ((), 0)
        call = ScriptedCall(path, turn, tuple(dict(m) for m in messages), tuple(tools), settings, response_format)
        self.calls.append(call)
        script = self._script_for(path)
        if script is None or not script.steps:
            where = "/".join(path) or "(no agent)"
            why = "has no script" if script is None else "has used up its script"
            message = f"unexpected model call: agent {where} (turn {turn}) {why}"
            self.violations.append(message)
            raise ScriptExhausted(message)
        step = script.steps.popleft()
        try:
            reply = step(call) if callable(step) else step
        except ScriptExhausted as exc:
            self.violations.append(str(exc))
            raise
        if isinstance(reply, str):
            reply = text(reply)
        calls = tuple(
            ToolCall(
                f"call_{turn}_{c.id.removeprefix(_ID_PREFIX)}" if c.id.startswith(_ID_PREFIX) else c.id,
                c.name,
                c.arguments,
            )
            for c in reply.tool_calls
        )
        usage = _usage(call, reply) if reply.usage == Usage() else reply.usage
        return ModelReply(reply.text, calls, usage, reply.cost_usd, reply.model or settings.model, reply.finish_reason)

    def _script_for(self, path: tuple[str, ...]) -> _Script | None:
        full = "/".join(path)
        if full in self._scripts:
            return self._scripts[full]
        return self._scripts.get(path[-1]) if path else None
