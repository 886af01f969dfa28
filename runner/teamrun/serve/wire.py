"""The request bodies the server reads (pydantic, where data crosses the boundary).

A body is read as JSON whatever its ``Content-Type`` (curl's ``-d`` sends ``application/x-www-form-urlencoded``),
as the A2A endpoint reads it: FastAPI hands a body not labelled JSON over as bytes, and :func:`json_body` parses
it before the model validates it.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from teamrun.bounds import check_value, json_kind
from teamrun.config.models import Limits
from teamrun.serve.security import LONE_SURROGATE, lone_surrogate

__all__ = [
    "BODY_NOT_JSON",
    "NOT_JSON",
    "OUT_OF_BOUNDS",
    "ApprovalAnswer",
    "ChatMessage",
    "ChatRequest",
    "RunRequest",
    "StreamOptions",
    "json_body",
    "valid_body",
]

BODY_NOT_JSON = "body_not_json"
"""The validation error type of a body not labelled JSON that is not JSON either (answered ``400 invalid_json``)."""
NOT_JSON = (
    "the request body could not be parsed as JSON (malformed, empty, or nested too deeply); "
    "send a JSON object (Content-Type: application/json)"
)
"""What a body that is not JSON is answered (``400 invalid_json``), whatever its content type."""
OUT_OF_BOUNDS = "out_of_bounds"
"""The validation error type of a body that breaks a rule of :mod:`teamrun.bounds` other than the text rule: a
number that is not finite (``NaN``, ``Infinity``, ``1e999``: Python's JSON reads them), an integer past ±2^63-1,
nesting past 64 (answered ``422 invalid_request``, naming the place)."""


def json_body(data: Any) -> Any:
    """``data`` as a model validates it: a body FastAPI left unparsed (its ``Content-Type`` was not JSON) parsed as
    JSON; a body that is not JSON is a ``body_not_json`` error naming the content type to send."""
    if not isinstance(data, bytes | bytearray):
        return data
    try:
        return json.loads(data)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested too deeply
        raise PydanticCustomError(BODY_NOT_JSON, NOT_JSON) from None


def valid_body(data: Any) -> Any:
    """:func:`json_body`, then text that is not valid Unicode refused (400 ``invalid_text``), then what breaks the
    rules a model's tool-call arguments follow (:func:`teamrun.bounds.check_value`: finite numbers, integers within
    ±2^63-1, nesting within 64) refused (422, :data:`OUT_OF_BOUNDS`), before anything runs."""
    data = json_body(data)
    if not isinstance(data, dict):  # pydantic would say "a valid dictionary or object to extract fields from"
        raise PydanticCustomError("body_not_object", "the body is {kind}, not a JSON object", {"kind": json_kind(data)})
    where = lone_surrogate(data)
    if where is not None:
        raise PydanticCustomError("lone_surrogate", "{where} " + LONE_SURROGATE, {"where": where})
    found = check_value(data, subject="the request body")
    if found is not None:
        raise PydanticCustomError(OUT_OF_BOUNDS, "{message}", {"message": found.message})
    return data


def resource_id(value: Any) -> Any:
    """A run's ``resource`` (whose long-term memory it recalls and saves) checked as the CLI's ``--resource`` is
    (:func:`teamrun.store.memory.check_resource_id`: printable text of 1 to 200 characters), ``None`` passed."""
    from teamrun.store.memory import MemoryRefused, check_resource_id

    if value is None:
        return None
    try:
        return check_resource_id(value)
    except MemoryRefused as exc:
        raise PydanticCustomError("invalid_resource", "{message}", {"message": str(exc)}) from None


def numbers_only(value: Any) -> Any:
    """An object of numbers (``budgets``) as given, unless one of them is not a JSON number: pydantic reads a
    boolean as 1 or 0 (``{"max_steps": true}`` would be one step) and a string as the number it spells
    (``"30"``, ``"1e999"``, ``"Infinity"``); a client that sends one means something else, or nothing."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, bool):
                raise PydanticCustomError(
                    "bool_not_number",
                    "{key} is {given}, a boolean, not a number: send a number",
                    {"key": key, "given": "true" if item else "false"},
                )
            if item is not None and not isinstance(item, int | float):
                kind = "a string" if isinstance(item, str) else f"a JSON {_json_kind(item)}"
                raise PydanticCustomError(
                    "not_a_number",
                    '{key} is {kind}, not a number: send a JSON number (e.g. 30, not "30")',
                    {"key": key, "kind": kind},
                )
    return value


def _json_kind(value: Any) -> str:
    return "object" if isinstance(value, dict) else "array" if isinstance(value, list) else type(value).__name__


class Wire(BaseModel):
    """A request body: JSON whatever its content type; text that is not valid Unicode is refused (400) before
    anything runs (:func:`valid_body`)."""

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        return valid_body(data)


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[dict[str, Any]] | None = None


class StreamOptions(BaseModel):
    """A chat completion's ``stream_options``: ``include_usage`` only a JSON boolean; other options ignored."""

    model_config = ConfigDict(extra="allow")
    include_usage: StrictBool | None = None


Number = StrictFloat
"""A JSON number (an integer is one too); not a boolean, not a string that spells one."""
Count = Annotated[StrictInt, Field(ge=1)]
"""A JSON whole number, 1 or more; not a boolean, not a string."""


class RunFields(Wire):
    """What a request that starts a run checks alike: ``budgets`` of JSON numbers and the run's ``resource``."""

    @field_validator("resource", mode="before", check_fields=False)
    @classmethod
    def _resource(cls, value: Any) -> Any:
        return resource_id(value)

    @field_validator("budgets", mode="before", check_fields=False)
    @classmethod
    def _budgets_are_numbers(cls, value: Any) -> Any:
        return numbers_only(value)


class ChatRequest(RunFields):
    """The parts of an OpenAI chat-completions request teamrun reads; other fields are accepted and ignored, those
    of them with a type OpenAI documents checked for it (a wrong type is a mistake the client should hear of)."""

    model_config = ConfigDict(extra="allow")
    model: str
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    stream: StrictBool = False
    """Only a JSON ``true`` or ``false`` (``1``, ``"yes"`` are refused, not read as a choice)."""
    stream_options: StreamOptions | None = None
    temperature: Number | None = None
    top_p: Number | None = None
    presence_penalty: Number | None = None
    frequency_penalty: Number | None = None
    max_tokens: Count | None = None
    max_completion_tokens: Count | None = None
    n: Count | None = None
    seed: StrictInt | None = None
    logprobs: StrictBool | None = None
    parallel_tool_calls: StrictBool | None = None
    budgets: Limits | None = None
    """teamrun's extension, as on ``POST /v1/runs``: run limits, each only lower than the team's, each a number."""
    user: StrictStr | None = None
    resource: Any = None
    """teamrun's extension: whose long-term memory the run recalls and saves (docs/memory.md); ``user`` names the
    thread, not the resource."""


class RunRequest(RunFields):
    """``POST /v1/runs``."""

    model_config = ConfigDict(extra="forbid")
    team: str
    """The team's name."""
    input: Annotated[str, Field(min_length=1)]
    """The task for the supervisor."""
    vars: dict[str, str | int | float | bool] | None = None
    """Template variables, over the team file's ``vars``."""
    budgets: Limits | None = None
    """Run limits for this run; each may only be lower than the team's ``limits``; each a number (not a boolean)."""
    thread: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    """The thread this run continues (or starts); needs a server with a store."""
    resource: Any = None
    """Whose long-term memory the run recalls and saves (a user's or an organisation's id, docs/memory.md)."""


class ApprovalAnswer(Wire):
    """``POST /v1/runs/{run}/approvals/{id}``: the fields ``/pending/{id}`` takes for an approval."""

    model_config = ConfigDict(extra="forbid")
    approve: StrictBool
    """``true`` runs the tool call, ``false`` denies it (only a JSON boolean: ``1``, ``"yes"`` are refused)."""
    note: str | None = None
    """Why (kept with the answer where a store keeps it)."""
    by: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    """Who answers, as events and listings show it (default: ``http``)."""
