"""This server as one replica of several on one store: run leases, takeover, fencing, handover (issue 46).

Each run this server executes holds a lease in the store (:mod:`teamrun.store.leases`), taken as it starts or
continues here (:attr:`RunRegistry.owning <teamrun.serve.runs.RunRegistry.owning>`; a new run's by its opening
record write, :class:`~teamrun.store.leases.Opening`: no transaction of its own) and released as it ends or
suspends waiting for people. A heartbeat (:meth:`Replica.renew`, every :attr:`Replica.tick_s`) renews them all in
one statement, on a connection pool of its own (request traffic holding every connection of the store's pool
never delays it; a renewal that fails or comes late says so), applies the cancels other replicas left on them (on
PostgreSQL at once, through ``LISTEN``), saves the events of the runs running here that somebody follows (so any
replica streams them live, :func:`teamrun.serve.sse.store_stream`; the others' less often) and notices a lease
another replica took (the run stops here).
Beside it, :meth:`Replica.take_over` takes over the runs of replicas that stopped renewing: each is resumed from
its journal as ``teamrun resume`` resumes it (finished calls answered from the journal, not paid again), its
events say ``run_moved``. A run that cannot take its lease as it starts does not start (:class:`LeaseNotTaken`:
``POST /v1/runs`` answers ``503``, never ``201`` for a run with no record). Every journal write
and record save of a run is fenced by the lease's generation (:class:`~teamrun.store.leases.Fences`): a replica
that comes back after its run was taken (paused, cut off) has its writes refused, says so, and stops executing
the run.

On SIGTERM the server stops taking runs and lets the requests in flight finish (uvicorn's grace period, up to
30 s); what still runs then is handed over (:data:`~teamrun.store.leases.HANDOVER`): another replica takes it at
once.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from teamrun.logs import get_logger
from teamrun.serve.continuation import continue_here
from teamrun.serve.runs import RunHandle, RunRegistry, ServerBusy, ShuttingDown
from teamrun.serve.served import Served
from teamrun.store.leases import CONFIRM, LeaseNotTaken

if TYPE_CHECKING:
    from teamrun.serve.history import EventKeeper
    from teamrun.store import Store
    from teamrun.store.leases import Lease, StaleLease

__all__ = [
    "DEFAULT_LEASE_S",
    "LeaseNotTaken",
    "Replica",
    "as_replicas_show",
    "replica_id",
    "until_not_running",
]

_log = get_logger(__name__)

DEFAULT_LEASE_S = 15.0
"""Seconds a lease lasts without renewal: how long a dead replica's runs wait before another takes them."""
HEARTBEAT_CONNECTIONS = 3
"""The heartbeat's own pool: the renewal, the takeover beside it, the cancel listener (PostgreSQL)."""
MOVED_REASON = "moved to another replica"
"""The cancel reason of a run this replica stopped executing because another took its lease."""
KEEP_UNFOLLOWED_S = 5.0
"""Seconds between two saves of the events of a running run that nobody follows (a crash loses at most these
seconds of its timeline). A followed run (an SSE stream on this replica, or another replica streaming it from the
store: its lease's ``watched_until``) has its events saved on every heartbeat."""
WATCH_S = 5.0
"""How long a replica streaming a run it does not run from the store marks its lease watched for, renewed while it
streams (:meth:`Replica.watching`)."""
SWEEP_S = 60.0
"""Seconds between two sweeps of the lease rows of ended runs (:meth:`LeaseRepository.sweep`) by a replica."""


async def as_replicas_show(store: Store, record: dict[str, Any]) -> dict[str, Any]:
    """A stored run's record as replicas show it: ``interrupted`` (the process that ran it is gone) is
    ``running`` while its lease says a replica runs it or is about to take it over (handed over, or expired and
    not released): a run between two replicas is not interrupted."""
    from teamrun.store.leases import HANDOVER

    if record.get("status") != "interrupted":
        return record
    lease = await asyncio.to_thread(store.leases.get, str(record["id"]))
    if lease is not None and lease.released in (None, HANDOVER):
        return record | {"status": "running"}
    return record


async def until_not_running(registry: RunRegistry, run_id: str, *, within_s: float, poll_s: float) -> bool:
    """Until the store says ``run_id`` no longer runs (a cancel forwarded to the replica that runs it was applied
    there), at most ``within_s`` seconds; whether it stopped."""
    waited = 0.0
    while True:
        stored = await asyncio.to_thread(registry.stored, run_id)
        if stored is None or stored.shown_status() != "running":
            return True
        if waited >= within_s:
            return False
        await asyncio.sleep(poll_s)  # a poll of the store: the run's replica writes its record there
        waited += poll_s


def replica_id() -> str:
    """This process's name as a lease owner: host, pid and a random part (a restarted process is another owner)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Replica:
    """Leases, takeover and handover of one server on a store shared with other replicas."""

    def __init__(
        self,
        registry: RunRegistry,
        served: Mapping[str, Served],
        store: Store,
        *,
        lease_s: float = DEFAULT_LEASE_S,
        keeper: EventKeeper | None = None,
        owner: str | None = None,
    ) -> None:
        from teamrun.store.journal import StoreJournal
        from teamrun.store.leases import LeaseRepository

        self.registry = registry
        self.served = served
        self.store = store
        self.keeper = keeper
        self.lease_s = lease_s
        self.tick_s = min(1.0, lease_s / 4)
        """Seconds between heartbeats: well inside the lease, and soon enough for a forwarded cancel."""
        self.id = owner or replica_id()
        self.leases = LeaseRepository(
            store.separate_engine(pool_size=HEARTBEAT_CONNECTIONS, timeout_s=max(self.tick_s, lease_s / 2)),
            clock=store.leases.clock,
        )
        """The heartbeat's leases (renewal, takeover, the cancel listener, handover): a pool of their own, so they
        never wait for a connection behind request traffic."""
        for engine in {store.engine, self.leases.engine}:  # a paused replica's locks last no longer than its lease
            LeaseRepository.end_idle_transactions(engine, lease_s)
        self.renewed_at: float | None = None
        """When the heartbeat last renewed this replica's leases (monotonic seconds)."""
        self._late_said = False
        self._streams_ended = False
        self.backend = StoreJournal(store)
        self.held: dict[str, int] = {}
        """The runs executing here, with their lease's generation."""
        self._saved: dict[str, tuple[int | None, float]] = {}
        """Events of each run saved to the store by the heartbeat: their count (``None``: none yet) and when (the
        leases' clock; first: when the heartbeat first saw the run). A followed run's are saved from its second
        beat on, one nobody follows every :data:`KEEP_UNFOLLOWED_S`: a run that ends before (most chat
        completions) is kept once, as it ends, not twice."""
        self._task: asyncio.Task[None] | None = None
        self._taking: asyncio.Task[list[str]] | None = None
        """The takeover pass in progress beside the heartbeat, if any (the handover waits for it)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handing_over = False
        self._stop = threading.Event()
        self._listener: threading.Thread | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._recording: dict[str, asyncio.Task[bool]] = {}
        """New runs that stopped before their opening write, their failed record being written."""
        self._swept_at: float | None = None
        """When this replica last swept the lease rows of ended runs (the leases' clock)."""
        registry.owning = self.own
        registry.forward_cancel = self.forward_cancel
        registry.confirm_owner = self.confirm_owner
        registry.finish_on_stop = True
        registry.when_over.append(self.over)
        store.fences.on_refused.append(self._refused)

    # -- the runs that start or continue here --------------------------------------------------------

    async def own(self, run_id: str) -> None:
        """Take ``run_id``'s lease: it starts or continues here (:attr:`RunRegistry.owning`). A new run's is taken
        by its opening record write (:class:`~teamrun.store.leases.Opening`: no transaction of its own)."""
        from teamrun.store.leases import Fence, Opening

        handle = self.registry.get(run_id)
        if handle is not None and handle.attempt == 1:
            opened = self._opened(handle)
            self.store.fences.opening(run_id, Opening(self.id, self.lease_s, self.leases.clock, opened))
            return
        try:
            generation = await asyncio.to_thread(self._acquire, run_id, handle)
        except Exception as exc:  # the store is out of reach or its pool is dry: the run does not start here
            _log.warning("serve_lease_not_taken", run=run_id, error=str(exc), error_type=type(exc).__name__)
            raise LeaseNotTaken(
                f"run {run_id} could not take its lease in the store, so it did not start: {exc}; retry the request"
            ) from None
        self.store.fences.set(run_id, Fence(self.id, generation))
        self.held[run_id] = generation
        if handle is not None:
            handle.confirm(handle.event_count)  # its events so far may be sent; later ones once a renewal says so
            handle.owned.set()

    def _opened(self, handle: RunHandle) -> Callable[[int], None]:
        """What a new run's opening write calls (from its thread) once it took the lease."""
        loop = asyncio.get_running_loop()

        def held(generation: int) -> None:
            self.held[handle.id] = generation
            handle.confirm(handle.event_count)
            handle.owned.set()

        def taken(generation: int) -> None:
            loop.call_soon_threadsafe(held, generation)

        return taken

    def _acquire(self, run_id: str, handle: RunHandle | None) -> int:
        """The lease, and a new run's record as ``running`` at once (blocking): any replica finds it from now on.
        One transaction of two statements (a continuing run keeps its record)."""
        with self.store.engine.begin() as conn:
            generation = self.store.leases.acquire(run_id, self.id, self.lease_s, conn=conn)
            if handle is not None:
                record = self.store.runs.start
                record(run_id, handle.team, handle.input, thread_id=handle.thread, conn=conn, unless_recorded=True)
        return generation

    def _record_failed(self, run_id: str, error: str) -> None:
        record = self.store.runs.get(run_id)
        if record is not None and record.status == "running":
            self.store.runs.finish(run_id, status="failed", final_output=None, usage={}, cost=0.0, error=error)

    async def recorded(self, handle: RunHandle) -> bool:
        """Until ``handle``'s new run holds its lease and has its record (or could not start): a request that
        started it is answered then, so the next request finds it on any replica. Whether it took its lease:
        ``False``, it has no record anywhere (the store was out of reach, :class:`LeaseNotTaken`), and must
        not be answered as started."""
        waits = [asyncio.ensure_future(handle.owned.wait()), asyncio.ensure_future(handle.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        if not handle.owned.is_set() and (recording := self._recording.pop(handle.id, None)) is not None:
            return await asyncio.shield(recording)  # it stopped before its opening write: recorded failed
        return handle.owned.is_set()

    def over(self, handle: RunHandle) -> None:
        """A run stopped here (the registry's ``when_over``): its lease goes (none while it waits for people)."""
        generation = self.held.pop(handle.id, None)
        self._saved.pop(handle.id, None)
        if generation is None:
            if self.store.fences.take_opening(handle.id) is not None and handle.error is not None:
                loop = asyncio.get_running_loop()
                job = loop.create_task(self._record_unopened(handle, handle.error), name=f"teamrun-record:{handle.id}")
                self._recording[handle.id] = job  # (awaited by recorded(), which holds the request's answer)
                job.add_done_callback(lambda _job: self._recording.pop(handle.id, None))
            return
        reason = "waiting" if handle.state == "waiting" else CONFIRM if handle.needs_confirmation else "over"
        failed = handle.error if handle.result is None and not handle.moved else None
        loop = asyncio.get_running_loop()
        task = loop.create_task(
            self._release(handle.id, generation, reason, failed), name=f"teamrun-lease-release:{handle.id}"
        )
        self._background.add(task)  # the loop keeps only a weak reference
        task.add_done_callback(self._background.discard)

    async def _record_unopened(self, handle: RunHandle, error: str) -> bool:
        """A new run that stopped before its opening write (a refused thread...): its record says it failed, for
        every replica (no lease: it runs nowhere); whether it was written."""

        def record() -> None:
            with self.store.engine.begin() as conn:
                start = self.store.runs.start
                start(handle.id, handle.team, handle.input, thread_id=handle.thread, conn=conn, unless_recorded=True)
            self.store.runs.finish(handle.id, status="failed", final_output=None, usage={}, cost=0.0, error=error)

        try:
            await asyncio.to_thread(record)
        except Exception as exc:
            _log.warning("serve_run_not_recorded", run=handle.id, error=str(exc), error_type=type(exc).__name__)
            return False
        return True

    async def _release(self, run_id: str, generation: int, reason: str, failed: str | None = None) -> None:
        try:
            if failed is not None and reason == CONFIRM:  # it waits for a person's say: shown interrupted everywhere
                await asyncio.to_thread(self.store.runs.let_go, run_id, failed)
            elif failed is not None:  # it could not run at all (a refused thread...): its early record says so
                await asyncio.to_thread(self._record_failed, run_id, failed)
            if not self.store.fences.released_by_write(run_id):  # by its last record write, most often
                await asyncio.to_thread(self.store.leases.release, run_id, self.id, generation, reason)
        except Exception as exc:  # it expires instead; the run's record says it is over, so nobody takes it
            _log.warning("serve_lease_not_released", run=run_id, error=str(exc), error_type=type(exc).__name__)
        finally:
            if run_id not in self.held:
                self.store.fences.drop(run_id)

    async def confirm_owner(self, run_id: str) -> None:
        """Before answering for ``run_id``, which runs here: check its lease in the store; taken by another replica
        (this one was paused, or its renewals did not reach the store), the run stops here and its record is
        the store's (:attr:`RunRegistry.confirm_owner`)."""
        generation = self.held.get(run_id)
        if generation is None:
            return
        try:
            lease = await asyncio.to_thread(self.store.leases.get, run_id)
        except Exception as exc:  # the store out of reach: the run runs here as far as anyone can tell, and its
            # handle answers (its writes hold until the store answers, and are refused then if the lease went)
            _log.info("serve_owner_not_confirmed", run=run_id, error=str(exc), error_type=type(exc).__name__)
            return
        if self.held.get(run_id) != generation:
            return  # it stopped or moved meanwhile
        if lease is None and self.store.fences.is_ending(run_id):
            return  # its outcome's write deleted it (it stops here as its turn ends)
        if lease is None or (lease.owner, lease.generation) != (self.id, generation):
            self._lost(run_id, "its lease was taken by another replica")

    async def forward_cancel(self, run_id: str, reason: str) -> bool:
        """Leave a cancel of ``run_id`` for the replica that runs it (:attr:`RunRegistry.forward_cancel`)."""
        return await asyncio.to_thread(self.store.leases.request_cancel, run_id, reason)

    # -- the heartbeat -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the heartbeat, and on PostgreSQL the listener of cancels (the server's start-up)."""
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._beat(), name="teamrun-replica-heartbeat")
        if self.store.dialect == "postgresql":
            self._listener = threading.Thread(target=self._listen, name="teamrun-replica-listen", daemon=True)
            self._listener.start()
        _log.info("serve_replica", replica=self.id, lease_s=self.lease_s)

    def _listen(self) -> None:
        """The listener thread: a cancel left on the lease of a run held here is applied at once."""
        try:
            self.leases.listen(self._notified, self._stop)
        except Exception as exc:  # the heartbeat still applies cancels, a second later
            _log.warning("serve_listen_stopped", replica=self.id, error=str(exc), error_type=type(exc).__name__)

    def _notified(self, run_id: str, reason: str) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._cancel_noticed, run_id, reason)

    def _cancel_noticed(self, run_id: str, reason: str) -> None:
        if run_id in self.held:
            self.registry.cancel(run_id, reason)

    def leaving(self) -> bool:
        """The server stops (SIGTERM): the streams of runs still running here end (each at a message's end, without
        a result) for their clients to reconnect to another replica, which reads on from the store."""
        return self.registry.closing or self._handing_over

    def _end_streams(self) -> None:
        """Once the server stops: wake the streams of the runs running here, which then end (:meth:`leaving`)."""
        if self._streams_ended or not self.leaving():
            return
        self._streams_ended = True  # (their events keep being saved on each beat, until the handover saves the rest)
        for run_id in self.held:
            handle = self.registry.get(run_id)
            if handle is not None:
                handle.wake_readers()

    async def _beat(self) -> None:
        while True:
            self._end_streams()
            try:
                await self.renew()
            except Exception as exc:  # a store that does not answer for a while: the next beat tries again
                _log.warning("serve_heartbeat_failed", replica=self.id, error=str(exc), error_type=type(exc).__name__)
                self._said_if_late()
            taking = self._taking
            if (taking is None or taking.done()) and self._taking_runs:  # beside the beat: it never delays it
                self._taking = asyncio.create_task(self._take_over_logged(), name="teamrun-replica-takeover")
            await asyncio.sleep(self.tick_s)  # a timer: the heartbeat's period

    @property
    def _taking_runs(self) -> bool:
        return not self.registry.closing and not self._handing_over

    async def _take_over_logged(self) -> list[str]:
        try:
            return await self.take_over()
        except Exception as exc:  # the next beat tries again
            _log.warning("serve_takeover_failed", replica=self.id, error=str(exc), error_type=type(exc).__name__)
            return []

    def _said_if_late(self, why: str = "the store did not answer the heartbeat") -> None:
        """The leases held here went unrenewed past their time: say so (once until renewed again), as their runs
        may move to another replica (whose generation then fences this one's writes). ``why``: the store did not
        answer, or the beat itself came late (the store answered it)."""
        if self._late_said or not self.held:
            return
        since = None if self.renewed_at is None else time.monotonic() - self.renewed_at
        if since is not None and since < self.lease_s:
            return
        self._late_said = True
        _log.error(
            "serve_leases_not_renewed",
            replica=self.id,
            runs=sorted(self.held),
            seconds=None if since is None else round(since, 1),
            lease_s=self.lease_s,
            why=f"{why}: another replica may take these runs",
        )

    async def tick(self) -> None:
        """One heartbeat: renew, apply forwarded cancels, stop runs taken by others, keep events, take over."""
        await self.renew()
        if self._taking_runs:
            await self.take_over()

    async def renew(self) -> None:
        """Renew the leases held here, apply forwarded cancels, stop runs taken by others, keep events."""
        held = dict(self.held)  # a run taken meanwhile is not in what the renewal read
        if not held:  # nothing to renew: no round trip (an idle replica's beat costs the store nothing)
            self.renewed_at, self._late_said = time.monotonic(), False
            return
        counts = {run_id: handle.event_count for run_id in held if (handle := self.registry.get(run_id)) is not None}
        began = time.monotonic()
        leases = await asyncio.to_thread(self.leases.renew, self.id, self.lease_s)
        took = time.monotonic() - began
        if self.renewed_at is not None and began - self.renewed_at > self.lease_s:
            self._said_if_late(  # the store answered this beat: the beats before it did not come (or not through)
                "the heartbeat was late (this process was paused or starved of CPU, or the store out of reach until "
                "now; it answered this beat)"
            )
        self.renewed_at, self._late_said = time.monotonic(), False
        if took > self.lease_s / 2:
            _log.warning("serve_heartbeat_slow", replica=self.id, seconds=round(took, 1), lease_s=self.lease_s)
        for run_id, generation in held.items():
            if self.held.get(run_id) != generation:
                continue  # it stopped here meanwhile (or continued under a new lease)
            lease = leases.get(run_id)
            if lease is None and self.store.fences.is_ending(run_id):
                continue  # its last record write released it (it stops here as its turn ends)
            if lease is None or lease.generation != generation:
                self._lost(run_id, "its lease was taken by another replica")
                continue
            handle = self.registry.get(run_id)
            if handle is not None and run_id in counts:  # its events up to the renewal may be sent (still its own)
                handle.confirm(counts[run_id])
            if lease.cancel_reason:
                self.registry.cancel(run_id, lease.cancel_reason)
        self._keep_events(leases)

    def _keep_events(self, leases: Mapping[str, Lease]) -> None:
        """Save the events of the runs running here that have new ones, for another replica to stream them from
        the store: a followed run's on every beat, one nobody follows every :data:`KEEP_UNFOLLOWED_S` (what a
        crash loses of it). Followed: an SSE stream of it is open here (its client reconnects elsewhere after a
        crash, and reads on from the store), or another replica streams it from the store (its lease is watched)."""
        if self.keeper is None:
            return
        now = self.leases.clock()
        for run_id in self.held:
            handle = self.registry.get(run_id)
            if handle is None or handle.finished:
                continue
            saved = self._saved.get(run_id)
            if saved is None:  # new since the last beat: most runs end before the next one, kept then
                self._saved[run_id] = (None, now)
                continue
            count, at = saved
            if handle.event_count == count:
                continue
            lease = leases.get(run_id)
            watched = lease is not None and lease.watched_until is not None and lease.watched_until > now
            if handle.followers > 0 or watched or now - at >= KEEP_UNFOLLOWED_S:
                self._saved[run_id] = (handle.event_count, now)
                self.keeper.run_over(handle)

    async def watching(self, run_id: str, until: float | None) -> float | None:
        """A stream here follows ``run_id``, which another replica runs, from the store: mark its lease watched
        (its owner then saves its events on every heartbeat), once per half of :data:`WATCH_S`. ``until``: what
        the stream marked last (``None``: nothing yet); returns what it marks now. A store that does not answer
        leaves it unmarked (the owner still saves the run's events, less often)."""
        wall = self.leases.clock()
        if until is not None and until - wall > WATCH_S / 2:
            return until
        mark = wall + WATCH_S
        try:
            await asyncio.to_thread(self.store.leases.watch, run_id, mark)
        except Exception as exc:
            _log.info("serve_watch_not_marked", run=run_id, error=str(exc), error_type=type(exc).__name__)
            return until
        return mark

    def _lost(self, run_id: str, why: str) -> None:
        """Another replica executes ``run_id`` now: stop executing it here."""
        if self.held.pop(run_id, None) is None:
            return
        _log.warning("serve_run_moved_away", run=run_id, replica=self.id, why=why)
        handle = self.registry.get(run_id)
        if handle is not None:
            handle.lose()  # its cancellation here is no event of the run's: streams go on with the store's
            handle.moved = True
        self.registry.cancel(run_id, MOVED_REASON)

    def _refused(self, exc: StaleLease) -> None:
        """A write for a run was refused (its fence is stale; called from the writing thread)."""
        if self._handing_over and exc.run_id not in self.held:
            return  # handed over on purpose: its end is the next owner's to write
        _log.warning("serve_writes_refused", run=exc.run_id, replica=self.id, reason=str(exc))
        handle = self.registry.get(exc.run_id)
        if handle is not None:
            handle.lose()  # now, before the refused write's failure becomes events of this process's alone
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._lost, exc.run_id, "its writes were refused (stale lease)")

    # -- takeover ------------------------------------------------------------------------------------

    async def take_over(self) -> list[str]:
        """Take the runs whose replica stopped renewing (or handed them over) and continue them here; their ids.
        Once a minute (:data:`SWEEP_S`), first delete a batch of lease rows of runs that ended (at once again while
        batches come back full)."""
        now = self.leases.clock()
        if self._swept_at is None or now - self._swept_at >= SWEEP_S:
            limit = 500
            if await asyncio.to_thread(self.leases.sweep, limit=limit) < limit:
                self._swept_at = now
        taken: list[str] = []
        for lease in await asyncio.to_thread(self.leases.takeable):
            if not self._taking_runs:
                break  # the server stops: the rest is for the other replicas
            if lease.owner == self.id and lease.run_id in self.held:
                continue
            if await self._take(lease):
                taken.append(lease.run_id)
        return taken

    async def _take(self, lease: Lease) -> bool:
        """Take ``lease``'s run if it is still takeable (one compare-and-set on the lease), fence its writes, and
        continue it here from its journal (:func:`~teamrun.serve.continuation.continue_here`), saying so."""
        from teamrun.store.leases import HANDOVER, Fence

        record = await asyncio.to_thread(self.backend.get_run, lease.run_id, unmasked=True)
        entry = self.served.get(record.team) if record is not None else None
        if record is None or entry is None:
            return False  # a run of a team not served here: a replica that serves it takes it
        try:
            with self.registry.slot_for(lease.run_id):
                generation = await asyncio.to_thread(self.leases.take, lease, self.id, self.lease_s)
                if generation is None:
                    return False  # another replica took it first
                self.store.fences.set(lease.run_id, Fence(self.id, generation))
                self.held[lease.run_id] = generation
                # the lease is this process's claim on the run; unconfirmed: a non-idempotent tool cut off
                # mid-call is not run again without a person's say
                where = f" on replica {self.id}"
                handle = continue_here(
                    self.registry, entry, record, self.backend, confirmed=False, owned=True, where=where
                )
        except (ServerBusy, ShuttingDown):
            return False  # no slot here: another replica (or a later beat) takes it
        why = "handover" if lease.released == HANDOVER else "lease expired"
        moved = {"from": lease.owner, "to": self.id, "why": why, "generation": generation}
        handle.note("run_moved", moved)  # before any event of the continuation: its task has not run yet
        handle.confirm(handle.event_count)
        _log.warning("serve_run_taken_over", run=record.run_id, **moved)
        return True

    # -- stopping ------------------------------------------------------------------------------------

    async def hand_over(self) -> list[str]:
        """The server stops: release the lease of every run still running here (another replica takes each at
        once) and stop executing them here; their ids."""
        from teamrun.store.leases import HANDOVER

        self._handing_over = True
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
        if self._taking is not None and not self._taking.done():
            # a take on its way to the store: once it lands the run is held here, and handed over with the rest
            # (cancelled, its take would still commit and the run wait out a lease nobody renews)
            await asyncio.wait({self._taking})
        given: list[str] = []
        if self.keeper is not None:  # their events so far, kept before the next replica adds its own after them
            for run_id in self.held:
                handle = self.registry.get(run_id)
                if handle is not None and not handle.finished:
                    self.keeper.run_over(handle)
                    handle.lose()  # the events kept: the next owner numbers its own after them
            await self.keeper.flush()
        for run_id, generation in list(self.held.items()):
            del self.held[run_id]
            handle = self.registry.get(run_id)
            if handle is not None:
                handle.lose()  # (its events so far are kept: the next owner's follow them)
                handle.moved = True
            try:
                released = await asyncio.to_thread(self.leases.release, run_id, self.id, generation, HANDOVER)
            except Exception as exc:  # the store out of reach: the lease expires instead, and the run moves then
                _log.warning("serve_run_not_handed_over", run=run_id, error=str(exc), error_type=type(exc).__name__)
                released = False
            if released:
                given.append(run_id)
            self.registry.cancel(run_id, "handed over to another replica (this server stops)")
        if given:
            _log.warning("serve_runs_handed_over", replica=self.id, runs=given)
        if self.leases.engine is not self.store.engine:
            self.leases.engine.dispose()  # the heartbeat's pool (a listener still waiting closes its own)
        return given
