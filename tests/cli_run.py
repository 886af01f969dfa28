"""``teamrun`` run in this process, as a user runs it (through its one error handler: exit codes as a user sees
them), with stdout and stderr captured. For a child process, see tests/cli_processes.py."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass

from teamrun.cli import main

__all__ = ["CliResult", "run_cli"]


@dataclass
class CliResult:
    """What a ``teamrun`` command did: its exit code and what it wrote."""

    code: int
    out: str
    err: str


def run_cli(argv: list[str], env: dict[str, str] | None = None) -> CliResult:
    """``teamrun ARGV`` in this process, stdout and stderr captured; ``env`` is set for the command only."""
    out, err = io.StringIO(), io.StringIO()
    with _environment(env or {}), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return CliResult(code, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
