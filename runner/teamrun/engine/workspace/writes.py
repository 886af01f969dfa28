"""The one path of a workspace tool call: parsed, replayed or applied, journaled, emitted.

:func:`run_workspace_call` runs a ``workspace_read``, ``workspace_changes`` or
``workspace_write_<entry>`` call of an agent in a ``tool`` span. With a journal,
a call an earlier attempt of the run finished is answered from the journal
(the workspace itself was restored from the journal when the run began, so the
write is not applied twice); otherwise it runs, and its result — for an applied
write, the entry's new state — is queued to the journal in the same step that
applied it, so the journal's order is the order of the writes. Every write,
applied or refused, is a ``workspace_write`` event.
"""

from __future__ import annotations

import json
from typing import Any

from teamrun.conventions import WORKSPACE_WRITE_PREFIX
from teamrun.engine.durability.journal import EntryKey, JournalEntry, tool_hash
from teamrun.engine.runtime import AgentFrame, RunContext
from teamrun.engine.workspace.state import WorkspaceState, WriteOutcome
from teamrun.engine.workspace.tools import access, parse_call
from teamrun.llm.types import ToolCall, parse_arguments

__all__ = ["restore_from_journal", "run_workspace_call"]


def restore_from_journal(workspace: WorkspaceState, ctx: RunContext) -> None:
    """Start a resumed run's workspace from the writes its earlier attempts applied."""
    if ctx.journal is None:
        return
    workspace.restore(
        entry.payload["workspace"]["state"]
        for entry in ctx.journal.replay.entries.values()
        if isinstance(entry.payload.get("workspace"), dict) and entry.payload["workspace"].get("state")
    )


async def run_workspace_call(ctx: RunContext, frame: AgentFrame, call: ToolCall, turn: int, position: int) -> str:
    """The result text of ``call`` (the ``position``-th of the reply of model call ``turn``) for the model."""
    with frame.span(ctx, "tool", tool=call.name) as span:
        span.end["tool"] = call.name
        content, ok = _run(ctx, frame, call, turn, position, span.id)
        span.end.update(tool=call.name, status="ok" if ok else "error", chars=len(content))
    return content


def _run(
    ctx: RunContext, frame: AgentFrame, call: ToolCall, turn: int, position: int, span_id: str
) -> tuple[str, bool]:
    workspace, journal = ctx.workspace, ctx.journal
    assert workspace is not None and ctx.config.workspace is not None
    key = EntryKey(frame.key, turn, "tool", position)
    fingerprint = tool_hash(call.name, call.arguments)
    if journal is not None:
        replayed = journal.replay.tool(frame.key, turn, position, fingerprint)
        if replayed is not None:
            earlier = journal.replay.entries[key].payload.get("workspace")
            if isinstance(earlier, dict) and earlier.get("event"):
                _emit(ctx, frame, span_id, {**earlier["event"], "replayed": True})
            return replayed.content, replayed.ok
    payload: dict[str, Any] = {}
    try:
        request = parse_call(
            call.name, parse_arguments(call.arguments), access(ctx.config, frame.name), ctx.config.workspace.entries
        )
    except ValueError as exc:  # a refusal like any other (reason `arguments`); a malformed write is an event too
        content, event = _malformed(ctx, call.name, str(exc))
        ok = False
        if event is not None:
            payload = {"event": event, "state": None}
            _emit(ctx, frame, span_id, event)
    else:
        if request.op == "read":
            assert request.entry is not None
            content, ok = _json(workspace.read(request.entry)), True
        elif request.op == "changes":
            readable = access(ctx.config, frame.name).read
            content, ok = _json(workspace.changes(request.since, readable)), True
        else:
            assert request.entry is not None
            outcome = workspace.write(request.entry, frame.name, request.value, version=request.version)
            event = _event_fields(outcome, ctx.config.workspace.entries[request.entry].merge)
            payload = {"event": event, "state": outcome.state}
            _emit(ctx, frame, span_id, event)
            content, ok = _json(outcome.for_model()), outcome.applied
    if journal is not None:  # queued in the step that applied the write: the journal keeps the writes' order
        record: dict[str, Any] = {"ok": ok, "content": content, "error": None if ok else content}
        if payload:
            record["workspace"] = payload
        journal.write(JournalEntry(key, fingerprint, record))
    return content, ok


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


def _event_fields(outcome: WriteOutcome, rule: str) -> dict[str, Any]:
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


def _emit(ctx: RunContext, frame: AgentFrame, span_id: str, fields: dict[str, Any]) -> None:
    frame.emit(ctx, "workspace_write", span_id=span_id, **fields)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
