"""The test tiers (tests/tiers.py): every test lands in the tier of what it uses, and the in-process
tier cannot hide a server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import tiers

SAMPLE = """
import subprocess
import sys

import pytest

from helpers import served


def _spawn():
    return subprocess.run([sys.executable, "-c", "pass"])


def _indirect():
    return _spawn()


def test_pure():
    assert 1 + 1 == 2


def test_with_the_fake(fake_openai):
    pass


def test_through_a_helper_of_a_helper():
    _indirect()


def test_through_an_imported_helper():
    served()


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_stores(store):
    pass


@pytest.mark.outofprocess("a team file with a server, marked by hand")
def test_by_hand():
    pass
"""


def test_each_test_lands_in_the_tier_of_what_it_uses(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
        import pytest

        from tests import tiers


        def pytest_collection_modifyitems(items):
            tiers.mark(items)


        @pytest.fixture
        def fake_openai():
            yield None
    """)
    pytester.makepyfile(helpers="import subprocess\n\ndef served():\n    subprocess.Popen(['x'])\n")
    pytester.makepyfile(test_sample=SAMPLE)

    fast = pytester.runpytest("-m", "inprocess", "--collect-only", "-q", "-p", "no:cacheprovider")
    slow = pytester.runpytest("-m", "outofprocess", "--collect-only", "-q", "-p", "no:cacheprovider")

    assert [line for line in fast.outlines if "::" in line] == [
        "test_sample.py::test_pure",
        "test_sample.py::test_stores[sqlite]",
    ]
    assert sorted(line for line in slow.outlines if "::" in line) == sorted(
        [
            "test_sample.py::test_with_the_fake",
            "test_sample.py::test_through_a_helper_of_a_helper",
            "test_sample.py::test_through_an_imported_helper",
            "test_sample.py::test_stores[postgres]",
            "test_sample.py::test_by_hand",
        ]
    )


def test_the_in_process_guard_sees_a_server_started_but_not_a_tool_command(tmp_path: Path) -> None:
    node = tmp_path / "node"  # stands in for a server program
    node.write_text("#!/bin/sh\nexit 0\n")
    node.chmod(0o755)

    with tiers.started_processes() as started:
        subprocess.run([str(node), "server.js"], check=True)
        subprocess.run([sys.executable, "-c", "pass", "/tmp/pytest-of-me/x"], check=True)  # a tool's command
        subprocess.run(["true"], check=True)

    assert started == [f"{node} server.js"]
