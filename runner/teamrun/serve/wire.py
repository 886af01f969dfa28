"""The request bodies the server reads (pydantic, where data crosses the boundary)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from teamrun.config.models import Limits
from teamrun.serve.security import LONE_SURROGATE, lone_surrogate

__all__ = ["ApprovalAnswer", "ChatMessage", "ChatRequest", "RunRequest"]


class Wire(BaseModel):
    """A request body: text that is not valid Unicode is refused (400) before anything runs."""

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        where = lone_surrogate(data)
        if where is not None:
            raise PydanticCustomError("lone_surrogate", "{where} " + LONE_SURROGATE, {"where": where})
        return data


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(Wire):
    """The parts of an OpenAI chat-completions request teamrun reads; other fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow")
    model: str
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    user: str | None = None


class RunRequest(Wire):
    """``POST /v1/runs``."""

    model_config = ConfigDict(extra="forbid")
    team: str
    """The team's name."""
    input: Annotated[str, Field(min_length=1)]
    """The task for the supervisor."""
    vars: dict[str, str | int | float | bool] | None = None
    """Template variables, over the team file's ``vars``."""
    budgets: Limits | None = None
    """Run limits for this run; each may only be lower than the team's ``limits``."""
    thread: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    """The thread this run continues (or starts); needs a server with a store."""


class ApprovalAnswer(Wire):
    """``POST /v1/runs/{run}/approvals/{id}``."""

    model_config = ConfigDict(extra="forbid")
    approve: bool
    """``true`` runs the tool call, ``false`` denies it."""
