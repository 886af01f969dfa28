"""Delegation hooks: declarative rules from the team file and Python hooks by import path.

A hook runs at one of three points — ``on_start`` (before a delegation),
``on_complete`` (after it), ``on_iteration`` (after each step of the
delegating agent) — and returns a :class:`HookActions` of what to change. A
hook that fails is recorded in the run result and ignored, unless the
agent's hooks say ``on_error: fail``; then :class:`HookFailed` is raised and
the delegation fails.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from teamrun.config import templates
from teamrun.config.imports import ImportProblem, resolve_import_path
from teamrun.config.models import HOOK_MODELS, CompleteHook, Hooks, IterationHook, StartHook, hook_templates
from teamrun.engine.runtime import AgentFrame, RunContext
from teamrun.errors import RunError

HookPoint = Literal["on_start", "on_complete", "on_iteration"]
_TEMPLATE_FIELDS = frozenset(name for point in HOOK_MODELS for name in hook_templates(point))
"""Hook actions whose text is a template (derived from the hook models)."""


class HookFailed(RunError):
    """A hook failed and its agent's hooks say ``on_error: fail``."""


@dataclass
class HookActions:
    """What the hooks that fired asked for. ``None`` means "leave it alone"."""

    reject: str | None = None
    prompt: str | None = None
    append_prompt: list[str] = field(default_factory=list)
    max_steps: int | None = None
    context: dict[str, Any] = field(default_factory=dict)
    result_text: str | None = None
    feedback: list[str] = field(default_factory=list)
    bail: bool = False
    stop: bool = False

    def merge(self, other: Mapping[str, Any]) -> None:
        """Fold one hook's answer in: later hooks win for single values, lists accumulate."""
        for name, value in other.items():
            if value is None:
                continue
            if name not in _ACTION_NAMES:
                raise ValueError(f"unknown hook action '{name}' (known: {', '.join(sorted(_ACTION_NAMES))})")
            if name in ("append_prompt", "feedback"):
                getattr(self, name).extend([value] if isinstance(value, str) else list(value))
            elif name == "context":
                self.context.update(value)
            elif name == "max_steps":
                self.max_steps = int(value) if self.max_steps is None else min(self.max_steps, int(value))
            else:
                setattr(self, name, value)


_ACTION_NAMES = frozenset(f.name for f in fields(HookActions))


@dataclass(frozen=True)
class HookContext:
    """What a Python hook receives (and what ``when`` expressions and hook templates can read)."""

    point: HookPoint
    agent: str
    """For delegation hooks the worker; for ``on_iteration`` the delegating agent."""
    parent: str
    iteration: int
    depth: int
    vars: Mapping[str, Any]
    prompt: str = ""
    success: bool | None = None
    error: str | None = None
    result: str = ""
    messages: Sequence[Mapping[str, Any]] = ()
    status: str | None = None
    """``on_complete``: ``ok``, ``error``, ``budget_exhausted``, ``timeout``, ``rejected`` or ``cancelled``."""
    usage: Mapping[str, int] = field(default_factory=dict)
    """``on_complete``: the worker's token usage."""
    finish_reason: str | None = None
    """``on_complete``: why the worker's last model call ended (``stop``, ``length``...)."""
    tool_results: Sequence[Mapping[str, Any]] = ()
    """``on_complete``: the worker's tool results, ``{tool, content}`` in call order."""
    text: str = ""
    """``on_iteration``: the agent's latest reply text."""
    task_id: str | None = None
    """The delegation's task id, when it is a tracked task."""

    def names(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class HookRunner:
    """Runs one agent's hooks of one kind, in file order."""

    def __init__(self, ctx: RunContext, frame: AgentFrame, hooks: Hooks | None = None) -> None:
        """``hooks``: the hooks of a frame that is no agent of the file (a workflow's steps)."""
        self.ctx = ctx
        self.frame = frame
        delegation = ctx.agent(frame.name).delegation if frame.name in ctx.config.agents else None
        self.hooks: Hooks = hooks or (delegation.hooks if delegation else None) or Hooks()

    def has(self, point: HookPoint) -> bool:
        return bool(getattr(self.hooks, point))

    async def run(self, point: HookPoint, context: HookContext) -> HookActions:
        actions = HookActions()
        entries: Sequence[StartHook | CompleteHook | IterationHook] = getattr(self.hooks, point) or ()
        for index, hook in enumerate(entries):
            label = f"{point}[{index}]"
            try:
                answer = await self._one(hook, context)
                if answer:
                    actions.merge(answer)
                    self.frame.emit(
                        self.ctx,
                        "hook",
                        status="ok",
                        hook=label,
                        agent=self.frame.name,
                        target=context.agent,
                        actions=sorted(k for k, v in answer.items() if v is not None),
                    )
            except Exception as exc:  # a hook is user code: never let it take the run down
                self._record(label, context, exc)
                if self.hooks.on_error == "fail":
                    raise HookFailed(
                        f"hook agents.{self.frame.name}.delegation.hooks.{label} failed: {type(exc).__name__}: {exc}"
                    ) from exc
        self.frame.feedback.extend(actions.feedback)  # the one writer of a frame's feedback
        return actions

    async def _one(self, hook: StartHook | CompleteHook | IterationHook, context: HookContext) -> dict[str, Any]:
        names = context.names()
        if hook.when is not None and not templates.compile_condition(hook.when)(**names):
            return {}
        answer: dict[str, Any] = {}
        for name, value in hook.model_dump(exclude={"when", "call"}, exclude_none=True).items():
            answer[name] = templates.render(value, names) if name in _TEMPLATE_FIELDS else value
        if hook.call is not None:
            answer.update(await self._call(hook.call, context))
        return answer

    async def _call(self, reference: str, context: HookContext) -> dict[str, Any]:
        try:
            function = resolve_import_path(reference, base_dir=self.ctx.base_dir)
        except ImportProblem as exc:
            raise RuntimeError(str(exc)) from None
        if inspect.iscoroutinefunction(function):
            value = await function(context)
        else:
            value = await asyncio.to_thread(function, context)
            if inspect.isawaitable(value):
                value = await value
        if value is None:
            return {}
        if isinstance(value, HookActions):
            return {f.name: getattr(value, f.name) for f in fields(value)}
        if isinstance(value, Mapping):
            return dict(value)
        raise TypeError(f"hook {reference} returned {type(value).__name__}; return None, a dict or HookActions")

    def _record(self, label: str, context: HookContext, exc: Exception) -> None:
        entry = {
            "hook": label,
            "agent": self.frame.name,
            "target": context.agent,
            "message": f"{type(exc).__name__}: {exc}",
        }
        self.ctx.record_hook_error(entry)
        self.frame.emit(self.ctx, "hook", status="error", **entry)


def start_context(ctx: RunContext, frame: AgentFrame, worker: str, prompt: str) -> HookContext:
    return HookContext("on_start", worker, frame.name, frame.ledger.spend.steps, frame.depth, ctx.vars, prompt=prompt)


def complete_context(
    start: HookContext,
    *,
    status: str,
    error: str | None,
    result: str,
    messages: Sequence[Mapping[str, Any]],
    usage: Mapping[str, int],
    finish_reason: str | None,
) -> HookContext:
    return replace(
        start,
        point="on_complete",
        success=status == "ok",
        status=status,
        error=error,
        result=result,
        messages=messages,
        usage=usage,
        finish_reason=finish_reason,
        tool_results=tool_results(messages),
    )


def iteration_context(ctx: RunContext, frame: AgentFrame, messages: Sequence[Mapping[str, Any]]) -> HookContext:
    text = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "assistant"), "")
    return HookContext(
        "on_iteration",
        frame.name,
        frame.name,
        frame.ledger.spend.steps,
        frame.depth,
        ctx.vars,
        messages=messages,
        text=text,
    )


def tool_results(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The tool results in a conversation, ``{tool, content}`` in call order (delegations included)."""
    names: dict[str, str] = {}
    found: list[dict[str, Any]] = []
    for message in messages:
        for call in message.get("tool_calls") or ():
            names[call.get("id", "")] = call.get("function", {}).get("name", "")
        if message.get("role") == "tool":
            found.append({"tool": names.get(message.get("tool_call_id", ""), ""), "content": message.get("content")})
    return found
