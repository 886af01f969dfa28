"""The npm server the MCP tests run against is the pinned one, and runs on the Node that runs it (issue 33.1).

Debian 12's nodejs is 18; the newest server-everything resolved @hono/node-server 2.x, which needs Node 20:
npm only warned (and ``--silent`` hid the warning), and the server then answered every request with
``MCPError: Parse error``. ``.ci/server-everything/package.json`` pins the server and keeps that
dependency on 1.x; the ``everything_url`` fixture refuses an install that is not that one, or that has a
package this Node does not support, with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.mcp_servers.conftest import PINNED_EVERYTHING, everything_install_problems, node_supports


@pytest.mark.parametrize(
    ("version", "spec", "supported"),
    [
        ("v18.20.4", ">=20", False),
        ("v20.20.2", ">=20", True),
        ("v18.20.4", ">=18.14.1", True),
        ("v18.20.4", ">= 0.4", True),
        ("v18.20.4", ">=16.20.0", True),
        ("v18.20.4", "^18.14.1 || >=20", True),
        ("v16.20.0", "^18.14.1 || >=20", False),
        ("v18.20.4", "^20.17.0 || >=22.9.0", False),
        ("v18.20.4", ">=14 <18", False),
        ("v18.20.4", "~18.20.1", True),
        ("v18.19.0", "~18.20.1", False),
        ("v18.20.4", "*", True),
        ("v18.20.4", "1.x - 2", None),
    ],
)
def test_node_supports_reads_engine_ranges(version: str, spec: str, supported: bool | None) -> None:
    assert node_supports(version, spec) is supported


def _install(directory: Path, manifest: bytes, packages: dict[str, str]) -> Path:
    """A server-everything folder as npm leaves it: ``manifest`` and a package per name with its engines."""
    directory.mkdir()
    (directory / "package.json").write_bytes(manifest)
    for name, node in packages.items():
        folder = directory / "node_modules" / name
        folder.mkdir(parents=True)
        (folder / "package.json").write_text(json.dumps({"name": name, "version": "2.1.11", "engines": {"node": node}}))
    return directory


def test_a_dependency_that_needs_a_newer_node_is_named(tmp_path: Path) -> None:
    folder = _install(
        tmp_path / "everything", PINNED_EVERYTHING.read_bytes(), {"@hono/node-server": ">=20", "express": ">= 18"}
    )

    assert everything_install_problems(folder, "v18.20.4") == [
        "@hono/node-server@2.1.11 needs node >=20, this is v18.20.4"
    ]
    assert everything_install_problems(folder, "v20.20.2") == []


def test_an_install_that_is_not_the_pinned_one_is_named(tmp_path: Path) -> None:
    unpinned = b'{"dependencies": {"@modelcontextprotocol/server-everything": "^2026.8.31"}}\n'
    folder = _install(tmp_path / "everything", unpinned, {"express": ">= 18"})

    assert everything_install_problems(folder, "v20.20.2") == [
        f"{folder / 'package.json'} is not a copy of {PINNED_EVERYTHING}"
    ]


def test_the_pin_keeps_the_server_on_node_18() -> None:
    """What install-and-test installs: one exact server version, @hono/node-server held below 2 (Node >= 20)."""
    manifest = json.loads(PINNED_EVERYTHING.read_text(encoding="utf-8"))

    version = manifest["dependencies"]["@modelcontextprotocol/server-everything"]
    assert version[0].isdigit(), "pin an exact version: a new release may change the tools the tests call"
    assert manifest["overrides"]["@hono/node-server"].startswith("^1.")
