"""The steps the view's browser tests share: record a run, write its page, open it (``open_page``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from teamrun.cli import main
from tests.observe.handmade import write_trace


def record_view(team: Path, tmp_path: Path, task: str, *, code: int = 0) -> tuple[Path, Path]:
    """Run ``team`` with a content trace (``run.jsonl``), then write its view (``run.html``); returns (trace, page).

    ``code`` is the exit code ``teamrun execute`` must end with.
    """
    trace = tmp_path / "run.jsonl"
    assert (
        main(["execute", str(team), "-i", task, "--progress", "none", "--trace", str(trace), "--trace-content"]) == code
    )
    page = tmp_path / "run.html"
    assert main(["trace", "view", str(trace), "-o", str(page)]) == 0
    return trace, page


def view_trace(trace: Path) -> Path:
    """``teamrun trace view`` of ``trace``; returns the page's path (beside it, ``.html``)."""
    assert main(["trace", "view", str(trace)]) == 0
    return trace.with_suffix(".html")


def view_of(records: list[dict[str, Any]], tmp_path: Path) -> Path:
    """``teamrun trace view`` of a trace file (``run.jsonl``) holding ``records``; returns the page's path."""
    return view_trace(write_trace(tmp_path / "run.jsonl", records))
