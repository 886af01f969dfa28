"""An endpoint that carries user info (`http://user:KEY@host/v1`) is refused without repeating the key: the
refusal printed the whole URL, key and all, on validate's output and a run's error (attack a44, noticed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrun.cli import main

KEY = "sk-proj-Zt81nQ0xLw4Kd9Ry7Vb2"


@pytest.mark.parametrize("url", [f"http://user:{KEY}@127.0.0.1:8000/v1", f"http://user:{KEY}@127.0.0.1:99999/v1"])
def test_validate_refuses_an_endpoint_with_user_info_without_saying_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        f"version: 1\nname: t\nsupervisor: lead\nagents:\n  lead: {{model: openai/x, api_base: '{url}'}}\n",
        encoding="utf-8",
    )

    code = main(["validate", str(team)])

    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "api_base" in out
    assert KEY not in out + err
