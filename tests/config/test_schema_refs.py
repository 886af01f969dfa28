"""`$ref` in an output_schema: local references work, nothing is ever fetched, loops are errors."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from teamrun import load_team
from teamrun.engine.turn.structured import OutputChecker
from teamrun.errors import ConfigError

HERE = Path(__file__).resolve().parent


def test_local_refs_resolve_when_the_team_runs() -> None:
    result = load_team(HERE / "valid" / "output_schema_refs.yaml").run_sync("go")
    assert result.status == "done"
    assert '"facts"' in result.final_text


@pytest.fixture
def schema_server() -> Iterator[tuple[str, list[str]]]:
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            body = b'{"type": "string"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/answer.json", asked
    finally:
        server.shutdown()
        server.server_close()


def test_a_remote_ref_is_never_fetched(schema_server: tuple[str, list[str]], tmp_path: Path) -> None:
    url, asked = schema_server
    team = tmp_path / "team.yaml"
    team.write_text(
        f"version: 1\nname: remote\nsupervisor: lead\nagents:\n  lead:\n    model: offline\n"
        f"    output_schema: {{$ref: '{url}'}}\n"
    )
    with pytest.raises(ConfigError, match="refers outside this schema; teamrun never fetches schemas"):
        load_team(team)
    # the engine's own checker (for schemas that did not come through validation) refuses too
    checker = OutputChecker("lead", {"$ref": url}, 0)
    with pytest.raises(Exception, match=r"answer\.json"):
        checker.check('"text"')
    assert asked == []
