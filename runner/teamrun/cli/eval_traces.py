"""``teamrun eval --traces DIR``: one trace file per case, linked from the HTML report with its view (HTML)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from teamrun.errors import UsageError
from teamrun.events import Event, RunEnd, Subscriber
from teamrun.logs import get_logger

__all__ = ["CaseTraces", "default_traces_dir", "write_view"]

if TYPE_CHECKING:
    from teamrun.evals.evaluate import CaseResult

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


def write_view(trace: Path, case: Mapping[str, Any] | None = None) -> Path | None:
    """The view of ``trace`` written as ``<trace>.html``; ``None`` (and a warning in the log) if it cannot be.

    ``case``: the eval case the run answered (its input, answer, checks and the report's link), shown above the run.
    """
    from teamrun.observe.trace_read import read_trace
    from teamrun.observe.view import render_page

    target = trace.with_suffix(".html")
    try:
        read = read_trace(trace)
        page = render_page(read.records, title=f"teamrun eval case {trace.stem}", notes=read.problems, case=case)
        target.write_text(page, encoding="utf-8")
    except (OSError, UsageError) as exc:
        _log.warning("eval_view_not_written", trace=str(trace), error=str(exc))
        return None
    return target


def _case_of(result: CaseResult, trace: Path, report: str | None) -> dict[str, Any]:
    """What a case's view shows about the case; ``report``: the report's file, linked from the view."""
    back = None
    if report is not None:
        relative = os.path.relpath(Path(report).resolve(), trace.resolve().parent)
        back = quote(Path(relative).as_posix()) + "#case-" + quote(result.name)
    return {
        "name": result.name,
        "input": result.input,
        "answer": result.answer,
        "passed": result.passed,
        "status": result.status,
        "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in result.checks],
        "report": back,
    }


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

    def links(self, page: str | None, results: Iterable[CaseResult] = ()) -> dict[str, str]:
        """Each case's trace as a link relative to the report at ``page`` (the working folder for stdout).

        Each trace's view is written beside it (``<case>.html``), for the report's ``view`` links; with the
        case's ``results``, the view shows the case (input, answer, each check) and links back to the report.
        """
        by_name = {r.name: r for r in results}
        for name, path in self.paths.items():
            result = by_name.get(name)
            write_view(path, case=_case_of(result, path, page) if result is not None else None)
        base = Path(page).resolve().parent if page is not None else Path.cwd()
        return {
            case: quote(Path(os.path.relpath(path.resolve(), base)).as_posix()) for case, path in self.paths.items()
        }
