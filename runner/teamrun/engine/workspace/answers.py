"""A worker's answer written to a workspace entry by declaration (``answer_to:``), with no tool call.

An agent with ``answer_to: <entry>`` that answers as a worker (a delegation, a peer) has its answer written to
the entry through the one change path (:func:`~teamrun.engine.workspace.changes.apply_change`): by the team
file, like a workflow step's ``write:`` (the entry's merge rule, schema and caps apply, its ``write:`` list does
not; the answer is parsed when the agent has an ``output_schema``, and ``append`` adds it as one item, or a
list answer's items), journaled, a
``workspace_write`` event of the worker. Whoever delegated reads a one-line receipt instead of the answer: the
answer reaches those who read the entry, not the delegating agent's conversation. A refused write leaves the
answer where it was (the caller gets it) and says why as a run warning. Like a step's ``write:``, a worker
invocation's answer is written once: a resumed run finds the write in the journal and does not make it again.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from teamrun.engine.durability.journal import tool_hash
from teamrun.engine.result import DelegationResult
from teamrun.engine.runtime import AgentFrame, RunContext
from teamrun.engine.workspace.changes import ChangeRecord, ChangeSite, apply_change
from teamrun.engine.workspace.writes import write_fields

__all__ = ["ANSWER_POSITION", "answer_to_entry"]

ANSWER_POSITION = 1
"""Where a declared answer is journaled: under the worker's invocation, before its first model call (index 0), at
position 1 (a workflow step's own ``write:`` is position 0 under the same key)."""


async def answer_to_entry(ctx: RunContext, frame: AgentFrame, result: DelegationResult) -> DelegationResult | None:
    """Write ``result``'s answer (the worker of ``frame``) to its ``answer_to`` entry; the result its caller reads
    instead (a receipt), or ``None`` when nothing is declared, the worker did not answer, or the write was refused."""
    entry = ctx.agent(frame.name).answer_to
    if entry is None or result.status != "ok":
        return None
    spec = ctx.config.workspace
    if ctx.workspace is None or spec is None or entry not in spec.entries or spec.entries[entry].kind == "board":
        ctx.warn(frame, f"agents.{frame.name}.answer_to: the workspace has no entry '{entry}' to write the answer to")
        return None
    site = ChangeSite(frame.key, 0, ANSWER_POSITION, tool_hash("answer_to", frame.key), of_model=False)  # once
    made = await apply_change(ctx, frame, site, lambda: _write(ctx, frame, entry, _value(ctx, frame, result.response)))
    assert made is not None  # a declared write never waits
    event = made.record.event or {}
    if not made.record.ok:
        ctx.warn(frame, f"agents.{frame.name}.answer_to: the answer was not written: {event.get('message', '')}")
        return None
    receipt = (
        f"{frame.name} wrote its answer ({len(result.response)} characters) to workspace entry '{entry}' "
        f"(version {event.get('version_after')}); read it there."
    )
    return replace(result, response=receipt)


def _value(ctx: RunContext, frame: AgentFrame, response: str) -> Any:
    """The answer as the entry takes it: the parsed JSON of a structured answer (an agent with an
    ``output_schema``), else its text."""
    if ctx.agent(frame.name).output_schema is None:
        return response
    try:
        return json.loads(response)
    except ValueError:
        return response


def _write(ctx: RunContext, frame: AgentFrame, entry: str, value: Any) -> ChangeRecord:
    """The declared write, applied through the state (by the team file: ``declared``)."""
    workspace = ctx.workspace
    assert workspace is not None
    rule = workspace.spec.entries[entry].merge
    arguments = (value if isinstance(value, list) else [value]) if rule == "append" else value
    outcome = workspace.write(entry, frame.name, arguments, version=workspace.entries[entry].version, declared=True)
    shown = json.dumps(outcome.for_model(), ensure_ascii=False)
    return ChangeRecord(shown, outcome.applied, "workspace_write", write_fields(outcome, rule), outcome.state)
