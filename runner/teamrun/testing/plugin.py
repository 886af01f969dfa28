"""teamrun's pytest plugin (loaded through the ``pytest11`` entry point when teamrun is installed).

Fixtures:

* ``team_factory(source, **load_team_kwargs)`` — a :class:`~teamrun.engine.team.Team`
  from a path or from YAML text; runs on the ``offline`` model unless a
  ``chat_model``, ``replay`` or ``record`` is given.
* ``run_team(team_or_source, input, **kwargs)`` — runs it and returns the
  :class:`~teamrun.engine.result.RunResult`; the events are kept for
  :func:`~teamrun.testing.assert_tools_called`.
* ``scripted_model(script)`` — a strict :class:`~teamrun.testing.ScriptedModel`;
  unused steps or calls past the script fail the test at teardown.
* ``teamrun_cassette`` — a model replaying ``cassettes/<test name>.jsonl`` next
  to the test file (or the path in ``@pytest.mark.teamrun_cassette(path)``);
  ``pytest --teamrun-record`` records it afresh against the real providers.

And an autouse guard: a test that connects to anything but loopback fails,
unless marked ``@pytest.mark.teamrun_allow_network`` (or the ini option
``teamrun_network_guard = false`` switches the guard off).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from teamrun.defaults import DEFAULT_MODEL
from teamrun.testing.assertions import EventRecorder
from teamrun.testing.network import NetworkGuard
from teamrun.testing.scripted import ScriptedModel, Step

if TYPE_CHECKING:
    from teamrun.engine.result import RunResult
    from teamrun.engine.team import Team
    from teamrun.llm.types import ChatModel

ALLOW_NETWORK = "teamrun_allow_network"
CASSETTE = "teamrun_cassette"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("teamrun")
    group.addoption(
        "--teamrun-record",
        action="store_true",
        default=False,
        help="teamrun: record the cassettes of tests using the teamrun_cassette fixture afresh, "
        "against the real providers (the network guard is lifted for them).",
    )
    parser.addini(
        "teamrun_network_guard",
        type="bool",
        default=True,
        help="teamrun: fail tests that connect to non-loopback addresses (default: true).",
    )
    parser.addini(
        "teamrun_cassette_dir",
        default="cassettes",
        help="teamrun: folder, next to each test file, of the teamrun_cassette fixture's cassettes.",
    )


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price-table download
    config.addinivalue_line(
        "markers", f"{ALLOW_NETWORK}: let this test reach non-loopback addresses (real model providers)."
    )
    config.addinivalue_line(
        "markers",
        f"{CASSETTE}(path, mode='strict'): the cassette the teamrun_cassette "
        "fixture replays (relative to the test file).",
    )


@pytest.fixture(autouse=True)
def _teamrun_network_guard(request: pytest.FixtureRequest) -> Iterator[NetworkGuard | None]:
    """Fail the test if it connects to anything but loopback (no real providers in tests)."""
    recording = request.config.getoption("teamrun_record") and CASSETTE in request.fixturenames
    if (
        not request.config.getini("teamrun_network_guard")
        or recording
        or request.node.get_closest_marker(ALLOW_NETWORK) is not None
    ):
        yield None
        return
    with NetworkGuard() as guard:
        yield guard
    if guard.attempts:
        pytest.fail(
            f"test tried to reach the network: {', '.join(guard.attempts)} "
            f"(mark it @pytest.mark.{ALLOW_NETWORK} if it must)",
            pytrace=False,
        )


TeamFactory = Callable[..., "Team"]


@pytest.fixture
def team_factory(tmp_path: Path) -> TeamFactory:
    """``team_factory(path_or_yaml, **load_team_kwargs)`` → a loaded team (offline model by default)."""
    from teamrun.engine.team import load_team

    def make(source: str | Path, **kwargs: Any) -> Team:
        path = Path(source) if isinstance(source, Path) or "\n" not in source else None
        if path is None:
            path = tmp_path / f"team-{len(list(tmp_path.glob('team-*.yaml')))}.yaml"
            path.write_text(str(source), encoding="utf-8")
        if not any(kwargs.get(k) is not None for k in ("chat_model", "replay", "record")):
            kwargs.setdefault("model", DEFAULT_MODEL)
        return load_team(path, **kwargs)

    return make


RunTeam = Callable[..., "RunResult"]


@pytest.fixture
def run_team(team_factory: TeamFactory) -> RunTeam:
    """``run_team(team_or_source, input, **team_factory_kwargs)`` → the run's result (events recorded)."""

    def run(team: Team | str | Path, input: str, **kwargs: Any) -> RunResult:
        from teamrun.engine.team import Team

        loaded = team if isinstance(team, Team) else team_factory(team, **kwargs)
        return loaded.run_sync(input, subscribers=[EventRecorder()])

    return run


@pytest.fixture
def scripted_model() -> Iterator[Callable[..., ScriptedModel]]:
    """``scripted_model({"lead": [...], "researcher": [...]})`` → a strict model, checked at teardown."""
    made: list[ScriptedModel] = []

    def make(script: Mapping[str, Sequence[Step]] | None = None) -> ScriptedModel:
        model = ScriptedModel(script)
        made.append(model)
        return model

    yield make
    for model in made:
        model.assert_complete()


def _cassette_path(request: pytest.FixtureRequest) -> tuple[Path, str]:
    base = Path(str(request.node.path)).parent
    marker = request.node.get_closest_marker(CASSETTE)
    if marker is not None and (marker.args or "path" in marker.kwargs):
        raw = Path(marker.args[0] if marker.args else marker.kwargs["path"])
        path = raw if raw.is_absolute() else base / raw
    else:
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name).strip("_")
        path = base / str(request.config.getini("teamrun_cassette_dir")) / f"{name}.jsonl"
    mode = str(marker.kwargs.get("mode", "strict")) if marker is not None else "strict"
    return path, mode


@pytest.fixture
def teamrun_cassette(request: pytest.FixtureRequest) -> ChatModel:
    """A model replaying this test's cassette, or recording it with ``pytest --teamrun-record``."""
    from teamrun.llm.cassette import RecordingModel, ReplayModel

    path, mode = _cassette_path(request)
    if request.config.getoption("teamrun_record"):
        from teamrun.llm.router import ModelRouter

        return RecordingModel(ModelRouter(), path)
    if not path.exists():
        pytest.fail(
            f"cassette {path} does not exist; record it with: pytest --teamrun-record {request.node.nodeid}",
            pytrace=False,
        )
    return ReplayModel(path, mode="lenient" if mode == "lenient" else "strict")
