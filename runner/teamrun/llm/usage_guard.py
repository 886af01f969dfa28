"""Malformed usage figures never cost a call its answer: they are taken out before LiteLLM reads them.

A provider's answer can carry token counts that are not counts (``completion_tokens: 2.5``, ``"abc"``, ``-5``,
Anthropic's ``cache_read_input_tokens: "5"``). LiteLLM refuses such an answer (its ``Usage`` is a pydantic model
of integers: "Invalid response object", a stream's "unsupported operand"), so the call failed, the answer was
lost and a fallback was asked; or it (or the OpenAI client under it) coerced them (``"12"`` as 12, ``true`` as
1), or read them as 0.

:func:`install` (once, when LiteLLM is imported) wraps the places a provider's usage goes through — LiteLLM's
``Usage`` constructor, Anthropic's ``calculate_usage`` and the OpenAI client's ``CompletionUsage`` reader — so that
a figure which is not a whole number ≥ 0 (a whole float such as ``5.0`` is one) is left out, and the call being
made under :func:`watching` is told: its usage is then unknown (never 0, never priced), and its answer is used.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = ["COUNT_FIELDS", "install", "is_count", "watching"]

COUNT_FIELDS = (
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)
"""The token counts of a usage block (OpenAI's and Anthropic's names)."""

_DETAIL_COUNTS = ("cached_tokens",)
"""Counts inside ``prompt_tokens_details``."""

_USAGE_PARAMETERS = (
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "reasoning_tokens",
    "prompt_tokens_details",
    "completion_tokens_details",
    "server_tool_use",
    "cost",
)
"""``litellm.types.utils.Usage``'s parameters, in order."""

_malformed: ContextVar[list[str] | None] = ContextVar("teamrun_malformed_usage", default=None)


def is_count(value: Any) -> bool:
    """Whether ``value`` is a token count: a whole number ≥ 0 (``None``, absent, is not said here)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return value.is_integer() and value >= 0
    return isinstance(value, int) and value >= 0


@contextmanager
def watching() -> Iterator[list[str]]:
    """For one model call: the malformed usage figures LiteLLM was given while it ran (``name=value``)."""
    found: list[str] = []
    token = _malformed.set(found)
    try:
        yield found
    finally:
        _malformed.reset(token)


def _cleaned(usage: Mapping[str, Any]) -> dict[str, Any]:
    """``usage`` without its malformed counts (each told to the call being watched)."""
    kept = dict(usage)
    bad: list[str] = []
    for name in COUNT_FIELDS:
        value = kept.get(name)
        if value is not None and not is_count(value):
            bad.append(f"{name}={value!r}")
            del kept[name]
    details = kept.get("prompt_tokens_details")
    if isinstance(details, Mapping):
        details = dict(details)
        for name in _DETAIL_COUNTS:
            value = details.get(name)
            if value is not None and not is_count(value):
                bad.append(f"prompt_tokens_details.{name}={value!r}")
                del details[name]
        kept["prompt_tokens_details"] = details
    if bad and (found := _malformed.get()) is not None:
        found.extend(bad)
    return kept


def install(usage_class: Any, anthropic_config: Any) -> None:
    """Wrap LiteLLM's usage readers (idempotent): ``usage_class`` (``litellm.types.utils.Usage``) and
    ``anthropic_config`` (LiteLLM's ``AnthropicConfig``, ``None`` when it has none) — the adapter, which alone
    imports LiteLLM, hands them over — and the OpenAI client's."""
    # the provider's client dumps its own (unchecked) copy of the answer first: its complaint is not the user's
    warnings.filterwarnings(
        "ignore", message=r"Pydantic serializer warnings:\s+PydanticSerializationUnexpectedValue\(Expected `int`"
    )
    if not getattr(usage_class.__init__, "_teamrun_guard", False):
        original_init = usage_class.__init__

        @functools.wraps(original_init)
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            kwargs.update(zip(_USAGE_PARAMETERS, args, strict=False))  # positional arguments, by name
            original_init(self, **_cleaned(kwargs))

        init._teamrun_guard = True  # type: ignore[attr-defined]
        setattr(usage_class, "__init__", init)  # noqa: B010
    _guard_openai_usage()
    if anthropic_config is not None and not getattr(anthropic_config.calculate_usage, "_teamrun_guard", False):
        original_usage = anthropic_config.calculate_usage

        @functools.wraps(original_usage)
        def calculate_usage(self: Any, usage_object: Mapping[str, Any], *args: Any, **kwargs: Any) -> Any:
            if isinstance(usage_object, Mapping):
                usage_object = _cleaned(usage_object)
            return original_usage(self, usage_object, *args, **kwargs)

        calculate_usage._teamrun_guard = True  # type: ignore[attr-defined]
        setattr(anthropic_config, "calculate_usage", calculate_usage)  # noqa: B010


def _guard_openai_usage() -> None:
    """The OpenAI client (LiteLLM's for OpenAI-compatible endpoints) reads an answer's ``usage`` (an optional
    ``CompletionUsage``) with pydantic's lax checks, coercing ``"12"`` to 12 and ``true`` to 1 before LiteLLM sees
    them: its usage is cleaned first (its reader's every nested value goes through ``construct_type``)."""
    from typing import Optional

    import openai._models as models
    from openai.types import CompletionUsage

    if getattr(models.construct_type, "_teamrun_guard", False):
        return
    original = models.construct_type
    usage_types = (CompletionUsage, Optional[CompletionUsage])  # noqa: UP045 - the annotation's own form

    @functools.wraps(original)
    def construct_type(*, value: object, type_: object, metadata: Any = None) -> object:
        if isinstance(value, Mapping) and type_ in usage_types:
            value = _cleaned(value)
        return original(value=value, type_=type_, metadata=metadata)

    construct_type._teamrun_guard = True  # type: ignore[attr-defined]
    setattr(models, "construct_type", construct_type)  # noqa: B010
