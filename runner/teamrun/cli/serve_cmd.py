"""``teamrun serve``: put teams behind HTTP (FastAPI + uvicorn, imported only when it runs)."""

from __future__ import annotations

import click

from teamrun.cli.app import LogSettings
from teamrun.cli.options import api_base_option, rate_limit_options, share_rate_limits
from teamrun.errors import UsageError
from teamrun.extras import install_hint

HELP = """Serve teams over HTTP: an OpenAI-compatible endpoint and a native runs API.

Each team is addressed by its `name`: as the `model` of
POST /v1/chat/completions (streaming or not; the last user message is the
input), or as `team` of POST /v1/runs, whose events stream as Server-Sent
Events from GET /v1/runs/{id}/events. Every team is also an A2A agent: its
card at /a2a/<team>/.well-known/agent-card.json, JSON-RPC at POST /a2a/<team>
(docs/a2a.md). The page at / is a workbench: start runs, follow them in the
run view, open past ones, answer what waiting runs ask, carry on a thread.
The page, the cards, GET /healthz and /readyz need no token; /metrics is for
Prometheus.

Auth: bearer tokens from $TEAMRUN_API_TOKENS (or --token-env NAME) and/or
--token-file (one per line). With tokens, every /v1 request needs one; with
none the server only binds to a loopback address. SIGTERM or Ctrl-C cancels
the runs in progress (they end `cancelled`, their clients get that answer)
and exits 0. A tool with `require_approval` asks through the run's events
(`approval_request`); POST /v1/runs/{id}/approvals/{approval} with
{"approve": true} answers; no answer within --approval-timeout denies it
(or fails the run: --approval-timeout-outcome fail). With --store, questions
and approvals wait in the store instead: the run ends `waiting`, GET
/v1/pending lists what it waits for, POST /v1/runs/{id}/pending/{item}
answers and continues it (also after a restart).
With --mcp stdio|http each team is one MCP tool (for Claude Desktop, Cursor,
or another team's `mcp` tool entry).
Needs the serve extra: pip install '.[serve]' in the teamrun checkout.

\b
Examples:
  teamrun serve teams/research-report.yaml                 # http://127.0.0.1:8000
  teamrun serve a.yaml b.yaml --port 9000 --model offline
  teamrun serve team.yaml --mcp stdio                      # an MCP server on stdin/stdout
  TEAMRUN_API_TOKENS=... teamrun serve team.yaml --host 0.0.0.0
  curl -s localhost:8000/v1/chat/completions -H 'content-type: application/json' \\
       -d '{"model": "research-report", "messages": [{"role": "user", "content": "Compare Rust and Go"}]}'
"""


def _lease_seconds(value: float) -> float:
    """``--lease``: 0 (alone), or a finite time a heartbeat fits in several times (NaN, inf and 0.1 were taken: a
    NaN lease never expired, so a dead replica's runs never moved)."""
    if value == 0:
        return 0.0
    if not LEASE_RANGE_S[0] <= value <= LEASE_RANGE_S[1]:  # false for NaN too
        raise click.BadParameter(
            f"{value} is not a lease: give 0 (this server alone) or {LEASE_RANGE_S[0]:g} to {LEASE_RANGE_S[1]:g} "
            "seconds (a replica renews its leases every second)"
        )
    return value


LEASE_RANGE_S = (2.0, 86400.0)
"""The lease times ``--lease`` takes besides 0."""


@click.command(help=HELP, short_help="Serve teams over HTTP (OpenAI-compatible, runs API, A2A).")
@click.argument("team_files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port to bind.")
@click.option("--model", help="Use this LiteLLM model for every agent of every team (e.g. offline).")
@api_base_option
@rate_limit_options
@click.option(
    "--max-concurrent-runs",
    default=20,
    show_default=True,
    type=click.IntRange(1),
    help="Runs in progress at once; one more is answered 429 with Retry-After.",
)
@click.option(
    "--max-request-bytes",
    default=1_048_576,
    show_default=True,
    type=click.IntRange(1),
    help="Largest request body accepted (413 beyond).",
)
@click.option(
    "--token-env",
    default="TEAMRUN_API_TOKENS",
    show_default=True,
    metavar="NAME",
    help="Environment variable holding bearer tokens (comma- or line-separated).",
)
@click.option("--token-file", type=click.Path(dir_okay=False), help="File of bearer tokens, one per line.")
@click.option(
    "--approval-timeout",
    default=300.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="How long a tool call that needs approval waits for "
    "POST /v1/runs/{id}/approvals/{approval} before it is denied.",
)
@click.option(
    "--approval-timeout-outcome",
    "approval_on_timeout",
    type=click.Choice(["deny", "fail"]),
    default="deny",
    show_default=True,
    help="What an approval nobody answered within --approval-timeout does: deny the tool call (the agent "
    "goes on without it) or fail the run. With --store runs wait in the store instead (GET /v1/pending).",
)
@click.option(
    "--mcp",
    "mcp_transport",
    type=click.Choice(["stdio", "http"]),
    help="Serve each team as one MCP tool instead: over stdio, or streamable HTTP at "
    "http://HOST:PORT/mcp (bearer tokens as for the HTTP API).",
)
@click.option(
    "--store",
    "store_location",
    metavar="PATH|URL",
    envvar="TEAMRUN_STORE",
    show_envvar=True,
    help="Keep threads in this store (a SQLite file, or postgresql+psycopg://... shared by several "
    "servers): a chat completion continues the thread named by its X-Teamrun-Thread header "
    "(else its `user` field), POST /v1/runs by `thread`. Without it each request is one run.",
)
@click.option(
    "--cors-origin",
    "cors_origins",
    multiple=True,
    metavar="ORIGIN",
    help="Allow browser requests from ORIGIN (repeatable). CORS is off without it.",
)
@click.option(
    "--forwarded-allow-ips",
    metavar="IPS",
    help="Believe X-Forwarded-Proto and X-Forwarded-For from these proxies only (comma-separated addresses or "
    "networks, e.g. 127.0.0.1 for a TLS proxy on this host): the A2A card then names https://. Without it "
    "the headers are ignored, whoever sends them.",
)
@click.option(
    "--trace-content",
    is_flag=True,
    help="Keep each model call's messages in the run's events (llm_io), for the page's run view; "
    "secrets are masked either way.",
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    metavar="N",
    help="Serve from N processes sharing the port (one per core). A request about a run is passed to "
    "the process running it; --max-concurrent-runs counts per process. See docs/serve.md.",
)
@click.option(
    "--lease",
    "lease_s",
    default=0.0,
    type=click.FloatRange(0),
    callback=lambda _ctx, _param, value: _lease_seconds(value),
    metavar="SECONDS",
    help="Serve as one replica of several on the --store (behind a load balancer): each run this server executes "
    "holds a lease renewed every second; a replica silent for SECONDS (2 to 86400) has its running runs resumed by "
    "another, and any replica answers for any run. 0: this server runs alone. See docs/serve.md, Several machines.",
)
def serve(
    team_files: tuple[str, ...],
    host: str,
    port: int,
    model: str | None,
    max_concurrent_runs: int,
    max_request_bytes: int,
    token_env: str,
    token_file: str | None,
    approval_timeout: float,
    mcp_transport: str | None,
    store_location: str | None,
    cors_origins: tuple[str, ...],
    trace_content: bool = False,
    workers: int = 1,
    approval_on_timeout: str = "deny",
    api_base: str | None = None,
    forwarded_allow_ips: str | None = None,
    lease_s: float = 0.0,
) -> int:
    try:
        import fastapi  # noqa: F401
        import prometheus_client  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise UsageError(
            f"teamrun serve needs FastAPI, uvicorn and prometheus-client: {install_hint('serve')}"
        ) from None
    from teamrun.serve.launch import ServeOptions, build, load

    if mcp_transport is not None and workers > 1:
        raise UsageError("--workers serves HTTP: an MCP server (--mcp) runs in one process")
    if lease_s and not store_location:
        raise UsageError("--lease coordinates replicas through their shared store: give --store too")
    logs = click.get_current_context().find_object(LogSettings)
    options = ServeOptions(
        team_files=team_files,
        host=host,
        port=port,
        model=model,
        api_base=api_base,
        max_concurrent_runs=max_concurrent_runs,
        max_request_bytes=max_request_bytes,
        token_env=token_env,
        token_file=token_file,
        approval_timeout_s=approval_timeout,
        approval_on_timeout="fail" if approval_on_timeout == "fail" else "deny",
        store_location=store_location,
        cors_origins=cors_origins,
        forwarded_allow_ips=forwarded_allow_ips,
        verbosity=logs.verbosity if logs is not None else 0,
        log_format=logs.log_format if logs is not None else "console",
        workers=workers,
        trace_content=trace_content,
        lease_s=lease_s or None,
    )
    if mcp_transport is not None:
        from teamrun.serve.mcp_mode import serve_mcp

        loaded = load(options)
        names = [team.name for team in loaded.teams]
        where = "stdio" if mcp_transport == "stdio" else f"http://{host}:{port}/mcp"
        click.echo(f"teamrun: serving {', '.join(names)} as MCP tools on {where}", err=True)
        serve_mcp(
            loaded.teams, "stdio" if mcp_transport == "stdio" else "http", host=host, port=port, tokens=loaded.tokens
        )
        return 0
    built = build(options)  # in this process too: a mistake stops the start here, once, with exit 2
    auth = "bearer tokens" if built.auth else "off (loopback only)"
    threads = f"threads in a {built.store.dialect} store" if built.store is not None else "no threads"
    if workers == 1:
        from teamrun.serve.server import serve_app
        from teamrun.serve.workers import listen

        listener = listen(host, port)  # before saying it serves: a port in use is exit 2, said plainly
        bound = listener.getsockname()[1]
        click.echo(
            f"teamrun: serving {', '.join(built.names)} on http://{host}:{bound} (auth: {auth}; {threads})", err=True
        )
        serve_app(
            built.app,
            host=host,
            port=bound,
            verbosity=options.verbosity,
            sockets=[listener],
            forwarded_allow_ips=forwarded_allow_ips,
        )
        return 0
    from teamrun.serve.workers import serve_workers

    share_rate_limits(workers)  # --rpm/--tpm: each worker process its share
    if built.store is not None:
        built.store.close()  # each worker opens its own

    def announce(bound: int) -> None:
        click.echo(
            f"teamrun: serving {', '.join(built.names)} on http://{host}:{bound} (auth: {auth}; {threads}; "
            f"{workers} worker processes, up to {max_concurrent_runs} runs each)",
            err=True,
        )

    serve_workers(options, on_listening=announce)
    return 0
