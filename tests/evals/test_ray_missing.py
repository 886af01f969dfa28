"""`--engine ray` when Ray is not installed: a one-line error naming the extra to install.

Apart from tests/evals/test_ray_engine.py so that hiding Ray never overlaps the Ray those tests run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from teamrun.cli import main
from teamrun.extras import install_hint

REPO = Path(__file__).resolve().parents[2]
TEAM = str(REPO / "teams" / "research-report.yaml")


def test_engine_ray_without_ray_installed_says_how_to_install_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as when it is not installed
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text(json.dumps({"input": "Compare Rust and Go"}) + "\n", encoding="utf-8")
    cases = tmp_path / "cases.yaml"
    cases.write_text("version: 1\ncases:\n  - {name: one, input: Compare Rust and Go}\n", encoding="utf-8")

    for argv in (
        ["batch", TEAM, str(inputs), "-o", str(tmp_path / "out.jsonl"), "--engine", "ray"],
        ["eval", TEAM, str(cases), "--engine", "ray"],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err == f"error: --engine ray needs Ray, an optional extra of teamrun: {install_hint('ray')}\n"
    assert main(["batch", TEAM, str(inputs), "-o", str(tmp_path / "out.jsonl"), "--ray-address", "ray://x:1"]) == 2
    assert "--ray-address needs --engine ray" in capsys.readouterr().err


def test_a_ray_address_nobody_answers_on_fails_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Ray itself retries a wrong address for minutes; teamrun says so in one line instead."""
    import socket

    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text(json.dumps({"input": "Compare Rust and Go"}) + "\n", encoding="utf-8")
    argv = [
        "batch",
        TEAM,
        str(inputs),
        "-o",
        str(tmp_path / "out.jsonl"),
        "--engine",
        "ray",
        "--ray-address",
        f"127.0.0.1:{port}",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot reach the Ray cluster at 127.0.0.1:{port}: ")
    assert "Traceback" not in err
