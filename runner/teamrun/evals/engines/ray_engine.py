"""The Ray engine: rows and cases run on Ray workers, with the code the local engine runs.

The driver (the ``teamrun`` process) keeps what the local engine keeps: the
queue of rows in input order, ``--workers`` of them in flight, the progress
line, the total budget and the output file, where each row is appended and
flushed as its result comes back. Only the runs move: each goes to one of a
pool of :class:`RowRunner` actors (one per CPU of the cluster, at most one per
worker), asyncio actors running several rows at once as the local engine does.

A runner is sent paths and values, never live objects: the team file's path
and the environment values it refers to (so it loads the same team), the model
override, a replay cassette's path, a cases file's path. It loads the team
with :func:`teamrun.config.loader.load_config` and runs rows with
:func:`teamrun.evals.batch.run_row` and cases with
:func:`teamrun.evals.evaluate.run_case`, as the local engine does; the offline
model needs no LiteLLM there either. ``--rpm``/``--tpm`` are one
:class:`~teamrun.evals.ratelimit.RateLimiter` living on a :class:`SharedRateLimit`
actor that every runner's model waits on.

On a cluster, every node needs teamrun (and what the team imports) installed,
and the team, cases and cassette files at the same paths (a shared or
identical checkout); a local ``ray.init()`` needs nothing more.

Ray is imported only when this engine starts: the ``ray`` extra.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from teamrun.config.loader import LoadedConfig, load_config
from teamrun.errors import RunError, TeamrunError, UsageError
from teamrun.evals.batch import InputRow, run_row
from teamrun.evals.cases import LoadedCases, load_cases
from teamrun.evals.engines.base import chat_model_for
from teamrun.evals.evaluate import CaseResult, run_case
from teamrun.evals.guarded import Ceiling
from teamrun.evals.ratelimit import RateLimitedModel, RateLimiter
from teamrun.events import Subscriber
from teamrun.extras import install_hint
from teamrun.llm.types import ChatModel

__all__ = ["RayEngine", "RowRunner", "SharedRateLimit", "WorkerSpec", "check_reachable", "import_ray", "ray_missing"]


def ray_missing() -> str:
    """What to say when Ray is not installed here."""
    return f"--engine ray needs Ray, an optional extra of teamrun: {install_hint('ray')}"


_FORWARDED = ("LITELLM_LOCAL_MODEL_COST_MAP",)
"""Set on the workers as on the driver, whether or not the team file refers to them."""


def import_ray() -> ModuleType:
    """The ``ray`` module, or a :class:`UsageError` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UsageError(ray_missing()) from None
    return ray


@dataclass(frozen=True)
class WorkerSpec:
    """What a Ray worker needs to run the team as the driver would: paths and values only."""

    team_path: str
    """The team file, an absolute path."""
    environ: dict[str, str] = field(default_factory=dict)
    """The driver's values of the environment variables the team file refers to (and a few for LiteLLM)."""
    cwd: str | None = None
    """The driver's working folder; a worker where it exists works there (command tools, relative paths)."""
    model: str | None = None
    """``--model``: one model for every agent."""
    replay: str | None = None
    """``--replay``: the cassette, an absolute path."""
    extra_models: tuple[str, ...] = ()
    """Models used outside the team (judges), so LiteLLM is imported before the first case if one needs it."""
    api_base: str | None = None
    """``--api-base``: the endpoint of every agent (and judge) that sets none."""

    @classmethod
    def for_team(
        cls,
        loaded: LoadedConfig,
        *,
        model: str | None = None,
        replay: str | None = None,
        extra_models: Sequence[str] = (),
        api_base: str | None = None,
    ) -> WorkerSpec:
        seen = _ReferencedEnviron(os.environ)
        load_config(loaded.path, environ=seen)  # again, noting which variables the file reads
        bearer = [a.a2a.auth.bearer_env for a in loaded.config.agents.values() if a.a2a and a.a2a.auth]
        names = (*seen.names, *bearer, *_FORWARDED)  # the remote agents' tokens are read by the engine, not the file
        environ = {name: os.environ[name] for name in names if name in os.environ}
        return cls(
            str(loaded.path),
            environ,
            os.getcwd(),
            model,
            str(Path(replay).resolve()) if replay is not None else None,
            tuple(extra_models),
            api_base,
        )


class _ReferencedEnviron(Mapping[str, str]):
    """An environment that remembers which names were looked up."""

    def __init__(self, inner: Mapping[str, str]) -> None:
        self.inner = inner
        self.names: list[str] = []

    def __getitem__(self, name: str) -> str:
        if name not in self.names:
            self.names.append(name)
        return self.inner[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)


class SharedRateLimit:
    """A Ray actor holding the batch's one :class:`RateLimiter`: every worker's requests count against it."""

    def __init__(self, rpm: int | None, tpm: int | None) -> None:
        self.limiter = RateLimiter(rpm=rpm, tpm=tpm)

    async def acquire(self) -> None:
        await self.limiter.acquire()

    async def spent(self, tokens: int) -> None:
        self.limiter.spent(tokens)


class _RemoteLimiter:
    """The worker's side of :class:`SharedRateLimit` (a :class:`~teamrun.evals.ratelimit.Limiter`)."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    async def acquire(self) -> None:
        await self.actor.acquire.remote()

    def spent(self, tokens: int) -> None:
        if tokens > 0:
            self.actor.spent.remote(tokens)


class RowRunner:
    """A Ray actor running rows and cases on its own asyncio loop, as the local engine does."""

    def __init__(self, spec: WorkerSpec, limiter: Any = None) -> None:
        os.environ.update(spec.environ)  # before anything imports LiteLLM; this process is the actor's alone
        if spec.cwd is not None and os.path.isdir(spec.cwd):
            os.chdir(spec.cwd)
        self.spec = spec
        self.loaded = load_config(spec.team_path)
        model = chat_model_for(self.loaded, model=spec.model, replay=spec.replay, extra_models=spec.extra_models)
        self.chat_model: ChatModel = model if limiter is None else RateLimitedModel(model, _RemoteLimiter(limiter))
        self._cases: dict[str, LoadedCases] = {}

    async def ready(self) -> None:
        """Returns once the actor is built (its team loaded): start-up errors surface here."""

    async def run_row(self, row: InputRow, ceiling: Ceiling) -> dict[str, Any]:
        spec = self.spec
        return await run_row(
            self.loaded, row, ceiling, chat_model=self.chat_model, model=spec.model, api_base=spec.api_base
        )

    async def run_case(self, cases_path: str, index: int) -> CaseResult:
        cases = self._cases.get(cases_path)
        if cases is None:
            cases = self._cases[cases_path] = load_cases(cases_path)
        spec = self.spec
        return await run_case(
            self.loaded, cases, index, chat_model=self.chat_model, model=spec.model, api_base=spec.api_base
        )


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast when a cluster address names a host:port nobody answers on.

    Ray's own connect keeps retrying for minutes on a wrong address; ``auto``,
    ``local`` and addresses without a port are left to Ray.
    """
    hostport = address.removeprefix("ray://").rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise UsageError(
            f"cannot reach the Ray cluster at {address}: {exc.strerror or exc} "
            "(is its head node running, and is that the right port?)"
        ) from None


class RayEngine:
    """Runs rows and cases on a pool of :class:`RowRunner` actors.

    ``address``: a cluster to join (``ray://head:10001``, ``head:6379``);
    ``None`` joins the Ray this process already started, or the one
    ``RAY_ADDRESS`` names, or else starts one on this machine (stopped again by
    :meth:`close`). ``workers`` bounds the number of runners.

        with RayEngine(WorkerSpec.for_team(loaded), workers=16) as engine:
            outcome = asyncio.run(run_batch(loaded, rows, Path("out.jsonl"), workers=16, engine=engine))
    """

    def __init__(
        self,
        spec: WorkerSpec,
        *,
        workers: int,
        address: str | None = None,
        rpm: int | None = None,
        tpm: int | None = None,
    ) -> None:
        self.spec = spec
        self.workers = max(1, workers)
        self.address = address
        self.rpm = rpm
        self.tpm = tpm
        self._ray: ModuleType | None = None
        self._started_ray = False
        self._limiter: Any = None
        self._runners: list[Any] = []
        self._busy: list[int] = []

    def __enter__(self) -> RayEngine:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        ray = self._ray = import_ray()
        if not ray.is_initialized():
            if self.address is not None:
                check_reachable(self.address)
            try:
                ray.init(
                    address=self.address, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING
                )
            except Exception as exc:  # Ray's own errors: a message, not a traceback
                where = f" at {self.address}" if self.address else ""
                raise UsageError(f"cannot start or join Ray{where}: {exc}") from None
            self._started_ray = True
        try:
            cpus = int(ray.cluster_resources().get("CPU", 1))
            if self.rpm is not None or self.tpm is not None:
                self._limiter = ray.remote(num_cpus=0)(SharedRateLimit).remote(self.rpm, self.tpm)
            runner = ray.remote(num_cpus=1)(RowRunner)
            self._runners = [runner.remote(self.spec, self._limiter) for _ in range(max(1, min(self.workers, cpus)))]
            self._busy = [0] * len(self._runners)
            ray.get([r.ready.remote() for r in self._runners])
        except Exception as exc:
            self.close()
            raise _worker_error(exc) from None

    def close(self) -> None:
        ray = self._ray
        if ray is None:
            return
        for actor in [*self._runners, self._limiter]:
            if actor is not None:
                try:
                    ray.kill(actor)
                except Exception:  # already gone with its node or the connection: nothing left to stop
                    pass
        self._runners, self._limiter = [], None
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False

    async def run_row(self, row: InputRow, ceiling: Ceiling) -> dict[str, Any]:
        index = self._take()
        try:
            result: dict[str, Any] = await self._runners[index].run_row.remote(row, ceiling)
        except Exception as exc:  # the run's own errors are in the record: this is the worker lost
            raise _worker_error(exc) from None
        finally:
            self._busy[index] -= 1
        return result

    async def run_case(self, cases: LoadedCases, index: int, subscribers: Sequence[Subscriber] = ()) -> CaseResult:
        if subscribers:
            raise UsageError("event subscribers (--traces) need the local engine: a case on Ray runs in a worker")
        runner = self._take()
        try:
            result: CaseResult = await self._runners[runner].run_case.remote(str(cases.path.resolve()), index)
        except Exception as exc:
            raise _worker_error(exc) from None
        finally:
            self._busy[runner] -= 1
        return result

    def _take(self) -> int:
        """The least busy runner (rows are spread evenly, in the order they start)."""
        if not self._runners:
            raise UsageError("the Ray engine is not started")
        index = min(range(len(self._busy)), key=self._busy.__getitem__)
        self._busy[index] += 1
        return index


def _worker_error(exc: BaseException) -> TeamrunError:
    """An error from a worker: a teamrun error raised there as itself, anything else as a short message."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, TeamrunError):
        return cause
    if isinstance(exc, TeamrunError) and cause is None:
        return exc
    if isinstance(cause, ModuleNotFoundError) and (cause.name or "").startswith("teamrun"):
        return UsageError(
            "the Ray workers cannot import teamrun: install it on every node of the cluster "
            f"({install_hint('ray', here=False)})"
        )
    shown = [line for line in str(cause or exc).strip().splitlines() if line.strip()]
    return RunError(f"a Ray worker failed: {shown[-1].strip() if shown else type(exc).__name__}")
