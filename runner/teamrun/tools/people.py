"""People in the loop: an agent asks a person (a ``person:`` tool), or a tool waits for a person's approval.

Both are a :class:`PendingItem`: a question (with optional ``choices`` and an
``answer_schema``) or an approval of one tool call. A :class:`PersonDesk` gets
it answered:

- :class:`TerminalDesk` asks on the terminal (stderr, one line from stdin),
- :class:`UnattendedDesk` refuses (nobody can be asked and the run is not journaled),
- the engine's suspending desk (:mod:`teamrun.engine.durability.pending`) writes the item
  to the store and parks the call until ``teamrun answer`` (the run suspends when nothing
  else can go on).

Where a call comes from (its run, agent invocation, model-call number and position in
the reply: what names the item durably) reaches the tool through :data:`ask_site`, set
by the engine for each tool call.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TextIO

try:
    import termios
except ImportError:  # pragma: no cover - no terminals to configure (Windows)
    termios = None  # type: ignore[assignment]

from teamrun.config.answers import SchemaMisfit, schema_answer, shown_value
from teamrun.config.models import ToolDef
from teamrun.errors import ApprovalDenied, ToolError, UsageError
from teamrun.logs import get_logger
from teamrun.secrets import secret_parts
from teamrun.terminal import inert, isolate, visible_json
from teamrun.tools._threads import run_in_daemon_thread
from teamrun.tools.base import Tool, ToolSpec, object_schema

__all__ = [
    "Answer",
    "AnswerNotText",
    "AnswerRefused",
    "AskSite",
    "DeskApprover",
    "ItemKind",
    "PendingItem",
    "PersonDesk",
    "PersonTool",
    "TerminalDesk",
    "UnattendedDesk",
    "answer_text",
    "answered_fields",
    "ask_site",
    "asked_fields",
    "check_text",
    "masked",
    "read_answer",
    "shown_value",
]

log = get_logger(__name__)

ItemKind = Literal["question", "approval"]
SECRET_MASK = "***"
_TERMINAL_TRIES = 3
"""Answers the terminal takes for one question before it gives up (each invalid one is explained)."""


class AnswerRefused(UsageError):
    """An answer that does not fit the item (not one of its choices, not valid against its schema, ...)."""


class AnswerNotText(AnswerRefused):
    """An answer (or who gave it, or a note) that is not text: bytes that are not UTF-8, a lone surrogate."""


NOT_TEXT = "is not valid text (bytes that are not UTF-8, or a lone UTF-16 surrogate): give it as UTF-8 text"


def check_text(value: Any, what: str = "the answer") -> None:
    """Refuse ``value`` (a string, or JSON-like data: every string and key in it) unless it is valid Unicode
    text without a NUL, with :class:`AnswerNotText` (``what`` names it in the message).

    A command-line argument that is not UTF-8 reaches Python as lone surrogates (``caf\\udce9``), and so
    does a ``\\udce9`` escape in JSON: no store, journal or model provider can carry them, so an answer is
    checked before it is recorded (every way an answer enters goes through :func:`read_answer`).
    """
    if _not_text(value):
        raise AnswerNotText(f"{what} {NOT_TEXT}")
    if _has_nul(value):
        raise AnswerNotText(f"{what} {HAS_NUL}")


HAS_NUL = "contains a NUL character (\\0), which no store keeps as text: leave it out"


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\0" in value
    if isinstance(value, Mapping):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_has_nul(v) for v in value)
    return False


def _not_text(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, Mapping):
        return any(_not_text(k) or _not_text(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_not_text(v) for v in value)
    return False


@dataclass(frozen=True)
class PendingItem:
    """What a person is asked: a question by an agent, or the approval of one tool call."""

    kind: ItemKind
    question: str
    """The question (for an approval: what the tool call is, in words)."""
    tool: str
    """The person tool asking, or the tool waiting for approval."""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    """An approval's tool arguments."""
    choices: tuple[str, ...] | None = None
    answer_schema: Mapping[str, Any] | None = None
    secret: bool = False
    max_wait_s: float | None = None

    def spec(self) -> dict[str, Any]:
        """The item as JSON (what the store keeps besides its key)."""
        return {
            "tool": self.tool,
            "arguments": dict(self.arguments),
            "choices": list(self.choices or []) or None,
            "answer_schema": dict(self.answer_schema) if self.answer_schema is not None else None,
            "secret": self.secret,
            "max_wait_s": self.max_wait_s,
        }

    @classmethod
    def from_spec(cls, kind: ItemKind, question: str, spec: Mapping[str, Any]) -> PendingItem:
        choices = spec.get("choices")
        return cls(
            kind=kind,
            question=question,
            tool=str(spec.get("tool") or ""),
            arguments=dict(spec.get("arguments") or {}),
            choices=tuple(choices) if choices else None,
            answer_schema=spec.get("answer_schema"),
            secret=bool(spec.get("secret")),
            max_wait_s=spec.get("max_wait_s"),
        )


@dataclass(frozen=True)
class Answer:
    """A person's answer: the value (JSON; ``True``/``False`` for an approval), who gave it and when."""

    value: Any
    by: str
    at: float = field(default_factory=time.time)
    expired: bool = False
    """Nobody answered within ``max_wait_s``: ``value`` is ``None``."""
    withdrawn: bool = False
    """Expired because its run was cancelled while the item waited (not for want of time)."""
    note: str | None = None
    """A denial's reason, for the model."""


class PersonDesk(Protocol):
    """Gets a pending item answered."""

    async def ask(self, item: PendingItem, site: AskSite) -> Answer:
        """The answer to ``item``, asked from ``site`` (raises :class:`ToolError` when nobody can answer)."""
        ...


@dataclass(frozen=True)
class AskSite:
    """Where a tool call is made: what names its pending item in the store, and the run's hooks."""

    run_id: str
    invocation: str
    """The agent invocation's key (as the journal's)."""
    turn: int
    position: int
    agent: str
    desk: PersonDesk
    waiting: Callable[[bool], AbstractAsyncContextManager[None]]
    """``waiting(suspendable)``: the call waits for a person while it is open (that time does not count
    against ``timeout_s``); with ``suspendable``, the run suspends once all its work waits."""
    emit: Callable[..., None] = field(default=lambda kind, **data: None)
    """Emit a run event (``person_asked``, ``person_answered``)."""


ask_site: contextvars.ContextVar[AskSite | None] = contextvars.ContextVar("teamrun_ask_site", default=None)
"""The site of the tool call running in this task (set by the engine around each tool call)."""


@contextlib.asynccontextmanager
async def _not_tracked(suspendable: bool) -> AsyncIterator[None]:
    yield


def site_or_default(desk: PersonDesk, tool: str) -> AskSite:
    """The current site, or one for a call made outside a run's engine (a tool called directly)."""
    site = ask_site.get()
    return site if site is not None else AskSite("", "", 0, 0, tool, desk, _not_tracked)


# -- answers --------------------------------------------------------------------------------------
def read_answer(item: PendingItem, text: str) -> Any:
    """The answer ``text`` as the item's value; raises :class:`AnswerRefused` saying what fits."""
    if item.kind == "approval":
        raise AnswerRefused("this item is an approval: use `teamrun approve` or `teamrun deny`")
    check_text(text)
    value: Any = text
    if item.answer_schema is not None:
        value = _schema_answer(item.answer_schema, text)
    if item.choices is not None and shown_value(value) not in item.choices:
        raise AnswerRefused(f"the answer must be one of: {', '.join(item.choices)}")
    if isinstance(value, str) and not value.strip():
        raise AnswerRefused("the answer is empty")
    return value


def _schema_answer(schema: Mapping[str, Any], text: str) -> Any:
    """The answer as the schema wants it (the rule of :func:`teamrun.config.answers.schema_answer`, each reading
    checked as text: a JSON escape (``"\\udce9"``) makes a lone surrogate too)."""
    try:
        return schema_answer(schema, text, check=check_text)
    except SchemaMisfit as exc:
        raise AnswerRefused(f"the answer does not fit the question's answer_schema: {exc}") from None


def answer_text(item: PendingItem, answer: Answer) -> str:
    """What the model reads of an answer."""
    if answer.expired:
        if answer.withdrawn or item.max_wait_s is None:  # the run was cancelled while the question waited
            return "Nobody answered: the question was withdrawn (its run was cancelled). Continue without the answer."
        return f"Nobody answered within {item.max_wait_s:g} seconds. Continue without the answer."
    if item.answer_schema is not None:
        return json.dumps(answer.value, ensure_ascii=False)
    return shown_value(answer.value)


def masked(item: PendingItem, value: Any) -> Any:
    """``value`` as events, traces and listings show it: ``***`` when the item is secret."""
    return SECRET_MASK if item.secret and value is not None else value


# -- the tool -------------------------------------------------------------------------------------
class PersonTool(Tool):
    """A ``person:`` tool entry: the model writes a question; the result is the person's answer."""

    def __init__(self, name: str, definition: ToolDef) -> None:
        person = definition.person
        assert person is not None
        self.definition = person
        self.idempotent = True
        choices = f" The person picks one of: {', '.join(person.choices)}." if person.choices else ""
        description = definition.description or (
            "Ask a person a question and wait for the answer. Use it for facts only a person knows, "
            "decisions a person must take, or sign-off."
        )
        self.spec = ToolSpec(
            name,
            description + choices,
            object_schema(
                {"question": {"type": "string", "description": "The question, complete and self-contained."}},
                ["question"],
            ),
        )
        self.timeout_s = None  # a person takes the time they take; `max_wait_s` bounds it
        self.max_output_chars = definition.max_output_chars

    def item(self, question: str) -> PendingItem:
        person = self.definition
        return PendingItem(
            kind="question",
            question=question,
            tool=self.name,
            choices=tuple(person.choices) if person.choices else None,
            answer_schema=person.answer_schema,
            secret=person.secret,
            max_wait_s=person.max_wait_s,
        )

    async def run(self, arguments: dict[str, Any]) -> str:
        site = ask_site.get()
        if site is None:
            raise ToolError("nobody can be asked outside a run")
        item = self.item(str(arguments["question"]))
        return answer_text(item, await site.desk.ask(item, site))

    def secrets_in(self, result: str) -> set[str]:
        """A ``secret: true`` person's answer (and, read as JSON, each of its parts): masked in every event
        sink of the run (trace, OpenTelemetry, served events), whichever desk took it or the journal replayed."""
        person = self.definition
        if not person.secret:
            return set()
        if result == answer_text(self.item(""), Answer(None, "", expired=True)):
            return set()  # nobody answered: nothing secret was said
        return secret_parts(result)


# -- desks --------------------------------------------------------------------------------------
class UnattendedDesk:
    """Nobody can be asked: no terminal, and the run is not journaled (so it cannot suspend)."""

    async def ask(self, item: PendingItem, site: AskSite) -> Answer:
        raise ToolError(
            "nobody could be asked: teamrun is not running on a terminal and the run is not "
            "journaled. The user can run it with --detach (or --store) so it waits for "
            "`teamrun answer`."
        )


class TerminalDesk:
    """Asks on the terminal (prompt on stderr, answer from stdin), one question at a time."""

    def __init__(self, *, stdin: TextIO | None = None, stderr: TextIO | None = None) -> None:
        self._stdin = stdin
        self._stderr = stderr
        self._lock = asyncio.Lock()

    async def ask(self, item: PendingItem, site: AskSite) -> Answer:
        async with self._lock:
            site.emit("person_asked", **asked_fields("", item))
            scope = asyncio.timeout(item.max_wait_s)
            echo = _EchoOff(self._stdin or sys.stdin) if item.secret else None
            try:
                async with site.waiting(False), scope:
                    value = await run_in_daemon_thread(
                        lambda: self._ask(item, site.agent, echo), name="teamrun-person-prompt"
                    )
                answer = Answer(value, "terminal")
            except TimeoutError:
                if not scope.expired():
                    raise
                answer = Answer(None, "nobody", expired=True)
            finally:
                if echo is not None:  # the prompt thread may still be reading (a timeout, Ctrl-C): echo back on
                    echo.close()
        site.emit("person_answered", **answered_fields("", item, answer))
        log.info("person_answered", tool=item.tool, by=answer.by, expired=answer.expired)
        return answer

    def _ask(self, item: PendingItem, agent: str, echo: _EchoOff | None = None) -> Any:
        stdin = self._stdin or sys.stdin
        stderr = self._stderr or sys.stderr
        choices = f"\n  choices: {', '.join(item.choices)}" if item.choices else ""
        hidden = " (typing is not shown)" if echo is not None and echo.possible() else ""
        # the question is a model's words: no terminal control sequence reaches the terminal (terminal.inert)
        stderr.write(inert(f"\nteamrun: {isolate(agent)} asks: {item.question}{choices}{hidden}\n"))
        for _ in range(_TERMINAL_TRIES):
            if echo is not None:
                echo.turn_off()  # before the prompt: whatever is typed after it is not shown
            stderr.write("answer: ")
            stderr.flush()
            try:
                line = stdin.readline()
            except UnicodeDecodeError:  # a strict stdin meeting bytes that are not UTF-8
                stderr.write(f"teamrun: the answer {NOT_TEXT}\n")
                continue
            finally:
                if echo is not None and echo.restore():
                    stderr.write("\n")  # the Enter that ended the line was not shown either
            if not line:
                raise ToolError("nobody answered the question (end of input)")
            try:
                return read_answer(item, line.strip())
            except AnswerRefused as exc:
                stderr.write(inert(f"teamrun: {exc}\n"))
        raise ToolError(f"no valid answer after {_TERMINAL_TRIES} tries")


class _EchoOff:
    """A terminal's echo turned off while a secret answer is typed (as :func:`getpass.getpass` does), and back
    on after it, or when the question ends otherwise (its reading thread cannot be stopped). Does nothing when
    the input is not a terminal (a pipe shows nothing anyway)."""

    def __init__(self, stream: TextIO) -> None:
        self._fd: int | None = None
        self._saved: list[Any] | None = None
        self._closed = False
        self._lock = threading.Lock()
        try:
            fd = stream.fileno()
            if termios is not None and os.isatty(fd):
                self._fd = fd
        except (AttributeError, OSError, ValueError):  # a StringIO, a closed stream
            pass

    def possible(self) -> bool:
        return self._fd is not None

    def turn_off(self) -> None:
        with self._lock:
            if self._fd is None or self._saved is not None or self._closed or termios is None:
                return
            with contextlib.suppress(termios.error):
                saved = termios.tcgetattr(self._fd)
                quiet = list(saved)
                quiet[3] &= ~termios.ECHO
                termios.tcsetattr(self._fd, termios.TCSADRAIN, quiet)
                self._saved = saved

    def restore(self) -> bool:
        """Echo as it was; whether it had been turned off."""
        with self._lock:
            if self._fd is None or self._saved is None or termios is None:
                return False
            with contextlib.suppress(termios.error):
                termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)
            self._saved = None
            return True

    def close(self) -> None:
        """Echo back on for good: the question is over (a reading thread left behind turns nothing off)."""
        self.restore()
        with self._lock:
            self._closed = True


def asked_fields(item_id: str, item: PendingItem) -> dict[str, Any]:
    """The ``person_asked`` event's fields."""
    return {"item": item_id, "item_kind": item.kind, "tool": item.tool, "question": item.question}


def answered_fields(item_id: str, item: PendingItem, answer: Answer) -> dict[str, Any]:
    """The ``person_answered`` event's fields (a secret answer masked)."""
    return {
        "item": item_id,
        "item_kind": item.kind,
        "tool": item.tool,
        "by": answer.by,
        "answered_at": answer.at,
        "status": "expired" if answer.expired else "answered",
        "answer": masked(item, answer.value),
    }


class DeskApprover:
    """Tool approvals through a :class:`PersonDesk` (an approval is a pending item like a question)."""

    def __init__(self, desk: PersonDesk) -> None:
        self.desk = desk

    async def approve(self, tool: str, arguments: dict[str, Any]) -> bool:
        shown = visible_json(arguments)
        item = PendingItem(kind="approval", question=f"may {tool} run with {shown}?", tool=tool, arguments=arguments)
        answer = await self.desk.ask(item, site_or_default(self.desk, tool))
        if answer.expired:
            why = "nobody approved it in time"
            if answer.withdrawn:
                why = "its run was cancelled while it waited for approval"
            raise ApprovalDenied(f"the call to tool {tool!r} was denied: {why}")
        if answer.value is not True:  # only a JSON true approves
            note = f" They said: {answer.note}" if answer.note else ""
            raise ApprovalDenied(
                f"the user ({answer.by}) denied the call to tool {tool!r}.{note} Do not call it "
                "again with the same arguments; continue without it."
            )
        return True
