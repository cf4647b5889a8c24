//! OAuth 2.1 for HTTP servers that require authorization, as the MCP authorization spec and Go
//! Crush do it: the protected-resource metadata (RFC 9728) names the authorization server, whose
//! metadata (RFC 8414) gives the endpoints; the client is the configured `oauth_client_id` or one
//! registered dynamically (RFC 7591); the code is obtained with PKCE (S256) through the user's
//! browser and a listener on a local port, and exchanged for tokens that are kept (with what
//! refreshing them needs) by a `TokenStore`, then refreshed when they expire or are refused.

use super::http::Credentials;
use super::wire::{Url, base64url, form, query_value, random_bytes};
use serde_json::{Value, json};
use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where tokens are kept between runs (crush(1) FILES: the global state).
pub(crate) trait TokenStore: Send + Sync {
    fn load(&self, server: &str) -> Option<Value>;
    /// Saves (Some) or forgets (None) the token of `server`.
    fn save(&self, server: &str, token: Option<&Value>);
}

/// What the configuration says about a server's OAuth client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ClientConfig {
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// The local port the browser is sent back to (None: the first free one of Go Crush's).
    pub callback_port: Option<u16>,
}

/// Go Crush's callback ports, tried in order.
const CALLBACK_PORTS: std::ops::RangeInclusive<u16> = 40704..=40713;
const CALLBACK_PATH: &str = "/callback";
/// A token this close to its expiry is refreshed before use.
const EXPIRY_MARGIN: i64 = 30;

/// An agent for `url` through the proxy the session's variables `env` name.
fn agent(timeout: Duration, url: &str, env: &crate::env::Overlay) -> ureq::Agent {
    crate::net::agent_via(
        url,
        crate::net::Timeouts {
            connect: Some(timeout),
            response: Some(timeout),
            per_read: Some(timeout),
            global: Some(timeout * 2),
        },
        crate::net::proxy_for_in(url, env).as_deref(),
    )
}

/// The status and text (at most 1 MiB) of a reply.
fn read_reply(
    url: &str,
    resp: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<(u16, String), OAuthError> {
    let http = |source| OAuthError::Http {
        url: url.to_string(),
        source,
    };
    let resp = resp.map_err(http)?;
    let status = resp.status().as_u16();
    let text = resp
        .into_body()
        .with_config()
        .limit(1024 * 1024)
        .read_to_string()
        .map_err(http)?;
    Ok((status, text))
}

fn get_json(agent: &ureq::Agent, url: &str) -> Result<Value, OAuthError> {
    let (status, text) = read_reply(
        url,
        agent.get(url).header("accept", "application/json").call(),
    )?;
    if !(200..300).contains(&status) {
        return Err(OAuthError::Status {
            url: url.to_string(),
            status,
            body: None,
        });
    }
    serde_json::from_str::<Value>(&text)
        .ok()
        .filter(Value::is_object)
        .ok_or_else(|| OAuthError::NotJson(url.to_string()))
}

/// POSTs a form (or JSON) and returns the JSON answer; an OAuth error answer is the error.
fn post(agent: &ureq::Agent, url: &str, body: Body) -> Result<Value, OAuthError> {
    let rb = agent.post(url).header("accept", "application/json");
    let resp = match body {
        Body::Form(f) => rb
            .header("content-type", "application/x-www-form-urlencoded")
            .send(f.as_bytes()),
        Body::Json(v) => rb
            .header("content-type", "application/json")
            .send(v.to_string().as_bytes()),
    };
    let (status, text) = read_reply(url, resp)?;
    let v = serde_json::from_str::<Value>(&text).unwrap_or(Value::Null);
    if let Some(err) = v.get("error").and_then(Value::as_str) {
        return Err(OAuthError::Refused {
            error: err.to_string(),
            description: v
                .get("error_description")
                .and_then(Value::as_str)
                .map(str::to_string),
        });
    }
    if !(200..300).contains(&status) || !v.is_object() {
        return Err(OAuthError::Status {
            url: url.to_string(),
            status,
            body: Some(text.chars().take(200).collect()),
        });
    }
    Ok(v)
}

enum Body {
    Form(String),
    Json(Value),
}

/// The parameters of a `WWW-Authenticate: Bearer k="v", ...` challenge.
pub(crate) fn challenge_param(header: &str, key: &str) -> Option<String> {
    let mut rest = header.trim();
    if let Some(r) = rest
        .get(..6)
        .filter(|s| s.eq_ignore_ascii_case("bearer"))
        .map(|_| &rest[6..])
    {
        rest = r;
    }
    loop {
        rest = rest.trim_start_matches([' ', ',']);
        if rest.is_empty() {
            return None;
        }
        let eq = rest.find('=')?;
        let k = rest[..eq].trim();
        let after = &rest[eq + 1..];
        let (v, tail) = if let Some(q) = after.strip_prefix('"') {
            let end = q.find('"').unwrap_or(q.len());
            (&q[..end], q.get(end + 1..).unwrap_or(""))
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim(), &after[end..])
        };
        if k.eq_ignore_ascii_case(key) {
            return Some(v.to_string());
        }
        rest = tail;
    }
}

/// The endpoints of an authorization server.
#[derive(Clone, Debug, Default, PartialEq)]
struct ServerMeta {
    issuer: Option<String>,
    authorization_endpoint: String,
    token_endpoint: String,
    registration_endpoint: Option<String>,
}

/// `origin/.well-known/NAME/path`, then `origin/.well-known/NAME` (RFC 8414/9728 path rules).
fn well_known(base: &Url, name: &str) -> Vec<String> {
    let path = base.path.trim_end_matches('/');
    let mut out = Vec::new();
    if !path.is_empty() {
        out.push(format!("{}/.well-known/{name}{path}", base.origin()));
    }
    out.push(format!("{}/.well-known/{name}", base.origin()));
    out
}

/// What discovery found for one MCP server.
struct Discovered {
    meta: ServerMeta,
    resource: String,
    scope: Option<String>,
}

fn discover(agent: &ureq::Agent, server_url: &str) -> Result<Discovered, OAuthError> {
    let base = Url::parse(server_url)
        .ok_or_else(|| OAuthError::Flow(format!("not an URL: {server_url}")))?;
    // The challenge of an unauthorized request names the metadata and the scope.
    let probe = agent
        .post(server_url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": super::LEGACY_LATEST, "capabilities": {},
                "clientInfo": super::client_info()}})
            .to_string()
            .as_bytes(),
        );
    let www = probe.ok().and_then(|r| {
        r.headers()
            .get("www-authenticate")
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    });
    let mut candidates = Vec::new();
    if let Some(u) = www
        .as_deref()
        .and_then(|w| challenge_param(w, "resource_metadata"))
    {
        candidates.push(u);
    }
    candidates.extend(well_known(&base, "oauth-protected-resource"));
    let prm = candidates.iter().find_map(|u| get_json(agent, u).ok());
    let scope = www
        .as_deref()
        .and_then(|w| challenge_param(w, "scope"))
        .or_else(|| {
            prm.as_ref()?
                .get("scopes_supported")?
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .filter(|s| !s.is_empty())
        });
    let resource = prm
        .as_ref()
        .and_then(|p| p.get("resource").and_then(Value::as_str))
        .map(str::to_string)
        .unwrap_or_else(|| base.full().trim_end_matches('/').to_string());
    let issuer = prm
        .as_ref()
        .and_then(|p| {
            p.get("authorization_servers")?
                .as_array()?
                .first()?
                .as_str()
        })
        .map(str::to_string);
    let issuer_url = match &issuer {
        Some(i) => Url::parse(i)
            .ok_or_else(|| OAuthError::Flow(format!("bad authorization server URL: {i}")))?,
        // Before protected-resource metadata, the MCP server's origin was the issuer.
        None => Url::parse(&base.origin()).ok_or(OAuthError::Flow("bad server URL".into()))?,
    };
    let mut urls = well_known(&issuer_url, "oauth-authorization-server");
    urls.extend(well_known(&issuer_url, "openid-configuration"));
    if !issuer_url.path.trim_end_matches('/').is_empty() {
        urls.push(format!(
            "{}/.well-known/openid-configuration",
            issuer_url.full().trim_end_matches('/')
        ));
    }
    let meta = match urls.iter().find_map(|u| get_json(agent, u).ok()) {
        Some(m) => {
            let s = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
            let authorization_endpoint = s("authorization_endpoint").ok_or(OAuthError::Flow(
                "the authorization server metadata has no authorization_endpoint".into(),
            ))?;
            browser_host(&authorization_endpoint).map_err(OAuthError::NotWeb)?;
            ServerMeta {
                issuer: s("issuer"),
                authorization_endpoint,
                token_endpoint: s("token_endpoint").ok_or(OAuthError::Flow(
                    "the authorization server metadata has no token_endpoint".into(),
                ))?,
                registration_endpoint: s("registration_endpoint"),
            }
        }
        None if issuer.is_none() => {
            let o = issuer_url.origin();
            ServerMeta {
                issuer: None,
                authorization_endpoint: format!("{o}/authorize"),
                token_endpoint: format!("{o}/token"),
                registration_endpoint: Some(format!("{o}/register")),
            }
        }
        None => {
            return Err(OAuthError::Flow(format!(
                "no authorization server metadata found for {}",
                issuer_url.full()
            )));
        }
    };
    Ok(Discovered {
        meta,
        resource,
        scope,
    })
}

/// Binds the callback listeners (`localhost` may resolve to either loopback address): the
/// configured port, else the first free one of Go Crush's.
fn bind_callback(port: Option<u16>) -> Result<(Vec<TcpListener>, u16), OAuthError> {
    let ports: Vec<u16> = match port {
        Some(p) => vec![p],
        None => CALLBACK_PORTS.collect(),
    };
    for p in &ports {
        if let Ok(l) = TcpListener::bind(("127.0.0.1", *p)) {
            let mut all = vec![l];
            all.extend(TcpListener::bind(("::1", *p)).ok());
            return Ok((all, *p));
        }
    }
    Err(OAuthError::Flow(match port {
        Some(p) => format!("cannot listen on 127.0.0.1:{p} for the OAuth callback"),
        None => "no free port for the OAuth callback (40704-40713 are all taken)".into(),
    }))
}

/// Waits for the browser to come back to the callback; answers it with a short page.
fn await_callback(
    listeners: &[TcpListener],
    deadline: Instant,
    timeout: Duration,
) -> Result<String, OAuthError> {
    for l in listeners {
        l.set_nonblocking(true).map_err(OAuthError::Listener)?;
    }
    loop {
        for l in listeners {
            match l.accept() {
                Ok((stream, _)) => {
                    if let Some(query) = serve_callback(stream, timeout) {
                        return Ok(query);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(OAuthError::Listener(e)),
            }
        }
        if Instant::now() >= deadline {
            return Err(OAuthError::Flow(
                "no answer from the browser in time".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Reads one request; Some(query) when it was the callback.
fn serve_callback(mut stream: TcpStream, timeout: Duration) -> Option<String> {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(timeout));
    let mut line = String::new();
    let mut r = BufReader::new(stream.try_clone().ok()?);
    r.read_line(&mut line).ok()?;
    loop {
        let mut h = String::new();
        match r.read_line(&mut h) {
            Ok(0) | Err(_) => break,
            Ok(_) if h.trim().is_empty() => break,
            Ok(_) => {}
        }
    }
    let target = line.split_whitespace().nth(1).unwrap_or("");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path != CALLBACK_PATH {
        let _ = stream
            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        return None;
    }
    let body = if query_value(query, "error").is_some() {
        "<!doctype html><title>crush</title><p>Authorization failed. You can close this tab."
    } else {
        "<!doctype html><title>crush</title><p>Authorization complete. You can close this tab \
         and go back to crush."
    };
    let _ = stream.write_all(
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
    Some(query.to_string())
}

/// A token as kept: what using and refreshing it needs.
fn token_record(
    resp: &Value,
    meta: &ServerMeta,
    client_id: &str,
    client_secret: Option<&str>,
    resource: &str,
    previous_refresh: Option<&str>,
) -> Result<Value, OAuthError> {
    let access = resp
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or(OAuthError::Flow(
            "the token endpoint answered without an access_token".into(),
        ))?;
    let expires_at = resp
        .get("expires_in")
        .and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))
        .map(|s| crate::time::unix_now() + s);
    let refresh = resp
        .get("refresh_token")
        .and_then(Value::as_str)
        .or(previous_refresh);
    Ok(json!({
        "access_token": access,
        "refresh_token": refresh,
        "expires_at": expires_at,
        "scope": resp.get("scope"),
        "client_id": client_id,
        "client_secret": client_secret,
        "token_url": meta.token_endpoint,
        "auth_url": meta.authorization_endpoint,
        "issuer": meta.issuer,
        "resource": resource,
    }))
}

/// How one login goes: who the client is, where tokens go, how the browser is opened, how long
/// each request (`timeout`) and the browser (`wait`) may take.
pub(crate) struct Login<'a> {
    pub client: &'a ClientConfig,
    pub store: &'a dyn TokenStore,
    pub open: &'a dyn Fn(&str),
    pub timeout: Duration,
    pub wait: Duration,
    /// The session's variables (the proxy).
    pub env: &'a crate::env::Overlay,
}

/// Runs the authorization code flow for `server` at `url` and keeps the token. `open` is given
/// the authorization URL (to open a browser and show it).
pub(crate) fn login(server: &str, url: &str, l: &Login) -> Result<(), OAuthError> {
    let (client, store) = (l.client, l.store);
    let agent = agent(l.timeout, url, l.env);
    let d = discover(&agent, url)?;
    let (listeners, port) = bind_callback(client.callback_port)?;
    let redirect = format!("http://localhost:{port}{CALLBACK_PATH}");
    // Client credentials belong to the authorization server that issued them.
    let saved = store.load(server);
    let saved_client = saved.as_ref().filter(|t| {
        t.get("issuer").and_then(Value::as_str) == d.meta.issuer.as_deref()
            && t.get("token_url").and_then(Value::as_str) == Some(d.meta.token_endpoint.as_str())
    });
    let (client_id, client_secret) = match (&client.client_id, saved_client) {
        (Some(id), _) if !id.trim().is_empty() => (
            id.trim().to_string(),
            client.client_secret.clone().filter(|s| !s.is_empty()),
        ),
        (_, Some(t)) if t.get("client_id").and_then(Value::as_str).is_some() => (
            t["client_id"].as_str().unwrap_or_default().to_string(),
            t.get("client_secret")
                .and_then(Value::as_str)
                .map(str::to_string),
        ),
        _ => {
            let reg = d.meta.registration_endpoint.as_deref().ok_or_else(|| {
                OAuthError::Flow(format!(
                    "the authorization server of {url} does not register clients dynamically: \
                     register an OAuth app with it and set oauth_client_id (and \
                     oauth_client_secret if it needs one) for MCP server '{server}'"
                ))
            })?;
            let r = post(
                &agent,
                reg,
                Body::Json(json!({
                    "client_name": "Crush",
                    "redirect_uris": [redirect],
                    "grant_types": ["authorization_code", "refresh_token"],
                    "response_types": ["code"],
                    "token_endpoint_auth_method": "none",
                    "application_type": "native",
                })),
            )
            .map_err(|e| OAuthError::Registration(Box::new(e)))?;
            let id = r
                .get("client_id")
                .and_then(Value::as_str)
                .ok_or(OAuthError::Flow(
                    "client registration answered without a client_id".into(),
                ))?;
            (
                id.to_string(),
                r.get("client_secret")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            )
        }
    };
    let verifier = base64url(&random_bytes(32));
    let challenge = base64url(&crate::sha256::digest(verifier.as_bytes()));
    let state = base64url(&random_bytes(16));
    let mut params = vec![
        ("response_type", "code"),
        ("client_id", client_id.as_str()),
        ("redirect_uri", redirect.as_str()),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("state", state.as_str()),
        ("resource", d.resource.as_str()),
    ];
    if let Some(s) = &d.scope {
        params.push(("scope", s.as_str()));
    }
    let sep = if d.meta.authorization_endpoint.contains('?') {
        '&'
    } else {
        '?'
    };
    let auth_url = format!("{}{sep}{}", d.meta.authorization_endpoint, form(&params));
    (l.open)(&auth_url);
    let query = await_callback(&listeners, Instant::now() + l.wait, l.timeout)?;
    if let Some(e) = query_value(&query, "error") {
        let desc = query_value(&query, "error_description")
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        return Err(OAuthError::Flow(format!(
            "the authorization server refused: {e}{desc}"
        )));
    }
    if query_value(&query, "state").as_deref() != Some(state.as_str()) {
        return Err(OAuthError::Flow(
            "the callback's state does not match this login".into(),
        ));
    }
    if let (Some(iss), Some(expected)) = (query_value(&query, "iss"), &d.meta.issuer)
        && &iss != expected
    {
        return Err(OAuthError::Flow(format!(
            "the callback came from issuer {iss}, not {expected}"
        )));
    }
    let code = query_value(&query, "code")
        .ok_or(OAuthError::Flow("the callback carried no code".into()))?;
    let mut fields = vec![
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", redirect.as_str()),
        ("client_id", client_id.as_str()),
        ("code_verifier", verifier.as_str()),
        ("resource", d.resource.as_str()),
    ];
    if let Some(s) = &client_secret {
        fields.push(("client_secret", s.as_str()));
    }
    let resp = post(&agent, &d.meta.token_endpoint, Body::Form(form(&fields)))
        .map_err(|e| OAuthError::Exchange(Box::new(e)))?;
    let record = token_record(
        &resp,
        &d.meta,
        &client_id,
        client_secret.as_deref(),
        &d.resource,
        None,
    )?;
    store.save(server, Some(&record));
    Ok(())
}

/// The kept token of one server, used and refreshed by its HTTP transport.
pub(crate) struct Session {
    server: String,
    store: Arc<dyn TokenStore>,
    token: Mutex<Option<Value>>,
    timeout: Duration,
    env: crate::env::Overlay,
}

impl Session {
    /// The session of `server`'s kept token; None when there is none.
    pub(crate) fn load(
        server: &str,
        store: Arc<dyn TokenStore>,
        timeout: Duration,
        env: &crate::env::Overlay,
    ) -> Option<Arc<Session>> {
        let token = store
            .load(server)
            .filter(|t| t.get("access_token").and_then(Value::as_str).is_some())?;
        Some(Arc::new(Session {
            server: server.to_string(),
            store,
            token: Mutex::new(Some(token)),
            timeout,
            env: env.clone(),
        }))
    }

    /// Trades the refresh token for a new access token; a refusal forgets the token.
    fn refresh_locked(&self, token: &mut Option<Value>) -> Option<String> {
        let t = token.as_ref()?;
        let s = |k: &str| t.get(k).and_then(Value::as_str).map(str::to_string);
        let (refresh, url, client_id) = (s("refresh_token")?, s("token_url")?, s("client_id")?);
        let secret = s("client_secret");
        let resource = s("resource").unwrap_or_default();
        let mut fields = vec![
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh.as_str()),
            ("client_id", client_id.as_str()),
        ];
        if !resource.is_empty() {
            fields.push(("resource", resource.as_str()));
        }
        if let Some(sec) = &secret {
            fields.push(("client_secret", sec.as_str()));
        }
        match post(
            &agent(self.timeout, &url, &self.env),
            &url,
            Body::Form(form(&fields)),
        ) {
            Ok(resp) => {
                let meta = ServerMeta {
                    issuer: s("issuer"),
                    authorization_endpoint: s("auth_url").unwrap_or_default(),
                    token_endpoint: url.clone(),
                    registration_endpoint: None,
                };
                let rec = token_record(
                    &resp,
                    &meta,
                    &client_id,
                    secret.as_deref(),
                    &resource,
                    Some(&refresh),
                )
                .ok()?;
                self.store.save(&self.server, Some(&rec));
                let access = rec["access_token"].as_str().map(str::to_string);
                *token = Some(rec);
                access
            }
            Err(e) => {
                crate::log::warn(&format!(
                    "MCP server '{}': the token could not be refreshed: {e}",
                    self.server
                ));
                if matches!(&e, OAuthError::Refused { error, .. }
                    if error.starts_with("invalid_grant") || error.starts_with("invalid_client"))
                {
                    self.store.save(&self.server, None);
                    *token = None;
                }
                None
            }
        }
    }
}

impl Credentials for Session {
    fn token(&self) -> Option<String> {
        let mut g = self.token.lock().unwrap_or_else(|e| e.into_inner());
        let t = g.as_ref()?;
        let expired = t
            .get("expires_at")
            .and_then(Value::as_i64)
            .is_some_and(|at| at - EXPIRY_MARGIN <= crate::time::unix_now());
        if expired && t.get("refresh_token").and_then(Value::as_str).is_some() {
            return self.refresh_locked(&mut g);
        }
        t.get("access_token")
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    fn refresh(&self, refused: &str) -> Option<String> {
        let mut g = self.token.lock().unwrap_or_else(|e| e.into_inner());
        let current = g
            .as_ref()
            .and_then(|t| t.get("access_token").and_then(Value::as_str))
            .map(str::to_string);
        // Another request refreshed it meanwhile.
        if current.as_deref().is_some_and(|c| c != refused) {
            return current;
        }
        self.refresh_locked(&mut g)
    }
}

pub(crate) use crate::login::browser::{browser_host, open_browser};

/// Why an OAuth login (or a token refresh) did not give a token.
#[derive(Debug)]
pub(crate) enum OAuthError {
    /// A request that could not be made or read.
    Http { url: String, source: ureq::Error },
    /// An answer with a status other than 2xx (and the start of its body, where it matters).
    Status {
        url: String,
        status: u16,
        body: Option<String>,
    },
    /// An answer that is not a JSON object.
    NotJson(String),
    /// The server's OAuth error answer (`error`, `error_description`).
    Refused {
        error: String,
        description: Option<String>,
    },
    /// An authorization endpoint that is no web URL.
    NotWeb(crate::login::browser::NotWebUrl),
    /// The callback listener failed.
    Listener(std::io::Error),
    /// Dynamic client registration failed.
    Registration(Box<OAuthError>),
    /// The code could not be traded for a token.
    Exchange(Box<OAuthError>),
    /// A step of the flow that went wrong; says which.
    Flow(String),
}

impl fmt::Display for OAuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OAuthError::Http { url, source } => write!(f, "{url}: {source}"),
            OAuthError::Status {
                url,
                status,
                body: None,
            } => write!(f, "{url}: HTTP {status}"),
            OAuthError::Status {
                url,
                status,
                body: Some(b),
            } => write!(f, "{url}: HTTP {status} {b}"),
            OAuthError::NotJson(url) => write!(f, "{url}: not a JSON object"),
            OAuthError::Refused {
                error,
                description: None,
            } => f.write_str(error),
            OAuthError::Refused {
                error,
                description: Some(d),
            } => write!(f, "{error}: {d}"),
            OAuthError::NotWeb(e) => e.fmt(f),
            OAuthError::Listener(e) => write!(f, "callback listener: {e}"),
            OAuthError::Registration(e) => write!(f, "client registration failed: {e}"),
            OAuthError::Exchange(e) => write!(f, "the code exchange failed: {e}"),
            OAuthError::Flow(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for OAuthError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OAuthError::Http { source, .. } => Some(source),
            OAuthError::NotWeb(e) => Some(e),
            OAuthError::Listener(e) => Some(e),
            OAuthError::Registration(e) | OAuthError::Exchange(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_are_parsed() {
        let h = r#"Bearer realm="mcp", resource_metadata="https://x/.well-known/oauth-protected-resource/mcp", scope="read write", error=invalid_token"#;
        assert_eq!(
            challenge_param(h, "resource_metadata").unwrap(),
            "https://x/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(challenge_param(h, "scope").unwrap(), "read write");
        assert_eq!(challenge_param(h, "error").unwrap(), "invalid_token");
        assert_eq!(challenge_param(h, "missing"), None);
    }

    #[test]
    fn only_http_urls_go_to_the_browser() {
        assert_eq!(
            browser_host("https://Login.Example:8443/authorize?x=1").unwrap(),
            "login.example:8443"
        );
        assert_eq!(browser_host("http://127.0.0.1/a").unwrap(), "127.0.0.1");
        for bad in [
            "file:///etc/passwd",
            "javascript:alert(1)",
            "ms-settings://x",
            "/authorize",
            "-x https://a",
        ] {
            let e = browser_host(bad).unwrap_err().to_string();
            assert!(e.contains("not an http or https URL"), "{bad}: {e}");
        }
        let e = open_browser("file:///etc/passwd", std::path::Path::new("/"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("file:///etc/passwd"), "{e}");
    }

    #[test]
    fn well_known_urls_insert_the_path() {
        let u = Url::parse("https://as.example/tenant1").unwrap();
        assert_eq!(
            well_known(&u, "oauth-authorization-server"),
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant1",
                "https://as.example/.well-known/oauth-authorization-server"
            ]
        );
        let u = Url::parse("https://as.example").unwrap();
        assert_eq!(well_known(&u, "x"), ["https://as.example/.well-known/x"]);
    }

    #[test]
    fn token_records_keep_what_refreshing_needs() {
        let meta = ServerMeta {
            issuer: Some("https://as".into()),
            authorization_endpoint: "https://as/authorize".into(),
            token_endpoint: "https://as/token".into(),
            registration_endpoint: None,
        };
        let r = token_record(
            &json!({"access_token": "a", "expires_in": 60}),
            &meta,
            "cid",
            None,
            "https://mcp",
            Some("old-refresh"),
        )
        .unwrap();
        assert_eq!(r["refresh_token"], "old-refresh");
        assert_eq!(r["token_url"], "https://as/token");
        assert!(r["expires_at"].as_i64().unwrap() > crate::time::unix_now());
        assert!(token_record(&json!({}), &meta, "c", None, "r", None).is_err());
    }
}
