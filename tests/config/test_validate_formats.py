"""``teamrun validate`` output formats and arguments, ``teamrun schema`` and ``teamrun graph``."""

from __future__ import annotations

import json
import re
import sys
import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from teamrun.config.schema import schema_path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
VALID = "tests/config/valid/minimal.yaml"
INVALID = "tests/config/invalid/unknown_delegate.yaml"
Cli = Callable[[list[str]], Any]

WARNING_ONLY = """\
version: 1
name: warns
supervisor: lead
agents:
  lead: {}
  spare: {}
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


# -- text ------------------------------------------------------------------------------------


def test_text_is_the_default_and_ends_with_a_summary(cli: Cli) -> None:
    result = cli(["validate", VALID, INVALID])
    assert result.code == 2
    assert result.out.splitlines() == [
        "tests/config/invalid/unknown_delegate.yaml:6:20: error: agents.lead.delegates_to[0]: agent "
        "'reseacher' is not defined; did you mean 'researcher'? (defined agents: lead, researcher)",
        "1 of 2 files invalid: 1 error",
    ]


def test_a_valid_file_exits_0(cli: Cli) -> None:
    result = cli(["validate", VALID])
    assert (result.code, result.out, result.err) == (0, "1 file valid\n", "")


def test_line_breaks_quoted_from_the_file_never_split_a_message(tmp_path: Path, cli: Cli) -> None:
    team = _write(tmp_path / "t.yaml", 'version: 1\nname: x\nsupervisor: a\nagents:\n  a: {"bad\\nkey\\u0001": 1}\n')
    result = cli(["validate", str(team)])
    assert result.out.splitlines() == [
        f"{team}:5:7: error: unknown key 'bad\\nkey\\x01' in agents.a; allowed keys: "
        "a2a, accept, answer_to, api_base, api_key_env, budget, cache, delegates_to, delegation, description, "
        "fallback_on, fallbacks, handoffs, instructions, max_attempts, max_repair_turns, max_tokens, memory, model, "
        "model_params, num_retries, on_error, output_schema, rate_limit, request_timeout_s, stream, temperature, tools",
        "1 of 1 file invalid: 1 error",
    ]


# -- json ------------------------------------------------------------------------------------


def test_json_lists_every_file_and_diagnostic(cli: Cli) -> None:
    result = cli(["validate", "--format", "json", VALID, INVALID])
    assert result.code == 2
    payload = json.loads(result.out)
    assert payload["valid"] is False
    assert payload["summary"] == "1 of 2 files invalid: 1 error"
    assert [(f["file"], f["valid"]) for f in payload["files"]] == [(VALID, True), (INVALID, False)]
    assert payload["files"][0]["diagnostics"] == []
    assert payload["files"][1]["diagnostics"] == [
        {
            "line": 6,
            "column": 20,
            "severity": "error",
            "rule": "reference",
            "message": "agents.lead.delegates_to[0]: agent 'reseacher' is not defined; "
            "did you mean 'researcher'? (defined agents: lead, researcher)",
        }
    ]


def test_json_for_valid_files(cli: Cli) -> None:
    result = cli(["validate", "--format", "json", VALID])
    assert result.code == 0
    assert json.loads(result.out) == {
        "valid": True,
        "summary": "1 file valid",
        "files": [{"file": VALID, "valid": True, "diagnostics": []}],
    }


# -- github ----------------------------------------------------------------------------------


def test_github_annotations_escape_properties_and_data(tmp_path: Path, cli: Cli) -> None:
    # ',' and ':' in the file name must not end the `file=` property; '%' everywhere is escaped
    team = _write(
        tmp_path / "a,b:c" / "team.yaml",
        """\
        version: 1
        name: gh
        supervisor: lead
        agents:
          lead: {"100%": 1, description: ok}
          spare: {}
        """,
    )
    result = cli(["validate", "--format", "github", str(team)])
    assert result.code == 2
    shown = str(team).replace("%", "%25").replace(":", "%3A").replace(",", "%2C")
    assert result.out.splitlines() == [
        f"::error file={shown},line=5,col=10,title=teamrun validate::unknown key '100%25' in "
        "agents.lead; allowed keys: a2a, accept, answer_to, api_base, api_key_env, budget, cache, delegates_to, "
        "delegation, description, fallback_on, fallbacks, handoffs, instructions, max_attempts, max_repair_turns, "
        "max_tokens, memory, model, model_params, num_retries, on_error, output_schema, rate_limit, request_timeout_s, "
        "stream, "
        "temperature, tools",
        f"::warning file={shown},line=6,col=3,title=teamrun validate::agent 'spare' is never used: "
        "the supervisor 'lead' cannot reach it through delegates_to or handoffs",
        "1 of 1 file invalid: 1 error, 1 warning",
    ]
    assert "a%2Cb%3Ac" in result.out and "a,b:c" not in result.out


def test_github_reporter_escapes_line_breaks_in_data() -> None:
    from teamrun.cli.report import github_report
    from teamrun.config.diagnostics import Diagnostic
    from teamrun.config.loader import CheckResult

    diagnostic = Diagnostic("f.yaml", 1, 2, "x")
    object.__setattr__(diagnostic, "message", "50% done\r\nnext: a, b")  # bypass the one-line rule
    (line, _summary) = github_report([CheckResult("f.yaml", [diagnostic])]).splitlines()
    assert line == "::error file=f.yaml,line=1,col=2,title=teamrun validate::50%25 done%0D%0Anext: a, b"


# -- junit -----------------------------------------------------------------------------------


def test_junit_is_well_formed_xml_with_one_case_per_file(tmp_path: Path, cli: Cli) -> None:
    warns = _write(tmp_path / "warns.yaml", WARNING_ONLY)
    result = cli(["validate", "--format", "junit", VALID, "tests/config/invalid/tool_both_kinds.yaml", str(warns)])
    assert result.code == 2
    suite = ET.fromstring(result.out)
    assert suite.tag == "testsuite"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "0")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [VALID, "tests/config/invalid/tool_both_kinds.yaml", str(warns)]
    assert cases[0].findall("failure") == []
    [failure] = cases[1].findall("failure")
    assert failure.get("type") == "tool"
    assert failure.get("message") == "tool 'search' has both 'python:' and 'command:'; keep one"
    assert failure.text == (
        "tests/config/invalid/tool_both_kinds.yaml:8:3: error: tool 'search' has both 'python:' "
        "and 'command:'; keep one"
    )
    assert cases[2].findall("failure") == []  # a warning is not a failure...
    out = cases[2].find("system-out")
    assert out is not None and "agent 'spare' is never used" in (out.text or "")  # ...but it is shown


def test_junit_counts_match_for_junit_readers(tmp_path: Path, cli: Cli) -> None:
    """One failure per test case, all of a file's errors in it: junitparser's counts match the suite's."""
    from junitparser import Failure, JUnitXml, TestSuite

    many = "tests/config/invalid/tool_both_kinds.yaml"
    three = _write(
        tmp_path / "three.yaml",
        "version: 1\nname: three\nsupervisor: lead\nagents:\n  lead:\n"
        "    descripton: typo\n    delegates_to: [ghost]\n    tools: [grep]\n",
    )
    result = cli(["validate", "--format", "junit", VALID, many, str(three)])
    xml = tmp_path / "report.xml"
    xml.write_text(result.out)
    report = JUnitXml.fromfile(str(xml))
    [suite] = [report] if isinstance(report, TestSuite) else list(report)
    assert isinstance(suite, TestSuite)
    assert (suite.tests, suite.failures, suite.errors) == (3, 2, 0)  # as written in the file
    cases = list(suite)
    suite.update_statistics()  # junitparser recounts from the test cases: the same figures
    assert (suite.tests, suite.failures, suite.errors) == (3, 2, 0)
    assert [len(case.result) for case in cases] == [0, 1, 1]
    [failure] = cases[2].result
    assert isinstance(failure, Failure)
    assert failure.message is not None and failure.message.startswith("3 errors; the first: unknown key 'descripton'")
    assert failure.type == "several"
    lines = (failure.text or "").splitlines()
    assert len(lines) == 3 and all(line.startswith(f"{three}:") for line in lines)
    assert "agent 'ghost' is not defined" in lines[1]


def test_junit_escapes_markup_and_control_characters(tmp_path: Path, cli: Cli) -> None:
    team = _write(tmp_path / "x&y.yaml", 'version: 1\nname: x\nsupervisor: a\nagents:\n  a: {"<b>&\\u0007": 1}\n')
    result = cli(["validate", "--format", "junit", str(team)])
    suite = ET.fromstring(result.out)  # raises on bad markup or on a raw control character
    [failure] = suite.iter("failure")
    assert (failure.get("message") or "").startswith("unknown key '<b>&\\x07' in agents.a")


# -- arguments ------------------------------------------------------------------------------


def test_folders_are_searched_recursively(tmp_path: Path, cli: Cli) -> None:
    _write(tmp_path / "teams" / "a.yaml", (REPO / VALID).read_text())
    _write(tmp_path / "teams" / "nested" / "deeper" / "b.yml", (REPO / VALID).read_text())
    _write(tmp_path / "teams" / "nested" / "bad.yaml", (REPO / INVALID).read_text())
    _write(tmp_path / "teams" / "notes.txt", "not a team file")
    result = cli(["validate", str(tmp_path / "teams")])
    assert result.code == 2
    lines = result.out.splitlines()
    assert lines[-1] == "1 of 3 files invalid: 1 error"
    assert lines[0].startswith(f"{tmp_path / 'teams' / 'nested' / 'bad.yaml'}:6:20: error: ")

    json_result = cli(["validate", "--format", "json", str(tmp_path / "teams")])
    files = [Path(f["file"]).relative_to(tmp_path / "teams").as_posix() for f in json.loads(json_result.out)["files"]]
    assert files == ["a.yaml", "nested/bad.yaml", "nested/deeper/b.yml"]


def test_folder_mode_skips_tool_folders_and_files_that_are_not_team_files(tmp_path: Path, cli: Cli) -> None:
    """`validate .` in a project: no venvs, .git or node_modules, no workflows or compose files."""
    team = (REPO / VALID).read_text()
    root = tmp_path / "project"
    _write(root / "teams" / "a.yaml", team)
    header = "# yaml-language-server: $schema=../schemas/team.schema.json\n"
    _write(root / "teams" / "header_only.yml", header + "version: 1\n")
    _write(root / ".venv" / "lib" / "pkg" / "team.yaml", "agents: {}\n")
    _write(root / "env2" / "pyvenv.cfg", "home = /usr\n")
    _write(root / "env2" / "lib" / "team.yaml", "agents: {}\n")
    _write(root / "node_modules" / "pkg" / "team.yaml", "agents: {}\n")
    _write(root / "src" / "__pycache__" / "team.yaml", "agents: {}\n")
    _write(root / ".github" / "workflows" / "ci.yml", "name: ci\non: push\njobs: {}\n")
    _write(root / "compose.yaml", "name: app\nservices:\n  web: {image: nginx}\n")
    _write(root / "examples" / ".pre-commit-config.yaml", "repos: []\n")
    _write(root / "examples" / "pre-commit-config.yaml", "repos: []\n")
    result = cli(["validate", str(root)])
    assert result.code == 2
    assert result.out.splitlines() == [
        f"{root / 'teams' / 'header_only.yml'}:2:1: error: the team file is missing the required key 'agents': "
        "a mapping of agent names to their settings",
        f"{root / 'teams' / 'header_only.yml'}:2:1: error: the team file is missing the required key 'name': "
        "a short name for the team, e.g. 'name: product-research'",
        f"{root / 'teams' / 'header_only.yml'}:2:1: error: the team file is missing the required key 'supervisor': "
        "the agent that receives the user's input, e.g. 'supervisor: lead'",
        "1 of 2 files invalid: 3 errors",
    ]
    assert result.err == (
        "validate: skipped 5 folders (.github, .venv, __pycache__, env2, node_modules) and 3 YAML files that do "
        "not look like team files (no top-level 'agents:' or 'supervisor:'); name files or use --glob to check them\n"
    )
    named = cli(["validate", str(root / "compose.yaml")])  # a file named on the command line is always checked
    assert named.code == 2 and "unknown key 'services'" in named.out

    chosen = cli(["validate", "--glob", "**/*pre-commit*.yaml", str(root)])
    assert chosen.out.splitlines()[-1] == "2 of 2 files invalid: 10 errors"
    assert chosen.err == ""

    only_other = tmp_path / "ci"
    _write(only_other / "workflow.yml", "name: ci\non: push\n")
    nothing = cli(["validate", str(only_other)])
    assert nothing.code == 2
    assert nothing.out.splitlines()[0] == (
        f"{only_other}:1:1: error: folder holds no team files: its .yaml/.yml files have no top-level 'agents:' "
        "or 'supervisor:' (name them, or use --glob, to check them anyway)"
    )


def test_a_folder_of_valid_files_passes(cli: Cli) -> None:
    result = cli(["validate", "tests/config/valid", "teams"])
    assert result.code == 0
    count = len(list((REPO / "tests/config/valid").glob("*.yaml"))) + len(list((REPO / "teams").glob("*.y*ml")))
    assert result.out == f"{count} files valid\n"


def test_an_empty_folder_is_an_error(tmp_path: Path, cli: Cli) -> None:
    (tmp_path / "empty").mkdir()
    result = cli(["validate", str(tmp_path / "empty")])
    assert result.code == 2
    assert result.out == (
        f"{tmp_path / 'empty'}:1:1: error: folder holds no .yaml or .yml files\n1 of 1 file invalid: 1 error\n"
    )


def test_a_missing_file_is_an_error(cli: Cli) -> None:
    result = cli(["validate", "tests/config/no-such-team.yaml", VALID])
    assert result.code == 2
    assert result.out == ("tests/config/no-such-team.yaml:1:1: error: no such file\n1 of 2 files invalid: 1 error\n")


def test_no_paths_is_a_usage_error(cli: Cli) -> None:
    result = cli(["validate"])
    assert result.code == 2
    assert "Missing argument 'PATH...'" in result.err


def test_a_file_that_is_not_utf8(tmp_path: Path, cli: Cli) -> None:
    team = tmp_path / "latin1.yaml"
    team.write_bytes("version: 1\nname: caf\xe9\n".encode("latin-1"))
    result = cli(["validate", str(team)])
    assert result.code == 2
    assert result.out == (
        f"{team}:2:10: error: the file is not UTF-8 text: byte 0xe9 cannot be read; save the file as UTF-8\n"
        "1 of 1 file invalid: 1 error\n"
    )


def test_strict_turns_warnings_into_errors(tmp_path: Path, cli: Cli) -> None:
    team = _write(tmp_path / "warns.yaml", WARNING_ONLY)
    relaxed = cli(["validate", str(team)])
    assert relaxed.code == 0
    assert relaxed.out == (
        f"{team}:6:3: warning: agent 'spare' is never used: the supervisor 'lead' cannot reach it "
        "through delegates_to or handoffs\n1 file valid (1 warning)\n"
    )
    strict = cli(["validate", "--strict", str(team)])
    assert strict.code == 2
    assert strict.out == relaxed.out.replace(": warning: ", ": error: ").replace(
        "1 file valid (1 warning)", "1 of 1 file invalid: 1 error"
    )
    assert cli(["validate", "--strict", VALID]).code == 0


# -- --import-check ------------------------------------------------------------------------------


def _import_team(folder: Path, module: str, reference: str) -> Path:
    _write(
        folder / f"{module}_tools.py",
        '''\
        def lookup(query: str) -> str:
            """Look something up."""
            return query


        def audit(ctx):
            return None
        ''',
    )
    return _write(
        folder / "team.yaml",
        f"""\
        version: 1
        name: imports
        supervisor: lead
        agents:
          lead:
            delegates_to: [worker]
            tools: [lookup]
            delegation:
              hooks:
                on_complete:
                  - call: {module}_tools:audit
          worker: {{}}
        tools:
          lookup:
            python: {reference}
        """,
    )


def test_import_check_passes_for_a_module_beside_the_team_file(tmp_path: Path, cli: Cli) -> None:
    team = _import_team(tmp_path, "okmod", "okmod_tools:lookup")
    assert cli(["validate", "--import-check", str(team)]).code == 0
    assert str(tmp_path) not in sys.path  # the folder is on sys.path only while importing


def test_import_check_reports_a_missing_module_where_it_is_named(tmp_path: Path, cli: Cli) -> None:
    team = _import_team(tmp_path, "mm", "mm_missing:lookup")
    assert cli(["validate", str(team)]).code == 0  # well formed: plain validation does not import
    result = cli(["validate", "--import-check", str(team)])
    assert result.code == 2
    assert result.out == (
        f"{team}:15:13: error: tools.lookup.python: cannot import module 'mm_missing': "
        f"no module named 'mm_missing' beside the team file ({tmp_path}) or on sys.path\n"
        "1 of 1 file invalid: 1 error\n"
    )


def test_import_check_reports_a_missing_attribute(tmp_path: Path, cli: Cli) -> None:
    team = _import_team(tmp_path, "ma", "ma_tools:lookpu")
    result = cli(["validate", "--import-check", str(team)])
    assert result.code == 2
    assert result.out == (
        f"{team}:15:13: error: tools.lookup.python: 'ma_tools' has no attribute 'lookpu'\n"
        "1 of 1 file invalid: 1 error\n"
    )


def test_import_check_reports_a_failing_hook_module(tmp_path: Path, cli: Cli) -> None:
    team = _import_team(tmp_path, "hk", "hk_tools:lookup")
    (tmp_path / "hk_tools.py").write_text("raise RuntimeError('boom at import')\n")
    result = cli(["validate", "--import-check", "--format", "json", str(team)])
    assert result.code == 2
    diagnostics = json.loads(result.out)["files"][0]["diagnostics"]
    assert [(d["line"], d["column"], d["rule"], d["message"]) for d in diagnostics] == [
        (
            11,
            19,
            "import",
            "agents.lead.delegation.hooks.on_complete[0].call: importing module 'hk_tools' "
            "failed: RuntimeError: boom at import",
        ),
        (15, 13, "import", "tools.lookup.python: importing module 'hk_tools' failed: RuntimeError: boom at import"),
    ]


def test_import_check_keeps_module_output_off_stdout(tmp_path: Path, cli: Cli) -> None:
    team = _import_team(tmp_path, "noisy", "noisy_tools:lookup")
    (tmp_path / "noisy_tools.py").write_text(
        "print('hello from import')\ndef lookup(q: str) -> str:\n    return q\ndef audit(ctx):\n    return None\n"
    )
    result = cli(["validate", "--import-check", "--format", "json", str(team)])
    assert result.code == 0
    assert json.loads(result.out)["valid"] is True
    assert "hello from import" in result.err


# -- teamrun schema, teamrun graph ----------------------------------------------------------------


def test_schema_prints_the_committed_file(cli: Cli) -> None:
    result = cli(["schema"])
    assert result.code == 0
    assert result.out == (REPO / "schemas" / "team.schema.json").read_text()
    json.loads(result.out)


def test_schema_path_prints_where_the_schema_lives(cli: Cli) -> None:
    result = cli(["schema", "--path"])
    assert result.code == 0
    assert Path(result.out.strip()) == schema_path()
    assert Path(result.out.strip()).read_text() == (REPO / "schemas" / "team.schema.json").read_text()


def test_graph_prints_mermaid(cli: Cli) -> None:
    result = cli(["graph", "tests/config/valid/handoffs.yaml"])
    assert result.code == 0
    assert result.out == textwrap.dedent(
        """\
        flowchart TD
          a_triage(["triage<br/><small>supervisor</small>"])
          a_billing["billing"]
          a_tech["tech"]
          a_logs["logs"]
          a_triage -.->|hands off| a_billing
          a_triage -.->|hands off| a_tech
          a_billing -.->|hands off| a_triage
          a_billing -.->|hands off| a_tech
          a_tech -->|delegates| a_logs
          a_tech -.->|hands off| a_triage
          a_logs --- t_a_logs_tail[/"tail"/]
        """
    )


def test_graph_of_a_bigger_team_has_every_edge(cli: Cli) -> None:
    result = cli(["graph", "tests/config/valid/full_language.yaml"])
    assert result.code == 0
    assert result.out.startswith('flowchart TD\n  a_lead(["lead<br/><small>supervisor</small>"])\n')
    assert '  a_researcher["researcher<br/><small>anthropic/claude-3-5-haiku-latest</small>"]' in result.out
    edges = re.findall(r"^  (a_\w+) (-->|-\.->)\|\w[\w ]*\| (a_\w+)$", result.out, re.MULTILINE)
    assert sorted(edges) == sorted(
        [
            ("a_lead", "-->", "a_researcher"),
            ("a_lead", "-->", "a_writer"),
            ("a_lead", "-.->", "a_reviewer"),
            ("a_researcher", "-->", "a_fact_checker"),
            ("a_reviewer", "-.->", "a_lead"),
        ]
    )


@pytest.mark.parametrize("case", ["cycle_two_agents", "yaml_unclosed_bracket", "missing_agents"])
def test_graph_of_an_invalid_file_exits_2_with_its_diagnostics(case: str, cli: Cli) -> None:
    path = f"tests/config/invalid/{case}.yaml"
    result = cli(["graph", path])
    assert result.code == 2
    assert result.out == ""
    expected = (REPO / path).with_suffix(".expected").read_text().splitlines()[:-1]
    assert result.err.splitlines() == [line for line in expected if ": error: " in line]
