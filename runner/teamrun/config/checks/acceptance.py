"""Semantic checks of ``accept:`` (the team's and each agent's) and ``max_attempts``.

What each check may hold is :mod:`teamrun.config.answer_checks`' to say; here it is located.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from teamrun.config.diagnostics import Diagnostic, JsonPath, dotted

if TYPE_CHECKING:
    from teamrun.config.checks.context import CheckContext

__all__ = ["accept_owners", "acceptance_checks", "check_lists"]


def accept_owners(c: CheckContext) -> Iterator[tuple[JsonPath, dict[str, Any]]]:
    """The team and each agent: whoever may hold ``accept:`` and ``max_attempts``."""
    yield (), c.data
    for agent, spec in c.agents.items():
        yield ("agents", agent), spec


def check_lists(c: CheckContext) -> Iterator[tuple[JsonPath, list[Any]]]:
    """Every list of answer checks: each ``accept:`` (the team's, each agent's) and each workflow loop's
    ``until:`` (the same kinds, checked alike), with the list's path."""
    for base, spec in accept_owners(c):
        if isinstance(spec.get("accept"), list):
            yield (*base, "accept"), spec["accept"]
    yield from _untils(("workflow",), c.data.get("workflow") if c.data else None)


def _untils(path: JsonPath, node: Any) -> Iterator[tuple[JsonPath, list[Any]]]:
    if isinstance(node, dict):
        loop = node.get("loop")
        if isinstance(loop, dict) and isinstance(loop.get("until"), list):
            yield (*path, "loop", "until"), loop["until"]
        for key, value in node.items():
            yield from _untils((*path, key), value)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _untils((*path, index), value)


def acceptance_checks(c: CheckContext) -> Iterator[Diagnostic]:
    from teamrun.config.answer_checks import check_cautions, check_problems

    for where_list, checks in check_lists(c):
        for index, check in enumerate(checks):
            for path, message, key in check_problems((*where_list, index), check):
                yield c.error(path, message, "accept", key=key)
            for path, message in check_cautions((*where_list, index), check):
                yield c.warning(path, message, "regex")
            if isinstance(check, dict) and check.get("contains") == "":
                where = (*where_list, index, "contains")
                yield c.warning(where, f"{dotted(where)} is empty, so this check always passes", "accept")
    for base, spec in accept_owners(c):
        if "max_attempts" in spec and not spec.get("accept"):
            yield c.warning(
                (*base, "max_attempts"),
                f"{dotted((*base, 'max_attempts'))} has no effect without {dotted((*base, 'accept'))} checks",
                "unused",
                key=True,
            )
