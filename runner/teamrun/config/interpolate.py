"""``${VAR}`` and ``${VAR:-default}`` in team files.

``$${`` writes a literal ``${``. A reference to an unset variable without a
default is an error (reported with the value's location). Values of variables
whose names look secret (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``)
are remembered so logs and traces can redact them. The :class:`Interpolator`'s
environment is the config layer's one view of the process environment (the
loader hands it ``os.environ``); an ``a2a:`` agent's bearer token is read by the
engine (``teamrun.engine.remote.cards.with_remote_tokens``), not here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

_REFERENCE = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_UNCLOSED = re.compile(r"(?<!\$)\$\{(?![A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\})")
_FRAGMENT = re.compile(r"\$\{[^\s\"']{0,40}")
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


ENV_REFERENCE_SCHEMA: dict[str, str] = {
    "type": "string",
    "pattern": r"^\$\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\}$",
}
"""What the published schema also accepts where a number or true/false goes: a whole-value
``${VAR}`` or ``${VAR:-default}``. Editors validate the file before substitution; teamrun
substitutes first and types the value (``max_steps: ${N:-5}`` is the integer 5), so its own
validation drops this alternative again (:func:`teamrun.config.schema.validation_schema`)."""


class InterpolationError(ValueError):
    """A reference could not be resolved; the message says how to fix it."""

    def __init__(self, message: str, fragment: str = "") -> None:
        super().__init__(message)
        self.fragment = fragment
        """The text of the bad reference, so the error can point at it."""


@dataclass
class Interpolator:
    """Substitutes environment references, collecting secret values it inserted."""

    environ: Mapping[str, str]
    secrets: set[str] = field(default_factory=set)

    def substitute(self, text: str) -> str:
        if "${" not in text:
            return text
        bad = _UNCLOSED.search(text.replace("$${", "\0\0\0"))
        if bad is not None:
            start = bad.start()
            end = text.find("}", start)
            shown = text[start:] if end < 0 else text[start : end + 1]
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            problem = "is missing its closing '}'" if end < 0 else "is not a valid reference"
            raise InterpolationError(
                f"'{shown}' {problem} (write ${{NAME}} or ${{NAME:-default}}; $${{ is a literal '${{')",
                fragment=_FRAGMENT.match(text, start).group(0),  # type: ignore[union-attr]
            )
        return _REFERENCE.sub(self._replace, text)

    def _replace(self, match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        name, default = match.group(1), match.group(2)
        value = self.environ.get(name)
        if value is None or (value == "" and default is not None):
            if default is None:
                raise InterpolationError(
                    f"environment variable {name} is not set (set it, or give a default: ${{{name}:-value}})",
                    fragment=match.group(0),
                )
            return default
        if _SECRET_NAME.search(name) and value:
            self.secrets.add(value)
        return value
