"""The circuit breaker's rule on a stepped clock (issue 45.1): closed, open for the cool-down, one half-open
probe; only the model's health counts (a context too long for it is the request's problem). A resumed run's
breakers hold open what its journal saw fail, for the rest of the cool-down (issue 45, the resume done-when)."""

from __future__ import annotations

import asyncio
import json

import pytest

from teamrun.errors import ModelError
from teamrun.llm.adapter import ProviderError
from teamrun.llm.breaker import BreakerRegistry
from teamrun.llm.cassette import reply_from_dict, reply_to_dict
from teamrun.llm.fallbacks import complete_in_order, hold_open_from_journal
from teamrun.llm.types import ModelReply, ModelSettings
from tests.clock import Clock


def test_three_failures_open_it_for_the_cool_down_then_one_probe_decides() -> None:
    clock = Clock(0.0)
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
    registry = BreakerRegistry(clock=Clock(0.0))
    settings = ModelSettings(model="openai/a", fallbacks=(ModelSettings(model="openai/b"),))

    async def ask(one: ModelSettings) -> ModelReply:
        if one.model == "openai/a":
            raise _failing("context_window", 400)
        return ModelReply(text="from b")

    replies = [asyncio.run(complete_in_order(ask, settings, registry)) for _ in range(5)]

    assert {r.fallback for r in replies} == {"openai/b after openai/a failed: context too long for it (HTTP 400)"}
    assert registry.of("openai/a", None).admit() is None


def test_a_cancelled_probe_lets_the_next_call_probe() -> None:
    clock = Clock(0.0)
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


def _journaled(reply: ModelReply) -> ModelReply:
    """``reply`` as a resumed run reads it back from its journal."""
    return reply_from_dict(json.loads(json.dumps(reply_to_dict(reply))))


def test_a_journaled_failure_holds_a_new_processes_breaker_open_for_the_rest_of_its_cool_down_then_one_probe() -> None:
    settings = ModelSettings(model="openai/a", api_base="http://a/v1", fallbacks=(ModelSettings(model="openai/b"),))
    asked: list[str] = []

    async def a_fails(one: ModelSettings) -> ModelReply:
        asked.append(one.model)
        if one.model == "openai/a":
            raise _failing("server_error", 500)
        return ModelReply(text=f"from {one.model}")

    async def both_answer(one: ModelSettings) -> ModelReply:
        asked.append(one.model)
        return ModelReply(text=f"from {one.model}")

    before = _journaled(asyncio.run(complete_in_order(a_fails, settings, BreakerRegistry(clock=Clock(0.0)))))
    (unwell,) = before.unwell
    assert (unwell.model, unwell.api_base, unwell.open_s) == ("openai/a", "http://a/v1", 30.0)

    clock = Clock(0.0)
    fresh = BreakerRegistry(clock=clock)  # a new process: its breakers know nothing of the earlier attempt
    held = hold_open_from_journal([before], fresh, now=unwell.at + 10.0)
    asked.clear()
    during = asyncio.run(complete_in_order(both_answer, settings, fresh))
    clock.now = 20.0
    probe = asyncio.run(complete_in_order(both_answer, settings, fresh))

    assert [(u.model, left) for u, left in held] == [("openai/a", 20.0)]
    assert during.answered_by == "openai/b"
    assert during.fallback == (
        "openai/b after openai/a skipped: circuit open: it failed in this run's journaled attempt "
        "(20s of its cool-down left)"
    )
    assert during.unwell[0].open_s == 20.0  # journaled again: a later resume holds it to the same end
    assert probe.answered_by == "openai/a" and probe.fallback is None and probe.unwell == ()
    assert asked == ["openai/b", "openai/a"]
    assert fresh.of("openai/a", "http://a/v1").admit() is None  # closed by the probe's answer


def test_the_journal_holds_nothing_open_that_answered_since_is_past_its_cool_down_or_was_the_requests_fault() -> None:
    settings = ModelSettings(model="openai/a", fallbacks=(ModelSettings(model="openai/b"),))

    async def a_fails(one: ModelSettings) -> ModelReply:
        if one.model == "openai/a":
            raise _failing("server_error", 500)
        return ModelReply(text="from b")

    async def a_too_long(one: ModelSettings) -> ModelReply:
        if one.model == "openai/a":
            raise _failing("context_window", 400)
        return ModelReply(text="from b")

    failed = _journaled(asyncio.run(complete_in_order(a_fails, settings, BreakerRegistry(clock=Clock(0.0)))))
    at = failed.unwell[0].at
    answered_later = ModelReply(text="from a", answered_by="openai/a")
    too_long = _journaled(asyncio.run(complete_in_order(a_too_long, settings, BreakerRegistry(clock=Clock(0.0)))))

    assert hold_open_from_journal([failed, answered_later], BreakerRegistry(clock=Clock(0.0)), now=at) == []
    assert hold_open_from_journal([failed], BreakerRegistry(clock=Clock(0.0)), now=at + 30.0) == []
    assert too_long.fallback is not None and too_long.unwell == ()
    assert hold_open_from_journal([too_long], BreakerRegistry(clock=Clock(0.0)), now=at) == []
    clock = Clock(0.0)
    seen = BreakerRegistry(clock=clock)  # a process that saw the model answer after the journaled failure
    clock.now = 100.0
    seen.of("openai/a", None).succeeded()
    clock.now = 105.0
    assert hold_open_from_journal([failed], seen, now=at + 10.0) == []
    assert seen.of("openai/a", None).admit() is None
    assert hold_open_from_journal([failed], BreakerRegistry(clock=Clock(0.0)), now=at + 10.0) != []  # the same, unseen


def test_a_journaled_hold_is_never_longer_than_the_breakers_cool_down() -> None:
    """A journal is data, not a setting: a hold it asks for past the cool-down (a hand-edited or damaged entry,
    ``open_s: 1e9``) holds for the cool-down at most, and a hold that is no number holds nothing."""
    import dataclasses

    settings = ModelSettings(model="openai/a", fallbacks=(ModelSettings(model="openai/b"),))

    async def a_fails(one: ModelSettings) -> ModelReply:
        if one.model == "openai/a":
            raise _failing("server_error", 500)
        return ModelReply(text="from b")

    failed = _journaled(asyncio.run(complete_in_order(a_fails, settings, BreakerRegistry(clock=Clock(0.0)))))
    at = failed.unwell[0].at
    years = dataclasses.replace(failed, unwell=(dataclasses.replace(failed.unwell[0], open_s=1e9),))
    clock = Clock(0.0)
    breakers = BreakerRegistry(clock=clock)
    held = hold_open_from_journal([years], breakers, now=at + 10.0)
    assert [round(left) for _unwell, left in held] == [20]
    assert breakers.of("openai/a", None).left() == pytest.approx(20.0)
    nan = dataclasses.replace(failed, unwell=(dataclasses.replace(failed.unwell[0], open_s=float("nan")),))
    assert hold_open_from_journal([nan], BreakerRegistry(clock=Clock(0.0)), now=at) == []
