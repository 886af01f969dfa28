"""Whether the program of an MCP server entry (``mcp.command[0]``) exists, and how to install it.

A stdio server whose program is missing is a setup problem, not a run failure:
``teamrun validate`` warns about it (at the program's line), and loading the
team for a run refuses it before any model call. Nothing is started here: the
program is looked up the way the server would be started (``PATH`` from the
entry's ``env`` if it sets one; a relative path from the server's working
directory).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

__all__ = ["install_hint", "missing_program"]

_HINTS = {
    "npx": "install Node.js (it provides npx): https://nodejs.org",
    "node": "install Node.js: https://nodejs.org",
    "npm": "install Node.js (it provides npm): https://nodejs.org",
    "uvx": "install uv (it provides uvx): pip install uv",
    "uv": "install uv: pip install uv",
    "docker": "install Docker: https://docs.docker.com/get-docker/",
}


def install_hint(program: str) -> str:
    """How to get ``program``: the package of a reference server, or the tool that provides a launcher."""
    name = Path(program).name
    if name in _HINTS:
        return _HINTS[name]
    if name.startswith("mcp-server-"):
        return f"install it: pip install {name}"
    return "install it, or write its full path"


def missing_program(command: list[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> str | None:
    """Why ``command`` cannot start because its program does not exist, with how to install it;
    ``None`` when the program can be found.

    A program with a variable left in it (``${...}``) is not judged.
    """
    if not command or not isinstance(command[0], str) or "${" in command[0]:
        return None
    program = command[0]
    if os.sep in program or (os.altsep and os.altsep in program):
        path = Path(program)
        path = path if path.is_absolute() else (cwd or Path.cwd()) / path
        if path.is_file() and os.access(path, os.X_OK):
            return None
        return f"the program {program!r} does not exist or is not executable; {install_hint(program)}"
    # the entry's own PATH, else (None) the one shutil.which looks on, as the started server would
    if shutil.which(program, path=(env or {}).get("PATH")) is not None:
        return None
    return f"the program {program!r} is not installed (not found on PATH); {install_hint(program)}"
