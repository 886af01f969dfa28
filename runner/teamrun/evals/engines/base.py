"""What an engine does: run one batch row or one eval case, with the code every engine shares."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from teamrun.defaults import team_models

if TYPE_CHECKING:
    from teamrun.config.loader import LoadedConfig
    from teamrun.evals.cases import LoadedCases
    from teamrun.evals.guarded import Ceiling
    from teamrun.evals.records import CaseResult, InputRow
    from teamrun.events import Subscriber
    from teamrun.llm.types import ChatModel

__all__ = ["ENGINES", "Engine", "EngineName", "chat_model_for"]

EngineName = Literal["local", "ray"]
ENGINES: tuple[EngineName, ...] = ("local", "ray")


class Engine(Protocol):
    """Runs rows and cases; ``start`` before the first, ``close`` after the last (both may block)."""

    def start(self) -> None: ...

    def close(self) -> None: ...

    async def run_row(self, row: InputRow, ceiling: Ceiling) -> dict[str, Any]:
        """The row's result record (a failed run is a record too)."""
        ...

    async def run_case(self, cases: LoadedCases, index: int, subscribers: Sequence[Subscriber] = ()) -> CaseResult:
        """Case ``index`` of ``cases``, run and checked."""
        ...


def chat_model_for(
    loaded: LoadedConfig, *, model: str | None = None, replay: str | None = None, extra_models: Sequence[str] = ()
) -> ChatModel:
    """The chat model every run of a batch or eval shares: the router, or a cassette's replies.

    LiteLLM is imported here (not inside the first call) when a model of the team
    or ``extra_models`` (judges) needs it, and never for the ``offline`` model.
    """
    if replay is not None:
        from teamrun.llm.cassette import ReplayModel

        return ReplayModel(replay)
    from teamrun.llm.router import ModelRouter

    router = ModelRouter()
    models = team_models(loaded.config.agents.values(), loaded.config.defaults, override=model)
    router.prepare([m for m in [*models, *extra_models] if m])
    return router
