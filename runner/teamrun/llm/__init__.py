"""Model access: the LiteLLM adapter, the offline simulator, the router between them, the call types.

Importing this package does not import LiteLLM; the first call of a non-offline model does.
"""

from teamrun.llm.adapter import (
    LiteLLMChatModel,
    ProviderError,
    RetryNotice,
    import_litellm,
    resolve_model,
)
from teamrun.llm.offline import (
    DEFAULT_OFFLINE_MODEL,
    OfflineChatModel,
    is_offline_model,
    simulate,
)
from teamrun.llm.router import ModelRouter
from teamrun.llm.types import (
    ChatModel,
    Message,
    ModelReply,
    ModelSettings,
    ToolCall,
    ToolSchema,
    Usage,
    parse_arguments,
)

__all__ = [
    "DEFAULT_OFFLINE_MODEL",
    "ChatModel",
    "LiteLLMChatModel",
    "Message",
    "ModelReply",
    "ModelRouter",
    "ModelSettings",
    "OfflineChatModel",
    "ProviderError",
    "RetryNotice",
    "ToolCall",
    "ToolSchema",
    "Usage",
    "import_litellm",
    "is_offline_model",
    "parse_arguments",
    "resolve_model",
    "simulate",
]
