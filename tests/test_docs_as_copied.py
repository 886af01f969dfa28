"""What a new user copies from the README and the docs works as copied (issue 22.28, 22.29).

* The "team in twenty lines" and the commands under it, pasted into an empty folder, run: the
  researchers find the notes the commands create. A command tool's non-zero exit reaches the model as
  the tool's error with its code, so grep's "no match" (1) reads apart from its "no such folder" (2).
* The product-comparison command the README shows runs without an error: its search tool declares
  grep's "no match" (1) a normal exit (`ok_exit_codes`), and the sample material has what it compares.
* Every `pip install` in the docs works from a clone of this repository: `.` with the extra
  (`pip install '.[serve]'`), never `teamrun[serve]`, which asks the package index instead.
* The "Validate in CI" commands, copied in order into a fresh clone where only set-up command 1 ran
  (teamrun and its dependencies, nothing else), pass: a ready-made team's MCP server is a program
  `--strict` and `--import-check` need, so the section installs it (issue 33.7).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import sysconfig
import tomllib
import urllib.request
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.cli import main, reference
from teamrun.testing import delegate, text, tool_call
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = [README, *sorted((REPO / "docs").glob("*.md")), REPO / "examples" / "README.md"]


def _twenty_lines() -> tuple[str, list[str]]:
    """The README's team file and the shell lines shown under it."""
    section = README.read_text(encoding="utf-8").split("## A team in twenty lines\n", 1)[1].split("\n## ", 1)[0]
    team = re.search(r"^```yaml\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    commands = re.search(r"^```bash\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert team is not None and commands is not None
    return team.group(1), commands.group(1).splitlines()


def test_the_team_in_twenty_lines_runs_as_copied(tmp_path: Path) -> None:
    team, commands = _twenty_lines()
    (tmp_path / "team.yaml").write_text(team, encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "runner"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("TEAMRUN_MODEL", None)

    done = [
        subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        for line in commands
    ]

    assert [d.returncode for d in done] == [0] * len(commands), [d.stderr for d in done]
    execute = done[-1]
    assert "teamrun execute team.yaml" in commands[-1]
    assert "tool notes ok" in execute.stderr and "error" not in execute.stderr
    assert "notes/languages.md:1:Rust: memory safe without a garbage collector." in execute.stdout


@pytest.mark.parametrize(
    ("make_notes", "seen"),
    [
        (True, "Error: command 'grep' exited with code 1"),
        (False, "Error: command 'grep' exited with code 2 [stderr] grep: notes/: No such file or directory"),
    ],
    ids=["no-match", "no-folder"],
)
def test_a_failing_grep_is_the_tool_s_error_with_its_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scripted_model: Any, make_notes: bool, seen: str
) -> None:
    team, _ = _twenty_lines()
    (tmp_path / "team.yaml").write_text(team, encoding="utf-8")
    if make_notes:
        (tmp_path / "notes").mkdir()
        (tmp_path / "notes" / "languages.md").write_text("Rust: memory safe.\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # a command tool without `cwd` runs where teamrun runs
    model = scripted_model(
        {
            "lead": [delegate("researcher", task="Find notes on Zig"), text("No notes on Zig.")],
            "researcher": [tool_call("notes", subject="Zig"), text("Nothing on Zig.")],
        }
    )

    result = teamrun.load_team(tmp_path / "team.yaml", chat_model=model).run_sync("Compare Zig")

    assert result.status == "done"
    tool_message = model.calls_of("lead/researcher")[1].messages[-1]
    assert tool_message["role"] == "tool" and " ".join(str(tool_message["content"]).split()).startswith(seen)


def _readme_command(team: str) -> str:
    """The README's ``teamrun execute teams/<team>.yaml ...`` line, as shown."""
    blocks = re.findall(r"^```bash\n(.*?)^```", README.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    lines = [line for block in blocks for line in block.splitlines()]
    found = [line for line in lines if line.startswith(f"teamrun execute teams/{team}.yaml ")]
    assert len(found) == 1, found
    return found[0]


def test_the_product_comparison_example_runs_as_shown_without_an_error() -> None:
    """Issue 33.12: its answer showed `tool search_material error: command 'grep' exited with code 1`.
    The command as the README shows it, run where a clone is: the researcher finds the sample material,
    and neither the answer (stdout) nor the progress lines (stderr) carry an error."""
    command = _readme_command("product-comparison")
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "runner"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("TEAMRUN_MODEL", None)
    env.pop("TEAMRUN_API_BASE", None)

    done = subprocess.run(["bash", "-c", command], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    assert "tool search_material ok" in done.stderr  # not a terminal: plain progress lines
    assert "research/databases.md:" in done.stdout  # what the researcher found reached the answer
    assert "error" not in done.stdout.lower() and "error" not in done.stderr.lower(), (done.stdout, done.stderr)


def test_a_search_with_no_match_is_an_empty_result_the_model_reads(
    monkeypatch: pytest.MonkeyPatch, scripted_model: Any
) -> None:
    """The team's search tool declares grep's 1 ("no line matched") normal: no error, an empty result."""
    model = scripted_model(
        {
            "lead": [delegate("researcher", task="Research Zig: price"), text("done")],
            "researcher": [
                tool_call("search_material", query="Zig"),
                text(
                    '{"product": "Zig", "criteria": [{"criterion": "price", "value": "UNCONFIRMED", '
                    '"source": "UNCONFIRMED"}]}'
                ),
            ],
            "table_writer": [],
        }
    )
    team = teamrun.load_team(REPO / "teams" / "product-comparison.yaml", chat_model=model)

    result = team.run_sync("Compare Zig")

    assert result.status == "done"
    tool_message = model.calls_of("lead/researcher")[1].messages[-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == "(no output; exit code 1)"


def _pip_installs(doc: Path) -> list[list[str]]:
    """What each `pip install` in a doc installs (its first word after the options): in bash blocks, inline
    code and the CLI reference alike."""
    found = []
    for line in doc.read_text(encoding="utf-8").splitlines():
        for match in re.finditer(r"pip install ((?:-\w+ )*)('[^']*'|\"[^\"]*\"|[^\s`)]+)", line):
            word = match.group(2)
            found.append(shlex.split(word if word == "." else word.rstrip(".")))
    return found


@pytest.mark.parametrize("doc", DOCS, ids=[str(p.relative_to(REPO)) for p in DOCS])
def test_pip_install_lines_work_from_a_clone(doc: Path) -> None:
    extras = set(
        tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    )
    problems = []
    for words in _pip_installs(doc):
        for word in words:
            package, _, rest = word.partition("[")
            wanted = set(rest.rstrip("]").split(",")) - {""}
            if package == "teamrun":  # other packages (e.g. an MCP server a team needs) come from the index
                problems.append(
                    f"pip install {word}: from a clone that asks the package index; write "
                    f"pip install '.[{rest.rstrip(']')}]'"
                    if rest
                    else f"pip install {word}"
                )
            elif wanted - extras:
                problems.append(f"pip install {word}: no such extra (extras: {', '.join(sorted(extras))})")
    assert problems == []


def test_the_check_finds_the_index_form(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("```bash\npip install 'teamrun[serve]'\n```\nand `pip install '.[serve]'`\n", encoding="utf-8")
    assert _pip_installs(doc) == [["teamrun[serve]"], [".[serve]"]]


def test_the_cli_reference_in_the_readme_says_the_clone_form_too() -> None:
    rendered = reference.render()
    assert "teamrun[" not in rendered
    assert "'.[ray]'" in rendered and "'.[serve]'" in rendered


def _validate_in_ci() -> list[str]:
    """The shell lines of the README's "Validate in CI" block, in order."""
    section = README.read_text(encoding="utf-8").split("## Validate in CI\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"^```bash\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def _programs_of(line: str) -> list[str]:
    """The console scripts a ``pip install NAME...`` line adds (each name must be installed here too, as
    the test extra installs what the docs install)."""
    names = [word for word in shlex.split(line.split("#", 1)[0])[2:] if not word.startswith("-")]
    programs = []
    for name in names:
        assert not name.startswith("."), f"{line}: teamrun itself comes from set-up command 1"
        try:
            scripts = metadata.distribution(name).entry_points.select(group="console_scripts")
        except metadata.PackageNotFoundError:
            pytest.fail(f"{line}: {name} is not installed in the test environment (add it to the test extra)")
        programs += [script.name for script in scripts]
    return programs


def test_the_validate_in_ci_commands_pass_as_copied_after_set_up_command_1(tmp_path: Path) -> None:
    lines = _validate_in_ci()
    clone = tmp_path / "teamrun"
    shutil.copytree(REPO / "teams", clone / "teams")
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    # a PATH as after `pip install .` alone: teamrun, the system's programs, and what the block's own
    # `pip install` lines add (their programs, taken from this environment: the test does not download)
    scripts = Path(sysconfig.get_path("scripts"))
    fresh_bin = tmp_path / "bin"
    fresh_bin.mkdir()
    wanted = ["teamrun"]
    for line in lines:
        if line.startswith("pip install "):
            wanted += _programs_of(line)
    for program in wanted:
        assert (scripts / program).is_file(), f"{program} is not in {scripts}"
        (fresh_bin / program).symlink_to(scripts / program)
    env = {
        **os.environ,
        "PATH": f"{fresh_bin}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "PYTHONPATH": str(REPO / "runner"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }

    done = {
        line: subprocess.run(["bash", "-c", line], cwd=clone, env=env, capture_output=True, text=True, timeout=300)
        for line in lines
        if not line.startswith("pip install ")
    }  # the timeout is a hang guard only

    assert {line: run.returncode for line, run in done.items()} == dict.fromkeys(done, 0), {
        line: run.stdout[-2000:] + run.stderr[-2000:] for line, run in done.items() if run.returncode
    }
    assert any("--strict" in line for line in done) and any("--import-check" in line for line in done)


def _bash_blocks(heading: str) -> list[list[str]]:
    """The lines of each ```bash block under README's ``heading`` (up to the next heading)."""
    text = README.read_text(encoding="utf-8")
    section = re.split(r"^#+ ", text.split(f"\n{heading}\n", 1)[1], maxsplit=1, flags=re.MULTILINE)[0]
    return [block.splitlines() for block in re.findall(r"^```bash\n(.*?)^```", section, re.MULTILINE | re.DOTALL)]


def _shell_env() -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "runner"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    for name in ("TEAMRUN_MODEL", "TEAMRUN_API_BASE", "TEAMRUN_A2A_URL", "TEAMRUN_API_TOKENS"):
        env.pop(name, None)
    return env


def test_a_ready_made_team_copied_with_its_samples_runs_from_anywhere(tmp_path: Path) -> None:
    """Issue 42.17: a command tool's `cwd:` is the team file's folder's, not where teamrun runs. The README's
    copy commands, run in a clone; then the copy run from another folder."""
    (copy_lines,) = _bash_blocks("## Ready-made teams")[:1]
    clone = tmp_path / "teamrun"
    shutil.copytree(REPO / "teams", clone / "teams")
    env = _shell_env()

    done = [
        subprocess.run(["bash", "-c", line], cwd=clone, env=env, capture_output=True, text=True, timeout=120)
        for line in copy_lines
    ]  # the timeout is a hang guard only
    assert [d.returncode for d in done] == [0] * len(copy_lines), [d.stderr for d in done]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    team = clone / "my-team" / "research-report.yaml"
    again = subprocess.run(
        ["teamrun", "execute", str(team), "--input", "Compare Rust and Go"],
        cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    for run in (done[-1], again):
        assert run.returncode == 0, run.stderr
        assert "tool notes ok" in run.stderr and "does not exist" not in run.stdout, (run.stdout, run.stderr)
        assert "notes/rust.md:1:# Rust" in run.stdout


def test_a_team_copied_without_its_samples_is_refused_before_it_runs(tmp_path: Path) -> None:
    """Copied alone, the team's `cwd: samples` is looked for beside the copy: refused at load (exit 2, nothing
    run), where it used to run and exit 0 with the tool's error inside the answer."""
    shutil.copy(REPO / "teams" / "research-report.yaml", tmp_path)
    done = subprocess.run(
        ["teamrun", "execute", "research-report.yaml", "--input", "Compare Rust and Go"],
        cwd=tmp_path, env=_shell_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert "relative to the team file's folder" in done.stderr and "samples" in done.stderr


def test_a_cwd_missing_at_run_time_says_it_is_relative_to_the_team_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `${VAR}` cwd is not judged by validate: a folder missing when the tool runs is the tool's error, which
    says where it was looked for and why there."""
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: cwd-team\nsupervisor: lead\n"
        "agents:\n  lead: {instructions: Answer., tools: [ls]}\n"
        "tools:\n  ls: {command: [ls], cwd: '${TEAMRUN_TEST_DATA_DIR:-data}'}\n",
        encoding="utf-8",
    )
    monkeypatch.delenv("TEAMRUN_TEST_DATA_DIR", raising=False)
    monkeypatch.chdir(REPO)  # not where the team file is

    assert main(["execute", str(team), "-i", "go", "--progress", "none"]) == 0
    missing = str(tmp_path / "data")
    assert (
        f"working directory {missing!r} does not exist (`cwd: data` is relative to the team file's folder)"
        in " ".join(capsys.readouterr().out.split())
    )


def test_a_served_team_is_the_remote_worker_of_another_as_copied(tmp_path: Path) -> None:
    """Issue 42.21: the README's two commands, on a free port instead of 9999: `teamrun serve` is an A2A agent
    the remote-worker team delegates to (no test server of this repository needed)."""
    blocks = _bash_blocks("### Remote agents (A2A)")
    (serve_line,), (execute_line,) = blocks
    port = str(_free_port())
    serve_line, execute_line = (line.replace("9999", port) for line in (serve_line, execute_line))
    assert serve_line.startswith("teamrun serve teams/research-report.yaml ")
    env = _shell_env()
    card = f"http://127.0.0.1:{port}/a2a/research-report/.well-known/agent-card.json"

    server = subprocess.Popen(
        ["bash", "-c", f"exec {serve_line}"], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        wait_until(lambda: _answers(card), "the served team's agent card", alive=server)
        done = subprocess.run(
            ["bash", "-c", execute_line], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
        )  # a hang guard only
    finally:
        server.terminate()
        server.communicate(timeout=60)

    assert done.returncode == 0, done.stderr
    assert f"lead \u203a researcher: started (a2a:http://127.0.0.1:{port}/a2a/research-report)" in done.stderr
    assert "lead \u203a researcher: ok" in done.stderr
    assert "researcher (ok):" in done.stdout and "notes/rust.md" in done.stdout  # the served team's own research


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return bool(response.status == 200)
    except OSError:
        return False
