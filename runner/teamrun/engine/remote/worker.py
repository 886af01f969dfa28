"""One delegation to a remote (``a2a:``) worker: the task as an A2A message, its updates as our events.

The delegator runs a remote worker as it runs a local one (slot, budgets, hooks, events, cancel):
:func:`teamrun.engine.turn.agent_loop.run_agent`, the one dispatch by an agent's kind, hands an ``a2a:`` agent's
frame to :func:`run_remote` instead of a model loop. A2A protocol v1.0 over JSON-RPC, spoken by a2a-sdk's client
(imported when a remote worker runs). Its parts, each with one job:

- :mod:`.client`: the client (the card the run read when it started, or read now and kept for the run's other
  delegations; a bearer token only ever sent to ``a2a.url``'s origin; streaming when the card and ``a2a.stream``
  allow), and a failure in words;
- :mod:`.exchange`: the conversation with the task (prompt, updates, a person's answers, cancel, pick-up);
- :mod:`.updates`: the task as its updates describe it (ids, state, question, answer; no I/O);
- :mod:`.usage`: the tokens and cost the agent reports, believed only when they can be counted;
- this module, :class:`RemoteDelegation`: what the run sees of it — each update a ``remote_update`` event in the
  worker's agent span, a question a pending item of a person (on a terminal, or the run suspends for
  ``teamrun answer``), the journal's entries (:mod:`teamrun.engine.durability.remote_entries`: ``remote_start``
  as soon as the task's ids are known, ``remote`` with the answer), the outcome and its usage.

``completed``: the artifacts are the answer (text parts as they are, data parts as JSON); ``failed``,
``rejected``, ``canceled``, ``auth-required``, an error reply, a connection that fails or data that does not
parse: :class:`~teamrun.errors.RemoteAgentError` naming the agent and its URL (the delegator makes it the
worker's ``error`` result, its usage unknown). Tokens and cost are counted when the agent reports them in
``metadata.usage`` of the task, a status update or a message, else the result says ``usage_known: false``.
Cancelled (Ctrl-C, the run's or the worker's time-out, ``cancel_task``, a served run cancelled): the remote task
gets ``CancelTask``, except when the run suspends for a person (the task waits for the answer) or goes on in
another process (a replica took it over, or this one handed it over: the journal refuses the cancel's entry; the
task is left working for the new owner to pick up). A resumed run
answers a finished task from the journal (nothing is sent); for a started one it asks ``GetTask`` and picks the
task up again (``SubscribeToTask`` while it works); a task the agent no longer knows is sent again (a warning
says so).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from teamrun.config.models import RemoteAgent
from teamrun.engine.delegation.records import WorkerOutcome
from teamrun.engine.durability.remote_entries import (
    RemoteAnswer,
    RemoteStarted,
    answer_entry,
    started_entry,
)
from teamrun.engine.remote.cards import DEFAULT_REMOTE_TIMEOUT_S, bearer_token, require_a2a
from teamrun.engine.remote.client import OpenClient, described, open_client
from teamrun.engine.remote.exchange import CANCEL_WAIT_S, Exchange
from teamrun.engine.remote.updates import MAX_ANSWER_CHARS, Taken, TaskView
from teamrun.engine.remote.usage import reported_usage
from teamrun.engine.runtime import AgentFrame, RunContext
from teamrun.errors import RemoteAgentError, RunError, UserError
from teamrun.llm.types import Usage
from teamrun.logs import get_logger
from teamrun.tools.people import AskSite, PendingItem, answer_text

__all__ = ["RemoteDelegation", "run_remote"]

_log = get_logger(__name__)


async def run_remote(
    ctx: RunContext, frame: AgentFrame, task: str, *, connect: OpenClient | None = None
) -> WorkerOutcome:
    """Run the remote agent of ``frame`` on ``task`` (in the worker's agent span) to its outcome; ``connect``
    gets the client (default :func:`~teamrun.engine.remote.client.open_client`, looked up when called)."""
    spec = ctx.agent(frame.name).a2a
    assert spec is not None
    with frame.agent_span(ctx, model=f"a2a:{spec.url}", task=task) as span:
        # not known until the agent reports it (an error, a cancel or a wait too): never a pretended 0
        span.end.update(usage_known=False, usage={}, cost=None)
        frame.ledger.usage_known = False
        outcome = await RemoteDelegation(ctx, frame, spec, task, connect or open_client).run()
        if outcome.usage_known:
            del span.end["usage_known"], span.end["usage"], span.end["cost"]
            frame.ledger.usage_known = True
        return outcome


@dataclass
class RemoteDelegation:
    """One delegation to a remote agent as the run sees it: journal, events, a person, the outcome (the
    :class:`~teamrun.engine.remote.exchange.Side` of its exchange)."""

    ctx: RunContext
    frame: AgentFrame
    spec: RemoteAgent
    prompt: str
    connect: OpenClient = open_client

    @property
    def who(self) -> str:
        return f"remote agent '{self.frame.name}' ({self.spec.url})"

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(["a2a", self.spec.url, self.prompt]).encode()).hexdigest()

    def fail(self, what: str) -> RemoteAgentError:
        return RemoteAgentError(f"{self.who} {what}")

    def warn(self, text: str) -> None:
        self.ctx.warn(self.frame, text)

    # -- the delegation ------------------------------------------------------------------------
    async def run(self) -> WorkerOutcome:
        replay = self.ctx.journal.replay if self.ctx.journal is not None else None
        earlier = replay.remote_answer(self.frame.key, self.fingerprint) if replay else None
        if earlier is not None:  # finished by an earlier attempt: not sent again
            return self._replayed(earlier)
        started = replay.remote_started(self.frame.key, self.fingerprint) if replay else None
        require_a2a()
        token = self._token()
        try:
            async with AsyncExitStack() as stack:
                client, streaming = await self.connect(stack, self.spec, token, self.ctx.cards, self.fail)
                exchange = Exchange(client, streaming, self)
                await self._exchange(exchange, started)
        except (RemoteAgentError, UserError, RunError):
            raise
        except Exception as exc:
            raise self.fail(described(exc, self.spec.timeout_s or DEFAULT_REMOTE_TIMEOUT_S)) from exc
        return await self._completed(exchange.view)

    def _token(self) -> str | None:
        """The bearer token, masked in everything the run writes from now on."""
        token = bearer_token(self.frame.name, self.spec.auth.bearer_env if self.spec.auth else None)
        if token:
            self.ctx.bus.keep_secrets({token})
            if self.ctx.journal is not None:
                self.ctx.journal.keep_secrets({token})
        return token

    async def _exchange(self, exchange: Exchange, started: RemoteStarted | None) -> None:
        """The exchange to its end; a task left working for nobody is cancelled (not one that waits for a
        person while the run suspends)."""
        try:
            await exchange.run(self.prompt, started)
        except asyncio.CancelledError:
            if exchange.cancellable and not self.ctx.activity.stuck.is_set():
                await exchange.cancel()
            raise
        except Exception:  # a time-out, a broken update...
            if exchange.cancellable:
                await exchange.cancel()
            raise

    async def _completed(self, view: TaskView) -> WorkerOutcome:
        """The answer, charged when its usage is known, journaled."""
        text = view.answer()
        usage, cost, known = self._usage(view.usage)
        if self.ctx.journal is not None:
            answer = RemoteAnswer(text, view.task_id, view.usage)
            await self.ctx.journal.write_now(answer_entry(self.frame.key, self.fingerprint, answer))
        return WorkerOutcome(text, "ok", usage, cost, (), usage_known=known)

    def _replayed(self, earlier: RemoteAnswer) -> WorkerOutcome:
        """The answer an earlier attempt journaled, charged again to this run's ledgers."""
        usage, cost, known = self._usage(earlier.usage)
        self._emit(earlier.task_id, "completed", "journal", earlier.text, reattached=True)
        return WorkerOutcome(earlier.text, "ok", usage, cost, (), usage_known=known)

    def _usage(self, reported: Mapping[str, Any] | None) -> tuple[Usage, float, bool]:
        """What the agent reported, charged to the worker's ledger when it can be counted (a warning if not)."""
        usage, cost, known = reported_usage(reported)
        if reported and not known:
            self.warn(
                f"{self.who} reported usage teamrun cannot count (negative, not a number, not finite or absurdly "
                "large); its tokens and cost are unknown"
            )
        if known:
            self.frame.ledger.charge_model(usage, cost, step=False)
        return usage, cost, known

    def _emit(self, task_id: str, state: str, update: str, text: str, *, reattached: bool = False) -> None:
        self.frame.emit(
            self.ctx,
            "remote_update",
            url=self.spec.url,
            task_id=task_id,
            state=state,
            update=update,
            text=text,
            chars=len(text),
            reattached=reattached,
        )

    # -- what the exchange tells -----------------------------------------------------------------
    async def took(self, taken: Taken, view: TaskView, reattached: bool) -> None:
        if taken.cut:
            self.warn(f"{self.who} answered more than {MAX_ANSWER_CHARS} characters; the rest of its answer is dropped")
        self._emit(view.task_id, view.state, taken.kind.removesuffix("_update"), taken.text, reattached=reattached)

    async def started(self, view: TaskView, messages: int) -> None:
        if self.ctx.journal is not None and view.task_id:
            began = RemoteStarted(view.task_id, messages, view.context_id, self.spec.url)
            await self.ctx.journal.write_now(started_entry(self.frame.key, messages, self.fingerprint, began))

    async def ask(self, question: str, round: int) -> str:
        """The task's question, asked of a person as a pending item named by this invocation and round."""
        ctx, frame = self.ctx, self.frame
        site = AskSite(
            ctx.journal.run_id if ctx.journal else ctx.result.run_id,
            frame.key,
            round,
            0,
            frame.name,
            ctx.desk,
            ctx.activity.parked_call,
            lambda kind, **data: frame.emit(ctx, kind, **data),
        )
        asked = question or f"The remote agent {frame.name} needs more input to go on."
        item = PendingItem(kind="question", question=asked, tool=f"a2a:{frame.name}")
        return answer_text(item, await ctx.desk.ask(item, site))

    async def cancelling(self, task_id: str, sent: int) -> bool:
        """First: a resume sends the task anew rather than pick up a cancelled one. ``False`` (no cancel): the
        journal refused the entry because another process executes the run now (a replica took it over, or this
        one handed it over as it stops: the run was cancelled here for that), which picks the task up."""
        if self.ctx.journal is None:
            return True
        cancelled = RemoteStarted("", sent, url=self.spec.url, cancelled=task_id)
        entry = started_entry(self.frame.key, sent + 1, self.fingerprint, cancelled)
        try:
            await asyncio.wait_for(self.ctx.journal.write_now(entry), CANCEL_WAIT_S)
        except Exception as exc:
            if getattr(exc, "stops_run", False):  # a stale lease: the run and its task are another replica's now
                _log.info("remote_task_left_to_new_owner", agent=self.frame.name, task_id=task_id)
                return False
            # the run goes down anyway; a resume then finds the task canceled
            _log.info("remote_cancel_not_journaled", agent=self.frame.name, error=type(exc).__name__)
        return True

    def cancelled(self, task_id: str, outcome: str) -> None:
        _log.info("remote_task_cancelled", agent=self.frame.name, task_id=task_id, outcome=outcome)
        self._emit(task_id, "canceled", "cancel", outcome)
