"""Log rendering: :func:`configure_logging` for the CLI, :func:`ensure_default_logging` for the API.

Logs go to stderr: stdout carries only the answer. Human-readable on a
terminal, one JSON object per line with ``--log-format json``. Secret values
(variables named like ``*KEY*``/``*TOKEN*``... and the team file's secret
interpolations, added with :func:`add_log_secrets`) are masked in every line.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, MutableMapping
from typing import Any, Literal

import structlog

from teamrun.observe.redact import Redactor

LogFormat = Literal["auto", "console", "json"]


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time (it may be swapped, e.g. by test runners)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


_redactor = Redactor()


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


def configure_logging(verbosity: int, log_format: LogFormat = "auto") -> None:
    """``verbosity``: -1 quiet (errors), 0 warnings, 1 info, 2+ debug."""
    level = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG)
    if log_format == "auto":
        log_format = "console" if sys.stderr.isatty() else "json" if verbosity > 1 else "console"
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
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
    _bridge_stdlib_logging(level, processors)


def ensure_default_logging() -> None:
    """For library use: unless the application configured structlog itself, log warnings and
    errors to stderr (structlog's own default prints every level to stdout)."""
    if structlog.is_configured():
        return
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            _mask_secrets,
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
