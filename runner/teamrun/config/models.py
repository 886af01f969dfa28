"""The team-file language as typed pydantic models.

These models are the single source of truth: ``schemas/team.schema.json`` is
generated from them (``python -m teamrun.config.schema_gen``), and a test fails
when the committed schema drifts. Every field's docstring becomes the
``description`` editors show on hover (attached by :mod:`teamrun.config.schema_gen`,
not at import, which running a team pays for).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from teamrun.config.answer_checks import CHECK_KINDS
from teamrun.config.route_keys import branch_key
from teamrun.defaults import DEFAULT_ENTRY_BYTES, DEFAULT_WORKSPACE_BYTES

__all__ = [
    "AGENT_NAME_PATTERN",
    "CHECK_KINDS",
    "DEFAULT_MAX_ATTEMPTS",
    "Agent",
    "BoardHook",
    "BoardHooks",
    "CacheMode",
    "Check",
    "CompleteHook",
    "Delegation",
    "FallbackModel",
    "FallbackReason",
    "History",
    "Hooks",
    "IterationHook",
    "Judge",
    "Limits",
    "LongTermMemory",
    "McpServer",
    "MemoryEmbedding",
    "MemoryRecall",
    "MemoryRecallMessages",
    "MessageFilter",
    "ModelFields",
    "Person",
    "RateLimit",
    "RemoteAgent",
    "RemoteAuth",
    "StartHook",
    "TeamConfig",
    "ToolDef",
    "Workflow",
    "WorkflowLoop",
    "WorkflowRoute",
    "WorkflowStep",
    "Workspace",
    "WorkspaceEntry",
    "branch_key",
]

AGENT_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,47}$"
"""Agent and tool names become parts of tool-function names, so they stay short and plain."""
IMPORT_PATH_PATTERN = (
    r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
)

Name = Annotated[str, StringConstraints(pattern=AGENT_NAME_PATTERN)]
ImportPath = Annotated[str, StringConstraints(pattern=IMPORT_PATH_PATTERN)]
Template = Annotated[str, StringConstraints(min_length=1)]
Expression = Annotated[str, StringConstraints(min_length=1)]
PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveFloat = Annotated[float, Field(gt=0)]
OnError = Literal["continue", "fail"]


class _Strict(BaseModel):
    # No `use_attribute_docstrings`: pydantic would read each class's source at import, a large part of
    # every command's start-up. The docstrings are needed only for the schema; schema_gen attaches them.
    model_config = ConfigDict(extra="forbid", frozen=True)


DEFAULT_MAX_ATTEMPTS = 3
"""Answers an agent may give under `accept:` when `max_attempts` is not set (the first one included)."""


class Judge(_Strict):
    """An LLM grades the answer against a rubric with a score from 0 to 1."""

    rubric: Annotated[str, StringConstraints(min_length=1)]
    """What a good answer does, in plain words; the judge scores the answer against it."""
    model: Annotated[str, StringConstraints(min_length=1)] | None = None
    """Any LiteLLM model string (or `offline`) for the judge. In `accept:` it defaults to the team's `defaults.model` (else `offline`); eval cases must give it."""
    threshold: Annotated[float, Field(ge=0, le=1)] = 0.7
    """The lowest score that passes."""
    api_base: str | None = None
    """The provider's URL, for self-hosted or OpenAI-compatible servers."""
    api_key_env: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    """The environment variable holding the judge's API key (its name, never the key)."""
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    """Sampling temperature of the judge (provider default when unset)."""


class Check(_Strict):
    """One check of an answer: exactly one of `contains`, `regex`, `json_schema`, `python`, `judge`."""

    name: str | None = None
    """A label for reports and feedback (default: the check written out)."""
    contains: str | None = None
    """The answer must contain this text."""
    ignore_case: bool = False
    """With `contains`: compare without regard to case."""
    regex: Annotated[str, StringConstraints(min_length=1)] | None = None
    """A Python regular expression the answer must match somewhere (`(?i)` for any case)."""
    json_schema: dict[str, Any] | None = None
    """The answer must be JSON valid against this JSON Schema."""
    python: ImportPath | None = None
    """`module:function` called as `function(answer, case)`; returns true/false or `(passed, reason)`. In an eval `case` is the case (`name`, `input`, `vars`); in `accept:` it is `{agent, input, vars, attempt}` (`input`: the agent's task)."""
    judge: Judge | None = None
    """An LLM judge with a rubric and a pass threshold."""


class Limits(_Strict):
    """Hard limits enforced by the executor (not by the prompt). Unset means unlimited."""

    max_steps: PositiveInt | None = None
    """Model calls one agent may make before it must answer."""
    max_tool_calls: NonNegativeInt | None = None
    """Tool calls (not counting delegations) allowed."""
    max_delegations: NonNegativeInt | None = None
    """Delegations to workers allowed."""
    max_handoffs: NonNegativeInt | None = None
    """Transfers of control between agents (handoffs) allowed."""
    max_depth: PositiveInt | None = None
    """Deepest delegation chain allowed; the supervisor is depth 0."""
    max_total_tokens: PositiveInt | None = None
    """Input plus output tokens across every model call."""
    max_input_tokens: PositiveInt | None = None
    """Input (prompt) tokens across every model call."""
    max_output_tokens: PositiveInt | None = None
    """Output (completion) tokens across every model call."""
    max_cost_usd: PositiveFloat | None = None
    """Spend in US dollars, priced with LiteLLM's model price table."""
    timeout_s: PositiveFloat | None = None
    """Wall-clock seconds before the run (or agent) is cancelled."""
    max_tasks: PositiveInt | None = None
    """A peer team: board tasks that may be completed; the run stops there (`budget_exhausted`) if tasks are left."""


FallbackReason = Literal[
    "server_error", "rate_limited", "timeout", "connection", "malformed", "not_found", "context_window"
]
"""Why a model's request may go on to the next one of its `fallbacks` (:data:`teamrun.llm.fallbacks.FALLBACK_REASONS`)."""


class RateLimit(_Strict):
    """How much one model at one endpoint may be sent per minute, by every run of the process together."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    requests_per_minute: PositiveInt | None = None
    """Requests per minute (each retry counts); a run waits for a slot instead of being answered 429."""
    tokens_per_minute: PositiveInt | None = None
    """Tokens (input and output) per minute; a run waits until the last minute's calls leave room."""


CacheMode = Literal["auto", "off"]
"""Prompt caching: `auto` marks the stable prompt prefix for providers that need it; `off` sends no marks."""


class FallbackModel(_Strict):
    """One model of a `fallbacks` list, with its own endpoint, key, retries and parameters."""

    model: str
    """LiteLLM model string, e.g. `openai/gpt-4o-mini`."""
    api_base: str | None = None
    """Base URL of this model's provider (default: the provider's own, or `--api-base`)."""
    api_key_env: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    """Name of the environment variable that holds this model's API key."""
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    """Sampling temperature."""
    max_tokens: PositiveInt | None = None
    """Largest completion one call may produce."""
    request_timeout_s: PositiveFloat | None = None
    """Seconds one request may take before it is retried."""
    num_retries: NonNegativeInt | None = None
    """Retries of this model before the next one is asked (default 3)."""
    stream: bool | None = None
    """Stream the response (default false)."""
    model_params: dict[str, Any] | None = None
    """Extra provider parameters passed through to LiteLLM unchanged."""
    rate_limit: RateLimit | None = None
    """This model's requests and tokens per minute at its endpoint, e.g. `{requests_per_minute: 60}`."""


class ModelFields(_Strict):
    """How an agent's model is called. Any LiteLLM model string works."""

    model: str | None = None
    """LiteLLM model string, e.g. `openai/gpt-4o-mini`, `anthropic/claude-3-5-haiku-latest`, `ollama/llama3.1`, or `offline` for the built-in simulator."""
    api_base: str | None = None
    """Base URL of the provider, e.g. `http://localhost:11434` for Ollama or a vLLM server."""
    api_key_env: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    """Name of the environment variable that holds the API key (the key itself never goes in the file)."""
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    """Sampling temperature."""
    max_tokens: PositiveInt | None = None
    """Largest completion one model call may produce."""
    request_timeout_s: PositiveFloat | None = None
    """Seconds one model request may take before it is retried."""
    num_retries: NonNegativeInt | None = None
    """Retries on rate limits (429), server errors (5xx) and timeouts, with backoff (default 3)."""
    stream: bool | None = None
    """Stream the model's response (default false)."""
    model_params: dict[str, Any] | None = None
    """Extra provider parameters passed through to LiteLLM unchanged (e.g. `top_p`, `seed`)."""
    fallbacks: list[FallbackModel] | None = None
    """Models asked in order, with the same request, when the one before failed for a reason in `fallback_on` (after its own retries), e.g. `[{model: openai/gpt-4o-mini, api_key_env: OPENAI_API_KEY}]`. Each entry's unset fields are teamrun's defaults, not this model's (its `api_base` is the provider's own, or `--api-base`). A model that keeps failing is skipped for a cool-down (a circuit breaker shared by every run of the process). An agent's list replaces the one in `defaults`; an agent's `[]` turns it off."""
    fallback_on: Annotated[list[FallbackReason], Field(min_length=1)] | None = None
    """The failures that pass a request on to the next model of `fallbacks` (default: all of them): `server_error` (5xx), `rate_limited` (429 past the retries), `timeout`, `connection`, `malformed`, `not_found` (the model is not there), `context_window` (the conversation does not fit)."""
    cache: CacheMode | None = None
    """Prompt caching (default `auto`): the stable prefix (instructions, tool schemas, the earlier turns) is marked with cache breakpoints for providers that need them (Anthropic, Bedrock); cached input tokens are charged at their price. `off`: no breakpoints."""
    rate_limit: RateLimit | None = None
    """Requests and tokens per minute of this model at its endpoint, shared by every run of the process, e.g. `{requests_per_minute: 60, tokens_per_minute: 100000}`: runs wait for a slot; a 429's `Retry-After` holds every run using it."""


class MessageFilter(_Strict):
    """What a worker sees of its parent's conversation. Without a filter it sees none of it."""

    last: PositiveInt | None = None
    """Keep only the last N messages."""
    drop_matching: list[str] | None = None
    """Drop messages whose text matches any of these regular expressions (Python syntax)."""
    exclude_roles: list[Literal["system", "user", "assistant", "tool"]] | None = None
    """Drop messages with these roles."""
    max_tokens: PositiveInt | None = None
    """Keep the newest messages that fit in about this many tokens."""
    python: ImportPath | None = None
    """A Python filter `module:function(messages) -> messages`, applied after the rules above."""
    on_error: OnError = "continue"
    """When the Python filter fails: `continue` with the unfiltered-by-python messages, or `fail` the delegation."""


class StartHook(_Strict):
    """Runs before a delegation starts. Actions apply when `when` is true (or absent)."""

    when: Expression | None = None
    """Jinja expression over `agent`, `prompt`, `iteration`, `depth`, `vars`, e.g. `agent == 'researcher'`."""
    call: ImportPath | None = None
    """Python hook `module:function(ctx)`, sync or async."""
    reject: Template | None = None
    """Refuse the delegation; this text (a Jinja template) is what the supervisor model sees."""
    prompt: Template | None = None
    """Replace the task sent to the worker (a Jinja template; `prompt` holds the original)."""
    append_prompt: Template | None = None
    """Append this text (a Jinja template) to the task."""
    max_steps: PositiveInt | None = None
    """Cap the worker's model calls for this delegation."""
    context: dict[str, Any] | None = None
    """Values passed to the worker's templates as `context`."""


class CompleteHook(_Strict):
    """Runs after a delegation finishes. Actions apply when `when` is true (or absent)."""

    when: Expression | None = None
    """Jinja expression over `agent`, `status` (`ok`, `error`, `budget_exhausted`, `timeout`...), `success`, `error`, `result`, `usage`, `finish_reason`, `tool_results`, `task_id`, `prompt`, `iteration`, `depth`, `vars`."""
    call: ImportPath | None = None
    """Python hook `module:function(ctx)`, sync or async."""
    result_text: Template | None = None
    """Replace the result text the supervisor model sees (a Jinja template)."""
    feedback: Template | None = None
    """Add this note (a Jinja template) to the supervisor's next turn."""
    bail: bool | None = None
    """Stop the supervisor and return this result as the run's answer."""


class IterationHook(_Strict):
    """Runs after each step of the delegating agent."""

    when: Expression | None = None
    """Jinja expression over `agent`, `iteration`, `depth`, `vars`, `text` (the agent's latest reply text), e.g. `iteration >= 6`."""
    call: ImportPath | None = None
    """Python hook `module:function(ctx)`, sync or async."""
    feedback: Template | None = None
    """Add this note (a Jinja template) to the agent's next turn."""
    stop: bool | None = None
    """Stop the agent; it gets one last turn to answer with what it has."""


HOOK_MODELS: dict[str, type[StartHook | CompleteHook | IterationHook]] = {
    "on_start": StartHook,
    "on_complete": CompleteHook,
    "on_iteration": IterationHook,
}
"""Each hook point's model: the one source of what its hooks can do."""


def hook_actions(point: str) -> tuple[str, ...]:
    """What a hook at ``point`` can do: its model's fields but ``when``, ``call`` last."""
    fields = [name for name in HOOK_MODELS[point].model_fields if name not in ("when", "call")]
    return (*fields, "call")


def hook_templates(point: str) -> tuple[str, ...]:
    """The actions of a hook at ``point`` whose text is a template (its text fields but ``when``/``call``)."""
    return tuple(
        name
        for name, info in HOOK_MODELS[point].model_fields.items()
        if name not in ("when", "call") and Template in get_args(info.annotation)
    )


class Hooks(_Strict):
    """Declarative hooks that steer delegation."""

    on_start: list[StartHook] | None = None
    """Before each delegation."""
    on_complete: list[CompleteHook] | None = None
    """After each delegation."""
    on_iteration: list[IterationHook] | None = None
    """After each step of the delegating agent."""
    on_error: OnError = "continue"
    """A hook that raises: `continue` records and ignores it; `fail` fails the delegation."""


class Delegation(_Strict):
    """How an agent hands sub-tasks to the agents in its `delegates_to`."""

    tool: Literal["per_agent", "delegate_task"] = "per_agent"
    """`per_agent`: one tool `ask_<agent>` per worker; `delegate_task`: one tool with an `agents` enum."""
    parallel: bool = True
    """Run independent delegations concurrently."""
    max_concurrency: PositiveInt = 4
    """Most delegations running at once."""
    output_mode: Literal["last_message", "full_history"] = "last_message"
    """What comes back: the worker's final message, or its whole conversation."""
    result_references: bool = False
    """Give each result an id (`researcher-1`) that later delegations can pass on with `context_from_refs`."""
    message_filter: MessageFilter | None = None
    """Share the (filtered) parent conversation with workers. Without it workers see only their task."""
    hooks: Hooks | None = None
    """Hooks run around each delegation."""
    prompt: Template | None = None
    """Jinja template that replaces the built-in text telling this agent about its workers (`workers`, `tool` available)."""
    append_guidelines: Template | None = None
    """Jinja template added after the generated text about the workers (which it keeps, unlike `prompt`)."""
    max_follow_ups: NonNegativeInt = 2
    """Follow-ups (`follow_up_of`) allowed per task after its first attempt; one more is refused."""
    background: bool | list[Name] = False
    """Delegate in the background: `true` for every worker, or a list of workers. Their delegation tool then returns a handle at once, and this agent gets `wait_for`, `check_tasks` and `cancel_task`."""
    background_timeout_s: PositiveFloat = 300
    """Seconds a background delegation may run before it is stopped and reported as a timeout."""


REMOTE_URL_PATTERN = (
    r"^[Hh][Tt][Tt][Pp][Ss]?://[^\s/?#@\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]+"
    r"([/?#][^\s\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]*)?$"
)
"""An ``a2a.url``: http(s) (any case), a host, no credentials (``user:pass@``), no control or bidi characters."""


class RemoteAuth(_Strict):
    """How teamrun authenticates to a remote A2A agent; the credential comes from the environment, never the file."""

    bearer_env: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
    """Name of the environment variable holding a bearer token, sent as `Authorization: Bearer <token>` on every request (the card's too). The token is masked (`***`) in traces, run records and logs."""


class RemoteAgent(_Strict):
    """A remote agent spoken to over A2A (protocol v1.0, JSON-RPC binding): delegated to like any worker."""

    url: Annotated[str, StringConstraints(pattern=REMOTE_URL_PATTERN)]
    """The agent's base URL (its card is read from `<url>/.well-known/agent-card.json`) or the full URL of its card (ending in `.json`), e.g. `${TEAMRUN_A2A_URL:-http://127.0.0.1:9999}`."""
    auth: RemoteAuth | None = None
    """How to authenticate, e.g. `{bearer_env: RESEARCH_AGENT_TOKEN}` (default: no credentials)."""
    timeout_s: PositiveFloat | None = None
    """Seconds one HTTP request to the agent may take (card, send, a gap between streamed updates, cancel), default 60. The whole delegation is bounded by the agent's `budget.timeout_s`."""
    stream: bool = True
    """Use streaming (`SendStreamingMessage`) when the card says the agent supports it, so its progress shows live; `false` always uses `SendMessage`."""


class Agent(ModelFields):
    """One agent: a model, instructions, tools, and who it may delegate to."""

    description: str | None = None
    """What this agent is for, and when not to use it. Workers' descriptions become their delegation tool's description."""
    instructions: Template | None = None
    """The system prompt, a sandboxed Jinja template (`vars`, `today`, `agent`, `context` available)."""
    delegates_to: list[Name] | None = None
    """Agents this agent may delegate sub-tasks to."""
    handoffs: list[Name] | None = None
    """Agents this agent may hand the whole conversation to (`transfer_to_<name>`)."""
    tools: list[Name] | None = None
    """Tools (from the top-level `tools`) this agent may call."""
    budget: Limits | None = None
    """Limits for this agent alone, on top of the run's `limits`."""
    delegation: Delegation | None = None
    """How this agent delegates."""
    output_schema: dict[str, Any] | None = None
    """JSON Schema the agent's final answer must satisfy; invalid answers get bounded repair turns."""
    max_repair_turns: NonNegativeInt | None = None
    """Repair turns allowed when the answer fails `output_schema` (default 2)."""
    on_error: Literal["continue", "fail_run"] = "continue"
    """When this agent fails as a worker (an error or a crash, not a budget): `continue` gives the delegating agent an error result; `fail_run` fails the whole run."""
    memory: Literal["fresh", "thread"] = "fresh"
    """A worker's memory in a thread: `fresh` starts every delegation anew; `thread` also shows it its own earlier tasks and answers in the same thread (never the supervisor's conversation)."""
    accept: list[Check] | None = None
    """Acceptance checks of this agent's answer (same kinds as `teamrun eval`). A failed check goes back to the agent as feedback and it answers again, up to `max_attempts`; an answer that never passes is still delivered, with a warning."""
    max_attempts: PositiveInt | None = None
    """Answers this agent may give under `accept:`, the first included (default 3). Every attempt spends from the budgets."""
    answer_to: Name | None = None
    """As a worker, write the answer to this workspace entry by declaration, with no tool call (as a workflow step's `write:` does: the entry's merge rule, schema and caps apply, its `write:` list does not; the answer is parsed when the agent has an `output_schema`; `append` adds it as one item, or a list answer's items). Whoever delegated is told where the answer went instead of being given it, e.g. `answer_to: findings`."""
    a2a: RemoteAgent | None = None
    """A remote agent spoken to over A2A instead of a model loop here, e.g. `{url: "http://127.0.0.1:9999", auth: {bearer_env: AGENT_TOKEN}}`. It is delegated to like any worker (budgets, hooks, journal, events, cancel); it has no `model`, `tools`, `delegates_to` or `instructions` of its own."""


class History(_Strict):
    """How much of a thread's earlier turns each new turn sees, so a long thread never overflows the model's window."""

    max_turns: PositiveInt | None = None
    """Keep only the last N turns (a user message and its answer) of the thread."""
    max_tokens: PositiveInt | None = None
    """Keep only the newest turns that fit in this many tokens (estimated as characters / 4). Default 20000 when neither limit is set."""
    summarize: bool = False
    """Summarise the turns the limits leave out (one model call with the answering agent's model, when more turns drop out) instead of dropping them; the summary is kept with the thread."""


McpToolName = Annotated[str, StringConstraints(min_length=1, max_length=128)]
"""A tool name as an MCP server spells it (e.g. `git_status`, `get-sum`)."""


class McpServer(_Strict):
    """An MCP server whose tools agents can call: a program over stdio, or a streamable HTTP endpoint."""

    command: Annotated[list[str], Field(min_length=1)] | None = None
    """Start the server as this program (argv list, never a shell) and talk to it over stdin/stdout."""
    env: dict[Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], str] | None = None
    """Environment variables for a stdio server, on top of a minimal inherited set (`PATH`, `HOME`, ...). Values are treated as secrets."""
    cwd: str | None = None
    """Working directory of a stdio server, relative to the team file's folder (default: teamrun's working directory)."""
    url: Annotated[str, StringConstraints(pattern=r"^https?://")] | None = None
    """Connect to a streamable HTTP server at this URL (e.g. `http://127.0.0.1:3001/mcp`)."""
    headers: dict[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")], str] | None = None
    """HTTP headers sent to a `url` server, e.g. `{Authorization: "Bearer ${API_TOKEN}"}`. Values are treated as secrets."""


class Person(_Strict):
    """A person the agent may ask, mid-run: the tool's one parameter is the `question` the model writes."""

    choices: Annotated[list[Annotated[str, StringConstraints(min_length=1)]], Field(min_length=1)] | None = None
    """The answers the person picks from, e.g. `[eu-west-1, us-east-1]`; any other answer is refused."""
    answer_schema: dict[str, Any] | None = None
    """JSON Schema the answer must satisfy, e.g. `{type: integer, minimum: 1}`; the answer is read as JSON (plain text is a string). The model sees the answer as JSON."""
    secret: bool = False
    """The answer is a secret: masked (`***`) in events, traces, logs and `teamrun runs`; the model still sees it."""
    max_wait_s: PositiveFloat | None = None
    """Seconds the question may wait for its answer (default: no limit), counted from when it was first asked, across suspensions. Past it the question expires (recorded as `expired`) and the model is told nobody answered."""


class ToolDef(_Strict):
    """A tool agents can call: a Python function, a command (argv, never a shell), or the tools of an MCP server."""

    description: str | None = None
    """What the tool does, shown to the model. Python tools default to the function's docstring."""
    python: ImportPath | None = None
    """Python function `module:function`; parameters come from its type hints."""
    command: Annotated[list[Template], Field(min_length=1)] | None = None
    """Command as an argv list; each item is a Jinja template over the parameters. Never run through a shell."""
    mcp: McpServer | None = None
    """An MCP server: its tools become functions agents can call (started on first use, stopped when the run ends)."""
    person: Person | None = None
    """A person to ask: the agent calls this tool with a question and gets the person's answer. On a terminal the question is asked there; a detached run (`--detach`, or no terminal) suspends until `teamrun answer RUN ITEM VALUE`. Use `{}` for a free-text answer."""
    parameters: dict[Name, dict[str, Any]] | None = None
    """Parameters as JSON Schema fragments, e.g. `{pattern: {type: string}}`. One with a `default` is optional."""
    cwd: str | None = None
    """Working directory for a command tool."""
    ok_exit_codes: Annotated[list[Annotated[int, Field(ge=0, le=255)]], Field(min_length=1)] | None = None
    """Command tools: the exit codes that mean success (default `[0]`), e.g. `[0, 1]` for `grep`, which exits 1 when no line matched. With such a code the output is the result, as with 0 (an empty one reads `(no output; exit code 1)`); any other code is an error with the code and stderr."""
    timeout_s: PositiveFloat | None = None
    """Seconds a call may take before it is stopped (default 60)."""
    max_output_chars: PositiveInt | None = None
    """Output longer than this is truncated with a marker (default 20000)."""
    require_approval: bool | list[McpToolName] | None = None
    """Ask before each call (a TTY prompt, or `--approve` in scripts and CI). For an MCP server: `true` for all its tools, or a list of its tool names."""
    allow: list[McpToolName] | None = None
    """MCP only: offer just these tools of the server (names as the server spells them). Default: all of them."""
    deny: list[McpToolName] | None = None
    """MCP only: never offer these tools of the server."""
    prefix: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{0,32}$")] | None = None
    """MCP only: put before each server tool's name to make the function name the model sees (default `<entry>_`; `""` for none). A name that already starts with it is kept as it is."""
    fixed_arguments: dict[Annotated[str, StringConstraints(pattern=r"^[^\s]{1,128}$")], Any] | None = None
    """MCP only: arguments sent with every call of the server's tools that take them, hidden from the model (e.g. `{repo_path: .}`)."""
    idempotent: bool | None = None
    """Whether running the tool twice with the same arguments is harmless. `teamrun resume` does not run a call again that was interrupted while it ran unless the tool is idempotent or you confirm (`--yes`). Default: `true` for python tools, `false` for command tools; an MCP tool is when its server marks it read-only or idempotent."""


STEP_KINDS = ("agent", "team", "map", "route", "loop")
"""What a workflow step does; a step has `agent` or `team` (with `map` or `route` on top), or `loop`."""


class WorkflowRoute(_Strict):
    """Pick the next steps from a field of this step's structured output (its agent needs an `output_schema`)."""

    on: Name
    """The field of the step's output whose value names the branch, e.g. `category`."""
    branches: Annotated[
        dict[Annotated[str, StringConstraints(pattern=r"^[^\n]{1,128}$")], list[WorkflowStep]], Field(min_length=1)
    ]
    """Steps to run for each value of the field, e.g. `{billing: [...], bug: [...]}`."""
    default: list[WorkflowStep]
    """Steps to run when the value names no branch (`[]` to do nothing)."""

    def branch_for(self, output: Any) -> str:
        """The branch a step's structured output picks: the one its field `on` names, else `default`."""
        if not isinstance(output, dict) or self.on not in output:
            return "default"
        key = branch_key(output[self.on])
        return key if key in self.branches else "default"


class WorkflowLoop(_Strict):
    """Repeat steps until the last one's output passes the checks, or `max_iterations` is reached."""

    steps: Annotated[list[WorkflowStep], Field(min_length=1)]
    """The body, run in order on each iteration; it reads `iteration` (from 1) and `feedback` (the failed check, `""` at first)."""
    until: Annotated[list[Check], Field(min_length=1)]
    """Checks of the body's last output (the `accept:` kinds: contains, regex, json_schema, python, judge); the loop ends when all pass."""
    max_iterations: PositiveInt
    """Iterations at most; the last output is kept even when it never passed (with a warning)."""


class WorkflowStep(_Strict):
    """One step: run `agent` (or the supervisor team `team`), once, once per item (`map`), then a branch (`route`); or repeat steps (`loop`)."""

    model_config = ConfigDict(  # exactly one of them (the semantic checks say which is missing or extra)
        json_schema_extra={"oneOf": [{"required": ["agent"]}, {"required": ["team"]}, {"required": ["loop"]}]}
    )

    id: Name | None = None
    """The step's name for later steps (`{{ steps.<id>.output }}`); default: its agent's or team's name."""
    agent: Name | None = None
    """The agent this step runs (any agent of the file, with its model, tools, budget, `output_schema`, `accept:`)."""
    team: Name | None = None
    """A supervisor agent run with its workers as one step (the model orchestrates this part)."""
    input: Template | None = None
    """The task, a sandboxed Jinja template over `input`, `vars`, `today`, `workspace` (entries' values as the step starts: `workspace.<entry>`) and `steps` (earlier steps: `steps.<id>.output`, a structured output's fields `steps.<id>.output.<field>`; `steps.<id>.text`). Default: the previous step's output (the run's input for the first step); in a map `{{ item }}`."""
    map: Expression | None = None
    """Run the step once per item of a list an earlier step gave, an expression such as `steps.plan.output.topics` (an array field of its agent's `output_schema`) or `steps.research.output` (a map step's outputs); its `input` reads `item` and `index`. Items run concurrently; results keep the list's order."""
    max_concurrency: PositiveInt | None = None
    """With `map`: items running at once (default: the workflow's `max_concurrency`)."""
    route: WorkflowRoute | None = None
    """After this step, run the branch its structured output names."""
    loop: WorkflowLoop | None = None
    """Repeat steps until a check passes or `max_iterations`."""
    write: Name | None = None
    """A `workspace:` entry the step's output is written to when the step ends, with the entry's merge rule and schema, by the workflow itself (writer `workflow`), e.g. `findings`. A map writes its items' outputs as a list (`append`: each item); a refused write fails the step."""

    @model_validator(mode="after")
    def _one_kind(self) -> WorkflowStep:
        runs = [k for k in ("agent", "team") if getattr(self, k) is not None]
        if self.loop is not None:
            if runs or self.map is not None or self.route is not None or self.input is not None:
                raise ValueError("a loop step has only `loop` (and `id`): put the agents in `loop.steps`")
        elif len(runs) != 1:
            raise ValueError("a step needs exactly one of `agent`, `team` or `loop`")
        if self.map is not None and self.route is not None:
            raise ValueError("a step cannot both `map` and `route`")
        if self.max_concurrency is not None and self.map is None:
            raise ValueError("`max_concurrency` applies to a `map` step only")
        return self

    @property
    def runs(self) -> str | None:
        """The agent this step runs (`agent` or `team`), ``None`` for a loop."""
        return self.agent or self.team

    @property
    def name(self) -> str:
        """The step's id: its own, else its agent's or team's name, else `loop`."""
        return self.id or self.runs or "loop"


class Workflow(_Strict):
    """The fixed steps of a run, in order: each runs an agent like a delegation does (budgets, hooks, journal, events)."""

    steps: Annotated[list[WorkflowStep], Field(min_length=1)]
    """The steps, run one after the other (a chain)."""
    output: Template | None = None
    """The run's answer, a template over `input`, `vars` and `steps`. Default: the last step's output, verbatim."""
    max_concurrency: PositiveInt = 4
    """Items of a `map` step running at once, unless the step sets its own."""
    hooks: Hooks | None = None
    """Delegation hooks run around each step (`on_start`, `on_complete`)."""


WorkflowRoute.model_rebuild()
WorkflowLoop.model_rebuild()


MergeRule = Literal["replace", "append", "merge", "max", "min", "sum"]
"""How a write combines with an entry's value (see :class:`WorkspaceEntry`)."""


class BoardHook(_Strict):
    """A rule on a board operation: refuse it when `when` is true (or always, without `when`)."""

    when: Expression | None = None
    """Jinja expression over `agent` (who asks), `task` (`id`, `payload`, `status`, `claims`, `posted_by`...), `result` (`on_complete`), `board`, `vars`, e.g. `task.claims > 1 and agent == 'junior'`."""
    reject: Template
    """Refuse the operation with this text (a Jinja template over the same names): the model reads it (reason `hook`). A claim skips to the next task this hook allows."""


class BoardHooks(_Strict):
    """Rules a board applies before a claim or a completion."""

    on_claim: list[BoardHook] | None = None
    """Before a task is given to a claimant: a refused task is skipped for the next one."""
    on_complete: list[BoardHook] | None = None
    """Before a task is completed: a refused completion leaves the claimant holding the task."""


class WorkspaceEntry(_Strict):
    """One named value of the workspace: its schema, how writes combine, and who may read and write it."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    description: str | None = None
    """What the entry holds, for the agents (shown in the workspace tools' descriptions)."""
    value_schema: dict[str, Any] = Field(default_factory=dict, alias="schema")
    """A JSON Schema every value of the entry must satisfy, e.g. `{type: array, items: {type: string}}`. A write whose result does not is refused, saying why."""
    merge: MergeRule = "replace"
    """How a write combines with the value: `replace` (the write names the version it read; a stale write is refused with the current value), `append` (lists: the written items are added, nothing lost), `merge` (objects, key by key; a key someone else wrote since the version read is a conflict), `max`, `min`, `sum` (numbers)."""
    initial: Any = None
    """The value before any write. Default: `[]` for `append`, `{}` for `merge`, `0` for `sum`, else null (no value yet)."""
    read: list[Name] | None = None
    """The agents that may read it. Default: every agent. Its writers may always read it."""
    write: list[Name] | None = None
    """The agents that may write it. Default: nobody."""
    max_bytes: PositiveInt = DEFAULT_ENTRY_BYTES
    """The largest the value may grow (as compact JSON); a write past it is refused."""
    kind: Literal["value", "board"] = "value"
    """`value`: one value written by its merge rule; `board`: a list of tasks the agents post, claim (a lease), complete or release through the board tools. On a board, `schema` is each task's `payload`, `initial` a list of payloads posted when the run starts, `write` who uses the board tools (default: the team's peers)."""
    lease_s: PositiveFloat = 300.0
    """A board: seconds a claim holds a task; an expired lease returns the task to the board for another claimant."""
    max_claims: PositiveInt = 3
    """A board: claims a task may have; a task released or expired that many times is set `failed` and offered no more."""
    hooks: BoardHooks | None = None
    """A board: rules checked before each claim and each completion (`on_claim`, `on_complete`)."""


class Workspace(_Strict):
    """State the agents share: named entries, each versioned, written through tools by the agents allowed to."""

    entries: Annotated[dict[Name, WorkspaceEntry], Field(min_length=1)]
    """The entries, by name."""
    max_bytes: PositiveInt = DEFAULT_WORKSPACE_BYTES
    """The largest all entries may grow together (as compact JSON); a write past it is refused."""
    persist: Literal["run", "thread", "resource"] = "run"
    """How long the entries live: `run` (each run starts from the initial values), `thread` (a turn of a thread, `--thread ID` or `teamrun chat`, starts from the workspace its previous turn ended with) or `resource` (working memory: a run given a resource, `--resource ID`, starts from the entries the resource's last finished run kept, in any thread)."""


class MemoryEmbedding(_Strict):
    """The embedding model of long-term memory: what turns facts and queries into vectors."""

    model: Annotated[str, StringConstraints(min_length=1)] = "offline"
    """`offline` (a deterministic local embedding: no network, no key) or any LiteLLM embedding model, e.g. `openai/text-embedding-3-small`. Keep one per store: memories embedded by another model cannot be compared."""
    api_base: str | None = None
    """The embedding endpoint (default: the run's `--api-base` / `$TEAMRUN_API_BASE` for a model that is not `offline`, else the provider's own), as for an agent."""
    api_key_env: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    """The environment variable holding the endpoint's key, e.g. `OPENAI_API_KEY` (default: the provider's usual variable)."""
    dimensions: Annotated[int, Field(ge=1, le=8192)] | None = None
    """The vectors' size, 1 to 8192, for a model that can shorten them (default: the model's own)."""
    request_timeout_s: PositiveFloat | None = None
    """Seconds one embedding request may take before it is retried (default 60); the error names the endpoint."""
    num_retries: NonNegativeInt | None = None
    """Retries of a failed or timed-out embedding request (default 2)."""


class MemoryRecallMessages(_Strict):
    """How one agent recalls the messages of the resource's other threads before each of its turns (the facts' rules)."""

    top_k: Annotated[int, Field(ge=1, le=50)] = 3
    """The most messages put in the prompt."""
    max_tokens: Annotated[int, Field(ge=16, le=20000)] = 500
    """The most tokens (about 4 characters each) the recalled messages may take; a message too long for the room left is left out."""
    min_score: Annotated[float, Field(ge=0, le=1)] = 0.2
    """The lowest score (0 to 1, vector and keyword similarity together) a message needs to be recalled."""


class MemoryRecall(_Strict):
    """How one agent recalls before each of its turns: the resource's memories closest to its task."""

    top_k: Annotated[int, Field(ge=1, le=50)] = 5
    """The most memories put in the prompt."""
    max_tokens: Annotated[int, Field(ge=16, le=20000)] = 500
    """The most tokens (about 4 characters each) the recalled facts may take; the lowest-scored are left out."""
    min_score: Annotated[float, Field(ge=0, le=1)] = 0.2
    """The lowest score (0 to 1, vector and keyword similarity together) a memory needs to be recalled."""
    messages: MemoryRecallMessages | None = None
    """Also recall the messages of the resource's other threads closest to the agent's task, e.g. `messages: {top_k: 3}` (`messages: {}` takes the defaults): the user's messages and the answers of earlier conversations, quoted with their thread and role after the facts. Each thread turn of a run with a resource is indexed as it ends (an embedding of its message and of its answer); the current thread's own messages are never quoted (its history has them)."""


class LongTermMemory(_Strict):
    """Long-term memory: facts about a resource (a user, an organisation; `--resource ID`) kept across threads."""

    embedding: MemoryEmbedding = MemoryEmbedding()
    """The embedding model (default: `offline`)."""
    recall: dict[Name, MemoryRecall | None] | None = None
    """The agents that recall before each turn, with their settings, e.g. `{support: {top_k: 5}}` (`support: {}` takes the defaults). The facts come in a marked block of quoted data after the agent's instructions."""
    search: list[Name] | None = None
    """The agents offered the `memory_search(query)` tool."""
    save: list[Name] | None = None
    """The agents offered the `memory_save(fact)` tool."""
    mode: Literal["hybrid", "vector", "keyword"] = "hybrid"
    """How memories are scored: vector and keyword similarity together (`hybrid`), or one alone."""
    ttl_s: PositiveFloat | None = None
    """Seconds a saved memory lives (default: until forgotten, `teamrun memory forget --resource ID`)."""
    max_fact_chars: Annotated[int, Field(ge=16, le=100000)] = 2000
    """The longest fact a memory may hold; a longer one is refused to the agent that saves it."""
    max_memories_per_resource: PositiveInt = 10000
    """The most memories one resource may keep; a save past it is refused."""


EXTENSION_KEY_PATTERN = r"^x-"
"""Top-level keys starting with ``x-`` are the user's own (e.g. a block of YAML anchors); teamrun ignores them."""


class TeamConfig(_Strict):
    """A team of LLM agents: one supervisor delegating to workers."""

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [{"required": ["supervisor"]}, {"required": ["workflow"]}, {"required": ["peers"]}],
            "patternProperties": {
                EXTENSION_KEY_PATTERN: {
                    "description": "Your own data, ignored by teamrun: e.g. `x-defaults: &defaults {...}` "
                    "to hold YAML anchors that agents merge with `<<: *defaults`."
                }
            },
        }
    )

    @model_validator(mode="before")
    @classmethod
    def _drop_extension_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith("x-"))}
        return data

    version: Literal[1]
    """Team-file format version. Always 1."""
    name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
    """Short name of the team, e.g. `product-research`."""
    description: str | None = None
    """What the team does."""
    supervisor: Name | None = None
    """The entry agent: it receives the user's input and delegates. Required unless the file has a `workflow`."""
    defaults: ModelFields | None = None
    """Model settings every agent inherits unless it sets its own."""
    limits: Limits | None = None
    """Limits for the whole run, enforced by the executor."""
    vars: dict[Name, str | int | float | bool] | None = None
    """Template variables (`{{ vars.x }}`); `--var x=...` overrides them."""
    agents: Annotated[dict[Name, Agent], Field(min_length=1)]
    """The agents, by name."""
    tools: dict[Name, ToolDef] | None = None
    """Tools agents can use, by name."""
    history: History | None = None
    """In a thread (`--thread`, `teamrun chat`): how many earlier turns the agents see."""
    accept: list[Check] | None = None
    """Acceptance checks of the run's final answer (after the answering agent's own `accept:`). A failed check goes back to that agent as feedback, up to `max_attempts`; an answer that never passes is still delivered, with a warning."""
    max_attempts: PositiveInt | None = None
    """Final answers the run may give under the top-level `accept:`, the first included (default 3)."""
    workflow: Workflow | None = None
    """Fixed steps run in order (chain, map, route, loop), instead of a supervisor deciding; a `team` step holds a supervisor with its workers."""
    peers: Annotated[list[Name], Field(min_length=1)] | None = None
    """Agents that work around the workspace's board instead of a supervisor: each claims a task, works, posts follow-ups and completes it, until the board is empty. Needs a `kind: board` entry and `limits.max_tasks`."""
    workspace: Workspace | None = None
    """Shared state: named entries the agents read and write through tools (schema, merge rule, permissions)."""
    memory: LongTermMemory | None = None
    """Long-term memory across threads, per resource (`--resource ID`): which agents recall before each turn, which may search and save, the embedding model, time to live and caps. A run without a resource has none."""

    @model_validator(mode="after")
    def _entry(self) -> TeamConfig:
        if self.supervisor is None and self.workflow is None and self.peers is None:
            raise ValueError("a team needs a `supervisor`, a `workflow` or `peers`")
        return self
