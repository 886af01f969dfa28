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
    # pip is told to install the checkout's path, whose last folder is named teamrun when `git clone` made
    # it, never the bare project name `teamrun[postgres]` the package index would be asked for
    assert done.stderr.count("pip install ") == 1, done.stderr
    installed = shlex.split(done.stderr.split("pip install ", 1)[1])
    assert installed == ["-e", f"{CHECKOUT}[postgres]"]
    assert not installed[-1].startswith("teamrun[")
