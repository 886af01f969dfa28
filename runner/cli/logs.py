"""Log rendering for the CLI (the only place that configures structlog).

Logs go to stderr: stdout carries only the answer. Human-readable on a
terminal, one JSON object per line with ``--log-format json``.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

LogFormat = Literal["auto", "console", "json"]


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time (it may be swapped, e.g. by test runners)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(verbosity: int, log_format: LogFormat = "auto") -> None:
    """``verbosity``: -1 quiet (errors), 0 warnings, 1 info, 2+ debug."""
    level = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG)
    if log_format == "auto":
        log_format = "console" if sys.stderr.isatty() else "json" if verbosity > 1 else "console"
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if log_format == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
