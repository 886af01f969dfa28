"""The suite's one wait (tests/waiting.py): what it returns, and what its failures say."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from tests.waiting import wait_until, wait_until_async


class _Ended:
    """A child process that has already ended with code 3."""

    returncode = 3

    def poll(self) -> int:
        return 3


def test_wait_until_returns_what_the_condition_gave_once_it_held() -> None:
    counts = itertools.count()
    assert wait_until(lambda: [n] if (n := next(counts)) >= 2 else None, "the third poll", pause_s=0) == [2]


def test_a_wait_that_runs_out_says_what_was_awaited_and_where_things_stood() -> None:
    with pytest.raises(AssertionError) as failed:
        wait_until(lambda: False, "the run's journal entry", guard_s=0, where=lambda: "2 requests")
    assert str(failed.value) == "not within the 0 s hang guard: the run's journal entry; where things stood: 2 requests"


def test_a_wait_on_a_process_that_ended_fails_at_once() -> None:
    with pytest.raises(AssertionError, match=r"^the process ended \(exit 3\) before: the slow call$"):
        wait_until(lambda: False, "the slow call", alive=_Ended())


def test_an_async_wait_fails_at_once_when_the_task_it_waits_beside_ended() -> None:
    async def scenario() -> None:
        async def fails() -> None:
            raise RuntimeError("boom")

        task = asyncio.create_task(fails())
        await asyncio.wait([task])  # it has ended
        await wait_until_async(lambda: False, "the tool's start", alive=task)

    with pytest.raises(
        AssertionError, match=r"^the task ended \(raised RuntimeError\('boom'\)\) before: the tool's start"
    ):
        asyncio.run(scenario())
