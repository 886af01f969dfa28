"""Logging: :func:`get_logger` for teamrun's modules, :func:`configure_logging` for the CLI.

Only the application configures logging. The CLI calls :func:`configure_logging`:
logs go to stderr (stdout carries only the answer), human-readable on a
terminal, one JSON object per line with ``--log-format json``. A program that
uses teamrun as a library and configures nothing gets Python's own defaults:
teamrun's loggers (``teamrun.*``) then log through the standard library
:mod:`logging` — warnings and errors on stderr, nothing on stdout, no debug —
and through structlog as soon as the program configures structlog itself.

Secret values (variables named like ``*KEY*``/``*TOKEN*``... and the team
file's secret interpolations, added with :func:`add_log_secrets`) are masked
in every line.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterable, Iterator, MutableMapping
from typing import Any, Literal

import structlog

from teamrun.secrets import Redactor

LogFormat = Literal["auto", "console", "json"]


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time (it may be swapped, e.g. by test runners)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


_redactor = Redactor()

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
}


class TeamrunLogger:
    """What :func:`get_logger` returns: structlog's ``log.warning("event", key=value)`` calls, sent
    to structlog when the application configured it, else to the standard library's ``logging``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def _log(self, method: str, event: str, fields: dict[str, Any]) -> None:
        if structlog.is_configured():
            getattr(structlog.get_logger(self.name), method)(event, **fields)
            return
        logger = logging.getLogger(self.name)
        level = _LEVELS[method]
        if not logger.isEnabledFor(level):
            return
        shown = " ".join(f"{k}={v!r}" for k, v in fields.items())
        logger.log(level, "%s", _redactor.text(f"{event} {shown}".strip()), exc_info=method == "exception")

    def debug(self, event: str, **fields: Any) -> None:
        self._log("debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._log("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._log("warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._log("error", event, fields)

    def exception(self, event: str, **fields: Any) -> None:
        self._log("exception", event, fields)


def get_logger(name: str) -> TeamrunLogger:
    """The logger for a teamrun module (``get_logger(__name__)``); see the module docstring."""
    return TeamrunLogger(name)


def add_log_secrets(secrets: Iterable[str]) -> None:
    """Mask these values in every log line from now on (e.g. the team file's secret ``${VAR}`` values)."""
    _redactor.add(secrets)


def _mask_secrets(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    masked: MutableMapping[str, Any] = _redactor.value(event_dict)
    return masked


_LIBRARY_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")
"""Loggers that print through handlers of their own; their records are diverted to ours."""


class _StdlibBridge(logging.Handler):
    """Renders standard-library log records (LiteLLM, httpx...) like teamrun's own lines, on stderr.

    Independent of structlog's global configuration, so a library's warning is
    a JSON line under ``--log-format json`` and never lands on stdout.
    """

    def __init__(self) -> None:
        super().__init__()
        self.processors: list[structlog.typing.Processor] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            event: Any = {"event": record.getMessage(), "logger": record.name}
            if record.exc_info:
                event["exc_info"] = record.exc_info
            method = record.levelname.lower()
            for processor in self.processors:
                event = processor(None, method, event)
            sys.stderr.write(str(event) + "\n")
        except Exception:
            self.handleError(record)


class _Divert(logging.Filter):
    """A logger filter that hands every record to the bridge and stops the logger's own handlers."""

    def __init__(self, bridge: _StdlibBridge) -> None:
        super().__init__()
        self.bridge = bridge

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= self.bridge.level:
            self.bridge.handle(record)
        return False


_bridge = _StdlibBridge()
_divert = _Divert(_bridge)


def _bridge_stdlib_logging(level: int, processors: list[structlog.typing.Processor]) -> None:
    _bridge.setLevel(level)
    _bridge.processors = processors
    root = logging.getLogger()
    if _bridge not in root.handlers:
        root.addHandler(_bridge)
    for name in _LIBRARY_LOGGERS:
        library = logging.getLogger(name)
        if _divert not in library.filters:
            library.addFilter(_divert)


_hidden_events: set[str] = set()
"""Events left out of the log lines for now (see :func:`hidden_log_events`)."""


@contextlib.contextmanager
def hidden_log_events(*events: str) -> Iterator[None]:
    """Leave these log events out while inside: e.g. ``run_warning`` while a progress view prints
    the run's warnings itself (each warning is said once)."""
    added = set(events) - _hidden_events
    _hidden_events.update(added)
    try:
        yield
    finally:
        _hidden_events.difference_update(added)


def _drop_hidden(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    if event_dict.get("event") in _hidden_events:
        raise structlog.DropEvent
    return event_dict


_rendering: list[structlog.typing.Processor] = []
"""The processors :func:`configure_logging` set up (what :func:`log_line` renders with)."""


def log_line(level: str, event: str, **fields: Any) -> str:
    """One log line as :func:`configure_logging` renders lines (JSON or console), whatever the level filter."""
    if not _rendering:
        shown = " ".join(f"{k}={v}" for k, v in fields.items())
        return _redactor.text(f"[{level}] {event} {shown}".strip())
    rendered: Any = {"event": event, **fields}
    for processor in _rendering:
        rendered = processor(None, level, rendered)
    return str(rendered)


def configure_logging(verbosity: int, log_format: LogFormat = "auto") -> Literal["console", "json"]:
    """``verbosity``: -1 quiet (errors), 0 warnings, 1 info, 2+ debug. Returns the format chosen."""
    level = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG)
    if log_format == "auto":
        log_format = "console" if sys.stderr.isatty() else "json" if verbosity > 1 else "console"
    assert log_format in ("console", "json")
    _redactor.add(Redactor().secrets)  # the environment as it is now
    rendering: list[structlog.typing.Processor] = (
        [structlog.processors.format_exc_info, _mask_secrets, structlog.processors.JSONRenderer()]
        if log_format == "json"
        else [_mask_secrets, structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())]
    )
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        *rendering,
    ]
    structlog.configure(
        processors=[_drop_hidden, *processors],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
    _bridge_stdlib_logging(level, processors)
    _rendering[:] = processors
    _chosen[:] = [log_format]
    return log_format


_chosen: list[Literal["console", "json"]] = []
"""The format :func:`configure_logging` chose last (empty before it is called)."""


def configured_format() -> Literal["console", "json"] | None:
    """The format log lines are rendered in, once :func:`configure_logging` chose it."""
    return _chosen[0] if _chosen else None


def forget_configured_format() -> None:
    """Before a new command line is parsed (several in one process: tests)."""
    _chosen.clear()
