"""Semantic checks of a model's fallback list (``fallbacks``, ``fallback_on``): what the schema cannot say.

An agent's list is its model (its own or ``defaults.model``, at its endpoint) followed by its ``fallbacks`` (its
own, else ``defaults.fallbacks``). The list is checked where it is written:

- a model and endpoint named twice in one list (the agent's own model included) would be asked twice for the
  same failure — a loop, not a fallback (``offline`` is one model whatever its ``api_base``: it ignores it);
- a model string whose provider prefix (``openai/`` in ``openai/gpt-4o``) LiteLLM does not know fails only when
  called, after the models before it; it is said now (a name without ``/`` is left to LiteLLM to place);
- an empty list falls back to nothing — except an agent's ``fallbacks: []`` under a ``defaults.fallbacks``, which
  turns that list off for the agent;
- ``fallback_on`` where no list applies does nothing (a warning; ``defaults.fallback_on`` applies to an agent's
  own list).

Whether each entry's ``api_key_env`` is set is ``validate --import-check``'s, from the CLI
(``teamrun.cli.validate_cmd``): the config layer reads no key variable.

The config layer imports no LiteLLM: :data:`LITELLM_PROVIDERS` is its provider list, kept in step with the
installed LiteLLM by a test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from teamrun.config.checks.raw import mapping, sequence
from teamrun.config.diagnostics import Diagnostic, JsonPath, did_you_mean, dotted

if TYPE_CHECKING:
    from teamrun.config.checks.context import CheckContext

__all__ = ["LITELLM_PROVIDERS", "fallback_checks"]

LITELLM_PROVIDERS = frozenset(
    {
        "a2a",
        "a2a_agent",
        "abliteration",
        "ai21",
        "ai21_chat",
        "aiand",
        "aiml",
        "aiohttp_openai",
        "amazon_nova",
        "anthropic",
        "anthropic_text",
        "apertis",
        "assemblyai",
        "auto_router",
        "aws_polly",
        "aws_textract",
        "azure",
        "azure_ai",
        "azure_speech",
        "azure_text",
        "baseten",
        "bedrock",
        "bedrock_mantle",
        "bespoke",
        "bigmodel",
        "black_forest_labs",
        "bytez",
        "cerebras",
        "charity_engine",
        "chatgpt",
        "chutes",
        "clarifai",
        "clf_ai_gateway",
        "cloudflare",
        "codestral",
        "cognition",
        "cohere",
        "cohere_chat",
        "cometapi",
        "compactifai",
        "coralbricks",
        "cortecs",
        "cursor",
        "custom",
        "custom_openai",
        "darkbloom",
        "dashscope",
        "databricks",
        "databricks_agent",
        "datarobot",
        "deepgram",
        "deepinfra",
        "deepseek",
        "docker_model_runner",
        "dotprompt",
        "edenai",
        "elevenlabs",
        "empiriolabs",
        "empower",
        "eu_jev",
        "fal_ai",
        "featherless_ai",
        "fireworks_ai",
        "friendliai",
        "galadriel",
        "gdc",
        "gemini",
        "gigachat",
        "github",
        "github_copilot",
        "gradient_ai",
        "groq",
        "helicone",
        "heroku",
        "hosted_vllm",
        "hostinger_router",
        "huggingface",
        "humanloop",
        "hyperbolic",
        "inception",
        "inferenceapis",
        "infinity",
        "jina_ai",
        "kyma",
        "lambda_ai",
        "langflow",
        "langfuse",
        "langgraph",
        "laya",
        "lemonade",
        "libertai",
        "litellm_agent",
        "litellm_proxy",
        "llamafile",
        "lm_studio",
        "manus",
        "maritalk",
        "meta",
        "meta_llama",
        "microsoft_365_copilot",
        "milvus",
        "minimax",
        "mistral",
        "modelscope",
        "mongodb",
        "moonshot",
        "morph",
        "nace",
        "nadir",
        "nano-gpt",
        "nebius",
        "neosantara",
        "nlp_cloud",
        "novita",
        "nscale",
        "nvidia_nim",
        "nvidia_riva",
        "oci",
        "ollama",
        "ollama_chat",
        "oobabooga",
        "openai",
        "openai_like",
        "opencode_go",
        "openinfer",
        "openrouter",
        "opensearch",
        "ovhcloud",
        "parallel_ai",
        "parasail",
        "perplexity",
        "petals",
        "pg_vector",
        "pinstripes",
        "poe",
        "predibase",
        "prism",
        "publicai",
        "qwen_ai_platform",
        "qwencloud",
        "ragflow",
        "recraft",
        "reducto",
        "refuseless",
        "reka",
        "replicate",
        "runwayml",
        "s3_vectors",
        "sagemaker",
        "sagemaker_chat",
        "sagemaker_nova",
        "sail",
        "sambanova",
        "sap",
        "scaledown",
        "scaleway",
        "scx-ai",
        "snowflake",
        "soniox",
        "stability",
        "strands_decider",
        "streamlake",
        "synthetic",
        "tencent",
        "tensormesh",
        "text-completion-codestral",
        "text-completion-inception",
        "text-completion-openai",
        "together_ai",
        "topaz",
        "transcribe",
        "triton",
        "typesafe",
        "v0",
        "valkey",
        "vercel_ai_gateway",
        "vertex_ai",
        "vertex_ai_beta",
        "vllm",
        "volcengine",
        "voyage",
        "wally",
        "wandb",
        "watsonx",
        "watsonx_text",
        "xai",
        "xiaomi_mimo",
        "xinference",
        "zai",
        "zerogpu",
    }
)
"""The provider prefixes LiteLLM knows (``litellm.provider_list``), besides teamrun's own ``offline``."""


def fallback_checks(c: CheckContext) -> Iterator[Diagnostic]:
    """``defaults``' list, then each agent's."""
    defaults = mapping(c.data.get("defaults"))
    inherited = sequence(defaults.get("fallbacks"))
    # ``defaults.fallback_on`` is in force for an agent with a list of its own and no ``fallback_on`` of its own
    used_by_agents = any(
        spec.get("a2a") is None and sequence(spec.get("fallbacks")) and spec.get("fallback_on") is None
        for spec in c.agents.values()
    )
    yield from _one_list(c, ("defaults",), defaults, None, inherits=used_by_agents)
    for agent, spec in c.agents.items():
        if spec.get("a2a") is None:
            yield from _one_list(c, ("agents", agent), spec, defaults, inherits=bool(inherited))


def _one_list(
    c: CheckContext, at: JsonPath, spec: dict[str, Any], defaults: dict[str, Any] | None, *, inherits: bool
) -> Iterator[Diagnostic]:
    """The list of ``spec`` at ``at``; ``defaults``: what an agent inherits (``None`` for ``defaults`` itself);
    ``inherits``: ``defaults`` has a list, the agent's when it writes none (for ``defaults`` itself: an agent's
    own list uses ``defaults.fallback_on``)."""
    own = spec.get("fallbacks")
    if isinstance(own, list) and not own and not inherits:
        yield c.error(
            (*at, "fallbacks"),
            f"{dotted((*at, 'fallbacks'))}: an empty list falls back to nothing; name a model "
            "(e.g. `- model: openai/gpt-4o-mini`) or remove `fallbacks`",
            "fallbacks",
        )
    if own is None and not inherits and spec.get("fallback_on") is not None:
        yield c.warning(
            (*at, "fallback_on"),
            f"{dotted((*at, 'fallback_on'))} has no effect: no `fallbacks` list applies here",
            "fallbacks",
        )
    if isinstance(own, list) and own:
        yield from _entries(c, at, spec, defaults)
    elif own is None and inherits and defaults is not None and any(_model(spec)):
        yield from _first_again(c, at, spec, defaults)


def _entries(
    c: CheckContext, at: JsonPath, spec: dict[str, Any], defaults: dict[str, Any] | None
) -> Iterator[Diagnostic]:
    """A list written here: each entry's provider, no model and endpoint twice (the first model included)."""
    first = _first(spec, defaults)
    seen: dict[tuple[str, str], str] = {first: f"the model of {dotted(at)}"} if first[0] else {}
    if (model := _model(spec)[0]) and (problem := _provider_problem(model)):
        yield c.error((*at, "model"), f"{dotted((*at, 'model'))}: {problem}", "fallbacks")
    for index, entry in enumerate(sequence(spec.get("fallbacks"))):
        model, base = _model(mapping(entry))
        path: JsonPath = (*at, "fallbacks", index, "model")
        if not model:
            continue
        if problem := _provider_problem(model):
            yield c.error(path, f"{dotted(path)}: {problem}", "fallbacks")
        if (model, base) in seen:
            yield c.error(path, f"{dotted(path)}: {_twice(model, base, seen[(model, base)])}", "fallbacks")
        seen.setdefault((model, base), dotted((*at, "fallbacks", index)))


def _first_again(c: CheckContext, at: JsonPath, spec: dict[str, Any], defaults: dict[str, Any]) -> Iterator[Diagnostic]:
    """An agent that inherits ``defaults.fallbacks`` with a model of its own that the list names again."""
    first = _first(spec, defaults)
    for index, entry in enumerate(sequence(defaults.get("fallbacks"))):
        if _model(mapping(entry)) == first:
            path: JsonPath = (*at, "model") if spec.get("model") else (*at, "api_base")
            where = dotted(("defaults", "fallbacks", index))
            yield c.error(path, f"{dotted(path)}: {_twice(first[0], first[1], where)}", "fallbacks")
            return


def _twice(model: str, base: str, first: str) -> str:
    where = f" at {base}" if base else ""
    fix = (
        "remove it (the offline simulator ignores api_base)"
        if _is_offline(model)
        else ("remove it or give it another api_base")
    )
    return (
        f"{model}{where} is already in this model's fallback list ({first}): it would be asked twice for the "
        f"same failure; {fix}"
    )


def _first(spec: dict[str, Any], defaults: dict[str, Any] | None) -> tuple[str, str]:
    """The list's first model and endpoint: the agent's own, else ``defaults``'."""
    model, base = _model(spec)
    if defaults is not None:
        inherited = _model(defaults)
        model, base = model or inherited[0], base or inherited[1]
    return model, "" if _is_offline(model) else base


def _model(spec: dict[str, Any]) -> tuple[str, str]:
    """``(model, api_base)`` as written (``""`` when unset or not a string); the simulator (``offline``,
    ``offline/...``) ignores ``api_base``: it is one model whatever the endpoint."""
    model, base = spec.get("model"), spec.get("api_base")
    name = model.strip() if isinstance(model, str) else ""
    if _is_offline(name):
        return name, ""
    return name, base.strip().rstrip("/") if isinstance(base, str) else ""


def _is_offline(model: str) -> bool:
    return model == "offline" or model.startswith("offline/")


def _provider_problem(model: str) -> str | None:
    """Why LiteLLM cannot place ``model``'s provider prefix, or ``None``."""
    prefix = model.split("/", 1)[0] if "/" in model else ""
    if not prefix or "${" in model or prefix == "offline" or prefix in LITELLM_PROVIDERS:
        return None
    return (
        f"unknown provider prefix {prefix!r} in model {model!r} (LiteLLM's provider comes first, e.g. "
        f"`openai/gpt-4o-mini`, `anthropic/...`, `hosted_vllm/...`){did_you_mean(prefix, sorted(LITELLM_PROVIDERS))}"
    )
