"""A workflow's own reads and writes of the ``workspace:``, journaled so a resumed run reads and writes the same.

- :func:`step_view`: the entries' values as a step starts, for its templates
  (``{{ workspace.findings }}``). With a journal, the values are journaled under
  the step's key; a resumed run renders the step from the values the earlier
  attempt read (not from the workspace as the killed attempt left it), so the
  step's request is the same and its calls are answered from the journal.
- :func:`write_step_output`: a step's ``write: <entry>``, applied when the step
  ends by the workflow itself (writer ``workflow``) with the entry's merge rule,
  schema and caps (the entry's ``write:`` list is for agents and does not
  apply). An applied write is journaled in the same step that applied it, with
  the entry's new state (which a resume restores the workspace from); a resumed
  run that finds it does not apply it again. Every write is a
  ``workspace_write`` event naming the step.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from teamrun.engine.durability.journal import EntryKey, JournalEntry, tool_hash
from teamrun.engine.runtime import AgentFrame, RunContext
from teamrun.engine.workflow.outputs import StepOutput
from teamrun.engine.workspace.state import WriteOutcome

__all__ = ["StepWrite", "step_value", "step_view", "write_step_output"]

_READ = "!workspace"
_WRITE = "!write"


def _key(step_key: str, suffix: str) -> EntryKey:
    return EntryKey(f"{step_key}{suffix}", 0, "tool", 0)


def step_view(ctx: RunContext, step_key: str) -> dict[str, Any]:
    """Every entry's value as the step at ``step_key`` starts (what ``workspace`` holds in its templates)."""
    workspace, journal = ctx.workspace, ctx.journal
    if workspace is None:
        return {}
    key = _key(step_key, _READ)
    if journal is not None:
        earlier = journal.replay.entries.get(key)
        if earlier is not None and isinstance(earlier.payload.get("values"), dict):
            return copy.deepcopy(dict(earlier.payload["values"]))
    values = {name: copy.deepcopy(entry.value) for name, entry in workspace.entries.items()}
    if journal is not None:
        fingerprint = tool_hash("workspace_view", step_key)
        journal.write(JournalEntry(key, fingerprint, {"ok": True, "content": "", "values": values}))
    return values


def step_value(out: StepOutput, *, mapped: bool) -> Any:
    """What a step writes: its output (parsed when its agent has an ``output_schema``); a map's items' outputs,
    the failed items left out."""
    if mapped and isinstance(out.output, list):
        return [item for item, error in zip(out.output, _failed(out), strict=True) if not error]
    return out.output


def _failed(out: StepOutput) -> list[bool]:
    failed = {int(e["index"]) for e in out.errors if isinstance(e.get("index"), int)}
    return [i in failed for i in range(len(out.output))]


@dataclass(frozen=True)
class StepWrite:
    """What a step's ``write:`` did: applied (maybe changing nothing), replayed from the journal, or refused."""

    entry: str
    applied: bool
    replayed: bool = False
    reason: str | None = None
    message: str = ""


def write_step_output(
    ctx: RunContext, frame: AgentFrame, *, step: str, step_key: str, entry: str, value: Any
) -> StepWrite:
    """Write ``value`` (what :func:`step_value` gave) to ``entry`` for the step ``step`` as the workflow frame."""
    workspace, journal, spec = ctx.workspace, ctx.journal, ctx.config.workspace
    if workspace is None or spec is None or entry not in spec.entries:  # teamrun validate says so first
        return StepWrite(entry, False, reason="arguments", message=f"the workspace has no entry '{entry}'")
    if spec.entries[entry].kind == "board":  # (teamrun validate too) only the board tools change its tasks
        return StepWrite(entry, False, reason="permission", message=f"'{entry}' is a board: only its tools change it")
    rule = spec.entries[entry].merge
    key = _key(step_key, _WRITE)
    if journal is not None:
        earlier = journal.replay.entries.get(key)
        event = earlier.payload.get("event") if earlier is not None else None
        if isinstance(event, dict):  # applied by an earlier attempt: the workspace was restored with it
            frame.emit(ctx, "workspace_write", **{**event, "replayed": True})
            return StepWrite(entry, True, replayed=True, message=str(event.get("message") or ""))
    current = workspace.entries[entry].version
    arguments = value if rule != "append" or isinstance(value, list) else [value]  # append: a list of items
    outcome = workspace.write(entry, frame.name, arguments, version=current, declared=True)
    event = _event(outcome, rule, step)
    frame.emit(ctx, "workspace_write", **event)
    if outcome.applied and journal is not None:  # queued in the step that applied it: the writes keep their order
        content = json.dumps(outcome.for_model(), ensure_ascii=False)
        payload: dict[str, Any] = {"ok": True, "content": content, "event": event}
        if outcome.state is not None:
            payload["workspace"] = {"event": event, "state": outcome.state}
        journal.write(JournalEntry(key, tool_hash("workspace_step_write", step_key), payload))
    return StepWrite(entry, outcome.applied, reason=outcome.reason, message=outcome.message)


def _event(outcome: WriteOutcome, rule: str, step: str) -> dict[str, Any]:
    return {
        "entry": outcome.entry,
        "rule": rule,
        "status": outcome.status,
        "reason": outcome.reason,
        "version_before": outcome.version_before,
        "version_after": outcome.version_after,
        "message": outcome.message,
        "step": step,
        "value_after": outcome.current if outcome.applied else None,  # content: in traces only with it on
    }
