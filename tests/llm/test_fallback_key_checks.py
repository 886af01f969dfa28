"""``validate --import-check`` on a fallback's ``api_key_env``: each problem said once."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_a_key_variable_that_is_not_a_name_is_said_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from teamrun.cli.validate_cmd import check_fallback_keys
    from teamrun.config.loader import check_file

    monkeypatch.delenv("TEAMRUN_UNSET_FALLBACK_KEY", raising=False)
    path = tmp_path / "team.yaml"
    path.write_text(
        "version: 1\n"
        "name: keys\n"
        "supervisor: lead\n"
        "defaults:\n"
        "  model: openai/a\n"
        "  fallbacks:\n"
        "    - model: openai/b\n"
        "      api_key_env: TEAMRUN_UNSET_FALLBACK_KEY\n"
        "    - model: openai/d\n"
        "      api_key_env: 'lower case-bad'\n"
        "agents:\n"
        "  lead:\n"
        "    instructions: hi\n"
    )

    result = check_file(path, import_check=True)
    said = [d.render() for d in [*result.diagnostics, *check_fallback_keys(result)]]
    said.sort(key=lambda line: int(line.split(":")[1]))  # in file order, as validate prints them

    assert said == [
        f"{path}:8:20: error: defaults.fallbacks[0].api_key_env: the variable TEAMRUN_UNSET_FALLBACK_KEY is not set "
        "(or empty) here; this fallback would fail when it is needed: export it with the API key",
        f"{path}:10:20: error: defaults.fallbacks[1].api_key_env: 'lower case-bad' is not an environment variable "
        "name (write the variable's name, e.g. OPENAI_API_KEY, never the key itself)",
    ]
