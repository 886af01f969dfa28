"""A store left as a killed run leaves it, made in this process without killing anything (fast, in process).

For a run really SIGKILLed in a child process, see tests/cli_processes.py (``killed_run``).
"""

from __future__ import annotations

import json
from pathlib import Path

import sqlalchemy as sa

__all__ = ["DEAD_PID", "killed_during_its_tool"]

DEAD_PID = 2**22 + 4321
"""No such process: a run recorded with it was killed."""


def killed_during_its_tool(store: str | Path, run_id: str) -> None:
    """Leave the SQLite ``store`` as a run SIGKILLed while its command tool ran: the tool's start, no result, and
    the run still marked running by a process that is gone."""
    engine = sa.create_engine(f"sqlite:///{store}")
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM journal WHERE kind = 'tool' OR call_key = '2.0'"))
        meta = json.loads(conn.execute(sa.text("SELECT meta FROM runs WHERE id = :id"), {"id": run_id}).scalar_one())
        meta["pid"] = DEAD_PID
        conn.execute(
            sa.text("UPDATE runs SET status = 'running', meta = :meta WHERE id = :id"),
            {"meta": json.dumps(meta), "id": run_id},
        )
    engine.dispose()
