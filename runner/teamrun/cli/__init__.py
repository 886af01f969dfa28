"""The ``teamrun`` command line.

Commands are small functions; :func:`main` is the one place that turns errors
into messages and exit codes (0 done, 1 run failed, 2 invalid config or usage,
3 budget exhausted, 4 waiting for a person, 130 interrupted). Nothing here imports litellm at module
level: ``teamrun --help`` and ``teamrun validate`` must start fast.
"""

from __future__ import annotations

import sys

import click

from teamrun.cli.app import cli, errors_as_json
from teamrun.errors import ConfigError, RunError, UserError

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_USAGE = 2
EXIT_BUDGET = 3
EXIT_WAITING = 4
EXIT_INTERRUPTED = 130

__all__ = ["cli", "main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns (and exits with) the exit code."""
    logs = sys.modules.get("teamrun.logs")
    if logs is not None:  # a command line before this one (tests) chose a log format; a first one has not
        logs.forget_configured_format()
    try:
        code = cli.main(args=argv, prog_name="teamrun", standalone_mode=False)
    except click.exceptions.Abort:
        code = _error(argv, "interrupted", "interrupted", EXIT_INTERRUPTED)
    except click.ClickException as exc:
        if errors_as_json(argv):
            usage = exc.ctx.get_usage() if isinstance(exc, click.UsageError) and exc.ctx is not None else None
            _error(
                argv,
                "usage_error",
                exc.format_message(),
                exc.exit_code,
                **({"usage": usage.removeprefix("Usage: ")} if usage else {}),
            )
        else:
            exc.show()
        code = exc.exit_code
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except ConfigError as exc:
        if errors_as_json(argv):  # one line per `file:line:col: error: ...` diagnostic
            for line in str(exc).splitlines():
                _error(argv, "config_error", line, EXIT_USAGE)
        else:
            click.echo(str(exc), err=True)  # already `file:line:col: error: ...` lines
        code = EXIT_USAGE
    except UserError as exc:
        code = _error(argv, "usage_error", f"error: {exc}", EXIT_USAGE)
    except RunError as exc:
        code = _error(argv, "run_failed", f"run failed: {exc}", EXIT_RUN_FAILED)
    except KeyboardInterrupt:
        code = _error(argv, "interrupted", "interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:
        code = EXIT_OK
    code = code if isinstance(code, int) else EXIT_OK
    if argv is None:
        sys.exit(code)
    return code


def _error(argv: list[str] | None, event: str, text: str, code: int, **fields: str) -> int:
    """Say an error on stderr: as text, or as one JSON log line under ``--log-format json``."""
    if errors_as_json(argv):
        from teamrun.logs import log_line

        click.echo(log_line("error", event, message=text.removeprefix("error: "), exit_code=code, **fields), err=True)
    else:
        click.echo(text, err=True)
    return code
