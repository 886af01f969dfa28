"""The A2A routes: each served team's card and JSON-RPC endpoint, speaking through a2a-sdk's dispatcher.

``GET /a2a/<team>/.well-known/agent-card.json`` answers the card (no token
needed: it says which token to send); ``POST /a2a/<team>`` is the team's
JSON-RPC endpoint (A2A v1.0 methods, and v0.3's through the SDK's compat
layer), behind the server's bearer tokens. Every error under ``/a2a/`` is a
JSON-RPC error object, also those the SDK does not see: a missing token
(401), an unknown team (404), a method other than POST (405), a body that is
not JSON or nests too deep (parse error), text that is not Unicode.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from teamrun.bounds import json_kind
from teamrun.logs import get_logger
from teamrun.secrets import Redactor
from teamrun.serve.a2a.card import A2A_PREFIX, CARD_PATH, agent_card
from teamrun.serve.security import LONE_SURROGATE, lone_surrogate, printable, token_matches
from teamrun.serve.state import ServeState

__all__ = ["A2AAgents", "a2a_agents", "router", "rpc_error"]

_log = get_logger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects a request may hold (the SDK's protobuf parser stops at 100)."""


def rpc_error(
    code: int,
    message: str,
    *,
    id: Any = None,
    status: int = 200,
    reason: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """A JSON-RPC error response: ``{"jsonrpc": "2.0", "id": ..., "error": {"code", "message", "data"?}}``."""
    error: dict[str, Any] = {"code": code, "message": printable(message)}
    if reason is not None:
        error["data"] = {"reason": reason}
    shown_id = id if isinstance(id, str | int) and not isinstance(id, bool) else None
    if isinstance(shown_id, str) and printable(shown_id) != shown_id:  # a lone surrogate: not encodable, not echoed
        shown_id = None
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": shown_id, "error": error}
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


class _QuietClientErrors(logging.Filter):
    """The SDK logs a client's malformed request with its traceback (``logger.exception``): a request is not a
    server fault. Drop those lines; keep the SDK's real errors, without a traceback."""

    _CLIENT = ("Failed to validate", "Failed to parse", "Request Error", "Version mismatch", "Validation failure")

    def filter(self, record: logging.LogRecord) -> bool:
        raised = record.exc_info[1] if record.exc_info else None
        if isinstance(raised, ValueError) and str(raised).startswith(_OUT_OF_RANGE):
            return False  # a client's number too large for protobuf (answered -32602 INVALID_NUMBER)
        record.exc_info = None
        record.exc_text = None
        message = str(record.msg)
        if message.startswith(self._CLIENT) and "Code=-32603" not in record.getMessage():
            return False
        return record.levelno >= logging.ERROR


_QUIET = _QuietClientErrors()


def _quiet_sdk_loggers() -> None:
    for name in list(logging.root.manager.loggerDict):
        if name == "a2a" or name.startswith("a2a."):
            logger = logging.getLogger(name)
            if _QUIET not in logger.filters:
                logger.addFilter(_QUIET)


_OUT_OF_RANGE = "Value out of range"
"""How protobuf's error for an integer it cannot hold begins."""
_LONG_NUMBER = re.compile(r"\d{17,}")
"""More digits than a number within ±2^53 has: not echoed back."""


def _params_unfit(response: Response, body: Any) -> Response:
    """The SDK's v0.3 layer answers a well-formed call whose params do not fit its method ``-32600`` with a
    pydantic dump as ``data``; say ``-32602`` (invalid params), in one line, as v1.0 calls are answered."""
    if not isinstance(response, JSONResponse) or not isinstance(body, dict):
        return response
    method, request_id = body.get("method"), body.get("id")
    if body.get("jsonrpc") != "2.0" or not isinstance(method, str) or not isinstance(request_id, str | int):
        return response
    answer = json.loads(bytes(response.body))
    error = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(error, dict) and error.get("code") == -32603 and str(error.get("message")).startswith(_OUT_OF_RANGE):
        # a whole number as text ("999…") the v0.3 layer read as an int and protobuf could not hold: not a fault of
        # the server's, and its digits are not echoed
        return rpc_error(
            INVALID_PARAMS,
            f"params do not fit {printable(method)[:100]}: a whole number is out of range (within ±2^53)",
            id=request_id,
            reason="INVALID_NUMBER",
        )
    if not isinstance(error, dict) or error.get("code") != INVALID_REQUEST or not isinstance(error.get("data"), str):
        return response
    dump = error["data"]
    if "validation error" not in dump:
        return response
    said = "; ".join(_problems(dump))[:500] or "they do not validate"
    return rpc_error(INVALID_PARAMS, f"params do not fit {printable(method)[:100]}: {said}", id=request_id)


def _problems(dump: str) -> list[str]:
    """A pydantic dump's problems, each ``field: what is wrong`` — without the input it echoes (``[type=...,
    input_value=..., input_type=...]``) or the link to pydantic's docs."""
    problems: list[str] = []
    field = ""
    for line in dump.splitlines()[1:]:  # the first: "N validation errors for X"
        if not line.strip() or "errors.pydantic.dev" in line:
            continue
        if not line.startswith(" "):  # a field's path
            field = line.strip()
            continue
        said = line.strip().split(" [type=", 1)[0]
        problems.append(f"{field}: {said}" if field else said)
    return problems


def _masked(response: Response, redactor: Redactor) -> Response:
    """A JSON answer of the SDK's with every string masked (task ids, context ids, answers echoed in errors);
    a stream's events likewise, one by one."""
    if not isinstance(response, JSONResponse):
        events = getattr(response, "body_iterator", None)
        if events is not None and response.media_type == "text/event-stream":
            response.body_iterator = _masked_events(events, redactor)  # type: ignore[attr-defined]
        return response
    body = json.loads(bytes(response.body))
    shown = _tidy(redactor.value(body))
    headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
    return JSONResponse(shown, status_code=response.status_code, headers=headers)


async def _masked_events(events: AsyncIterator[Any], redactor: Redactor) -> AsyncIterator[Any]:
    """The SDK's SSE events (``{"data": <JSON text>, "event"?: ...}``) with every string of their data masked."""
    async for event in events:
        if isinstance(event, dict) and isinstance(event.get("data"), str):
            data = json.loads(event["data"])
            event = {**event, "data": json.dumps(_tidy(redactor.value(data)), ensure_ascii=False)}
        yield event


def _tidy(value: Any) -> Any:
    """What the SDK's protobuf round trip bends, put back: usage counts are whole numbers (a protobuf ``Struct``
    holds doubles: ``3.0``); an error's ``parseError`` echoes no number of more than 16 digits; and a v0.3 status
    update ending ``input-required`` or ``auth-required`` is ``final: true`` (the interaction is over until the
    caller answers; the SDK's v0.3 layer says ``false``)."""
    if isinstance(value, list):
        return [_tidy(item) for item in value]
    if not isinstance(value, dict):
        return value
    shown = {key: _tidy(item) for key, item in value.items()}
    usage = shown.get("usage")
    if isinstance(usage, dict) and "run_id" in shown:  # metadata.teamrun of a task
        shown["usage"] = {
            key: int(item) if isinstance(item, float) and item.is_integer() else item for key, item in usage.items()
        }
    parse_error = shown.get("parseError")
    if isinstance(parse_error, str):  # v1.0's error metadata echoes what it could not parse: no long numbers
        shown["parseError"] = _LONG_NUMBER.sub(lambda m: f"<{len(m.group())} digits>", parse_error)[:500]
    status = shown.get("status")
    if (
        shown.get("kind") == "status-update"
        and isinstance(status, dict)
        and status.get("state") in ("input-required", "auth-required")
    ):
        shown["final"] = True
    return shown


MAX_WHOLE = 2**53
"""Largest whole number a request may hold: A2A's protobuf values carry every number as a double."""


def _unfit_number(value: Any, path: str = "") -> str | None:
    """Where ``value`` (parsed JSON) holds NaN, an infinity (Python's JSON reads them) or a whole number past
    ±2^53 (``12345678901234567890`` or ``1e20``), as a dotted path; else ``None``."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, bool):
            continue
        if isinstance(item, float) and (not math.isfinite(item) or abs(item) > MAX_WHOLE):
            return where or "(the value)"  # a float past 2^53 is a whole number (1e20) a double does not hold exactly
        if isinstance(item, int) and abs(item) > MAX_WHOLE:
            return where or "(the value)"
        if isinstance(item, dict):
            stack.extend(
                (child, f"{where}.{printable(str(key))}" if where else printable(str(key)))
                for key, child in item.items()
            )
        elif isinstance(item, list):
            stack.extend((child, f"{where}.{index}" if where else str(index)) for index, child in enumerate(item))
    return None


_TYPED_PARAMS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("configuration", "blocking"), "boolean"),
    (("configuration", "historyLength"), "integer"),
    (("historyLength",), "integer"),
    (("pageSize",), "integer"),
)
"""Params whose type the SDK's v0.3 layer (pydantic, lax) would bend: ``"blocking": 1`` or ``"no"`` read as a
choice, ``"historyLength": true`` as 1. v1.0's protobuf parser refuses them; both are refused here alike."""


def _mistyped(body: Any) -> str | None:
    """What is wrong with a param of :data:`_TYPED_PARAMS` that is not a JSON boolean (or whole number), else
    ``None`` (absent or ``null``: the method's default)."""
    params = body.get("params") if isinstance(body, dict) else None
    for path, kind in _TYPED_PARAMS:
        value: Any = params
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            continue
        method = printable(str(body.get("method")))[:100]
        where = f"params do not fit {method}: params.{'.'.join(path)}"
        if kind == "boolean" and not isinstance(value, bool):
            return f"{where} is {json_kind(value)}, not a boolean; send true or false"
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        if kind == "integer" and (isinstance(value, bool) or not whole):
            said = f"{value:g}" if isinstance(value, float) else json_kind(value)  # never a string's 300 digits
            return f"{where} is {said}, not a whole number; send a number such as 10"
    return None


def _unknown_state(body: Any, version: str | None, states: Mapping[str, int]) -> Any:
    """A v1.0 ``ListTasks`` call's ``status`` that names no task state (``states``: name → number), else
    ``None``. The SDK's parser ignores what it does not know, so ``"BOGUS"`` would filter nothing: every task."""
    if not isinstance(body, dict) or body.get("method") != "ListTasks" or not (version or "").strip().startswith("1"):
        return None  # another method; or the SDK answers the version first (-32009)
    params = body.get("params")
    if not isinstance(params, dict) or params.get("status") is None:
        return None
    value = params["status"]
    if isinstance(value, bool) or not isinstance(value, str | int):
        return value
    known = value in states if isinstance(value, str) else value in states.values()
    return None if known else value


def _too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


@dataclass(frozen=True)
class A2AAgents:
    """Every served team's A2A agent: its JSON-RPC dispatcher (a2a-sdk's, over a :class:`TeamAgent`), built once
    by :func:`a2a_agents`; the routes read it from ``app.state.a2a``."""

    state: ServeState
    dispatchers: Mapping[str, Any]
    """``JsonRpcDispatcher`` per team name."""
    task_states: Mapping[str, int]
    """A2A's task states, name → number."""

    @property
    def teams(self) -> str:
        return ", ".join(sorted(self.state.served))

    def unknown(self, team: str) -> Response:
        return rpc_error(
            INVALID_REQUEST,
            f"no A2A agent '{self.state.redactor.text(team)}' here; agents: {self.teams} (each at /a2a/<team>)",
            status=404,
            reason="AGENT_NOT_FOUND",
        )


def a2a_agents(state: ServeState) -> A2AAgents:
    """The A2A agents of every team ``state`` serves."""
    from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
    from a2a.types import TaskState

    from teamrun.serve.a2a.handler import TeamAgent

    dispatchers = {
        name: JsonRpcDispatcher(TeamAgent(entry, state.registry, state.answers), enable_v0_3_compat=True)
        for name, entry in state.served.items()
    }
    _quiet_sdk_loggers()
    return A2AAgents(state, dispatchers, {name: int(number) for name, number in TaskState.items()})


def _agents(request: Request) -> A2AAgents:
    agents: A2AAgents = request.app.state.a2a
    return agents


Agents = Annotated[A2AAgents, Depends(_agents)]
router = APIRouter()
"""``/a2a/...``: each team's card (public) and JSON-RPC endpoint (behind the server's tokens, checked here)."""
_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


@router.get("/a2a" + CARD_PATH)
async def card_without_team(request: Request, agents: Agents) -> Response:
    # What a client resolving ".well-known/agent-card.json" against "http://H/a2a/<team>" asks for (standard
    # URL resolution drops the last segment of a base URL without its trailing slash: the JavaScript SDK's
    # createFromUrl). There is no card here; the answer names the cards that are, and the base URL to give.
    base = str(request.base_url).rstrip("/")
    cards = ", ".join(f"{base}{A2A_PREFIX}{team}{CARD_PATH}" for team in sorted(agents.state.served))
    return rpc_error(
        INVALID_REQUEST,
        f"no agent card at {A2A_PREFIX.rstrip('/')}{CARD_PATH}: each agent's card is at /a2a/<team>{CARD_PATH} "
        f"({cards}). Give a client an agent's base URL with its trailing slash ({base}/a2a/<team>/): "
        "without it, .well-known/agent-card.json resolves beside the team's name, not under it",
        status=404,
        reason="AGENT_CARD_NOT_FOUND",
    )


@router.get("/a2a/{team}" + CARD_PATH)
async def card(team: str, request: Request, agents: Agents) -> Response:
    from a2a.server.request_handlers.response_helpers import agent_card_to_dict

    entry = agents.state.served.get(team)
    if entry is None:
        return agents.unknown(team)
    auth = bool(agents.state.settings.tokens)
    shown = agent_card_to_dict(agent_card(entry.team, str(request.base_url), auth=auth))
    return JSONResponse(agents.state.redactor.value(shown), headers={"Cache-Control": "no-cache"})


@router.api_route("/a2a/{team}", methods=_METHODS)
@router.api_route("/a2a/{team}/", methods=_METHODS)  # the base URL
async def rpc(team: str, request: Request, agents: Agents) -> Response:
    refused = _not_for_dispatch(team, request, agents)
    if refused is not None:
        return refused
    raw = await request.body()
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, or nested past Python's recursion limit
        return rpc_error(PARSE_ERROR, f"the request body is not JSON: {str(exc)[:200]}", reason="PARSE_ERROR")
    request_id = agents.state.redactor.value(body.get("id")) if isinstance(body, dict) else None
    unfit = _unfit_body(body, request_id, request.headers.get("a2a-version"), agents, team)
    if unfit is not None:
        return unfit
    return await _dispatch(team, request, raw, body, request_id, agents)


def _not_for_dispatch(team: str, request: Request, agents: Agents) -> Response | None:
    """The answer to a request the dispatcher does not see: no token, no such agent, not a POST."""
    tokens = agents.state.settings.tokens
    if tokens and not token_matches(request.headers.get("authorization"), tokens):
        return rpc_error(
            INVALID_REQUEST,
            "missing or invalid bearer token (send `Authorization: Bearer <token>`; the agent card's "
            "security scheme says so)",
            status=401,
            reason="UNAUTHENTICATED",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if team not in agents.dispatchers:
        return agents.unknown(team)
    if request.method != "POST":
        return rpc_error(
            INVALID_REQUEST,
            f"method {request.method} is not allowed on {request.url.path}: send JSON-RPC requests with POST",
            status=405,
            reason="METHOD_NOT_ALLOWED",
            headers={"Allow": "POST"},
        )
    return None


def _unfit_body(body: Any, request_id: Any, version: str | None, agents: A2AAgents, team: str) -> Response | None:
    """The answer to a JSON body the SDK would mishandle: too deep, text that is not Unicode, a number the protocol
    cannot carry, a task state that does not exist."""
    redactor = agents.state.redactor
    if _too_deep(body):
        return rpc_error(INVALID_REQUEST, f"the request nests deeper than {MAX_JSON_DEPTH} levels", id=request_id)
    where = lone_surrogate(body)
    if where is not None:
        return rpc_error(
            INVALID_PARAMS, f"{redactor.text(where)} {LONE_SURROGATE}", id=request_id, reason="INVALID_TEXT"
        )
    where = _unfit_number({k: v for k, v in body.items() if k != "id"} if isinstance(body, dict) else body)
    if where is not None:
        return rpc_error(
            INVALID_PARAMS,
            f"{redactor.text(where)}: a number must be finite and, if whole, within ±2^53 (what the protocol's "
            "numbers carry exactly)",
            id=request_id,
            reason="INVALID_NUMBER",
        )
    mistyped = None if (version or "").strip().startswith("1") else _mistyped(body)  # v1.0: protobuf's own rules
    if mistyped is not None:
        return rpc_error(INVALID_PARAMS, redactor.text(mistyped), id=request_id)
    status = _unknown_state(body, version, agents.task_states)
    if status is None:
        return None
    shown = printable(agents.state.served[team].redactor.text(json.dumps(status, ensure_ascii=False)))[:100]
    names = ", ".join(name for name in agents.task_states if name != "TASK_STATE_UNSPECIFIED")
    return rpc_error(
        INVALID_PARAMS,
        f"params.status: {shown} is not a task state; one of: {names} (or leave it out: every state)",
        id=request_id,
    )


async def _dispatch(team: str, request: Request, raw: bytes, body: Any, request_id: Any, agents: A2AAgents) -> Response:
    """The SDK's dispatcher answers the call (its body already read: replayed to it), masked."""
    replayed = False

    async def replay() -> dict[str, Any]:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return dict(await request.receive())

    try:
        answered = await agents.dispatchers[team].handle_requests(Request(request.scope, replay))
        return _masked(_params_unfit(answered, body), agents.state.served[team].redactor)
    except Exception as exc:  # the dispatcher answers errors itself; this is one it let through
        error = agents.state.redactor.text(str(exc))
        _log.error("a2a_internal_error", team=team, error_type=type(exc).__name__, error=error)
        return rpc_error(-32603, "internal error", id=request_id, reason="INTERNAL_ERROR")


@router.api_route("/a2a", methods=_METHODS)
@router.api_route("/a2a/{rest:path}", methods=_METHODS)
async def elsewhere(request: Request, agents: Agents, rest: str = "") -> Response:
    return rpc_error(
        INVALID_REQUEST,
        f"no A2A route {request.method} {A2A_PREFIX}{agents.state.redactor.text(rest)}: a team's endpoint is POST "
        f"/a2a/<team>, its card GET /a2a/<team>{CARD_PATH}; teams: {agents.teams}",
        status=404,
        reason="NOT_FOUND",
    )
