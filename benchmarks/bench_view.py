#!/usr/bin/env python
"""The run view at scale: a 1,000-worker trace next to a 10-worker one, in headless Chromium.

    python benchmarks/bench_view.py                       # 10 and 1,000 workers
    python benchmarks/bench_view.py --sizes 10,1000,3000 --repeats 9

For each size, in the same process and the same browser: a fan-out run is
recorded in-process (the scripted model, content on: every model call's
messages are in the trace), ``teamrun trace view`` writes its page, and
Chromium (the system ``chromium``) opens it. Measured, each the median of
``--repeats``:

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

_LOAD = """() => { const n = performance.getEntriesByType("navigation")[0]; return n.loadEventEnd - n.startTime; }"""


def measure(page_file: Path, browser: object, repeats: int) -> dict[str, float]:
    loads, renders, clicks = [], [], []
    page = browser.new_page(viewport={"width": 1400, "height": 1000})  # type: ignore[attr-defined]
    for _ in range(repeats):
        page.goto(page_file.as_uri())
        page.wait_for_load_state("load")
        loads.append(float(page.evaluate(_LOAD)))
    for _ in range(repeats):
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,1000", help="worker counts, comma-separated (default 10,1000)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from playwright.sync_api import sync_playwright

    from teamrun.cli import main as teamrun_main
    from tests.view.fanout import record_fan_out

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("the system chromium is needed (apt-get install chromium)", file=sys.stderr)
        return 2
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        pages = {}
        for size in sizes:
            trace = record_fan_out(Path(folder), size)
            started = time.perf_counter()
            assert teamrun_main(["trace", "view", str(trace)]) == 0
            pages[size] = (trace.with_suffix(".html"), (time.perf_counter() - started) * 1000)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            try:
                for size in sizes:
                    results[size] = measure(pages[size][0], browser, args.repeats)
                    results[size]["write"] = pages[size][1]
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
