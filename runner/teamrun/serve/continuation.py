"""A run continuing in this server from its journal: one way for every path that continues one (issue 46).

An answered waiting run (:mod:`teamrun.serve.answers`, claimed in the store by the answer) and a run taken over
from another replica (:mod:`teamrun.serve.replicas`, claimed by the lease it took) continue alike, through
:func:`continue_here`: this process's claim (:data:`~teamrun.engine.durability.pending.CLAIMED_HERE`), the run's
handle (:meth:`RunRegistry.continuing <teamrun.serve.runs.RunRegistry.continuing>`, which knows by the stored
attempt whether a handle held here is still the run's latest stretch), and a task that opens the run's resume
journal in a thread, gives it the store's desk and approver, and runs it to its end. A continued run that
suspends again with an answer it did not take is continued again by the answer service as every run that
stops waiting is (:meth:`AnswerService.when_stopped <teamrun.serve.answers.AnswerService.when_stopped>`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from teamrun.errors import TeamrunError
from teamrun.logs import get_logger
from teamrun.serve.runs import RunHandle, RunRegistry, store_people
from teamrun.serve.served import Served

if TYPE_CHECKING:
    from teamrun.store.journal import StoreJournal
    from teamrun.store.records import JournaledRun

__all__ = ["continue_here"]

_log = get_logger(__name__)


def continue_here(
    registry: RunRegistry,
    served: Served,
    run: JournaledRun,
    backend: StoreJournal,
    *,
    confirmed: bool,
    owned: bool = False,
    where: str = "",
) -> RunHandle:
    """Continue ``run`` (claimed in the store by this process) here, from its journal; its handle, running.

    The caller holds a run slot for it (:meth:`RunRegistry.slot_for`). ``confirmed``: a tool call cut off mid-call
    may run again (a run that ended waiting had none in flight); unconfirmed, a non-idempotent one is not run again
    without a person's say (a run taken over from a replica that stopped mid-call). ``owned``: the run holds its
    lease already (a takeover). ``where`` is said after "the run could not continue" when its journal cannot be
    resumed. Synchronous up to the task's creation: nothing sees the run half-continued."""
    from teamrun.engine.durability.pending import CLAIMED_HERE

    CLAIMED_HERE.add(run.run_id)
    handle = registry.continuing(
        served.team,
        served.redactor,
        run_id=run.run_id,
        input=run.input,
        thread=run.thread_id,
        created=run.started_at,
        attempts=run.attempts,  # a handle held of an earlier attempt: another process continued the run since
    )
    handle.task = asyncio.create_task(
        _to_end(registry, served, handle, run.vars or None, backend, confirmed=confirmed, owned=owned, where=where),
        name=f"teamrun-serve-continue:{run.run_id}",
    )
    return handle


async def _to_end(
    registry: RunRegistry,
    served: Served,
    handle: RunHandle,
    vars: Mapping[str, Any] | None,
    backend: StoreJournal,
    *,
    confirmed: bool,
    owned: bool,
    where: str,
) -> None:
    from teamrun.engine.durability.resume import ResumeNeedsConfirmation, open_resume

    try:
        journal = await asyncio.to_thread(open_resume, backend, handle.id, confirmed=confirmed)
    except TeamrunError as exc:
        handle.needs_confirmation = isinstance(exc, ResumeNeedsConfirmation)  # it stays interrupted, not failed
        _log.warning("serve_continue_failed", run=handle.id, error=str(exc))
        handle.error = handle.redactor.text(f"the run could not continue{where}: {exc}")
        registry.settle(served.team, handle)
        return
    desk, approver = store_people(backend.store, handle)
    await registry.run_to_end(  # its budgets come back from the journal's record, its vars from the stored run's
        served.team, handle, limits=None, vars=vars, approver=approver, desk=desk, journal=journal, owned=owned
    )
