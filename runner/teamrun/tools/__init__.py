"""Tools agents call: Python functions and commands, with validation, approval and timeouts.

The engine builds them with :func:`build_tools` and runs every call through
:func:`invoke_tool`, which never raises for a failing call: the model gets an
``Error: ...`` text it can act on.
"""

from teamrun.tools.approval import (
    ApprovalPolicy,
    Approver,
    PolicyApprover,
    TerminalApprover,
    UnattendedApprover,
    choose_approver,
)
from teamrun.tools.base import (
    DEFAULT_MAX_OUTPUT_CHARS,
    DEFAULT_TIMEOUT_S,
    Tool,
    ToolOutcome,
    ToolSpec,
    truncate_output,
)
from teamrun.tools.command_tool import CommandTool
from teamrun.tools.invoke import invoke_tool
from teamrun.tools.python_tool import PythonTool, load_callable
from teamrun.tools.registry import build_tool, build_tools

__all__ = [
    "DEFAULT_MAX_OUTPUT_CHARS",
    "DEFAULT_TIMEOUT_S",
    "ApprovalPolicy",
    "Approver",
    "CommandTool",
    "PolicyApprover",
    "PythonTool",
    "TerminalApprover",
    "Tool",
    "ToolOutcome",
    "ToolSpec",
    "UnattendedApprover",
    "build_tool",
    "build_tools",
    "choose_approver",
    "invoke_tool",
    "load_callable",
    "truncate_output",
]
