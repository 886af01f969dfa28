"""What a tool is: its model-facing spec, the callable behind it, and the outcome of one call.

A :class:`Tool` only has to turn validated arguments into text. Everything a
call needs around that — parsing the model's JSON, checking it against
:attr:`ToolSpec.parameters`, asking for approval, the timeout, truncating long
output and turning failures into text the model can read — is done once, by
:func:`teamrun.tools.invoke.invoke_tool`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from teamrun.llm.types import ToolSchema

__all__ = [
    "DEFAULT_MAX_OUTPUT_CHARS",
    "DEFAULT_TIMEOUT_S",
    "PartialOutput",
    "Tool",
    "ToolOutcome",
    "ToolSource",
    "ToolSpec",
    "describe_exception",
    "object_schema",
    "timed_out",
    "truncate_output",
]

DEFAULT_TIMEOUT_S = 60.0
"""Seconds a tool call may take when the team file sets no ``timeout_s``."""
DEFAULT_MAX_OUTPUT_CHARS = 20_000
"""Characters of tool output the model sees when the team file sets no ``max_output_chars``."""


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """The JSON Schema of a tool's arguments: a closed object with these properties."""
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about a tool."""

    name: str
    """The function name the model calls."""
    description: str
    """What the tool does and when to use it; may be empty."""
    parameters: dict[str, Any]
    """JSON Schema of the arguments: an object schema (``properties``, ``required``, closed)."""

    def __post_init__(self) -> None:
        if self.parameters.get("type") != "object":
            raise ValueError(f"tool {self.name!r}: parameters must be a JSON Schema of type object")

    def as_openai(self) -> ToolSchema:
        """The spec in OpenAI function-calling format, as LiteLLM expects it."""
        function: dict[str, Any] = {"name": self.name, "parameters": self.parameters}
        if self.description:
            function["description"] = self.description
        return {"type": "function", "function": function}


class Tool(ABC):
    """A callable tool.

    Subclasses set :attr:`spec` and implement :meth:`run`. ``run`` receives
    arguments already validated against ``spec.parameters`` (defaults filled)
    and returns the text the model sees. To fail with a message of your own,
    raise :class:`teamrun.errors.ToolError`; any other exception is reported
    to the model as ``"<ExcType>: <message>"``. ``run`` must tolerate being
    cancelled (that is how :attr:`timeout_s` and Ctrl-C stop it).
    """

    spec: ToolSpec
    """What the model is told about this tool."""
    require_approval: bool = False
    """Ask the approver before every call."""
    timeout_s: float | None = None
    """Seconds one call may take; ``None`` means no limit."""
    max_output_chars: int | None = None
    """Longer results are truncated with a marker; ``None`` means no limit."""

    @property
    def name(self) -> str:
        """The tool's name (``spec.name``)."""
        return self.spec.name

    @abstractmethod
    async def run(self, arguments: dict[str, Any]) -> str:
        """Run the tool on validated arguments and return the result text."""

    def secrets_in(self, result: str) -> set[str]:
        """Values of a successful ``result`` of this tool (run now, or replayed from the journal) that the run
        masks wherever it writes them down, from then on; the model still reads them. None by default."""
        return set()


@dataclass(frozen=True)
class ToolOutcome:
    """The result of one tool call, successful or not. Never an exception."""

    ok: bool
    """Whether the tool ran and succeeded."""
    content: str
    """The text the model sees (``"Error: ..."`` when not ok)."""
    error: str | None = None
    """Why it failed (the content without the ``Error:`` prefix); ``None`` when ok."""


class PartialOutput(str):
    """The start of a tool's output, cut while it was read: ``omitted`` more characters followed.

    A tool returns one when it stops keeping output past ``max_output_chars``
    (a command printing gigabytes); :func:`truncate_output` counts the omitted
    characters as if the whole text had been kept.
    """

    omitted: int

    def __new__(cls, text: str, omitted: int) -> PartialOutput:
        self = super().__new__(cls, text)
        self.omitted = omitted
        return self


def truncate_output(text: str, max_chars: int | None) -> str:
    """Cut ``text`` to ``max_chars`` characters, ending with a marker saying how much was cut."""
    omitted = text.omitted if isinstance(text, PartialOutput) else 0
    if omitted:  # the rest is gone already: always say so
        keep = len(text) if max_chars is None else min(max_chars, len(text))
    elif max_chars is None or len(text) <= max_chars:
        return str(text)
    else:
        keep = max_chars
    cut = len(text) + omitted - keep
    return f"{text[:keep]}\n[... truncated {cut} characters ...]"


def timed_out(tool: str, timeout_s: float) -> str:
    """Why a call that ran past its ``timeout_s`` failed, as the model reads it."""
    return f"tool {tool!r} timed out after {timeout_s:g} seconds"


def describe_exception(exc: BaseException) -> str:
    """``"<ExcType>: <message>"``, the way an exception from user code is shown to the model."""
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


class ToolSource(ABC):
    """A tool entry that offers several functions, known only once it is started (an MCP server).

    The engine asks :meth:`tools` when an agent that declares the entry first needs its tool list
    (never before: a source no running agent uses is never started), shares one started source
    between the agents of a run, and calls :meth:`aclose` when the run ends, fails or is cancelled.
    """

    entry: str
    """The tool entry's name in the team file (``tools: {<entry>: ...}``)."""

    @abstractmethod
    async def tools(self) -> list[Tool]:
        """The functions this source offers (after ``allow``/``deny``), starting it on first use."""

    @abstractmethod
    async def aclose(self) -> None:
        """Stop whatever was started; safe to call more than once, and when never started."""

    def fresh(self) -> ToolSource:
        """An unstarted copy for one run, so concurrent runs never share (or close) each other's
        started source. A source that keeps no per-run state may return itself (the default)."""
        return self
