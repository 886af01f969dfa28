"""The public front end: :func:`load_team` and :class:`Team`.

    team = teamrun.load_team("teams/research-report.yaml")
    result = team.run_sync("Compare Rust and Go for CLI tools")
    print(result.status, result.final_text)
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from teamrun.config.loader import LoadedConfig, load_config
from teamrun.defaults import model_for
from teamrun.engine.agent_loop import run_agent
from teamrun.engine.ledger import BudgetLedger
from teamrun.engine.result import RunResult
from teamrun.engine.runtime import AgentFrame, RunContext, limits_in_force, max_steps_for
from teamrun.engine.tool_sources import tools_for_run
from teamrun.errors import RunError, UsageError
from teamrun.events import EventBus, Subscriber
from teamrun.llm.router import ModelRouter
from teamrun.llm.types import ChatModel, current_scope
from teamrun.tools.approval import Approver, choose_approver
from teamrun.tools.base import Tool, ToolSource
from teamrun.tools.mcp.tape import McpTape
from teamrun.tools.registry import build_tools

if TYPE_CHECKING:
    from teamrun.engine.journal import RunJournal
    from teamrun.llm.cassette import ReplayMode
    from teamrun.store import Store


class Team:
    """A loaded, valid team, ready to run any number of times."""

    def __init__(
        self,
        loaded: LoadedConfig,
        *,
        vars: Mapping[str, Any] | None = None,
        model: str | None = None,
        chat_model: ChatModel | None = None,
        approver: Approver | None = None,
        record: str | Path | None = None,
        replay: str | Path | None = None,
        replay_mode: ReplayMode = "strict",
        wrap_model: Callable[[ChatModel], ChatModel] | None = None,
        store: Store | str | os.PathLike[str] | None = None,
    ) -> None:
        self.loaded = loaded
        self._store_location = store
        """Where threads are kept: a :class:`~teamrun.store.Store`, a file path or URL, or ``None`` (the default)."""
        self._store: Store | None = None
        self._store_lock = threading.Lock()
        self.config = loaded.config
        self.vars = {**(self.config.vars or {}), **(vars or {})}
        self.model_override = model
        self._chat_model = chat_model
        self._router: ModelRouter | None = None
        """The default model (offline simulator or LiteLLM), when teamrun built it."""
        self.approver = approver or choose_approver(None, interactive=False)
        if replay is not None or record is not None:
            from teamrun.llm.cassette import RecordingModel, ReplayModel
            from teamrun.secrets import Redactor

            if replay is not None and (record is not None or chat_model is not None):
                raise UsageError("replay= answers every model call from the cassette; "
                                 "do not combine it with record= or chat_model=")
            if replay is not None:
                self._chat_model = ReplayModel(replay, mode=replay_mode)
            else:
                assert record is not None
                self._chat_model = RecordingModel(self._model(), record,
                                                  redactor=Redactor(loaded.secrets))
        if wrap_model is not None:
            self._chat_model = wrap_model(self._model())
        self.tools: dict[str, Tool | ToolSource] = build_tools(
            self.config.tools or {}, base_dir=loaded.base_dir, secrets=loaded.secrets,
            mcp_tape=McpTape.for_team(self.config.tools, record=record, replay=replay))
        """The team's tools by entry name; a :class:`ToolSource` entry is started when an agent first needs it."""
        self._buses: dict[str, EventBus] = {}
        """Event buses of the runs in progress, by run id."""

    @property
    def name(self) -> str:
        return self.config.name

    def _model(self) -> ChatModel:
        if self._chat_model is None:
            self._router = ModelRouter(on_retry=self._report_retry)
            self._chat_model = self._router
        return self._chat_model

    @property
    def store(self) -> Store:
        """The store (opened, created or upgraded on first use; blocking): threads and run records."""
        with self._store_lock:  # runs in threads (asyncio.to_thread): concurrent runs open it once
            if self._store is None:
                from teamrun.store import Store, open_store

                given = self._store_location
                self._store = given if isinstance(given, Store) else open_store(given)
            return self._store

    def use_store(self, store: Store) -> None:
        """Keep this team's threads and run records in ``store`` (an open store another owner may share)."""
        with self._store_lock:
            self._store_location = store
            self._store = store

    def models(self) -> list[str]:
        """The model of each agent (``--model`` / ``model=`` first, then the agent's, then ``defaults``),
        without repeats, in agent order."""
        if self.model_override:
            return [self.model_override]
        chosen = [model_for(agent, self.config.defaults) for agent in self.config.agents.values()]
        return list(dict.fromkeys(chosen))

    def _report_retry(self, notice: Any) -> None:
        """Turn the adapter's retry notices into ``llm_retry`` events of the run that made the call."""
        scope = current_scope.get()
        bus = self._buses.get(scope.run_id) if scope is not None else None
        if scope is None or bus is None:
            return
        bus.emit("llm_retry", span_id=scope.span_id, parent_span_id=None, agent_path=scope.agent_path,
                 attempt=notice.attempt, max_attempts=notice.max_attempts, delay_s=notice.delay_s,
                 error=notice.reason, status_code=notice.status_code)

    async def run(
        self,
        input: str,
        *,
        subscribers: Iterable[Subscriber] = (),
        cancel: asyncio.Event | None = None,
        thread: str | None = None,
        journal: RunJournal | bool | None = None,
    ) -> RunResult:
        """Run the team on ``input``. Returns a result whatever happens to the run.

        ``cancel``: set it to stop the run; in-flight workers are cancelled and the
        result (``status: cancelled``) keeps everything finished so far.
        ``thread``: the id of a conversation in the team's store (``load_team(..., store=...)``,
        else the default store) to continue, or to start when it is new; see :mod:`teamrun.engine.threads`.
        ``journal``: write every finished model call and tool result there as it completes
        (the run takes the journal's run id); one opened by :func:`teamrun.engine.resume.open_resume`
        also answers the calls an earlier attempt finished (see :mod:`teamrun.engine.resume`).
        ``journal=True`` journals to the team's store (``result.run_id`` is then resumable).
        """
        if journal is True:
            journal = await asyncio.to_thread(self.new_journal, input, thread)
        elif journal is False:
            journal = None
        session = None
        if thread is not None:
            from teamrun.engine.threads import open_thread

            session = await open_thread(await asyncio.to_thread(lambda: self.store), thread, self.config)
        model = self._model()
        if self._router is not None:  # LiteLLM's import takes seconds: before the clock, only if needed
            self._router.prepare(self.models())
        started = time.monotonic()
        run_id = journal.run_id if journal is not None else uuid.uuid4().hex[:12]
        bus = EventBus(run_id)
        for subscriber in subscribers:
            bus.subscribe(subscriber)
        result = RunResult(run_id=run_id, team=self.name, status="done", final_text="",
                           limits_in_force=limits_in_force(self.config))
        tools = tools_for_run(self.tools)  # each run starts (lazily) and stops its own copies of tool sources
        ctx = RunContext(
            config=self.config, base_dir=self.loaded.base_dir, bus=bus, model=model,
            tools=tools, approver=self.approver, result=result, vars=self.vars,
            model_override=self.model_override, thread=session, journal=journal,
        )
        result.thread_id = session.thread_id if session is not None else None
        frame = self._supervisor_frame(bus, session.starts_with if session else None)
        if journal is not None:
            await journal.open()
        self._buses[run_id] = bus
        structlog.contextvars.bind_contextvars(run_id=run_id, team=self.name)
        bus.emit("run_start", span_id=frame.parent_span_id or "run", parent_span_id=None,
                 agent_path=(), team=self.name, input=input)
        if journal is not None and journal.failure is not None:  # the store refused the run's record
            ctx.warn(frame, _journal_warning(journal.failure, run_id))
        escaped: BaseException | None = None
        try:
            if session is not None:
                await session.prepare(ctx, frame)
            await self._drive(ctx, frame, input, cancel)
        except BaseException as exc:  # the journal's record says how the run ended, also this way
            escaped = exc
            raise
        finally:
            await ctx.sources.aclose()
            _settle_spending(ctx, frame)
            self._buses.pop(run_id, None)
            structlog.contextvars.unbind_contextvars("run_id", "team")
            if session is not None:
                not_saved = await session.save(input, result)
                if not_saved:
                    ctx.warn(frame, not_saved)
            result.duration_s = time.monotonic() - started
            bus.emit("run_end", span_id=frame.parent_span_id or "run", parent_span_id=None, agent_path=(),
                     status=result.status, stopped_by=result.stopped_by, usage=result.usage.as_dict(),
                     cost=result.cost, duration_s=result.duration_s)
            if journal is not None:
                await _close_journal(journal, result, escaped)
        return result

    def run_sync(self, input: str, **kwargs: Any) -> RunResult:
        """:meth:`run` for code that is not async.

        Raises :class:`~teamrun.errors.UsageError` inside a running event loop
        (Jupyter, an async framework): there, ``await team.run(...)`` instead.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(input, **kwargs))
        raise UsageError("run_sync() cannot run inside a running event loop (Jupyter, an async "
                         "application): use `result = await team.run(...)` there instead")

    def new_journal(self, input: str, thread: str | None = None, *, run_id: str | None = None) -> RunJournal:
        """A journal for a new run of this team, in its store (blocking: opens the store); pass it to
        :meth:`run` as ``journal=``. ``run_id``: the id to record the run under (default: a new one)."""
        from teamrun.engine.journal import RunJournal
        from teamrun.store.journal import StoreJournal
        from teamrun.store.records import JournaledRun

        record = JournaledRun(run_id=run_id or uuid.uuid4().hex[:12], team=self.name,
                              team_file=str(self.loaded.path.resolve()), input=input,
                              vars=self._var_overrides(), model=self.model_override, thread_id=thread)
        return RunJournal(StoreJournal(self.store), record)

    def _var_overrides(self) -> dict[str, Any]:
        """The vars given on top of the file's own (what a resume must give again)."""
        own = self.config.vars or {}
        return {name: value for name, value in self.vars.items() if own.get(name) != value}

    def _supervisor_frame(self, bus: EventBus, name: str | None = None) -> AgentFrame:
        """The frame of the agent that answers the user: the supervisor, or in a thread the one it was handed to."""
        root = BudgetLedger(self.config.limits, label="limits")
        name = name or self.config.supervisor
        budget = self.config.agents[name].budget
        ledger = root.child(budget, label=f"agents.{name}.budget", depth=0,
                            max_steps=max_steps_for(self.config, budget), agent=name)
        run_span = bus.new_span_id()
        return AgentFrame(name, (name,), bus.new_span_id(), run_span, ledger, key=name)

    def _timeout(self) -> tuple[float | None, str]:
        """The run's wall-clock limit: ``limits.timeout_s`` or the supervisor's own, whichever is shorter."""
        candidates = []
        if self.config.limits and self.config.limits.timeout_s:
            candidates.append((self.config.limits.timeout_s, "limits.timeout_s"))
        budget = self.config.agents[self.config.supervisor].budget
        if budget and budget.timeout_s:
            candidates.append((budget.timeout_s, f"agents.{self.config.supervisor}.budget.timeout_s"))
        return min(candidates) if candidates else (None, "")

    async def _drive(self, ctx: RunContext, frame: AgentFrame, input: str, cancel: asyncio.Event | None) -> None:
        result = ctx.result
        work = asyncio.create_task(run_agent(ctx, frame, input), name=f"teamrun:{frame.name}")
        waiters: set[asyncio.Future[Any]] = {work}
        stop = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
        if stop is not None:
            waiters.add(stop)
        timeout, label = self._timeout()
        try:
            done, _ = await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if work in done:
                try:
                    outcome = work.result()
                except RunError as exc:
                    result.status, result.error = "failed", str(exc)
                    result.final_text = _partial_text(result, f"the run failed: {exc}")
                    return
                result.final_text = outcome.text
                if outcome.status != "ok":
                    result.status, result.stopped_by = "budget_exhausted", outcome.stopped_by
                return
            if stop is not None and stop in done:
                result.status, result.stopped_by = "cancelled", "interrupted"
            else:
                result.status, result.stopped_by = "budget_exhausted", f"{label} ({timeout})"
            await _cancel(work)
            result.final_text = _partial_text(result, f"the run was stopped ({result.stopped_by})")
        finally:
            if not work.done():
                await _cancel(work)
            if stop is not None and not stop.done():
                stop.cancel()


async def _close_journal(journal: RunJournal, result: RunResult, escaped: BaseException | None) -> None:
    """The run's outcome into its record; a journal that could not be written is a warning on the result.

    ``escaped``: what ended the run by leaving :meth:`Team.run` (a usage error, a task cancellation).
    """
    status, error = result.status, result.error
    if escaped is not None:
        cancelled = isinstance(escaped, asyncio.CancelledError | KeyboardInterrupt)
        status, error = ("cancelled" if cancelled else "failed"), str(escaped) or type(escaped).__name__
    await journal.close(status=status, usage=result.usage.as_dict(), cost=result.cost,
                        final_text=result.final_text, error=error)
    said = _journal_warning(journal.failure, result.run_id) if journal.failure is not None else None
    if said is not None and said not in result.warnings:  # a failure at open was said when the run started
        result.warnings.append(said)


def _journal_warning(failure: str, run_id: str) -> str:
    return f"the run journal could not be written ({failure}); run {run_id} cannot be resumed from where it stopped"


def _settle_spending(ctx: RunContext, frame: AgentFrame) -> None:
    """Per-agent figures from the run's ledgers; limits the run went past are said plainly (run warnings)."""
    result, root = ctx.result, frame.ledger.root
    result.agents = root.per_agent()
    result.overshoot = root.overshoot()
    for limit, figures in result.overshoot.items():
        ctx.warn(frame, f"{limit} ({figures['limit']}) was overshot: {figures['used']} used (+{figures['over']})")


async def _cancel(task: asyncio.Task[Any]) -> None:
    task.cancel()
    try:
        await task
    except BaseException:
        pass


def _partial_text(result: RunResult, headline: str) -> str:
    finished = [d for d in result.delegations if d.status == "ok" and d.response]
    if not finished:
        return ""  # nothing to show; status, stopped_by and error say what happened
    lines = [f"No final answer: {headline}. Results finished so far:"]
    lines += [f"- {d.agent}: {d.response}" for d in finished]
    return "\n".join(lines)


def load_team(
    path: str | Path,
    *,
    vars: Mapping[str, Any] | None = None,
    model: str | None = None,
    chat_model: ChatModel | None = None,
    approver: Approver | None = None,
    environ: Mapping[str, str] | None = None,
    record: str | Path | None = None,
    replay: str | Path | None = None,
    replay_mode: ReplayMode = "strict",
    wrap_model: Callable[[ChatModel], ChatModel] | None = None,
    store: Store | str | os.PathLike[str] | None = None,
) -> Team:
    """Load and validate a team file; raises :class:`~teamrun.errors.ConfigError` listing every problem.

    ``model`` overrides every agent's model (e.g. ``"offline"``); ``vars`` override
    the file's ``vars``; ``approver`` decides on tools that ``require_approval``
    (default: deny them). ``record="c.jsonl"`` stores every model exchange in a
    cassette; ``replay="c.jsonl"`` answers every model call from one, with no
    network (``replay_mode``: ``"strict"`` fails on a request that was not
    recorded, ``"lenient"`` falls back to the next reply of that agent and turn).
    ``wrap_model`` wraps the chosen chat model (observers such as the trace's
    content capture use it). ``store`` (a :class:`~teamrun.store.Store`, a file path or a SQLAlchemy URL;
    default ``$TEAMRUN_STORE``, else ``~/.local/share/teamrun/teamrun.db``) keeps the threads of
    ``team.run(input, thread="ID")``; it is opened only when a thread is used.
    """
    return Team(load_config(path, environ=environ), vars=vars, model=model, chat_model=chat_model,
                approver=approver, record=record, replay=replay, replay_mode=replay_mode, wrap_model=wrap_model,
                store=store)
