"""Every served team is an A2A agent (docs/a2a.md, "Every served team is an A2A agent").

:func:`mount_a2a` adds each team's agent card and JSON-RPC endpoint to the
server's app. The protocol is a2a-sdk's (imported here only, when the app is
built): its JSON-RPC dispatcher, types and v0.3 compat layer over
:class:`~teamrun.serve.a2a.handler.TeamAgent`, whose tasks are the server's runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from teamrun.logs import get_logger

if TYPE_CHECKING:
    from fastapi import FastAPI

    from teamrun.secrets import Redactor
    from teamrun.serve.a2a.handler import _Resumer, _Served
    from teamrun.serve.runs import RunRegistry

__all__ = ["mount_a2a"]

_log = get_logger(__name__)


def mount_a2a(
    app: FastAPI,
    registry: RunRegistry,
    served: Mapping[str, _Served],
    resumer: _Resumer | None,
    *,
    tokens: frozenset[str],
    redactor: Redactor,
) -> bool:
    """Serve every team of ``served`` as an A2A agent under ``/a2a/<team>``; ``False`` (and a warning) when
    a2a-sdk is not installed."""
    try:
        from teamrun.serve.a2a.routes import a2a_router

        router = a2a_router(registry, served, resumer, tokens=tokens, redactor=redactor)
    except ImportError as exc:
        _log.warning("a2a_unavailable", error=str(exc), hint="pip install 'teamrun[serve]' (a2a-sdk[http-server])")
        return False
    app.include_router(router)
    return True
