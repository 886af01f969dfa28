"""Reporters for ``teamrun validate``: text, JSON, GitHub annotations, JUnit XML."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from teamrun.config.loader import CheckResult


def _summary(results: Sequence[CheckResult]) -> str:
    invalid = sum(1 for r in results if not r.ok)
    errors = sum(len(r.errors) for r in results)
    warnings = sum(len(r.diagnostics) - len(r.errors) for r in results)
    files = f"{len(results)} file{'s' if len(results) != 1 else ''}"
    if not invalid:
        extra = f" ({warnings} warning{'s' if warnings != 1 else ''})" if warnings else ""
        return f"{files} valid{extra}"
    return f"{invalid} of {files} invalid: {errors} error{'s' if errors != 1 else ''}" + (
        f", {warnings} warning{'s' if warnings != 1 else ''}" if warnings else ""
    )


def text_report(results: Sequence[CheckResult]) -> str:
    lines = [d.render() for r in results for d in r.diagnostics]
    lines.append(_summary(results))
    return "\n".join(lines) + "\n"


def json_report(results: Sequence[CheckResult]) -> str:
    payload = {
        "valid": all(r.ok for r in results),
        "summary": _summary(results),
        "files": [
            {
                "file": r.file,
                "valid": r.ok,
                "diagnostics": [
                    {
                        "line": d.line,
                        "column": d.column,
                        "severity": d.severity,
                        "rule": d.rule,
                        "message": d.message,
                    }
                    for d in r.diagnostics
                ],
            }
            for r in results
        ],
    }
    return json.dumps(payload, indent=2, ensure_ascii=False) + "\n"


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_property(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def github_report(results: Sequence[CheckResult]) -> str:
    """GitHub Actions workflow commands: each problem shows up on the PR's diff."""
    lines = [
        f"::{d.severity} file={_gh_property(d.file)},line={d.line},col={d.column},"
        f"title=teamrun validate::{_gh_data(d.message)}"
        for r in results
        for d in r.diagnostics
    ]
    lines.append(_summary(results))
    return "\n".join(lines) + "\n"


def junit_report(results: Sequence[CheckResult]) -> str:
    """JUnit XML: one test case per file, holding one failure that lists all its errors; warnings go to system-out.

    JUnit readers expect at most one ``<failure>`` per test case (junitparser
    counts each, xunitparser keeps the last), so the suite's ``failures`` is the
    number of invalid files and every error of a file is a line of its failure.
    """
    from xml.sax.saxutils import escape, quoteattr

    failures = sum(1 for r in results if not r.ok)
    cases = []
    for r in results:
        body = ""
        errors = r.errors
        if errors:
            rules = {d.rule for d in errors}
            message = errors[0].message if len(errors) == 1 else f"{len(errors)} errors; the first: {errors[0].message}"
            kind = errors[0].rule if len(rules) == 1 else "several"
            text = "\n".join(d.render() for d in errors)
            body = f"\n    <failure message={quoteattr(message)} type={quoteattr(kind)}>{escape(text)}</failure>"
        warnings = [d.render() for d in r.diagnostics if d.severity == "warning"]
        if warnings:
            body += f"\n    <system-out>{escape(chr(10).join(warnings))}</system-out>"
        end = f"{body}\n  </testcase>" if body else "</testcase>"
        cases.append(f'  <testcase classname="teamrun.validate" name={quoteattr(r.file)}>{end}')
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        f'<testsuite name="teamrun validate" tests="{len(results)}" '
        f'failures="{failures}" errors="0">\n' + "\n".join(cases) + "\n</testsuite>\n"
    )


REPORTERS: dict[str, Callable[[Sequence[CheckResult]], str]] = {
    "text": text_report,
    "json": json_report,
    "github": github_report,
    "junit": junit_report,
}
