"""How the server guards itself and where it keeps what outlives a run (``teamrun serve``'s options)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from teamrun.serve.approvals import DEFAULT_APPROVAL_TIMEOUT_S

if TYPE_CHECKING:
    from teamrun.store import Store

__all__ = ["ServeSettings"]


@dataclass
class ServeSettings:
    """How the server guards itself."""

    tokens: frozenset[str] = frozenset()
    """Bearer tokens accepted; empty means no auth (allowed only on a loopback address)."""
    max_concurrent_runs: int = 20
    """Runs in progress at once; one more is answered 429 with ``Retry-After``."""
    max_request_bytes: int = 1_048_576
    """Largest request body; a larger one is answered 413."""
    cors_origins: Sequence[str] = ()
    """Origins allowed by CORS; none (CORS off) by default."""
    retry_after_s: int = 1
    """The ``Retry-After`` a 429 carries."""
    approval_timeout_s: float = DEFAULT_APPROVAL_TIMEOUT_S
    """Seconds a tool call that needs approval waits for ``POST .../approvals/{id}`` before it is denied."""
    approval_on_timeout: Literal["deny", "fail"] = "deny"
    """What an approval nobody answered in time does (without a store): deny the call, or fail the run."""
    extra_secrets: frozenset[str] = field(default_factory=frozenset)
    """More values to mask in every response and event (the tokens are always masked)."""
    store: Store | None = None
    """Where threads are kept (a PostgreSQL store can be shared by several servers); ``None``: no threads,
    each request is one run."""
    lease_s: float | None = None
    """With a store shared by several replicas: seconds a run's lease lasts unrenewed (serve/replicas.py);
    ``None``: this server runs alone (no leases)."""
    content: bool = False
    """Keep ``llm_io`` events (each model call's messages, masked) in a run's events, for the page's run view;
    the teams' models must publish them (``load_team(..., wrap_model=ContentCapture)``)."""
