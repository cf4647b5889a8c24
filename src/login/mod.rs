//! Signing in instead of pasting a key (crush(1) LOGIN): GitHub Copilot (GitHub's device flow,
//! then Copilot's short-lived API token, refreshed as it expires) and Charm's Hyper (its device
//! flow, then access tokens exchanged for the long-lived one). The long-lived token is kept in
//! the global data directory ([`store`]); the short-lived one is fetched when first needed,
//! before it expires, and once more when the server refuses it.

pub(crate) mod browser;
pub(crate) mod copilot;
pub(crate) mod flow;
pub(crate) mod store;

use serde_json::Value;
use std::fmt;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
pub(crate) use store::Token;

/// The providers one can sign in to.
pub(crate) const PROVIDERS: &[&str] = &["copilot", "hyper"];

/// GitHub's OAuth app of Copilot's editor plugins (the device flow's client).
pub(crate) const COPILOT_CLIENT_ID: &str = "Iv1.b507a08c87ecfe98";

/// A token this close to its expiry is refreshed before use.
const EXPIRY_MARGIN: i64 = 60;

#[derive(Clone, Debug)]
pub(crate) enum LoginError {
    /// Not a provider one can sign in to.
    Unknown(String),
    /// The server could not be reached, or answered with an HTTP error.
    Http { url: String, message: String },
    /// The server's answer is not what the flow expects (HTML, a missing field...).
    BadReply { url: String, message: String },
    /// The server refused (access_denied, expired_token, no Copilot subscription...).
    Refused(String),
    /// A token file that cannot be used or written.
    Store { path: PathBuf, message: String },
    /// Input that is not a token (`--token-stdin`).
    Input(String),
}

impl fmt::Display for LoginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoginError::Unknown(n) => write!(
                f,
                "'{n}' is not a provider one can sign in to (those are: {})",
                PROVIDERS.join(", ")
            ),
            LoginError::Http { url, message } | LoginError::BadReply { url, message } => {
                write!(f, "{url}: {message}")
            }
            LoginError::Refused(m) | LoginError::Input(m) => f.write_str(m),
            LoginError::Store { path, message } => write!(f, "{}: {message}", path.display()),
        }
    }
}

impl std::error::Error for LoginError {}

/// Where the sign-in servers are: GitHub's and Hyper's own, unless the user's own configuration
/// (the global `crush.json`, key `login`) names others; a project's configuration never does,
/// so an untrusted project cannot send a token to a server of its choosing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Settings {
    pub github_url: String,
    pub github_api_url: String,
    pub copilot_url: String,
    pub hyper_url: String,
    /// Added to the polling interval on `slow_down` (RFC 8628: 5 seconds).
    pub slow_down: Duration,
}

impl Settings {
    pub(crate) fn load() -> Settings {
        let file = crate::paths::global_config_dir().join("crush.json");
        let v: Value = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null);
        let l = &v["login"];
        let url = |k: &str, d: &str| {
            l[k].as_str()
                .filter(|s| s.starts_with("http://") || s.starts_with("https://"))
                .unwrap_or(d)
                .trim_end_matches('/')
                .to_string()
        };
        Settings {
            github_url: url("github_url", "https://github.com"),
            github_api_url: url("github_api_url", "https://api.github.com"),
            copilot_url: url("copilot_url", "https://api.githubcopilot.com"),
            hyper_url: url("hyper_url", "https://hyper.charm.land"),
            slow_down: Duration::from_millis(l["slow_down_ms"].as_u64().unwrap_or(5000)),
        }
    }

    /// The API a signed-in provider is called at.
    pub(crate) fn home(&self, provider: &str) -> Option<String> {
        match provider {
            "copilot" => Some(self.copilot_url.clone()),
            // Go Crush 0.90 calls Hyper's OpenAI-compatible API at `/v1`.
            "hyper" => Some(format!("{}/v1", self.hyper_url)),
            _ => None,
        }
    }
}

/// The API a provider one signs in to is called at (None for the others).
pub(crate) fn home(provider: &str) -> Option<String> {
    if PROVIDERS.contains(&provider) {
        Settings::load().home(provider)
    } else {
        None
    }
}

/// The request headers Copilot requires (those of its editor plugins).
pub(crate) fn copilot_headers() -> Vec<(String, String)> {
    [
        ("user-agent", "GitHubCopilotChat/0.32.4"),
        ("editor-version", "vscode/1.105.1"),
        ("editor-plugin-version", "copilot-chat/0.32.4"),
        ("copilot-integration-id", "vscode-chat"),
        ("openai-intent", "conversation-edits"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .to_vec()
}

pub(crate) fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Where a provider's long-lived token came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// crush's own token file: refreshed tokens are written back.
    Store,
    /// `providers.NAME.oauth` of the user's configuration: used read-only.
    Config,
    /// The token Copilot's editor plugins keep (`~/.config/github-copilot/`): read-only.
    Editor(PathBuf),
}

/// A signed-in provider's credentials: what the calls' bearer token is made from.
pub(crate) struct Credential {
    pub provider: String,
    pub origin: Origin,
    settings: Settings,
    token: Mutex<Token>,
    /// Copilot's list of the subscription's models, once asked ([`copilot`]).
    models: Mutex<Option<Vec<copilot::Listed>>>,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("provider", &self.provider)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

impl Credential {
    /// The credentials of `provider` when it is one to sign in to and a token is known: crush's
    /// own token file, else `providers.NAME.oauth` (`oauth`), else (Copilot) the editor
    /// plugins' token. A token file that must be refused is an error.
    pub(crate) fn find(
        provider: &str,
        oauth: Option<&Value>,
    ) -> Result<Option<Credential>, LoginError> {
        if !PROVIDERS.contains(&provider) {
            return Ok(None);
        }
        let settings = Settings::load();
        let make = |origin, token| Credential {
            provider: provider.to_string(),
            origin,
            settings: settings.clone(),
            token: Mutex::new(token),
            models: Mutex::new(None),
        };
        if let Some(t) = store::load(provider)? {
            return Ok(Some(make(Origin::Store, t)));
        }
        if let Some(v) = oauth {
            let t: Token = serde_json::from_value(v.clone()).map_err(|e| {
                LoginError::Input(format!("providers.{provider}.oauth: not a token ({e})"))
            })?;
            if !t.access_token.is_empty() || !t.refresh_token.is_empty() {
                return Ok(Some(make(Origin::Config, t)));
            }
        }
        if provider == "copilot"
            && let Some((path, gh)) = editor_token()
        {
            let t = Token {
                refresh_token: gh,
                ..Token::default()
            };
            return Ok(Some(make(Origin::Editor(path), t)));
        }
        Ok(None)
    }

    /// The bearer token for a call: the one kept while it is good, else (or when `fresh`: the
    /// server refused it) a new one from the long-lived token, written back to crush's own
    /// token file.
    pub(crate) fn get(&self, fresh: bool) -> Result<String, LoginError> {
        let mut t = self.token.lock().unwrap_or_else(|e| e.into_inner());
        let good = !t.access_token.is_empty()
            && (t.expires_at == 0 && t.refresh_token.is_empty()
                || t.expires_at - EXPIRY_MARGIN > now());
        if good && !fresh {
            return Ok(t.access_token.clone());
        }
        if t.refresh_token.is_empty() {
            return Err(self.relogin(LoginError::Refused(
                "the access token expired and there is no refresh token".into(),
            )));
        }
        let new = match self.provider.as_str() {
            "copilot" => flow::copilot_token(&self.settings, &t.refresh_token),
            _ => flow::hyper_exchange(&self.settings, &t.refresh_token),
        }
        .map_err(|e| self.relogin(e))?;
        *t = new;
        if self.origin == Origin::Store {
            store::save(&self.provider, &t)?;
        }
        Ok(t.access_token.clone())
    }

    /// Hyper's own provider entry (`GET {hyper_url}/api/v1/provider`, Catwalk's shape, with
    /// every model Hyper serves).
    pub(crate) fn hyper_provider(&self) -> Result<Value, LoginError> {
        self.get_json(&format!("{}/api/v1/provider", self.settings.hyper_url), &[])
    }

    /// `GET url` with the bearer token (a fresh one once when it is refused): the JSON object
    /// answered.
    fn get_json(&self, url: &str, headers: &[(String, String)]) -> Result<Value, LoginError> {
        let mut fresh = false;
        loop {
            let bearer = format!("Bearer {}", self.get(fresh)?);
            let (status, v) = flow::call("GET", url, Some(&bearer), headers, flow::Body::None)?;
            match status {
                200..=299 => return Ok(v),
                401 if !fresh => fresh = true,
                _ => {
                    return Err(LoginError::Http {
                        url: url.to_string(),
                        message: format!("HTTP {status}"),
                    });
                }
            }
        }
    }

    fn relogin(&self, e: LoginError) -> LoginError {
        let hint = match &self.origin {
            Origin::Config => format!(" (providers.{}.oauth is used as is)", self.provider),
            Origin::Editor(p) => format!(" (the token of {})", p.display()),
            Origin::Store => String::new(),
        };
        LoginError::Refused(format!(
            "{} sign-in: {e}{hint}; run 'crush login {}'",
            self.provider, self.provider
        ))
    }
}

/// The GitHub token Copilot's editor plugins keep: `apps.json`, else `hosts.json`, of
/// `~/.config/github-copilot` (the entry of github.com).
pub(crate) fn editor_token() -> Option<(PathBuf, String)> {
    let dir = crate::paths::user_config_home().join("github-copilot");
    for name in ["apps.json", "hosts.json"] {
        let p = dir.join(name);
        let Some(v) = std::fs::read_to_string(&p)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        else {
            continue;
        };
        let Some(o) = v.as_object() else { continue };
        let preferred = format!("github.com:{COPILOT_CLIENT_ID}");
        let entry = o.get(&preferred).or_else(|| {
            o.iter()
                .find(|(k, _)| k.starts_with("github.com"))
                .map(|e| e.1)
        });
        if let Some(t) = entry
            .and_then(|e| e["oauth_token"].as_str())
            .filter(|t| !t.is_empty())
        {
            return Some((p, t.to_string()));
        }
    }
    None
}
