"""`teamrun validate` quotes a bad name with its bidi controls escaped (attack report a42, D5): a U+202E
RIGHT-TO-LEFT OVERRIDE in the file must not reverse the rest of the error line on a terminal."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrun.cli import main


def test_a_bad_name_holding_a_bidi_override_is_quoted_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        'version: 1\nname: "bad\\u202ename"\nsupervisor: "a\\u2067b"\ndefaults: {model: offline}\n'
        'agents:\n  "a\\u2067b":\n    instructions: hi\n',
        encoding="utf-8",
    )

    code = main(["validate", str(team)])

    out = capsys.readouterr().out
    assert code == 2
    assert "\u202e" not in out and "\u2067" not in out, out
    assert "team name 'bad\\u202ename' is not allowed" in out
    assert "'a\\u2067b'" in out
