"""The circuit breaker's rule on a stepped clock (issue 45.1): closed, open for the cool-down, one half-open
probe; only the model's health counts (a context too long for it is the request's problem)."""

from __future__ import annotations

import asyncio

import pytest

from teamrun.errors import ModelError
from teamrun.llm.adapter import ProviderError
from teamrun.llm.breaker import BreakerRegistry
from teamrun.llm.fallbacks import complete_in_order
from teamrun.llm.types import ModelReply, ModelSettings


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_three_failures_open_it_for_the_cool_down_then_one_probe_decides() -> None:
    clock = Clock()
    breaker = BreakerRegistry(clock=clock).of("openai/a", "http://a/v1/")
    for _ in range(3):
        assert breaker.admit() is None
        breaker.failed()

    assert breaker.admit() == "circuit open after 3 failed calls (30s of its cool-down left)"
    clock.now = 30.0
    assert breaker.admit() is None  # the probe
    assert breaker.admit() == "circuit half-open (a probe call is out)"
    breaker.failed()
    assert breaker.admit() is not None
    clock.now = 60.0
    assert breaker.admit() is None
    breaker.succeeded()
    assert breaker.admit() is None and breaker.admit() is None


def test_one_breaker_per_model_and_endpoint() -> None:
    registry = BreakerRegistry()
    assert registry.of("openai/a", "http://a/v1/") is registry.of(" openai/a", "http://a/v1")
    assert registry.of("openai/a", "http://a/v1") is not registry.of("openai/a", "http://b/v1")
    assert registry.of("openai/a", None) is not registry.of("openai/b", None)


def _failing(kind: str, status: int | None = None) -> ProviderError:
    return ProviderError(f"{kind}!", provider="openai", model="openai/a", kind=kind, status_code=status)  # type: ignore[arg-type]


def test_a_context_too_long_falls_back_but_never_opens_the_breaker() -> None:
    registry = BreakerRegistry(clock=Clock())
    settings = ModelSettings(model="openai/a", fallbacks=(ModelSettings(model="openai/b"),))

    async def ask(one: ModelSettings) -> ModelReply:
        if one.model == "openai/a":
            raise _failing("context_window", 400)
        return ModelReply(text="from b")

    replies = [asyncio.run(complete_in_order(ask, settings, registry)) for _ in range(5)]

    assert {r.fallback for r in replies} == {"openai/b after openai/a failed: context too long for it (HTTP 400)"}
    assert registry.of("openai/a", None).admit() is None


def test_a_cancelled_probe_lets_the_next_call_probe() -> None:
    clock = Clock()
    registry = BreakerRegistry(clock=clock, failures_to_open=1)
    registry.of("openai/a", None).failed()
    clock.now = 30.0
    settings = ModelSettings(model="openai/a", fallbacks=(ModelSettings(model="openai/b"),))

    async def cancelled(one: ModelSettings) -> ModelReply:
        raise asyncio.CancelledError

    async def answers(one: ModelSettings) -> ModelReply:
        return ModelReply(text=f"from {one.model}")

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(complete_in_order(cancelled, settings, registry))
    reply = asyncio.run(complete_in_order(answers, settings, registry))

    assert reply.text == "from openai/a" and reply.fallback is None and reply.answered_by == "openai/a"


def test_a_model_error_that_is_not_the_providers_ends_the_list_with_its_own_error() -> None:
    settings = ModelSettings(model="offline", fallbacks=(ModelSettings(model="openai/b"),))

    async def ask(one: ModelSettings) -> ModelReply:
        raise ModelError("the simulator refused")

    with pytest.raises(ModelError, match=r"^the simulator refused$"):
        asyncio.run(complete_in_order(ask, settings, BreakerRegistry()))
