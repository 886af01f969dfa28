"""Every served team is an A2A agent (docs/a2a.md, "Every served team is an A2A agent").

:func:`include_a2a` adds each team's agent card and JSON-RPC endpoint to the server's app (the router of
:mod:`teamrun.serve.a2a.routes`). The protocol is a2a-sdk's (imported only when the app is built): its JSON-RPC
dispatcher, types and v0.3 compat layer over :class:`~teamrun.serve.a2a.handler.TeamAgent`, whose tasks are the
server's runs.
"""

from __future__ import annotations

from fastapi import FastAPI

from teamrun.logs import get_logger
from teamrun.serve.state import ServeState

__all__ = ["include_a2a"]

_log = get_logger(__name__)


def include_a2a(app: FastAPI, state: ServeState) -> bool:
    """Serve every team of ``state`` as an A2A agent under ``/a2a/<team>``; ``False`` (and a warning) when
    a2a-sdk is not installed."""
    try:
        from teamrun.serve.a2a.routes import a2a_agents, router

        agents = a2a_agents(state)
    except ImportError as exc:
        _log.warning("a2a_unavailable", error=str(exc), hint="pip install 'teamrun[serve]' (a2a-sdk[http-server])")
        return False
    app.state.a2a = agents
    app.include_router(router)
    return True
