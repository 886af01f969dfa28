"""The team-file language's main test: two folders of examples.

``valid/*.yaml`` (and the ready-made ``teams/``) must validate; each
``invalid/<case>.yaml`` holds one mistake and must fail with exactly the text
kept beside it in ``<case>.expected`` — what a user sees, path and all.

After a deliberate change to a message, rewrite the expected files with
``TEAMRUN_UPDATE_EXPECTED=1 pytest tests/config/test_validate_corpus.py`` and
read the diff: every line must still say what is wrong and where.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from teamrun.config.loader import check_file, load_config
from teamrun.config.models import TeamConfig

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
VALID = sorted([*(HERE / "valid").glob("*.yaml"), *(REPO / "teams").glob("*.y*ml")])
INVALID = sorted((HERE / "invalid").glob("*.yaml"))
UPDATE = os.environ.get("TEAMRUN_UPDATE_EXPECTED") == "1"
LOCATED = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<severity>error|warning): (?P<message>.+)$")


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def test_the_corpus_is_big_enough() -> None:
    assert len(VALID) >= 7
    assert len(INVALID) >= 45
    expected = {p.stem for p in (HERE / "invalid").glob("*.expected")}
    assert expected == {p.stem for p in INVALID}, "every invalid case needs its .expected file, and only those"


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_valid_file_passes(path: Path, cli: Callable[..., object]) -> None:
    result = cli(["validate", _rel(path)])
    assert (result.code, result.out) == (0, "1 file valid\n")  # type: ignore[attr-defined]
    assert TeamConfig.model_validate(check_file(_rel(path)).data)


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_file_fails_with_the_expected_message(path: Path, cli: Callable[..., object]) -> None:
    shown = _rel(path)
    result = cli(["validate", shown])
    expected_file = path.with_suffix(".expected")
    if UPDATE:
        expected_file.write_text(result.out)  # type: ignore[attr-defined]
    assert result.code == 2  # type: ignore[attr-defined]
    assert result.out == expected_file.read_text()  # type: ignore[attr-defined]
    assert result.err == ""  # type: ignore[attr-defined]


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_expected_messages_point_into_the_file(path: Path) -> None:
    """Every expected line names the file and a line:col that exists in it."""
    lines = path.read_text().splitlines() or [""]
    *diagnostics, summary = path.with_suffix(".expected").read_text().splitlines()
    assert diagnostics, "an invalid case must produce at least one diagnostic"
    assert re.fullmatch(r"1 of 1 file invalid: \d+ errors?(, \d+ warnings?)?", summary)
    for text in diagnostics:
        located = LOCATED.match(text)
        assert located, text
        assert located["file"] == _rel(path)
        line, col = int(located["line"]), int(located["col"])
        assert 1 <= line <= len(lines), text
        assert 1 <= col <= len(lines[line - 1]) + 1, text


def test_one_mistake_per_invalid_case() -> None:
    """The corpus tests messages one at a time: each case reports exactly one error."""
    several = {
        # a bad name is wrong where it is defined and where it is referenced
        "name_bad_agent": 2,
        "name_bad_tool": 2,
    }
    for path in INVALID:
        errors = [line for line in path.with_suffix(".expected").read_text().splitlines() if ": error: " in line]
        assert len(errors) == several.get(path.stem, 1), path.name


def test_every_mistake_in_a_file_is_reported_at_once(tmp_path: Path, cli: Callable[..., object]) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\n"  # 1
        "name: many-mistakes\n"  # 2
        "supervisor: lead\n"  # 3
        "defaults: {model: '${TEAMRUN_TEST_NOPE}'}\n"  # 4  unset variable
        "agents:\n"  # 5
        "  lead:\n"  # 6
        "    descripton: typo\n"  # 7  unknown key
        "    delegates_to: [writer, ghost]\n"  # 8  unknown agent
        "    instructions: 'Hi {{ name'\n"  # 9  bad template
        "    delegation:\n"  # 10
        "      output_mode: summary\n"  # 11 bad enum
        "      message_filter: {drop_matching: ['(']}\n"  # 12 bad regex
        "  writer:\n"  # 13
        "    delegates_to: [lead]\n"  # 14 cycle
        "    budget: {max_steps: 0}\n"  # 15 out of range
        "    tools: [grep]\n"  # 16 unknown tool
    )
    result = cli(["validate", str(team)])
    assert result.code == 2  # type: ignore[attr-defined]
    *lines, summary = result.out.splitlines()  # type: ignore[attr-defined]
    assert summary == "1 of 1 file invalid: 9 errors"
    located = [LOCATED.match(line) for line in lines]
    assert all(located), lines
    assert [(int(m["line"]), int(m["col"])) for m in located if m] == [
        (4, 20),
        (7, 5),
        (8, 28),
        (9, 19),
        (11, 20),
        (12, 40),
        (14, 20),
        (15, 25),
        (16, 13),
    ]
    text = result.out  # type: ignore[attr-defined]
    for needle in (
        "TEAMRUN_TEST_NOPE is not set",
        "unknown key 'descripton' in agents.lead; did you mean 'description'?",
        "agent 'ghost' is not defined",
        "template error in agents.lead.instructions",
        'must be one of "last_message", "full_history", not "summary"',
        "invalid regular expression '('",
        "delegation cycle: lead → writer → lead",
        "agents.writer.budget.max_steps must be >= 1, not 0",
        "tool 'grep' is not defined",
    ):
        assert needle in text


def test_merge_keys_keep_the_position_of_overriding_keys(tmp_path: Path, cli: Callable[..., object]) -> None:
    """An explicit key next to `<<: *base` is reported where it is written, not at the anchor."""
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\n"
        "name: merged\n"
        "supervisor: a\n"
        "agents:\n"
        "  a: &base\n"
        "    temperature: 1\n"
        "    delegates_to: [b]\n"
        "  b:\n"
        "    <<: *base\n"
        "    delegates_to: []\n"
        "    temperature: 9\n"
    )
    result = cli(["validate", str(team)])
    assert result.out.splitlines()[0] == (  # type: ignore[attr-defined]
        f"{team}:11:18: error: agents.b.temperature must be <= 2, not 9"
    )


def test_load_config_builds_the_merged_and_interpolated_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    merged = load_config(HERE / "valid" / "anchors_merge.yaml").config
    assert merged.agents["bear"].model == "openai/gpt-4o-mini"  # from the merged anchor
    assert merged.agents["bear"].description == "Argues against the proposal."  # explicit wins
    assert merged.agents["bear"].temperature == 0.3
    assert merged.tools is not None and merged.tools["more_notes"].command == ["cat", "{{ file }}"]

    plain = load_config(HERE / "valid" / "interpolation.yaml").config
    assert plain.name == "interpolated"
    assert plain.limits is not None and plain.limits.max_steps == 12  # typed after substitution
    assert plain.defaults is not None and plain.defaults.stream is False
    assert plain.vars == {
        "greeting": "hello, world",
        "literal": "costs ${PRICE} dollars",
        "empty_default": "",
    }

    monkeypatch.setenv("TEAMRUN_TEST_MAX_STEPS", "30")
    monkeypatch.setenv("TEAMRUN_TEST_API_TOKEN", "s3cr3t")
    monkeypatch.setenv("TEAMRUN_TEST_GREETING", "${TEAMRUN_TEST_API_TOKEN}")  # values are not re-expanded
    again = load_config(HERE / "valid" / "interpolation.yaml")
    assert again.config.limits is not None and again.config.limits.max_steps == 30
    assert again.config.vars is not None and again.config.vars["greeting"] == "${TEAMRUN_TEST_API_TOKEN}"
