"""``teamrun eval --traces DIR``: one trace file per case, linked from the HTML report with its view (HTML)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from teamrun.errors import UsageError
from teamrun.events import Event, RunEnd, Subscriber
from teamrun.logs import get_logger

__all__ = ["CaseTraces", "default_traces_dir", "write_view"]

_log = get_logger(__name__)


def default_traces_dir(report: str) -> Path:
    """Where an HTML report's traces go unless ``--traces`` says: ``<report name>-traces/`` beside it."""
    path = Path(report)
    return path.with_name(f"{path.stem}-traces")


class _UntilRunEnd:
    """A trace writer that closes its file when its run ends (a long eval keeps no file open per case)."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer

    def __call__(self, event: Event) -> None:
        self.writer(event)
        if isinstance(event, RunEnd):
            self.writer.close()


def write_view(trace: Path) -> Path | None:
    """The view of ``trace`` written as ``<trace>.html``; ``None`` (and a warning in the log) if it cannot be."""
    from teamrun.observe.trace_read import read_trace
    from teamrun.observe.view import render_page

    target = trace.with_suffix(".html")
    try:
        read = read_trace(trace)
        target.write_text(
            render_page(read.records, title=f"teamrun eval case {trace.stem}", notes=read.problems), encoding="utf-8"
        )
    except (OSError, UsageError) as exc:
        _log.warning("eval_view_not_written", trace=str(trace), error=str(exc))
        return None
    return target


class CaseTraces:
    """Trace files of an eval's cases, ``DIR/<case>.jsonl`` (content left out, secrets masked)."""

    def __init__(self, folder: str | Path, redactor: Any) -> None:
        self.folder = Path(folder)
        self.redactor = redactor
        self.paths: dict[str, Path] = {}
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create the traces folder {self.folder}: {exc.strerror}") from None

    def subscribers_for(self, case: str) -> list[Subscriber]:
        from teamrun.observe.trace_file import TraceWriter

        path = self.folder / f"{case}.jsonl"
        self.paths[case] = path
        return [_UntilRunEnd(TraceWriter(path, redactor=self.redactor))]

    def links(self, page: str | None) -> dict[str, str]:
        """Each case's trace as a link relative to the report at ``page`` (the working folder for stdout).

        Each trace's view is written beside it (``<case>.html``), for the report's ``view`` links.
        """
        for path in self.paths.values():
            write_view(path)
        base = Path(page).resolve().parent if page is not None else Path.cwd()
        return {
            case: quote(Path(os.path.relpath(path.resolve(), base)).as_posix()) for case, path in self.paths.items()
        }
