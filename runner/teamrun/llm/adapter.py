"""The LiteLLM adapter: every model call teamrun makes goes through :class:`LiteLLMChatModel`.

LiteLLM is imported lazily (:func:`import_litellm`), because importing it costs
seconds and ``teamrun validate`` must start fast. Retries are ours, not
LiteLLM's or the OpenAI SDK's, so the counts in settings and logs are exact:
429, 5xx, timeouts, connection errors and malformed responses are retried with
exponential backoff and jitter (honouring ``Retry-After``); anything else fails
at once. A call that fails for good raises :class:`ProviderError`, a
:class:`~teamrun.errors.ModelError` whose message names provider, model, status
and reason — never the API key.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import re
import threading
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from time import time
from typing import Any, Literal

from teamrun.errors import ModelError
from teamrun.llm.offline import (
    OFFLINE_PROVIDER,
    build_provider,
    is_offline_model,
    litellm_model_name,
)
from teamrun.llm.types import (
    Message,
    ModelReply,
    ModelSettings,
    ToolCall,
    ToolSchema,
    Usage,
)
from teamrun.logs import get_logger

__all__ = [
    "FailureKind",
    "LiteLLMChatModel",
    "ProviderError",
    "RetryNotice",
    "import_litellm",
    "resolve_model",
]

log = get_logger(__name__)

FailureKind = Literal[
    "rate_limited", "server_error", "timeout", "connection", "malformed", "rejected", "config"
]
"""Why a model call failed; every kind but ``rejected`` and ``config`` is retried."""

_RETRYABLE: frozenset[str] = frozenset(
    {"rate_limited", "server_error", "timeout", "connection", "malformed"}
)
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
_REASON_CHARS = 240
_OUR_RETRY_KEYS = ("num_retries", "max_retries")

_litellm: Any = None
_import_lock = threading.Lock()
_unpriced_models: set[str] = set()
_unpriced_lock = threading.Lock()


# -- importing LiteLLM ------------------------------------------------------------------
def import_litellm() -> Any:
    """Import and configure LiteLLM once; register the ``offline`` provider.

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
            _litellm = litellm
    return _litellm


def _configure(litellm: Any) -> None:
    """Quiet LiteLLM and register the offline simulator as a custom provider."""
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
    providers = list(litellm.custom_provider_map or [])
    if not any(item.get("provider") == OFFLINE_PROVIDER for item in providers):
        providers.append({"provider": OFFLINE_PROVIDER, "custom_handler": build_provider(litellm)})
        litellm.custom_provider_map = providers
        setup = getattr(litellm.utils, "custom_llm_setup", None)
        if callable(setup):
            setup()


def resolve_model(model: str) -> str:
    """The LiteLLM model string for a team-file model (``offline`` → ``offline/simulator``)."""
    return litellm_model_name(model.strip())


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
    ) -> None:
        self.backoff_base_s = backoff_base_s
        """First retry waits about this long; each further retry doubles it."""
        self.backoff_max_s = backoff_max_s
        """Upper bound of one backoff wait."""
        self.retry_after_max_s = retry_after_max_s
        """Upper bound on a provider's ``Retry-After``."""
        self.on_retry = on_retry
        self._sleep = sleep
        self._rng = random.Random()
        import_litellm()  # seconds, once per process: paid here, not inside the first model call

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        """Call the model, retrying transient failures; raise :class:`ProviderError` if it fails."""
        litellm = import_litellm()
        call = _CallPlan.build(litellm, messages, settings, tools, response_format)
        attempts = 1 if call.offline else max(settings.num_retries, 0) + 1
        for attempt in range(1, attempts + 1):
            try:
                return await self._attempt(litellm, call, settings.timeout_s)
            except Exception as exc:  # classified below; CancelledError is not an Exception
                failure = _classify(litellm, exc, call.secrets)
            if not failure.retryable or attempt == attempts:
                raise _provider_error(call, settings, failure, attempt) from None
            await self._wait_before_retry(call, failure, attempt, attempts)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _attempt(self, litellm: Any, call: _CallPlan, timeout_s: float | None) -> ModelReply:
        async with asyncio.timeout(timeout_s):
            response = await litellm.acompletion(**call.kwargs)
            if call.kwargs.get("stream"):
                response = await _collect_stream(litellm, response, call.kwargs["messages"])
        return _to_reply(litellm, response, call)

    async def _wait_before_retry(
        self, call: _CallPlan, failure: _Failure, attempt: int, attempts: int
    ) -> None:
        delay = self._delay(failure, attempt)
        notice = RetryNotice(
            call.model, attempt, attempts, delay, failure.kind, failure.status_code, failure.reason
        )
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
        if failure.retry_after_s is not None:
            return min(max(failure.retry_after_s, 0.0), self.retry_after_max_s)
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2.0 ** (attempt - 1))
        return ceiling * (0.5 + 0.5 * self._rng.random())


# -- building the call ------------------------------------------------------------------
@dataclass(frozen=True)
class _CallPlan:
    model: str
    provider: str
    offline: bool
    kwargs: dict[str, Any]
    secrets: tuple[str, ...]

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
        offline = is_offline_model(model)
        provider = _provider_of(litellm, model, settings.api_base)
        api_key = _api_key(settings, model, provider)
        if response_format and not offline and _lacks_response_schema(litellm, model, provider):
            response_format = None  # the engine validates the answer against the schema anyway
        kwargs = _call_kwargs(model, messages, settings, tools, response_format)
        if api_key is not None:
            kwargs["api_key"] = api_key
        secrets = tuple(str(value) for value in (api_key, settings.extra.get("api_key")) if value)
        return cls(model, provider, offline, kwargs, secrets)


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


def _provider_of(litellm: Any, model: str, api_base: str | None) -> str:
    """LiteLLM's provider name for ``model`` (``"unknown"`` if it cannot tell)."""
    if is_offline_model(model):
        return OFFLINE_PROVIDER
    try:
        return str(litellm.get_llm_provider(model=model, api_base=api_base)[1])
    except Exception:
        return model.split("/", 1)[0] if "/" in model else "unknown"


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
async def _collect_stream(litellm: Any, stream: Any, messages: list[Message]) -> Any:
    """Read a streamed answer to the end and assemble it into one ``ModelResponse``."""
    chunks = [chunk async for chunk in stream]
    if not chunks:
        raise _MalformedResponse("the stream ended without any chunk")
    response = litellm.stream_chunk_builder(chunks, messages=messages)
    if response is None:
        raise _MalformedResponse("the stream could not be assembled into a response")
    return response


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _to_reply(litellm: Any, response: Any, call: _CallPlan) -> ModelReply:
    """Normalise a LiteLLM ``ModelResponse`` into a :class:`ModelReply`."""
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
    return ModelReply(
        text=content,
        tool_calls=calls,
        usage=_usage(_get(response, "usage")),
        cost_usd=_cost(litellm, response, call),
        model=str(_get(response, "model") or call.model),
        finish_reason=_get(choices[0], "finish_reason"),
    )


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
    return ToolCall(
        id=str(_get(raw, "id") or f"call_{index}_{name}"), name=str(name), arguments=arguments
    )


def _usage(raw: Any) -> Usage:
    return Usage(
        input_tokens=int(_get(raw, "prompt_tokens") or 0),
        output_tokens=int(_get(raw, "completion_tokens") or 0),
        requests=1,
    )


def _cost(litellm: Any, response: Any, call: _CallPlan) -> float:
    """Price from LiteLLM's table; 0.0 (and one warning per model) when it is unknown."""
    if call.offline or call.model in _unpriced_models:
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
def _classify(litellm: Any, exc: Exception, secrets: Sequence[str]) -> _Failure:
    """Map an exception from one attempt to a failure kind (retryable or not)."""
    import httpx
    import openai

    chain = _exception_chain(exc)
    reason = _short_reason(exc, secrets)
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    timeouts = (TimeoutError, openai.APITimeoutError, httpx.TimeoutException)
    if any(isinstance(e, timeouts) for e in chain):
        return _Failure("timeout", None, reason)
    if isinstance(exc, _MalformedResponse | litellm.APIResponseValidationError):
        return _Failure("malformed", None, reason)
    if any(_MISSING_KEY.search(str(e)) for e in chain):
        return _Failure("config", None, reason)
    connection = (openai.APIConnectionError, httpx.TransportError, ConnectionError)
    broken = [e for e in chain if isinstance(e, connection)]
    if broken or isinstance(exc, litellm.APIConnectionError):
        return _Failure(
            "connection", None, _short_reason(broken[-1], secrets) if broken else reason
        )
    if status is not None:
        return _failure_for_status(status, reason, _retry_after(exc))
    if isinstance(exc, ValueError | KeyError | TypeError | AttributeError | IndexError):
        return _Failure("malformed", None, reason)
    return _Failure("rejected", None, reason)


_MISSING_KEY = re.compile(
    r"Missing credentials|api_key client option must be set|Missing \w+ API Key"
)


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
    """Seconds from a ``Retry-After`` / ``retry-after-ms`` header the exception carries."""
    for source in (getattr(exc, "response", None), exc):
        headers = getattr(source, "headers", None)
        if headers is None and source is exc:
            headers = getattr(exc, "litellm_response_headers", None)
        if not headers:
            continue
        try:
            millis = headers.get("retry-after-ms")
            if millis is not None:
                return float(millis) / 1000.0
            value = headers.get("retry-after")
        except (AttributeError, ValueError, TypeError):
            continue
        parsed = _parse_retry_after(value)
        if parsed is not None:
            return parsed
    return None


def _parse_retry_after(value: Any) -> float | None:
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except (TypeError, ValueError):
        pass
    try:
        return max(parsedate_to_datetime(str(value)).timestamp() - time(), 0.0)
    except (TypeError, ValueError, IndexError):
        return None


_PREFIX = re.compile(r"^(?:litellm\.\w+:\s*|\w+(?:Error|Exception)\s*(?:-|:)\s*)+")
_KEYLIKE = re.compile(r"\b(sk|pk|rk|key)-[A-Za-z0-9_\-]{8,}")


def _short_reason(exc: BaseException, secrets: Sequence[str]) -> str:
    """The exception's message without LiteLLM's class-name prefixes, secrets or noise."""
    text = str(exc).split("\n", 1)[0] or type(exc).__name__
    text = _PREFIX.sub("", text).strip() or type(exc).__name__
    text = re.sub(r"\s*LiteLLM Retried:.*$", "", text)
    for secret in secrets:
        text = text.replace(secret, "***")
    text = _KEYLIKE.sub("***", text)
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


_HINTS: dict[FailureKind, str] = {
    "rate_limited": "rate limited; lower max_concurrency or raise num_retries",
    "server_error": "the provider had an error; try again later or raise num_retries",
    "timeout": "timed out; raise timeout_s or check the endpoint",
    "connection": "could not connect; check api_base and that the server is reachable",
    "malformed": "the provider sent a response that is not a valid chat completion",
    "rejected": "the request was rejected",
    "config": "no API key: set api_key_env to the variable holding it "
    "(or the provider's standard variable, e.g. OPENAI_API_KEY)",
}
_STATUS_HINTS = {
    400: "the request was rejected (bad request); check the model's parameters",
    401: "authentication failed; check the API key (api_key_env) for this provider",
    403: "permission denied; check the API key's access to this model",
    404: "not found; check the model name and api_base",
    413: "the request is too large; shorten the conversation",
    422: "the request was rejected as unprocessable; check the model's parameters",
}


def _public_url(url: str) -> str:
    """``url`` without user info or query string (they may carry credentials)."""
    return re.sub(r"//[^/@]*@", "//", url).split("?", 1)[0]


def _provider_error(
    call: _CallPlan, settings: ModelSettings, failure: _Failure, attempts: int
) -> ProviderError:
    hint = _STATUS_HINTS.get(failure.status_code or 0, _HINTS[failure.kind])
    if failure.kind == "timeout" and settings.timeout_s is not None:
        hint = f"timed out after {settings.timeout_s:g}s; raise timeout_s or check the endpoint"
    status = f"HTTP {failure.status_code}, " if failure.status_code else ""
    tries = f" (gave up after {attempts} attempts)" if attempts > 1 else ""
    where = f" at {_public_url(settings.api_base)}" if settings.api_base else ""
    message = (
        f"{call.provider} model {call.model!r}{where} failed: {status}{hint}{tries}. "
        f"Provider said: {failure.reason}"
    )
    return ProviderError(
        message,
        provider=call.provider,
        model=call.model,
        kind=failure.kind,
        status_code=failure.status_code,
        attempts=attempts,
    )
