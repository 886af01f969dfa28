"""Reading a team file: YAML → interpolation → JSON Schema → semantic checks → models.

:func:`check_file` finds every problem and never raises for a bad file;
:func:`load_config` is what running a team uses: it raises
:class:`~teamrun.errors.ConfigError` carrying every diagnostic.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from teamrun.config.checks.semantic import check_semantics
from teamrun.config.diagnostics import Diagnostic
from teamrun.config.interpolate import Interpolator
from teamrun.config.schema import SchemaChecker
from teamrun.config.yamlsrc import SourceMap, load_yaml
from teamrun.errors import ConfigError

if TYPE_CHECKING:
    from teamrun.config.models import TeamConfig


@dataclass
class CheckResult:
    """The outcome of checking one file."""

    file: str
    diagnostics: list[Diagnostic]
    data: Any = None
    source_map: SourceMap = field(default_factory=SourceMap)
    secrets: set[str] = field(default_factory=set)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def add(self, found: Iterable[Diagnostic]) -> None:
        """Add what a check above the config layer found (``--import-check``: MCP servers, agent cards),
        in the order of the file like the rest."""
        self.diagnostics = _in_order([*self.diagnostics, *found])


@dataclass(frozen=True)
class LoadedConfig:
    """A valid team file, typed, with what running it needs to know about its origin."""

    config: TeamConfig
    path: Path
    secrets: frozenset[str]
    """The secret values the file's ``${VAR}`` references inserted; a :class:`~teamrun.engine.team.Team` adds its
    remote agents' bearer tokens (``teamrun.engine.remote.cards.with_remote_tokens``: config reads no token)."""
    warnings: tuple[Diagnostic, ...] = ()

    @property
    def base_dir(self) -> Path:
        """The team file's folder: relative paths and user modules are found from here."""
        return self.path.parent


def _read(path: Path, shown: str) -> str | Diagnostic:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Diagnostic(shown, 1, 1, "no such file", rule="io")
    except IsADirectoryError:
        return Diagnostic(shown, 1, 1, "is a directory, not a team file", rule="io")
    except OSError as exc:
        return Diagnostic(shown, 1, 1, f"cannot read the file: {exc.strerror}", rule="io")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line_start = raw.rfind(b"\n", 0, exc.start) + 1
        column = len(raw[line_start : exc.start].decode("utf-8", "replace")) + 1
        message = f"the file is not UTF-8 text: byte 0x{raw[exc.start]:02x} cannot be read; save the file as UTF-8"
        return Diagnostic(shown, raw.count(b"\n", 0, exc.start) + 1, column, message, rule="io")


def check_text(
    text: str,
    file: str,
    *,
    environ: Mapping[str, str] | None = None,
    import_check: bool = False,
    given_vars: Iterable[str] = (),
) -> CheckResult:
    """Check team-file text; ``file`` is the name used in messages; ``given_vars``: the names of the
    run's ``--var`` values (one that sets nothing is a warning)."""
    interpolator = Interpolator(os.environ if environ is None else environ)
    document = load_yaml(text, file, interpolator)
    diagnostics = list(document.diagnostics)
    if document.data is None and diagnostics:
        return CheckResult(file, diagnostics)  # unreadable: the YAML errors say why
    if not isinstance(document.data, dict):
        from teamrun.config.schema import describe_value

        mark = document.source_map.value(())
        message = (
            "a team file must be a mapping with the keys version, name, supervisor and agents, "
            f"not {describe_value(document.data)}"
        )
        diagnostics.append(Diagnostic(file, mark.line, mark.column, message))
        return CheckResult(file, diagnostics, document.data, document.source_map)
    diagnostics += SchemaChecker(file, document.source_map, text).check(document.data)
    diagnostics += check_semantics(
        file, text, document.data, document.source_map, import_check=import_check, given_vars=given_vars
    )
    return CheckResult(file, _in_order(diagnostics), document.data, document.source_map, interpolator.secrets)


def _in_order(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Each diagnostic once, in the order of the file."""
    return sorted(set(diagnostics), key=lambda d: (d.line, d.column, d.message))


def check_file(
    path: str | Path,
    *,
    environ: Mapping[str, str] | None = None,
    import_check: bool = False,
    given_vars: Iterable[str] = (),
) -> CheckResult:
    """Check one team file on disk and return every problem found."""
    shown = str(path)
    text = _read(Path(path), shown)
    if isinstance(text, Diagnostic):
        return CheckResult(shown, [text])
    return check_text(text, shown, environ=environ, import_check=import_check, given_vars=given_vars)


def load_config(
    path: str | Path, *, environ: Mapping[str, str] | None = None, given_vars: Iterable[str] = ()
) -> LoadedConfig:
    """Load a team file for running it; raises :class:`ConfigError` listing every problem.
    ``given_vars``: the names of the run's ``--var`` values; one that sets nothing is among the warnings."""
    from teamrun.config.models import TeamConfig

    result = check_file(path, environ=environ, given_vars=given_vars)
    if not result.ok:
        raise ConfigError(result.errors)
    config = TeamConfig.model_validate(result.data)
    warnings = tuple(d for d in result.diagnostics if d.severity == "warning")
    return LoadedConfig(config, Path(path).resolve(), frozenset(result.secrets), warnings)
