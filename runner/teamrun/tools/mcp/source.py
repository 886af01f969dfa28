"""An MCP server as a :class:`~teamrun.tools.base.ToolSource`: its tools become ordinary :class:`Tool` objects.

Lifecycle. Nothing starts when the team is loaded. The first agent that needs
the tool list calls :meth:`McpToolSource.tools`, which starts the server (a
program over stdio, or a connection to a streamable HTTP endpoint), lists its
tools once and keeps the connection for the rest of the run; every agent
declaring the entry shares it. :meth:`McpToolSource.aclose` stops it: for stdio
the SDK closes the server's stdin, then terminates and kills its whole process
group, so no child outlives the run.

The SDK's client contexts use anyio cancel scopes, which must be entered and
left by one task. So each started server has an *owner task* that enters the
client, publishes it, waits for the stop signal and leaves the client. Calls are
made from the calling agent's task (the SDK multiplexes requests) and race the
owner's end, so a server that dies fails only the calls that need it, at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import IO, Any

import structlog

from teamrun.config.models import ToolDef
from teamrun.config.tool_names import mcp_function_name, mcp_prefix
from teamrun.errors import RunError, ToolError
from teamrun.tools.base import (
    DEFAULT_MAX_OUTPUT_CHARS,
    DEFAULT_TIMEOUT_S,
    Tool,
    ToolSource,
    ToolSpec,
    describe_exception,
    timed_out,
)
from teamrun.tools.mcp.content import result_text
from teamrun.tools.mcp.tape import McpTape

__all__ = ["START_TIMEOUT_S", "McpServerTool", "McpToolSource"]

log = structlog.get_logger(__name__)

START_TIMEOUT_S = 30.0
"""Seconds a server may take to start and list its tools."""
STOP_TIMEOUT_S = 10.0
"""Seconds a server may take to stop before its owner task is cancelled (the SDK then kills it)."""
_STDERR_TAIL_CHARS = 1500
_MASK = "***"
_MIN_SECRET_CHARS = 6


class McpServerTool(Tool):
    """One tool of an MCP server, under the function name the model sees."""

    def __init__(self, source: McpToolSource, remote: Any, name: str, *, fixed: dict[str, Any]) -> None:
        self.source = source
        self.remote_name: str = remote.name
        """The tool's name as the server spells it."""
        definition = source.definition
        self.fixed = fixed
        self.spec = ToolSpec(
            name=name,
            description=(remote.description or getattr(remote, "title", None) or "").strip(),
            parameters=_parameters(remote.input_schema, fixed),
        )
        approval = definition.require_approval
        self.require_approval = approval is True or (isinstance(approval, list) and remote.name in approval)
        self.timeout_s = None
        self.call_timeout_s = definition.timeout_s or DEFAULT_TIMEOUT_S
        """Seconds one call may take. The source enforces it (not ``invoke_tool``: ``timeout_s`` is
        ``None``), so that a call that timed out is a result like any other, recorded on the MCP tape."""
        self.max_output_chars = definition.max_output_chars or DEFAULT_MAX_OUTPUT_CHARS
        self.annotations: Any = getattr(remote, "annotations", None)
        """The server's hints about the tool (``read_only_hint``, ``idempotent_hint``...), if it gave any."""

    async def run(self, arguments: dict[str, Any]) -> str:
        return await self.source.call(
            self.remote_name,
            {**arguments, **self.fixed},
            function=self.name,
            timeout_s=self.call_timeout_s,
            max_chars=self.max_output_chars,
        )


def _parameters(schema: Any, fixed: dict[str, Any]) -> dict[str, Any]:
    """The server's input schema as a tool spec wants it, without the fixed arguments."""
    params = {k: v for k, v in dict(schema or {}).items() if k != "$schema"}
    params["type"] = "object"
    properties = {k: v for k, v in dict(params.get("properties") or {}).items() if k not in fixed}
    params["properties"] = properties
    if isinstance(params.get("required"), list):
        params["required"] = [r for r in params["required"] if r not in fixed]
    return params


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class McpToolSource(ToolSource):
    """The tools of one MCP server tool entry, started on first use and shared for one run."""

    def __init__(
        self,
        entry: str,
        definition: ToolDef,
        *,
        base_dir: Path,
        secrets: Iterable[str] = (),
        tape: McpTape | None = None,
    ) -> None:
        if definition.mcp is None:
            raise ValueError(f"tool {entry!r} is not an MCP server")
        self.entry = entry
        self.definition = definition
        self.server = definition.mcp
        self.base_dir = base_dir
        values = {*secrets, *(self.server.env or {}).values(), *(self.server.headers or {}).values()}
        self._secrets = sorted((v for v in values if len(v) >= _MIN_SECRET_CHARS), key=len, reverse=True)
        """Masked in every message; short values (`0`, `true`) are settings, and masking them would mangle text."""
        self.prefix = mcp_prefix(entry, definition)
        self.tape = tape
        """Where listings and results are recorded, or replayed from (then the server never starts)."""
        self.started = False
        """Whether the server was ever started (tests and the benchmark read it)."""
        self.listing: list[Any] = []
        """Every tool the server offers, as the SDK describes them (before ``allow``/``deny``)."""
        self._lock: asyncio.Lock | None = None
        self._tools: list[Tool] | None = None
        self._owner: asyncio.Task[None] | None = None
        self._client: Any = None
        self._stop = asyncio.Event()
        self._dead = asyncio.Event()
        self._broken: str | None = None
        self._exit_status: int | None = None
        self._stderr: IO[bytes] | None = None

    def fresh(self) -> McpToolSource:
        """An unstarted copy: each run starts (and stops) its own server."""
        return McpToolSource(self.entry, self.definition, base_dir=self.base_dir, secrets=self._secrets, tape=self.tape)

    @property
    def replaying(self) -> bool:
        return self.tape is not None and self.tape.replays(self.entry)

    @property
    def kind(self) -> str:
        return "stdio" if self.server.command else "http"

    def describe_target(self) -> str:
        """The server, as shown to people: its argv or its URL (secrets masked)."""
        shown = " ".join(self.server.command) if self.server.command else str(self.server.url)
        return self.mask(shown)

    def mask(self, text: str) -> str:
        """``text`` with every secret this entry knows (header and env values included) masked."""
        for secret in self._secrets:
            text = text.replace(secret, _MASK)
        return text

    # -- ToolSource ----------------------------------------------------------------------------

    async def tools(self) -> list[Tool]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._tools is None:
                if self.replaying:
                    assert self.tape is not None
                    self.listing = self.tape.listings[self.entry]
                else:
                    await self._start()
                    if self.tape is not None and self.tape.mode == "record":
                        self.tape.record_listing(self.entry, self.listing)
                self._tools = self._select(self.listing)
        return list(self._tools)

    async def aclose(self) -> None:
        await self._stop_owner()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    async def _stop_owner(self) -> None:
        owner = self._owner
        if owner is not None and not owner.done():
            self._stop.set()
            try:
                await asyncio.wait_for(asyncio.shield(owner), STOP_TIMEOUT_S)
            except asyncio.CancelledError:
                owner.cancel()
                with contextlib.suppress(BaseException):
                    await asyncio.shield(owner)
                raise
            except BaseException:
                owner.cancel()
                with contextlib.suppress(BaseException):
                    await owner
            log.debug("mcp_server_stopped", tool=self.entry)

    # -- starting and stopping ---------------------------------------------------------------

    async def _start(self) -> None:
        ready: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        if self.server.command:
            self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by aclose
        self.started = True
        log.info("mcp_server_starting", tool=self.entry, transport=self.kind)
        self._owner = asyncio.create_task(self._own(ready), name=f"teamrun:mcp:{self.entry}")
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                self.listing = await asyncio.shield(ready)
        except TimeoutError:
            why = f"it did not answer within {START_TIMEOUT_S:g} seconds"
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            lost = _connection_lost(exc) and self.server.command is not None
            why = "" if lost else self._why(exc)
        else:
            return
        await self._stop_owner()  # the server has exited (or is stopped now): its stderr is complete
        if not why:  # its exit status is known now
            why = f"{self._exit_text() or 'it exited (or closed its stdout)'} before answering"
        message = self._start_failure(why)
        await self.aclose()
        raise RunError(message)

    async def _own(self, ready: asyncio.Future[list[Any]]) -> None:
        """The owner task: enter the client, publish it, wait for the stop signal, leave the client."""
        try:
            async with self._connect() as client:
                listing = await _list_tools(client)
                self._client = client
                ready.set_result(listing)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                if isinstance(exc, Exception):
                    ready.set_exception(_leaf(exc))
                else:
                    ready.cancel()
            elif isinstance(exc, Exception):
                self._broken = self._why(exc)
                log.warning("mcp_server_failed", tool=self.entry, error=self._broken)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._client = None
            self._dead.set()

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[Any]:
        from mcp import Client
        from mcp.types import Implementation

        from teamrun._version import __version__

        info = Implementation(name="teamrun", version=__version__)
        if self.server.command:
            from teamrun.tools.mcp.stdio import stdio_transport

            assert self._stderr is not None
            transport = stdio_transport(
                self.server.command,
                entry=self.entry,
                env=dict(self.server.env or {}),
                cwd=self.base_dir / self.server.cwd if self.server.cwd is not None else None,
                errlog=self._stderr,
                on_exit=self._exited,
            )
            async with Client(transport, client_info=info) as client:
                yield client
        else:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            async with (
                create_mcp_http_client(headers=dict(self.server.headers or {})) as http,
                Client(streamable_http_client(str(self.server.url), http_client=http), client_info=info) as client,
            ):
                yield client

    def _exited(self, status: int) -> None:
        """The server process has exited (stdio): calls fail from now on, without waiting for its stdout."""
        self._exit_status = status
        log.debug("mcp_server_exited", tool=self.entry, status=status)

    def _select(self, listing: list[Any]) -> list[Tool]:
        """The server's tools after ``allow``/``deny``, named for the model (unique)."""
        offered = {tool.name: tool for tool in listing}
        definition = self.definition
        approval = definition.require_approval if isinstance(definition.require_approval, list) else []
        unknown = [name for name in [*(definition.allow or []), *approval] if name not in offered]
        if unknown:
            raise RunError(
                f"tool {self.entry!r}: the MCP server has no tool named "
                f"{', '.join(repr(n) for n in dict.fromkeys(unknown))} (check `allow` and `require_approval`); "
                f"it offers: {', '.join(offered) or 'none'}"
            )
        allowed = definition.allow if definition.allow is not None else list(offered)
        denied = set(definition.deny or [])
        tools: list[Tool] = []
        chosen = [name for name in allowed if name not in denied]
        names = function_names(self.prefix, chosen)
        for remote_name in chosen:
            remote = offered[remote_name]
            name = names[remote_name]
            properties = dict((remote.input_schema or {}).get("properties") or {})
            fixed = {k: v for k, v in (definition.fixed_arguments or {}).items() if k in properties}
            tools.append(McpServerTool(self, remote, name, fixed=fixed))
        return tools

    # -- calls -----------------------------------------------------------------------------------

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        function: str | None = None,
        timeout_s: float | None = None,
        max_chars: int | None = None,
    ) -> str:
        """Call ``tool`` on the running server (or answer from the tape when replaying).

        Past ``timeout_s`` the call fails as any tool call that times out does (``function`` is the
        name the model called). With a recording tape, the outcome is recorded as the model sees it:
        cut to ``max_chars``, with the count of what was cut; a timeout is recorded too.
        """
        tape = self.tape
        if tape is not None and self.replaying:
            return tape.answer(self.entry, tool, arguments)
        try:
            text = await self._call_within(tool, arguments, function or tool, timeout_s)
        except ToolError as exc:
            if tape is not None and tape.mode == "record":
                tape.record_call(
                    self.entry, tool, arguments, ok=False, content=self.mask(str(exc)), max_chars=max_chars
                )
            raise
        if tape is not None and tape.mode == "record":
            tape.record_call(self.entry, tool, arguments, ok=True, content=self.mask(text), max_chars=max_chars)
        return text

    async def _call_within(self, tool: str, arguments: dict[str, Any], function: str, timeout_s: float | None) -> str:
        scope = asyncio.timeout(timeout_s)
        try:
            async with scope:
                return await self._call(tool, arguments)
        except TimeoutError:
            if not scope.expired():
                raise
            log.warning("tool_timed_out", tool=function, timeout_s=timeout_s)
            assert timeout_s is not None  # the scope expired: there was a limit
            raise ToolError(timed_out(function, timeout_s)) from None

    async def _call(self, tool: str, arguments: dict[str, Any]) -> str:
        """Call ``tool`` on the running server; a dead server fails the call, with its stderr."""
        client = self._client
        if self._broken is not None or client is None:
            raise ToolError(self._stopped())
        call = asyncio.ensure_future(client.call_tool(tool, arguments))
        dead = asyncio.ensure_future(self._dead.wait())
        try:
            done, _ = await asyncio.wait({call, dead}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (call, dead):
                task.cancel()
            await asyncio.gather(call, dead, return_exceptions=True)
        if call not in done:
            raise ToolError(self._stopped())
        try:
            result = call.result()
        except Exception as exc:
            if _connection_lost(exc):
                self._broken = self._why(exc)
                raise ToolError(self._stopped()) from None
            raise ToolError(f"MCP server {self.entry!r}: {self.mask(self._why(exc))}") from None
        return self.mask(result_text(result, tool)) if self._secrets else result_text(result, tool)

    # -- messages --------------------------------------------------------------------------------

    def _why(self, exc: BaseException) -> str:
        leaf = _leaf(exc)
        if isinstance(leaf, FileNotFoundError) and self.server.command:
            return f"command not found: {self.server.command[0]!r} (not an existing path, and not on PATH)"
        return self.mask(describe_exception(leaf))

    def stderr_tail(self) -> str:
        """The last lines the server wrote to stderr (stdio servers), secrets masked."""
        if self._stderr is None or self._stderr.closed:
            return ""
        try:
            self._stderr.flush()
            size = self._stderr.seek(0, 2)
            self._stderr.seek(max(0, size - _STDERR_TAIL_CHARS))
            text = self._stderr.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        return self.mask(text.strip())

    def _with_stderr(self, message: str) -> str:
        tail = self.stderr_tail()
        return f"{message}\n[stderr of the server, last lines]\n{tail}" if tail else message

    def _start_failure(self, why: str) -> str:
        return self._with_stderr(
            f"tool {self.entry!r}: the MCP server ({self.kind}: {self.describe_target()}) could not start: {why}"
        )

    def _exit_text(self) -> str | None:
        """How the server process ended (stdio), once it has."""
        status = self._exit_status
        if status is None:
            return None
        return f"it exited with status {status}" if status >= 0 else f"it was killed by signal {-status}"

    def _stopped(self) -> str:
        exited = self._exit_text()
        why = f": {exited}" if exited else f": {self._broken}" if self._broken else ""
        return self._with_stderr(f"the MCP server of tool entry {self.entry!r} is not running any more{why}")


def function_names(prefix: str, tools: list[str]) -> dict[str, str]:
    """A distinct function name for each of one server's ``tools`` (deterministic, in listing order).

    A tool whose name needs no change (only the prefix added) keeps it; then each other tool
    takes its sanitized name if it is free, else the first free ``<name>_2``, ``<name>_3``...
    Every candidate is checked against every name taken so far, renamed ones included, so
    ``a_b_2``, ``a.b`` and ``a_b`` become ``n_a_b_2``, ``n_a_b_3`` and ``n_a_b``.
    """
    taken: set[str] = set()
    names: dict[str, str] = {}
    for tool in tools:
        name = mcp_function_name(prefix, tool)
        if name in (tool, prefix + tool) and name not in taken:
            names[tool] = name
            taken.add(name)
    for tool in tools:
        if tool in names:
            continue
        name, suffix = mcp_function_name(prefix, tool), 1
        while name in taken:
            suffix += 1
            name = mcp_function_name(prefix, f"{tool}_{suffix}")
        names[tool] = name
        taken.add(name)
    return names


def _connection_lost(exc: BaseException) -> bool:
    from mcp import MCPError

    leaf = _leaf(exc)
    if isinstance(leaf, MCPError):
        return "closed" in str(leaf).lower()
    return isinstance(leaf, ConnectionError | EOFError) or type(leaf).__name__ in (
        "ClosedResourceError",
        "BrokenResourceError",
        "EndOfStream",
    )


async def _list_tools(client: Any) -> list[Any]:
    """Every tool the server offers (following pagination)."""
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools
