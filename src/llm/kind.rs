//! The kinds of provider (a provider's `type`, crush(1) CONFIGURATION) and what each brings by
//! default: the wire protocol it speaks, its base URL, the variable its key comes from and how
//! its models are asked to reason. Every place that depends on a provider's type asks here.

/// The wire protocol a provider speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum ApiKind {
    Anthropic,
    /// OpenAI itself (sends `max_completion_tokens`): the Responses API for the models that have
    /// it (see `Endpoint::responses`), Chat Completions for the others.
    OpenAi,
    /// Any OpenAI-compatible server (ollama, llama.cpp, vLLM, LM Studio, OpenRouter...).
    #[default]
    OpenAiCompat,
    /// Google's Gemini API (`streamGenerateContent`, `x-goog-api-key`).
    Gemini,
    /// Google Vertex AI: the base URL names the project and location; Gemini models by
    /// `streamGenerateContent`, Anthropic's (`claude-*`) by `streamRawPredict`; an OAuth access
    /// token (`api_key`, else `GOOGLE_OAUTH_ACCESS_TOKEN` or gcloud when `ambient_auth`).
    Vertex,
    /// Azure OpenAI: OpenAI's APIs at an Azure resource, with the `api-key` header.
    Azure,
    /// Anthropic models on Amazon Bedrock (`InvokeModelWithResponseStream`).
    Bedrock,
}

/// How a provider's models are asked to reason (the request options `reasoning_effort`,
/// `thinking`, `reasoning`, `thinking_config` of crush(1) CONFIGURATION).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reasoning {
    /// `reasoning_effort` (OpenAI, Azure).
    Effort,
    /// Anthropic's `effort` or `thinking` (Anthropic, Bedrock).
    Anthropic,
    /// A gateway's `reasoning: {enabled, effort}` (OpenRouter, Vercel).
    Gateway,
    /// Gemini's `thinking_config` (Anthropic's switch for its models on Vertex AI).
    Gemini,
    /// An OpenAI-compatible server: `reasoning_effort` and each provider's own switch.
    Compat,
}

/// The `type` values a provider may have, with the protocol each speaks; the first of each
/// kind is its canonical name.
const TYPES: &[(&str, ApiKind)] = &[
    ("anthropic", ApiKind::Anthropic),
    ("openai", ApiKind::OpenAi),
    ("openai-compat", ApiKind::OpenAiCompat),
    ("openrouter", ApiKind::OpenAiCompat),
    ("vercel", ApiKind::OpenAiCompat),
    ("ollama", ApiKind::OpenAiCompat),
    ("llamacpp", ApiKind::OpenAiCompat),
    ("lmstudio", ApiKind::OpenAiCompat),
    ("vllm", ApiKind::OpenAiCompat),
    ("litellm", ApiKind::OpenAiCompat),
    ("omlx", ApiKind::OpenAiCompat),
    ("hyper", ApiKind::OpenAiCompat),
    ("google", ApiKind::Gemini),
    ("google-vertex", ApiKind::Vertex),
    ("azure", ApiKind::Azure),
    ("bedrock", ApiKind::Bedrock),
];

/// Gateways whose own URL is their default (by provider id or type).
const GATEWAYS: &[(&str, &str)] = &[
    ("openrouter", "https://openrouter.ai/api/v1"),
    ("vercel", "https://ai-gateway.vercel.sh/v1"),
];

impl ApiKind {
    /// The kind of a provider `type` (`anthropic`, `openrouter`, `google-vertex`...), None for a
    /// type this build does not know.
    pub(crate) fn from_type(name: &str) -> Option<ApiKind> {
        TYPES.iter().find(|(n, _)| *n == name).map(|(_, k)| *k)
    }

    /// The canonical `type` of this kind (`openai-compat` for every compatible server).
    pub(crate) fn type_name(self) -> &'static str {
        TYPES
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("openai-compat", |(n, _)| n)
    }

    /// The types to suggest when one is unknown, for the message.
    pub(crate) fn type_hint() -> &'static str {
        "(use anthropic, bedrock, openai, openai-compat, openrouter, google, google-vertex or azure)"
    }

    /// The type of a provider that neither names one nor is in the catalog: a provider called
    /// `anthropic` or `openai` is that API, any other an OpenAI-compatible server.
    pub(crate) fn default_type(id: &str) -> &'static str {
        match Self::from_type(id) {
            Some(k @ (ApiKind::Anthropic | ApiKind::OpenAi)) => k.type_name(),
            _ => ApiKind::OpenAiCompat.type_name(),
        }
    }

    /// The base URL of provider `id` of this kind when nothing sets one: the kind's official
    /// API, or a gateway's own URL; None when it must be configured.
    pub(crate) fn default_base_url(self, id: &str) -> Option<&'static str> {
        match self {
            ApiKind::Anthropic => Some(super::anthropic::DEFAULT_BASE_URL),
            ApiKind::OpenAi => Some(super::openai::DEFAULT_BASE_URL),
            ApiKind::Gemini => Some(super::gemini::DEFAULT_BASE_URL),
            _ => GATEWAYS.iter().find(|(g, _)| *g == id).map(|(_, u)| *u),
        }
    }

    /// The variable (as `$NAME`) holding the key of a provider of this kind that the catalog
    /// does not describe; empty when there is none.
    pub(crate) fn default_key_var(self) -> &'static str {
        match self {
            ApiKind::Anthropic => "$ANTHROPIC_API_KEY",
            ApiKind::OpenAi => "$OPENAI_API_KEY",
            ApiKind::Gemini => "$GEMINI_API_KEY",
            ApiKind::Azure => "$AZURE_OPENAI_API_KEY",
            ApiKind::OpenAiCompat | ApiKind::Vertex | ApiKind::Bedrock => "",
        }
    }

    /// What a provider of this kind sends to authenticate, for messages.
    pub(crate) fn credential(self) -> &'static str {
        match self {
            ApiKind::Vertex => "access token",
            _ => "key",
        }
    }

    /// How a provider of `type` asks its models to reason.
    pub(crate) fn reasoning(type_name: &str) -> Reasoning {
        match Self::from_type(type_name).unwrap_or_default() {
            ApiKind::OpenAi | ApiKind::Azure => Reasoning::Effort,
            // Bedrock serves Anthropic's models in Anthropic's dialect.
            ApiKind::Anthropic | ApiKind::Bedrock => Reasoning::Anthropic,
            ApiKind::Gemini | ApiKind::Vertex => Reasoning::Gemini,
            ApiKind::OpenAiCompat if GATEWAYS.iter().any(|(g, _)| *g == type_name) => {
                Reasoning::Gateway
            }
            ApiKind::OpenAiCompat => Reasoning::Compat,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_names_its_kind_and_back() {
        for (name, kind) in TYPES {
            assert_eq!(ApiKind::from_type(name), Some(*kind), "{name}");
            assert_eq!(ApiKind::from_type(kind.type_name()), Some(*kind));
        }
        assert_eq!(ApiKind::from_type("gemini"), None);
        assert_eq!(ApiKind::OpenAiCompat.type_name(), "openai-compat");
        assert_eq!(ApiKind::Vertex.type_name(), "google-vertex");
    }

    #[test]
    fn defaults_by_kind() {
        assert_eq!(ApiKind::default_type("anthropic"), "anthropic");
        assert_eq!(ApiKind::default_type("openai"), "openai");
        assert_eq!(ApiKind::default_type("google"), "openai-compat");
        assert_eq!(ApiKind::default_type("mine"), "openai-compat");
        assert_eq!(
            ApiKind::OpenAiCompat.default_base_url("openrouter"),
            Some("https://openrouter.ai/api/v1")
        );
        assert_eq!(ApiKind::OpenAiCompat.default_base_url("ollama"), None);
        assert_eq!(ApiKind::Azure.default_base_url("azure"), None);
        assert_eq!(ApiKind::Gemini.default_key_var(), "$GEMINI_API_KEY");
        assert_eq!(ApiKind::Vertex.default_key_var(), "");
        assert_eq!(ApiKind::reasoning("vercel"), Reasoning::Gateway);
        assert_eq!(ApiKind::reasoning("hyper"), Reasoning::Compat);
        assert_eq!(ApiKind::reasoning("bedrock"), Reasoning::Anthropic);
        assert_eq!(ApiKind::reasoning("google-vertex"), Reasoning::Gemini);
    }
}
