"""The one path of a workspace or board change: answered from the journal, else applied, journaled, emitted.

Every change of the run's workspace goes through :func:`apply_change`: an agent's workspace or board tool call
(:mod:`~teamrun.engine.workspace.writes`, :mod:`~teamrun.engine.workspace.board_calls`), a workflow step's
``write:`` (:mod:`teamrun.engine.workflow.workspace`), a task the peer driver posts, expires or takes back from a
peer that ended (:mod:`teamrun.engine.peers.driver`). In this order:

1. a change an earlier attempt of the run made at the same place (:class:`ChangeSite`) is answered from the
   journal — the workspace was restored from the journal when the run began, so it is not applied twice — and
   its event is emitted again, marked ``replayed``;
2. else the caller's ``decide`` applies it through :class:`~teamrun.engine.workspace.state.WorkspaceState`
   (whose one counter gives it its version; a board's operations are rules of the state);
3. it is queued to the journal in the same synchronous step (the journal's order is the order of the versions),
   and the change waits until the journal committed it;
4. only then is its event (``workspace_write`` or ``board_op``) emitted: a version a reader or a peer saw is
   durable, so a run killed at any moment and resumed never hands out an announced version number again (a
   change lost with the kill was never announced; the resume makes it anew).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from teamrun.engine.durability.workspace_entries import ChangeRecord, change_entry
from teamrun.engine.runtime import AgentFrame, RunContext

__all__ = ["ChangeRecord", "ChangeSite", "Made", "apply_change"]


@dataclass(frozen=True)
class ChangeSite:
    """Where a change is journaled, and what it asked (a change asked differently is made again)."""

    invocation: str
    """The agent invocation whose tool call it is, or the place of an engine's change (a step, the peer driver)."""
    index: int
    """The model call whose reply asked it (an engine's change: a number the caller keeps stable across attempts)."""
    position: int
    fingerprint: str
    of_model: bool = True
    """A model's tool call (journal answers stop once its invocation went live), or the engine's own change."""


@dataclass(frozen=True)
class Made:
    """A change's record, and whether it was answered from the journal."""

    record: ChangeRecord
    replayed: bool


async def apply_change(
    ctx: RunContext,
    frame: AgentFrame,
    site: ChangeSite,
    decide: Callable[[], ChangeRecord | None],
    *,
    span_id: str | None = None,
) -> Made | None:
    """Make the change at ``site`` once (see the module). ``decide`` applies it (no I/O) and says what it did;
    ``None`` from it: nothing to do yet (a claim that waits) — nothing is journaled or emitted, and this returns
    ``None`` too. The event is emitted once the journal committed the change (see the module)."""
    journal = ctx.journal
    if journal is not None:
        earlier = journal.replay.change(
            site.invocation, site.index, site.position, site.fingerprint, of_model=site.of_model
        )
        if earlier is not None:
            if earlier.kind is not None and earlier.event is not None:
                frame.emit(ctx, earlier.kind, span_id=span_id, **{**earlier.event, "replayed": True})
            return Made(earlier, True)
    record = decide()
    if record is None:
        return None
    if journal is not None:  # queued in the step that applied it (the versions' order), committed before the event
        await journal.write_now(change_entry(site.invocation, site.index, site.position, site.fingerprint, record))
    if record.kind is not None and record.event is not None:
        frame.emit(ctx, record.kind, span_id=span_id, **record.event)
    return Made(record, False)
