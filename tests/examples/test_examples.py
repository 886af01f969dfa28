"""Every example runs: the Python API script, each example team offline, the CI workflow, and the
pre-commit entry under the real pre-commit.

Teams run in-process through ``teamrun.cli.main`` (LiteLLM is imported once per
test process, not once per run).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import structlog
import yaml

import teamrun
from teamrun.cli import main
from teamrun.cli.reference import command_problems, shell_invocations
from tests.fakeserver import FakeOpenAI, text, tool_calls

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
EXAMPLE_TEAMS = sorted(EXAMPLES.glob("*/team.yaml"))


def _load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # pydantic resolves a model's annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def keep_structlog_config() -> Iterator[None]:
    """The API example configures structlog, as a program should; undo it for the other tests."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


def test_every_example_file_is_covered_here() -> None:
    # test_*.py and conftest.py examples (the pytest-plugin example) are run by pytest itself.
    python = {p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("test_") and p.name != "conftest.py"}
    assert python == {"api_basic.py"}
    assert {p.parent.name for p in EXAMPLE_TEAMS} == {"acceptance", "custom_tools_and_hooks", "message_filter"}


def test_api_basic_runs_and_reports_the_result(keep_structlog_config: None, capsys: pytest.CaptureFixture[str]) -> None:
    example = _load_module(EXAMPLES / "api_basic.py", "example_api_basic")

    code = example.main(["Compare SQLite and DuckDB"])

    out = capsys.readouterr().out
    assert code == 0
    assert "status:   done" in out
    assert "delegated: lead > researcher [ok] ref=researcher-1" in out
    assert "[offline simulation] Task: Compare SQLite and DuckDB" in out
    assert "[debug" not in out  # logging configured: no debug lines among the answer


@pytest.mark.parametrize("team_file", EXAMPLE_TEAMS, ids=[p.parent.name for p in EXAMPLE_TEAMS])
def test_example_team_validates_strictly_with_imports(team_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", "--strict", "--import-check", str(team_file)])

    assert code == 0, capsys.readouterr().out
    assert team_file.read_text(encoding="utf-8").startswith(
        "# yaml-language-server: $schema=../../schemas/team.schema.json\n"
    )


@pytest.mark.parametrize("team_file", EXAMPLE_TEAMS, ids=[p.parent.name for p in EXAMPLE_TEAMS])
def test_example_team_runs_offline(team_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["execute", str(team_file), "--input", "How did widgets sell this spring?", "--json", "--progress", "none"]
    )

    out, err = capsys.readouterr()
    result = json.loads(out)
    assert code == 0, err
    assert result["status"] == "done"
    assert result["final_text"].startswith("[offline simulation]")
    assert result["delegations"] and all(d["status"] == "ok" for d in result["delegations"])
    assert result["hook_errors"] == [] and result["warnings"] == []


# -- custom_tools_and_hooks ----------------------------------------------------------------
def test_the_typed_tool_schema_comes_from_its_signature() -> None:
    team = teamrun.load_team(EXAMPLES / "custom_tools_and_hooks" / "team.yaml")
    tool = team.tools["sales_summary"]

    params = tool.spec.parameters
    assert tool.spec.description.startswith("Summarise the sales ledger")
    assert params["required"] == []
    props = params["properties"]
    assert props["region"]["anyOf"][0] == {"enum": ["north", "south", "east", "west"], "type": "string"}
    assert {"type": "string", "format": "date"} in props["since"]["anyOf"]
    assert (props["top"]["minimum"], props["top"]["maximum"], props["top"]["default"]) == (1, 10, 3)
    assert props["since"]["description"].startswith("Only orders on or after this day")


def test_the_typed_tool_computes_from_the_ledger() -> None:
    tools = _load_module(EXAMPLES / "custom_tools_and_hooks" / "sales" / "tools.py", "example_sales_tools")

    north = tools.sales_summary("north", since=date(2025, 3, 1), top=1)

    assert (north.orders, north.units, north.revenue) == (2, 30, 2942.0)
    assert [p.product for p in north.top_products] == ["widget"]


def test_python_hooks_audit_and_check_the_delegation(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "execute",
            str(EXAMPLES / "custom_tools_and_hooks" / "team.yaml"),
            "-i",
            "widgets?",
            "--var",
            "region=north",
            "--json",
            "--progress",
            "none",
        ]
    )

    result = json.loads(capsys.readouterr().out)
    assert code == 0
    hooks = sys.modules["sales.hooks"]  # imported by the engine from the team file's folder
    points = [(e["point"], e["agent"], e["success"]) for e in hooks.AUDIT[-2:]]
    assert points == [("on_start", "analyst", None), ("on_complete", "analyst", True)]
    analyst = result["delegations"][0]
    assert "look at the north region" in analyst["response"]  # the async on_start hook's append_prompt
    assert '"orders": 12' in analyst["response"]  # the tool ran with its defaults


def test_the_acceptance_hook_replaces_an_answer_without_figures() -> None:
    hooks = _load_module(EXAMPLES / "custom_tools_and_hooks" / "sales" / "hooks.py", "example_hooks")

    class Ctx:
        agent, success, result = "analyst", True, "Sales went well."

    actions = hooks.require_figures(Ctx())
    assert actions is not None and "unverified" in actions["result_text"]
    Ctx.result = "Revenue was 2942.0."
    assert hooks.require_figures(Ctx()) is None


# -- message_filter ------------------------------------------------------------------------
def test_the_python_filter_redacts_secrets() -> None:
    filters = _load_module(EXAMPLES / "message_filter" / "redaction.py", "example_redaction")
    messages = [
        {"role": "user", "content": "key sk-live-1234567890abcdef and AKIAABCDEFGHIJKLMNOP, ops@example.com"},
        {"role": "user", "content": "password: hunter2"},
    ]

    kept = filters.redact_secrets(messages)

    assert kept == [
        {"role": "user", "content": "key [redacted] and [redacted], [redacted]"},
        {"role": "user", "content": "[redacted]"},
    ]
    assert messages[1]["content"] == "password: hunter2"  # the input list is not changed


def test_the_worker_never_sees_secrets_or_internal_messages(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAMRUN_API_BASE", fake_openai.url)
    fake_openai.script(
        "incident",
        [
            tool_calls(
                ("ask_status_writer", {"task": "Update for customers; the key was sk-live-1234567890abcdef"}),
                content="Customers see errors on the API since 09:40.",
            ),
            text("API errors since 09:40; fix in progress; next update 10:30."),
            text("Posted the update."),
        ],
    )
    team = teamrun.load_team(EXAMPLES / "message_filter" / "team.yaml", model="openai/incident")

    result = team.run_sync("INTERNAL ONLY: ops@example.com rotated sk-live-1234567890abcdef at 09:55")

    assert result.status == "done" and result.final_text == "Posted the update."
    worker = fake_openai.requests("incident")[1].request["messages"]
    seen = "\n".join(m["content"] for m in worker if m["role"] == "user")
    assert seen.startswith("Update for customers; the key was [redacted]")  # on_start hook redacted the task
    assert "[assistant] Customers see errors on the API since 09:40. [called: ask_status_writer]" in seen
    assert "sk-live" not in seen and "ops@example.com" not in seen
    assert "INTERNAL ONLY" not in seen  # drop_matching removed the whole message
    fake_openai.assert_complete()


# -- CI workflow and pre-commit -----------------------------------------------------------
def _workflow() -> dict[Any, Any]:
    data = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    if True in data:  # YAML 1.1 reads the key `on` as a boolean; GitHub reads it as "on"
        data["on"] = data.pop(True)
    return data


def test_the_workflow_is_a_valid_github_workflow() -> None:
    import jsonschema
    from check_jsonschema.builtin_schemas import get_builtin_schema

    schema = get_builtin_schema("vendor.github-workflows")

    jsonschema.validate(_workflow(), schema)


def test_the_workflow_validates_the_teams_and_runs_the_replay_tests() -> None:
    jobs = _workflow()["jobs"]
    runs = {name: [step.get("run", "") for step in job["steps"]] for name, job in jobs.items()}

    assert "teamrun validate --format github teams/" in runs["validate"]
    assert any(run.startswith("pytest tests/teams") for run in runs["replay"])
    commands = [words for job in runs.values() for run in job for words in shell_invocations(run)]
    assert len(commands) == 2
    for words in commands:
        assert command_problems(words) == [], words


def test_the_pre_commit_hook_definition() -> None:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))

    assert [h["id"] for h in hooks] == ["teamrun-validate"]
    hook = hooks[0]
    assert hook["language"] == "python" and {"name", "entry", "files"} <= set(hook)
    assert command_problems(hook["entry"].split()) == []
    files = re.compile(hook["files"])
    assert files.search("teams/pr-review.yaml") and files.search("service/teams/a.yml")
    assert not files.search("examples/github-actions.yml") and not files.search("teams.yaml")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, timeout=120)


def test_the_pre_commit_config_example_runs_in_pre_commit(tmp_path: Path) -> None:
    """The example, copied into a project as it is, runs under the real pre-commit: a broken team
    file fails the hook with teamrun's message, a good one passes, other YAML is left alone."""
    config = yaml.safe_load((EXAMPLES / "pre-commit-config.yaml").read_text(encoding="utf-8"))
    (repo,) = config["repos"]
    assert repo["repo"] == "local" and "rev" not in repo  # nothing to pin, nothing to download
    (hook,) = repo["hooks"]
    assert hook["language"] == "system" and command_problems([*hook["entry"].split(), *hook["args"]]) == []

    project = tmp_path / "project"
    (project / "teams").mkdir(parents=True)
    shutil.copy(EXAMPLES / "pre-commit-config.yaml", project / ".pre-commit-config.yaml")
    shutil.copy(REPO / "teams" / "research-report.yaml", project / "teams" / "good.yaml")
    (project / "teams" / "samples").mkdir()  # its grep tool's `cwd: samples`, which validate checks exists
    (project / "teams" / "bad.yaml").write_text(
        "version: 1\nname: bad\nsupervisor: lead\nagents:\n  lead: {delegates_to: [ghost]}\n", encoding="utf-8"
    )
    (project / "settings.yaml").write_text("not: [a, team\n", encoding="utf-8")  # outside teams/: not checked
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }

    def pre_commit() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "run", "teamrun-validate", "--all-files"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )  # hang guard

    failed = pre_commit()
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "teams/bad.yaml:5:25: error: agents.lead.delegates_to[0]: agent 'ghost' is not defined" in failed.stdout
    assert "good.yaml" not in failed.stdout and "settings.yaml" not in failed.stdout

    (project / "teams" / "bad.yaml").unlink()
    _git(project, "add", "-A")
    passed = pre_commit()
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert re.search(r"^teamrun validate\.+Passed$", passed.stdout, re.MULTILINE), passed.stdout
