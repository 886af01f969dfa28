"""System prompts: the agent's own instructions plus what it needs to know about its workers."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from teamrun.config import templates
from teamrun.config.models import Agent
from teamrun.engine.delegation.tools import WorkerInfo
from teamrun.errors import UserError

DEFAULT_WORKERS_PROMPT = """\
## Your workers
You can hand sub-tasks to these workers. Each starts with an empty context: \
put everything it needs into the task. Only its final answer comes back to you.
{% for w in workers %}
- {{ w.name }}{% if tool == 'per_agent' %} (tool `{{ w.tool }}`){% endif %}: {{ w.description }}
{%- endfor %}
{% if tool == 'delegate_task' %}
Delegate with the `delegate_task` tool, naming one or more of these agents.
{%- endif %}
{% if parallel %}Independent sub-tasks delegated in the same turn run in parallel.{% else %}\
Delegations run one at a time.{% endif %}
When the answers you have are enough, reply with the final answer yourself.
"""


def _render(source: str, context: Mapping[str, Any], where: str) -> str:
    try:
        return templates.render(source, context)
    except Exception as exc:  # undefined variable, sandbox violation, ...
        missing = re.search(r"has no attribute '([A-Za-z_][A-Za-z0-9_]*)'", str(exc))
        hint = ""
        if missing and "vars." + missing.group(1) in source:
            name = missing.group(1)
            hint = f"; define it under `vars:` in the team file or pass `--var {name}=...`"
        raise UserError(f"cannot render {where}: {exc}{hint}") from None


def system_prompt(
    name: str,
    agent: Agent,
    *,
    workers: list[WorkerInfo],
    template_context: Mapping[str, Any],
) -> str:
    """The agent's instructions followed, for a delegating agent, by the workers section."""
    parts: list[str] = []
    if agent.instructions:
        parts.append(_render(agent.instructions, template_context, f"agents.{name}.instructions").strip())
    else:
        parts.append(f"You are {name}. {agent.description or ''}".strip())
    if workers:
        delegation = agent.delegation
        tool = delegation.tool if delegation else "per_agent"
        parallel = delegation.parallel if delegation else True
        source = delegation.prompt if delegation and delegation.prompt else DEFAULT_WORKERS_PROMPT
        context = {**template_context, "workers": workers, "tool": tool, "parallel": parallel}
        parts.append(_render(source, context, f"agents.{name}.delegation.prompt").strip())
        if delegation and delegation.append_guidelines:
            parts.append(
                _render(delegation.append_guidelines, context, f"agents.{name}.delegation.append_guidelines").strip()
            )
    return "\n\n".join(p for p in parts if p)
