"""A remote (``a2a:``) agent's card: where it is, how it is fetched, what of it describes the agent.

The card is read with a2a-sdk's :class:`~a2a.client.A2ACardResolver` (imported here only when a card is
fetched: ``teamrun validate`` without ``--import-check`` never pays for it). Used by ``--import-check``
(:mod:`teamrun.config.remote_checks`) and by the remote worker (:mod:`teamrun.engine.remote.worker`).
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from teamrun.errors import RemoteAgentError, UserError
from teamrun.extras import install_hint

if TYPE_CHECKING:
    from a2a.types.a2a_pb2 import AgentCard

__all__ = [
    "DEFAULT_REMOTE_TIMEOUT_S",
    "CardProblem",
    "bearer_token",
    "card_cuts",
    "card_description",
    "card_location",
    "fetch_card",
    "fetch_card_sync",
    "plain_text",
    "require_a2a",
]

DEFAULT_REMOTE_TIMEOUT_S = 60.0
"""Seconds one HTTP request to a remote agent may take when ``a2a.timeout_s`` is not set."""
WELL_KNOWN_CARD = "/.well-known/agent-card.json"


class CardProblem(RemoteAgentError):
    """The card cannot be fetched (the agent is down, refuses the credentials) or does not parse.

    ``unreachable``: nothing answered at all (connection refused, a time-out): the agent may simply not be
    running where this is checked, as opposed to an agent that answered with something that is not a card."""

    def __init__(self, message: str, *, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


def require_a2a() -> None:
    """Raise a :class:`UserError` with the pip command when a2a-sdk is not installed."""
    try:
        import a2a.client  # noqa: F401
    except ImportError as exc:
        raise UserError(
            f"a remote (a2a:) agent needs the a2a-sdk package, which is not installed: {install_hint('a2a')}"
        ) from exc


def card_location(url: str) -> tuple[str, str]:
    """``(base URL, card path)``: a URL ending in ``.json`` is the card itself, any other the agent's base."""
    parts = urlsplit(url)
    if parts.path.endswith(".json"):
        return f"{parts.scheme}://{parts.netloc}", parts.path
    return url.rstrip("/"), WELL_KNOWN_CARD


def bearer_token(agent: str, bearer_env: str | None, environ: Any = None) -> str | None:
    """The token from ``bearer_env`` (``None`` without auth); a missing or empty variable is a clear error."""
    if bearer_env is None:
        return None
    token = (os.environ if environ is None else environ).get(bearer_env, "")
    if not token.strip():
        raise RemoteAgentError(
            f"remote agent '{agent}': the environment variable {bearer_env} (agents.{agent}.a2a.auth.bearer_env) "
            "is not set or empty; set it to the agent's bearer token"
        )
    return token.strip()


async def fetch_card(url: str, *, token: str | None = None, timeout_s: float | None = None) -> AgentCard:
    """The card of the agent at ``url``; :class:`CardProblem` when it cannot be fetched or parsed."""
    require_a2a()
    import httpx
    from a2a.client import A2ACardResolver

    base, path = card_location(url)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with httpx.AsyncClient(headers=headers, timeout=timeout_s or DEFAULT_REMOTE_TIMEOUT_S) as http:
            return await A2ACardResolver(http, base, path).get_agent_card()
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        raise CardProblem(
            f"cannot read the agent card at {base}{path}: {_said(exc)}", unreachable=_unreachable(exc)
        ) from exc


def fetch_card_sync(url: str, *, bearer_env: str | None = None, timeout_s: float | None = None) -> AgentCard:
    """:func:`fetch_card` from synchronous code (``teamrun validate --import-check``)."""
    token = bearer_token("?", bearer_env) if bearer_env is not None and os.environ.get(bearer_env) else None
    return asyncio.run(fetch_card(url, token=token, timeout_s=timeout_s))


CARD_NAME_CHARS = 200
CARD_DESCRIPTION_CHARS = 2_000
CARD_SKILLS = 20
CARD_SKILL_CHARS = 300
"""What of a card goes into the delegation tool's description at most: its name, its description, its first
skills, each skill's line (a card is the remote party's text: a huge one must not blow up every model call)."""


def card_description(card: AgentCard, fallback: str | None = None) -> str:
    """What a delegating model is told about the agent: the card's name, description and skills (capped,
    see :func:`card_cuts`)."""
    name = _cut(plain_text(card.name), CARD_NAME_CHARS)
    description = _cut(plain_text(card.description), CARD_DESCRIPTION_CHARS)
    lines = [f"{name}: {description}".strip(": ") if name else description]
    if fallback and fallback.strip() and fallback.strip() not in lines[0]:
        lines.insert(0, fallback.strip())
    for skill in list(card.skills)[:CARD_SKILLS]:
        tags = f" [{', '.join(skill.tags)}]" if skill.tags else ""
        line = f"- skill {skill.name or skill.id}: {skill.description}{tags}"
        lines.append(_cut(plain_text(line), CARD_SKILL_CHARS))
    if len(card.skills) > CARD_SKILLS:
        lines.append(f"- … {len(card.skills) - CARD_SKILLS} more skills")
    return "\n".join(line for line in lines if line)


def card_cuts(card: AgentCard) -> str | None:
    """What :func:`card_description` left out of ``card``, in words (``None``: nothing)."""
    cut: list[str] = []
    if len(card.name) > CARD_NAME_CHARS:
        cut.append(f"its name ({len(card.name)} characters) to {CARD_NAME_CHARS}")
    if len(card.description) > CARD_DESCRIPTION_CHARS:
        cut.append(f"its description ({len(card.description)} characters) to {CARD_DESCRIPTION_CHARS}")
    if len(card.skills) > CARD_SKILLS:
        cut.append(f"its {len(card.skills)} skills to the first {CARD_SKILLS}")
    long = sum(
        1
        for skill in list(card.skills)[:CARD_SKILLS]
        if len(skill.name or skill.id) + len(skill.description) + sum(len(t) + 2 for t in skill.tags) + 12
        > CARD_SKILL_CHARS
    )
    if long:
        cut.append(f"{long} skill line(s) to {CARD_SKILL_CHARS} characters")
    return "the card was cut to fit the delegation tool's description: " + "; ".join(cut) if cut else None


_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Control characters (C0 but line breaks and tabs, DEL, C1: terminal escapes, OSC and CSI sequences begin
with them) and bidi overrides, as a remote party may send them."""


def plain_text(text: str) -> str:
    """``text`` from a remote agent with each control or bidi character written out as an escape
    (``\\x1b``, ``\\u202e``): it can neither drive a terminal nor reorder what is shown."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(
        lambda m: f"\\x{ord(m.group(0)):02x}" if ord(m.group(0)) < 0x100 else f"\\u{ord(m.group(0)):04x}", text
    )


def _cut(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _unreachable(exc: BaseException) -> bool:
    """Whether nothing answered (a refused connection, a time-out), anywhere in the exception's causes."""
    import httpx

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, httpx.TransportError | TimeoutError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _said(exc: BaseException) -> str:
    """An exception as one line (the SDK's messages are long; its type tells a time-out from a refusal)."""
    text = plain_text(" ".join(str(exc).split())) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."
