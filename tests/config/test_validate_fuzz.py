"""Property-based: whatever text a team file holds, ``teamrun validate`` answers with
located diagnostics and exit code 0 or 2 — never a traceback.

And when it says a file is valid, the typed models accept the same data (the
JSON Schema and the pydantic models agree).
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teamrun.cli import main
from teamrun.config.loader import check_file
from teamrun.config.models import TeamConfig

HERE = Path(__file__).resolve().parent
CORPUS = [p.read_text() for p in sorted((HERE / "valid").glob("*.yaml"))]
CORPUS += [p.read_text() for p in sorted((HERE / "invalid").glob("*.yaml"))[::6]]
KEYS = sorted(
    {
        "version",
        "name",
        "supervisor",
        "agents",
        "tools",
        "defaults",
        "limits",
        "vars",
        "description",
        "instructions",
        "delegates_to",
        "handoffs",
        "budget",
        "delegation",
        "output_schema",
        "model",
        "temperature",
        "max_steps",
        "hooks",
        "on_start",
        "on_complete",
        "on_iteration",
        "when",
        "call",
        "python",
        "command",
        "parameters",
        "message_filter",
        "drop_matching",
        "tool",
        "parallel",
        "max_depth",
        "<<",
        "lead",
        "worker",
    }
)
NASTY = [
    ".nan",
    ".inf",
    "-.inf",
    "|\n  lead",
    '"lead\\n"',
    "1.0",
    "5.0",
    "",
    "[",
    "]",
    "{",
    "}",
    "*a",
    "&a",
    "&a [*a]",
    "!!python/object:os.system {}",
    "!!int x",
    "!foo 1",
    "${X",
    "${UNSET_TEAMRUN_FUZZ}",
    "$${x}",
    "{{ x",
    "{% if %}",
    "yes",
    "no",
    "~",
    "-1",
    "0",
    "1e400",
    "2024-01-01",
    "'quoted'",
    '"\\ud800"',
    '"\\x00"',
    "|",
    ">-",
    "- a",
    "a: b: c",
    "\t",
    "@x",
    "`x`",
    "[a, b]",
    "{a: 1}",
    "*lead",
    "<<: *a",
    "---",
    "...",
    "%YAML 1.1",
    "? a",
    "\x00",
    "\x85",
    "\u2028",
    "1" + "0" * 400,
    "-1" + "0" * 400,
    "1.0e400",
    "'a{99999999999}'",
    "'(?P<x>a)(?P<x>b)'",
]
SETTINGS = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def team_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("fuzz") / "team.yaml"


def _validate(path: Path, text: str) -> None:
    """Write ``text``, validate it through the CLI, and check the output's shape."""
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["validate", str(path)])
    assert code in (0, 2)
    assert "internal error while checking" not in out.getvalue()
    *lines, summary = out.getvalue().splitlines()
    located = re.compile(rf"^{re.escape(str(path))}:\d+:\d+: (error|warning): .+$")
    for line in lines:
        assert located.match(line), line
    if code == 0:
        assert re.fullmatch(r"1 file valid( \(\d+ warnings?\))?", summary), summary
        # valid for the validator means valid for the typed models too
        TeamConfig.model_validate(check_file(path).data)
    else:
        assert lines, "exit 2 must come with at least one diagnostic"
        assert re.fullmatch(r"1 of 1 file invalid: \d+ errors?(, \d+ warnings?)?", summary), summary


# -- strategies ------------------------------------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=12),
    st.sampled_from(["lead", "worker", "offline", "{{ x }}", "{% if %}", "${X:-1}", "(", "a:b"]),
)
keys = st.one_of(st.sampled_from(KEYS), st.text(min_size=1, max_size=10))
structures = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5),
    max_leaves=30,
)
agent_names = st.sampled_from(["lead", "worker", "helper", "bad name", "w2"])
team_like = st.fixed_dictionaries(
    {
        "version": st.sampled_from([1, 1, 1, 2, "1"]),
        "name": st.sampled_from(["fuzz", "fuzz team", "f"]),
        "supervisor": agent_names,
        "agents": st.dictionaries(
            agent_names,
            st.dictionaries(st.sampled_from(KEYS), structures, max_size=4)
            | st.fixed_dictionaries({"delegates_to": st.lists(agent_names, max_size=3)}),
            min_size=1,
            max_size=4,
        ),
    },
    optional={"tools": st.dictionaries(st.sampled_from(["grep", "t"]), structures, max_size=2), "limits": structures},
)


@st.composite
def mutated_corpus(draw: st.DrawFn) -> str:
    lines = draw(st.sampled_from(CORPUS)).splitlines(keepends=True) or ["\n"]
    for _ in range(draw(st.integers(1, 5))):
        if not lines:
            lines = ["\n"]
        index = draw(st.integers(0, len(lines) - 1))
        operation = draw(st.sampled_from(["delete", "duplicate", "char", "indent", "dedent", "insert", "swap"]))
        line = lines[index]
        if operation == "delete":
            del lines[index]
        elif operation == "duplicate":
            lines.insert(index, line)
        elif operation == "char" and line:
            at = draw(st.integers(0, len(line) - 1))
            char = draw(st.sampled_from([*list(":-[]{}&*!|>'\"%@`#,\t $\\"), "x", "0", "\x00", "é"]))
            lines[index] = line[:at] + char + line[at + 1 :]
        elif operation == "indent":
            lines[index] = draw(st.sampled_from([" ", "  ", "    ", "\t"])) + line
        elif operation == "dedent":
            lines[index] = line[draw(st.integers(1, 4)) :] if line.startswith(" ") else line
        elif operation == "insert":
            indent = " " * draw(st.sampled_from([0, 2, 4, 6]))
            key = draw(keys).replace("\n", " ")
            value = draw(st.sampled_from(NASTY) | st.text(max_size=8))
            lines.insert(index, f"{indent}{key}: {value}\n")
        elif operation == "swap" and index + 1 < len(lines):
            lines[index], lines[index + 1] = lines[index + 1], lines[index]
    return "".join(lines)


# -- properties ----------------------------------------------------------------------------------


@SETTINGS
@given(text=st.text(max_size=300) | st.sampled_from(NASTY))
def test_arbitrary_text(team_file: Path, text: str) -> None:
    _validate(team_file, text)


@SETTINGS
@given(data=structures | team_like)
def test_random_structures_dumped_as_yaml(team_file: Path, data: object) -> None:
    _validate(team_file, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


@SETTINGS
@given(text=mutated_corpus())
def test_mutations_of_the_corpus(team_file: Path, text: str) -> None:
    _validate(team_file, text)


# -- what the schema accepts, the typed models accept -------------------------------------------------


def test_what_the_schema_accepts_the_models_accept() -> None:
    """Every document the schema accepts, the typed models accept. The valid corpus files are checked
    every run (so the property always checks something), then drawn and mutated documents."""
    from teamrun.config.schema import team_validator

    validator = team_validator()
    valid_files = [_safe_load(p.read_text()) for p in sorted((HERE / "valid").glob("*.yaml"))]
    plain = [data for data in valid_files if validator.is_valid(data)]  # (not those written with ${VAR}s)
    for data in plain:
        TeamConfig.model_validate(data)
    accepted: list[object] = []

    @SETTINGS
    @given(data=team_like | mutated_corpus().map(_safe_load))
    def check(data: object) -> None:
        if validator.is_valid(data):
            accepted.append(data)
            TeamConfig.model_validate(data)

    check()
    assert len(plain) >= 10 and accepted, f"the property checked almost nothing ({len(plain)}, {len(accepted)})"


def _safe_load(text: str) -> object:
    try:
        return _json_keys(yaml.safe_load(text))
    except Exception:  # e.g. `!!int x` raises ValueError from PyYAML itself
        return None


def _json_keys(value: object) -> object:
    """Mapping keys as text, as teamrun's own loader gives them (YAML allows `0:`; JSON does not)."""
    if isinstance(value, dict):
        return {str(k): _json_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_keys(v) for v in value]
    return value


# -- numbers and regexes of any size in the places that hold them -------------------------------------

NUMBER_FIELDS = ["max_steps", "max_tool_calls", "max_depth", "max_cost_usd", "timeout_s", "max_total_tokens"]
huge_numbers = st.one_of(
    st.integers(),
    st.integers(min_value=10**300, max_value=10**500),
    st.integers(min_value=-(10**500), max_value=-(10**300)),
    st.floats(allow_nan=False),
)
regexes = st.one_of(
    st.text(alphabet="a(){}[]?*+|\\^$0123456789,.:<>=!P", max_size=20),
    st.integers(min_value=0, max_value=10**30).map(lambda n: f"a{{{n}}}"),
    st.integers(min_value=0, max_value=10**30).map(lambda n: f"a{{1,{n}}}"),
)


@SETTINGS
@given(
    concurrency=huge_numbers,
    budget=st.dictionaries(st.sampled_from(NUMBER_FIELDS), huge_numbers, max_size=3),
    limits=st.dictionaries(st.sampled_from(NUMBER_FIELDS), huge_numbers, max_size=3),
    temperature=huge_numbers,
    pattern=regexes,
    drop=regexes,
)
def test_numbers_and_patterns_of_any_size(
    team_file: Path,
    concurrency: object,
    budget: dict[str, object],
    limits: dict[str, object],
    temperature: object,
    pattern: str,
    drop: str,
) -> None:
    """`max_concurrency: 1` and 400 zeros, `pattern: 'a{99999999999}'`: reported, never a traceback."""
    data = {
        "version": 1,
        "name": "numbers",
        "supervisor": "lead",
        "limits": limits,
        "agents": {
            "lead": {
                "temperature": temperature,
                "budget": budget,
                "delegates_to": ["worker"],
                "tools": ["grep"],
                "delegation": {"max_concurrency": concurrency, "message_filter": {"drop_matching": [drop]}},
                "output_schema": {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}},
            },
            "worker": {},
        },
        "tools": {
            "grep": {"command": ["grep", "{{ p }}"], "parameters": {"p": {"type": "string", "pattern": pattern}}}
        },
    }
    _validate(team_file, yaml.safe_dump(data, sort_keys=False, width=10_000))


def test_the_reported_shapes_are_errors_not_tracebacks(team_file: Path) -> None:
    text = (
        "version: 1\nname: t\nsupervisor: lead\nagents:\n  lead:\n    delegates_to: [w]\n"
        "    budget: {max_tool_calls: 5}\n"
        f"    delegation: {{max_concurrency: 1{'0' * 400}}}\n  w:\n    budget: {{max_tool_calls: 1{'0' * 400}}}\n"
        "    tools: [t]\n"
        "tools:\n  t:\n    command: [echo, '{{ x }}']\n"
        "    parameters: {x: {type: string, pattern: 'a{99999999999}'}}\n"
    )
    team_file.write_text(text)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["validate", str(team_file)])
    assert code == 2
    assert "'pattern' is not a valid regular expression: 'a{99999999999}'" in out.getvalue()


def test_a_crash_in_one_file_does_not_lose_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Should a check ever crash, the folder's report goes on and says which file, with exit 2."""
    from teamrun.config.checks import semantic as checks

    folder = tmp_path / "teams"
    folder.mkdir()
    good = (HERE / "valid" / "minimal.yaml").read_text()
    (folder / "a.yaml").write_text(good)
    (folder / "b.yaml").write_text(good.replace("name:", "description: crash here\nname:"))
    (folder / "c.yaml").write_text(good)
    original = checks.check_semantics

    def fragile(file: str, text: str, *args: object, **kwargs: object) -> object:
        if "crash here" in text:
            raise OverflowError("int too large to convert to float")
        return original(file, text, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("teamrun.config.loader.check_semantics", fragile)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["validate", str(folder)])
    assert code == 2
    assert out.getvalue().splitlines() == [
        f"{folder / 'b.yaml'}:1:1: error: internal error while checking this file "
        "(OverflowError: int too large to convert to float); please report it",
        "1 of 3 files invalid: 1 error",
    ]
