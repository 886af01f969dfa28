"""Tools that run a program (``command: [argv...]`` in the team file).

Each argv item is a sandboxed Jinja template rendered over the validated
arguments, and the resulting list is executed directly — never through a
shell — so a value like ``"; rm -rf x"`` arrives as one literal argument.

Decisions:

* An item that renders to the empty string is **kept** as an empty argument.
  Dropping it silently would make ``["grep", "{{ flags }}", ...]`` change
  meaning depending on a value; write separate tools (or a small script) for
  optional flags.
* Without ``cwd`` the command runs in teamrun's working directory (where the
  user ran it), so ``path: "."`` means the user's project; a relative ``cwd``
  is taken relative to the team file's directory.
* The program gets no stdin and no descriptor of ours (whatever the event loop), and runs in its own
  process group; a timeout or a
  cancellation kills the whole group.
* Exit code 0, or another code the tool declares normal (``ok_exit_codes``,
  e.g. ``[0, 1]`` for grep's "no line matched"): the result is stdout
  (``(no output)`` when empty; ``(no output; exit code N)`` for another code,
  so the model still reads which). Any other exit code fails the call with the
  code, stderr and stdout.
* Output is read as it arrives and only the first ``max_output_chars``
  characters of each stream are kept; the rest is decoded only to be counted,
  so the model sees the same cut and marker as for a short output while
  memory stays bounded (a command printing 500 MB costs a few MB, not GBs).
  The command is **drained, not killed**, past the cap: it runs to its end,
  so its exit code still decides success and a verbose build or migration is
  not stopped halfway by its own chattiness; a command that never stops
  printing is ended by ``timeout_s`` like any other.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
import jsonschema
import jsonschema.validators

from teamrun.config import templates
from teamrun.config.models import ToolDef
from teamrun.errors import ToolError, UserError
from teamrun.logs import get_logger
from teamrun.tools.base import (
    DEFAULT_MAX_OUTPUT_CHARS,
    DEFAULT_TIMEOUT_S,
    PartialOutput,
    Tool,
    ToolSpec,
    object_schema,
)

__all__ = ["CommandTool"]

log = get_logger(__name__)

_TEMPLATES = templates.environment()
"""The team file's one immutable, bounded sandbox (argv templates can read values, never change them)."""


class CommandTool(Tool):
    """A tool that runs a program with templated arguments."""

    def __init__(
        self,
        name: str,
        command: list[str],
        *,
        parameters: dict[str, dict[str, Any]] | None = None,
        description: str | None = None,
        cwd: Path | None = None,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
        require_approval: bool = False,
        ok_exit_codes: Sequence[int] = (0,),
    ) -> None:
        """Compile the argv templates; :class:`UserError` for bad templates or parameters."""
        if not command:
            raise UserError(f"tool {name!r}: `command` needs at least the program to run")
        parameters = parameters or {}
        _check_parameter_schemas(name, parameters)
        self.command = list(command)
        self._templates = [_compile(name, index, item, parameters) for index, item in enumerate(command)]
        self.cwd = cwd
        self.cwd_given: str | None = None
        """The team file's relative ``cwd:`` as written (what a missing folder's error names), if any."""
        self.spec = ToolSpec(
            name=name,
            description=description or f"Runs `{' '.join(command)}`.",
            parameters=object_schema(
                dict(parameters),
                [key for key, schema in parameters.items() if "default" not in schema],
            ),
        )
        self.timeout_s = timeout_s
        self.max_output_chars = max_output_chars
        self.require_approval = require_approval
        self.ok_exit_codes = frozenset(ok_exit_codes)

    @classmethod
    def from_definition(cls, name: str, definition: ToolDef, *, base_dir: Path) -> CommandTool:
        """Build the tool a team file declares; ``cwd`` is relative to ``base_dir``."""
        if not definition.command:
            raise UserError(f"tool {name!r}: a command tool needs `command: [program, args...]`")
        cwd = base_dir / definition.cwd if definition.cwd is not None else None
        tool = cls(
            name,
            list(definition.command),
            parameters=definition.parameters,
            description=definition.description,
            cwd=cwd,
            timeout_s=definition.timeout_s or DEFAULT_TIMEOUT_S,
            max_output_chars=definition.max_output_chars or DEFAULT_MAX_OUTPUT_CHARS,
            require_approval=bool(definition.require_approval),
            ok_exit_codes=definition.ok_exit_codes or (0,),
        )
        if definition.cwd is not None and not Path(definition.cwd).is_absolute():
            tool.cwd_given = str(definition.cwd)
        return tool

    def render_argv(self, arguments: dict[str, Any]) -> list[str]:
        """The argv for these arguments (each item rendered on its own; empty items kept)."""
        try:
            return [templates.render_template(template, arguments) for template in self._templates]
        except jinja2.TemplateError as exc:
            raise ToolError(f"tool {self.name!r}: rendering the command failed: {exc}") from None

    async def run(self, arguments: dict[str, Any]) -> str:
        """Run the command; stdout on success, a :class:`ToolError` otherwise."""
        argv = self.render_argv(arguments)
        self._check_cwd()
        process = await self._start(argv)
        stdout, stderr = await _communicate(process, self.max_output_chars)
        code = process.returncode
        log.debug(
            "command_finished",
            tool=self.name,
            exit_code=code,
            stdout_omitted=stdout.omitted,
            stderr_omitted=stderr.omitted,
        )
        if code is not None and code in self.ok_exit_codes:
            if stdout.text or stdout.omitted:
                return stdout.result()
            return "(no output)" if code == 0 else f"(no output; exit code {code})"
        raise ToolError(_failure_text(argv[0], code, stdout, stderr))

    def _check_cwd(self) -> None:
        if self.cwd is not None and not self.cwd.is_dir():
            given = f" (`cwd: {self.cwd_given}` is relative to the team file's folder)" if self.cwd_given else ""
            raise ToolError(f"tool {self.name!r}: working directory {str(self.cwd)!r} does not exist{given}")

    async def _start(self, argv: list[str]) -> _Child:
        """Start the program in its own process group, with no stdin, captured output and no descriptor of ours
        but its three standard ones (see :class:`_Child`)."""
        try:
            return await _Child.start(argv, cwd=self.cwd)
        except FileNotFoundError:
            raise ToolError(
                f"tool {self.name!r}: command not found: {argv[0]!r} (not an existing path, and not on PATH)"
            ) from None
        except PermissionError:
            raise ToolError(f"tool {self.name!r}: cannot execute {argv[0]!r}: permission denied") from None
        except OSError as exc:
            raise ToolError(f"tool {self.name!r}: cannot start {argv[0]!r}: {exc.strerror or exc}") from None


class _Child:
    """A started program: its pid, its two output streams (read on the event loop) and its exit.

    Started with :class:`subprocess.Popen` and ``close_fds=True`` whatever the running event loop is, not with
    ``loop.subprocess_exec``: uvloop's (``teamrun serve`` runs on uvloop) ignores ``close_fds``, so a command
    inherited every inheritable descriptor of the process, the server's listening socket among them, and
    uvloop's own duplicates of other commands' pipes; a command left running by a SIGKILLed server kept its
    port. Its exit is awaited by a thread of its own (as asyncio's default child watcher does), not a pool's,
    so many long commands never queue behind each other.
    """

    def __init__(self, popen: subprocess.Popen[bytes], stdout: asyncio.StreamReader, stderr: asyncio.StreamReader):
        self._popen = popen
        self.pid = popen.pid
        self.stdout = stdout
        self.stderr = stderr
        loop = asyncio.get_running_loop()
        self._exit: asyncio.Future[int] = loop.create_future()
        threading.Thread(target=self._watch, args=(loop,), name=f"teamrun-command-{self.pid}", daemon=True).start()

    @classmethod
    async def start(cls, argv: list[str], *, cwd: Path | None) -> _Child:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
        assert popen.stdout is not None and popen.stderr is not None
        loop = asyncio.get_running_loop()
        streams = []
        for pipe in (popen.stdout, popen.stderr):
            reader = asyncio.StreamReader(limit=_READ_BYTES, loop=loop)
            await loop.connect_read_pipe(lambda reader=reader: asyncio.StreamReaderProtocol(reader), pipe)  # type: ignore[misc]
            streams.append(reader)
        return cls(popen, streams[0], streams[1])

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        code = self._popen.wait()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(self._settle, code)

    def _settle(self, code: int) -> None:
        if not self._exit.done():
            self._exit.set_result(code)

    @property
    def returncode(self) -> int | None:
        """The exit code (negative: the signal that ended it), ``None`` while it runs."""
        return self._exit.result() if self._exit.done() else None

    async def wait(self) -> int:
        return await asyncio.shield(self._exit)

    def kill(self) -> None:
        self._popen.kill()


_READ_BYTES = 1 << 16
"""How much of a pipe one read takes; memory per stream is this plus the kept characters."""


class _CappedStream:
    """One output stream, decoded as it arrives: the first ``limit`` characters kept, the rest counted."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._parts: list[str] = []
        self._kept = 0
        self.omitted = 0
        """Characters read past ``limit`` and dropped."""
        self.dropped_text = False
        """Whether the dropped characters held anything but whitespace."""
        self.trailing_space = 0
        """How many of the dropped characters are whitespace at the very end of the stream."""

    def feed(self, data: bytes, *, final: bool = False) -> None:
        chunk = self._decoder.decode(data, final)
        room = len(chunk) if self.limit is None else max(0, self.limit - self._kept)
        if room:
            kept = chunk[:room]
            self._parts.append(kept)
            self._kept += len(kept)
        if len(chunk) > room:
            dropped = chunk[room:]
            self.omitted += len(dropped)
            text = dropped.rstrip()
            if text:
                self.dropped_text = True
                self.trailing_space = len(dropped) - len(text)
            else:
                self.trailing_space += len(dropped)

    @property
    def text(self) -> str:
        """The kept characters."""
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def result(self) -> str:
        """The kept text, carrying how much was dropped (``truncate_output`` adds the usual marker)."""
        return PartialOutput(self.text, self.omitted) if self.omitted else self.text


async def _drain(pipe: asyncio.StreamReader | None, sink: _CappedStream) -> None:
    if pipe is None:
        return
    while data := await pipe.read(_READ_BYTES):
        sink.feed(data)
    sink.feed(b"", final=True)


async def _communicate(process: _Child, limit: int | None) -> tuple[_CappedStream, _CappedStream]:
    """Read both streams to their end (keeping at most ``limit`` characters of each) and wait for the
    process; if we are cancelled, kill its group first."""
    stdout, stderr = _CappedStream(limit), _CappedStream(limit)
    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(_drain(process.stdout, stdout))
            group.create_task(_drain(process.stderr, stderr))
        await process.wait()
    except BaseException:
        _kill_group(process)
        with contextlib.suppress(Exception):
            await asyncio.shield(process.wait())
        raise
    return stdout, stderr


def _kill_group(process: _Child) -> None:
    """SIGKILL the process and everything it started (its process group)."""
    if process.returncode is not None:
        return
    try:
        if hasattr(os, "killpg"):
            os.killpg(process.pid, signal.SIGKILL)
        else:  # pragma: no cover - no process groups on this platform
            process.kill()
    except ProcessLookupError:
        pass
    log.info("command_killed", pid=process.pid)


def _failure_text(program: str, code: int | None, stdout: _CappedStream, stderr: _CappedStream) -> str:
    """What the model sees for a non-zero exit: how it ended, then stderr, then stdout.

    When a stream was cut, the text is a :class:`PartialOutput` counting what was dropped (less the
    whitespace a whole stream would have lost to ``rstrip``), so the model sees the same start and
    the same marker as if both streams had been kept whole.
    """
    if code is not None and code < 0:
        try:
            ended = f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            ended = f"was killed by signal {-code}"
    else:
        ended = f"exited with code {code}"
    parts = [f"command {program!r} {ended}"]
    omitted = 0
    for label, stream in (("stderr", stderr), ("stdout", stdout)):
        if stream.dropped_text:  # the kept start, then what was dropped up to the trailing whitespace
            parts.append(f"[{label}]\n{stream.text}")
            omitted += stream.omitted - stream.trailing_space
        elif stream.text.strip():
            parts.append(f"[{label}]\n{stream.text.rstrip()}")
    text = "\n".join(parts)
    return PartialOutput(text, omitted) if omitted else text


def _check_parameter_schemas(tool: str, parameters: dict[str, dict[str, Any]]) -> None:
    """Each parameter must be a valid JSON Schema fragment."""
    for key, fragment in parameters.items():
        cls = jsonschema.validators.validator_for(fragment, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(fragment)
        except jsonschema.SchemaError as exc:
            raise UserError(f"tool {tool!r}: parameter {key!r} is not a valid JSON Schema: {exc.message}") from None


def _compile(tool: str, index: int, source: str, parameters: dict[str, Any]) -> jinja2.Template:
    """Compile one argv template, checking it only uses declared parameters."""
    try:
        parsed = _TEMPLATES.parse(source)
    except jinja2.TemplateSyntaxError as exc:
        raise UserError(f"tool {tool!r}: command[{index}] is not a valid template: {exc}") from None
    used = jinja2.meta.find_undeclared_variables(parsed) - set(_TEMPLATES.globals)
    unknown = sorted(used - set(parameters))
    if unknown:
        declared = ", ".join(sorted(parameters)) or "(none)"
        raise UserError(
            f"tool {tool!r}: command[{index}] uses undeclared parameter "
            f"{', '.join(repr(n) for n in unknown)}; declared parameters are: {declared}"
        )
    return _TEMPLATES.from_string(source)
