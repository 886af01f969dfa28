#!/usr/bin/env python
"""The run view at scale: a 1,000-worker trace next to a 10-worker one, in headless Chromium.

    python benchmarks/bench_view.py                       # 10 and 1,000 workers, this view and the baseline's
    python benchmarks/bench_view.py --sizes 10,1000,3000 --repeats 9
    python benchmarks/bench_view.py --baseline-rev HEAD~3    # against another commit's view (git show)
    python benchmarks/bench_view.py --baseline-rev none      # this view only

For each size, in the same process and the same browser: a fan-out run is
recorded in-process (the scripted model, content on: every model call's
messages are in the trace), ``teamrun trace view`` writes its page, and
Chromium (the system ``chromium``) opens it. Measured, each the median of
``--repeats`` (each repeat in a fresh tab; the new and the baseline page take turns):

- **page load**: navigation start to the ``load`` event of the page (parse the
  embedded JSON, build the model, draw everything: the view draws synchronously
  in its script, so ``load`` waits for it);
- **render**: one full redraw of the view (``teamrunView.render()``, what a live
  view does at most every 150 ms while events arrive), timed in the page with
  ``performance.now()``, layout included (a forced reflow after it);
- **click**: a click on the last worker's model call until its details are drawn.

Also the page's size and its DOM element count. Printed as a table with the
ratio of each size to the smallest; nothing is asserted (timings on a shared
machine move; the ratios say whether the view grows linearly with the run).

The **baseline**, measured in the same run and the same browser: the same
trace drawn by the view files of ``--baseline-rev`` (default: the commit the
issue-36 view started from, :data:`BASELINE_REV`), read with ``git show
<rev>:runner/teamrun/observe/view/<file>`` (its ``render_page`` too) into a
page of their own. A second table gives new/old for each figure: below 1 is
faster (or smaller) than the baseline.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "runner"), str(ROOT)]

_RENDER = """() => {
  const t = performance.now();
  window.teamrunView.render();
  document.body.getBoundingClientRect();  // layout now, not later
  void document.body.offsetHeight;
  return performance.now() - t;
}"""

BASELINE_REV = "99ef597b596e5c81df5544e7b90b9c7f923a8826"
"""The commit before issue 36's view (its rows, lanes, filters): the view the new one must not be slower than."""

VIEW_DIR = "runner/teamrun/observe/view"

_LOAD = """() => { const n = performance.getEntriesByType("navigation")[0]; return n.loadEventEnd - n.startTime; }"""


def measure(page_file: Path, browser: object, repeats: int) -> dict[str, float]:
    loads, renders, clicks = [], [], []
    page = browser.new_page(viewport={"width": 1400, "height": 1000})  # type: ignore[attr-defined]
    for _ in range(repeats):
        page.goto(page_file.as_uri())
        page.wait_for_load_state("load")
        loads.append(float(page.evaluate(_LOAD)))
    for _ in range(max(repeats, 3)):  # the first redraws warm the page's code up: the median of at least 3
        renders.append(float(page.evaluate(_RENDER)))
    bars = page.locator(".tv-row[data-agent=worker] .tv-bar.tv-llm")
    last = bars.nth(bars.count() - 1)
    for _ in range(repeats):
        page.evaluate("document.getElementById('tv-details').hidden = true")
        start = time.perf_counter()
        last.click()
        page.wait_for_selector("#tv-details:not([hidden]) .tv-messages")
        clicks.append((time.perf_counter() - start) * 1000)
    elements = int(page.evaluate("document.querySelectorAll('*').length"))
    page.close()
    return {
        "load": statistics.median(loads),
        "render": statistics.median(renders),
        "click": statistics.median(clicks),
        "elements": elements,
        "bytes": page_file.stat().st_size,
    }


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def baseline_page(records: list[dict[str, object]], rev: str, target: Path) -> Path:
    """``records`` drawn by the view of commit ``rev`` (its files and its ``render_page``), written to ``target``."""
    import subprocess

    def show(name: str) -> str:
        return subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{rev}:{VIEW_DIR}/{name}"], check=True, capture_output=True, text=True
        ).stdout

    namespace: dict[str, object] = {"__name__": "baseline_view"}
    exec(compile(show("__init__.py"), f"{rev}:{VIEW_DIR}/__init__.py", "exec"), namespace)  # our own file, from git
    files = {name: show(name) for name in ("model.js", "view.js", "markdown.js", "view.css")}
    namespace["asset"] = files.__getitem__  # render_page reads its files through asset()
    render = namespace["render_page"]
    target.write_text(render(records, title="baseline"), encoding="utf-8")  # type: ignore[operator]
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,1000", help="worker counts, comma-separated (default 10,1000)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--baseline-rev",
        default=BASELINE_REV,
        help=f"the commit whose view is the baseline ('none': no baseline; default {BASELINE_REV[:10]})",
    )
    args = parser.parse_args()
    compare = args.baseline_rev.lower() != "none"
    sizes = [int(s) for s in args.sizes.split(",")]

    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from playwright.sync_api import sync_playwright

    from teamrun.cli import main as teamrun_main
    from teamrun.observe.trace_read import read_trace
    from tests.view.fanout import record_fan_out

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("the system chromium is needed (apt-get install chromium)", file=sys.stderr)
        return 2
    results: dict[int, dict[str, float]] = {}
    old: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        pages, old_pages = {}, {}
        for size in sizes:
            trace = record_fan_out(Path(folder), size)
            started = time.perf_counter()
            assert teamrun_main(["trace", "view", str(trace)]) == 0
            pages[size] = (trace.with_suffix(".html"), (time.perf_counter() - started) * 1000)
            if compare:
                started = time.perf_counter()
                target = Path(folder) / f"baseline-{size}.html"
                old_pages[size] = (
                    baseline_page(read_trace(trace).records, args.baseline_rev, target),
                    (time.perf_counter() - started) * 1000,
                )
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            try:
                for size in sizes:  # new and old in turn, one repeat each: both see the same load on the machine
                    runs_new, runs_old = [], []
                    for _ in range(args.repeats):
                        runs_new.append(measure(pages[size][0], browser, 1))
                        if compare:
                            runs_old.append(measure(old_pages[size][0], browser, 1))
                    results[size] = _median(runs_new) | {"write": pages[size][1]}
                    if compare:
                        old[size] = _median(runs_old) | {"write": old_pages[size][1]}
            finally:
                browser.close()

    base = results[sizes[0]]
    print(f"run view, median of {args.repeats}; ratio = this size / {sizes[0]} workers")
    header = (
        f"{'workers':>8} {'page KiB':>9} {'elements':>9} {'write ms':>9} {'load ms':>9} {'render ms':>10} "
        f"{'click ms':>9} {'load x':>7} {'render x':>9} {'click x':>8}"
    )
    print(header)
    for size in sizes:
        r = results[size]
        print(
            f"{size:>8} {r['bytes'] / 1024:>9.0f} {r['elements']:>9.0f} {r['write']:>9.0f} {r['load']:>9.1f} "
            f"{r['render']:>10.1f} {r['click']:>9.1f} {r['load'] / base['load']:>7.1f} "
            f"{r['render'] / base['render']:>9.1f} {r['click'] / base['click']:>8.1f}"
        )
    if compare:
        print(f"\nbaseline: the view of {args.baseline_rev[:10]}, same traces, same browser")
        print(header)
        for size in sizes:
            r = old[size]
            print(
                f"{size:>8} {r['bytes'] / 1024:>9.0f} {r['elements']:>9.0f} {r['write']:>9.0f} {r['load']:>9.1f} "
                f"{r['render']:>10.1f} {r['click']:>9.1f} {r['load'] / old[sizes[0]]['load']:>7.1f} "
                f"{r['render'] / old[sizes[0]]['render']:>9.1f} {r['click'] / old[sizes[0]]['click']:>8.1f}"
            )
        print("\nnew / old (below 1: the new view is faster or smaller)")
        print(f"{'workers':>8} {'page':>7} {'elements':>9} {'load':>7} {'render':>7} {'click':>7}")
        for size in sizes:
            n, o = results[size], old[size]
            print(
                f"{size:>8} {n['bytes'] / o['bytes']:>7.2f} {n['elements'] / o['elements']:>9.2f} "
                f"{n['load'] / o['load']:>7.2f} {n['render'] / o['render']:>7.2f} {n['click'] / o['click']:>7.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
