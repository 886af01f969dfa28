"""The delegation tools a delegating agent is offered, and reading the calls it makes.

Delegation is a tool call. ``per_agent`` gives one ``ask_<worker>`` tool per
worker (the worker's description is the tool's); ``delegate_task`` gives one
tool whose ``agents`` argument is an enum of the allowed names. Names a model
invents are dropped with a warning; only when none is left is it an error the
model sees.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from teamrun.config.models import Delegation, TeamConfig
from teamrun.config.tool_names import CANCEL_TASK, CHECK_TASKS, DELEGATE_TASK, WAIT_FOR, delegation_tool_name
from teamrun.engine.references import REFS_PARAMETER, RefRequest, parse_requests
from teamrun.engine.result import DelegationResult
from teamrun.engine.runtime import AgentFrame, RunContext
from teamrun.llm.types import ToolSchema, function_tool

_TASK = {"type": "string", "description": "The sub-task, with everything the worker needs: it sees nothing else."}
_CONTEXT = {"type": "string", "description": "Optional background from your conversation to pass along."}


@dataclass(frozen=True)
class WorkerInfo:
    """A worker as the delegating agent's prompt describes it."""

    name: str
    description: str
    tool: str


@dataclass(frozen=True)
class DelegationRequest:
    """One delegation call, parsed: who, what, and what to hand along."""

    targets: list[str]
    task: str
    context: str | None = None
    refs: tuple[RefRequest, ...] = ()
    max_tool_calls: int | None = None
    expected_output: str | None = None
    task_id: str | None = None
    follow_up_of: str | None = None
    tools: tuple[str, ...] | None = None
    """A subset of the worker's declared tools for this task only (``None``: all of them)."""
    step: str | None = None
    """The workflow step this delegation runs (``None``: an agent's delegation)."""

    @property
    def tracked(self) -> bool:
        """Whether this delegation is a tracked task (it uses a task-contract field)."""
        return bool(self.expected_output or self.task_id or self.follow_up_of)


def delegation_settings(config: TeamConfig, agent: str) -> Delegation:
    return config.agents[agent].delegation or Delegation()


def workers_of(config: TeamConfig, agent: str) -> list[WorkerInfo]:
    return [
        WorkerInfo(name, config.agents[name].description or f"The {name} agent.", delegation_tool_name(name))
        for name in config.agents[agent].delegates_to or []
    ]


_MAX_TOOL_CALLS = {
    "type": "integer",
    "minimum": 0,
    "description": "Optional cap on the tool calls the worker may make for this task.",
}
_EXPECTED = {
    "type": "string",
    "description": "What a good result looks like (form, scope, checks); makes this a tracked task.",
}
_TASK_ID = {
    "type": "string",
    "pattern": "^[A-Za-z0-9_.-]{1,48}$",
    "description": "Optional short id to track this task by (given one if you set expected_output).",
}
_FOLLOW_UP = {
    "type": "string",
    "description": "The id of an earlier task this call continues; the worker gets "
    "its previous answer and your new instructions in `task`.",
}


def _tools_parameter(names: list[str]) -> dict[str, Any]:
    return {
        "type": "array",
        "items": {"type": "string", "enum": names},
        "uniqueItems": True,
        "description": "Optional: only these of the worker's tools for this task (never more than it has).",
    }


def declared_tools(config: TeamConfig, worker: str) -> list[str]:
    """The tool entries the team file grants ``worker``."""
    return list(config.agents[worker].tools or [])


def delegation_tools(config: TeamConfig, agent: str) -> list[ToolSchema]:
    """The delegation tools offered to ``agent`` (none when it has no workers)."""
    workers = workers_of(config, agent)
    if not workers:
        return []
    settings = delegation_settings(config, agent)
    extra: dict[str, Any] = {
        "max_tool_calls": _MAX_TOOL_CALLS,
        "expected_output": _EXPECTED,
        "task_id": _TASK_ID,
        "follow_up_of": _FOLLOW_UP,
    }
    if settings.result_references:
        extra["context_from_refs"] = REFS_PARAMETER
    if settings.tool == "delegate_task":
        names = [w.name for w in workers]
        listing = "; ".join(f"{w.name}: {w.description}" for w in workers)
        granted = list(dict.fromkeys(t for w in workers for t in declared_tools(config, w.name)))
        if granted:
            extra["tools"] = _tools_parameter(granted)
        return [
            function_tool(
                DELEGATE_TASK,
                f"Delegate a sub-task to one or more workers (each runs it separately, in parallel). {listing}",
                {
                    "task": _TASK,
                    "agents": {
                        "type": "array",
                        "items": {"type": "string", "enum": names},
                        "minItems": 1,
                        "description": "Which workers should do this task.",
                    },
                    "context": _CONTEXT,
                    **extra,
                },
                ["task", "agents"],
            )
        ]
    offered: list[ToolSchema] = []
    for w in workers:
        granted = declared_tools(config, w.name)
        narrowing = {"tools": _tools_parameter(granted)} if granted else {}
        offered.append(
            function_tool(w.tool, w.description, {"task": _TASK, "context": _CONTEXT, **extra, **narrowing}, ["task"])
        )
    return offered


def parse_request(
    ctx: RunContext, frame: AgentFrame, worker: str | None, arguments: dict[str, Any]
) -> DelegationRequest:
    """A delegation call's arguments, checked. Raises ``ValueError`` with a message for the model.

    ``worker``: the target of an ``ask_<worker>`` call; ``None`` for ``delegate_task`` (named in ``agents``).
    """
    targets = [worker] if worker is not None else delegation_targets(ctx, frame, arguments)
    task = arguments.get("task")
    if not isinstance(task, str) or not task.strip():
        raise ValueError("'task' must be a non-empty string describing the sub-task")
    context = arguments.get("context") if isinstance(arguments.get("context"), str) else None
    cap = arguments.get("max_tool_calls")
    cap = cap if isinstance(cap, int) and not isinstance(cap, bool) and cap >= 0 else None
    task_id, follow_up_of, expected = (_text(arguments, key) for key in ("task_id", "follow_up_of", "expected_output"))
    if task_id is not None and not _TASK_ID_RE.match(task_id):
        raise ValueError("'task_id' must be 1-48 letters, digits, '_', '.' or '-'")
    if follow_up_of is not None and len(targets) != 1:
        raise ValueError("a follow-up ('follow_up_of') goes to one worker: the one that did the task")
    return DelegationRequest(
        targets,
        task,
        context or None,
        tuple(parse_requests(arguments.get("context_from_refs"))),
        cap,
        expected,
        task_id,
        follow_up_of,
        narrowed_tools(ctx, targets, arguments.get("tools")),
    )


_TASK_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,48}$")


def _text(arguments: dict[str, Any], key: str) -> str | None:
    value = arguments.get(key)
    return value.strip() or None if isinstance(value, str) else None


def narrowed_tools(ctx: RunContext, targets: list[str], requested: Any) -> tuple[str, ...] | None:
    """The tool subset a call asks for, checked against every target's declared tools (never more)."""
    if requested is None:
        return None
    if isinstance(requested, str):
        requested = [requested]
    if not isinstance(requested, list) or not all(isinstance(t, str) for t in requested):
        raise ValueError("'tools' must be a list of tool names")
    for worker in targets:
        granted = declared_tools(ctx.config, worker)
        extra = [t for t in requested if t not in granted]
        if extra:
            raise ValueError(
                f"{worker} cannot be given {', '.join(repr(t) for t in extra)}: a task may only narrow "
                f"the worker's own tools ({', '.join(granted) or 'none'})"
            )
    return tuple(dict.fromkeys(requested))


def delegation_targets(ctx: RunContext, frame: AgentFrame, arguments: dict[str, Any]) -> list[str]:
    """Which workers a ``delegate_task`` call names; invented names are dropped with a warning.

    Raises ``ValueError`` (a message for the model) when no allowed worker is named.
    """
    allowed = list(ctx.agent(frame.name).delegates_to or [])
    requested = arguments.get("agents")
    if isinstance(requested, str):
        requested = [requested]
    if not isinstance(requested, list) or not requested:
        raise ValueError(f"'agents' must list one or more of: {', '.join(allowed)}")
    targets: list[str] = []
    for name in requested:
        if name in allowed:
            if name not in targets:
                targets.append(name)
        else:
            ctx.warn(frame, f"{frame.name} asked for unknown agent '{name}'; ignored (allowed: {', '.join(allowed)})")
    if not targets:
        raise ValueError(f"none of {requested} is a worker you can delegate to; choose from: {', '.join(allowed)}")
    return targets


def results_for_model(results: list[DelegationResult], *, single: bool) -> str:
    shown: Any = results[0].for_model() if single and len(results) == 1 else [r.for_model() for r in results]
    return json.dumps(shown, ensure_ascii=False, indent=1)


def background_tools() -> list[ToolSchema]:
    """The schemas of ``wait_for``, ``check_tasks`` and ``cancel_task``."""
    return [
        function_tool(
            WAIT_FOR,
            "Wait until the given background tasks finish (or the timeout passes); returns their "
            "results, or `running` for those still going.",
            {
                "handles": {
                    "type": "array",
                    "items": {"type": "string"},
                    "minItems": 1,
                    "description": "Handles returned by delegation tools.",
                },
                "timeout_s": {
                    "type": "number",
                    "minimum": 0,
                    "description": "Most seconds to wait (default: until they finish).",
                },
            },
            ["handles"],
        ),
        function_tool(
            CHECK_TASKS, "The status of every background task (running, or its result), without waiting.", {}, []
        ),
        function_tool(
            CANCEL_TASK,
            "Cancel a running background task; its worker is stopped.",
            {"handle": {"type": "string", "description": "The task's handle."}},
            ["handle"],
        ),
    ]
