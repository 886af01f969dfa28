"""Every served team is an A2A agent (docs/a2a.md, "Every served team is an A2A agent").

:func:`a2a_routes` gives each team's agent card and JSON-RPC endpoint, for the server's app to include. The
protocol is a2a-sdk's (imported only when the app is built): its JSON-RPC dispatcher, types and v0.3 compat layer
over :class:`~teamrun.serve.a2a.handler.TeamAgent`, whose tasks are the server's runs.
"""

from __future__ import annotations

from fastapi import APIRouter

from teamrun.logs import get_logger
from teamrun.serve.state import ServeState

__all__ = ["a2a_routes"]

_log = get_logger(__name__)


def a2a_routes(state: ServeState) -> APIRouter | None:
    """The routes serving every team of ``state`` as an A2A agent under ``/a2a/<team>``; ``None`` (and a warning)
    when a2a-sdk is not installed."""
    try:
        from teamrun.serve.a2a.routes import a2a_router

        return a2a_router(state)
    except ImportError as exc:
        _log.warning("a2a_unavailable", error=str(exc), hint="pip install 'teamrun[serve]' (a2a-sdk[http-server])")
        return None
