"""The checkout is what gets tested: an engineer who edits ``runner/teamrun`` tests that code."""

from __future__ import annotations

from pathlib import Path

import teamrun

REPO = Path(__file__).resolve().parents[1]


def test_pytest_imports_the_working_tree_not_an_installed_copy() -> None:
    assert Path(teamrun.__file__).resolve() == REPO / "runner" / "teamrun" / "__init__.py"


def test_the_version_comes_from_package_metadata() -> None:
    from importlib import metadata

    assert teamrun.__version__ == metadata.version("teamrun")
