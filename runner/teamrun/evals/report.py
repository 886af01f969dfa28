"""How an eval is shown: a table for people, JSON (also the ``--baseline`` format), JUnit XML, HTML."""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping

from teamrun.evals.evaluate import CaseResult, EvalReport
from teamrun.money import format_usd

__all__ = ["FORMATS", "render_html", "render_json", "render_junit", "render_table"]

_MARKS = {"regression": "REGRESSED", "improvement": "IMPROVED", "new": "new", "same": ""}


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _passed_checks(result: CaseResult) -> str:
    return f"{sum(c.passed for c in result.checks)}/{len(result.checks)}"


def render_table(report: EvalReport) -> str:
    """A plain-text table, one row per case, then a summary line."""
    header = ["case", "result", "checks", "cost", "tokens", "latency"]
    if report.baseline is not None:
        header.append("vs baseline")
    header.append("first failure")
    rows = []
    for r in report.results:
        row = [
            r.name,
            "PASS" if r.passed else "FAIL",
            _passed_checks(r),
            f"{format_usd(r.cost)}",
            str(r.tokens),
            f"{r.latency_s:.1f}s",
        ]
        if report.baseline is not None:
            row.append(_MARKS.get(r.change or "", ""))
        row.append(_clip(r.first_failure, 70))
        rows.append(row)
    widths = [max(len(line[i]) for line in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    summary = (
        f"{report.passed}/{len(report.results)} passed ({report.pass_rate:.0%}), "
        f"cost {format_usd(report.cost)}, {report.duration_s:.1f}s"
    )
    if report.baseline is not None:
        summary += (
            f"; vs {report.baseline}: {report.count('regression')} regressed, {report.count('improvement')} improved"
        )
        if report.removed:
            summary += f", {len(report.removed)} no longer present ({', '.join(report.removed)})"
    return "\n".join([*lines, "", summary]) + "\n"


def render_json(report: EvalReport) -> str:
    return json.dumps(report.as_dict(), indent=2, ensure_ascii=False) + "\n"


def render_junit(report: EvalReport) -> str:
    """JUnit XML: one test case per eval case, a ``<failure>`` naming each failed check."""
    suites = ET.Element(
        "testsuites",
        name="teamrun eval",
        tests=str(len(report.results)),
        failures=str(len(report.results) - report.passed),
        time=f"{report.duration_s:.3f}",
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"{report.team} ({report.cases_file})",
        tests=str(len(report.results)),
        failures=str(len(report.results) - report.passed),
        errors="0",
        skipped="0",
        time=f"{report.duration_s:.3f}",
    )
    for r in report.results:
        case = ET.SubElement(
            suite, "testcase", name=r.name, classname=f"teamrun.eval.{report.team}", time=f"{r.latency_s:.3f}"
        )
        failed = [c for c in r.checks if not c.passed]
        if failed:
            failure = ET.SubElement(case, "failure", message=_clip(r.first_failure, 200), type="check")
            failure.text = "\n".join(f"{c.name}: {c.detail}" for c in failed)
        out = ET.SubElement(case, "system-out")
        out.text = r.answer
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;width:100%}th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;
vertical-align:top}th{background:#f4f4f4}.pass{color:#176f2c;font-weight:600}.fail{color:#b3261e;font-weight:600}
.regression{background:#fde7e4}.improvement{background:#e3f5e6}pre{white-space:pre-wrap;background:#f8f8f8;
padding:8px;margin:4px 0}details{margin:4px 0}"""


def render_html(report: EvalReport, traces: Mapping[str, str] | None = None) -> str:
    """One self-contained page (no scripts, no external files): a summary table, then each case in full.

    ``traces``: case name → the link (relative to the page) of that case's trace file; a ``.jsonl`` one gets a
    ``view`` link too, to the run's view written beside it (``.html``).
    """
    e = html.escape
    links: Mapping[str, str] = traces or {}

    def trace_link(name: str) -> str:
        href = links.get(name)
        if not href:
            return ""
        view = ""
        if href.endswith(".jsonl"):
            view = f' <a class="view" href="{e(href.removesuffix(".jsonl"))}.html">view</a>'
        return f'<a class="trace" href="{e(href)}">trace</a>{view}'

    rows = []
    for r in report.results:
        verdict = "pass" if r.passed else "fail"
        change = f"<td>{e(_MARKS.get(r.change or '', ''))}</td>" if report.baseline is not None else ""
        trace = f"<td>{trace_link(r.name)}</td>" if links else ""
        rows.append(
            f'<tr class="{e(r.change or "")}" data-case="{e(r.name)}" data-result="{verdict}">'
            f'<td><a href="#case-{e(r.name)}">{e(r.name)}</a></td>'
            f'<td class="{verdict} result">{verdict.upper()}</td><td>{_passed_checks(r)}</td>'
            f"<td>{format_usd(r.cost)}</td><td>{r.tokens}</td><td>{r.latency_s:.1f}s</td>{change}{trace}</tr>"
        )
    details = []
    for r in report.results:
        checks = "".join(
            f'<li class="{"pass" if c.passed else "fail"}">{"PASS" if c.passed else "FAIL"} '
            f"{e(c.name)}{(': ' + e(c.detail)) if c.detail else ''}</li>"
            for c in r.checks
        )
        details.append(
            f'<section id="case-{e(r.name)}" class="case"><h3>{e(r.name)} '
            f'<span class="{"pass" if r.passed else "fail"}">{"PASS" if r.passed else "FAIL"}</span></h3>'
            f"<p>run {e(r.status)}, {format_usd(r.cost)}, {r.tokens} tokens, {r.latency_s:.1f}s"
            f"{(' &middot; ' + trace_link(r.name)) if r.name in links else ''}</p>"
            f"<details open><summary>input</summary><pre>{e(r.input)}</pre></details>"
            f"<details open><summary>answer</summary><pre>{e(r.answer)}</pre></details>"
            f"<ul>{checks}</ul></section>"
        )
    head = ("<th>vs baseline</th>" if report.baseline is not None else "") + ("<th>trace</th>" if links else "")
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>teamrun eval: {e(report.team)}</title><style>{_CSS}</style></head><body>"
        f"<h1>teamrun eval: {e(report.team)}</h1>"
        f"<p>{e(report.cases_file)}: {report.passed}/{len(report.results)} passed ({report.pass_rate:.0%}), "
        f"cost {format_usd(report.cost)}, {report.duration_s:.1f}s</p>"
        f"<table><thead><tr><th>case</th><th>result</th><th>checks</th><th>cost</th><th>tokens</th>"
        f"<th>latency</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        f"{''.join(details)}</body></html>\n"
    )


FORMATS: dict[str, Callable[[EvalReport], str]] = {
    "table": render_table,
    "json": render_json,
    "junit": render_junit,
    "html": render_html,
}
