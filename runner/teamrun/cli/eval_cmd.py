"""``teamrun eval``: run a team on test cases and check its answers."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import click

from teamrun.cli.options import LINE_PROGRESS_MODES, api_base_option, check_api_base, progress_option
from teamrun.errors import UsageError

HELP = """Run a team on every case of a cases file and check the answers.

A cases file (JSON Schema: schemas/cases.schema.json) lists inputs, vars and
checks (contains, regex, json_schema, python: module:fn, judge: an LLM judge
with a rubric and a pass threshold), with cost/token/latency ceilings per
case. Cases run concurrently, each as its own run; a progress line goes to
stderr. The result table (or --format json|junit|html) goes to stdout, or to
--output FILE.

\b
Examples:
  teamrun eval teams/research-report.yaml examples/eval/research-cases.yaml
  teamrun eval team.yaml cases.yaml --format junit -o eval.xml
  teamrun eval team.yaml cases.yaml --format json -o today.json --baseline yesterday.json
  teamrun eval team.yaml cases.yaml --record eval.cassette.jsonl   # once, with real models
  teamrun eval team.yaml cases.yaml --replay eval.cassette.jsonl   # deterministic, in CI

--engine ray runs the cases on Ray workers (a Ray started on this machine, or
the cluster --ray-address names) with the same results; see `teamrun batch --help`.

Exit codes: 0 when the pass rate is at least --min-pass, 1 under it,
2 invalid files or usage.
"""


@click.command("eval", help=HELP, short_help="Run a team on test cases and check the answers.")
@click.argument("team_file", type=click.Path(dir_okay=False))
@click.argument("cases_file", type=click.Path(dir_okay=False))
@click.option("--concurrency", type=click.IntRange(min=1), default=4, show_default=True, help="Cases run at once.")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json", "junit", "html"]),
    default="table",
    show_default=True,
    help="How to report (json is also what --baseline reads).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Write the report to FILE instead of stdout.",
)
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="A previous --format json report: mark regressions and improvements per case.",
)
@click.option(
    "--min-pass",
    type=click.FloatRange(0, 1),
    default=1.0,
    show_default=True,
    help="Exit 1 when the share of passing cases is under this (0 to 1).",
)
@click.option("--model", help="Use this LiteLLM model for every agent of the team (not for judges).")
@api_base_option
@click.option(
    "--record",
    "record_path",
    type=click.Path(dir_okay=False),
    metavar="CASSETTE",
    help="Store every model exchange (judges included) in CASSETTE for --replay.",
)
@click.option(
    "--replay",
    "replay_path",
    type=click.Path(dir_okay=False),
    metavar="CASSETTE",
    help="Answer every model call (judges included) from CASSETTE, with no network.",
)
@progress_option(
    LINE_PROGRESS_MODES,
    "A progress line (done/failed/cost/ETA) on stderr (auto: redrawn in place on a terminal, "
    "a line per update otherwise, none with -q; plain: a line per update; none: off).",
)
@click.option(
    "--traces",
    "traces_dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Write each case's trace to DIR/<case>.jsonl (the HTML report links them). "
    "Default with --format html -o FILE: FILE's name + '-traces/' beside it. Local engine only.",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Where cases run: this process (asyncio), or Ray workers (the ray extra: "
    "pip install '.[ray]' in the teamrun checkout).",
)
@click.option(
    "--ray-address",
    metavar="ADDRESS",
    help="With --engine ray: the cluster to join (ray://head:10001); default: a Ray started here.",
)
def eval_(
    team_file: str,
    cases_file: str,
    concurrency: int,
    output_format: str,
    output: str | None,
    baseline: str | None,
    min_pass: float,
    model: str | None,
    record_path: str | None,
    replay_path: str | None,
    progress: str,
    traces_dir: str | None,
    engine: str,
    ray_address: str | None,
    api_base: str | None = None,
) -> int:
    from teamrun.config.loader import load_config
    from teamrun.engine.remote.cards import with_remote_tokens
    from teamrun.evals.cases import load_cases
    from teamrun.evals.engines import Engine
    from teamrun.evals.evaluate import compare_with_baseline, evaluate
    from teamrun.evals.report import FORMATS

    if record_path is not None and replay_path is not None:
        raise UsageError("--record and --replay exclude each other: record a real eval, then replay it")
    if engine == "ray" and record_path is not None:
        raise UsageError(
            "--record runs on the local engine only (every Ray worker would write its own "
            "cassette): record without --engine ray, then --replay on either engine"
        )
    if engine != "ray" and ray_address is not None:
        raise UsageError("--ray-address needs --engine ray")
    check_api_base(api_base)
    loaded = with_remote_tokens(load_config(team_file))  # the traces and a recording mask the bearer tokens too
    cases = load_cases(cases_file)
    previous = _read_baseline(baseline) if baseline is not None else None
    runner: Engine
    if engine == "ray":
        runner = ray_engine(
            loaded,
            workers=concurrency,
            address=ray_address,
            model=model,
            replay=replay_path,
            extra_models=cases_models(cases),
            api_base=api_base,
        )
    else:
        from teamrun.evals.engines.local import LocalEngine

        chat_model = build_chat_model(loaded, record_path, replay_path, model, cases_models(cases))
        runner = LocalEngine(loaded, chat_model=chat_model, model=model, api_base=api_base)
    printer = progress_printer(progress, "cases")
    if engine == "ray" and traces_dir is not None:
        raise UsageError("--traces needs --engine local: Ray workers do not send their events back")
    traces = _case_traces(traces_dir, output_format, output, loaded) if engine == "local" else None
    runner.start()
    try:
        report = asyncio.run(
            evaluate(
                loaded,
                cases,
                concurrency=concurrency,
                on_progress=printer,
                engine=runner,
                subscribers_for=traces.subscribers_for if traces is not None else None,
            )
        )
    finally:
        runner.close()
    end_progress(printer)
    if previous is not None:
        assert baseline is not None
        compare_with_baseline(report, previous, baseline)
    if output_format == "html" and traces is not None:
        from teamrun.evals.report import render_html

        text = render_html(report, traces=traces.links(output, report.results))
    else:
        text = FORMATS[output_format](report)
    if output is not None:
        try:
            Path(output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write --output {output}: {exc.strerror}") from None
        click.echo(f"eval: {report.passed}/{len(report.results)} passed; report written to {output}", err=True)
    else:
        click.echo(text, nl=False)
    if report.pass_rate < min_pass:
        click.echo(f"eval: pass rate {report.pass_rate:.0%} is under --min-pass {min_pass:.0%}", err=True)
        return 1
    return 0


def _case_traces(traces_dir: str | None, output_format: str, output: str | None, loaded: Any) -> Any:
    """A trace file per case: in ``--traces DIR``, or beside an HTML report written with ``-o``."""
    from teamrun.cli.eval_traces import CaseTraces, default_traces_dir
    from teamrun.secrets import Redactor

    if traces_dir is None and output_format == "html" and output is not None:
        traces_dir = str(default_traces_dir(output))
    return CaseTraces(traces_dir, Redactor(loaded.secrets)) if traces_dir is not None else None


def cases_models(cases: Any) -> list[str]:
    """The judges' models, so LiteLLM is imported before the cases start if one needs it."""
    defaults = cases.cases.defaults
    checks = [*(defaults.checks if defaults else []), *(c for case in cases.cases.cases for c in case.checks)]
    return [c.judge.model for c in checks if c.judge is not None]


def build_chat_model(
    loaded: Any, record: str | None, replay: str | None, model: str | None, extra_models: list[str]
) -> Any:
    """The one chat model every run and judge shares: the router, recorded or replayed."""
    from teamrun.evals.engines.base import chat_model_for

    chat_model = chat_model_for(loaded, model=model, replay=replay, extra_models=extra_models)
    if record is not None and replay is None:
        from teamrun.llm.cassette import RecordingModel
        from teamrun.secrets import Redactor

        return RecordingModel(chat_model, record, redactor=Redactor(loaded.secrets))
    return chat_model


def ray_engine(
    loaded: Any,
    *,
    workers: int,
    address: str | None,
    model: str | None,
    replay: str | None = None,
    extra_models: list[str] | None = None,
    rpm: int | None = None,
    tpm: int | None = None,
    api_base: str | None = None,
) -> Any:
    """The Ray engine for ``--engine ray`` (Ray itself is imported when it starts)."""
    from teamrun.evals.engines.ray_engine import RayEngine, WorkerSpec

    spec = WorkerSpec.for_team(loaded, model=model, replay=replay, extra_models=extra_models or [], api_base=api_base)
    return RayEngine(spec, workers=workers, address=address, rpm=rpm, tpm=tpm)


def _read_baseline(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read --baseline {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"--baseline {path} is not JSON ({exc.msg} at line {exc.lineno}); give a report "
            "written by `teamrun eval --format json`"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise UsageError(f"--baseline {path} is not a `teamrun eval --format json` report (no 'cases' list)")
    return data


class _ProgressLine:
    """The progress line of eval and batch: redrawn in place (``auto`` on a terminal) or a line per update."""

    def __init__(self, noun: str, live: bool) -> None:
        self.noun = noun
        self.live = live

    def __call__(self, progress: Any) -> None:
        line = f"{'eval' if self.noun == 'cases' else 'batch'}: {progress.line(self.noun)}"
        if self.live:
            click.echo(f"\r\x1b[2K{line}", err=True, nl=False)
        else:
            click.echo(line, err=True)


def progress_printer(mode: str, noun: str) -> _ProgressLine | None:
    """What ``--progress MODE`` shows of many runs: ``auto`` is nothing with ``-q``, the line redrawn in
    place on a terminal, a line per update otherwise; ``plain`` a line per update; ``none`` nothing."""
    from teamrun.cli.execute_cmd import _log_settings

    if mode == "none" or (mode == "auto" and _log_settings().verbosity < 0):
        return None
    return _ProgressLine(noun, live=mode == "auto" and sys.stderr.isatty())


def end_progress(printer: _ProgressLine | None) -> None:
    """End a line redrawn in place (the next output starts on a line of its own)."""
    if printer is not None and printer.live:
        click.echo("", err=True)
