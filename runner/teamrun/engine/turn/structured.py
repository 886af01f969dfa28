"""Structured output: an agent's ``output_schema``, asked for and always checked.

The schema is sent as a response format (providers that cannot use it ignore
it), and the answer is validated with jsonschema whatever the provider did.
An invalid answer gets bounded repair turns listing the validation errors;
still invalid, the agent fails with :class:`OutputInvalid`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from teamrun.bounds import check_json
from teamrun.config.models import Agent
from teamrun.errors import RunError

DEFAULT_REPAIR_TURNS = 2
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n\s*```\s*$", re.DOTALL)


def _local_only_registry() -> Any:
    """A reference registry that never fetches: a ``$ref`` outside the schema fails instead of going online."""
    from referencing import Registry

    def refuse(uri: str) -> Any:
        raise LookupError(f"teamrun does not fetch schemas: {uri}")

    return Registry(retrieve=refuse)  # type: ignore[call-arg]


class OutputInvalid(RunError):
    """The agent's answer still does not match its ``output_schema`` after the repair turns."""


@dataclass(frozen=True)
class Verdict:
    ok: bool
    text: str
    repair_prompt: str = ""


class OutputChecker:
    """Checks one agent's answers against its schema, counting repair turns."""

    def __init__(self, agent: str, schema: dict[str, Any], repairs: int) -> None:
        from jsonschema import Draft202012Validator

        self.agent = agent
        self.schema = schema
        self.validator = Draft202012Validator(schema, registry=_local_only_registry())
        self.repairs_left = repairs
        self.response_format = {
            "type": "json_schema",
            "json_schema": {"name": f"{agent}_output"[:64], "schema": schema},
        }

    @classmethod
    def for_agent(cls, name: str, agent: Agent) -> OutputChecker | None:
        if agent.output_schema is None:
            return None
        repairs = DEFAULT_REPAIR_TURNS if agent.max_repair_turns is None else agent.max_repair_turns
        return cls(name, agent.output_schema, repairs)

    def check(self, text: str) -> Verdict:
        """``ok`` with the normalised JSON text, or a repair prompt; raises when out of repairs."""
        problems = self._problems(text)
        if not problems:
            return Verdict(True, _unfenced(text).strip())
        if self.repairs_left <= 0:
            raise OutputInvalid(f"{self.agent}'s answer does not match its output_schema: {'; '.join(problems[:5])}")
        self.repairs_left -= 1
        listing = "\n".join(f"- {p}" for p in problems[:10])
        prompt = (
            "Your answer does not match the required JSON Schema:\n"
            f"{listing}\n"
            "Reply with only the corrected JSON document, nothing else."
        )
        return Verdict(False, text, prompt)

    def _problems(self, text: str) -> list[str]:
        out_of_bounds = check_json(_unfenced(text), "the answer")  # what json.loads raises on, or lets through
        if out_of_bounds is not None:  # (deep nesting, a 5000-digit integer; NaN) is a problem to repair too
            return [out_of_bounds.message]
        value = json.loads(_unfenced(text))
        problems = []
        for error in sorted(self.validator.iter_errors(value), key=lambda e: list(e.absolute_path)):
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            problems.append(f"at {where}: {error.message}")
        return problems


def _unfenced(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1) if match else text
