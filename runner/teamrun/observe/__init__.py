"""Seeing a run: trace files, their tree views and OpenTelemetry export (secret masking: teamrun.secrets).

    from teamrun.observe import TraceWriter, read_trace, render_trace
    with TraceWriter("run.jsonl") as trace:
        result = team.run_sync("...", subscribers=[trace])
    print(render_trace(read_trace("run.jsonl")))

Importing this package is cheap; the OpenTelemetry SDK loads only when an
:class:`OTelExporter` is built.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "OTelExporter",
    "Redactor",
    "Trace",
    "TraceNode",
    "TraceWriter",
    "read_trace",
    "render_trace",
]

if TYPE_CHECKING:
    from teamrun.observe.otel import OTelExporter
    from teamrun.observe.render import render_trace
    from teamrun.observe.trace_file import TraceWriter
    from teamrun.observe.trace_read import Trace, TraceNode, read_trace
    from teamrun.secrets import Redactor

_LAZY = {
    "OTelExporter": "teamrun.observe.otel",
    "Redactor": "teamrun.secrets",
    "render_trace": "teamrun.observe.render",
    "TraceWriter": "teamrun.observe.trace_file",
    "Trace": "teamrun.observe.trace_read",
    "TraceNode": "teamrun.observe.trace_read",
    "read_trace": "teamrun.observe.trace_read",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'teamrun.observe' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
