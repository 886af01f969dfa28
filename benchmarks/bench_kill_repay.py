#!/usr/bin/env python
"""How many finished replies a SIGKILL makes a resume pay again (issue 22, item 17).

    python benchmarks/bench_kill_repay.py                    # SQLite, kills at 0.2 .. 1.0 s
    python benchmarks/bench_kill_repay.py --store postgresql://... --kills 0.3 0.6

The 30-worker fan-out of ``tests/journal/test_kill_durable.py`` (150 ms latency, each worker asks for a tool
then answers) is journaled by ``teamrun execute`` in a subprocess and SIGKILLed a given time after its first
request; then ``teamrun resume`` finishes it. For each kill point: the requests in flight at the kill (the
server had not answered them), and the replies paid again (answered before the kill, asked again by the
resume), and how many of those the engine had acted on (its next request had reached the server). A reply
durable before the engine acts on it leaves none of the latter: what is paid again is what the engine had
not read yet (on a loaded machine the client can lag hundreds of milliseconds behind the server).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for _path in (str(REPO), str(REPO / "tests")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from tests.fakeserver import FakeOpenAI  # noqa: E402
from tests.journal.test_kill_durable import Server, _env, _team, _teamrun, _worker  # noqa: E402


def _key(request: dict[str, Any]) -> tuple[str, int]:
    """``(agent, call number)`` of a request, as :class:`Server` names it."""
    agent = (
        "lead"
        if "ask_w1" in json.dumps(request.get("tools") or [])
        else _worker(str(request["messages"][0]["content"]))
    )
    return agent, 2 if any(m["role"] == "tool" for m in request["messages"]) else 1


def _once(kill_after_s: float, store: str | None, tmp: Path) -> tuple[int, int, int, int, int]:
    """``(replies answered before the kill, requests in flight at the kill, replies journaled, replies paid
    again, of which the engine had acted on)``: acted on is a worker's first reply when its second request
    (carrying the tool result) had reached the server, the lead's when a worker's request had."""
    store_url = store or f"sqlite:///{tmp / f'kill-{kill_after_s}.db'}"
    with FakeOpenAI() as fake:
        server = Server(fake)
        team = _team(tmp, fake.url)
        process = subprocess.Popen(
            _teamrun("execute", str(team), "-i", "go", "--store", store_url, "--progress", "none"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        while not fake.requests() and process.poll() is None:
            time.sleep(0.005)
        time.sleep(kill_after_s)
        with server.lock:
            os.kill(process.pid, signal.SIGKILL)
            at_kill = time.time()
            arrived = list(server.arrived)
        process.communicate(timeout=60)
        time.sleep(0.2)  # the server logs a request once it has answered it
        records = fake.requests()
        answered = {_key(r.request) for r in records if r.status == 200 and r.end and r.end <= at_kill}
        in_flight = len(server.arrived) - len(answered)
        journaled = _journaled(store_url)
        listed = subprocess.run(
            _teamrun("runs", "list", "--store", store_url, "--json"),
            capture_output=True,
            text=True,
            env=_env(),
            timeout=120,
        )
        run_id = json.loads(listed.stdout)[0]["run_id"]
        server.arrived.clear()
        resumed = subprocess.run(
            _teamrun("resume", run_id, "--store", store_url, "--progress", "none"),
            capture_output=True,
            text=True,
            env=_env(),
            timeout=600,
        )
        if resumed.returncode != 0:
            raise RuntimeError(resumed.stderr)
        repaid = set(server.arrived) & answered
    acted_on = {(agent, 1) for agent, call in arrived if call == 2} | ({("lead", 1)} if len(arrived) > 1 else set())
    return len(answered), in_flight, journaled, len(repaid), len(repaid & acted_on)


def _journaled(store_url: str) -> int:
    import sqlalchemy as sa

    engine = sa.create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT count(*) FROM journal WHERE kind = 'model'")).scalar_one())
    finally:
        engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", help="A PostgreSQL URL (default: a SQLite file per kill point).")
    parser.add_argument(
        "--kills",
        type=float,
        nargs="+",
        default=[0.2, 0.4, 0.6, 0.8, 1.0],
        help="Seconds after the first request at which the run is killed.",
    )
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    print(
        f"{'kill at (s)':>12} {'answered':>9} {'in flight':>10} {'journaled':>10} {'re-paid':>8} "
        f"{'re-paid, acted on':>18}"
    )
    with tempfile.TemporaryDirectory(prefix="teamrun-kill-") as tmp:
        for kill in args.kills:
            answered, in_flight, journaled, repaid, acted = _once(kill, args.store, Path(tmp))
            print(f"{kill:>12.2f} {answered:>9} {in_flight:>10} {journaled:>10} {repaid:>8} {acted:>18}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
