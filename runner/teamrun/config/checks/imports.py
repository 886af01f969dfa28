"""``--import-check``: every ``module:function`` a team file names can be imported (this runs user code)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from teamrun.config.checks.acceptance import check_lists
from teamrun.config.checks.hooks import HOOK_POINTS
from teamrun.config.checks.raw import mapping
from teamrun.config.diagnostics import Diagnostic, JsonPath, dotted

if TYPE_CHECKING:
    from teamrun.config.checks.context import CheckContext

__all__ = ["import_checks"]


def import_checks(c: CheckContext) -> Iterator[Diagnostic]:
    """Each python tool, answer check, message filter and hook ``call:`` that does not import."""
    import contextlib
    import sys
    from pathlib import Path

    from teamrun.config.imports import ImportProblem, resolve_import_path

    base_dir = Path(c.file).resolve().parent
    for path, reference in _import_references(c):
        try:
            # whatever user modules print while importing must not mix into the report
            with contextlib.redirect_stdout(sys.stderr):
                resolve_import_path(reference, base_dir=base_dir, keep_on_path=False)
        except ImportProblem as exc:
            yield c.error(path, f"{dotted(path)}: {exc}", "import")


def _import_references(c: CheckContext) -> Iterator[tuple[JsonPath, str]]:
    """Every well-formed import path (a malformed one is already a schema error)."""
    from teamrun.config.schema import ecma_pattern, validation_schema

    pattern = ecma_pattern(validation_schema()["$defs"]["ToolDef"]["properties"]["python"]["pattern"])
    for path, reference in _all_import_references(c):
        if pattern.search(reference):
            yield path, reference


def _all_import_references(c: CheckContext) -> Iterator[tuple[JsonPath, str]]:
    for name, spec in c.tools.items():
        if isinstance(spec.get("python"), str):
            yield ("tools", name, "python"), spec["python"]
    for base, checks in check_lists(c):
        for index, check in enumerate(checks):
            if isinstance(mapping(check).get("python"), str):
                yield (*base, index, "python"), check["python"]
    for agent, spec in c.agents.items():
        delegation = mapping(spec.get("delegation"))
        mf = mapping(delegation.get("message_filter"))
        if isinstance(mf.get("python"), str):
            yield ("agents", agent, "delegation", "message_filter", "python"), mf["python"]
        hooks = mapping(delegation.get("hooks"))
        for event in HOOK_POINTS:
            entries = hooks.get(event)
            for index, hook in enumerate(entries if isinstance(entries, list) else []):
                call = mapping(hook).get("call")
                if isinstance(call, str):
                    yield ("agents", agent, "delegation", "hooks", event, index, "call"), call
