"""Approval: --approve policies, the terminal prompt, the rule when nobody can be asked."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest

from teamrun.errors import ApprovalDenied, UsageError
from teamrun.tools import (
    ApprovalPolicy,
    PolicyApprover,
    TerminalApprover,
    UnattendedApprover,
    choose_approver,
    invoke_tool,
)
from teamrun.tools.approval import Approver
from teamrun.tools.base import Tool, ToolSpec, object_schema

KNOWN = ["grep", "lookup", "write_file"]


def test_parse_all_none_and_lists() -> None:
    assert ApprovalPolicy.parse("all", known_tools=KNOWN) == ApprovalPolicy("all")
    assert ApprovalPolicy.parse(" none ", known_tools=KNOWN) == ApprovalPolicy("none")
    policy = ApprovalPolicy.parse("grep, lookup,", known_tools=KNOWN)
    assert policy == ApprovalPolicy("listed", frozenset({"grep", "lookup"}))
    assert policy.allows("grep") and not policy.allows("write_file")
    assert ApprovalPolicy("all").allows("anything")
    assert not ApprovalPolicy("none").allows("grep")


def test_parse_unknown_name_lists_known_ones() -> None:
    with pytest.raises(UsageError) as info:
        ApprovalPolicy.parse("grep,grpe", known_tools=KNOWN)
    assert str(info.value) == ("--approve: unknown tool 'grpe'; known tools are: grep, lookup, write_file")


def test_parse_empty_list_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="'all', 'none' or a comma-separated list"):
        ApprovalPolicy.parse(" , ", known_tools=KNOWN)


def approve(approver: Approver, tool: str = "grep") -> bool:
    return asyncio.run(approver.approve(tool, {"pattern": "x"}))


def test_unattended_denies_with_rerun_hint() -> None:
    with pytest.raises(ApprovalDenied) as info:
        approve(UnattendedApprover())
    assert "not running on a terminal" in str(info.value)
    assert "`--approve grep`" in str(info.value)


def test_choose_approver_without_flag() -> None:
    assert isinstance(choose_approver(None, interactive=False), UnattendedApprover)
    assert isinstance(choose_approver(None, interactive=True), TerminalApprover)


@pytest.mark.parametrize("interactive", [True, False])
def test_approve_all_and_none(interactive: bool) -> None:
    assert approve(choose_approver(ApprovalPolicy("all"), interactive=interactive))
    with pytest.raises(ApprovalDenied, match=r"denied: the user ran teamrun with `--approve none`"):
        approve(choose_approver(ApprovalPolicy("none"), interactive=interactive))


def test_listed_tools_off_terminal() -> None:
    approver = choose_approver(ApprovalPolicy("listed", frozenset({"lookup"})), interactive=False)
    assert approve(approver, "lookup")
    with pytest.raises(ApprovalDenied, match=r"rerun with `--approve lookup,grep`"):
        approve(approver, "grep")


def test_listed_tools_on_terminal_ask_for_the_rest() -> None:
    asked: list[str] = []

    class Asker:
        async def approve(self, tool: str, arguments: dict[str, Any]) -> bool:
            asked.append(tool)
            return False

    approver = PolicyApprover(ApprovalPolicy("listed", frozenset({"lookup"})), otherwise=Asker())
    assert approve(approver, "lookup")
    assert not approve(approver, "grep")
    assert asked == ["grep"]


def terminal(answers: str) -> tuple[TerminalApprover, io.StringIO]:
    err = io.StringIO()
    return TerminalApprover(stdin=io.StringIO(answers), stderr=err), err


def test_terminal_prompt_shows_tool_and_arguments() -> None:
    approver, err = terminal("y\n")
    assert asyncio.run(approver.approve("grep", {"pattern": "TODO", "path": "."}))
    prompt = err.getvalue()
    assert "tool 'grep'" in prompt
    assert '"pattern": "TODO"' in prompt
    assert "[y]es / [N]o" in prompt


@pytest.mark.parametrize(
    ("answer", "expected"),
    [("yes\n", True), ("n\n", False), ("\n", False), ("", False), ("maybe\n", False)],
)
def test_terminal_answers(answer: str, expected: bool) -> None:
    approver, _ = terminal(answer)
    assert approve(approver) is expected


def test_terminal_always_remembers_the_tool() -> None:
    approver, err = terminal("a\n")

    async def twice() -> list[bool]:
        return [await approver.approve("grep", {}), await approver.approve("grep", {})]

    assert asyncio.run(twice()) == [True, True]
    assert err.getvalue().count("Allow it?") == 1


def test_concurrent_prompts_do_not_interleave() -> None:
    approver, err = terminal("y\nn\ny\n")

    async def three() -> list[bool]:
        return list(await asyncio.gather(*(approver.approve(f"tool{i}", {"i": i}) for i in range(3))))

    assert asyncio.run(three()) == [True, False, True]
    prompts = err.getvalue().split("Allow it?")
    assert len(prompts) == 4
    for i, prompt in enumerate(prompts[:3]):
        assert f"tool 'tool{i}'" in prompt  # each prompt is whole, in order


class Guarded(Tool):
    require_approval = True
    spec = ToolSpec("grep", "", object_schema({}, []))

    async def run(self, arguments: dict[str, Any]) -> str:
        return "ran"


def test_denials_reach_the_model_as_error_text() -> None:
    outcome = asyncio.run(invoke_tool(Guarded(), "{}", approver=choose_approver(None, interactive=False)))
    assert not outcome.ok
    assert outcome.content.startswith("Error: the call to tool 'grep' was denied")
    assert "--approve grep" in outcome.content

    approver, _ = terminal("n\n")
    outcome = asyncio.run(invoke_tool(Guarded(), "{}", approver=approver))
    assert outcome.content.startswith("Error: the user denied the call to tool 'grep'.")


def test_prompt_shortens_huge_arguments() -> None:
    approver, err = terminal("n\n")
    approve_args = {"text": "z" * 10_000}
    asyncio.run(approver.approve("write_file", approve_args))
    assert len(err.getvalue()) < 3000
