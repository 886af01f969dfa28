"""``teamrun validate`` and ``teamrun graph`` on remote (``a2a:``) agents; ``--import-check`` reads their cards."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.a2a.remote_fixtures import REPO, A2AAgent, free_port, team_file
from tests.cli_run import run_cli

LOCAL_FIELDS = """version: 1
name: remote-local-fields
supervisor: lead
defaults: {model: offline}
agents:
  lead:
    delegates_to: [researcher, helper]
  helper:
    description: A local helper.
  researcher:
    model: openai/gpt-4o-mini
    instructions: Look things up.
    delegates_to: [helper]
    output_schema: {type: object}
    a2a: {url: "http://127.0.0.1:9999"}
"""


def test_every_local_loop_field_on_a_remote_agent_is_an_error_at_its_line(tmp_path: Path) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(LOCAL_FIELDS, encoding="utf-8")

    result = run_cli(["validate", str(team)])

    assert result.code == 2
    lines = result.out.splitlines()
    for line_no, field in [(11, "model"), (12, "instructions"), (13, "delegates_to"), (14, "output_schema")]:
        assert (
            f"{team}:{line_no}:5: error: agents.researcher.{field}: agent 'researcher' is a remote A2A agent "
            f"(a2a:); it runs its own loop elsewhere, so '{field}' cannot apply: remove it"
        ) in lines
    assert lines[-1] == "1 of 1 file invalid: 4 errors"


def test_the_ready_made_team_validates_without_its_agent_running() -> None:
    result = run_cli(
        ["validate", str(REPO / "teams" / "remote-worker.yaml")], {"TEAMRUN_A2A_URL": "http://127.0.0.1:9"}
    )
    assert (result.code, result.out) == (0, "1 file valid\n")


def test_graph_marks_remote_agents(tmp_path: Path) -> None:
    result = run_cli(["graph", str(team_file(tmp_path, "http://127.0.0.1:9999"))])

    assert result.code == 0
    assert '  a_researcher{{"researcher<br/><small>a2a: http://127.0.0.1:9999</small>"}}' in result.out.splitlines()
    assert "  a_lead -->|delegates| a_researcher" in result.out.splitlines()


def test_the_schema_documents_the_key() -> None:
    import json

    schema = json.loads((REPO / "schemas" / "team.schema.json").read_text(encoding="utf-8"))
    remote = schema["$defs"]["RemoteAgent"]
    assert set(remote["properties"]) == {"url", "auth", "timeout_s", "stream"}
    assert "bearer_env" in schema["$defs"]["RemoteAuth"]["properties"]


@pytest.mark.outofprocess("an a2a-sdk agent under uvicorn in a subprocess")
def test_import_check_reads_the_card_and_reports_one_that_is_not_a_card(
    a2a_agent: Callable[..., A2AAgent], tmp_path: Path
) -> None:
    agent = a2a_agent()
    good = run_cli(["validate", "--import-check", str(team_file(tmp_path, agent.url, name="good"))])
    assert (good.code, good.out) == (0, "1 file valid\n"), good.out
    assert any(r["path"] == "/.well-known/agent-card.json" for r in agent.records("request"))

    broken = a2a_agent(extra=("--broken-card",))
    team = team_file(tmp_path, broken.url, name="broken")
    bad = run_cli(["validate", "--import-check", str(team)])

    assert bad.code == 2
    line = next(n for n, text in enumerate(team.read_text().splitlines(), 1) if "url:" in text)
    assert bad.out.startswith(
        f"{team}:{line}:12: error: agents.researcher.a2a.url: cannot read the agent card at "
        f"{broken.url}/.well-known/agent-card.json: "
    ), bad.out
    plain = run_cli(["validate", str(team)])  # without --import-check nothing is fetched
    assert (plain.code, plain.out) == (0, "1 file valid\n")


def test_import_check_warns_about_an_agent_that_does_not_answer(tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    team = team_file(tmp_path, down)
    line = next(n for n, text in enumerate(team.read_text().splitlines(), 1) if "url:" in text)

    warned = run_cli(["validate", "--import-check", str(team)])
    strict = run_cli(["validate", "--import-check", "--strict", str(team)])

    assert warned.code == 0 and strict.code == 2
    expected = (
        f"{team}:{line}:12: warning: agents.researcher.a2a.url: cannot read the agent card at "
        f"{down}/.well-known/agent-card.json: "
    )
    assert warned.out.startswith(expected), warned.out
    assert strict.out.startswith(expected.replace(": warning: ", ": error: ")), strict.out
    assert "(is the agent running where you validate?)" in warned.out


def _remote_team(tmp_path: Path, a2a: str) -> Path:
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: r\nsupervisor: lead\ndefaults: {model: offline}\nagents:\n  lead:\n"
        f"    delegates_to: [researcher]\n  researcher:\n    a2a: {a2a}\n",
        encoding="utf-8",
    )
    return team


def test_url_validation_credentials_no_host_and_uppercase_scheme(tmp_path: Path) -> None:
    """D4/D15: credentials in the URL and a URL without a host are errors (the password is not repeated);
    an uppercase scheme is a URL like any other."""
    creds = run_cli(["validate", str(_remote_team(tmp_path, '{url: "http://user:pAssW0rd@127.0.0.1:9999/"}'))])
    assert creds.code == 2 and "holds credentials" in creds.out and "a2a.auth.bearer_env" in creds.out
    assert "pAssW0rd" not in creds.out
    nohost = run_cli(["validate", str(_remote_team(tmp_path, '{url: "http:///nohost"}'))])
    assert nohost.code == 2 and "has no host" in nohost.out
    bidi = run_cli(["validate", str(_remote_team(tmp_path, '{url: "http://127.0.0.1:9999/a\\u202eb"}'))])
    assert bidi.code == 2 and "control or bidi characters" in bidi.out
    upper = run_cli(["validate", str(_remote_team(tmp_path, '{url: "HTTP://127.0.0.1:9999/"}'))])
    assert (upper.code, upper.out) == (0, "1 file valid\n")


def test_a_literal_token_is_never_echoed_and_token_shaped_names_warn(tmp_path: Path) -> None:
    """D5: the error for a literal token does not repeat it; a variable "name" shaped like a token warns."""
    literal = run_cli(
        ["validate", str(_remote_team(tmp_path, '{url: "http://h/", auth: {bearer_env: "sk-proj-AbC123"}}'))]
    )
    assert literal.code == 2 and "sk-proj-AbC123" not in literal.out
    assert "never the token itself" in literal.out
    for token in ("ghp_16C7e42F292c6912E7710c838347Ae178B4a", "github_pat_11ABCDEFG0123456789", "d" * 40):
        shaped = run_cli(
            ["validate", str(_remote_team(tmp_path, f'{{url: "http://h/", auth: {{bearer_env: {token}}}}}'))]
        )
        assert shaped.code == 0 and "warning:" in shaped.out and "looks like a token" in shaped.out, shaped.out
        assert token not in shaped.out
    plain = run_cli(["validate", str(_remote_team(tmp_path, '{url: "http://h/", auth: {bearer_env: AGENT_TOKEN}}'))])
    assert (plain.code, plain.out) == (0, "1 file valid\n")
    system = run_cli(["validate", str(_remote_team(tmp_path, '{url: "http://h/", auth: {bearer_env: PATH}}'))])
    assert system.code == 0 and "is a system variable" in system.out


def test_graph_escapes_a_hostile_url_in_mermaid_labels(tmp_path: Path) -> None:
    """D13: a valid http URL with quotes and <script>: the Mermaid label keeps them as entities."""
    url = 'http://x/"]-->a_lead;click_a_r<script>alert(1)</script>'
    team = _remote_team(tmp_path, "{url: '" + url + "'}")
    assert run_cli(["validate", str(team)]).code == 0
    shown = run_cli(["graph", str(team)])

    assert shown.code == 0, shown.err
    assert "<script>" not in shown.out and '"]-->' not in shown.out
    assert "#quot;]--#gt;a_lead;click_a_r#lt;script#gt;alert(1)#lt;/script#gt;" in shown.out


def test_a_remote_agent_adds_no_model_to_prepare_or_warm(tmp_path: Path) -> None:
    """A remote agent calls no model of ours: the team's default model (here a provider's) is not listed for it,
    so a team whose only local agent is offline neither imports LiteLLM nor warms a provider model."""
    import asyncio

    import teamrun

    team_path = tmp_path / "team.yaml"
    team_path.write_text(
        """version: 1
name: remote-models
supervisor: lead
defaults: {model: openai/gpt-4o-mini}
agents:
  lead:
    model: offline
    delegates_to: [researcher]
  researcher:
    description: A remote researcher.
    a2a: {url: "http://127.0.0.1:9"}
""",
        encoding="utf-8",
    )
    team = teamrun.load_team(team_path)

    assert team.models() == ["offline"]
    assert asyncio.run(team.warm_up()) == []
    assert teamrun.load_team(team_path, model="offline").models() == ["offline"]
    result = run_cli(["execute", str(team_path), "-i", "hi", "--json", "--progress", "none"])
    assert "Traceback" not in result.err
    assert "openai/gpt-4o-mini" not in result.err, result.err


def test_the_bearer_token_is_read_by_the_engine_and_reaches_a_ray_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The config layer reads no token (issue 43 item 6): loading the file leaves it out of the secrets; a Team (the
    engine) masks it, and the Ray engine still hands its variable to the workers, which read it there."""
    from teamrun.config.loader import load_config
    from teamrun.engine.team import Team
    from teamrun.evals.engines.ray_engine import WorkerSpec

    monkeypatch.setenv("PARTNER_CREDENTIAL", "tok-abcdefghijkl-1234")
    loaded = load_config(team_file(tmp_path, "http://127.0.0.1:9999", auth="PARTNER_CREDENTIAL"))

    assert "tok-abcdefghijkl-1234" not in loaded.secrets
    assert "tok-abcdefghijkl-1234" in Team(loaded).loaded.secrets
    assert WorkerSpec.for_team(loaded).environ["PARTNER_CREDENTIAL"] == "tok-abcdefghijkl-1234"
