"""The cases-file language (``teamrun eval``) as typed pydantic models.

``schemas/cases.schema.json`` is generated from these models
(``python -m teamrun.evals.schema_gen > schemas/cases.schema.json``); a test
fails when the committed file is stale.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from teamrun.config.models import IMPORT_PATH_PATTERN

__all__ = ["CHECK_KINDS", "Case", "CaseDefaults", "CasesFile", "Ceilings", "Check", "Judge"]

CASE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
CHECK_KINDS = ("contains", "regex", "json_schema", "python", "judge")
"""The keys that say what a check does; a check has exactly one of them."""

CaseName = Annotated[str, StringConstraints(pattern=CASE_NAME_PATTERN)]
ImportPath = Annotated[str, StringConstraints(pattern=IMPORT_PATH_PATTERN)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class Judge(_Strict):
    """An LLM grades the answer against a rubric with a score from 0 to 1."""

    rubric: Annotated[str, StringConstraints(min_length=1)]
    """What a good answer does, in plain words; the judge scores the answer against it."""
    model: Annotated[str, StringConstraints(min_length=1)]
    """Any LiteLLM model string (or `offline`) for the judge."""
    threshold: Annotated[float, Field(ge=0, le=1)] = 0.7
    """The lowest score that passes."""
    api_base: str | None = None
    """The provider's URL, for self-hosted or OpenAI-compatible servers."""
    api_key_env: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    """The environment variable holding the judge's API key (its name, never the key)."""
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    """Sampling temperature of the judge (provider default when unset)."""


class Check(_Strict):
    """One check of the answer: exactly one of `contains`, `regex`, `json_schema`, `python`, `judge`."""

    name: str | None = None
    """A label for reports (default: the check written out)."""
    contains: str | None = None
    """The answer must contain this text."""
    ignore_case: bool = False
    """With `contains`: compare without regard to case."""
    regex: Annotated[str, StringConstraints(min_length=1)] | None = None
    """A Python regular expression the answer must match somewhere (`(?i)` for any case)."""
    json_schema: dict[str, Any] | None = None
    """The answer must be JSON valid against this JSON Schema."""
    python: ImportPath | None = None
    """`module:function` called as `function(answer, case)`; returns true/false or `(passed, reason)`."""
    judge: Judge | None = None
    """An LLM judge with a rubric and a pass threshold."""


class Ceilings(_Strict):
    """Spending and time a case may not exceed; a run going past one is stopped and the case fails."""

    max_cost_usd: Annotated[float, Field(ge=0)] | None = None
    """USD the run may spend (LiteLLM's price table)."""
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    """Tokens (input and output) the run may use."""
    max_latency_s: Annotated[float, Field(gt=0)] | None = None
    """Seconds the run may take."""


class Case(Ceilings):
    """One input and what its answer must satisfy."""

    name: CaseName
    """Unique name of the case (letters, digits, `_`, `.`, `-`)."""
    input: Annotated[str, StringConstraints(min_length=1)]
    """The task for the supervisor."""
    vars: dict[str, Any] | None = None
    """Template variables for this case (over the defaults' and the team file's)."""
    checks: list[Check] = Field(default_factory=list)
    """Checks of the answer (after the defaults' checks). A case passes when the run is done and all pass."""


class CaseDefaults(Ceilings):
    """What every case gets unless it says otherwise."""

    vars: dict[str, Any] | None = None
    """Template variables for every case."""
    checks: list[Check] = Field(default_factory=list)
    """Checks run on every case's answer."""


class CasesFile(_Strict):
    """A `teamrun eval` cases file."""

    version: Literal[1]
    """The cases-file format version: 1."""
    description: str | None = None
    """What these cases evaluate."""
    defaults: CaseDefaults | None = None
    """Vars, checks and ceilings applied to every case."""
    cases: Annotated[list[Case], Field(min_length=1)]
    """The cases, run concurrently."""
