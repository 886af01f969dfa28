"""Record a run's model exchanges to a cassette, and replay them with no network.

A cassette is a JSON-lines file: a header, then one line per model call, written
as the call returns. Each exchange is keyed by the calling agent's path (from
:data:`~teamrun.llm.types.current_scope`) and a fingerprint of the request —
a hash of the messages, tools, response format and model, with what varies
from run to run normalised away: tool-call ids renumbered by first appearance,
today's date and the random tokens fencing referenced results masked.
Parallel workers arrive in any order, so the global order is never the key;
several invocations of one worker with different tasks each find their own
reply, and identical requests are answered in recorded order.

Cassettes hold replies (text, tool calls, usage, cost) and hashes of requests,
never the requests themselves, API keys or headers; secret values are masked.
Because a masked reply is what a replayed run sends back in its next request,
requests are fingerprinted with secrets masked the same way, on both sides:
record and replay then hash the same text whether or not the secret is set.

    team = load_team("team.yaml", chat_model=RecordingModel(ModelRouter(), "run.cassette.jsonl"))
    team = load_team("team.yaml", chat_model=ReplayModel("run.cassette.jsonl"))
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from teamrun.errors import ModelError, UsageError
from teamrun.llm.types import (
    ChatModel,
    Message,
    ModelReply,
    ModelSettings,
    ToolCall,
    ToolSchema,
    Unwell,
    Usage,
    current_scope,
)
from teamrun.secrets import mask_request

__all__ = [
    "CASSETTE_FORMAT",
    "CASSETTE_VERSION",
    "Exchange",
    "RecordingModel",
    "ReplayMismatch",
    "ReplayMode",
    "ReplayModel",
    "fingerprint",
    "read_cassette",
    "reply_from_dict",
    "reply_to_dict",
]

CASSETTE_FORMAT = "teamrun-cassette"
CASSETTE_VERSION = 1
ReplayMode = Literal["strict", "lenient"]


class ReplayMismatch(ModelError):
    """A replayed request has no recorded reply (strict mode)."""


# -- fingerprints -----------------------------------------------------------------------
def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def _digest(value: Any) -> str:
    return hashlib.sha256(_canonical(value).encode()).hexdigest()


def _normal_messages(messages: Sequence[Message], today: str) -> list[dict[str, Any]]:
    """Messages with tool-call ids renumbered by first appearance, ``None`` fields dropped, today masked."""
    ids: dict[str, str] = {}

    def renumber(value: Any) -> str:
        return ids.setdefault(str(value), f"call#{len(ids) + 1}")

    shown: list[dict[str, Any]] = []
    for message in messages:
        item = {k: v for k, v in message.items() if v is not None}
        if item.get("tool_calls"):
            item["tool_calls"] = [{**call, "id": renumber(call.get("id"))} for call in item["tool_calls"]]
        if "tool_call_id" in item:
            item["tool_call_id"] = renumber(item["tool_call_id"])
        shown.append(mask_request(item, today=today))
    return shown


@dataclass(frozen=True)
class _Request:
    fingerprint: str
    messages: tuple[tuple[str, str], ...]
    """``(role, digest)`` of each normalised message: enough to say which one changed."""
    tools: str
    response_format: str | None
    model: str

    def summary(self) -> dict[str, Any]:
        return {
            "messages": [{"role": r, "sha": d} for r, d in self.messages],
            "tools": self.tools,
            "response_format": self.response_format,
            "model": self.model,
        }


def _request(
    messages: Sequence[Message],
    settings: ModelSettings,
    tools: Sequence[ToolSchema],
    response_format: Mapping[str, Any] | None,
    today: str | None = None,
    mask_secrets: Callable[[Any], Any] | None = None,
) -> _Request:
    day = today or _dt.date.today().isoformat()
    normal = _normal_messages(messages, day)
    if mask_secrets is not None:
        normal = mask_secrets(normal)
    body = {
        "model": settings.model,
        "messages": normal,
        "tools": list(tools),
        "response_format": dict(response_format) if response_format else None,
    }
    return _Request(
        fingerprint=_digest(body),
        messages=tuple((str(m.get("role", "")), _digest(m)[:16]) for m in normal),
        tools=_digest(list(tools))[:16],
        response_format=_digest(dict(response_format))[:16] if response_format else None,
        model=settings.model,
    )


def fingerprint(
    messages: Sequence[Message],
    *,
    settings: ModelSettings,
    tools: Sequence[ToolSchema] = (),
    response_format: Mapping[str, Any] | None = None,
) -> str:
    """The content fingerprint of a model request (what record and replay match on)."""
    return _request(messages, settings, tools, response_format).fingerprint


# -- replies as data --------------------------------------------------------------------
def reply_to_dict(reply: ModelReply) -> dict[str, Any]:
    """The reply as JSON data (a journal entry, a cassette line); ``answered_by`` and ``fallback`` only when a
    fallback list answered it, ``unwell`` only when a model before the one that answered failed or was skipped for
    its health, ``usage_known`` only when false, cached tokens only when some."""
    usage = {k: v for k, v in reply.usage.as_dict().items() if k != "total_tokens"}
    data: dict[str, Any] = {
        "text": reply.text,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls],
        "usage": usage,
        "cost_usd": reply.cost_usd,
        "model": reply.model,
        "finish_reason": reply.finish_reason,
    }
    if not reply.usage_known:
        data["usage_known"] = False
    if reply.answered_by:
        data["answered_by"] = reply.answered_by
    if reply.fallback:
        data["fallback"] = reply.fallback
    if reply.unwell:
        data["unwell"] = [
            {"model": u.model, "api_base": u.api_base, "at": u.at, "open_s": u.open_s} for u in reply.unwell
        ]
    return data


def reply_from_dict(data: Mapping[str, Any]) -> ModelReply:
    usage = data.get("usage") or {}
    return ModelReply(
        text=data.get("text"),
        tool_calls=tuple(
            ToolCall(str(c["id"]), str(c["name"]), str(c.get("arguments", ""))) for c in data.get("tool_calls") or ()
        ),
        usage=Usage(
            int(usage.get("input_tokens", 0)),
            int(usage.get("output_tokens", 0)),
            int(usage.get("requests", 1)),
            int(usage.get("cached_tokens", 0)),
            int(usage.get("cache_write_tokens", 0)),
        ),
        cost_usd=float(data.get("cost_usd", 0.0)),
        model=str(data.get("model", "")),
        finish_reason=data.get("finish_reason"),
        usage_known=data.get("usage_known") is not False,
        answered_by=str(data.get("answered_by") or ""),
        fallback=data.get("fallback") if isinstance(data.get("fallback"), str) else None,
        unwell=_unwell(data.get("unwell")),
    )


def _unwell(data: object) -> tuple[Unwell, ...]:
    """A reply's ``unwell`` models as data; one that is not as written is left out (nothing to hold open)."""
    if not isinstance(data, list):
        return ()
    found = []
    for item in data:
        if not isinstance(item, Mapping):
            continue
        model, api_base, at, open_s = (item.get(k) for k in ("model", "api_base", "at", "open_s"))
        numbers = all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in (at, open_s))
        if isinstance(model, str) and (api_base is None or isinstance(api_base, str)) and numbers:
            found.append(Unwell(model, api_base, float(cast(float, at)), float(cast(float, open_s))))
    return tuple(found)


@dataclass
class Exchange:
    """One recorded model call."""

    agent_path: tuple[str, ...]
    turn: int
    fingerprint: str
    request: dict[str, Any]
    reply: ModelReply
    line: int = 0
    used: bool = False

    @property
    def agent(self) -> str:
        return "/".join(self.agent_path) or "(no agent)"


def _default_redactor() -> Any:
    from teamrun.secrets import Redactor

    return Redactor()


def _scope() -> tuple[tuple[str, ...], int]:
    scope = current_scope.get()
    return (scope.agent_path, scope.turn) if scope is not None else ((), 0)


# -- recording --------------------------------------------------------------------------
class RecordingModel:
    """Wraps a :class:`ChatModel` and appends every exchange to ``path`` as it happens.

    The file is started afresh. Lines are flushed one by one, so a killed run
    still leaves the exchanges it finished. ``redactor`` (anything with a
    ``value(obj)`` method, e.g. :class:`teamrun.secrets.Redactor`; by
    default one built from the environment) masks secrets in replies, and in
    requests before they are fingerprinted.
    """

    def __init__(self, inner: ChatModel, path: str | Path, *, redactor: Any = None) -> None:
        self.inner = inner
        self.path = Path(path)
        self.redactor = redactor if redactor is not None else _default_redactor()
        self.lock = threading.Lock()
        """Held while a line is appended (long-term memory appends its embedding lines under it too)."""
        header = {
            "format": CASSETTE_FORMAT,
            "v": CASSETTE_VERSION,
            "recorded_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        }
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(_canonical(header) + "\n", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write the cassette {self.path}: {exc.strerror}") from None

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        request = _request(messages, settings, tools, response_format, mask_secrets=self.redactor.value)
        agent_path, turn = _scope()
        reply = await self.inner.complete(messages, settings=settings, tools=tools, response_format=response_format)
        entry = {
            "agent_path": list(agent_path),
            "turn": turn,
            "fingerprint": request.fingerprint,
            "request": request.summary(),
            "reply": self.redactor.value(reply_to_dict(reply)),
        }
        line = json.dumps(entry, ensure_ascii=False, default=str) + "\n"
        with self.lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
        return reply


# -- reading ----------------------------------------------------------------------------
def read_cassette(path: str | Path) -> list[Exchange]:
    """The exchanges of a cassette; a cut last line (killed recording) is skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise UsageError(f"cassette {path} does not exist; record it first with --record {path}") from None
    except OSError as exc:
        raise UsageError(f"cannot read the cassette {path}: {exc.strerror}") from None
    exchanges: list[Exchange] = []
    header_seen = False
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                break  # the recording was cut off mid-line
            raise UsageError(f"{path}:{number}: not a cassette line (broken JSON)") from None
        if not isinstance(data, dict):
            raise UsageError(f"{path}:{number}: not a cassette line")
        if not header_seen:
            if data.get("format") != CASSETTE_FORMAT:
                break
            if int(data.get("v", 0)) > CASSETTE_VERSION:
                raise UsageError(
                    f"{path}: cassette format v{data.get('v')} is newer than this teamrun reads "
                    f"(v{CASSETTE_VERSION}); upgrade teamrun or re-record"
                )
            header_seen = True
            continue
        if "kind" in data:  # not a model exchange (long-term memory's embedding lines: engine/memory/cassette.py)
            continue
        try:
            exchanges.append(
                Exchange(
                    tuple(data["agent_path"]),
                    int(data["turn"]),
                    str(data["fingerprint"]),
                    dict(data.get("request") or {}),
                    reply_from_dict(data["reply"]),
                    number,
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"{path}:{number}: not a cassette exchange ({exc})") from None
    if not header_seen:
        raise UsageError(f"{path} is not a teamrun cassette (its first line is not a cassette header)")
    return exchanges


# -- replaying --------------------------------------------------------------------------
class ReplayModel:
    """A :class:`ChatModel` answering from a cassette, with no network.

    ``strict`` (default): a request with no recorded match raises
    :class:`ReplayMismatch` naming the agent path and turn, and every later call
    fails too (the run stops at the first difference). ``lenient``: fall back to
    the next unused reply recorded for the same agent path and turn.

    Requests are fingerprinted with secrets masked, as when recording;
    ``redactor`` is built from the environment by default.
    """

    def __init__(self, path: str | Path, *, mode: ReplayMode = "strict", redactor: Any = None) -> None:
        if mode not in ("strict", "lenient"):
            raise UsageError(f"replay mode must be 'strict' or 'lenient', not {mode!r}")
        self.path = Path(path)
        self.mode: ReplayMode = mode
        self.redactor = redactor if redactor is not None else _default_redactor()
        self.exchanges = read_cassette(path)
        self._by_key: dict[tuple[tuple[str, ...], str], list[Exchange]] = {}
        for exchange in self.exchanges:
            self._by_key.setdefault((exchange.agent_path, exchange.fingerprint), []).append(exchange)
        self.mismatch: str | None = None
        """The first strict miss; once set, every call fails with it."""
        self.fallbacks: list[str] = []
        """Lenient mode: the requests answered by position rather than by fingerprint."""

    def unused(self) -> list[Exchange]:
        """Recorded exchanges no request has used (yet)."""
        return [e for e in self.exchanges if not e.used]

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        agent_path, turn = _scope()
        if self.mismatch is not None:
            raise ReplayMismatch(f"replay stopped at an earlier request with no recorded reply: {self.mismatch}")
        request = _request(messages, settings, tools, response_format, mask_secrets=self.redactor.value)
        for exchange in self._by_key.get((agent_path, request.fingerprint), ()):
            if not exchange.used:
                exchange.used = True
                return exchange.reply
        if self.mode == "lenient":
            for exchange in self.exchanges:
                if not exchange.used and exchange.agent_path == agent_path and exchange.turn == turn:
                    exchange.used = True
                    self.fallbacks.append(f"{exchange.agent} turn {turn}")
                    return exchange.reply
        message = self._miss(agent_path, turn, request)
        if self.mode == "strict":
            self.mismatch = message
        raise ReplayMismatch(message)

    def _miss(self, agent_path: tuple[str, ...], turn: int, request: _Request) -> str:
        agent = "/".join(agent_path) or "(no agent)"
        how = f"re-record it with `teamrun execute TEAM_FILE --record {self.path}`" + (
            " or replay with --replay-mode lenient" if self.mode == "strict" else ""
        )
        return (
            f"replay of {self.path}: no recorded model reply matches the request of agent {agent} "
            f"(turn {turn}){self._why(agent_path, turn, request)}. The team file, the input or a tool "
            f"result changed since the cassette was recorded; {how}"
        )

    def _why(self, agent_path: tuple[str, ...], turn: int, request: _Request) -> str:
        same_agent = [e for e in self.exchanges if e.agent_path == agent_path]
        if not same_agent:
            agents = sorted({e.agent for e in self.exchanges})
            return f": the cassette has no exchange for this agent (it has: {', '.join(agents) or 'none'})"
        same_turn = [e for e in same_agent if e.turn == turn]
        if not same_turn:
            return f": the cassette has {len(same_agent)} exchange(s) for this agent, none at turn {turn}"
        if all(e.fingerprint == request.fingerprint for e in same_turn):
            return f": all {len(same_turn)} recorded replies for it were already used"
        return ": " + _difference(same_turn[0].request, request)


def _difference(recorded: Mapping[str, Any], request: _Request) -> str:
    """Which part of the request differs from a recorded one at the same place."""
    if recorded.get("model") not in (None, request.model):
        return f"the model differs (recorded {recorded.get('model')}, now {request.model})"
    old = [(str(m.get("role")), str(m.get("sha"))) for m in recorded.get("messages") or ()]
    for index, (then, now) in enumerate(zip(old, request.messages, strict=False)):
        if then != now:
            return f"message {index} ({now[0]}) differs from the recording"
    if len(old) != len(request.messages):
        return f"the request has {len(request.messages)} messages, the recording {len(old)}"
    if recorded.get("tools") != request.tools:
        return "the tools offered differ from the recording"
    if recorded.get("response_format") != request.response_format:
        return "the response format differs from the recording"
    return "the request differs from the recording"
