"""What a workflow step produced, and what a step's templates can read.

A step's output passes verbatim to later steps: ``steps.<id>.text`` is the
answer as the agent gave it, ``steps.<id>.output`` the same answer parsed
when the agent has an ``output_schema`` (so fields read as
``steps.<id>.output.<field>``), else the text again. A map step's ``output`` is
the list of its items' outputs (``None`` for a failed item), in the list's
order.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from teamrun.config import templates
from teamrun.engine.result import DelegationResult

__all__ = ["StepOutput", "evaluate", "render", "template_names"]


@functools.cache
def _environment() -> Any:
    """The team file's sandboxed environment, where a key of a structured output wins over a dict method:
    ``steps.plan.output.items`` is the ``items`` field, not ``dict.items``."""
    env = templates.environment().overlay()
    plain = env.getattr

    def getattr_(obj: Any, attribute: str) -> Any:
        if isinstance(obj, dict) and attribute in obj:
            return obj[attribute]
        return plain(obj, attribute)

    env.getattr = getattr_  # type: ignore[method-assign]
    return env


@functools.lru_cache(maxsize=256)
def _template(source: str) -> Any:
    return _environment().from_string(source)


@functools.lru_cache(maxsize=256)
def _expression(source: str) -> Callable[..., Any]:
    return _environment().compile_expression(source, undefined_to_none=False)  # type: ignore[no-any-return]


def render(source: str, context: Mapping[str, Any]) -> str:
    """Render a step's template (within the bounds of :mod:`teamrun.config.templates`)."""
    return templates.render_template(_template(source), context)


def evaluate(source: str, context: Mapping[str, Any]) -> Any:
    """The value of an expression (a ``map:``) over ``context``."""
    return _expression(source)(**context)


@dataclass
class StepOutput:
    """One step's result as later steps see it."""

    text: str
    output: Any
    status: str = "ok"
    """``ok``, ``error``, ``rejected``, ``budget_exhausted`` or ``cancelled`` (a map: ``ok`` if any item was)."""
    error: str | None = None
    branch: str | None = None
    """A route step: the branch it took (``default`` when the output named none)."""
    choice: Any = None
    """A route step: its agent's structured output (what picked the branch)."""
    iterations: int | None = None
    """A loop step: iterations run."""
    passed: bool | None = None
    """A loop step: whether the last output passed the checks."""
    errors: list[dict[str, Any]] = field(default_factory=list)
    """A map step: ``{index, error}`` of each failed item."""

    @classmethod
    def of(cls, result: DelegationResult, *, structured: bool) -> StepOutput:
        """A step that ran one agent: its answer verbatim, parsed when its agent has an ``output_schema``."""
        output: Any = result.response
        if structured and result.status in ("ok", "budget_exhausted"):
            try:
                output = json.loads(result.response)
            except ValueError:
                output = result.response
        return cls(result.response, output, result.status, result.error)

    @classmethod
    def of_map(cls, items: Sequence[StepOutput]) -> StepOutput:
        """A map step: the items' outputs in order; failed items are ``None`` there and listed in ``errors``."""
        ok = [item for item in items if item.status in ("ok", "budget_exhausted")]
        errors: list[dict[str, Any]] = [
            {"index": i, "error": item.error or item.status} for i, item in enumerate(items) if not item.ok
        ]
        text = "\n\n".join(item.text for item in ok)
        status = "ok" if ok or not items else items[0].status
        error = None if status == "ok" else "every item failed: " + "; ".join(str(e["error"]) for e in errors)
        outputs = [item.output if item.status in ("ok", "budget_exhausted") else None for item in items]
        return cls(text, outputs, status, error, errors=errors)

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "budget_exhausted")

    def view(self) -> dict[str, Any]:
        """What ``steps.<id>`` holds in templates."""
        return {
            "output": self.output,
            "text": self.text,
            "status": self.status,
            "error": self.error,
            "branch": self.branch,
            "choice": self.choice,
            "iterations": self.iterations,
            "passed": self.passed,
            "errors": self.errors,
        }


def template_names(
    input: str, vars: Mapping[str, Any], today: str, outputs: Mapping[str, StepOutput], **extra: Any
) -> dict[str, Any]:
    """The names a step's ``input`` (and the workflow's ``output``) render with."""
    return {
        "input": input,
        "vars": dict(vars),
        "today": today,
        "steps": {name: out.view() for name, out in outputs.items()},
        **extra,
    }
