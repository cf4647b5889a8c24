//! Where AWS credentials and the region come from, in the order AWS's own tools look (crush(1)
//! CONFIGURATION, Amazon Bedrock): `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN`;
//! then the profile (`AWS_PROFILE`, else `default`) of `~/.aws/config` and `~/.aws/credentials` —
//! IAM Identity Center (SSO) through the token `aws sso login` caches, static keys,
//! `credential_process`, or a role (`role_arn`) assumed at AWS STS with the credentials of a
//! `source_profile`, a `credential_source` or a `web_identity_token_file`; then `AWS_ROLE_ARN`
//! with `AWS_WEB_IDENTITY_TOKEN_FILE`; then a container's credentials endpoint; then the EC2
//! instance's role (instance metadata). Resolved credentials are kept
//! until five minutes before they expire, or until `forget` (after the service refused them).

use super::sigv4::Credentials;
use crate::env::Overlay;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Credentials, where they came from (for messages), and when they expire (Unix seconds).
#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    pub creds: Credentials,
    pub source: String,
    pub expires: Option<i64>,
}

/// Why no credentials could be had. `refreshable`: signing in again (`aws sso login`, the
/// provider's `aws_auth_refresh`) may fix it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CredError {
    pub message: String,
    pub refreshable: bool,
}

impl CredError {
    fn fatal(message: String) -> CredError {
        CredError {
            message,
            refreshable: false,
        }
    }
    fn refreshable(message: String) -> CredError {
        CredError {
            message,
            refreshable: true,
        }
    }
}

/// How long the outside helpers may take.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Limits {
    /// A profile's `credential_process`.
    pub process: Duration,
    /// One HTTP call (the SSO portal, a container's credentials endpoint).
    pub http: Duration,
}

impl Limits {
    /// Every HTTP timeout at `http`.
    fn http_timeouts(&self) -> crate::net::Timeouts {
        crate::net::Timeouts {
            connect: Some(self.http),
            response: Some(self.http),
            per_read: Some(self.http),
            global: Some(self.http),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            process: Duration::from_secs(120),
            http: Duration::from_secs(30),
        }
    }
}

thread_local! {
    /// The session's variables (its `.env` and `env` map, `env::Overlay`) while one of this
    /// module's entry points runs on this thread: `var` reads them before the process's.
    static SESSION_ENV: std::cell::RefCell<Overlay> = std::cell::RefCell::new(Overlay::default());
}

/// Runs `f` with `env` as the session's variables; the previous ones are back afterwards.
fn scoped<T>(env: &Overlay, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Overlay>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(prev) = self.0.take() {
                SESSION_ENV.with(|e| *e.borrow_mut() = prev);
            }
        }
    }
    let _restore = Restore(Some(SESSION_ENV.with(|e| e.replace(env.clone()))));
    f()
}

fn var(name: &str) -> Option<String> {
    SESSION_ENV
        .with(|e| e.borrow().var(name))
        .filter(|v| !v.trim().is_empty())
}

fn home() -> PathBuf {
    var("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from)
}

/// `AWS_CONFIG_FILE`, else `~/.aws/config`.
fn config_file() -> PathBuf {
    var("AWS_CONFIG_FILE").map_or_else(|| home().join(".aws").join("config"), PathBuf::from)
}

/// `AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`.
fn credentials_file() -> PathBuf {
    var("AWS_SHARED_CREDENTIALS_FILE")
        .map_or_else(|| home().join(".aws").join("credentials"), PathBuf::from)
}

/// The profile in use: `AWS_PROFILE`, else `AWS_DEFAULT_PROFILE`, else `default`.
pub(crate) fn profile_name() -> String {
    var("AWS_PROFILE")
        .or_else(|| var("AWS_DEFAULT_PROFILE"))
        .unwrap_or_else(|| "default".into())
}

/// Whether anything that can give credentials is set up (the variables, the session's `env`
/// first, a profile, the shared files): a catalog Bedrock provider is offered only then. Looks
/// at files without reading them.
pub(crate) fn configured(env: &Overlay) -> bool {
    scoped(env, configured_here)
}

fn configured_here() -> bool {
    [
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
    ]
    .iter()
    .chain(&[
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        // On an EC2 instance the role needs nothing set up but a region.
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    ])
    .any(|v| var(v).is_some())
        || (var("AWS_ACCESS_KEY_ID").is_some() && var("AWS_SECRET_ACCESS_KEY").is_some())
        || credentials_file().is_file()
        || config_file().is_file()
}

type Sections = BTreeMap<String, BTreeMap<String, String>>;

/// The sections of an INI file as AWS writes them (`[name]`, `key = value`, `#`/`;` comments;
/// indented lines continue a nested block and are skipped).
fn parse_ini(text: &str) -> Sections {
    let mut out = Sections::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let l = line.trim();
        if l.is_empty() || l.starts_with(['#', ';']) {
            continue;
        }
        if let Some(name) = l.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
            out.entry(name.clone()).or_default();
            current = Some(name);
        } else if let (Some(sec), Some((k, v))) = (&current, l.split_once('=')) {
            let v = v.trim();
            if !v.is_empty() {
                out.entry(sec.clone())
                    .or_default()
                    .insert(k.trim().to_ascii_lowercase(), v.to_string());
            }
        }
    }
    out
}

fn read_ini(p: &Path) -> Sections {
    std::fs::read_to_string(p)
        .map(|t| parse_ini(&t))
        .unwrap_or_default()
}

/// One profile: the config file's section, with the credentials file's values over it.
struct Profile {
    name: String,
    values: BTreeMap<String, String>,
    /// Keys the credentials file set.
    from_credentials: Vec<String>,
    config: Sections,
}

impl Profile {
    fn get(&self, k: &str) -> Option<&str> {
        self.values.get(k).map(String::as_str)
    }
}

fn load_profile(name: &str) -> Option<Profile> {
    let config = read_ini(&config_file());
    let creds = read_ini(&credentials_file());
    let section = if name == "default" {
        config
            .get("default")
            .or_else(|| config.get("profile default"))
    } else {
        config.get(&format!("profile {name}"))
    };
    let mut values = section.cloned().unwrap_or_default();
    let mut from_credentials = Vec::new();
    if let Some(c) = creds.get(name) {
        for (k, v) in c {
            values.insert(k.clone(), v.clone());
            from_credentials.push(k.clone());
        }
    }
    if section.is_none() && !creds.contains_key(name) {
        return None;
    }
    Some(Profile {
        name: name.to_string(),
        values,
        from_credentials,
        config,
    })
}

/// The region: `AWS_REGION`, else `AWS_DEFAULT_REGION`, else the profile's `region` (the
/// session's variables `env` first).
pub(crate) fn region(env: &Overlay) -> Option<String> {
    scoped(env, region_here)
}

fn region_here() -> Option<String> {
    var("AWS_REGION")
        .or_else(|| var("AWS_DEFAULT_REGION"))
        .or_else(|| {
            load_profile(&profile_name())?
                .get("region")
                .map(str::to_string)
        })
}

fn cache() -> &'static Mutex<HashMap<String, Resolved>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Resolved>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Drops the credentials kept so far: the next `resolve` looks again.
pub(crate) fn forget() {
    cache().lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// The credentials to sign with now, from the session's variables `env` first, then crush's
/// environment; a `credential_process` gets `env` on top of crush's environment.
pub(crate) fn resolve(limits: &Limits, env: &Overlay) -> Result<Resolved, CredError> {
    scoped(env, || resolve_here(limits))
}

fn resolve_here(limits: &Limits) -> Result<Resolved, CredError> {
    if let (Some(id), Some(secret)) = (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) {
        return Ok(Resolved {
            creds: Credentials {
                access_key_id: id,
                secret_access_key: secret,
                session_token: var("AWS_SESSION_TOKEN"),
            },
            source: "the environment (AWS_ACCESS_KEY_ID)".into(),
            expires: None,
        });
    }
    let name = profile_name();
    let key = format!("{name}\0{}", config_file().display());
    let now = crate::time::unix_now();
    if let Some(r) = cache().lock().unwrap_or_else(|e| e.into_inner()).get(&key)
        && r.expires.is_none_or(|e| e - now > 300)
    {
        return Ok(r.clone());
    }
    let r = resolve_uncached(&name, limits)?;
    cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, r.clone());
    Ok(r)
}

fn resolve_uncached(name: &str, limits: &Limits) -> Result<Resolved, CredError> {
    let explicit = var("AWS_PROFILE").or_else(|| var("AWS_DEFAULT_PROFILE"));
    match load_profile(name) {
        Some(p) => from_profile(&p, limits),
        None if explicit.is_some() => Err(CredError::fatal(format!(
            "AWS profile '{name}' (AWS_PROFILE) is in neither {} nor {}",
            config_file().display(),
            credentials_file().display()
        ))),
        None => match web_identity_from_env(limits)
            .or_else(|| container_credentials(limits))
            .or_else(|| instance_credentials(limits).ok().map(Ok))
        {
            Some(r) => r,
            None => Err(CredError::fatal(
                "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE \
                 (a profile of ~/.aws/config or ~/.aws/credentials), or AWS_BEARER_TOKEN_BEDROCK, \
                 or AWS_ROLE_ARN with AWS_WEB_IDENTITY_TOKEN_FILE"
                    .into(),
            )),
        },
    }
}

fn from_profile(p: &Profile, limits: &Limits) -> Result<Resolved, CredError> {
    from_profile_in(p, limits, &mut Vec::new())
}

/// `from_profile`, `chain` holding the profiles whose role is being assumed (a loop of
/// `source_profile` is an error, not a hang).
fn from_profile_in(
    p: &Profile,
    limits: &Limits,
    chain: &mut Vec<String>,
) -> Result<Resolved, CredError> {
    if let Some(role) = p.get("role_arn") {
        return assume_role(p, role, limits, chain);
    }
    own_credentials(p, limits)
}

/// A profile's own credentials: SSO, static keys, `credential_process`.
fn own_credentials(p: &Profile, limits: &Limits) -> Result<Resolved, CredError> {
    let name = &p.name;
    let static_keys = |creds_file: bool| -> Option<Resolved> {
        let id = p.get("aws_access_key_id")?;
        let secret = p.get("aws_secret_access_key")?;
        let in_creds = p.from_credentials.iter().any(|k| k == "aws_access_key_id");
        if in_creds != creds_file {
            return None;
        }
        let file = if creds_file {
            credentials_file()
        } else {
            config_file()
        };
        Some(Resolved {
            creds: Credentials {
                access_key_id: id.to_string(),
                secret_access_key: secret.to_string(),
                session_token: p.get("aws_session_token").map(str::to_string),
            },
            source: format!("profile '{name}' of {}", file.display()),
            expires: None,
        })
    };
    if p.get("sso_session").is_some() || p.get("sso_start_url").is_some() {
        return sso(p, limits);
    }
    if let Some(r) = static_keys(true) {
        return Ok(r);
    }
    if let Some(cmd) = p.get("credential_process") {
        return process(name, cmd, limits);
    }
    if let Some(r) = static_keys(false) {
        return Ok(r);
    }
    Err(CredError::fatal(format!(
        "AWS profile '{name}' has no credentials (no aws_access_key_id, credential_process or \
         SSO settings)"
    )))
}

/// Credentials from the JSON AWS's helpers print (`AccessKeyId`, `SecretAccessKey`,
/// `SessionToken` or `Token`, `Expiration` as RFC 3339).
fn from_json(v: &Value) -> Option<(Credentials, Option<i64>)> {
    let s = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    let creds = Credentials {
        access_key_id: s("AccessKeyId")?.to_string(),
        secret_access_key: s("SecretAccessKey")?.to_string(),
        session_token: s("SessionToken").or_else(|| s("Token")).map(str::to_string),
    };
    let expires = s("Expiration").and_then(parse_time);
    Some((creds, expires))
}

/// RFC 3339, or the `…UTC` form older AWS CLIs write.
fn parse_time(s: &str) -> Option<i64> {
    let s = s.trim();
    let fixed = match s.strip_suffix("UTC") {
        Some(head) => format!("{head}Z"),
        None => s.to_string(),
    };
    crate::time::parse_rfc3339(&fixed).map(|(secs, _)| secs)
}

fn process(name: &str, cmd: &str, limits: &Limits) -> Result<Resolved, CredError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let mut spec = crate::proc::Spec::shell(cmd, cwd);
    spec.env = SESSION_ENV.with(|e| e.borrow().vars());
    spec.timeout = Some(limits.process);
    spec.output_cap = 64 * 1024;
    let what = format!("the credential_process of AWS profile '{name}'");
    let out =
        crate::proc::run(&spec).map_err(|e| CredError::fatal(format!("cannot run {what}: {e}")))?;
    if out.timed_out {
        return Err(CredError::fatal(format!(
            "{what} did not finish within {} s",
            limits.process.as_secs()
        )));
    }
    if !out.success() {
        let err = out.stderr_text();
        return Err(CredError::refreshable(format!(
            "{what} failed (exit {}): {}",
            out.code(),
            first_line(&err)
        )));
    }
    let v: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| CredError::fatal(format!("{what} printed something other than JSON: {e}")))?;
    if v.get("Version").and_then(Value::as_u64) != Some(1) {
        return Err(CredError::fatal(format!(
            "{what} printed JSON without \"Version\": 1"
        )));
    }
    let (creds, expires) = from_json(&v).ok_or_else(|| {
        CredError::fatal(format!("{what} printed no AccessKeyId and SecretAccessKey"))
    })?;
    Ok(Resolved {
        creds,
        source: what,
        expires,
    })
}

fn first_line(s: &str) -> String {
    let l = s
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    l.chars().take(300).collect()
}

/// The endpoint of an AWS service: `AWS_ENDPOINT_URL_<SERVICE>`, else `AWS_ENDPOINT_URL`, else
/// `default` (AWS's own way to point its tools elsewhere).
/// The session's variables `env` come first.
pub(crate) fn endpoint_override(service_env: &str, env: &Overlay) -> Option<String> {
    scoped(env, || endpoint_here(service_env))
}

/// `endpoint_override` with the variables of the entry point running.
fn endpoint_here(service_env: &str) -> Option<String> {
    var(&format!("AWS_ENDPOINT_URL_{service_env}")).or_else(|| var("AWS_ENDPOINT_URL"))
}

/// One HTTP call: `method` to `url` with `headers` and, for a POST or PUT, `body` (content type,
/// bytes). The status and the reply's text (at most 1 MiB).
fn call(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<(&str, &[u8])>,
    t: crate::net::Timeouts,
) -> Result<(u16, String), ureq::Error> {
    let agent = crate::net::agent(url, t);
    let resp = match method {
        "GET" => {
            let mut rb = agent.get(url);
            for (k, v) in headers {
                rb = rb.header(*k, *v);
            }
            rb.call()
        }
        _ => {
            let mut rb = if method == "PUT" {
                agent.put(url)
            } else {
                agent.post(url)
            };
            for (k, v) in headers {
                rb = rb.header(*k, *v);
            }
            match body {
                Some((kind, bytes)) => rb.header("content-type", kind).send(bytes),
                None => rb.send_empty(),
            }
        }
    }?;
    let status = resp.status().as_u16();
    let text = resp
        .into_body()
        .with_config()
        .limit(1024 * 1024)
        .read_to_string()?;
    Ok((status, text))
}

/// One JSON call (GET, or POST of `body`): the status and the reply (Null when not JSON).
fn call_json(
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
    limits: &Limits,
) -> Result<(u16, Value), ureq::Error> {
    let body = body.map(Value::to_string);
    let (method, sent) = match &body {
        Some(b) => ("POST", Some(("application/json", b.as_bytes()))),
        None => ("GET", None),
    };
    let (status, text) = call(method, url, headers, sent, limits.http_timeouts())?;
    Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

/// IAM Identity Center: the access token `aws sso login` cached, exchanged for role
/// credentials at the SSO portal (GetRoleCredentials).
fn sso(p: &Profile, limits: &Limits) -> Result<Resolved, CredError> {
    let name = &p.name;
    let (start_url, sso_region, cache_key) = match p.get("sso_session") {
        Some(session) => {
            let sec = p
                .config
                .get(&format!("sso-session {session}"))
                .ok_or_else(|| {
                    CredError::fatal(format!(
                        "AWS profile '{name}' names sso_session '{session}', which {} does not \
                         define",
                        config_file().display()
                    ))
                })?;
            (
                sec.get("sso_start_url").cloned().unwrap_or_default(),
                sec.get("sso_region").cloned(),
                session.to_string(),
            )
        }
        None => {
            let url = p.get("sso_start_url").unwrap_or_default().to_string();
            (url.clone(), p.get("sso_region").map(str::to_string), url)
        }
    };
    let (Some(account), Some(role), Some(sso_region)) = (
        p.get("sso_account_id"),
        p.get("sso_role_name"),
        sso_region.or_else(|| p.get("sso_region").map(str::to_string)),
    ) else {
        return Err(CredError::fatal(format!(
            "AWS profile '{name}' lacks sso_account_id, sso_role_name or sso_region"
        )));
    };
    let login = format!("run `aws sso login --profile {name}`");
    let file = home().join(".aws").join("sso").join("cache").join(format!(
        "{}.json",
        crate::sha256::sha1_hex(cache_key.as_bytes())
    ));
    let mut token: Value = std::fs::read_to_string(&file)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| {
            CredError::refreshable(format!(
                "AWS profile '{name}' uses SSO ({start_url}) but has no cached sign-in ({}): \
                 {login}",
                file.display()
            ))
        })?;
    let now = crate::time::unix_now();
    let expires_at = |t: &Value| {
        t.get("expiresAt")
            .and_then(Value::as_str)
            .and_then(parse_time)
    };
    // An sso-session sign-in carries a refresh token: an access token about to expire is
    // renewed with it, as AWS's tools do, and the cache updated.
    if expires_at(&token).is_none_or(|at| at - now < 300)
        && p.get("sso_session").is_some()
        && let Some(renewed) = renew_sso_token(&token, &sso_region, limits)
    {
        token = renewed;
        if let Ok(text) = serde_json::to_vec_pretty(&token) {
            let _ = crate::fsutil::write_atomic(&file, &text);
        }
    }
    let access = token
        .get("accessToken")
        .and_then(Value::as_str)
        .unwrap_or("");
    let expired = expires_at(&token).is_none_or(|at| at <= now);
    if access.is_empty() || expired {
        return Err(CredError::refreshable(format!(
            "the SSO sign-in of AWS profile '{name}' has expired: {login}"
        )));
    }
    let base = endpoint_here("SSO")
        .unwrap_or_else(|| format!("https://portal.sso.{sso_region}.amazonaws.com"));
    let url = format!(
        "{}/federation/credentials?account_id={}&role_name={}",
        base.trim_end_matches('/'),
        super::sigv4::uri_encode(account.as_bytes(), false),
        super::sigv4::uri_encode(role.as_bytes(), false)
    );
    let (status, v) = call_json(&url, &[("x-amz-sso_bearer_token", access)], None, limits)
        .map_err(|e| {
            CredError::fatal(format!(
                "cannot reach the AWS SSO portal for profile '{name}': {e}"
            ))
        })?;
    if status == 401 || status == 403 {
        return Err(CredError::refreshable(format!(
            "the AWS SSO portal refused the sign-in of profile '{name}' (HTTP {status}): {login}"
        )));
    }
    let rc = v.get("roleCredentials").unwrap_or(&Value::Null);
    let s = |k: &str| rc.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    let (Some(id), Some(secret)) = (s("accessKeyId"), s("secretAccessKey")) else {
        let msg = v
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("no roleCredentials in the reply");
        return Err(CredError::fatal(format!(
            "the AWS SSO portal gave no credentials for profile '{name}' (role {role}, account \
             {account}; HTTP {status}): {msg}"
        )));
    };
    Ok(Resolved {
        creds: Credentials {
            access_key_id: id.to_string(),
            secret_access_key: secret.to_string(),
            session_token: s("sessionToken").map(str::to_string),
        },
        source: format!("the SSO sign-in of AWS profile '{name}'"),
        expires: rc
            .get("expiration")
            .and_then(Value::as_i64)
            .map(|ms| ms / 1000),
    })
}

/// The cached sign-in `token` renewed at the SSO OIDC service with its refresh token (None when
/// it has none, or the service refuses).
fn renew_sso_token(token: &Value, sso_region: &str, limits: &Limits) -> Option<Value> {
    let s = |k: &str| {
        token
            .get(k)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    let body = serde_json::json!({
        "clientId": s("clientId")?,
        "clientSecret": s("clientSecret")?,
        "grantType": "refresh_token",
        "refreshToken": s("refreshToken")?,
    });
    let base = endpoint_here("SSO_OIDC")
        .unwrap_or_else(|| format!("https://oidc.{sso_region}.amazonaws.com"));
    let url = format!("{}/token", base.trim_end_matches('/'));
    let (status, v) = call_json(&url, &[], Some(&body), limits).ok()?;
    if status != 200 {
        return None;
    }
    let access = v.get("accessToken").and_then(Value::as_str)?;
    let secs = v.get("expiresIn").and_then(Value::as_i64)?;
    let mut out = token.clone();
    out["accessToken"] = Value::from(access);
    out["expiresAt"] = Value::from(crate::time::rfc3339_secs(crate::time::unix_now() + secs));
    if let Some(r) = v.get("refreshToken").and_then(Value::as_str) {
        out["refreshToken"] = Value::from(r);
    }
    Some(out)
}

/// A container's credentials endpoint (`AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` or
/// `_FULL_URI`, with `AWS_CONTAINER_AUTHORIZATION_TOKEN[_FILE]`); None when not in one.
fn container_credentials(limits: &Limits) -> Option<Result<Resolved, CredError>> {
    let url = match var("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") {
        Some(rel) => format!("http://169.254.170.2{rel}"),
        None => var("AWS_CONTAINER_CREDENTIALS_FULL_URI")?,
    };
    let token = var("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
        .and_then(|f| std::fs::read_to_string(f).ok())
        .or_else(|| var("AWS_CONTAINER_AUTHORIZATION_TOKEN"))
        .map(|t| t.trim().to_string());
    let headers: Vec<(&str, &str)> = token
        .as_deref()
        .map(|t| vec![("authorization", t)])
        .unwrap_or_default();
    let what = "the container credentials endpoint";
    Some(match call_json(&url, &headers, None, limits) {
        Err(e) => Err(CredError::fatal(format!("cannot reach {what}: {e}"))),
        Ok((status, v)) => match from_json(&v) {
            Some((creds, expires)) if status == 200 => Ok(Resolved {
                creds,
                source: what.into(),
                expires,
            }),
            _ => Err(CredError::fatal(format!(
                "{what} gave no credentials (HTTP {status})"
            ))),
        },
    })
}

/// The EC2 instance role's credentials from the instance metadata service (IMDSv2: a session
/// token, then the role's name, then its credentials). `AWS_EC2_METADATA_SERVICE_ENDPOINT` names
/// another endpoint; `AWS_EC2_METADATA_DISABLED=true` turns it off. Off an instance nothing
/// answers: each call waits at most a second.
fn instance_credentials(limits: &Limits) -> Result<Resolved, ImdsError> {
    if var("AWS_EC2_METADATA_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Err(ImdsError::Disabled);
    }
    let base =
        var("AWS_EC2_METADATA_SERVICE_ENDPOINT").unwrap_or_else(|| "http://169.254.169.254".into());
    let base = base.trim_end_matches('/');
    let quick = std::time::Duration::from_secs(1).min(limits.http);
    let t = crate::net::Timeouts {
        connect: Some(quick),
        response: Some(quick),
        per_read: Some(quick),
        global: Some(quick * 2),
    };
    let fetch = |method: &str, url: &str, header: (&str, &str), what: &str| match call(
        method,
        url,
        &[header],
        None,
        t,
    ) {
        Ok((200, text)) => Ok(text),
        Ok((status, _)) => Err(ImdsError::Status {
            what: what.to_string(),
            status,
        }),
        Err(source) => Err(ImdsError::Http {
            what: what.to_string(),
            source: Box::new(source),
        }),
    };
    let token = fetch(
        "PUT",
        &format!("{base}/latest/api/token"),
        ("x-aws-ec2-metadata-token-ttl-seconds", "21600"),
        "session token",
    )?;
    let get =
        |url: &str, what: &str| fetch("GET", url, ("x-aws-ec2-metadata-token", token.trim()), what);
    let list = format!("{base}/latest/meta-data/iam/security-credentials/");
    let roles = get(&list, "instance role")?;
    let role = roles
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .ok_or(ImdsError::NoRole)?;
    let v: Value = serde_json::from_str(&get(&format!("{list}{role}"), "role credentials")?)
        .map_err(ImdsError::Json)?;
    let (creds, expires) = from_json(&v).ok_or(ImdsError::Incomplete)?;
    Ok(Resolved {
        creds,
        source: format!("the EC2 instance role {role}"),
        expires,
    })
}

/// Why the instance metadata service gave no credentials.
#[derive(Debug)]
enum ImdsError {
    /// `AWS_EC2_METADATA_DISABLED=true`.
    Disabled,
    /// A step (`what`) answered with a status other than 200.
    Status {
        what: String,
        status: u16,
    },
    /// A step (`what`) could not be asked (off an instance: nothing answers).
    Http {
        what: String,
        source: Box<ureq::Error>,
    },
    NoRole,
    /// The role's credentials are not JSON.
    Json(serde_json::Error),
    Incomplete,
}

impl std::fmt::Display for ImdsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImdsError::Disabled => {
                f.write_str("EC2 instance metadata is turned off (AWS_EC2_METADATA_DISABLED)")
            }
            ImdsError::Status { what, status } => {
                write!(f, "EC2 instance metadata ({what}): HTTP {status}")
            }
            ImdsError::Http { what, source } => {
                write!(f, "EC2 instance metadata ({what}): {source}")
            }
            ImdsError::NoRole => f.write_str("EC2 instance metadata: the instance has no role"),
            ImdsError::Json(e) => write!(f, "EC2 instance metadata (role credentials): {e}"),
            ImdsError::Incomplete => {
                f.write_str("EC2 instance metadata: the role credentials are incomplete")
            }
        }
    }
}

impl std::error::Error for ImdsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ImdsError::Http { source, .. } => Some(source.as_ref()),
            ImdsError::Json(e) => Some(e),
            _ => None,
        }
    }
}

/// How many profiles a chain of `source_profile` may go through.
const MAX_ROLE_CHAIN: usize = 5;

/// A profile with `role_arn`: the credentials of its `source_profile` (or `credential_source`:
/// `Environment`, `EcsContainer`), or its `web_identity_token_file`, exchanged for the role's at
/// AWS STS (`AWS_ENDPOINT_URL_STS` names another endpoint).
fn assume_role(
    p: &Profile,
    role: &str,
    limits: &Limits,
    chain: &mut Vec<String>,
) -> Result<Resolved, CredError> {
    let name = &p.name;
    if p.get("mfa_serial").is_some() {
        return Err(CredError::fatal(format!(
            "AWS profile '{name}' assumes its role with an MFA code (mfa_serial), which crush \
             cannot ask for: give it a credential_process (e.g. one that runs `aws configure \
             export-credentials --profile {name}`)"
        )));
    }
    let session = p.get("role_session_name").map_or_else(
        || format!("crush-{}", crate::time::unix_now()),
        str::to_string,
    );
    if let Some(file) = p.get("web_identity_token_file") {
        return web_identity(
            role,
            &session,
            Path::new(file),
            limits,
            &format!("profile '{name}'"),
        );
    }
    let source = match (p.get("source_profile"), p.get("credential_source")) {
        (Some(src), _) => {
            if chain.iter().any(|c| c == src) || chain.len() >= MAX_ROLE_CHAIN {
                return Err(CredError::fatal(format!(
                    "AWS profile '{name}': source_profile '{src}' makes a loop (or a chain of more \
                     than {MAX_ROLE_CHAIN})"
                )));
            }
            let sp = load_profile(src).ok_or_else(|| {
                CredError::fatal(format!(
                    "AWS profile '{name}': its source_profile '{src}' is in neither {} nor {}",
                    config_file().display(),
                    credentials_file().display()
                ))
            })?;
            chain.push(name.clone());
            // A profile that is its own source uses its own keys, as AWS's tools do.
            let r = if src == name {
                own_credentials(&sp, limits)
            } else {
                from_profile_in(&sp, limits, chain)
            };
            chain.pop();
            r?
        }
        (None, Some(cs)) => match cs {
            "Environment" => match (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) {
                (Some(id), Some(secret)) => Resolved {
                    creds: Credentials {
                        access_key_id: id,
                        secret_access_key: secret,
                        session_token: var("AWS_SESSION_TOKEN"),
                    },
                    source: "the environment".into(),
                    expires: None,
                },
                _ => {
                    return Err(CredError::fatal(format!(
                        "AWS profile '{name}' takes its source credentials from the environment, \
                         and AWS_ACCESS_KEY_ID or AWS_SECRET_ACCESS_KEY is not set"
                    )));
                }
            },
            "EcsContainer" => container_credentials(limits).unwrap_or_else(|| {
                Err(CredError::fatal(format!(
                    "AWS profile '{name}' takes its source credentials from the container, and \
                     AWS_CONTAINER_CREDENTIALS_RELATIVE_URI/FULL_URI is not set"
                )))
            })?,
            "Ec2InstanceMetadata" => instance_credentials(limits).map_err(|e| {
                CredError::fatal(format!("AWS profile '{name}' (credential_source): {e}"))
            })?,
            other => {
                return Err(CredError::fatal(format!(
                    "AWS profile '{name}': credential_source {other} is not supported (only \
                     Environment, EcsContainer and Ec2InstanceMetadata): use source_profile or a \
                     credential_process"
                )));
            }
        },
        (None, None) => {
            return Err(CredError::fatal(format!(
                "AWS profile '{name}' has role_arn but no source_profile, credential_source or \
                 web_identity_token_file"
            )));
        }
    };
    let mut form = vec![
        ("Action", "AssumeRole".to_string()),
        ("Version", "2011-06-15".to_string()),
        ("RoleArn", role.to_string()),
        ("RoleSessionName", session),
    ];
    if let Some(id) = p.get("external_id") {
        form.push(("ExternalId", id.to_string()));
    }
    if let Some(d) = p.get("duration_seconds") {
        form.push(("DurationSeconds", d.to_string()));
    }
    let region = p
        .get("region")
        .map(str::to_string)
        .or_else(|| var("AWS_REGION"))
        .or_else(|| var("AWS_DEFAULT_REGION"))
        .unwrap_or_else(|| "us-east-1".into());
    sts(
        &form,
        Some((&source.creds, &region)),
        limits,
        &format!(
            "role {role} of AWS profile '{name}' (from {})",
            source.source
        ),
    )
}

/// `AWS_ROLE_ARN` with `AWS_WEB_IDENTITY_TOKEN_FILE` (Kubernetes service accounts, IRSA).
fn web_identity_from_env(limits: &Limits) -> Option<Result<Resolved, CredError>> {
    let role = var("AWS_ROLE_ARN")?;
    let file = var("AWS_WEB_IDENTITY_TOKEN_FILE")?;
    let session = var("AWS_ROLE_SESSION_NAME")
        .unwrap_or_else(|| format!("crush-{}", crate::time::unix_now()));
    Some(web_identity(
        &role,
        &session,
        Path::new(&file),
        limits,
        "AWS_ROLE_ARN",
    ))
}

/// The role's credentials for the identity token in `file` (AssumeRoleWithWebIdentity, which is
/// not signed: the token is the proof).
fn web_identity(
    role: &str,
    session: &str,
    file: &Path,
    limits: &Limits,
    whose: &str,
) -> Result<Resolved, CredError> {
    let token = std::fs::read_to_string(file).map_err(|e| {
        CredError::fatal(format!(
            "cannot read the web identity token file {} ({whose}): {e}",
            file.display()
        ))
    })?;
    let form = [
        ("Action", "AssumeRoleWithWebIdentity".to_string()),
        ("Version", "2011-06-15".to_string()),
        ("RoleArn", role.to_string()),
        ("RoleSessionName", session.to_string()),
        ("WebIdentityToken", token.trim().to_string()),
    ];
    sts(
        &form,
        None,
        limits,
        &format!("role {role} ({whose}, web identity)"),
    )
}

/// One STS call (form-encoded POST; signed when `signer` gives credentials and a region) whose
/// XML reply holds `<Credentials>`.
fn sts(
    form: &[(&str, String)],
    signer: Option<(&Credentials, &str)>,
    limits: &Limits,
    what: &str,
) -> Result<Resolved, CredError> {
    let region = signer.map_or("us-east-1", |(_, r)| r);
    let url = endpoint_here("STS").unwrap_or_else(|| {
        if region.starts_with("cn-") {
            format!("https://sts.{region}.amazonaws.com.cn/")
        } else {
            format!("https://sts.{region}.amazonaws.com/")
        }
    });
    let body: String = form
        .iter()
        .map(|(k, v)| format!("{k}={}", super::sigv4::uri_encode(v.as_bytes(), false)))
        .collect::<Vec<_>>()
        .join("&");
    const FORM: &str = "application/x-www-form-urlencoded; charset=utf-8";
    let mut headers = vec![("content-type".to_string(), FORM.to_string())];
    if let Some((creds, region)) = signer {
        let req = super::sigv4::Request {
            method: "POST",
            url: &url,
            headers: &headers,
            body: body.as_bytes(),
        };
        let date = super::amz_date(crate::time::unix_now());
        let signed = super::sigv4::sign(&req, creds, region, "sts", &date);
        headers.extend(signed);
    }
    // The content type is sent with the body.
    let extra: Vec<(&str, &str)> = headers[1..]
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let (status, text) = call(
        "POST",
        &url,
        &extra,
        Some((FORM, body.as_bytes())),
        limits.http_timeouts(),
    )
    .map_err(|e| CredError::fatal(format!("cannot reach AWS STS at {url} for the {what}: {e}")))?;
    let tag = |t: &str| xml_text(&text, t);
    match (tag("AccessKeyId"), tag("SecretAccessKey")) {
        (Some(id), Some(secret)) if status == 200 => Ok(Resolved {
            creds: Credentials {
                access_key_id: id,
                secret_access_key: secret,
                session_token: tag("SessionToken"),
            },
            source: format!("the {what}"),
            expires: tag("Expiration").as_deref().and_then(parse_time),
        }),
        _ => {
            let why = match (tag("Code"), tag("Message")) {
                (Some(c), Some(m)) => format!("{c}: {m}"),
                (Some(c), None) => c,
                _ => format!("HTTP {status}"),
            };
            // Refused source credentials may be renewed (aws_auth_refresh, sso login).
            Err(CredError::refreshable(format!(
                "AWS STS refused the {what}: {why}"
            )))
        }
    }
}

/// The text of the first `<tag>…</tag>` in `xml`, with the five XML entities undone.
fn xml_text(xml: &str, tag: &str) -> Option<String> {
    let start = xml.find(&format!("<{tag}>"))? + tag.len() + 2;
    let end = start + xml[start..].find(&format!("</{tag}>"))?;
    let raw = xml[start..end].trim();
    (!raw.is_empty()).then(|| {
        raw.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sts_replies_are_read_whatever_arrives() {
        let err = "<ErrorResponse><Error><Code>AccessDenied</Code>\
                   <Message>User: a &amp; b is not &lt;allowed&gt;</Message></Error></ErrorResponse>";
        assert_eq!(xml_text(err, "Code").as_deref(), Some("AccessDenied"));
        assert_eq!(
            xml_text(err, "Message").as_deref(),
            Some("User: a & b is not <allowed>")
        );
        for garbage in [
            "",
            "<Code>",
            "<Code></Code>",
            "</Code>x<Code>",
            "<Code>unclosed",
            "\u{0}<<<>>>",
        ] {
            assert_eq!(xml_text(garbage, "Code"), None, "{garbage:?}");
        }
        // A tag inside another's text is not mistaken for it.
        assert_eq!(
            xml_text("<A><AccessKeyId>K</AccessKeyId></A>", "AccessKey"),
            None
        );
    }

    #[test]
    fn ini_files_as_aws_writes_them() {
        let s = parse_ini(
            "# comment\n[default]\nregion = us-west-2\n\n[profile dev]\naws_access_key_id=AK\n\
             s3 =\n  max_concurrent_requests = 20\n; other\n[sso-session  corp ]\nsso_region = eu-west-1\nempty =\n",
        );
        assert_eq!(s["default"]["region"], "us-west-2");
        assert_eq!(s["profile dev"]["aws_access_key_id"], "AK");
        assert!(!s["profile dev"].contains_key("max_concurrent_requests"));
        assert!(!s["profile dev"].contains_key("s3"));
        assert_eq!(s["sso-session corp"]["sso_region"], "eu-west-1");
        assert!(!s["sso-session corp"].contains_key("empty"));
    }

    #[test]
    fn times_in_both_forms() {
        assert_eq!(parse_time("2026-01-01T00:00:00Z"), Some(1_767_225_600));
        assert_eq!(parse_time("2026-01-01T00:00:00UTC"), Some(1_767_225_600));
        assert_eq!(parse_time("2026-01-01T01:00:00+01:00"), Some(1_767_225_600));
        assert_eq!(parse_time("soon"), None);
    }

    #[test]
    fn helper_json() {
        let v: Value = serde_json::from_str(
            r#"{"Version":1,"AccessKeyId":"A","SecretAccessKey":"S","Token":"T","Expiration":"2026-01-01T00:00:00Z"}"#,
        )
        .unwrap();
        let (c, e) = from_json(&v).unwrap();
        assert_eq!(c.session_token.as_deref(), Some("T"));
        assert_eq!(e, Some(1_767_225_600));
        assert!(from_json(&serde_json::json!({"AccessKeyId": "A"})).is_none());
    }
}
