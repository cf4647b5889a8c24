//! The sign-in flows (crush(1) LOGIN): OAuth's device flow (RFC 8628) at GitHub and at Hyper,
//! and the exchanges of a long-lived token for a short-lived one.

use super::{COPILOT_CLIENT_ID, LoginError, Settings, Token, now};
use serde_json::{Value, json};
use std::io::Write;
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(30);

pub(super) enum Body<'a> {
    None,
    Form(&'a [(&'a str, &'a str)]),
    Json(Value),
}

/// Sends a request and returns (status, the JSON object answered). An answer that is not a JSON
/// object (an HTML page from a proxy or a login wall) is an error naming what came.
pub(super) fn call(
    method: &str,
    url: &str,
    auth: Option<&str>,
    headers: &[(String, String)],
    body: Body,
) -> Result<(u16, Value), LoginError> {
    let agent = crate::net::agent(
        url,
        crate::net::Timeouts {
            connect: Some(TIMEOUT),
            response: Some(TIMEOUT),
            per_read: Some(TIMEOUT),
            global: Some(TIMEOUT * 2),
        },
    );
    let http = |e: ureq::Error| LoginError::Http {
        url: url.to_string(),
        message: e.to_string(),
    };
    let bytes = match &body {
        Body::None => Vec::new(),
        Body::Form(f) => form(f).into_bytes(),
        Body::Json(v) => v.to_string().into_bytes(),
    };
    let ctype = match body {
        Body::None => None,
        Body::Form(_) => Some("application/x-www-form-urlencoded"),
        Body::Json(_) => Some("application/json"),
    };
    let resp = if method == "GET" {
        let mut rb = agent.get(url).header("accept", "application/json");
        for (k, v) in headers {
            rb = rb.header(k.as_str(), v.as_str());
        }
        if let Some(a) = auth {
            rb = rb.header("authorization", a);
        }
        rb.call()
    } else {
        let mut rb = agent.post(url).header("accept", "application/json");
        for (k, v) in headers {
            rb = rb.header(k.as_str(), v.as_str());
        }
        if let Some(a) = auth {
            rb = rb.header("authorization", a);
        }
        if let Some(c) = ctype {
            rb = rb.header("content-type", c);
        }
        rb.send(&bytes[..])
    }
    .map_err(http)?;
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let text = resp
        .into_body()
        .with_config()
        .limit(1024 * 1024)
        .read_to_string()
        .map_err(http)?;
    match serde_json::from_str::<Value>(&text) {
        Ok(v) if v.is_object() => Ok((status, v)),
        _ => {
            let snippet: String = text.chars().take(120).collect();
            Err(LoginError::BadReply {
                url: url.to_string(),
                message: format!(
                    "HTTP {status}: the answer is not JSON ({}): {}",
                    if ct.is_empty() {
                        "no content-type"
                    } else {
                        &ct
                    },
                    crate::visible::line(snippet.trim())
                ),
            })
        }
    }
}

/// `k=v&...`, percent-encoded (application/x-www-form-urlencoded).
fn form(pairs: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn str_field<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn missing(url: &str, field: &str) -> LoginError {
    LoginError::BadReply {
        url: url.to_string(),
        message: format!("the answer has no {field}"),
    }
}

/// Copilot's API token for a GitHub token.
pub(crate) fn copilot_token(s: &Settings, github: &str) -> Result<Token, LoginError> {
    let url = format!("{}/copilot_internal/v2/token", s.github_api_url);
    let (status, v) = call(
        "GET",
        &url,
        Some(&format!("token {github}")),
        &super::copilot_headers(),
        Body::None,
    )?;
    match status {
        200..=299 => {}
        401 => {
            return Err(LoginError::Refused(
                "GitHub refused the token (revoked or expired)".into(),
            ));
        }
        403 | 404 => {
            return Err(LoginError::Refused(
                "this GitHub account has no Copilot subscription".into(),
            ));
        }
        _ => {
            return Err(LoginError::Http {
                url,
                message: format!("HTTP {status}"),
            });
        }
    }
    let token = str_field(&v, "token").ok_or_else(|| missing(&url, "token"))?;
    let expires_at = v.get("expires_at").and_then(Value::as_i64).unwrap_or(0);
    let lifetime = expiry(
        &url,
        expires_at,
        v.get("refresh_in").and_then(Value::as_i64),
    )?;
    Ok(Token {
        access_token: token.to_string(),
        refresh_token: github.to_string(),
        expires_in: lifetime,
        expires_at: now() + lifetime,
    })
}

/// How long a token is good for, by this machine's clock: `refresh_in` when the server says it
/// (it does not depend on the two clocks agreeing), else `expires_at` minus now. An expiry
/// already past, or more than a day ahead, means the clocks disagree: an error that says so.
fn expiry(url: &str, expires_at: i64, refresh_in: Option<i64>) -> Result<i64, LoginError> {
    if let Some(r) = refresh_in.filter(|r| *r > 0) {
        return Ok(r.min(86_400));
    }
    let left = expires_at - now();
    if expires_at == 0 || left <= 0 || left > 86_400 {
        return Err(LoginError::BadReply {
            url: url.to_string(),
            message: format!(
                "the token expires at {expires_at}, {left} s from now by this machine's clock: check the system clock"
            ),
        });
    }
    Ok(left)
}

/// Hyper's access token for its long-lived (refresh) token.
pub(crate) fn hyper_exchange(s: &Settings, refresh: &str) -> Result<Token, LoginError> {
    let url = format!("{}/token/exchange", s.hyper_url);
    let (status, v) = call(
        "POST",
        &url,
        None,
        &[("user-agent".into(), "crush".into())],
        Body::Json(json!({"refresh_token": refresh})),
    )?;
    if !(200..300).contains(&status) {
        return Err(oauth_error(&url, status, &v));
    }
    let access = str_field(&v, "access_token").ok_or_else(|| missing(&url, "access_token"))?;
    let expires_in = v
        .get("expires_in")
        .and_then(Value::as_i64)
        .filter(|e| *e > 0);
    let lifetime = match expires_in {
        Some(e) => e.min(86_400 * 30),
        None => expiry(
            &url,
            v.get("expires_at").and_then(Value::as_i64).unwrap_or(0),
            None,
        )?,
    };
    Ok(Token {
        access_token: access.to_string(),
        refresh_token: str_field(&v, "refresh_token")
            .unwrap_or(refresh)
            .to_string(),
        expires_in: lifetime,
        expires_at: now() + lifetime,
    })
}

fn oauth_error(url: &str, status: u16, v: &Value) -> LoginError {
    match str_field(v, "error") {
        Some(e) => LoginError::Refused(match str_field(v, "error_description") {
            Some(d) => format!("{e}: {d}"),
            None => e.to_string(),
        }),
        None => LoginError::Http {
            url: url.to_string(),
            message: format!("HTTP {status}"),
        },
    }
}

/// What the user is shown and how polling goes.
struct Device {
    code: String,
    user_code: String,
    uri: String,
    interval: Duration,
    deadline: Instant,
}

fn show(d: &Device, out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "Open {} and enter the code {}\nWaiting for the authorization...",
        d.uri, d.user_code
    );
    let _ = out.flush();
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
        let _ = super::browser::open_browser(&d.uri, &cwd);
    }
}

/// One poll's outcome.
enum Poll {
    Pending,
    SlowDown(Option<u64>),
    Done(Value),
}

/// Polls until the user authorized (or refused, or the code expired).
fn poll(
    d: &Device,
    s: &Settings,
    mut once: impl FnMut() -> Result<Poll, LoginError>,
) -> Result<Value, LoginError> {
    let mut interval = d.interval;
    loop {
        if Instant::now() + interval >= d.deadline {
            return Err(LoginError::Refused(
                "the code expired before it was entered; run 'crush login' again".into(),
            ));
        }
        std::thread::sleep(interval);
        match once()? {
            Poll::Pending => {}
            Poll::SlowDown(asked) => {
                interval = match asked {
                    Some(secs) => Duration::from_secs(secs).max(interval),
                    None => interval + s.slow_down,
                };
            }
            Poll::Done(v) => return Ok(v),
        }
    }
}

fn device_reply(url: &str, status: u16, v: &Value, uri_key: &str) -> Result<Device, LoginError> {
    if !(200..300).contains(&status) {
        return Err(oauth_error(url, status, v));
    }
    let code = str_field(v, "device_code").ok_or_else(|| missing(url, "device_code"))?;
    let user_code = str_field(v, "user_code").ok_or_else(|| missing(url, "user_code"))?;
    let uri = str_field(v, uri_key).ok_or_else(|| missing(url, uri_key))?;
    super::browser::browser_host(uri).map_err(|e| LoginError::BadReply {
        url: url.to_string(),
        message: e.to_string(),
    })?;
    let expires = v
        .get("expires_in")
        .and_then(Value::as_u64)
        .unwrap_or(900)
        .min(3600);
    let interval = v
        .get("interval")
        .and_then(Value::as_u64)
        .unwrap_or(5)
        .min(60);
    Ok(Device {
        code: code.to_string(),
        user_code: user_code.to_string(),
        uri: uri.to_string(),
        interval: Duration::from_secs(interval),
        deadline: Instant::now() + Duration::from_secs(expires),
    })
}

/// GitHub's device flow, then Copilot's token (which proves the subscription).
pub(crate) fn copilot_device(s: &Settings, out: &mut dyn Write) -> Result<Token, LoginError> {
    let url = format!("{}/login/device/code", s.github_url);
    let form = [("client_id", COPILOT_CLIENT_ID), ("scope", "read:user")];
    let (status, v) = call("POST", &url, None, &[], Body::Form(&form))?;
    let d = device_reply(&url, status, &v, "verification_uri")?;
    show(&d, out);
    let token_url = format!("{}/login/oauth/access_token", s.github_url);
    let v = poll(&d, s, || {
        let form = [
            ("client_id", COPILOT_CLIENT_ID),
            ("device_code", d.code.as_str()),
            ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
        ];
        let (status, v) = call("POST", &token_url, None, &[], Body::Form(&form))?;
        device_step(&token_url, status, v)
    })?;
    let gh = str_field(&v, "access_token").ok_or_else(|| missing(&token_url, "access_token"))?;
    copilot_token(s, gh)
}

/// The answer to one device-flow poll (RFC 8628 section 3.5).
fn device_step(url: &str, status: u16, v: Value) -> Result<Poll, LoginError> {
    match str_field(&v, "error") {
        Some("authorization_pending") => Ok(Poll::Pending),
        Some("slow_down") => Ok(Poll::SlowDown(v.get("interval").and_then(Value::as_u64))),
        Some("expired_token") => Err(LoginError::Refused(
            "the code expired before it was entered; run 'crush login' again".into(),
        )),
        Some("access_denied") => Err(LoginError::Refused("the authorization was denied".into())),
        Some(_) => Err(oauth_error(url, status, &v)),
        None if !(200..300).contains(&status) => Err(oauth_error(url, status, &v)),
        None => Ok(Poll::Done(v)),
    }
}

/// Hyper's device flow, then its first access token.
pub(crate) fn hyper_device(s: &Settings, out: &mut dyn Write) -> Result<Token, LoginError> {
    let url = format!("{}/device/auth", s.hyper_url);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host = host.trim();
    let name = if host.is_empty() {
        "Crush".to_string()
    } else {
        format!("Crush ({host})")
    };
    let ua = [("user-agent".to_string(), "crush".to_string())];
    let (status, v) = call(
        "POST",
        &url,
        None,
        &ua,
        Body::Json(json!({"device_name": name})),
    )?;
    let d = device_reply(&url, status, &v, "verification_url")?;
    show(&d, out);
    let poll_url = format!("{}/device/auth/{}", s.hyper_url, d.code);
    let v = poll(&d, s, || {
        let (status, v) = call("GET", &poll_url, None, &ua, Body::None)?;
        if str_field(&v, "refresh_token").is_some() {
            return Ok(Poll::Done(v));
        }
        match device_step(&poll_url, status, v)? {
            Poll::Done(_) => Err(missing(&poll_url, "refresh_token")),
            p => Ok(p),
        }
    })?;
    let refresh =
        str_field(&v, "refresh_token").ok_or_else(|| missing(&poll_url, "refresh_token"))?;
    hyper_exchange(s, refresh)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiries_follow_this_machines_clock() {
        assert_eq!(expiry("u", 0, Some(1500)).unwrap(), 1500);
        let left = expiry("u", now() + 600, None).unwrap();
        assert!((590..=600).contains(&left), "{left}");
        for skewed in [now() - 10, now() + 3 * 86_400, 0] {
            let e = expiry("u", skewed, None).unwrap_err().to_string();
            assert!(e.contains("check the system clock"), "{e}");
        }
    }

    #[test]
    fn device_polls_follow_rfc_8628() {
        let step = |v: Value| device_step("u", 400, v);
        assert!(matches!(
            step(json!({"error": "authorization_pending"})),
            Ok(Poll::Pending)
        ));
        assert!(matches!(
            step(json!({"error": "slow_down", "interval": 10})),
            Ok(Poll::SlowDown(Some(10)))
        ));
        let e = step(json!({"error": "expired_token"}))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("expired"), "{e}");
        let e = step(json!({"error": "access_denied"}))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("denied"), "{e}");
        assert!(matches!(
            device_step("u", 200, json!({"access_token": "t"})),
            Ok(Poll::Done(_))
        ));
    }
}
