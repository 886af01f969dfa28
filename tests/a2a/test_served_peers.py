"""Two `teamrun serve` processes delegate to each other's teams over A2A: team alpha (server 1) has an
``a2a:`` worker that is team beta of server 2, and team gamma (server 2) one that is team delta of server 1.
Each run's events show the other server's task (``remote_update`` with its task id), and that task is a
run the other server's runs API knows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.a2a.served_agents import AUTH, TOKEN, served
from tests.serve.conftest import free_port, until_run

pytestmark = pytest.mark.outofprocess("two `teamrun serve` processes")


def _team(folder: Path, name: str, remote: str | None = None) -> Path:
    path = folder / f"{name}.yaml"
    if remote is None:
        agents = "agents:\n  lead: {description: Answers., instructions: Answer the task.}\n"
    else:
        agents = (
            "agents:\n"
            "  lead: {description: Delegates., instructions: Ask the peer., delegates_to: [peer]}\n"
            f"  peer:\n    description: The other server's team.\n"
            f"    a2a: {{url: '{remote}', auth: {{bearer_env: PEER_TOKEN}}, timeout_s: 120}}\n"
        )
    path.write_text(
        f"version: 1\nname: {name}\ndescription: Team {name}.\nsupervisor: lead\ndefaults: {{model: offline}}\n"
        + agents,
        encoding="utf-8",
    )
    return path


def _finished(url: str, team: str, text: str) -> tuple[dict[str, Any], str]:
    with httpx.Client(base_url=url, headers=AUTH, timeout=120) as client:
        run_id = client.post("/v1/runs", json={"team": team, "input": text}).json()["id"]
        record = until_run(client, run_id, lambda r: r["status"] != "running", "its end")
        return record, client.get(f"/v1/runs/{run_id}/events").text


def test_two_servers_delegate_to_each_others_teams(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PEER_TOKEN", TOKEN)
    one, two = free_port(), free_port()
    alpha = _team(tmp_path, "alpha", f"http://127.0.0.1:{two}/a2a/beta")
    gamma = _team(tmp_path, "gamma", f"http://127.0.0.1:{one}/a2a/delta")
    beta, delta = _team(tmp_path, "beta"), _team(tmp_path, "delta")
    with (
        served(str(alpha), str(delta), port=one) as first,
        served(str(beta), str(gamma), port=two) as second,
    ):
        for here, team, there in ((first, "alpha", second), (second, "gamma", first)):
            record, events = _finished(here.url, team, f"question for {team}")
            assert record["status"] == "done", record
            remote = [line for line in events.splitlines() if line.startswith("data:") and "remote_update" in line]
            assert remote, events
            task_ids = {httpx.Response(200, content=line[5:]).json()["data"]["task_id"] for line in remote}
            [task_id] = task_ids
            peer_run = httpx.get(f"{there.url}/v1/runs/{task_id}", headers=AUTH).json()  # the other's task = run
            assert peer_run["status"] == "done" and peer_run["team"] == ("beta" if team == "alpha" else "delta")
            assert peer_run["final_text"] and peer_run["final_text"][:40] in record["final_text"]
