"""A remote (``a2a:``) agent's card: where it is, how it is fetched, what of it describes the agent.

When a run starts, each remote worker's card, read once, becomes what its delegation tool says of it
(:func:`describe_remote_agents`); ``teamrun validate --import-check`` reads each card too (:func:`check_cards`,
called by the CLI: the config layer contacts nothing and reads no token). The card is read with a2a-sdk's
:class:`~a2a.client.A2ACardResolver` (imported only when a card is fetched: ``teamrun validate`` without
``--import-check`` never pays for it).
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from teamrun.config.diagnostics import Diagnostic, JsonPath, Severity
from teamrun.config.models import RemoteAgent, TeamConfig
from teamrun.errors import RemoteAgentError, UserError
from teamrun.extras import install_hint

if TYPE_CHECKING:
    from a2a.types.a2a_pb2 import AgentCard

    from teamrun.config.loader import CheckResult, LoadedConfig

__all__ = [
    "DEFAULT_REMOTE_TIMEOUT_S",
    "CardCache",
    "CardProblem",
    "bearer_token",
    "card_cuts",
    "card_description",
    "card_key",
    "card_location",
    "check_cards",
    "describe_remote_agents",
    "fetch_card",
    "fetch_card_sync",
    "plain_text",
    "remote_tokens",
    "require_a2a",
    "with_remote_tokens",
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


CardCache = dict[tuple[str, str | None], "AgentCard"]
"""The cards one run has read, by :func:`card_key`: each is fetched once per run (when the run starts, for the
delegation tools' descriptions) and the delegations use that copy; a card that changes while the run goes on is
not read again (the next run reads it). A card that could not be read is not kept: a delegation tries again."""


def card_key(spec: RemoteAgent) -> tuple[str, str | None]:
    """Where a card is cached: the agent's URL and the variable of its token (the same URL with other
    credentials may answer with another card)."""
    return spec.url, spec.auth.bearer_env if spec.auth else None


async def describe_remote_agents(config: TeamConfig, cards: CardCache | None = None) -> tuple[TeamConfig, list[str]]:
    """``config`` with each ``a2a:`` agent's description taken from its card (name, description, skills),
    and a warning for each card that could not be read (that agent keeps the file's description, or
    ``Remote A2A agent at <url>.``; delegating to it then tries to read the card again, and fails with the
    reason if it still cannot). Each card read is put in ``cards`` (the run's, used by its delegations);
    agents that share a URL (and token) read it once."""
    cards = {} if cards is None else cards
    remote = {name: agent for name, agent in config.agents.items() if agent.a2a is not None}
    if not remote:
        return config, []

    reads: dict[tuple[str, str | None], asyncio.Task[AgentCard]] = {}

    async def one(name: str) -> tuple[str, str | None] | RemoteAgentError:
        spec = remote[name].a2a
        assert spec is not None
        try:
            token = bearer_token(name, spec.auth.bearer_env if spec.auth else None)
            key = card_key(spec)
            if key not in reads:
                reads[key] = asyncio.ensure_future(fetch_card(spec.url, token=token, timeout_s=spec.timeout_s))
            card = await reads[key]
        except (CardProblem, RemoteAgentError) as exc:
            return exc
        cards[key] = card
        return card_description(card, remote[name].description), card_cuts(card)

    found = await asyncio.gather(*(one(name) for name in remote))
    agents = dict(config.agents)
    warnings: list[str] = []
    for name, got in zip(remote, found, strict=True):
        spec = remote[name].a2a
        assert spec is not None
        described = got if isinstance(got, RemoteAgentError) else got[0]
        if not isinstance(got, RemoteAgentError) and got[1]:
            warnings.append(f"remote agent '{name}' ({spec.url}): {got[1]}")
        if isinstance(described, RemoteAgentError):
            warnings.append(f"remote agent '{name}' ({spec.url}): {described}; its delegations will fail")
            if not remote[name].description:
                agents[name] = remote[name].model_copy(update={"description": f"Remote A2A agent at {spec.url}."})
        else:
            agents[name] = remote[name].model_copy(update={"description": described})
    return config.model_copy(update={"agents": agents}), warnings


def remote_tokens(config: TeamConfig) -> set[str]:
    """The bearer tokens of the run's remote agents that are set: secrets of the run like the file's, whatever
    their variables are called (each variable declared so: the store keeps it as ``***${NAME}***``, as a
    secret-named one's). Read here, by the engine: the config layer reads no token."""
    from teamrun.secrets import declare_secret_variable

    tokens: set[str] = set()
    for agent in config.agents.values():
        if agent.a2a is not None and agent.a2a.auth is not None:
            declare_secret_variable(agent.a2a.auth.bearer_env)
            if token := os.environ.get(agent.a2a.auth.bearer_env, "").strip():
                tokens.add(token)
    return tokens


def with_remote_tokens(loaded: LoadedConfig) -> LoadedConfig:
    """``loaded`` with its remote agents' bearer tokens among its secrets (masked in everything the run writes:
    events, traces, journals, run records, logs, stdout); ``loaded`` itself when it has no ``a2a:`` agent."""
    if not any(agent.a2a is not None for agent in loaded.config.agents.values()):
        return loaded
    return replace(loaded, secrets=loaded.secrets | remote_tokens(loaded.config))


def check_cards(result: CheckResult) -> list[Diagnostic]:
    """``teamrun validate --import-check``: each remote agent's card of one checked file can be fetched and
    parsed (this contacts the agents).

    A card that answers with something that is not a card is an error; an agent that does not answer at all
    (not running where this is checked), or a2a-sdk not installed, is a warning (an error with ``--strict``),
    as a stdio MCP server whose program is missing is."""
    data: dict[str, Any] = result.data if isinstance(result.data, dict) else {}
    agents: dict[str, Any] = data["agents"] if isinstance(data.get("agents"), dict) else {}
    remote = {
        name: spec["a2a"]
        for name, spec in agents.items()
        if isinstance(spec, dict) and isinstance(spec.get("a2a"), dict) and isinstance(spec["a2a"].get("url"), str)
    }
    if not remote:
        return []

    def at(path: JsonPath, message: str, severity: Severity, *, key: bool = False) -> Diagnostic:
        mark = result.source_map.key(path) if key else result.source_map.value(path)
        return Diagnostic(result.file, mark.line, mark.column, message, severity, "import")

    try:
        require_a2a()
    except UserError as exc:
        first = next(iter(remote))
        return [
            at(
                ("agents", first, "a2a"),
                f"agents.{first}.a2a: cannot read remote agents' cards: {exc}",
                "warning",
                key=True,
            )
        ]
    found: list[Diagnostic] = []
    for agent, spec in remote.items():
        url = spec["url"]
        if not url.startswith(("http://", "https://")):
            continue
        auth = spec.get("auth") if isinstance(spec.get("auth"), dict) else {}
        env = auth.get("bearer_env")
        timeout = spec.get("timeout_s")
        where: JsonPath = ("agents", agent, "a2a", "url")
        try:
            card = fetch_card_sync(
                url,
                bearer_env=env if isinstance(env, str) else None,
                timeout_s=float(timeout) if isinstance(timeout, int | float) else None,
            )
        except CardProblem as exc:
            message = f"agents.{agent}.a2a.url: {exc}"
            if exc.unreachable:
                found.append(at(where, f"{message} (is the agent running where you validate?)", "warning"))
            else:
                found.append(at(where, message, "error"))
            continue
        if cut := card_cuts(card):
            found.append(at(where, f"agents.{agent}.a2a.url: {cut}", "warning"))
    return found
