"""From ``teamrun serve``'s options to a built app: one code path for one process and for each of ``--workers``.

:class:`ServeOptions` is plain data (it crosses into worker processes, which
build their own app from it); :func:`build` loads the teams, the tokens and the
store and returns the app. The CLI builds once in its own process to report
mistakes (exit 2) before any worker starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from teamrun.errors import UsageError

if TYPE_CHECKING:
    from fastapi import FastAPI

    from teamrun.engine.team import Team
    from teamrun.store import Store

__all__ = ["Built", "Loaded", "ServeOptions", "build", "load"]


@dataclass(frozen=True)
class ServeOptions:
    """What ``teamrun serve`` was asked for (HTTP mode)."""

    team_files: tuple[str, ...]
    host: str = "127.0.0.1"
    port: int = 8000
    model: str | None = None
    """Use this LiteLLM model for every agent of every team."""
    api_base: str | None = None
    """The endpoint of every agent that sets no ``api_base`` (``None``: ``$TEAMRUN_API_BASE``, else the provider's)."""
    max_concurrent_runs: int = 20
    """Runs in progress at once, per process."""
    max_request_bytes: int = 1_048_576
    token_env: str = "TEAMRUN_API_TOKENS"
    token_file: str | None = None
    approval_timeout_s: float = 300.0
    approval_on_timeout: Literal["deny", "fail"] = "deny"
    """What an approval nobody answered in time does (without a store): deny the call, or fail the run."""
    store_location: str | None = None
    cors_origins: tuple[str, ...] = ()
    forwarded_allow_ips: str | None = None
    """Proxies whose ``X-Forwarded-Proto``/``-For`` are believed (comma-separated addresses or networks);
    ``None``: those headers are ignored, whoever sends them."""
    verbosity: int = 0
    """The CLI's: -1 quiet, 0 warnings, 1 info, 2+ debug."""
    log_format: str = "console"
    """``console`` or ``json``, as the CLI resolved it."""
    workers: int = 1
    """Server processes sharing the listening socket."""
    trace_content: bool = False
    """Keep each model call's messages in a run's events (``llm_io``), for the page's run view."""
    lease_s: float | None = None
    """One replica of several on the store: seconds a run's lease lasts unrenewed (``None``: it runs alone)."""


@dataclass
class Loaded:
    """The served teams, the bearer tokens and the store."""

    teams: list[Team]
    tokens: frozenset[str]
    store: Store | None


@dataclass
class Built:
    """A ready app and what the start-up line says about it."""

    app: FastAPI
    names: list[str]
    """The served teams' names."""
    auth: bool
    """Whether bearer tokens are required."""
    store: Store | None


def load(options: ServeOptions) -> Loaded:
    """The teams, tokens and store named by ``options`` (raises :class:`UsageError` for a mistake)."""
    from teamrun.engine.team import load_team
    from teamrun.logs import add_log_secrets
    from teamrun.serve.security import is_loopback, load_tokens

    tokens = load_tokens(env_name=options.token_env, file=options.token_file)
    if not tokens and not is_loopback(options.host):
        raise UsageError(
            f"refusing to serve on {options.host} without auth: set bearer tokens in "
            f"${options.token_env} or --token-file (or bind to 127.0.0.1)"
        )
    store = None
    if options.store_location:
        from teamrun.store import open_store

        # now: a wrong URL or an unreachable server stops the start. Each running run's journal holds a
        # connection: one at need per run slot, and some for the requests; at most 25 kept open when idle
        slots = options.max_concurrent_runs
        store = open_store(options.store_location, pool_size=min(slots, 20) + 5, max_overflow=slots + 10)
    capture = None
    if options.trace_content:
        from teamrun.observe.trace_file import ContentCapture

        capture = ContentCapture  # llm_io events: each model call's messages
    teams = [
        load_team(path, model=options.model, api_base=options.api_base, store=store, wrap_model=capture)
        for path in options.team_files
    ]
    names: dict[str, str] = {}
    for path, team in zip(options.team_files, teams, strict=True):
        if team.name in names:
            raise UsageError(
                f"two teams are named '{team.name}' ({names[team.name]} and {path}): "
                "each served team needs its own name"
            )
        names[team.name] = path
        add_log_secrets(team.loaded.secrets)
    add_log_secrets(tokens)
    return Loaded(teams, tokens, store)


def build(options: ServeOptions) -> Built:
    """The app serving what ``options`` name (raises :class:`UsageError` for a mistake)."""
    from teamrun.serve.app import ServeSettings, create_app

    loaded = load(options)
    settings = ServeSettings(
        tokens=loaded.tokens,
        max_concurrent_runs=options.max_concurrent_runs,
        max_request_bytes=options.max_request_bytes,
        cors_origins=options.cors_origins,
        approval_timeout_s=options.approval_timeout_s,
        approval_on_timeout=options.approval_on_timeout,
        store=loaded.store,
        content=options.trace_content,
        lease_s=options.lease_s,
    )
    return Built(create_app(loaded.teams, settings), [t.name for t in loaded.teams], bool(loaded.tokens), loaded.store)
