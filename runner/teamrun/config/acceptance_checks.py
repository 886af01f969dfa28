"""Semantic checks of ``accept:`` (the team's and each agent's) and ``max_attempts``.

What each check may hold is :mod:`teamrun.config.answer_checks`' to say; here it is located.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from teamrun.config.diagnostics import Diagnostic, JsonPath, dotted

if TYPE_CHECKING:
    from teamrun.config.checks import SemanticChecker

__all__ = ["accept_owners", "acceptance_checks"]


def accept_owners(c: SemanticChecker) -> Iterator[tuple[JsonPath, dict[str, Any]]]:
    """The team and each agent: whoever may hold ``accept:`` and ``max_attempts``."""
    yield (), c.data
    for agent, spec in c.agents.items():
        yield ("agents", agent), spec


def acceptance_checks(c: SemanticChecker) -> Iterator[Diagnostic]:
    from teamrun.config.answer_checks import check_cautions, check_problems

    for base, spec in accept_owners(c):
        checks = spec.get("accept")
        for index, check in enumerate(checks if isinstance(checks, list) else []):
            for path, message, key in check_problems((*base, "accept", index), check):
                yield c._error(path, message, "accept", key=key)
            for path, message in check_cautions((*base, "accept", index), check):
                yield c._warning(path, message, "regex")
            if isinstance(check, dict) and check.get("contains") == "":
                where = (*base, "accept", index, "contains")
                yield c._warning(where, f"{dotted(where)} is empty, so this check always passes", "accept")
        if "max_attempts" in spec and not checks:
            yield c._warning(
                (*base, "max_attempts"),
                f"{dotted((*base, 'max_attempts'))} has no effect without {dotted((*base, 'accept'))} checks",
                "unused",
                key=True,
            )
