"""Semantic checks inside each agent: its templates, ``output_schema`` and ``delegation`` section.

A delegation section that never applies, ``memory: thread`` on the supervisor,
background workers it does not delegate to, ``message_filter`` regular
expressions, and the hooks (:mod:`teamrun.config.checks.hooks`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from teamrun.config.checks.hooks import hook_checks
from teamrun.config.checks.raw import mapping, names
from teamrun.config.checks.sub_schemas import sub_schema
from teamrun.config.checks.templates import INSTRUCTION_NAMES, PROMPT_NAMES, template
from teamrun.config.diagnostics import Diagnostic, JsonPath, dotted, shorten
from teamrun.config.regexes import judge_regex

if TYPE_CHECKING:
    from teamrun.config.checks.context import CheckContext

__all__ = ["agent_checks"]


def agent_checks(c: CheckContext) -> Iterator[Diagnostic]:
    """Each agent's own settings: templates, output_schema, delegation section, message filter, hooks."""
    yield from _api_base(c, ("defaults",), mapping(c.data.get("defaults") if c.data else None))
    for agent, spec in c.agents.items():
        base: JsonPath = ("agents", agent)
        yield from _api_base(c, base, spec)
        yield from template(c, (*base, "instructions"), spec.get("instructions"), INSTRUCTION_NAMES)
        yield from sub_schema(c, (*base, "output_schema"), spec.get("output_schema"))
        delegation = mapping(spec.get("delegation"))
        if delegation and spec.get("delegates_to") in (None, []):
            yield c.warning(
                (*base, "delegation"),
                f"agent '{agent}' has a delegation section but no delegates_to, so it never applies",
                "unused",
                key=True,
            )
        yield from template(c, (*base, "delegation", "prompt"), delegation.get("prompt"), PROMPT_NAMES)
        yield from template(
            c, (*base, "delegation", "append_guidelines"), delegation.get("append_guidelines"), PROMPT_NAMES
        )
        if agent == c.supervisor and spec.get("memory") == "thread" and not _delegated_to(c, agent):
            yield c.warning(
                (*base, "memory"),
                f"agents.{agent}.memory: thread does nothing on the supervisor: its conversation is the "
                "thread itself (memory applies to workers)",
                "unused",
            )
        workers = [w for _, w in names(spec.get("delegates_to"))]
        background = delegation.get("background")
        for index, name in names(background if isinstance(background, list) else None):
            if name not in workers:
                yield c.error(
                    (*base, "delegation", "background", index),
                    f"agents.{agent}.delegation.background: '{name}' is not in agents.{agent}.delegates_to "
                    f"({', '.join(workers) or 'empty'}); only its workers can run in the background",
                    "reference",
                )
        yield from _message_filter(c, (*base, "delegation", "message_filter"), delegation.get("message_filter"))
        yield from hook_checks(c, (*base, "delegation", "hooks"), delegation.get("hooks"))


def _api_base(c: CheckContext, base: JsonPath, spec: dict[str, Any]) -> Iterator[Diagnostic]:
    """An ``api_base`` that cannot be an endpoint (an empty one, from ``${VAR:-}``, means unset)."""
    from teamrun.defaults import api_base_problem

    url = spec.get("api_base")
    if isinstance(url, str) and url.strip() and "${" not in url and (problem := api_base_problem(url)) is not None:
        yield c.error((*base, "api_base"), f"{dotted((*base, 'api_base'))}: {problem}", "api_base")


def _delegated_to(c: CheckContext, name: str) -> bool:
    """Whether some agent delegates to or hands off to ``name``."""
    return any(
        name == target
        for spec in c.agents.values()
        for field in ("delegates_to", "handoffs")
        for _, target in names(spec.get(field))
    )


def _message_filter(c: CheckContext, path: JsonPath, spec: Any) -> Iterator[Diagnostic]:
    for index, pattern in names(mapping(spec).get("drop_matching")):
        verdict = judge_regex(pattern)
        where = (*path, "drop_matching", index)
        if verdict.error is not None:
            yield c.error(
                where,
                f"{dotted(where)}: invalid regular expression '{shorten(pattern)}': {verdict.error}",
                "regex",
            )
        elif verdict.caution is not None:
            yield c.warning(
                where, f"{dotted(where)}: regular expression '{shorten(pattern)}': {verdict.caution}", "regex"
            )
