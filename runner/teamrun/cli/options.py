"""Options several commands share, spelled the same way in each.

``--progress MODE`` is how every command that shows progress on stderr (execute, chat, resume, answer,
approve, deny, eval, batch) is told how to show it; ``--progress none`` turns it off. The spelling
``eval`` and ``batch`` used to have (``--progress/--no-progress``) is still accepted everywhere, with a
one-line hint on stderr naming the new one.

``--api-base URL`` is where the commands that run teams (execute, chat, resume, answer, approve, deny, serve, eval,
batch) call the model of every agent that sets no ``api_base`` of its own.

``--rpm N`` / ``--tpm N`` (execute, chat, serve, batch) are the requests and tokens per minute of every model of
the process, shared by all its runs, over the team file's ``rate_limit`` (:mod:`teamrun.llm.ratelimit`); ``serve
--workers N`` gives each worker process its share.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from teamrun.defaults import API_BASE_ENV

__all__ = [
    "LINE_PROGRESS_MODES",
    "RUN_PROGRESS_MODES",
    "api_base_option",
    "check_api_base",
    "limit_rates",
    "progress_option",
    "rate_limit_options",
    "share_rate_limits",
]

F = TypeVar("F", bound=Callable[..., Any])

RUN_PROGRESS_MODES = ("auto", "tree", "plain", "none")
"""One run's progress: ``auto`` (the tree on a terminal, plain lines otherwise, one JSON line per event with
``--log-format json``, nothing with ``-q``), ``tree``, ``plain``, ``none``."""
LINE_PROGRESS_MODES = ("auto", "plain", "none")
"""Many runs' progress (eval, batch), one counter line: ``auto`` (redrawn in place on a terminal, a line
per update otherwise, nothing with ``-q``), ``plain`` (a line per update), ``none``."""

_BARE = "auto (bare)"
"""The value of ``--progress`` given without a mode (the old flag spelling): ``auto``, with a hint."""
_NO_PROGRESS = "teamrun.cli.options:no-progress"
"""``ctx.meta`` key: ``--no-progress`` was given."""


if TYPE_CHECKING:
    _Choice = click.Choice[str]
else:  # click before 8.2: Choice is not generic at run time
    _Choice = click.Choice


class _Mode(_Choice):
    """A choice of modes that also takes :data:`_BARE` (``--progress`` without a value)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value == _BARE:
            return value
        return super().convert(value, param, ctx)


def progress_option(modes: Sequence[str], help: str) -> Callable[[F], F]:
    """``--progress [MODE]`` (default ``auto``) and the old ``--no-progress`` (hidden; ``--progress none``)."""

    def chosen(ctx: click.Context, param: click.Parameter, value: str) -> str:
        if ctx.meta.get(_NO_PROGRESS):
            return "none"
        if value == _BARE:
            _hint(ctx, "--progress without a mode", "--progress auto")
            return "auto"
        return value

    def no_progress(ctx: click.Context, param: click.Parameter, value: bool) -> None:
        if not value:
            return
        _hint(ctx, "--no-progress", "--progress none")
        ctx.meta[_NO_PROGRESS] = True
        if "progress" in ctx.params:  # --progress came first on the command line: --no-progress still wins
            ctx.params["progress"] = "none"

    def decorate(fn: F) -> F:
        fn = click.option(
            "--no-progress",
            is_flag=True,
            hidden=True,
            expose_value=False,
            callback=no_progress,
            help="The old spelling of --progress none.",
        )(fn)
        return click.option(
            "--progress",
            type=_Mode(list(modes)),
            default="auto",
            show_default=True,
            is_flag=False,
            flag_value=_BARE,
            callback=chosen,
            help=help,
        )(fn)

    return decorate


def _hint(ctx: click.Context, old: str, new: str) -> None:
    """One line on stderr naming the new spelling (a warning line under ``--log-format json``; none with -q)."""
    from teamrun.cli.app import LogSettings

    settings = ctx.find_root().obj
    text = f"teamrun: {old} is spelled {new} now (the old spelling still works)"
    if isinstance(settings, LogSettings):
        if settings.verbosity < 0:
            return
        if settings.log_format == "json":
            from teamrun.logs import log_line

            click.echo(log_line("warning", "old_option_spelling", message=text.removeprefix("teamrun: ")), err=True)
            return
    click.echo(text, err=True)


API_BASE_HELP = (
    "Call the model of every agent that sets no api_base of its own at this URL (an OpenAI-compatible "
    f"server, vLLM, Ollama...) instead of its provider's (default: ${API_BASE_ENV}; not the offline model). "
    "With no API key for the model, a local server gets a placeholder key."
)


def api_base_option(function: F) -> F:
    """``--api-base URL``: the run's endpoint for every agent without its own ``api_base``
    (:func:`teamrun.defaults.run_api_base` falls back to ``$TEAMRUN_API_BASE``)."""
    return click.option("--api-base", "api_base", metavar="URL", help=API_BASE_HELP)(function)


def check_api_base(api_base: str | None) -> None:
    """Refuse a ``--api-base`` (else ``$TEAMRUN_API_BASE``) that is no endpoint URL before any run starts:
    the commands that run many (eval, batch) would otherwise fail every case or row alike."""
    from teamrun.defaults import api_base_problem, run_api_base
    from teamrun.errors import UsageError

    chosen = run_api_base(api_base)
    if chosen is not None and (problem := api_base_problem(chosen)) is not None:
        raise UsageError(f"{'--api-base' if api_base is not None else '$' + API_BASE_ENV}: {problem}")


def limit_rates(rpm: int | None, tpm: int | None) -> None:
    """``--rpm``/``--tpm``: the limit of every model of this process (and of the processes it spawns), over the
    team file's ``rate_limit``."""
    if rpm is None and tpm is None:
        return
    from teamrun.llm.types import RateLimit

    _override(RateLimit(rpm, tpm))


def share_rate_limits(processes: int) -> None:
    """``serve --workers N``: each worker process gets ``1/N`` of ``--rpm``/``--tpm`` (at least 1), so the
    server as a whole holds them."""
    from teamrun.llm.ratelimit import process_rate_limits
    from teamrun.llm.types import RateLimit

    limit = process_rate_limits().override
    if limit is None or processes <= 1:
        return
    rpm, tpm = (limit.requests_per_minute, limit.tokens_per_minute)
    _override(RateLimit(rpm and max(1, rpm // processes), tpm and max(1, tpm // processes)))


def _override(limit: Any) -> None:
    import os

    from teamrun.llm.ratelimit import RATE_LIMIT_ENV, as_environment, process_rate_limits

    process_rate_limits().override = limit
    os.environ[RATE_LIMIT_ENV] = as_environment(limit)  # the worker processes serve spawns start with it


def rate_limit_options(function: F) -> F:
    """``--rpm N`` and ``--tpm N``: :func:`limit_rates` as the command line is read (no parameter of the command)."""

    def taken(ctx: click.Context, param: click.Parameter, value: int | None) -> None:
        if value is not None:
            ctx.meta[f"teamrun.cli.options:{param.name}"] = value
            limit_rates(ctx.meta.get("teamrun.cli.options:rpm"), ctx.meta.get("teamrun.cli.options:tpm"))

    for name, what in (("--tpm", "Tokens"), ("--rpm", "Model requests")):
        function = click.option(
            name,
            type=click.IntRange(min=1),
            expose_value=False,
            callback=taken,
            help=f"{what} per minute of each model, all runs of this process together (over the team file's "
            "rate_limit); runs wait for a slot.",
        )(function)
    return function
