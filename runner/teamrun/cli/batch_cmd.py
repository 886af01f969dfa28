"""``teamrun batch``: one run per input row, resumable."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from teamrun.cli.options import LINE_PROGRESS_MODES, api_base_option, check_api_base, limit_rates, progress_option
from teamrun.errors import UsageError

HELP = """Run a team once per row of a JSON-lines inputs file.

Each row is {"input": "...", "vars": {...}, "id": "..."} (vars and id are
optional; a bare JSON string is an input). Each finished row is appended to
OUTPUT as one JSON line (id, status, final_text, usage, cost...); a row that
fails is recorded and the batch goes on. Rerun the same command after an
interruption: rows OUTPUT already has are skipped. When the batch ends OUTPUT
is in input order. --rpm/--tpm are per model (and endpoint), shared by all
workers, over the team file's rate_limit.

--engine ray runs the rows on Ray workers (a Ray started on this machine, or
the cluster --ray-address names) with the same results, progress, budgets and
rate limits; this process still writes OUTPUT. On a cluster every node needs
teamrun installed and the team file at the same path.

\b
Examples:
  teamrun batch teams/research-report.yaml examples/eval/inputs.jsonl -o results.jsonl
  teamrun batch team.yaml inputs.jsonl -o out.jsonl --workers 8 --rpm 500 --tpm 200000
  teamrun batch team.yaml inputs.jsonl -o out.jsonl --row-max-cost 0.05 --max-cost 10
  teamrun batch team.yaml inputs.jsonl -o out.jsonl --retry-failed
  teamrun batch team.yaml inputs.jsonl -o out.jsonl --engine ray --ray-address ray://head:10001 --workers 64

Exit codes: 0 every row done, 1 some row failed or hit its budget, 2 invalid
files or usage, 3 --max-cost reached with rows left (rerun to continue).
"""


@click.command("batch", help=HELP, short_help="Run a team once per input row (resumable).")
@click.argument("team_file", type=click.Path(dir_okay=False))
@click.argument("inputs_file", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    metavar="OUTPUT",
    help="The results file (JSON lines); rows it already has are skipped.",
)
@click.option("--workers", type=click.IntRange(min=1), default=4, show_default=True, help="Rows run at once.")
@click.option(
    "--rpm", type=click.IntRange(min=1), help="Model requests per minute of each model, all workers together."
)
@click.option("--tpm", type=click.IntRange(min=1), help="Tokens per minute of each model, all workers together.")
@click.option(
    "--row-max-cost",
    type=click.FloatRange(min=0),
    metavar="USD",
    help="Stop a row's run past this cost (the row is recorded as budget_exhausted).",
)
@click.option("--row-max-tokens", type=click.IntRange(min=1), help="Stop a row's run past this many tokens.")
@click.option(
    "--row-timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Stop a row's run after this long.",
)
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0),
    metavar="USD",
    help="Start no more rows once the batch has spent this much.",
)
@click.option("--retry-failed", is_flag=True, help="Run again the rows OUTPUT records as not done.")
@click.option("--model", help="Use this LiteLLM model for every agent (e.g. offline).")
@api_base_option
@progress_option(
    LINE_PROGRESS_MODES,
    "A progress line (done/failed/cost/ETA) on stderr (auto: redrawn in place on a terminal, "
    "a line per update otherwise, none with -q; plain: a line per update; none: off).",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Where rows run: this process (asyncio), or Ray workers (the ray extra: "
    "pip install '.[ray]' in the teamrun checkout).",
)
@click.option(
    "--ray-address",
    metavar="ADDRESS",
    help="With --engine ray: the cluster to join (ray://head:10001); default: a Ray started here.",
)
def batch(
    team_file: str,
    inputs_file: str,
    output: str,
    workers: int,
    rpm: int | None,
    tpm: int | None,
    row_max_cost: float | None,
    row_max_tokens: int | None,
    row_timeout: float | None,
    max_cost: float | None,
    retry_failed: bool,
    model: str | None,
    progress: str,
    engine: str,
    ray_address: str | None,
    api_base: str | None = None,
) -> int:
    from teamrun.cli.eval_cmd import build_chat_model, end_progress, progress_printer, ray_engine
    from teamrun.cli.execute_cmd import _log_settings
    from teamrun.config.loader import load_config
    from teamrun.evals.batch import read_inputs, run_batch
    from teamrun.evals.engines import Engine
    from teamrun.evals.guarded import Ceiling

    check_api_base(api_base)
    loaded = load_config(team_file)
    rows = read_inputs(inputs_file)
    target = Path(output)
    if target.resolve() == Path(inputs_file).resolve():
        raise UsageError("--output must not be the inputs file")
    runner: Engine
    if engine == "ray":
        runner = ray_engine(
            loaded, workers=workers, address=ray_address, model=model, rpm=rpm, tpm=tpm, api_base=api_base
        )
    else:
        from teamrun.evals.engines.local import LocalEngine

        if ray_address is not None:
            raise UsageError("--ray-address needs --engine ray")
        chat_model = build_chat_model(loaded, None, None, model, [])
        limit_rates(rpm, tpm)  # every run of this process, per model
        runner = LocalEngine(loaded, chat_model=chat_model, model=model, api_base=api_base)
    ceiling = Ceiling(row_max_cost, row_max_tokens, row_timeout, label="row")
    printer = progress_printer(progress, "rows")
    runner.start()
    try:
        outcome = asyncio.run(
            run_batch(
                loaded,
                rows,
                target,
                workers=workers,
                row_ceiling=ceiling,
                max_total_cost=max_cost,
                retry_failed=retry_failed,
                on_progress=printer,
                engine=runner,
            )
        )
    finally:
        runner.close()
    end_progress(printer)
    summary = (
        f"batch: {outcome.ran} row(s) run, {outcome.skipped} already in {output}, "
        f"{outcome.failed} not done, cost {outcome.cost_text()}"
    )
    if not outcome.usage_known:
        summary += " (some rows reported no usage"
        summary += f"; --max-cost ({max_cost}) could not limit them)" if max_cost is not None else ")"
    if outcome.stopped_by is not None:
        summary += f"; stopped by {outcome.stopped_by} with {outcome.left} row(s) left (rerun to continue)"
    if _log_settings().verbosity >= 0:
        click.echo(summary, err=True)
    if outcome.stopped_by is not None and outcome.left:
        return 3
    return 1 if outcome.failed else 0
