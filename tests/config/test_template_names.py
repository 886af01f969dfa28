"""Names templates and hook conditions read are checked against what they really get.

`{{ vars.audiense }}` (vars declares `audience`) fails every run; `agnet == 'x'`
in a hook's `when:` makes the hook fail and be skipped with exit 0. Both are
reported by `teamrun validate` at the line and column of the name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from teamrun import load_team
from teamrun.config.checks.templates import HOOK_NAMES, INSTRUCTION_NAMES
from teamrun.engine.delegation.hooks import HookContext


def test_hook_names_are_the_engines_hook_context() -> None:
    assert set(HOOK_NAMES) == {f.name for f in dataclasses.fields(HookContext)}


def test_every_name_validate_accepts_is_there_when_the_team_runs(tmp_path: Path, cli: Callable[..., Any]) -> None:
    team = tmp_path / "team.yaml"
    reads = " ".join(f"{{{{ {name} }}}}" for name in INSTRUCTION_NAMES)
    hook_reads = " ".join(f"{{{{ {name} }}}}" for name in HOOK_NAMES)
    condition = " and ".join(f"{name} is defined" for name in HOOK_NAMES)
    team.write_text(
        "version: 1\nname: names\nsupervisor: lead\nvars: {audience: devs}\n"
        "agents:\n  lead:\n    model: offline\n"
        f"    instructions: '{reads} {{{{ vars.audience }}}}'\n"
        "    delegates_to: [worker]\n"
        "    delegation:\n      hooks:\n        on_start:\n"
        f"          - when: '{condition}'\n"
        f"            append_prompt: '{hook_reads}'\n"
        "        on_complete:\n"
        f"          - when: '{condition}'\n"
        "            result_text: 'checked {{ result }}'\n"
        "  worker: {model: offline}\n"
    )
    assert cli(["validate", "--strict", str(team)]).out == "1 file valid\n"
    result = load_team(team).run_sync("go")
    assert result.status == "done"
    assert result.hook_errors == []
    assert "checked" in result.final_text


def test_vars_without_a_vars_section_is_a_warning(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """Without `vars:` the values can only come from `--var`: not wrong, but a typo cannot be told apart."""
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: names\nsupervisor: lead\nagents:\n  lead:\n"
        "    instructions: Write for {{ vars.audience }}.\n"
    )
    result = cli(["validate", str(team)])
    assert (result.code, result.out.splitlines()) == (
        0,
        [
            f"{team}:6:32: warning: agents.lead.instructions uses vars.audience, but the file has no 'vars:' "
            "section: every run must pass --var audience=... (declare it under 'vars:' to give it a default)",
            "1 file valid (1 warning)",
        ],
    )
    assert cli(["validate", "--strict", str(team)]).code == 2


def test_names_read_on_purpose_when_missing_are_not_reported(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """`vars.tone | default(...)` and `is defined` are how a template takes an optional `--var`."""
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: names\nsupervisor: lead\nvars: {audience: devs}\nagents:\n  lead:\n"
        "    model: offline\n"
        "    instructions: >-\n"
        "      {{ vars.audience }} {{ vars.tone | default('plain') }}\n"
        "      {% if vars.region is defined %}{{ vars.region }}{% endif %}\n"
        "      {% if extra is defined %}{{ extra }}{% endif %}\n"
    )
    assert cli(["validate", "--strict", str(team)]).out == "1 file valid\n"
    assert load_team(team, vars={"tone": "warm"}).run_sync("go").status == "done"
