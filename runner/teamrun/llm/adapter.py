"""The LiteLLM adapter: every model call teamrun makes goes through :class:`LiteLLMChatModel`.

LiteLLM is imported lazily (:func:`import_litellm`), because importing it costs
seconds and ``teamrun validate`` must start fast. Retries are ours, not
LiteLLM's or the OpenAI SDK's, so the counts in settings and logs are exact:
429, 5xx, timeouts, connection errors and malformed responses are retried with
exponential backoff and jitter (honouring ``Retry-After``); anything else fails
at once. A call that fails for good raises :class:`ProviderError`, a
:class:`~teamrun.errors.ModelError` whose message names provider, model, status
and what the provider said (its ``message`` field, a few lines) — never the API
key. A conversation too long for the model's context window says which agent,
how many tokens were sent, the model's window, and what to change.

Unset settings get teamrun's safe defaults (:mod:`teamrun.defaults`): a request
timeout (a hanging provider is retried, not waited on for minutes) and a
``max_tokens`` per call. The ``offline`` model never reaches LiteLLM: it is
answered by :class:`~teamrun.llm.offline.OfflineChatModel`.
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import json
import logging
import math
import os
import random
import re
import threading
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from time import time
from typing import Any, Literal
from urllib.parse import urlsplit

from teamrun.defaults import DEFAULT_MAX_TOKENS, DEFAULT_REQUEST_TIMEOUT_S
from teamrun.errors import ModelError
from teamrun.llm import usage_guard
from teamrun.llm.caching import needs_breakpoints, with_breakpoints
from teamrun.llm.offline import (
    OfflineChatModel,
    is_offline_model,
    litellm_model_name,
)
from teamrun.llm.ratelimit import RateLimits, estimated_tokens, process_rate_limits
from teamrun.llm.types import (
    Message,
    ModelReply,
    ModelSettings,
    ToolCall,
    ToolSchema,
    Usage,
    current_scope,
)
from teamrun.logs import get_logger

__all__ = [
    "LOCAL_PLACEHOLDER_KEY",
    "FailureKind",
    "LiteLLMChatModel",
    "ProviderError",
    "RetryNotice",
    "cost_unknown",
    "import_litellm",
    "resolve_model",
]

log = get_logger(__name__)

FailureKind = Literal[
    "rate_limited",
    "server_error",
    "timeout",
    "connection",
    "malformed",
    "rejected",
    "context_window",
    "config",
    "undecodable",
]
"""Why a model call failed; every kind but ``rejected``, ``context_window``, ``config`` and ``undecodable``
is retried (those would fail the same way again)."""

_RETRYABLE: frozenset[str] = frozenset({"rate_limited", "server_error", "timeout", "connection", "malformed"})
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
_REASON_CHARS = 240
"""Longest line kept of what the provider said."""
_REASON_LINES = 8
"""Most lines kept of what the provider said."""
_OUR_RETRY_KEYS = ("num_retries", "max_retries")
_CLIENT_GRACE_S = 5.0
"""How much longer than ``request_timeout_s`` teamrun's own backstop waits for a request."""

LOCAL_PLACEHOLDER_KEY = "teamrun-no-key"
"""The API key sent to a local ``api_base`` (loopback, a private network, a one-word host name) when none is
set: OpenAI's client refuses to send without one, and such servers mostly need none. Never sent elsewhere."""

_WARM_UP: list[Message] = [{"role": "user", "content": "warm-up"}]

_litellm: Any = None
_import_lock = threading.Lock()
_unpriced_models: set[str] = set()
_unpriced_lock = threading.Lock()
_models_without_usage: set[str] = set()
"""Models whose answers reported no token counts at all (said once per process: ``llm_usage_unknown``)."""


# -- importing LiteLLM ------------------------------------------------------------------
def import_litellm() -> Any:
    """Import and configure LiteLLM once.

    Sets ``LITELLM_LOCAL_MODEL_COST_MAP=True`` first (unless already set) so an
    offline machine does not stall fetching the price table.
    """
    global _litellm
    if _litellm is not None:
        return _litellm
    with _import_lock:
        if _litellm is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm

            _configure(litellm)
            _guard_usage(litellm)
            # LiteLLM's import leaves a large heap of long-lived objects (modules, price table, types).
            # Moved out of the collector's reach, later full collections no longer traverse them all:
            # without this each one costs a few hundred milliseconds, and many workers trigger several.
            gc.freeze()
            _litellm = litellm
    return _litellm


def _guard_usage(litellm: Any) -> None:
    """Malformed usage figures are taken out before LiteLLM reads them (:mod:`teamrun.llm.usage_guard`)."""
    anthropic: type | None = None
    try:
        from litellm.llms.anthropic.chat.transformation import AnthropicConfig

        anthropic = AnthropicConfig
    except ImportError:  # pragma: no cover - a LiteLLM without Anthropic's reader
        pass
    usage_guard.install(litellm.types.utils.Usage, anthropic)


def _configure(litellm: Any) -> None:
    """Quiet LiteLLM."""
    litellm.suppress_debug_info = True
    litellm.set_verbose = False
    if hasattr(litellm, "telemetry"):
        litellm.telemetry = False
    # The engine's last turn sends no tools after a history with tool calls; providers such as
    # Anthropic then need LiteLLM to add a placeholder tool, which this allows.
    litellm.modify_params = True
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # LiteLLM's streaming types trip a harmless pydantic warning on first use.
    warnings.filterwarnings("ignore", message=r".*`ReadOnly` qualifier", category=UserWarning)


def resolve_model(model: str) -> str:
    """The LiteLLM model string for a team-file model (``offline`` → ``offline/simulator``)."""
    return litellm_model_name(model.strip())


def cost_unknown(model: str) -> bool:
    """Whether a call to ``model`` (a team-file model string) in this process found no price for it (its cost
    counted as 0.0, logged once as ``llm_cost_unknown``): what a run's summary says once."""
    return resolve_model(model) in _unpriced_models


# -- errors -----------------------------------------------------------------------------
class ProviderError(ModelError):
    """A model call failed for good. The message is safe to show (no secrets)."""

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        model: str,
        kind: FailureKind,
        status_code: int | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.model = model
        self.kind = kind
        self.status_code = status_code
        self.attempts = attempts


@dataclass(frozen=True)
class RetryNotice:
    """Told to ``on_retry`` before each retry sleep."""

    model: str
    attempt: int
    """The attempt that just failed (1-based)."""
    max_attempts: int
    delay_s: float
    kind: FailureKind
    status_code: int | None
    reason: str


@dataclass(frozen=True)
class _Failure:
    kind: FailureKind
    status_code: int | None
    reason: str
    retry_after_s: float | None = None

    @property
    def retryable(self) -> bool:
        return self.kind in _RETRYABLE


class _MalformedResponse(Exception):
    """The provider answered 200 with something that is not a chat completion."""


# -- the adapter ------------------------------------------------------------------------
class LiteLLMChatModel:
    """A :class:`~teamrun.llm.types.ChatModel` backed by ``litellm.acompletion``.

    Stateless apart from its retry policy, so one instance serves every agent and
    every concurrent call.
    """

    def __init__(
        self,
        *,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 20.0,
        retry_after_max_s: float = 60.0,
        on_retry: Callable[[RetryNotice], None] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rate_limits: RateLimits | None = None,
    ) -> None:
        self.backoff_base_s = backoff_base_s
        """First retry waits about this long; each further retry doubles it."""
        self.backoff_max_s = backoff_max_s
        """Upper bound of one backoff wait."""
        self.retry_after_max_s = retry_after_max_s
        """Upper bound on a provider's ``Retry-After``."""
        self.on_retry = on_retry
        self._sleep = sleep
        self._rate_limits = rate_limits
        """The requests and tokens per minute of each model (default: the process's, shared by every run)."""
        self._rng = random.Random()
        self._offline = OfflineChatModel()
        self.warmed: set[str] = set()
        """The models whose first-call set-up is done (:meth:`warm_up`)."""
        import_litellm()  # seconds, once per process: paid here, not inside the first model call

    async def warm_up(self, models: Iterable[str]) -> list[str]:
        """Do LiteLLM's first-call set-up for each model that is not offline (its lazy imports of the provider's
        code: a large part of a process's first call) now, through a mocked completion: no request, no key.
        A server calls it at start-up, so its first request does not pay it. Returns the models warmed now."""
        litellm = import_litellm()
        warmed = []
        for model in dict.fromkeys(m.strip() for m in models):
            if is_offline_model(model) or model in self.warmed:
                continue
            try:
                await litellm.acompletion(model=resolve_model(model), messages=_WARM_UP, mock_response="ok")
            except Exception as exc:  # a model LiteLLM cannot place fails its first real call clearly instead
                log.debug("llm_warm_up_failed", model=model, reason=type(exc).__name__)
                continue
            self.warmed.add(model)
            warmed.append(model)
        return warmed

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        """Call the model, retrying transient failures; raise :class:`ProviderError` if it fails.

        An ``offline`` model is answered by the simulator, without LiteLLM.
        """
        if is_offline_model(settings.model.strip()):
            return await self._offline.complete(
                messages, settings=settings, tools=tools, response_format=response_format
            )
        litellm = import_litellm()
        call = _CallPlan.build(litellm, messages, settings, tools, response_format)
        attempts = max(settings.num_retries, 0) + 1
        limits = self._rate_limits or process_rate_limits()
        waited = 0.0
        for attempt in range(1, attempts + 1):
            waited += await limits.acquire(
                settings.model, settings.api_base, settings.rate_limit, tokens=lambda: estimated_tokens(messages, tools)
            )
            try:
                reply = await self._attempt(litellm, call)
            except Exception as exc:  # classified below; CancelledError is not an Exception
                failure = _classify(litellm, exc, call)
            else:
                limits.spent(settings.model, settings.api_base, reply.usage.output_tokens)
                return replace(reply, waited_s=waited) if waited else reply
            if failure.kind == "rate_limited" and failure.retry_after_s is not None:  # every run obeys it
                limits.hold(settings.model, settings.api_base, min(failure.retry_after_s, self.retry_after_max_s))
            if not failure.retryable or attempt == attempts:
                raise _provider_error(litellm, call, settings, failure, attempt) from None
            await self._wait_before_retry(call, failure, attempt, attempts)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _attempt(self, litellm: Any, call: _CallPlan) -> ModelReply:
        """One request. The provider's client enforces ``timeout_s`` on the wire (LiteLLM's
        ``timeout``); our own limit, a little longer so LiteLLM's first-call set-up in a
        process is not counted, backs it up for clients that ignore it — for a stream, per chunk."""
        limit = call.timeout_s + _CLIENT_GRACE_S
        with usage_guard.watching() as malformed:  # usage figures that are not counts: taken out, said here
            async with asyncio.timeout(limit):
                response = await litellm.acompletion(**call.kwargs)
            reported = True
            if call.kwargs.get("stream"):
                stream = response
                response = await _collect_stream(litellm, stream, call.kwargs["messages"], limit)
                reported = _stream_reported_usage(stream)
        return _to_reply(litellm, response, call, malformed_usage=malformed, usage_reported=reported)

    async def _wait_before_retry(self, call: _CallPlan, failure: _Failure, attempt: int, attempts: int) -> None:
        delay = self._delay(failure, attempt)
        notice = RetryNotice(call.model, attempt, attempts, delay, failure.kind, failure.status_code, failure.reason)
        if self.on_retry is not None:
            self.on_retry(notice)  # the run's event bus reports it (progress, trace, logs): once
        else:
            log.warning(
                "llm_retry",
                model=call.model,
                attempt=attempt,
                max_attempts=attempts,
                delay_s=round(delay, 3),
                kind=failure.kind,
                status_code=failure.status_code,
            )
        await self._sleep(delay)

    def _delay(self, failure: _Failure, attempt: int) -> float:
        """Retry-After when given (capped), else exponential backoff with jitter."""
        if failure.retry_after_s is not None:  # finite and ≥ 0 (:func:`_retry_after`)
            return min(failure.retry_after_s, self.retry_after_max_s)
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2.0 ** (attempt - 1))
        return ceiling * (0.5 + 0.5 * self._rng.random())


# -- building the call ------------------------------------------------------------------
@dataclass(frozen=True)
class _CallPlan:
    model: str
    provider: str
    kwargs: dict[str, Any]
    secrets: tuple[str, ...]
    timeout_s: float

    @classmethod
    def build(
        cls,
        litellm: Any,
        messages: Sequence[Message],
        settings: ModelSettings,
        tools: Sequence[ToolSchema],
        response_format: Mapping[str, Any] | None,
    ) -> _CallPlan:
        model = resolve_model(settings.model)
        provider = _provider_of(litellm, model, settings.api_base)
        api_key = _api_key(settings, model, provider)
        placeholder = api_key is None and _needs_placeholder_key(litellm, model, settings)
        if placeholder:
            api_key = LOCAL_PLACEHOLDER_KEY
        if response_format and _lacks_response_schema(litellm, model, provider):
            response_format = None  # the engine validates the answer against the schema anyway
        timeout_s = DEFAULT_REQUEST_TIMEOUT_S if settings.timeout_s is None else settings.timeout_s
        max_tokens = settings.max_tokens
        if max_tokens is None and not {"max_tokens", "max_completion_tokens"} & set(settings.extra):
            max_tokens = _default_max_tokens(litellm, model, provider)
        if settings.cache == "auto" and needs_breakpoints(provider, model):
            messages, tools = with_breakpoints(messages, tools)
        kwargs = _call_kwargs(model, messages, settings, tools, response_format)
        kwargs["timeout"] = timeout_s
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if api_key is not None:
            kwargs["api_key"] = api_key
        secrets = tuple(
            str(value) for value in (None if placeholder else api_key, settings.extra.get("api_key")) if value
        )
        return cls(model, provider, kwargs, secrets, timeout_s)


_output_limits: dict[str, int | None] = {}


def _default_max_tokens(litellm: Any, model: str, provider: str) -> int:
    """:data:`~teamrun.defaults.DEFAULT_MAX_TOKENS`, lowered to the model's own output limit
    when LiteLLM knows a smaller one."""
    if model not in _output_limits:
        limit = None
        try:
            info = litellm.get_model_info(model=model, custom_llm_provider=provider)
            value = info.get("max_output_tokens") or info.get("max_tokens")
            limit = int(value) if value else None
        except Exception:
            limit = None
        _output_limits[model] = limit
    known = _output_limits[model]
    return min(DEFAULT_MAX_TOKENS, known) if known else DEFAULT_MAX_TOKENS


def _lacks_response_schema(litellm: Any, model: str, provider: str) -> bool:
    """True only when LiteLLM knows this model and says it cannot take a JSON Schema response format.

    Unknown models (a local OpenAI-compatible server, say) get the format: such servers mostly accept it.
    """
    try:
        litellm.get_model_info(model=model, custom_llm_provider=provider)
    except Exception:
        return False
    try:
        return not litellm.supports_response_schema(model=model, custom_llm_provider=provider)
    except Exception:
        return False


def _call_kwargs(
    model: str,
    messages: Sequence[Message],
    settings: ModelSettings,
    tools: Sequence[ToolSchema],
    response_format: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Keyword arguments for ``litellm.acompletion``; ``extra`` first, ours win."""
    extra = dict(settings.extra)
    for key in _OUR_RETRY_KEYS:
        if extra.pop(key, None) is not None:
            log.debug("llm_extra_ignored", key=key, why="teamrun does its own retries")
    kwargs: dict[str, Any] = {**extra, "model": model, "messages": list(messages)}
    optional = {
        "api_base": settings.api_base,
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
        "timeout": settings.timeout_s,
        "tools": list(tools) or None,
        "response_format": dict(response_format) if response_format else None,
    }
    kwargs.update({k: v for k, v in optional.items() if v is not None})
    if settings.stream:
        kwargs["stream"] = True
        kwargs["stream_options"] = {"include_usage": True}
    else:
        kwargs.pop("stream", None)
        kwargs.pop("stream_options", None)
    kwargs.update(num_retries=0, max_retries=0)
    return kwargs


_providers: dict[tuple[str, str | None], str] = {}


def _provider_of(litellm: Any, model: str, api_base: str | None) -> str:
    """LiteLLM's provider name for ``model`` (``"unknown"`` if it cannot tell); looked up once per model and base
    (a team has a few, and the lookup walks LiteLLM's provider tables)."""
    key = (model, api_base)
    provider = _providers.get(key)
    if provider is None:
        try:
            provider = str(litellm.get_llm_provider(model=model, api_base=api_base)[1])
        except Exception:
            provider = model.split("/", 1)[0] if "/" in model else "unknown"
        _providers[key] = provider
    return provider


def _needs_placeholder_key(litellm: Any, model: str, settings: ModelSettings) -> bool:
    """Whether a call gets :data:`LOCAL_PLACEHOLDER_KEY`: its ``api_base`` is local, no ``api_key`` is given and
    the variable LiteLLM reads the provider's key from is unset (a local OpenAI-compatible server mostly needs no
    key, but OpenAI's client refuses to send without one)."""
    if not settings.api_base or settings.extra.get("api_key") or not is_local_url(settings.api_base):
        return False
    try:
        missing = litellm.validate_environment(model=model, api_base=settings.api_base).get("missing_keys") or []
    except Exception:
        return False
    return any(str(name).endswith("_KEY") for name in missing)


_LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".lan", ".home.arpa")


def is_local_url(url: str) -> bool:
    """Whether ``url`` names a host on this machine or a private network: a loopback, private or link-local
    address, ``localhost``, a one-word name (a container's service name) or a local-only domain
    (``.local``, ``.internal``...). A public provider's host never is."""
    try:
        host = urlsplit(url if "//" in url else f"//{url}").hostname
    except ValueError:
        return False
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost" or "." not in host or host.endswith(_LOCAL_SUFFIXES)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_link_local or any(address in net for net in _PRIVATE_NETWORKS)


_PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)
"""The private networks (RFC 1918, the carrier-grade NAT range VPNs use, IPv6 unique-local): not Python's
``is_private``, which also counts the documentation ranges (203.0.113.0/24...) and reserved blocks."""


def _api_key(settings: ModelSettings, model: str, provider: str) -> str | None:
    """The key from the variable named by ``api_key_env``; fail clearly if it is unset."""
    if not settings.api_key_env:
        return None
    value = os.environ.get(settings.api_key_env, "")
    if not value:
        raise ProviderError(
            f"{provider} model {model!r}: environment variable {settings.api_key_env} "
            "(named by api_key_env) is not set or empty; export it with the API key",
            provider=provider,
            model=model,
            kind="config",
        )
    return value


# -- reading the answer -----------------------------------------------------------------
async def _collect_stream(litellm: Any, stream: Any, messages: list[Message], idle_s: float) -> Any:
    """Read a streamed answer to the end and assemble it into one ``ModelResponse``; waiting
    more than ``idle_s`` for a chunk is a timeout."""
    chunks: list[Any] = []
    iterator = aiter(stream)
    while True:
        try:
            async with asyncio.timeout(idle_s):
                chunk = await anext(iterator)
        except StopAsyncIteration:
            break
        chunks.append(chunk)
    if not chunks:
        raise _MalformedResponse("the stream ended without any chunk")
    response = litellm.stream_chunk_builder(chunks, messages=messages)
    if response is None:
        raise _MalformedResponse("the stream could not be assembled into a response")
    return response


def _stream_reported_usage(stream: Any) -> bool:
    """Whether the provider sent its usage in a stream that was read to its end. LiteLLM's stream keeps the
    provider's chunks (``chunks``), with a usage only when the provider sent one; the usage it hands on in its
    last chunk is its own estimate (token counting) when the provider sent none (or ``usage: null``), so it is
    not read. A stream that keeps no chunks cannot tell: reported."""
    chunks = getattr(stream, "chunks", None)
    if not isinstance(chunks, list):
        return True
    return any(_get(chunk, "usage") is not None for chunk in chunks)


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _to_reply(
    litellm: Any,
    response: Any,
    call: _CallPlan,
    *,
    malformed_usage: Sequence[str] = (),
    usage_reported: bool = True,
) -> ModelReply:
    """Normalise a LiteLLM ``ModelResponse`` into a :class:`ModelReply`; ``malformed_usage``: the figures of the
    provider's usage that were not counts (:mod:`~teamrun.llm.usage_guard` took them out): usage unknown;
    ``usage_reported`` false: a stream whose provider sent no usage (LiteLLM's estimate is in ``response``): unknown."""
    choices = _get(response, "choices")
    if not choices:
        raise _MalformedResponse("the response has no choices")
    message = _get(choices[0], "message")
    if message is None:
        raise _MalformedResponse("the response's first choice has no message")
    calls = tuple(_tool_call(raw, i) for i, raw in enumerate(_get(message, "tool_calls") or ()))
    content = _get(message, "content")
    if content is not None and not isinstance(content, str):
        raise _MalformedResponse("the message content is not text")
    if calls and not content:
        content = None
    if malformed_usage:
        log.warning(
            "llm_usage_unknown",
            reason="the provider's usage figures are not token counts",
            figures=",".join(malformed_usage)[:200],
        )
    usage = None if malformed_usage else _usage(_get(response, "usage"))
    if usage is not None and (not usage_reported or (not usage.input_tokens and not usage.output_tokens)):
        usage = None  # no figure at all (LiteLLM fills in zeros): every request sends tokens, so unknown, never 0
        _say_no_usage(call.model)
    return ModelReply(
        text=content,
        tool_calls=calls,
        usage=usage or Usage(requests=1),
        cost_usd=_cost(litellm, response, call) if usage is not None else 0.0,
        model=str(_get(response, "model") or call.model),
        finish_reason=_get(choices[0], "finish_reason"),
        usage_known=usage is not None,
    )


def _say_no_usage(model: str) -> None:
    """Log once per model that its answers report no token counts (its usage is unknown, not 0)."""
    with _unpriced_lock:
        if model in _models_without_usage:
            return
        _models_without_usage.add(model)
    log.warning("llm_usage_unknown", model=model, reason="the provider reported no token counts")


def _tool_call(raw: Any, index: int) -> ToolCall:
    function = _get(raw, "function")
    name = _get(function, "name")
    if not name:
        raise _MalformedResponse(f"tool call {index} has no function name")
    arguments = _get(function, "arguments")
    if arguments is None:
        arguments = ""
    elif not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return ToolCall(id=str(_get(raw, "id") or f"call_{index}_{name}"), name=str(name), arguments=arguments)


def _usage(raw: Any) -> Usage | None:
    """The answer's token counts (a figure not reported: 0; none at all is unknown: :func:`_to_reply`), cached
    input tokens included; ``None`` when a figure is malformed (not a count: negative, fractional, text..., or
    more cached tokens than input tokens): unknown, never read as 0 — nor priced."""
    sent, said = (_count(_get(raw, name)) for name in ("prompt_tokens", "completion_tokens"))
    cached, written = _cache_counts(raw)
    counts = (sent, said, cached, written)
    if any(count is None for count in counts) or (cached or 0) + (written or 0) > (sent or 0):
        log.warning("llm_usage_unknown", reason="the provider's usage or cache figures are not token counts")
        return None
    return Usage(sent or 0, said or 0, 1, cached or 0, written or 0)


def _cache_counts(raw: Any) -> tuple[int | None, int | None]:
    """Input tokens read from and written to the provider's prompt cache: OpenAI's (and LiteLLM's, for every
    provider) ``prompt_tokens_details.cached_tokens``, else Anthropic's ``cache_read_input_tokens``; Anthropic's
    and Bedrock's ``cache_creation_input_tokens``. ``None``: a malformed figure."""
    details = _get(raw, "prompt_tokens_details")
    read = _get(details, "cached_tokens") if details is not None else None
    if read is None:
        read = _get(raw, "cache_read_input_tokens")
    return _count(read), _count(_get(raw, "cache_creation_input_tokens"))


def _count(value: Any) -> int | None:
    """A token count (absent: 0), or ``None`` when ``value`` is not one."""
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _cost(litellm: Any, response: Any, call: _CallPlan) -> float:
    """Price from LiteLLM's table; 0.0 (and one warning per model) when it is unknown."""
    if call.model in _unpriced_models:
        return 0.0
    hidden = getattr(response, "_hidden_params", None) or {}
    known = hidden.get("response_cost") if isinstance(hidden, dict) else None
    if isinstance(known, int | float) and not isinstance(known, bool):
        return float(known)  # LiteLLM priced this response already
    try:
        cost = litellm.completion_cost(completion_response=response, model=call.model)
        return float(cost or 0.0)
    except Exception as exc:
        with _unpriced_lock:
            first = call.model not in _unpriced_models
            _unpriced_models.add(call.model)
        if first:
            log.warning(
                "llm_cost_unknown",
                model=call.model,
                reason=type(exc).__name__,
                note="cost counted as 0.0; max_cost_usd cannot limit this model",
            )
        return 0.0


# -- classifying failures ---------------------------------------------------------------
def _classify(litellm: Any, exc: Exception, call: _CallPlan) -> _Failure:
    """Map an exception from one attempt to a failure kind (retryable or not)."""
    import httpx
    import openai

    secrets = call.secrets
    chain = _exception_chain(exc)
    reason = _short_reason(exc, secrets)
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    timeouts = (TimeoutError, openai.APITimeoutError, httpx.TimeoutException)
    if any(isinstance(e, timeouts) for e in chain):
        return _Failure("timeout", None, reason)
    if _is_context_overflow(litellm, chain, status):
        return _Failure("context_window", status, reason)
    if _undecodable(chain):  # before the status: LiteLLM calls its own decoding error an HTTP 500
        return _Failure("undecodable", None, reason)
    if isinstance(exc, _MalformedResponse | litellm.APIResponseValidationError) or _unreadable_usage(chain):
        return _Failure("malformed", None, reason)
    if any(_MISSING_KEY.search(str(e)) for e in chain):
        return _Failure("config", None, reason)
    connection = (openai.APIConnectionError, httpx.TransportError, ConnectionError)
    broken = [e for e in chain if isinstance(e, connection)]
    if broken or isinstance(exc, litellm.APIConnectionError):
        return _Failure("connection", None, _short_reason(broken[-1], secrets) if broken else reason)
    if status is not None:
        return _failure_for_status(status, reason, _retry_after(exc))
    if isinstance(exc, ValueError | KeyError | TypeError | AttributeError | IndexError):
        return _Failure("malformed", None, reason)
    return _Failure("rejected", None, reason)


_MISSING_KEY = re.compile(r"Missing credentials|api_key client option must be set|Missing \w+ API Key")


_UNDECODABLE = re.compile(r"Checksum mismatch: expected 0x[0-9a-f]+, calculated 0x[0-9a-f]+")
"""botocore's words for an AWS event stream whose bytes fail their CRC."""


def _undecodable(chain: Sequence[BaseException]) -> bool:
    """The client could not decode the answer's framing (a Bedrock event stream whose checksum fails).

    The bytes arrived; they are not an event stream (typically a JSON error in its place, for a model id
    or region the endpoint does not serve), so a retry gets the same bytes. Seen as botocore's own
    exception in the chain, or its words in LiteLLM's message when the chain was cut.
    """
    return any(type(e).__module__.startswith("botocore.eventstream") or _UNDECODABLE.search(str(e)) for e in chain)


_UNREADABLE_USAGE = re.compile(
    r"validation errors? for (Usage|CompletionUsage)\b|unsupported operand type\(s\) for \+=?: 'int' and 'str'"
)
"""LiteLLM's words when the answer's usage was not numbers (:mod:`~teamrun.llm.usage_guard` takes such figures
out first; a reader it does not cover still fails): the answer arrived, it is malformed — neither a server error
(LiteLLM calls it HTTP 500) nor a connection failure (a stream's)."""


def _unreadable_usage(chain: Sequence[BaseException]) -> bool:
    return any(_UNREADABLE_USAGE.search(str(e)) for e in chain)


def _exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes/contexts, outermost first (cycle-safe)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 20:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _failure_for_status(status: int, reason: str, retry_after: float | None) -> _Failure:
    if status == 429:
        return _Failure("rate_limited", status, reason, retry_after)
    if status >= 500 and _looks_malformed(reason):
        return _Failure("malformed", None, reason)
    if status >= 500 or status in _RETRYABLE_STATUS:
        return _Failure("server_error", status, reason, retry_after)
    return _Failure("rejected", status, reason)


def _looks_malformed(reason: str) -> bool:
    """LiteLLM reports an unparseable 200 body as a 500; recognise it for the message."""
    markers = ("Expecting value", "Unterminated string", "Expecting ',' delimiter", "no 'choices'")
    return any(marker in reason for marker in markers)


def _retry_after(exc: Exception) -> float | None:
    """Seconds from a ``Retry-After`` / ``retry-after-ms`` header the exception carries: a finite number ≥ 0, or
    ``None`` (the usual backoff) when the header is absent or not one (text, ``nan``, ``inf``, negative)."""
    for source in (getattr(exc, "response", None), exc):
        headers = getattr(source, "headers", None)
        if headers is None and source is exc:
            headers = getattr(exc, "litellm_response_headers", None)
        if not headers:
            continue
        try:
            millis, value = headers.get("retry-after-ms"), headers.get("retry-after")
        except (AttributeError, ValueError, TypeError):
            continue
        parsed = _seconds(millis, scale=1000.0)
        if parsed is None:
            parsed = _parse_retry_after(value)
        if parsed is not None:
            return parsed
    return None


def _seconds(value: Any, *, scale: float = 1.0) -> float | None:
    """``value`` (a number of seconds, or of ``scale``-ths of one) as finite seconds ≥ 0, else ``None``."""
    if value is None or isinstance(value, bool):
        return None
    try:
        seconds = float(str(value).strip()) / scale
    except (TypeError, ValueError, OverflowError):
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _parse_retry_after(value: Any) -> float | None:
    """``Retry-After``: seconds or an HTTP date (one already past: 0), as finite seconds ≥ 0; else ``None``."""
    if value is None:
        return None
    seconds = _seconds(value)
    if seconds is not None or _looks_numeric(value):
        return seconds
    try:
        when = parsedate_to_datetime(str(value)).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(when - time(), 0.0) if math.isfinite(when) else None


def _looks_numeric(value: Any) -> bool:
    """Whether ``value`` is meant as a number (``nan``, ``-5``, ``1e999``), not a date."""
    try:
        float(str(value).strip())
    except (TypeError, ValueError):
        return False
    return True


_PREFIX = re.compile(r"^(?:litellm\.\w+:\s*|\w+(?:Error|Exception)\s*(?:-|:)\s*)+")
_KEYLIKE = re.compile(r"\b(sk|pk|rk|key)-[A-Za-z0-9_\-]{8,}")
_BEARER = re.compile(r"(?i)\b(bearer|api[_-]?key[\"']?\s*[:=]\s*[\"']?)\s*[A-Za-z0-9_\-.]{8,}")


def _provider_message(chain: Sequence[BaseException]) -> str | None:
    """The ``message`` field of the provider's JSON error body, when an exception carries it."""
    for exc in chain:
        body = getattr(exc, "body", None)
        if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
            body = body["error"]
        message = body.get("message") if isinstance(body, Mapping) else None
        if isinstance(message, str) and message.strip():
            return message
    return None


def _short_reason(exc: BaseException, secrets: Sequence[str]) -> str:
    """What the provider said: its error body's ``message`` (else the exception's text),
    without LiteLLM's class-name prefixes, secrets or noise; at most a few lines."""
    text = _provider_message(_exception_chain(exc)) or str(exc) or type(exc).__name__
    text = _without_traceback(text)
    text = re.sub(r"\s*LiteLLM Retried:.*$", "", _PREFIX.sub("", text.strip()), flags=re.DOTALL)
    for secret in secrets:
        text = text.replace(secret, "***")
    text = _BEARER.sub(r"\1 ***", _KEYLIKE.sub("***", text))
    lines = [line.rstrip() for line in text.splitlines() if line.strip()] or [type(exc).__name__]
    kept = [_clip(line, _REASON_CHARS) for line in lines[:_REASON_LINES]]
    if len(lines) > _REASON_LINES:
        kept.append(f"... ({len(lines) - _REASON_LINES} more lines)")
    return "\n  ".join(kept)


_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s*File "[^"]*", line \d+')


def _without_traceback(text: str) -> str:
    """What an error says, without a Python traceback a library put into its message (LiteLLM does):
    the text before it, else the traceback's last line (the exception itself); never file/line frames."""
    head, found, tail = text.partition(_TRACEBACK)
    if found:
        if _PREFIX.sub("", head.strip()).strip():  # more than LiteLLM's class-name prefixes
            return head
        said = [line for line in tail.splitlines() if line.strip() and not line[:1].isspace()]
        return said[-1] if said else "an error inside the provider's client library"
    return "\n".join(line for line in text.splitlines() if not _FRAME.match(line))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- context window overflow --------------------------------------------------------------
_OVERFLOW = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|context window|prompt is too long|"
    r"input is too long|too many (?:input )?tokens",
    re.IGNORECASE,
)
_SENT = re.compile(
    r"(?:resulted in|requested|prompt is too long:|input (?:is|has|contains)|you sent)\s+"
    r"(?:about\s+)?(\d[\d,]*)\s+tokens",
    re.IGNORECASE,
)
_WINDOW = re.compile(
    r"(?:maximum context length is|context window (?:is|of)|limit (?:is|of))\s+(\d[\d,]*)\s+tokens|"
    r"tokens\s*>\s*(\d[\d,]*)\s+maximum",
    re.IGNORECASE,
)


def _is_context_overflow(litellm: Any, chain: Sequence[BaseException], status: int | None) -> bool:
    """The request was rejected because the conversation does not fit the model's window."""
    overflow_type = getattr(litellm, "ContextWindowExceededError", None)
    if overflow_type is not None and any(isinstance(e, overflow_type) for e in chain):
        return True
    if status not in (400, 413, 422, None):
        return False
    for exc in chain:
        body = getattr(exc, "body", None)
        if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
            body = body["error"]
        if isinstance(body, Mapping) and body.get("code") == "context_length_exceeded":
            return True
    return status is not None and bool(_OVERFLOW.search(_provider_message(chain) or str(chain[0])))


def _number(match: re.Match[str] | None) -> int | None:
    if match is None:
        return None
    digits = next((g for g in match.groups() if g), None)
    return int(digits.replace(",", "")) if digits else None


def _overflow_hint(litellm: Any, call: _CallPlan, reason: str) -> str:
    """Which agent, how many tokens were sent, the model's window, and what to change."""
    sent, estimated = _number(_SENT.search(reason)), False
    if sent is None:
        try:
            sent = int(litellm.token_counter(model=call.model, messages=call.kwargs["messages"]))
            estimated = True
        except Exception:
            sent = None
    window = _number(_WINDOW.search(reason))
    if window is None:
        try:
            info = litellm.get_model_info(model=call.model, custom_llm_provider=call.provider)
            window = int(info.get("max_input_tokens") or info.get("max_tokens") or 0) or None
        except Exception:
            window = None
    scope = current_scope.get()
    agent = f"agent {'/'.join(scope.agent_path)!r}" if scope is not None and scope.agent_path else "the agent"
    sent_text = f"{'about ' if estimated else ''}{sent:,} tokens were sent" if sent else "the size sent is unknown"
    window_text = f"the model's context window is {window:,} tokens" if window else "the model's window is unknown"
    answer = call.kwargs.get("max_tokens")
    reserve = f" plus max_tokens {answer:,} for the answer" if isinstance(answer, int) else ""
    return (
        f"the conversation of {agent} does not fit the model's context window ({sent_text}{reserve}; "
        f"{window_text}). Give the agent less to read — a message_filter (last: N or max_tokens: N) on the "
        "delegation that starts it, fewer or shorter tool results — or lower max_tokens, or use a model "
        "with a larger window"
    )


_HINTS: dict[FailureKind, str] = {
    "rate_limited": "rate limited; lower max_concurrency or raise num_retries",
    "server_error": "the provider had an error; try again later or raise num_retries",
    "timeout": "timed out; raise request_timeout_s or check the endpoint",
    "connection": "could not connect; check api_base and that the server is reachable",
    "malformed": "the provider sent a response that is not a valid chat completion",
    "rejected": "the request was rejected",
    "context_window": "the conversation does not fit the model's context window",
    "config": "no API key: set api_key_env to the variable holding it "
    "(or the provider's standard variable, e.g. OPENAI_API_KEY; any value for a server that needs no key)",
    "undecodable": "its answer could not be decoded (an event stream whose checksum fails: usually an error "
    "sent in place of the stream, for a model id or region the endpoint does not serve); not retried, a retry "
    "would get the same answer; check the model id, region and api_base",
}
_STATUS_HINTS = {
    400: "the request was rejected (bad request); check the model's parameters",
    401: "authentication failed; check the API key (api_key_env) for this provider",
    403: "permission denied; check the API key's access to this model",
    404: "not found; check the model name and api_base",
    413: "the request is too large; shorten the conversation",
    422: "the request was rejected as unprocessable; check the model's parameters",
}


def _missing_key_hint(litellm: Any, model: str) -> str:
    """The "no API key" hint, naming the variable(s) this model's provider reads (LiteLLM knows them)."""
    try:
        wanted = [str(k) for k in litellm.validate_environment(model=model).get("missing_keys") or ()]
    except Exception:  # an unknown provider: the generic hint
        wanted = []
    standard = " or ".join(wanted) if wanted else "the provider's standard variable"
    return (
        f"no API key: set {standard}, or api_key_env to the variable holding it "
        "(any value for a server that needs no key)"
    )


def _public_url(url: str) -> str:
    """``url`` without user info or query string (they may carry credentials)."""
    return re.sub(r"//[^/@]*@", "//", url).split("?", 1)[0]


def _provider_error(
    litellm: Any, call: _CallPlan, settings: ModelSettings, failure: _Failure, attempts: int
) -> ProviderError:
    hint = _STATUS_HINTS.get(failure.status_code or 0, _HINTS[failure.kind])
    if failure.kind == "context_window":
        hint = _overflow_hint(litellm, call, failure.reason)
    if failure.kind == "timeout":
        hint = f"timed out after {call.timeout_s:g}s; raise request_timeout_s or check the endpoint"
    if failure.kind == "config":
        hint = _missing_key_hint(litellm, settings.model)
    status = f"HTTP {failure.status_code}, " if failure.status_code else ""
    tries = f" (gave up after {attempts} attempts)" if attempts > 1 else ""
    where = f" at {_public_url(settings.api_base)}" if settings.api_base else ""
    message = (
        f"{call.provider} model {call.model!r}{where} failed: {status}{hint}{tries}. Provider said: {failure.reason}"
    )
    return ProviderError(
        message,
        provider=call.provider,
        model=call.model,
        kind=failure.kind,
        status_code=failure.status_code,
        attempts=attempts,
    )
