"""Install hints for teamrun's extras are commands that work when pasted (issue 22, item 29)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from teamrun.extras import install_hint

CHECKOUT = Path(__file__).resolve().parents[1]


def test_in_the_checkout_the_hint_is_an_editable_install_of_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CHECKOUT)
    assert install_hint("serve") == "pip install -e '.[serve]'"


def test_elsewhere_the_hint_names_the_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    hint = install_hint("otel")
    assert shlex.split(hint) == ["pip", "install", "-e", f"{CHECKOUT}[otel]"]


def test_for_another_machine_or_an_installed_copy_it_says_where_to_run_pip() -> None:
    assert install_hint("ray", here=False) == "pip install '.[ray]' in the teamrun checkout"


def test_no_hint_names_a_package_index_project(tmp_path: Path) -> None:
    """A store URL whose driver is missing says how to add the postgres extra, never ``teamrun[postgres]``."""
    script = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from teamrun.cli import main\n"
        "sys.exit(main(['runs', 'list', '--store', 'postgresql+psycopg://u@127.0.0.1:1/db']))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "teamrun[" not in done.stderr
    assert f"pip install -e {shlex.quote(f'{CHECKOUT}[postgres]')}" in done.stderr, done.stderr
