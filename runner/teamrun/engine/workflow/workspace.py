"""A workflow's own reads and writes of the ``workspace:``, journaled so a resumed run reads and writes the same.

- :func:`step_view`: the entries' values as a step starts, for its templates
  (``{{ workspace.findings }}``). With a journal, the values are journaled under
  the step's key (a ``workspace_view`` entry); a resumed run renders the step
  from the values the earlier attempt read (not from the workspace as the
  killed attempt left it), so the step's request is the same and its calls are
  answered from the journal.
- :func:`write_step_output`: a step's ``write: <entry>``, applied when the step
  ends by the workflow itself (writer ``workflow``) with the entry's merge rule,
  schema and caps (the entry's ``write:`` list is for agents and does not
  apply), through the one change path
  (:func:`~teamrun.engine.workspace.changes.apply_change`): answered from the
  journal when an earlier attempt made it, else applied, journaled with the
  entry's new state, and a ``workspace_write`` event naming the step.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from teamrun.engine.durability.journal import tool_hash
from teamrun.engine.durability.workspace_entries import view_entry
from teamrun.engine.runtime import AgentFrame, RunContext
from teamrun.engine.workflow.outputs import StepOutput
from teamrun.engine.workspace.changes import ChangeRecord, ChangeSite, apply_change
from teamrun.engine.workspace.writes import write_fields

__all__ = ["StepWrite", "step_value", "step_view", "write_step_output"]


def step_view(ctx: RunContext, step_key: str) -> dict[str, Any]:
    """Every entry's value as the step at ``step_key`` starts (what ``workspace`` holds in its templates)."""
    workspace, journal = ctx.workspace, ctx.journal
    if workspace is None:
        return {}
    if journal is not None:
        earlier = journal.replay.step_view(step_key)
        if earlier is not None:
            return copy.deepcopy(earlier)
    values = {name: copy.deepcopy(entry.value) for name, entry in workspace.entries.items()}
    if journal is not None:
        journal.write(view_entry(step_key, tool_hash("workspace_view", step_key), values))
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


async def write_step_output(
    ctx: RunContext, frame: AgentFrame, *, step: str, step_key: str, entry: str, value: Any
) -> StepWrite:
    """Write ``value`` (what :func:`step_value` gave) to ``entry`` for the step ``step`` as the workflow frame."""
    workspace, spec = ctx.workspace, ctx.config.workspace
    if workspace is None or spec is None or entry not in spec.entries:  # teamrun validate says so first
        return StepWrite(entry, False, reason="arguments", message=f"the workspace has no entry '{entry}'")
    if spec.entries[entry].kind == "board":  # (teamrun validate too) only the board tools change its tasks
        return StepWrite(entry, False, reason="permission", message=f"'{entry}' is a board: only its tools change it")
    rule = spec.entries[entry].merge

    def write() -> ChangeRecord:
        current = workspace.entries[entry].version
        arguments = value if rule != "append" or isinstance(value, list) else [value]  # append: a list of items
        outcome = workspace.write(entry, frame.name, arguments, version=current, declared=True)
        event = {**write_fields(outcome, rule), "step": step}
        return ChangeRecord(
            json.dumps(outcome.for_model(), ensure_ascii=False),
            outcome.applied,
            "workspace_write",
            event,
            outcome.state,
        )

    site = ChangeSite(step_key, 0, 0, tool_hash("workspace_step_write", step_key), of_model=False)
    made = await apply_change(ctx, frame, site, write)
    assert made is not None  # a step's write never waits
    event = made.record.event or {}
    reason = event.get("reason")
    return StepWrite(
        entry, made.record.ok, made.replayed, str(reason) if reason else None, str(event.get("message") or "")
    )
