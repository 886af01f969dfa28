"""The ``teamrun`` command line.

Commands are small functions; :func:`main` is the one place that turns errors
into messages and exit codes (0 done, 1 run failed, 2 invalid config or usage,
3 budget exhausted, 130 interrupted). Nothing here imports litellm at module
level: ``teamrun --help`` and ``teamrun validate`` must start fast.
"""

from __future__ import annotations

import sys

import click

from teamrun import __version__
from teamrun.cli.app import cli
from teamrun.errors import ConfigError, RunError, UserError

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_USAGE = 2
EXIT_BUDGET = 3
EXIT_INTERRUPTED = 130

__all__ = ["cli", "main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns (and exits with) the exit code."""
    try:
        code = cli.main(args=argv, prog_name="teamrun", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        code = EXIT_INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        code = exc.exit_code
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except ConfigError as exc:
        click.echo(str(exc), err=True)  # already `file:line:col: error: ...` lines
        code = EXIT_USAGE
    except UserError as exc:
        click.echo(f"error: {exc}", err=True)
        code = EXIT_USAGE
    except RunError as exc:
        click.echo(f"run failed: {exc}", err=True)
        code = EXIT_RUN_FAILED
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        code = EXIT_OK
    code = code if isinstance(code, int) else EXIT_OK
    if argv is None:
        sys.exit(code)
    return code


_ = __version__
