"""Who decides whether a tool marked ``require_approval`` may run.

An :class:`Approver` answers yes or no; to deny with a message of its own it
raises :class:`teamrun.errors.ApprovalDenied`, whose text the model then sees.
:func:`choose_approver` combines the CLI's ``--approve`` value with where
teamrun runs:

============================  ==========================  ===========================
``--approve``                 on a terminal               not on a terminal (CI)
============================  ==========================  ===========================
not given                     ask (y/N prompt)            deny, suggest ``--approve``
``all``                       allow                       allow
``none``                      deny                        deny
``grep,lookup``               allow those, ask for rest   allow those, deny the rest
============================  ==========================  ===========================
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TextIO

from teamrun.errors import ApprovalDenied, UsageError
from teamrun.logs import get_logger
from teamrun.terminal import inert, visible_json
from teamrun.tools._threads import run_in_daemon_thread

__all__ = [
    "ApprovalPolicy",
    "Approver",
    "PolicyApprover",
    "TerminalApprover",
    "UnattendedApprover",
    "choose_approver",
    "denied_by_user",
]

log = get_logger(__name__)

_PROMPT_ARGUMENT_CHARS = 2_000
"""Arguments longer than this are shortened in the prompt."""


class Approver(Protocol):
    """Decides whether one tool call may run."""

    async def approve(self, tool: str, arguments: dict[str, Any]) -> bool:
        """True to allow the call; False (or raise ``ApprovalDenied``) to deny it."""
        ...


def denied_by_user(tool: str) -> str:
    """The model-visible reason when a person answered no."""
    return (
        f"the user denied the call to tool {tool!r}. Do not call it again with the same "
        "arguments; continue without it or explain what you needed it for."
    )


def _rerun_hint(tool: str) -> str:
    return f"rerun with `--approve {tool}` (or `--approve all`) to allow it"


@dataclass(frozen=True)
class ApprovalPolicy:
    """Which tools the user approved up front (the CLI's ``--approve`` value)."""

    mode: Literal["all", "none", "listed"]
    """``all``: approve every tool; ``none``: deny every one; ``listed``: approve ``tools``."""
    tools: frozenset[str] = frozenset()
    """The approved tools when ``mode`` is ``listed``."""

    @classmethod
    def parse(cls, value: str, *, known_tools: Iterable[str]) -> ApprovalPolicy:
        """Parse ``all``, ``none`` or a comma-separated list of tool names.

        Raises :class:`UsageError` for an empty list or a name not in ``known_tools``.
        """
        text = value.strip()
        if text in ("all", "none"):
            return cls(mode="all" if text == "all" else "none")
        names = [name.strip() for name in text.split(",") if name.strip()]
        if not names:
            raise UsageError("--approve needs 'all', 'none' or a comma-separated list of tools")
        known = sorted(set(known_tools))
        unknown = [name for name in names if name not in known]
        if unknown:
            raise UsageError(
                f"--approve: unknown tool {', '.join(repr(n) for n in unknown)}; "
                f"known tools are: {', '.join(known) if known else '(none)'}"
            )
        return cls(mode="listed", tools=frozenset(names))

    def allows(self, tool: str) -> bool:
        """Whether ``tool`` was approved up front."""
        return self.mode == "all" or (self.mode == "listed" and tool in self.tools)


class UnattendedApprover:
    """The rule when nobody can be asked: deny, telling the user how to allow the tool."""

    async def approve(self, tool: str, arguments: dict[str, Any]) -> bool:
        """Always deny with a hint to rerun with ``--approve``."""
        raise ApprovalDenied(
            f"the call to tool {tool!r} was denied: it needs the user's approval and teamrun "
            f"is not running on a terminal, so nobody could be asked. The user can "
            f"{_rerun_hint(tool)}."
        )


class PolicyApprover:
    """Applies an :class:`ApprovalPolicy`; tools it does not approve go to ``otherwise``."""

    def __init__(self, policy: ApprovalPolicy, *, otherwise: Approver) -> None:
        self.policy = policy
        self.otherwise = otherwise

    async def approve(self, tool: str, arguments: dict[str, Any]) -> bool:
        """Allow approved tools, deny all under ``none``, defer the rest to ``otherwise``."""
        if self.policy.allows(tool):
            return True
        if self.policy.mode == "none":
            raise ApprovalDenied(
                f"the call to tool {tool!r} was denied: the user ran teamrun with "
                f"`--approve none`. The user can {_rerun_hint(tool)}."
            )
        return await self.otherwise.approve(tool, arguments)


class TerminalApprover:
    """Asks on the terminal: the prompt goes to stderr, the y/N answer comes from stdin.

    Concurrent calls wait for each other, so prompts never interleave. Answering
    ``a`` (always) approves that tool for the rest of the run.
    """

    def __init__(self, *, stdin: TextIO | None = None, stderr: TextIO | None = None) -> None:
        self._stdin = stdin
        self._stderr = stderr
        self._lock = asyncio.Lock()
        self._always: set[str] = set()

    async def approve(self, tool: str, arguments: dict[str, Any]) -> bool:
        """Prompt (one at a time) and return the answer; end of input means no."""
        async with self._lock:
            if tool in self._always:
                return True
            answer = await run_in_daemon_thread(lambda: self._ask(tool, arguments), name="teamrun-approval-prompt")
            if answer == "always":
                self._always.add(tool)
        log.info("tool_approval_answered", tool=tool, answer=answer)
        return answer != "no"

    def _ask(self, tool: str, arguments: dict[str, Any]) -> Literal["yes", "no", "always"]:
        """Blocking: write the prompt, read one line."""
        stdin = self._stdin or sys.stdin
        stderr = self._stderr or sys.stderr
        stderr.write(_prompt_text(tool, arguments))
        stderr.flush()
        reply = stdin.readline().strip().lower()
        if reply in ("y", "yes"):
            return "yes"
        if reply in ("a", "always"):
            return "always"
        return "no"


def _prompt_text(tool: str, arguments: dict[str, Any]) -> str:
    """The approval question, showing the tool and its arguments."""
    shown = visible_json(arguments, indent=2)  # a bidi control or a C1 control shown as its escape
    if len(shown) > _PROMPT_ARGUMENT_CHARS:
        shown = shown[:_PROMPT_ARGUMENT_CHARS] + " …"
    indented = "\n".join(f"    {line}" for line in shown.splitlines())
    return inert(
        f"\nteamrun: an agent wants to call tool {tool!r} with arguments:\n{indented}\n"
        f"Allow it? [y]es / [N]o / [a]lways for {tool!r}: "
    )


def _on_terminal() -> bool:
    """Whether a person can be asked: stdin and stderr are both terminals."""
    try:
        return sys.stdin.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed streams
        return False


def choose_approver(policy: ApprovalPolicy | None, *, interactive: bool | None = None) -> Approver:
    """The approver for a run, from ``--approve`` (or ``None``) and whether a terminal is there.

    ``interactive`` defaults to whether stdin and stderr are both terminals.
    """
    if interactive is None:
        interactive = _on_terminal()
    fallback: Approver = TerminalApprover() if interactive else UnattendedApprover()
    if policy is None:
        return fallback
    if not interactive and policy.mode == "listed":
        fallback = _UnlistedApprover(policy)
    return PolicyApprover(policy, otherwise=fallback)


class _UnlistedApprover:
    """Denies a tool that ``--approve`` did not list, when nobody can be asked."""

    def __init__(self, policy: ApprovalPolicy) -> None:
        self.listed = ",".join(sorted(policy.tools))

    async def approve(self, tool: str, arguments: dict[str, Any]) -> bool:
        """Always deny with a hint naming the missing ``--approve`` entry."""
        raise ApprovalDenied(
            f"the call to tool {tool!r} was denied: it needs the user's approval and "
            f"`--approve {self.listed}` does not include it. The user can rerun with "
            f"`--approve {self.listed},{tool}` to allow it."
        )
