"""The cases-file language (``teamrun eval``) as typed pydantic models.

``schemas/cases.schema.json`` is generated from these models
(``python -m teamrun.evals.schema_gen > schemas/cases.schema.json``); a test
fails when the committed file is stale.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from teamrun.config.models import CHECK_KINDS, Check, Judge

__all__ = ["CHECK_KINDS", "Case", "CaseDefaults", "CasesFile", "Ceilings", "Check", "Judge"]

CASE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
CaseName = Annotated[str, StringConstraints(pattern=CASE_NAME_PATTERN)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


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
