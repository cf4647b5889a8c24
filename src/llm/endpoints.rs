//! How each kind of provider is reached: which dialect a call speaks (it can depend on the
//! model: OpenAI's Responses API, Anthropic's models on Vertex AI), its URL, body and headers,
//! and the Vertex AI access token.

use super::{
    ApiKind, ChatRequest, Endpoint, LlmError, anthropic, bedrock, gemini, openai, responses,
};
use serde_json::{Value, json};
use std::sync::Mutex;
use std::time::Duration;

pub(crate) use super::dialect::{Dialect, Framing, Signer};

/// One call, ready to send.
pub(crate) struct Prepared {
    pub url: String,
    pub dialect: Dialect,
    pub body: Value,
    pub headers: Vec<(String, String)>,
    /// A bearer token to fetch before each attempt (Vertex AI without a key of its own).
    pub token: Option<TokenSource>,
    pub framing: Framing,
    /// Signs each attempt and reads refusals (Bedrock's SigV4).
    pub signer: Option<Box<dyn Signer>>,
}

/// Whether `ep` serves `model` through the Responses API: the models that have it at an
/// openai or azure provider, whatever its base URL, unless the configuration says otherwise;
/// Copilot's models that it serves only that way (crush(1) LOGIN); an openai-compat server
/// only when it asks (crush(1) PROVIDERS).
fn uses_responses(ep: &Endpoint, model: &str) -> bool {
    match ep.kind {
        ApiKind::OpenAi | ApiKind::Azure => ep.responses.unwrap_or(responses::supports(model)),
        ApiKind::OpenAiCompat => ep
            .responses
            .unwrap_or_else(|| ep.login.as_ref().is_some_and(|l| l.wants_responses(model))),
        _ => false,
    }
}

/// Vertex AI serves Anthropic's models too, by another method and in Anthropic's dialect.
fn vertex_anthropic(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    m.contains("claude") || m.contains("anthropic")
}

/// The version Vertex AI's Anthropic models take in the body.
const VERTEX_ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// The api-version a classic Azure deployment URL is called with when the base names none.
pub(crate) const AZURE_API_VERSION: &str = "2025-01-01-preview";

/// An Azure OpenAI base as Go Crush reads it: a resource's URL (`https://RES.openai.azure.com`,
/// `RES.cognitiveservices.azure.com`, `RES.services.ai.azure.com/api/projects/P`) becomes the
/// resource's v1 API, `https://RES.openai.azure.com/openai/v1`; a deployment URL
/// (`.../openai/deployments/NAME`) and any other URL are kept (with `https://` when the scheme
/// is missing).
pub(crate) fn azure_base(base: &str) -> String {
    let base = base.trim();
    let (scheme, rest) = match base.split_once("://") {
        Some((s, r)) => (s, r),
        None => ("https", base),
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (host, tail) = rest.split_at(end);
    let resource = [
        ".openai.azure.com",
        ".cognitiveservices.azure.com",
        ".services.ai.azure.com",
    ]
    .iter()
    .find_map(|s| {
        host.to_ascii_lowercase()
            .strip_suffix(s)
            .map(str::to_string)
    })
    .filter(|r| !r.is_empty() && !r.contains('.'));
    match resource {
        Some(r) if !tail.contains("/openai/deployments/") && !tail.contains("/openai/v1") => {
            let query = tail.split_once('?').map(|(_, q)| q);
            let mut url = format!("https://{r}.openai.azure.com/openai/v1");
            if let Some(q) = query {
                url.push('?');
                url.push_str(q);
            }
            url
        }
        _ => format!("{scheme}://{rest}"),
    }
}

/// `{azure base}{path}`, with the default api-version for a deployment URL that names none.
fn azure_url(base: &str, path: &str) -> String {
    let base = azure_base(base);
    let url = crate::net::join_path(&base, path);
    if url.contains("/openai/deployments/") && !url.contains("api-version=") {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}api-version={AZURE_API_VERSION}")
    } else {
        url
    }
}

/// The body Anthropic's models take on a cloud platform: the model is in the URL, the API
/// version in the body.
pub(crate) fn anthropic_platform_body(mut body: Value, version: &str) -> Value {
    if let Some(o) = body.as_object_mut() {
        o.remove("model");
        o.insert("anthropic_version".into(), json!(version));
    }
    body
}

/// The URL, dialect, body and headers of `req` at `ep`.
pub(crate) fn prepare(ep: &Endpoint, req: &ChatRequest) -> Prepared {
    let key = ep
        .api_key
        .as_deref()
        .map(str::trim)
        .filter(|k| !k.is_empty());
    let mut token = None;
    let (mut framing, mut signer) = (Framing::Sse, None);
    let (url, dialect, body, headers) = match ep.kind {
        ApiKind::Bedrock => {
            let call = bedrock::Call::new(ep, &req.model);
            let url = call.url.clone();
            (framing, signer) = (
                Framing::EventStream,
                Some(Box::new(call) as Box<dyn Signer>),
            );
            (
                url,
                Dialect::Anthropic,
                bedrock::build_request(req, ep),
                bedrock::headers(ep),
            )
        }
        ApiKind::Anthropic => (
            anthropic::url(&ep.base_url),
            Dialect::Anthropic,
            anthropic::build_request(req),
            anthropic::headers(ep, req),
        ),
        ApiKind::OpenAi | ApiKind::OpenAiCompat if uses_responses(ep, &req.model) => (
            responses::url(&ep.base_url),
            Dialect::Responses,
            responses::build_request(req),
            openai::headers(ep),
        ),
        ApiKind::OpenAi | ApiKind::OpenAiCompat => (
            openai::url(&ep.base_url),
            Dialect::Chat,
            openai::build_request(req, ep.kind),
            openai::headers(ep),
        ),
        ApiKind::Azure => {
            let headers = key
                .map(|k| vec![("api-key".to_string(), k.to_string())])
                .unwrap_or_default();
            if uses_responses(ep, &req.model) {
                (
                    azure_url(&ep.base_url, "/responses"),
                    Dialect::Responses,
                    responses::build_request(req),
                    headers,
                )
            } else {
                (
                    azure_url(&ep.base_url, "/chat/completions"),
                    Dialect::Chat,
                    openai::build_request(req, ApiKind::OpenAi),
                    headers,
                )
            }
        }
        ApiKind::Gemini => (
            gemini::url(&ep.base_url, &req.model),
            Dialect::Gemini,
            gemini::build_request(req, false),
            gemini::headers(key),
        ),
        ApiKind::Vertex => {
            let headers = match key {
                Some(k) => vec![("authorization".to_string(), format!("Bearer {k}"))],
                None => {
                    if ep.ambient_auth {
                        token = Some(TokenSource::gcloud(&ep.env));
                    }
                    Vec::new()
                }
            };
            if vertex_anthropic(&req.model) {
                let mut headers = headers;
                if let Some(beta) = anthropic::beta(req) {
                    headers.push(("anthropic-beta".to_string(), beta.to_string()));
                }
                let url = crate::net::join_path(
                    &ep.base_url,
                    &format!(
                        "/publishers/anthropic/models/{}:streamRawPredict",
                        req.model
                    ),
                );
                let body = anthropic_platform_body(
                    anthropic::build_request(req),
                    VERTEX_ANTHROPIC_VERSION,
                );
                (url, Dialect::Anthropic, body, headers)
            } else {
                (
                    gemini::vertex_url(&ep.base_url, &req.model),
                    Dialect::Gemini,
                    gemini::build_request(req, true),
                    headers,
                )
            }
        }
    };
    let mut headers = headers;
    if let Some(l) = &ep.login {
        token = Some(TokenSource {
            command: Vec::new(),
            login: Some(l.clone()),
            env: ep.env.clone(),
        });
        if l.provider == "copilot" {
            headers.extend(crate::login::copilot_headers());
        }
    }
    Prepared {
        url,
        dialect,
        body,
        headers,
        token,
        framing,
        signer,
    }
}

/// Where a Google OAuth access token comes from: `GOOGLE_OAUTH_ACCESS_TOKEN`, else the output of
/// a command (`gcloud auth print-access-token`), kept for the life of the process until the
/// server refuses it.
#[derive(Clone, Debug)]
pub(crate) struct TokenSource {
    pub command: Vec<String>,
    /// A signed-in provider's credentials, used instead of the command.
    pub login: Option<std::sync::Arc<crate::login::Credential>>,
    /// The session's variables: `TOKEN_VAR` is read there first, the command gets them.
    pub env: crate::env::Overlay,
}

/// Where a token came from, for the message when it is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokenOrigin {
    Environment,
    Command,
    /// `crush login` (crush(1) LOGIN).
    Login,
}

/// The variable holding a ready Google access token.
pub(crate) const TOKEN_VAR: &str = "GOOGLE_OAUTH_ACCESS_TOKEN";

/// Longest the token command may take.
const TOKEN_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// The tokens the commands printed: (command, token).
static TOKENS: Mutex<Vec<(Vec<String>, String)>> = Mutex::new(Vec::new());

impl TokenSource {
    pub(crate) fn gcloud(env: &crate::env::Overlay) -> TokenSource {
        TokenSource {
            command: ["gcloud", "auth", "print-access-token"]
                .map(String::from)
                .to_vec(),
            login: None,
            env: env.clone(),
        }
    }

    /// The token; `fresh`: not the one kept (it was refused), a new one from the command.
    pub(crate) fn get(&self, fresh: bool) -> Result<(String, TokenOrigin), LlmError> {
        if let Some(l) = &self.login {
            return l
                .get(fresh)
                .map(|t| (t, TokenOrigin::Login))
                .map_err(|e| LlmError::Auth {
                    message: e.to_string(),
                    refreshable: false,
                });
        }
        if let Some(t) = self.env.var(TOKEN_VAR)
            && !t.trim().is_empty()
        {
            return Ok((t.trim().to_string(), TokenOrigin::Environment));
        }
        let mut kept = TOKENS.lock().unwrap_or_else(|e| e.into_inner());
        if fresh {
            kept.retain(|(c, _)| c != &self.command);
        } else if let Some((_, t)) = kept.iter().find(|(c, _)| c == &self.command) {
            return Ok((t.clone(), TokenOrigin::Command));
        }
        let token = self.run()?;
        kept.push((self.command.clone(), token.clone()));
        Ok((token, TokenOrigin::Command))
    }

    fn run(&self) -> Result<String, LlmError> {
        let shown = self.command.join(" ");
        let fail = |why: String| LlmError::Auth {
            message: format!(
                "no Google access token for Vertex AI: set {TOKEN_VAR}, or sign in with gcloud ('{shown}' {why})"
            ),
            refreshable: false,
        };
        let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
        let mut spec = crate::proc::Spec::exec(self.command.clone(), cwd);
        spec.env = self.env.vars();
        spec.timeout = Some(TOKEN_COMMAND_TIMEOUT);
        let out = crate::proc::run(&spec).map_err(|e| fail(format!("cannot run: {e}")))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let token = stdout.lines().map(str::trim).find(|l| !l.is_empty());
        match token {
            Some(t) if out.success() => Ok(t.to_string()),
            _ => {
                let err = String::from_utf8_lossy(&out.stderr);
                let err = err.lines().map(str::trim).find(|l| !l.is_empty());
                Err(fail(match err {
                    Some(e) => format!("failed: {}", super::retry::snippet(e, 200)),
                    None => format!("exited with {}", out.code()),
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn azure_urls_as_go_crush_reads_them() {
        for base in [
            "https://res1.openai.azure.com",
            "https://res1.openai.azure.com/",
            "res1.openai.azure.com",
            "https://res1.cognitiveservices.azure.com",
            "https://res1.services.ai.azure.com/api/projects/p",
        ] {
            assert_eq!(
                azure_base(base),
                "https://res1.openai.azure.com/openai/v1",
                "{base}"
            );
        }
        assert_eq!(
            azure_url("https://res1.openai.azure.com", "/responses"),
            "https://res1.openai.azure.com/openai/v1/responses"
        );
        // A deployment URL keeps its shape and gets an api-version.
        assert_eq!(
            azure_url(
                "https://r.openai.azure.com/openai/deployments/gpt-x",
                "/chat/completions"
            ),
            format!(
                "https://r.openai.azure.com/openai/deployments/gpt-x/chat/completions?api-version={AZURE_API_VERSION}"
            )
        );
        assert_eq!(
            azure_url(
                "https://r.openai.azure.com/openai/deployments/d?api-version=2024-10-21",
                "/chat/completions"
            ),
            "https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21"
        );
        // Anything else is kept (a proxy, the fake server).
        assert_eq!(
            azure_url("http://127.0.0.1:9/openai/v1", "/responses"),
            "http://127.0.0.1:9/openai/v1/responses"
        );
    }

    fn ep(kind: ApiKind) -> Endpoint {
        Endpoint {
            kind,
            base_url: "http://h/v1".into(),
            api_key: Some("k".into()),
            ..Default::default()
        }
    }

    fn req(model: &str) -> ChatRequest {
        ChatRequest {
            model: model.into(),
            messages: vec![super::super::Message::user("hi")],
            ..Default::default()
        }
    }

    #[test]
    fn the_dialect_follows_the_kind_and_the_model() {
        let d = |e: &Endpoint, m: &str| prepare(e, &req(m)).dialect;
        let openai = ep(ApiKind::OpenAi);
        assert_eq!(d(&openai, "gpt-5"), Dialect::Responses);
        assert_eq!(d(&openai, "o3-mini"), Dialect::Responses);
        assert_eq!(d(&openai, "davinci-002"), Dialect::Chat);
        let mut chat_only = ep(ApiKind::OpenAi);
        chat_only.responses = Some(false);
        assert_eq!(d(&chat_only, "gpt-5"), Dialect::Chat);
        let mut compat = ep(ApiKind::OpenAiCompat);
        assert_eq!(d(&compat, "gpt-5"), Dialect::Chat);
        compat.responses = Some(true);
        assert_eq!(d(&compat, "qwen3"), Dialect::Responses);
        assert_eq!(prepare(&compat, &req("q")).url, "http://h/v1/responses");
        let mut vertex = ep(ApiKind::Vertex);
        vertex.base_url = "https://aiplatform.googleapis.com/v1/projects/p/locations/global".into();
        let p = prepare(&vertex, &req("claude-sonnet-4-5@20250929"));
        assert_eq!(p.dialect, Dialect::Anthropic);
        assert!(
            p.url.ends_with(
                "/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"
            ),
            "{}",
            p.url
        );
        assert_eq!(p.body["anthropic_version"], VERTEX_ANTHROPIC_VERSION);
        assert!(p.body.get("model").is_none());
        assert_eq!(p.headers, [("authorization".into(), "Bearer k".into())]);
        let mut thinking = req("claude-sonnet-4-5@20250929");
        thinking.options.provider_options =
            serde_json::from_value(json!({"thinking": {"budget_tokens": 2000}})).unwrap();
        assert!(prepare(&vertex, &thinking).headers.contains(&(
            "anthropic-beta".into(),
            "interleaved-thinking-2025-05-14".into()
        )));
        let p = prepare(&vertex, &req("gemini-3-pro"));
        assert_eq!(p.dialect, Dialect::Gemini);
        assert!(
            p.url.ends_with(
                "/locations/global/publishers/google/models/gemini-3-pro:streamGenerateContent?alt=sse"
            ),
            "{}",
            p.url
        );
        // No key of its own: the environment's token only at the provider's own endpoint.
        vertex.api_key = None;
        assert!(prepare(&vertex, &req("gemini-3-pro")).token.is_none());
        vertex.ambient_auth = true;
        assert!(prepare(&vertex, &req("gemini-3-pro")).token.is_some());
        let azure = ep(ApiKind::Azure);
        let p = prepare(&azure, &req("gpt-4.1"));
        assert_eq!(p.dialect, Dialect::Responses);
        assert_eq!(p.headers, [("api-key".into(), "k".into())]);
        let p = prepare(&azure, &req("my-deployment"));
        assert_eq!(p.dialect, Dialect::Chat);
        assert!(p.body.get("max_completion_tokens").is_none() || p.body["stream"] == true);
    }

    #[test]
    fn the_token_comes_from_the_command_and_is_kept_until_refused() {
        let dir = tempfile::tempdir().unwrap();
        let count = dir.path().join("count");
        let script = dir.path().join("token.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho x >> {c}\necho \"tok-$(wc -l < {c} | tr -d ' ')\"\n",
                c = count.display()
            ),
        )
        .unwrap();
        let src = TokenSource {
            command: vec!["sh".into(), script.display().to_string()],
            login: None,
            env: Default::default(),
        };
        if std::env::var_os(TOKEN_VAR).is_some() {
            return; // The environment's token would win; nothing to check here.
        }
        assert_eq!(
            src.get(false).unwrap(),
            ("tok-1".into(), TokenOrigin::Command)
        );
        assert_eq!(src.get(false).unwrap().0, "tok-1");
        assert_eq!(src.get(true).unwrap().0, "tok-2");
        assert_eq!(src.get(false).unwrap().0, "tok-2");
        let missing = TokenSource {
            command: vec![dir.path().join("nope").display().to_string()],
            login: None,
            env: Default::default(),
        };
        let e = missing.get(false).unwrap_err().to_string();
        assert!(e.contains(TOKEN_VAR) && e.contains("cannot run"), "{e}");
    }
}
