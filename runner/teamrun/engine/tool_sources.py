"""The tool sources a run has started (MCP servers...): started once, on first need, closed at run end.

A :class:`~teamrun.tools.base.ToolSource` is started only when an agent that
declares it builds its tool table; agents of one run share the started source;
:meth:`StartedSources.aclose` stops every one the run started, whether the run
succeeded, failed or was cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from teamrun.logs import get_logger
from teamrun.tools.base import Tool, ToolSource

_log = get_logger(__name__)


class StartedSources:
    """One run's started tool sources and the functions each offered."""

    def __init__(self) -> None:
        self._tools: dict[int, list[Tool]] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._touched: list[ToolSource] = []
        """Every source asked to start (even if starting failed): each is closed at run end."""

    async def tools(self, source: ToolSource) -> list[Tool]:
        """The source's functions, starting it the first time any agent of the run needs it."""
        key = id(source)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key not in self._tools:
                if all(s is not source for s in self._touched):
                    self._touched.append(source)
                self._tools[key] = list(await source.tools())
            return self._tools[key]

    @property
    def started(self) -> list[ToolSource]:
        return list(self._touched)

    async def aclose(self) -> None:
        """Close every source this run started; a failure to close is logged, never raised."""
        touched, self._touched = self._touched, []
        self._tools.clear()
        for source in reversed(touched):
            try:
                await source.aclose()
            except Exception as exc:  # closing must not hide the run's own outcome
                _log.warning("tool_source_close_failed", entry=source.entry, error=f"{type(exc).__name__}: {exc}")


def tools_for_run(tools: Mapping[str, Tool | ToolSource]) -> dict[str, Tool | ToolSource]:
    """One run's tool entries: each tool source replaced by its unstarted copy (:meth:`ToolSource.fresh`)."""
    return {name: entry.fresh() if isinstance(entry, ToolSource) else entry for name, entry in tools.items()}


__all__ = ["StartedSources", "tools_for_run"]
