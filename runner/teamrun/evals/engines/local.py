"""The default engine: rows and cases run on this process's asyncio loop."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from teamrun.config.loader import LoadedConfig
from teamrun.evals.batch import InputRow, run_row
from teamrun.evals.cases import LoadedCases
from teamrun.evals.evaluate import CaseResult, run_case
from teamrun.evals.guarded import Ceiling
from teamrun.events import Subscriber
from teamrun.llm.types import ChatModel

__all__ = ["LocalEngine"]


class LocalEngine:
    """Runs every row and case in this process, all sharing ``chat_model`` (and so its rate limits)."""

    def __init__(
        self, loaded: LoadedConfig, *, chat_model: ChatModel, model: str | None = None, api_base: str | None = None
    ) -> None:
        self.loaded = loaded
        self.chat_model = chat_model
        self.model = model
        self.api_base = api_base

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    async def run_row(self, row: InputRow, ceiling: Ceiling) -> dict[str, Any]:
        return await run_row(
            self.loaded, row, ceiling, chat_model=self.chat_model, model=self.model, api_base=self.api_base
        )

    async def run_case(self, cases: LoadedCases, index: int, subscribers: Sequence[Subscriber] = ()) -> CaseResult:
        return await run_case(
            self.loaded,
            cases,
            index,
            chat_model=self.chat_model,
            model=self.model,
            api_base=self.api_base,
            subscribers=subscribers,
        )
