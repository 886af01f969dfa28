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
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from teamrun.config.loader import LoadedConfig, load_config
from teamrun.config.models import Limits, TeamConfig
from teamrun.defaults import API_BASE_ENV, api_base_problem, run_api_base, team_models
from teamrun.engine.durability.resume import hold_open_failed_models
from teamrun.engine.limits.ledger import BudgetLedger, RunCeiling
from teamrun.engine.memory import memory_for_run
from teamrun.engine.memory.calls import TurnIndex, embed_turn, index_turn
from teamrun.engine.memory.working import load_working_memory, save_working_memory
from teamrun.engine.peers import PEERS_FRAME, run_peers, stopped_summary
from teamrun.engine.peers.driver import open_boards
from teamrun.engine.result import RunResult, new_run_id
from teamrun.engine.runtime import AgentFrame, RunContext, limits_in_force, max_steps_for
from teamrun.engine.tool_sources import tools_for_run
from teamrun.engine.turn.agent_loop import run_agent
from teamrun.engine.turn.model_call import ModelCall, call_model
from teamrun.engine.workflow import WORKFLOW_FRAME, run_workflow
from teamrun.engine.workspace.carry import THREAD_META_KEY, carry_over, kept
from teamrun.engine.workspace.live import watch
from teamrun.engine.workspace.state import WorkspaceState
from teamrun.engine.workspace.writes import restore_from_journal
from teamrun.errors import RunError, UsageError
from teamrun.events import EventBus, Subscriber
from teamrun.llm.breaker import process_breakers
from teamrun.llm.router import ModelRouter
from teamrun.llm.types import ChatModel, Message, current_scope
from teamrun.store.memory import check_resource_id
from teamrun.store.records import USAGE_UNKNOWN_KEY
from teamrun.tools.approval import Approver, choose_approver
from teamrun.tools.base import Tool, ToolSource
from teamrun.tools.mcp.tape import McpTape
from teamrun.tools.people import PersonDesk, UnattendedDesk
from teamrun.tools.registry import build_tools

if TYPE_CHECKING:
    from teamrun.engine.durability.journal import RunJournal
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
        api_base: str | None = None,
        chat_model: ChatModel | None = None,
        approver: Approver | None = None,
        record: str | Path | None = None,
        replay: str | Path | None = None,
        replay_mode: ReplayMode = "strict",
        wrap_model: Callable[[ChatModel], ChatModel] | None = None,
        store: Store | str | os.PathLike[str] | None = None,
    ) -> None:
        if any(agent.a2a is not None for agent in loaded.config.agents.values()):
            from teamrun.engine.remote.cards import with_remote_tokens

            loaded = with_remote_tokens(loaded)  # its remote agents' bearer tokens are secrets of its runs
        self.loaded = loaded
        self._store_location = store
        """Where threads are kept: a :class:`~teamrun.store.Store`, a file path or URL, or ``None`` (the default)."""
        self._store: Store | None = None
        self._store_lock = threading.Lock()
        self.config = loaded.config
        self.vars = {**(self.config.vars or {}), **(vars or {})}
        self.model_override = model
        self.api_base = run_api_base(api_base)
        if self.api_base is not None and (problem := api_base_problem(self.api_base)) is not None:
            where = "--api-base" if api_base is not None else f"${API_BASE_ENV}"
            raise UsageError(f"{where}: {problem}")
        """The endpoint of every agent that sets no ``api_base`` and whose model is not ``offline``
        (``api_base=``, else ``$TEAMRUN_API_BASE``; ``None``: each provider's own)."""
        self._chat_model = chat_model
        self._router: ModelRouter | None = None
        """The default model (offline simulator or LiteLLM), when teamrun built it."""
        self.approver = approver or choose_approver(None, interactive=False)
        self.desk: PersonDesk = UnattendedDesk()
        """Who answers the agents' questions (``person:`` tools): nobody by default; the CLI sets a terminal
        desk, or :class:`~teamrun.engine.durability.pending.SuspendingDesk` for a journaled run that may suspend."""
        if replay is not None or record is not None:
            from teamrun.llm.cassette import RecordingModel, ReplayModel
            from teamrun.secrets import Redactor

            if replay is not None and (record is not None or chat_model is not None):
                raise UsageError(
                    "replay= answers every model call from the cassette; do not combine it with record= or chat_model="
                )
            if replay is not None:
                self._chat_model = ReplayModel(replay, mode=replay_mode)
            else:
                assert record is not None
                self._chat_model = RecordingModel(self._model(), record, redactor=Redactor(loaded.secrets))
        if wrap_model is not None:
            self._chat_model = wrap_model(self._model())
        self.tools: dict[str, Tool | ToolSource] = build_tools(
            self.config.tools or {},
            base_dir=loaded.base_dir,
            secrets=loaded.secrets,
            mcp_tape=McpTape.for_team(self.config.tools, record=record, replay=replay),
        )
        """The team's tools by entry name; a :class:`ToolSource` entry is started when an agent first needs it."""

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
        without repeats, in agent order; remote (``a2a:``) agents call no model and are left out."""
        return team_models(self.config.agents.values(), self.config.defaults, override=self.model_override)

    def models_to_prepare(self) -> list[str]:
        """:meth:`models` followed by each agent's ``fallbacks`` (its own, else ``defaults``'), without repeats:
        what start-up imports LiteLLM for and warms, so the first call that falls back does not pay it.
        ``--model`` / ``model=`` replaces each agent's list: then only :meth:`models`."""
        chosen = self.models()
        if not self.model_override:
            defaults = self.config.defaults
            for agent in self.config.agents.values():
                if agent.a2a is not None:
                    continue
                entries = agent.fallbacks if agent.fallbacks is not None else defaults and defaults.fallbacks
                chosen.extend(entry.model for entry in entries or ())
        return list(dict.fromkeys(chosen))

    @property
    def model_router(self) -> ModelRouter | None:
        """The chat model teamrun built (offline simulator or LiteLLM by model name); ``None`` when a
        ``chat_model`` or ``replay`` answers the calls."""
        self._model()
        return self._router

    def imports_litellm(self) -> bool:
        """Whether :meth:`prepare_models` will import LiteLLM (seconds): an agent's model is not offline, and
        LiteLLM is not imported in this process yet. Said on the console before it happens."""
        router = self.model_router
        return router is not None and router.imports_litellm(self.models_to_prepare())

    def prepare_models(self) -> None:
        """Import LiteLLM and build its adapter now if an agent's model needs it (blocking; :meth:`run` does it
        before its clock starts when it has not been done)."""
        router = self.model_router
        if router is not None:
            router.prepare(self.models_to_prepare())

    async def warm_up(self) -> list[str]:
        """:meth:`prepare_models` (off the event loop) and LiteLLM's first-call set-up of each model that is not
        offline, with no request: a server does it at start-up so its first request does not pay either.
        Returns the models warmed now."""
        router = self.model_router
        return await router.warm_up(self.models_to_prepare()) if router is not None else []

    def _report_retry(self, notice: Any) -> None:
        """Turn the adapter's retry notices into ``llm_retry`` events of the run that made the call."""
        scope = current_scope.get()
        bus = EventBus.of_run(scope.run_id) if scope is not None else None
        if scope is None or bus is None:
            return
        bus.emit(
            "llm_retry",
            span_id=scope.span_id,
            parent_span_id=None,
            agent_path=scope.agent_path,
            attempt=notice.attempt,
            max_attempts=notice.max_attempts,
            delay_s=notice.delay_s,
            error=notice.reason,
            status_code=notice.status_code,
        )

    async def run(
        self,
        input: str,
        *,
        subscribers: Iterable[Subscriber] = (),
        cancel: asyncio.Event | None = None,
        thread: str | None = None,
        journal: RunJournal | bool | None = None,
        limits: Limits | None = None,
        vars: Mapping[str, Any] | None = None,
        ceiling: RunCeiling | None = None,
        approver: Approver | None = None,
        desk: PersonDesk | None = None,
        run_id: str | None = None,
        resource: str | None = None,
    ) -> RunResult:
        """Run the team on ``input``. Returns a result whatever happens to the run.

        ``cancel``: set it to stop the run; in-flight workers are cancelled and the
        result (``status: cancelled``) keeps everything finished so far.
        ``thread``: the id of a conversation in the team's store (``load_team(..., store=...)``,
        else the default store) to continue, or to start when it is new; see :mod:`teamrun.engine.durability.threads`.
        ``journal``: write every finished model call and tool result there as it completes
        (the run takes the journal's run id); one opened by :func:`teamrun.engine.durability.resume.open_resume`
        also answers the calls an earlier attempt finished (see :mod:`teamrun.engine.durability.resume`).
        ``journal=True`` journals to the team's store (``result.run_id`` is then resumable).
        ``limits``: this run's ``limits:``, each at most the team file's (a higher one is a
        :class:`~teamrun.errors.UsageError`), kept in the journal's record: a resume (a journal from
        ``open_resume``) given none runs under the recorded ones again; ``vars``: this run's vars on top
        of the team's.
        ``ceiling``: spending this run may not exceed on top of its limits (a batch row's), checked
        before each model call like every limit.
        ``approver``: who decides this run's ``require_approval`` tool calls (default: :attr:`approver`);
        ``desk``: who answers this run's questions and approvals from ``person:`` tools (default: :attr:`desk`).
        ``run_id``: the run's id (its events, result and journal record; it must not be the id of a run in
        progress); with a journal given, it must be the journal's. Default: the journal's, else a new one.
        ``resource``: whose long-term memory the run recalls and saves (a user's or an organisation's id; see
        docs/memory.md); a resume given none takes its first attempt's. Without one the run has no long-term
        memory (a team file with ``memory:`` says so in a warning).
        Every argument is this run's own: the team's attributes are not changed, and concurrent runs of
        one team may each pass their own.
        """
        _lowered(self.config, limits)  # a limit above the file's is refused before anything is opened
        if resource is not None:
            check_resource_id(resource)  # a bad id is refused before anything is opened
        run_vars = {**self.vars, **(vars or {})}
        if journal is True:
            journal = await asyncio.to_thread(lambda: self.new_journal(input, thread, run_id=run_id, vars=vars))
        elif journal is False:
            journal = None
        elif journal is not None and run_id is not None and run_id != journal.run_id:
            raise UsageError(f"run_id={run_id!r} differs from the journal's run id {journal.run_id!r}")
        if journal is not None:  # the record keeps the run's own limits; a resume given none takes them again
            if limits is None and journal.record.limits:
                limits = Limits.model_validate(journal.record.limits)
            journal.record.limits = limits.model_dump(exclude_none=True) if limits is not None else {}
        config = _lowered(self.config, limits)
        remote_warnings: list[str] = []
        cards: dict[tuple[str, str | None], Any] = {}  # read once per run: the delegations use these copies
        if any(agent.a2a is not None for agent in config.agents.values()):  # remote workers: their cards
            from teamrun.engine.remote.cards import describe_remote_agents

            config, remote_warnings = await describe_remote_agents(config, cards)
        session = None
        if thread is not None:
            from teamrun.engine.durability.threads import open_thread

            session = await open_thread(
                await asyncio.to_thread(lambda: self.store),
                thread,
                self.config,
                run_id=journal.run_id if journal is not None else None,  # a turn that waited continues as itself
                # a thread belongs to one resource: a resume given none takes its first attempt's
                resource=resource if resource is not None or journal is None else journal.replay.memory_resource(),
                resumed=journal is not None and bool(journal.replay),
            )
        model = self._model()
        self.prepare_models()  # LiteLLM's import takes seconds: before the clock, only if needed
        started = time.monotonic()
        run_id = journal.run_id if journal is not None else run_id or new_run_id()
        bus = EventBus(run_id)
        for subscriber in subscribers:
            bus.subscribe(subscriber)
        secrets = _RunSecrets(self.loaded.secrets)  # masks the result's error as events are masked
        bus.subscribe(secrets)
        result = RunResult(
            run_id=run_id, team=self.name, status="done", final_text="", limits_in_force=limits_in_force(config)
        )
        tools = tools_for_run(self.tools)  # each run starts (lazily) and stops its own copies of tool sources
        ctx = RunContext(
            config=config,
            base_dir=self.loaded.base_dir,
            bus=bus,
            model=model,
            tools=tools,
            approver=approver if approver is not None else self.approver,
            result=result,
            vars=run_vars,
            model_override=self.model_override,
            api_base=self.api_base,
            thread=session,
            journal=journal,
            desk=desk if desk is not None else self.desk,
            cards=cards,
        )
        carried: list[str] = []  # warnings: kept entries of the thread the team file refuses now
        if config.workspace is not None:
            ctx.workspace, start = WorkspaceState(config.workspace), 0
            if session is not None and config.workspace.persist == "thread":  # the thread's previous turn's
                start, carried = carry_over(ctx.workspace, session.workspace, session.thread_id)
                result.workspace = {"carried_over": {"thread": session.thread_id, "version": start}}
            start = restore_from_journal(ctx.workspace, ctx)  # a resume starts where the earlier attempts stopped
            watch(run_id, ctx.workspace, started_at=start)  # a reader's `since` goes on from there
            open_boards(ctx)
        result.thread_id = session.thread_id if session is not None else None
        frame = _supervisor_frame(config, bus, session.starts_with if session else None, ceiling)
        if journal is not None:
            await journal.open()
            hold_open_failed_models(journal.replay, self._router.breakers if self._router else process_breakers())
        ctx.memory, memory_warnings = await memory_for_run(
            config.memory,
            lambda: self.store,
            resource,
            journal,
            secrets=self.loaded.secrets,
            api_base=self.api_base,
            working_memory=config.workspace is not None and config.workspace.persist == "resource",
            chat_model=self._chat_model,  # a recording keeps the embeddings, a replay answers them
        )
        if ctx.memory is not None:
            bus.subscribe(ctx.memory)  # it learns the run's later secrets (a secret answer) before it embeds
        structlog.contextvars.bind_contextvars(run_id=run_id, team=self.name)
        bus.emit(
            "run_start",
            span_id=frame.parent_span_id or "run",
            parent_span_id=None,
            agent_path=(),
            team=self.name,
            input=input,
        )
        if journal is not None and journal.failure is not None:  # the store refused the run's record
            ctx.warn(frame, _journal_warning(journal.failure, run_id))
        memory_warnings += await load_working_memory(ctx, frame)  # after run_start: its loads are events
        for warning in [*carried, *remote_warnings, *memory_warnings]:
            ctx.warn(frame, warning)
        if ctx.workspace is not None and (unfit := ctx.workspace.unfit_entries()):
            ctx.warn(
                frame,
                f"the workspace restored from the journal does not satisfy the team file's schema for "
                f"{', '.join(unfit)} (was the file edited since the run began?); the values are kept, and "
                "a write that keeps them unfit is refused",
            )
        escaped: BaseException | None = None
        turn: TurnIndex | None = None
        try:
            if session is not None:
                await session.prepare(_summariser(ctx, frame), lambda message: ctx.warn(frame, message))
            await _drive(ctx, frame, input, cancel)
            turn = await embed_turn(ctx, frame, input)  # for other threads' recall: paid before spending is settled
        except BaseException as exc:  # the journal's record says how the run ended, also this way
            escaped = exc
            raise
        finally:
            await ctx.sources.aclose()
            _settle_spending(ctx, frame)
            structlog.contextvars.unbind_contextvars("run_id", "team")
            if session is not None:
                kept_meta = _thread_meta(config, ctx)
                not_saved = await session.save(input, result, meta=kept_meta)
                if not_saved:
                    ctx.warn(frame, not_saved)
                elif turn is not None:  # the thread kept the turn: other threads may recall it
                    await index_turn(ctx, frame, turn)
            if not_kept := await save_working_memory(ctx):
                ctx.warn(frame, not_kept)
            result.duration_s = time.monotonic() - started
            secrets.mask(result)
            if ctx.workspace is not None:
                result.workspace = {**ctx.workspace.snapshot(), **(result.workspace or {})}
            bus.emit(
                "run_end",
                span_id=frame.parent_span_id or "run",
                parent_span_id=None,
                agent_path=(),
                status=result.status,
                stopped_by=result.stopped_by,
                usage=result.usage.as_dict(),
                cost=result.cost,
                duration_s=result.duration_s,
            )
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
        raise UsageError(
            "run_sync() cannot run inside a running event loop (Jupyter, an async "
            "application): use `result = await team.run(...)` there instead"
        )

    def new_journal(
        self, input: str, thread: str | None = None, *, run_id: str | None = None, vars: Mapping[str, Any] | None = None
    ) -> RunJournal:
        """A journal for a new run of this team, in its store (blocking: opens the store); pass it to
        :meth:`run` as ``journal=``. ``run_id``: the id to record the run under (default: a new one);
        ``vars``: the run's own vars (``Team.run(vars=...)``), recorded so a resume gives them again."""
        from teamrun.engine.durability.journal import RunJournal
        from teamrun.store.journal import StoreJournal
        from teamrun.store.records import JournaledRun

        record = JournaledRun(
            run_id=run_id or new_run_id(),
            team=self.name,
            team_file=str(self.loaded.path.resolve()),
            input=input,
            vars=self._var_overrides(vars),
            model=self.model_override,
            api_base=self.api_base,
            thread_id=thread,
        )
        return RunJournal(StoreJournal(self.store), record)

    def _var_overrides(self, run_vars: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The vars given on top of the file's own (what a resume must give again)."""
        own = self.config.vars or {}
        given = {**self.vars, **(run_vars or {})}
        return {name: value for name, value in given.items() if own.get(name) != value}


def _lowered(config: TeamConfig, limits: Limits | None) -> TeamConfig:
    """``config`` with a run's ``limits`` (each at most the file's)."""
    asked = limits.model_dump(exclude_none=True) if limits is not None else {}
    if not asked:
        return config
    current = config.limits or Limits()
    too_high = [
        f"limits.{key} ({value}) is higher than the team's limits.{key} ({getattr(current, key)})"
        for key, value in asked.items()
        if getattr(current, key) is not None and value > getattr(current, key)
    ]
    if too_high:
        raise UsageError("; ".join(too_high) + ": a run may only lower the team's limits")
    return config.model_copy(update={"limits": current.model_copy(update=asked)})


def _supervisor_frame(
    config: TeamConfig, bus: EventBus, name: str | None = None, ceiling: RunCeiling | None = None
) -> AgentFrame:
    """The frame of the agent that answers the user: the supervisor, or in a thread the one it was handed to."""
    top = ceiling.ledger() if ceiling is not None else None
    root = (
        top.child(config.limits, label="limits", depth=0)
        if top is not None
        else BudgetLedger(config.limits, label="limits")
    )
    name = name or config.supervisor
    if name is None or config.workflow is not None or config.peers is not None:  # its frame holds the limits only
        head = PEERS_FRAME if config.peers is not None else WORKFLOW_FRAME
        return AgentFrame(  # its own calls (until: judges, a thread's summary) are reported as `workflow`'s
            head,
            (head,),
            bus.new_span_id(),
            bus.new_span_id(),
            root.child(None, label="limits", depth=0, agent=head),
            key=head,
        )
    budget = config.agents[name].budget
    ledger = root.child(
        budget, label=f"agents.{name}.budget", depth=0, max_steps=max_steps_for(config, budget), agent=name
    )
    run_span = bus.new_span_id()
    return AgentFrame(name, (name,), bus.new_span_id(), run_span, ledger, key=name)


class _RunSecrets:
    """The run's secrets, masked as its events are (the team file's, the environment's secret variables, and those
    the run learns: :meth:`EventBus.keep_secrets`): for what the result says that a provider may have echoed."""

    def __init__(self, secrets: Iterable[str]) -> None:
        from teamrun.secrets import Redactor

        self.redactor = Redactor(secrets)

    def __call__(self, event: Any) -> None:
        """Events are not read: subscribed only to be told secrets."""

    def keep_secrets(self, values: Iterable[str]) -> None:
        self.redactor.add(values, declared=True)

    def mask(self, result: RunResult) -> None:
        """The result's error, the reason it stopped and a failed run's text, masked."""
        if result.error:
            result.error = self.redactor.text(result.error)
        if result.stopped_by:
            result.stopped_by = self.redactor.text(result.stopped_by)
        if result.status == "failed" and result.final_text:
            result.final_text = self.redactor.text(result.final_text)


def _timeout(config: TeamConfig) -> tuple[float | None, str]:
    """The run's wall-clock limit: ``limits.timeout_s`` or the supervisor's own, whichever is shorter."""
    candidates = []
    if config.limits and config.limits.timeout_s:
        candidates.append((config.limits.timeout_s, "limits.timeout_s"))
    budget = config.agents[config.supervisor].budget if config.supervisor is not None else None
    if budget and budget.timeout_s:
        candidates.append((budget.timeout_s, f"agents.{config.supervisor}.budget.timeout_s"))
    return min(candidates) if candidates else (None, "")


def _summariser(ctx: RunContext, frame: AgentFrame) -> Callable[[list[Message]], Any]:
    """A thread's summary call: the answering agent's model, charged to it, under the run's span."""

    async def summarise(messages: list[Message]) -> str:
        reply = await call_model(
            ctx,
            frame,
            messages,
            ModelCall(0, parent_span_id=frame.parent_span_id),
            settings=ctx.settings_for(frame.name),
        )
        return (reply.text or "").strip()

    return summarise


async def _drive(ctx: RunContext, frame: AgentFrame, input: str, cancel: asyncio.Event | None) -> None:
    result = ctx.result
    if ctx.config.peers is not None:
        job = run_peers(ctx, frame, input, lambda child, task: run_agent(ctx, child, task, "peer"))
    elif ctx.config.workflow is not None:
        job = run_workflow(ctx, frame, input, lambda child, task: run_agent(ctx, child, task, "step"))
    else:
        job = run_agent(ctx, frame, input, "entry")
    work = asyncio.create_task(job, name=f"teamrun:{frame.name}")
    stuck = asyncio.ensure_future(ctx.activity.stuck.wait())  # all of it waits for people: it suspends
    waiters: set[asyncio.Future[Any]] = {work, stuck}
    stop = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
    if stop is not None:
        waiters.add(stop)
    timeout, label = _timeout(ctx.config)
    try:
        done = await _wait_first(waiters, timeout, ctx)
        if work in done:
            try:
                outcome = work.result()
            except RunError as exc:
                result.status, result.error = "failed", str(exc)
                result.final_text = _partial_text(result, f"the run failed: {exc}")
                return
            result.final_text = outcome.text
            if outcome.status in ("deadlock", "stranded"):  # a peer team that could not finish its board
                result.status, result.stopped_by, result.error = "failed", outcome.stopped_by, outcome.stopped_by
            elif outcome.status != "ok":
                result.status, result.stopped_by = "budget_exhausted", outcome.stopped_by
            return
        if stop is not None and stop in done:
            result.status, result.stopped_by = "cancelled", "cancelled"  # by its caller, not a dead process
        elif stuck in done or ctx.activity.stuck.is_set():  # all of it waits for people as the clock struck
            result.status, result.stopped_by = "waiting", "waiting for a person"
            await _cancel(work)
            return
        else:
            result.status, result.stopped_by = "budget_exhausted", f"{label} ({timeout})"
            if waiting := _waiting_on(ctx):
                ctx.warn(frame, f"{label} ({timeout}) was reached while waiting on {waiting}")
        await _cancel(work)
        headline = f"the run was stopped ({result.stopped_by})"
        peers_done = stopped_summary(ctx, headline) if ctx.config.peers is not None else ""
        result.final_text = peers_done or _partial_text(result, headline)
    finally:
        if not work.done():
            await _cancel(work)
        if stop is not None and not stop.done():
            stop.cancel()
        if not stuck.done():
            stuck.cancel()


def _waiting_on(ctx: RunContext) -> str:
    """The model calls in flight when the run's timeout struck (a hung endpoint named), at most three."""
    calls = list(dict.fromkeys(ctx.calls_in_flight.values()))
    if not calls:
        return ""
    more = f" and {len(calls) - 3} more" if len(calls) > 3 else ""
    return ", ".join(calls[:3]) + more


async def _wait_first(waiters: set[asyncio.Future[Any]], timeout: float | None, ctx: RunContext) -> set[Any]:
    """The first of ``waiters`` done, or none once ``timeout`` passed; time spent waiting for people does not
    count against the timeout."""
    started = time.monotonic()
    while True:
        left = None if timeout is None else started + timeout + ctx.activity.waited_s - time.monotonic()
        if left is not None and left <= 0:
            return set()
        done, _ = await asyncio.wait(waiters, timeout=left, return_when=asyncio.FIRST_COMPLETED)
        if done:
            return done


async def _close_journal(journal: RunJournal, result: RunResult, escaped: BaseException | None) -> None:
    """The run's outcome into its record; a journal that could not be written is a warning on the result.

    ``escaped``: what ended the run by leaving :meth:`Team.run` (a usage error, a task cancellation).
    """
    status, error = result.status, result.error
    if escaped is not None:
        cancelled = isinstance(escaped, asyncio.CancelledError | KeyboardInterrupt)
        status, error = ("cancelled" if cancelled else "failed"), str(escaped) or type(escaped).__name__
    usage = result.usage.as_dict()
    if not result.usage_known:  # kept with the record: a stored run's tokens and cost are then unknown, never 0
        usage[USAGE_UNKNOWN_KEY] = 0
    await journal.close(status=status, usage=usage, cost=result.cost, final_text=result.final_text, error=error)
    said = _journal_warning(journal.failure, result.run_id) if journal.failure is not None else None
    if said is not None and said not in result.warnings:  # a failure at open was said when the run started
        result.warnings.append(said)


def _thread_meta(config: TeamConfig, ctx: RunContext) -> dict[str, Any] | None:
    """What a thread keeps with a turn besides its messages: the workspace, under ``persist: thread``."""
    if ctx.workspace is None or config.workspace is None or config.workspace.persist != "thread":
        return None
    return {THREAD_META_KEY: kept(ctx.workspace)}


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
    api_base: str | None = None,
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

    ``model`` overrides every agent's model (e.g. ``"offline"``); ``api_base`` is the endpoint of every
    agent that sets no ``api_base`` of its own (default ``$TEAMRUN_API_BASE``; never for ``offline``,
    ``""``: none); ``vars`` override
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
    return Team(
        load_config(path, environ=environ),
        vars=vars,
        model=model,
        api_base=api_base if api_base is not None or environ is None else environ.get(API_BASE_ENV, ""),
        chat_model=chat_model,
        approver=approver,
        record=record,
        replay=replay,
        replay_mode=replay_mode,
        wrap_model=wrap_model,
        store=store,
    )
