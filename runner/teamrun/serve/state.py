"""What every route of one server shares: its runs, its teams, its store, its answer service.

:func:`create_app <teamrun.serve.app.create_app>` builds one :class:`ServeState` and keeps it on the app;
each router reads it through the :func:`serve_state` dependency.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import Request

from teamrun.secrets import Redactor
from teamrun.serve.answers import AnswerService
from teamrun.serve.errors import ApiError
from teamrun.serve.history import EventKeeper
from teamrun.serve.runs import NoThreads, RunHandle, RunRegistry, ServerBusy, ShuttingDown
from teamrun.serve.served import Served
from teamrun.serve.settings import ServeSettings

if TYPE_CHECKING:
    from teamrun.config.models import Limits
    from teamrun.serve.replicas import Replica
    from teamrun.store import Store

__all__ = ["ServeState", "serve_state"]


@dataclass
class ServeState:
    """One server's shared state (built once by ``create_app``)."""

    settings: ServeSettings
    registry: RunRegistry
    served: Mapping[str, Served]
    """The teams served, by name."""
    redactor: Redactor
    """The server's tokens and extra secrets: what an error answer is masked with."""
    keeper: EventKeeper | None
    """Keeps each run's events in the store (``None`` without a store)."""
    answers: AnswerService | None
    """The one way pending items are answered (``None`` without a store: nothing waits)."""
    keepalive_s: float
    """Seconds between SSE comment lines while a run has nothing to say (keeps proxies from closing the stream)."""
    replica: Replica | None = None
    """This server as one replica of several on its store (leases, takeover); ``None``: it runs alone."""

    @property
    def store(self) -> Store | None:
        return self.settings.store

    def team(self, name: str) -> Served:
        """The served team ``name``, or a 404 ``model_not_found`` naming the teams served."""
        found = self.served.get(name)
        if found is None:
            known = ", ".join(sorted(self.served))
            raise ApiError(
                404,
                f"team '{name}' is not served here; teams: {known}",
                code="model_not_found",
                extra={"teams": sorted(self.served)},
            )
        return found

    def start(
        self,
        target: Served,
        input: str,
        thread: str | None = None,
        *,
        limits: Limits | None = None,
        vars: dict[str, Any] | None = None,
        resource: str | None = None,
    ) -> RunHandle:
        """A run of ``target`` started now (for ``resource``'s long-term memory), or the error a request for one is
        answered with (no threads here, no run slot, the server stopping)."""
        registry = self.registry
        try:
            return registry.start(
                target.team, input, redactor=target.redactor, thread=thread, limits=limits, vars=vars, resource=resource
            )
        except NoThreads as exc:
            raise ApiError(400, str(exc), code="threads_unavailable") from None
        except (ServerBusy, ShuttingDown) as exc:
            wait = registry.retry_after_s
            raise ApiError.slot_refused(exc, wait, busy=f"{exc}; retry after {wait} s", closing=str(exc)) from None

    def run(self, run_id: str) -> RunHandle:
        """The run ``run_id`` this server holds, or a 404 ``run_not_found``."""
        handle = self.registry.get(run_id)
        if handle is None:
            raise ApiError.run_not_found(run_id)
        return handle

    def redactor_of(self, team: str | None) -> Redactor | None:
        """The redactor of a served team (``None``: not a team served here)."""
        entry = self.served.get(team or "")
        return entry.redactor if entry is not None else None


def serve_state(request: Request) -> ServeState:
    """The dependency every router reads the server's state through."""
    state: ServeState = request.app.state.serve
    return state
