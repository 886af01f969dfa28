"""Reading a cases file: YAML (located) → the cases JSON Schema → semantic checks → models.

Every problem is reported as ``file:line:col: error: message``, the same way
team files are, by the same YAML reader and schema message machinery.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamrun.config.answer_checks import check_problems
from teamrun.config.diagnostics import Diagnostic, JsonPath
from teamrun.config.schema import SchemaChecker, validator_for
from teamrun.config.yamlsrc import SourceMap, load_yaml
from teamrun.errors import ConfigError
from teamrun.evals.models import CasesFile

__all__ = ["LoadedCases", "cases_schema", "check_cases_text", "load_cases"]

_CANDIDATES = (
    Path(__file__).resolve().parent.parent / "schemas" / "cases.schema.json",  # installed wheel
    Path(__file__).resolve().parents[3] / "schemas" / "cases.schema.json",  # source tree
)


@functools.cache
def cases_schema() -> dict[str, Any]:
    """The cases-file JSON Schema."""
    for candidate in _CANDIDATES:
        if candidate.is_file():
            loaded: dict[str, Any] = json.loads(candidate.read_text(encoding="utf-8"))
            return loaded
    raise FileNotFoundError("cases.schema.json is missing from this teamrun installation")


@dataclass(frozen=True)
class LoadedCases:
    """A valid cases file, typed, with the folder its `python:` checks are imported from."""

    cases: CasesFile
    path: Path

    @property
    def base_dir(self) -> Path:
        return self.path.parent


def check_cases_text(text: str, file: str) -> tuple[list[Diagnostic], Any]:
    """Every problem of cases-file text (``file`` is the name used in messages), and the loaded data."""
    document = load_yaml(text, file)
    diagnostics = list(document.diagnostics)
    if document.data is None and diagnostics:
        return diagnostics, None
    data = document.data
    if not isinstance(data, dict):
        mark = document.source_map.value(())
        diagnostics.append(
            Diagnostic(file, mark.line, mark.column, "a cases file must be a mapping with the keys version and cases")
        )
        return diagnostics, data
    checker = SchemaChecker(file, document.source_map, text, validator=_validator(), document="the cases file")
    diagnostics += checker.check(data)
    diagnostics += _semantics(file, data, document.source_map)
    return sorted(set(diagnostics), key=lambda d: (d.line, d.column, d.message)), data


@functools.cache
def _validator() -> Any:
    return validator_for(cases_schema())


def _semantics(file: str, data: dict[str, Any], source_map: SourceMap) -> list[Diagnostic]:
    found: list[Diagnostic] = []

    def at(path: JsonPath, message: str, *, key: bool = False) -> None:
        mark = source_map.key(path) if key else source_map.value(path)
        found.append(Diagnostic(file, mark.line, mark.column, message, rule="cases"))

    checks: list[tuple[JsonPath, Any]] = []
    defaults = data.get("defaults")
    if isinstance(defaults, dict) and isinstance(defaults.get("checks"), list):
        checks += [(("defaults", "checks", i), c) for i, c in enumerate(defaults["checks"])]
    seen: dict[str, int] = {}
    cases = data.get("cases")
    for index, case in enumerate(cases if isinstance(cases, list) else []):
        if not isinstance(case, dict):
            continue
        name = case.get("name")
        if isinstance(name, str):
            if name in seen:
                at(
                    ("cases", index, "name"),
                    f"case name '{name}' is used twice (first by cases[{seen[name]}]); case names must be unique",
                )
            seen.setdefault(name, index)
        if isinstance(case.get("checks"), list):
            checks += [(("cases", index, "checks", i), c) for i, c in enumerate(case["checks"])]
    for path, check in checks:
        for where, message, key in check_problems(path, check, judge_model=True):
            at(where, message, key=key)
    return found


def load_cases(path: str | Path) -> LoadedCases:
    """Load a cases file; raises :class:`~teamrun.errors.ConfigError` listing every problem."""
    shown = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError([Diagnostic(shown, 1, 1, "no such file", rule="io")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Diagnostic(shown, 1, 1, f"cannot read the cases file: {exc}", rule="io")]) from None
    diagnostics, data = check_cases_text(text, shown)
    errors = [d for d in diagnostics if d.severity == "error"]
    if errors:
        raise ConfigError(errors)
    return LoadedCases(CasesFile.model_validate(data), Path(path).resolve())
