"""README "Switching models" without editing a file: ``TEAMRUN_MODEL`` / ``TEAMRUN_API_BASE`` and ``--api-base``
send every agent that sets no ``api_base`` of its own to the given endpoint (issue 33.5), and a local endpoint
needs no invented key (issue 33.6). Seen from the fake server's own request log, through the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import teamrun
from teamrun.cli import main
from teamrun.defaults import run_api_base
from teamrun.llm.adapter import LOCAL_PLACEHOLDER_KEY, is_local_url
from tests.fakeserver import FakeOpenAI, http_error, text
from tests.judged_teams import JUDGED, LOOPED

REPO = Path(__file__).resolve().parents[2]


def _twenty_lines() -> str:
    """The README's "team in twenty lines" (it sets no ``api_base``)."""
    section = (REPO / "README.md").read_text(encoding="utf-8").split("## A team in twenty lines\n", 1)[1]
    found = re.search(r"^```yaml\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert found is not None
    assert "api_base" not in found.group(1)
    return found.group(1)


@pytest.fixture
def twenty_lines(tmp_path: Path) -> Path:
    path = tmp_path / "team.yaml"
    path.write_text(_twenty_lines(), encoding="utf-8")
    return path


def test_teamrun_api_base_sends_the_readme_team_to_the_local_endpoint(
    fake_openai: FakeOpenAI, twenty_lines: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`TEAMRUN_MODEL=openai/my-model TEAMRUN_API_BASE=http://.../v1 teamrun execute team.yaml` (the fixture sets
    TEAMRUN_API_BASE to the fake's URL)."""
    monkeypatch.setenv("TEAMRUN_MODEL", "openai/my-model")
    fake_openai.script("my-model", [text("Rust and Go compared.")])

    code = main(["execute", str(twenty_lines), "--input", "Compare Rust and Go", "--progress", "none"])

    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.strip() == "Rust and Go compared."
    assert [r.model for r in fake_openai.requests()] == ["my-model"]
    fake_openai.assert_complete()


def test_api_base_option_sends_every_agent_without_its_own_to_the_endpoint(
    fake_openai: FakeOpenAI, twenty_lines: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TEAMRUN_API_BASE")
    fake_openai.script("my-model", [text("Rust and Go compared.")])

    code = main(
        [
            "execute",
            str(twenty_lines),
            "--input",
            "Compare Rust and Go",
            "--model",
            "openai/my-model",
            "--api-base",
            fake_openai.url,
            "--progress",
            "none",
        ]
    )

    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.strip() == "Rust and Go compared."
    fake_openai.assert_complete()


MIXED = """\
version: 1
name: mixed
supervisor: lead
defaults: {{num_retries: 0}}
agents:
  lead:
    model: offline
    delegates_to: [near, far]
  near:
    description: Answers from the run's endpoint.
    model: openai/near
  far:
    description: Answers from its own endpoint.
    model: openai/far
    api_base: {own}
"""


def test_an_agent_s_own_api_base_wins_and_the_offline_model_ignores_it(
    fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`far` keeps its own endpoint (the fake) although TEAMRUN_API_BASE names another server that is down; `near`
    goes to --api-base (the fake); the offline lead answers itself."""
    monkeypatch.setenv("TEAMRUN_API_BASE", "http://127.0.0.1:9/v1")  # nobody listens: a call there fails
    team = tmp_path / "team.yaml"
    team.write_text(MIXED.format(own=fake_openai.url), encoding="utf-8")
    fake_openai.script("near", [text("near answer")])
    fake_openai.script("far", [text("far answer"), text("far answer")])

    assert main(["execute", str(team), "--input", "ask both", "--json", "--progress", "none"]) == 0
    result = _delegations(capsys.readouterr().out)
    assert result["far"] == ("ok", "far answer")
    assert result["near"][0] == "error" and "at http://127.0.0.1:9/v1 failed: could not connect" in result["near"][1]
    assert [r.model for r in fake_openai.requests()] == ["far"]

    argv = ["execute", str(team), "--input", "ask both", "--api-base", fake_openai.url, "--json", "--progress", "none"]
    assert main(argv) == 0
    assert _delegations(capsys.readouterr().out) == {"near": ("ok", "near answer"), "far": ("ok", "far answer")}
    assert sorted(r.model for r in fake_openai.requests()) == ["far", "far", "near"]
    fake_openai.assert_complete()


def _delegations(out: str) -> dict[str, tuple[str, str]]:
    """Each delegated agent's status and answer, from ``--json``."""
    return {d["agent"]: (d["status"], d["response"] or d["error"]) for d in json.loads(out)["delegations"]}


def test_the_run_s_endpoint_comes_from_the_argument_else_the_variable(
    twenty_lines: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAMRUN_API_BASE", "http://from-env:8000/v1")

    assert run_api_base(None) == "http://from-env:8000/v1"
    assert run_api_base(" http://given:1/v1 ") == "http://given:1/v1"
    assert run_api_base("") is None  # given empty: the variable is not used either
    assert teamrun.load_team(twenty_lines).api_base == "http://from-env:8000/v1"
    assert teamrun.load_team(twenty_lines, api_base="http://given:1/v1").api_base == "http://given:1/v1"
    assert teamrun.load_team(twenty_lines, environ={}).api_base is None  # `environ=` replaces os.environ
    assert teamrun.load_team(twenty_lines, environ={"TEAMRUN_API_BASE": "http://e/v1"}).api_base == "http://e/v1"
    monkeypatch.setenv("TEAMRUN_API_BASE", "")
    assert run_api_base(None) is None


# -- issue 33.6: a keyless local endpoint needs no invented key ------------------------------------
def test_a_local_endpoint_needs_no_api_key(
    fake_openai: FakeOpenAI, twenty_lines: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("TEAMRUN_MODEL", "openai/my-model")
    fake_openai.script("my-model", [text("Rust and Go compared.")])

    code = main(["execute", str(twenty_lines), "--input", "Compare Rust and Go", "--progress", "none"])

    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.strip() == "Rust and Go compared."
    (request,) = fake_openai.requests()
    assert request.headers["authorization"] == f"Bearer {LOCAL_PLACEHOLDER_KEY}"


@pytest.mark.parametrize("api_base", ["https://llm.invalid/v1", "https://llm.example.com/v1"])
def test_no_placeholder_key_goes_to_a_host_that_is_not_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], api_base: str
) -> None:
    """Without a key, a remote endpoint is not called at all: the run fails at once saying which variable to set."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: one\nsupervisor: solo\nagents:\n  solo: {model: openai/solo, num_retries: 0}\n",
        encoding="utf-8",
    )

    code = main(["execute", str(team), "--input", "hi", "--api-base", api_base, "--progress", "none"])

    err = capsys.readouterr().err
    assert code == 1
    assert f"openai model 'openai/solo' at {api_base} failed: no API key" in err
    assert "OPENAI_API_KEY" in err


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://localhost:8000/v1", True),
        ("http://127.0.0.1:11434", True),
        ("http://[::1]:8000/v1", True),
        ("http://192.168.1.20:8000/v1", True),
        ("http://10.0.0.5/v1", True),
        ("http://vllm:8000/v1", True),  # a container's service name
        ("http://host.docker.internal:11434", True),
        ("http://gpu-box.local:8000/v1", True),
        ("https://llm.invalid/v1", False),
        ("https://llm.example.com/v1", False),
        ("http://8.8.8.8/v1", False),
        ("http://203.0.113.7/v1", False),  # a documentation range: Python calls it private, it is no local host
        ("http://198.51.100.1/v1", False),
        ("http://100.100.1.2:8000/v1", True),  # carrier-grade NAT, where VPNs put machines
        ("http://[fd00::1]:8000/v1", True),
        ("http://[::ffff:127.0.0.1]/v1", True),
        ("", False),
    ],
)
def test_which_endpoints_are_local(url: str, local: bool) -> None:
    assert is_local_url(url) is local


@pytest.mark.parametrize("team", [JUDGED, LOOPED], ids=["accept", "until"])
def test_a_judge_that_names_no_model_is_called_at_the_run_s_endpoint_like_the_agents(
    team: str,
    fake_openai: FakeOpenAI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A judge whose model is defaults.model went to the provider's own endpoint (with a real key set: the task
    and the answer sent to a public provider) while the agents it grades went to --api-base."""
    monkeypatch.delenv("TEAMRUN_API_BASE")
    path = tmp_path / "team.yaml"
    path.write_text(team, encoding="utf-8")
    fake_openai.script("fake", [text("hello"), text('{"score": 1, "reason": "it says hello"}')])

    code = main(["execute", str(path), "--input", "greet", "--api-base", fake_openai.url, "--progress", "none"])

    out = capsys.readouterr()
    assert code == 0, out.err
    assert len(fake_openai.requests("fake")) == 2  # the agent's call and the judge's
    assert "against a rubric" in str(fake_openai.requests("fake")[1].request["messages"][0]["content"])
    assert "failed" not in out.err
    fake_openai.assert_complete()


@pytest.mark.parametrize("team", ["research-report", "support-triage"])
def test_api_base_beats_the_variable_on_the_ready_made_teams(
    team: str, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ready-made teams set no api_base of their own (`api_base: "${TEAMRUN_API_BASE:-}"` made the variable
    the file's own endpoint, which beat --api-base)."""
    monkeypatch.setenv("TEAMRUN_API_BASE", "http://127.0.0.1:9/v1")  # nothing listens there
    fake_openai.handler("my-model", lambda request: text("Answered at the --api-base endpoint."))

    code = main(
        [
            *("execute", str(REPO / "teams" / f"{team}.yaml"), "--input", "Compare Rust and Go"),
            *("--model", "openai/my-model", "--api-base", fake_openai.url, "--progress", "none"),
        ]
    )

    out = capsys.readouterr()
    assert code == 0, out.err
    assert "Answered at the --api-base endpoint." in out.out
    assert fake_openai.requests("my-model")


def test_the_missing_key_hint_names_the_provider_s_own_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("TEAMRUN_API_BASE", raising=False)
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: one\nsupervisor: solo\nagents:\n  solo: {model: anthropic/claude-x, num_retries: 0}\n",
        encoding="utf-8",
    )

    code = main(["execute", str(team), "--input", "hi", "--progress", "none"])

    err = capsys.readouterr().err
    assert code == 1
    assert "no API key: set ANTHROPIC_API_KEY, or api_key_env" in err and "OPENAI_API_KEY" not in err


def test_a_resumed_run_is_called_at_the_endpoint_it_was_started_with(
    fake_openai: FakeOpenAI,
    twenty_lines: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`teamrun resume ID` (and `teamrun answer`, which resumes) as the failed run's hint prints it: the endpoint
    comes from the store, as the model does (it went to the provider's own endpoint)."""
    monkeypatch.delenv("TEAMRUN_API_BASE")
    store = str(tmp_path / "runs.db")
    fake_openai.script("my-model", [http_error(400, message="refused once"), text("Answered on resume.")])
    started = [*("execute", str(twenty_lines), "--input", "Compare Rust and Go", "--model", "openai/my-model")]

    code = main([*started, "--api-base", fake_openai.url, "--store", store, "--json", "--progress", "none"])

    out = capsys.readouterr()
    assert code == 1, out.err
    run_id = json.loads(out.out)["run_id"]
    assert main(["resume", run_id, "--store", store, "--progress", "none"]) == 0
    assert capsys.readouterr().out.strip() == "Answered on resume."
    fake_openai.assert_complete()


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("localhost:8000/v1", "is not an http(s) URL with a host"),
        ("not a url", "is not an http(s) URL with a host"),
        ("http://localhost:99999/v1", "Port out of range"),
        ("http://user@localhost:8000/v1", "carries user info"),
    ],
)
def test_an_api_base_that_cannot_be_an_endpoint_is_a_usage_error_before_any_call(
    url: str, why: str, twenty_lines: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was sent, reported as the provider's HTTP 500 and retried for 14 s."""
    code = main(["execute", str(twenty_lines), "-i", "hi", "--model", "openai/m", "--api-base", url])

    err = capsys.readouterr().err
    assert code == 2
    shown = url.replace("//user@", "//***@")  # user info is never repeated: it may be a key
    assert f"--api-base: {shown!r} " in err and why in err and "HTTP 500" not in err


def test_eval_and_batch_take_api_base_for_the_agents_and_the_judges_that_name_none(
    fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`eval` and `batch` had no --api-base (only $TEAMRUN_API_BASE), and an eval case's judge that named no
    api_base went to its provider's own endpoint while the agents went to the local one."""
    monkeypatch.delenv("TEAMRUN_API_BASE")
    team = tmp_path / "team.yaml"
    team.write_text("version: 1\nname: solo\nsupervisor: lead\nagents:\n  lead: {model: openai/fake}\n", "utf-8")
    cases = tmp_path / "cases.yaml"
    cases.write_text(
        "version: 1\ncases:\n  - name: greets\n    input: greet\n    checks:\n"
        "      - judge: {model: openai/judge, rubric: The answer says hello.}\n",
        encoding="utf-8",
    )
    fake_openai.handler("fake", lambda request: text("hello"))
    fake_openai.handler("judge", lambda request: text('{"score": 1, "reason": "it says hello"}'))

    assert main(["eval", str(team), str(cases), "--api-base", fake_openai.url, "--progress", "none"]) == 0
    assert "1/1 passed" in capsys.readouterr().out
    assert len(fake_openai.requests("fake")) == 1 and len(fake_openai.requests("judge")) == 1

    rows, out = tmp_path / "rows.jsonl", tmp_path / "out.jsonl"
    rows.write_text('{"input": "one"}\n{"input": "two"}\n', encoding="utf-8")
    code = main(["batch", str(team), str(rows), "-o", str(out), "--api-base", fake_openai.url, "--progress", "none"])
    assert code == 0, capsys.readouterr().err
    assert [json.loads(line)["status"] for line in out.read_text(encoding="utf-8").splitlines()] == ["done"] * 2
    assert len(fake_openai.requests("fake")) == 3

    for command in (["eval", str(team), str(cases)], ["batch", str(team), str(rows), "-o", str(out)]):
        assert main([*command, "--api-base", "localhost:8000", "--progress", "none"]) == 2
        assert "--api-base" in capsys.readouterr().err
