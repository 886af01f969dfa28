"""invoke_tool: parsing, schema validation, approval, failures as text, validator caching."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from teamrun.errors import ApprovalDenied, ToolError
from teamrun.tools import Tool, ToolOutcome, ToolSpec, invoke_tool, truncate_output
from teamrun.tools import invoke as invoke_module
from teamrun.tools.base import PartialOutput, object_schema


class EchoTool(Tool):
    """Returns its arguments; can be told to fail."""

    def __init__(self, *, require_approval: bool = False, fail: BaseException | None = None) -> None:
        self.spec = ToolSpec(
            name="echo",
            description="Echo.",
            parameters=object_schema(
                {
                    "text": {"type": "string", "minLength": 1},
                    "times": {"type": "integer", "minimum": 1, "default": 1},
                    "options": {
                        "type": "object",
                        "properties": {"sep": {"type": "string", "default": " "}},
                        "default": {},
                    },
                },
                ["text"],
            ),
        )
        self.require_approval = require_approval
        self.fail = fail
        self.calls: list[dict[str, Any]] = []

    async def run(self, arguments: dict[str, Any]) -> str:
        self.calls.append(arguments)
        if self.fail is not None:
            raise self.fail
        return arguments["options"]["sep"].join([arguments["text"]] * arguments["times"])


def invoke(tool: Tool, raw: str, approver: Any) -> ToolOutcome:
    return asyncio.run(invoke_tool(tool, raw, approver=approver))


def test_success_with_defaults_filled(allow: Any) -> None:
    tool = EchoTool()
    outcome = invoke(tool, '{"text": "hi", "times": 2}', allow)
    assert outcome == ToolOutcome(ok=True, content="hi hi", error=None)
    assert tool.calls == [{"text": "hi", "times": 2, "options": {"sep": " "}}]


def test_bad_json_goes_back_as_text(allow: Any) -> None:
    tool = EchoTool()
    outcome = invoke(tool, '{"text": "hi",', allow)
    assert not outcome.ok
    assert outcome.content.startswith("Error: invalid arguments for tool 'echo': arguments are not")
    assert "valid JSON" in outcome.content
    assert tool.calls == []
    outcome = invoke(tool, "[1, 2]", allow)
    assert "arguments must be a JSON object" in outcome.content


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ('{"text": "hi', "Unterminated string starting at char 9"),
        ('{"text": "a\x01"}', "Invalid control character at char 11"),
        ('{"text": "hi",', "Expecting property name enclosed in double quotes at char 14"),
    ],
)
def test_a_json_error_names_its_position_once(allow: Any, raw: str, reason: str) -> None:
    outcome = invoke(EchoTool(), raw, allow)
    assert outcome.content == (f"Error: invalid arguments for tool 'echo': arguments are not valid JSON ({reason})")
    assert " at at " not in outcome.content


def test_every_schema_problem_is_listed(allow: Any) -> None:
    tool = EchoTool()
    outcome = invoke(tool, '{"times": 0, "colour": "red", "options": {"sep": 5}}', allow)
    assert not outcome.ok
    lines = outcome.content.splitlines()
    assert lines[0] == "Error: invalid arguments for tool 'echo':"
    assert "- 'text' is a required property" in lines
    assert "- Additional properties are not allowed ('colour' was unexpected)" in lines
    assert "- options/sep: 5 is not of type 'string'" in lines
    assert "- times: 0 is less than the minimum of 1" in lines
    assert lines[-1] == "Call the tool again with arguments that match its parameters."
    assert outcome.error == outcome.content.removeprefix("Error: ")
    assert tool.calls == []


def test_empty_arguments_mean_an_empty_object(allow: Any) -> None:
    outcome = invoke(EchoTool(), "", allow)
    assert "'text' is a required property" in outcome.content


def test_exception_in_tool_is_error_text(allow: Any) -> None:
    outcome = invoke(EchoTool(fail=KeyError("missing")), '{"text": "a"}', allow)
    assert outcome == ToolOutcome(ok=False, content="Error: KeyError: 'missing'", error="KeyError: 'missing'")


def test_tool_error_message_is_used_verbatim(allow: Any) -> None:
    outcome = invoke(EchoTool(fail=ToolError("no such file")), '{"text": "a"}', allow)
    assert outcome.content == "Error: no such file"


def test_cancellation_propagates(allow: Any) -> None:
    with pytest.raises(asyncio.CancelledError):
        invoke(EchoTool(fail=asyncio.CancelledError()), '{"text": "a"}', allow)


def test_timeout_error_raised_by_the_tool_is_not_a_timeout(allow: Any) -> None:
    tool = EchoTool(fail=TimeoutError("upstream slow"))
    tool.timeout_s = 10
    assert invoke(tool, '{"text": "a"}', allow).content == "Error: TimeoutError: upstream slow"


def test_approval_is_asked_with_validated_arguments(allow: Any) -> None:
    tool = EchoTool(require_approval=True)
    assert invoke(tool, '{"text": "a"}', allow).ok
    assert allow.asked == [("echo", {"text": "a", "times": 1, "options": {"sep": " "}})]


def test_no_approval_needed_means_not_asked(deny: Any) -> None:
    assert invoke(EchoTool(), '{"text": "a"}', deny).ok
    assert deny.asked == []


def test_denial_says_the_user_denied_it(deny: Any) -> None:
    tool = EchoTool(require_approval=True)
    outcome = invoke(tool, '{"text": "a"}', deny)
    assert not outcome.ok
    assert outcome.content.startswith("Error: the user denied the call to tool 'echo'.")
    assert tool.calls == []


def test_invalid_arguments_are_rejected_before_asking(deny: Any) -> None:
    invoke(EchoTool(require_approval=True), '{"text": ""}', deny)
    assert deny.asked == []


class RaisingApprover:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    async def approve(self, tool: str, arguments: dict[str, Any]) -> bool:
        raise self.exc


def test_approver_denial_text_is_passed_on() -> None:
    approver = RaisingApprover(ApprovalDenied("denied: rerun with --approve echo"))
    outcome = invoke(EchoTool(require_approval=True), '{"text": "a"}', approver)
    assert outcome.content == "Error: denied: rerun with --approve echo"


def test_broken_approver_denies() -> None:
    outcome = invoke(EchoTool(require_approval=True), '{"text": "a"}', RaisingApprover(OSError("tty")))
    assert not outcome.ok
    assert "denied" in outcome.content and "OSError: tty" in outcome.content


def test_errors_are_truncated_too(allow: Any) -> None:
    tool = EchoTool(fail=ToolError("e" * 500))
    tool.max_output_chars = 50
    outcome = invoke(tool, '{"text": "a"}', allow)
    assert outcome.content.endswith("\n[... truncated 457 characters ...]")
    assert len(outcome.content.splitlines()[0]) == 50


def test_validator_is_compiled_once_per_tool(allow: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[Any] = []
    original = invoke_module._filling_defaults

    def counting(cls: Any) -> Any:
        compiled.append(cls)
        return original(cls)

    monkeypatch.setattr(invoke_module, "_filling_defaults", counting)
    tool = EchoTool()
    for _ in range(3):
        invoke(tool, '{"text": "a"}', allow)
    invoke(EchoTool(), '{"text": "a"}', allow)
    assert len(compiled) == 2


def test_invalid_schema_is_error_text(allow: Any) -> None:
    tool = EchoTool()
    tool.spec = ToolSpec("bad", "", {"type": "object", "properties": {"x": {"type": "nope"}}})
    outcome = invoke(tool, "{}", allow)
    assert not outcome.ok and "invalid parameter schema" in outcome.content


def test_spec_must_be_an_object_schema() -> None:
    with pytest.raises(ValueError, match="type object"):
        ToolSpec("t", "", {"type": "string"})


def test_truncate_output() -> None:
    assert truncate_output("abc", None) == "abc"
    assert truncate_output("abc", 3) == "abc"
    assert truncate_output("abcdef", 2) == "ab\n[... truncated 4 characters ...]"
    cut_while_read = PartialOutput("abc", 5)
    assert truncate_output(cut_while_read, 2) == "ab\n[... truncated 6 characters ...]"
    assert truncate_output(cut_while_read, 8) == "abc\n[... truncated 5 characters ...]"
    assert truncate_output(cut_while_read, None) == "abc\n[... truncated 5 characters ...]"
    assert type(truncate_output(PartialOutput("abc", 0), 8)) is str
