"""What every semantic check receives: the team file under check and the way to report a problem in it.

:class:`CheckContext` is the checks' one public interface: the file's raw data (read defensively — a value of
the wrong type is skipped, the schema has reported it), where each value is written, the little state the
checks share, and :meth:`~CheckContext.error` / :meth:`~CheckContext.warning`, which pin a message to
``file:line:col``. It imports no check, so any check module may import it and none imports another's runner.
"""

from __future__ import annotations

from typing import Any

from teamrun.config.checks.raw import mapping
from teamrun.config.diagnostics import Diagnostic, JsonPath, Severity
from teamrun.config.yamlsrc import SourceMap

__all__ = ["CheckContext"]


class CheckContext:
    """One team file under check: its data, where each value is, what the checks share, how they report."""

    def __init__(self, file: str, text: str, data: Any, source_map: SourceMap) -> None:
        self.file = file
        """The file's name as the messages show it."""
        self.lines = text.splitlines()
        """The file's text, line by line (to find a name inside a value)."""
        self.data = mapping(data)
        self.source_map = source_map
        self.agents = {k: mapping(v) for k, v in mapping(self.data.get("agents")).items()}
        self.tools = {k: mapping(v) for k, v in mapping(self.data.get("tools")).items()}
        supervisor = self.data.get("supervisor")
        self.supervisor = supervisor if isinstance(supervisor, str) else None
        """The supervisor's name when it is a string (the schema reports anything else)."""
        self.graph_complete = True
        """False once a delegates_to/handoffs entry is unusable: then reachability says nothing."""
        self.vars_read: set[str] = set()
        """The ``vars`` keys the templates read (filled by the template checks)."""

    def error(self, path: JsonPath, message: str, rule: str, *, key: bool = False) -> Diagnostic:
        """An error at the value at ``path`` (at its key with ``key=True``); ``rule``: which check found it."""
        return self._at(path, message, "error", rule, key=key)

    def warning(self, path: JsonPath, message: str, rule: str, *, key: bool = False) -> Diagnostic:
        """A warning at the value at ``path`` (at its key with ``key=True``)."""
        return self._at(path, message, "warning", rule, key=key)

    def _at(self, path: JsonPath, message: str, severity: Severity, rule: str, *, key: bool) -> Diagnostic:
        mark = self.source_map.key(path) if key else self.source_map.value(path)
        return Diagnostic(self.file, mark.line, mark.column, message, severity, rule)
