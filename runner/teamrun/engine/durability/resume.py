"""Resuming a run: earlier attempts' journal entries answer the calls that finished, the rest runs live.

Resume is a partial replay. For each model call the engine asks
:meth:`Replay.model` with the invocation, the call number and the request's
hash: an entry with the same key *and* hash is returned (not paid again, but
still charged to the run's limits, so a resumed run cannot spend past them);
anything else is a miss, and from its first miss on that invocation runs live
(its later entries belong to a conversation that no longer happens). Tool
results replay the same way, keyed by the call that asked for them.

A tool that is not idempotent and was started but never finished (the run was
killed while it ran) is not run again unless the person resuming confirms it:
:func:`open_resume` raises :class:`ResumeNeedsConfirmation` listing those calls.

The calls that run live start where the journal says the run was answered: :func:`hold_open_failed_models`
holds open the circuit breaker of each model of a fallback list that the journal last saw fail, for the rest of
its cool-down (docs/models.md, "Resume and replay").
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass

from teamrun.engine.durability.journal import EntryKey, JournalBackend, JournaledRun, JournalEntry, RunJournal
from teamrun.engine.durability.pending import CLAIMED_HERE
from teamrun.engine.durability.replay import Replay
from teamrun.errors import UsageError
from teamrun.llm.breaker import BreakerRegistry
from teamrun.llm.fallbacks import hold_open_from_journal
from teamrun.logs import get_logger
from teamrun.secrets import unmask

__all__ = [
    "PendingTool",
    "Replay",
    "ResumeNeedsConfirmation",
    "RunBusy",
    "hold_open_failed_models",
    "open_resume",
    "pending_tools",
]

_log = get_logger(__name__)


class RunBusy(UsageError):
    """Another live process holds the run (it runs it, or resumes it): this one may not continue it now."""


class ResumeNeedsConfirmation(UsageError):
    """Resuming would run again a tool that is not idempotent and may have run halfway."""

    def __init__(self, run_id: str, pending: Sequence[PendingTool], *, confirm_with: str | None = None) -> None:
        self.run_id = run_id
        self.pending = list(pending)
        lines = "\n".join(f"  - {p.describe()}" for p in pending)
        command = confirm_with or f"teamrun resume {run_id} --yes"
        super().__init__(
            f"run {run_id} was stopped while {len(pending)} tool call(s) that are not idempotent were running:\n"
            f"{lines}\nResuming runs them again. Confirm with `{command}` (or answer the "
            f"prompt on a terminal); mark a tool `idempotent: true` in the team file if running it twice is safe."
        )


@dataclass(frozen=True)
class PendingTool:
    """A non-idempotent tool call that was started and has no result in the journal."""

    key: EntryKey
    tool: str
    arguments: str

    def describe(self) -> str:
        arguments = self.arguments if len(self.arguments) <= 120 else self.arguments[:117] + "..."
        return f"{self.tool}({arguments}) by {self.key.invocation}"


def pending_tools(replay: Replay) -> list[PendingTool]:
    """Non-idempotent tool calls started and never finished, in the order they were started."""
    entries = replay.entries
    pending: list[PendingTool] = []
    for key, entry in entries.items():
        if key.kind != "tool_start":
            continue
        done = entries.get(EntryKey(key.invocation, key.index, "tool", key.position))
        if done is None or done.request_hash != entry.request_hash:
            pending.append(
                PendingTool(key, str(entry.payload.get("tool", "?")), str(entry.payload.get("arguments", "")))
            )
    return pending


def open_resume(
    backend: JournalBackend, run_id: str, *, confirmed: bool = False, confirm_with: str | None = None
) -> RunJournal:
    """The journal that continues run ``run_id``: its record (one attempt more) and its entries to replay.

    Raises :class:`~teamrun.errors.UsageError` for an unknown run, :class:`RunBusy` for one another live
    process holds, and
    :class:`ResumeNeedsConfirmation` when a non-idempotent tool would run again and ``confirmed`` is false
    (``confirm_with``: the command it tells to run, ``teamrun resume RUN_ID --yes`` by default).
    """
    record = backend.get_run(run_id)
    if record is None:
        raise UsageError(f"no run {run_id!r} in the store; `teamrun runs list` shows the runs it holds")
    claimed_here = run_id in CLAIMED_HERE  # a waiting run this process claimed (`teamrun answer`)
    if record.shown_status() == "running" and not claimed_here:
        raise RunBusy(
            f"run {run_id} is still running (pid {record.pid} on {record.host}); wait for it to end or stop it first"
        )
    entries = [_unmasked(entry) for entry in backend.load(run_id)]
    journal = RunJournal(backend, _next_attempt(record), entries, confirmed_tools=confirmed)
    pending = pending_tools(journal.replay)
    if pending and not confirmed:
        raise ResumeNeedsConfirmation(run_id, pending, confirm_with=confirm_with)
    claim = getattr(backend, "claim_run", None)  # the store's lock on the run (an in-memory journal has none)
    if claim is not None and not claimed_here and not claim(journal.record):
        holder = backend.get_run(run_id)
        who = f" (pid {holder.pid} on {holder.host})" if holder is not None else ""
        raise RunBusy(f"run {run_id} is being resumed by another process{who}; wait for it to end")
    return journal


def hold_open_failed_models(replay: Replay, breakers: BreakerRegistry) -> None:
    """Before a resumed run's first call: each model of a fallback list that the earlier attempts' journal last
    saw fail (or skipped, its breaker open) is skipped by ``breakers`` for the rest of its cool-down counted from
    that journaled call — the run's new calls go where the journal says it was answered, then the model is probed
    as usual (:func:`teamrun.llm.fallbacks.hold_open_from_journal`)."""
    if not replay:
        return
    for unwell, left in hold_open_from_journal(replay.model_replies(), breakers):
        _log.info("breaker_held_open", model=unwell.model, api_base=unwell.api_base, cool_down_left_s=round(left, 1))


def _unmasked(entry: JournalEntry) -> JournalEntry:
    """The entry with the secrets the store masked put back from the environment (the replayed reply then is
    the one the provider gave, and the requests that follow are the same)."""
    payload = unmask(entry.payload)
    return entry if payload == entry.payload else dataclasses.replace(entry, payload=payload)


def _next_attempt(earlier: JournaledRun) -> JournaledRun:
    record = dataclasses.replace(  # copies: the store's record is kept as it was
        earlier, vars=dict(earlier.vars), limits=dict(earlier.limits), usage=dict(earlier.usage)
    )
    record.attempts += 1
    record.status, record.ended_at, record.error, record.final_text = "running", None, None, ""
    record.pid, record.host, record.heartbeat_at = os.getpid(), socket.gethostname(), time.time()
    return record
