"""The stdio transport of MCP servers: the SDK's ``stdio_client``, with the server process itself watched.

The SDK notices that a server is gone only when its stdout reaches end of file.
A server that exits while a child it started still holds its stdout never
gets there, and every later call would wait out its whole ``timeout_s``. This
transport polls the server process: once it has exited and its stdout has
had :data:`EXIT_GRACE_S` to deliver what was written before, the connection
is closed, so waiting and later calls fail at once (the source adds the tail
of the server's stderr).

A line on stdout that is not JSON-RPC (a server printing a banner or debug
output) is skipped with one warning naming the tool entry; the SDK logs a
multi-line traceback for each such line.

Shutdown follows the MCP lifecycle, as the SDK does: close stdin, give the
server :data:`STOP_GRACE_S` to exit, then SIGTERM (SIGKILL after
:data:`KILL_GRACE_S`) its whole process group — also when the server has
exited but children of it are still in the group, so none outlives the run.
On Windows the SDK's own transport is used.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import anyio
import structlog

__all__ = ["EXIT_GRACE_S", "KILL_GRACE_S", "STOP_GRACE_S", "stdio_transport"]

log = structlog.get_logger(__name__)

EXIT_GRACE_S = 0.5
"""Once the server has exited, how long its stdout may still deliver what it wrote before the connection closes."""
STOP_GRACE_S = 2.0
"""Seconds a server may take to exit once its stdin is closed, before its process group is terminated."""
KILL_GRACE_S = 2.0
"""Seconds between SIGTERM and SIGKILL to the server's process group."""
_POLL_S = 0.05
_SHOWN_LINE_CHARS = 120


class _StdoutLines:
    """Turns the server's stdout lines into messages; warns once about lines that are not JSON-RPC."""

    def __init__(self, entry: str) -> None:
        self.entry = entry
        self.skipped = 0

    def parse(self, line: str) -> Any:
        """The ``SessionMessage`` of one line, or ``None`` for a blank line or one that is not JSON-RPC."""
        import mcp_types
        from mcp.shared.message import SessionMessage

        if not line.strip():
            return None
        try:
            message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            self.skipped += 1
            if self.skipped == 1:
                shown = line.strip()
                shown = shown if len(shown) <= _SHOWN_LINE_CHARS else shown[:_SHOWN_LINE_CHARS] + "..."
                log.warning(
                    "mcp_server_stdout_not_json",
                    tool=self.entry,
                    line=shown,
                    note="lines that are not JSON-RPC are skipped (this warning is given once per server)",
                )
            return None
        return SessionMessage(message)


@contextlib.asynccontextmanager
async def stdio_transport(
    command: Sequence[str],
    *,
    entry: str,
    env: Mapping[str, str],
    cwd: Path | None,
    errlog: IO[bytes],
    on_exit: Callable[[int], None] | None = None,
) -> AsyncIterator[Any]:
    """Start ``command`` and yield the (read, write) streams an ``mcp.Client`` takes as its transport.

    ``on_exit`` is told the server's exit status as soon as the process is seen to exit.
    Raises ``OSError`` (``FileNotFoundError`` for a missing program) when it cannot start.
    """
    from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

    if sys.platform == "win32":  # pragma: no cover - no process-group watch there: the SDK's transport
        params = StdioServerParameters(command=command[0], args=list(command[1:]), env=dict(env), cwd=cwd)
        async with stdio_client(params, errlog=errlog) as streams:  # type: ignore[arg-type]
            yield streams
        return

    process = await anyio.open_process(
        list(command), env={**get_default_environment(), **env}, stderr=errlog, cwd=cwd, start_new_session=True
    )
    async with _streams(process, _StdoutLines(entry), on_exit) as streams:
        yield streams


@contextlib.asynccontextmanager
async def _streams(
    process: anyio.abc.Process, lines: _StdoutLines, on_exit: Callable[[int], None] | None
) -> AsyncIterator[Any]:
    from anyio.streams.text import TextReceiveStream
    from mcp.shared.message import SessionMessage

    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    reading = anyio.CancelScope()
    reader_done = anyio.Event()
    writer_done = anyio.Event()

    async def read_stdout() -> None:
        assert process.stdout is not None
        try:
            with reading:
                async with read_writer:
                    partial: list[str] = []  # the start of a line not ended yet (a long line comes in many chunks)
                    async for chunk in TextReceiveStream(process.stdout, errors="replace"):
                        first, *more = chunk.split("\n")
                        partial.append(first)
                        if not more:
                            continue
                        *complete, rest = ["".join(partial), *more]
                        partial = [rest]
                        for line in complete:
                            message = lines.parse(line)
                            if message is not None:
                                await read_writer.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass  # the session is gone, or our shutdown closed stdout under the read
        finally:
            reader_done.set()

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the server no longer reads: the session must see the end
        finally:
            writer_done.set()

    reported: list[int] = []

    def report_exit(status: int) -> None:
        if on_exit is not None and not reported:
            reported.append(status)
            on_exit(status)

    async def watch_process() -> None:
        while process.returncode is None:
            await anyio.sleep(_POLL_S)
        report_exit(process.returncode)
        with anyio.move_on_after(EXIT_GRACE_S):
            await reader_done.wait()
        if not reader_done.is_set():  # a child of the server still holds its stdout
            reading.cancel()
            await read_writer.aclose()

    async with anyio.create_task_group() as group:
        group.start_soon(read_stdout)
        group.start_soon(write_stdin)
        group.start_soon(watch_process)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                with anyio.move_on_after(0.5):
                    await writer_done.wait()
                await _stop(process)
                if process.returncode is not None:
                    report_exit(process.returncode)  # when it exited before the watch saw it
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()
            group.cancel_scope.cancel()


async def _stop(process: anyio.abc.Process) -> None:
    """Close stdin, wait for the server to exit, then terminate whatever is left of its process group."""
    from mcp.os.posix.utilities import terminate_posix_process_tree

    assert process.stdin is not None and process.stdout is not None
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    with anyio.move_on_after(STOP_GRACE_S):
        while process.returncode is None:
            await anyio.sleep(0.01)
    await terminate_posix_process_tree(process, KILL_GRACE_S)  # a no-op when the group is gone already
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()
    with anyio.move_on_after(KILL_GRACE_S), contextlib.suppress(Exception):
        await process.aclose()
