"""An agent's workspace tool call: parsed, then made through the one change path, in a ``tool`` span.

:func:`run_workspace_call` runs a ``workspace_read``, ``workspace_changes`` or ``workspace_write_<entry>`` call of
an agent through :func:`~teamrun.engine.workspace.changes.apply_change`: a call an earlier attempt of the run
finished is answered from the journal (the workspace itself was restored from the journal when the run began,
so the write is not applied twice); otherwise it runs, is journaled in the same step (for an applied write,
with the entry's new state) and every write, applied or refused, is a ``workspace_write`` event.
:func:`restore_from_journal` starts a resumed run's workspace from the journal.
"""

from __future__ import annotations

import json
from typing import Any

from teamrun.conventions import WORKSPACE_WRITE_PREFIX
from teamrun.engine.durability.journal import tool_hash
from teamrun.engine.runtime import AgentFrame, RunContext
from teamrun.engine.workspace.changes import ChangeRecord, ChangeSite, apply_change
from teamrun.engine.workspace.state import WorkspaceState, WriteOutcome
from teamrun.engine.workspace.tools import access, parse_call
from teamrun.llm.types import ToolCall, parse_arguments

__all__ = ["refused_write_event", "restore_from_journal", "run_workspace_call", "write_fields"]


def restore_from_journal(workspace: WorkspaceState, ctx: RunContext) -> int:
    """Start a resumed run's workspace from the changes its earlier attempts applied; returns its version."""
    if ctx.journal is not None:
        workspace.restore(ctx.journal.replay.workspace_states())
    return workspace.version


async def run_workspace_call(ctx: RunContext, frame: AgentFrame, call: ToolCall, turn: int, position: int) -> str:
    """The result text of ``call`` (the ``position``-th of the reply of model call ``turn``) for the model."""
    with frame.span(ctx, "tool", tool=call.name) as span:
        span.end["tool"] = call.name
        site = ChangeSite(frame.key, turn, position, tool_hash(call.name, call.arguments))
        made = await apply_change(ctx, frame, site, lambda: _decide(ctx, frame, call), span_id=span.id)
        assert made is not None  # a workspace call never waits
        content, ok = made.record.content, made.record.ok
        span.end.update(tool=call.name, status="ok" if ok else "error", chars=len(content))
        if not ok:  # refused: the tool_end says why, as a tool's error does
            span.end["error"] = _refusal_text(content)
    return content


def refused_write_event(ctx: RunContext, tool: str, problem: str) -> dict[str, Any] | None:
    """The ``workspace_write`` event's fields (reason ``arguments``) of a write tool call refused before its
    arguments were read (out of the bounds of :mod:`teamrun.bounds`); ``None`` for a read or without a workspace.
    Nothing changed and nothing is journaled: the same reply is refused again on a resume."""
    if ctx.workspace is None or not tool.startswith(WORKSPACE_WRITE_PREFIX):
        return None
    return _malformed(ctx, tool, problem)[1]


def _refusal_text(content: str) -> str:
    """A refusal's message, from the JSON the model reads (else the text itself)."""
    try:
        shown = json.loads(content)
    except ValueError:
        return content
    return str(shown.get("message") or content) if isinstance(shown, dict) else content


def _decide(ctx: RunContext, frame: AgentFrame, call: ToolCall) -> ChangeRecord:
    """Run ``call`` on the workspace: what it did."""
    workspace = ctx.workspace
    assert workspace is not None and ctx.config.workspace is not None
    try:
        request = parse_call(
            call.name, parse_arguments(call.arguments), access(ctx.config, frame.name), ctx.config.workspace.entries
        )
    except ValueError as exc:  # a refusal like any other (reason `arguments`); a malformed write is an event too
        content, event = _malformed(ctx, call.name, str(exc))
        return ChangeRecord(content, False, "workspace_write" if event is not None else None, event)
    if request.op == "read":
        assert request.entry is not None
        return ChangeRecord(_json(workspace.read(request.entry)), True)
    if request.op == "changes":
        readable = access(ctx.config, frame.name).read
        return ChangeRecord(_json(workspace.changes(request.since, readable)), True)
    assert request.entry is not None
    outcome = workspace.write(request.entry, frame.name, request.value, version=request.version)
    event = write_fields(outcome, ctx.config.workspace.entries[request.entry].merge)
    return ChangeRecord(_json(outcome.for_model()), outcome.applied, "workspace_write", event, outcome.state)


def _malformed(ctx: RunContext, tool: str, problem: str) -> tuple[str, dict[str, Any] | None]:
    """The refusal of a call whose arguments could not be read, and for a write tool its event's fields."""
    workspace = ctx.workspace
    assert workspace is not None
    message = f"{problem}; call {tool} again with corrected arguments"
    if not tool.startswith(WORKSPACE_WRITE_PREFIX):
        return _json({"status": "refused", "reason": "arguments", "message": message}), None
    entry = tool.removeprefix(WORKSPACE_WRITE_PREFIX)
    known = workspace.entries.get(entry)
    version = known.version if known is not None else workspace.version
    rule = workspace.spec.entries[entry].merge if known is not None else ""
    event = {
        "entry": entry,
        "rule": rule,
        "status": "refused",
        "reason": "arguments",
        "version_before": version,
        "version_after": version,
        "message": message,
    }
    refusal = {"status": "refused", "entry": entry, "version": version, "reason": "arguments", "message": message}
    return _json(refusal), event


def write_fields(outcome: WriteOutcome, rule: str) -> dict[str, Any]:
    """A ``workspace_write`` event's fields."""
    return {
        "entry": outcome.entry,
        "rule": rule,
        "status": outcome.status,
        "reason": outcome.reason,
        "version_before": outcome.version_before,
        "version_after": outcome.version_after,
        "message": outcome.message,
        "value_after": outcome.current if outcome.applied else None,  # content; a refusal never echoes a value
    }


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
