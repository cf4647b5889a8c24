//! The one place HTTP clients are built: every ureq agent in crush (model calls, the catalog,
//! the fetch tool) comes from `agent`, with the same user agent, status handling and proxy rule.

use std::time::Duration;

/// How long an agent's requests may take; None: no limit of that kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Timeouts {
    pub connect: Option<Duration>,
    pub response: Option<Duration>,
    pub per_read: Option<Duration>,
    pub global: Option<Duration>,
}

/// An agent for requests to `url`. Statuses are returned, not errors. Requests to this machine
/// never go through a proxy; others use the proxy the environment names (`HTTPS_PROXY`, ...).
pub fn agent(url: &str, t: Timeouts) -> ureq::Agent {
    let mut cfg = ureq::Agent::config_builder()
        .timeout_connect(t.connect)
        .timeout_recv_response(t.response)
        .timeout_per_read(t.per_read)
        .timeout_global(t.global)
        .http_status_as_error(false)
        .user_agent(concat!("crush/", env!("CARGO_PKG_VERSION")));
    if is_loopback_url(url) {
        cfg = cfg.proxy(None);
    }
    cfg.build().into()
}

/// `url` with its credentials hidden, for messages, logs and the store: the user and password
/// before `@` and every query value become `****` (`https://****@host/v1?key=****`).
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (format!("{s}://"), r),
        None => (String::new(), url),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => format!("****@{host}"),
        None => authority.to_string(),
    };
    let (path, query) = match tail.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (tail, None),
    };
    let mut out = format!("{scheme}{authority}{path}");
    if let Some(q) = query {
        let (q, frag) = match q.split_once('#') {
            Some((q, f)) => (q, Some(f)),
            None => (q, None),
        };
        let masked: Vec<String> = q
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) => format!("{k}=****"),
                None => kv.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&masked.join("&"));
        if let Some(f) = frag {
            out.push('#');
            out.push_str(f);
        }
    }
    out
}

/// `base` with `path` appended to its path, before its query string: `https://h/v1?key=k` and
/// `/chat/completions` make `https://h/v1/chat/completions?key=k`. `path` is added only when the
/// base does not already end with it.
pub fn join_path(base: &str, path: &str) -> String {
    let (head, query) = match base.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (base, None),
    };
    let head = head.trim_end_matches('/');
    let mut out = if head.ends_with(path) {
        head.to_string()
    } else {
        format!("{head}{path}")
    };
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// True when `url` points at this machine.
pub fn is_loopback_url(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match hostport.strip_prefix('[') {
        Some(r) => r.split(']').next().unwrap_or(""),
        None => hostport.split(':').next().unwrap_or(""),
    }
    .to_ascii_lowercase();
    host == "localhost"
        || host.ends_with(".localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_redacted() {
        assert_eq!(
            redact_url("https://user:pw@h.example:8443/v1/chat?key=s3cret&x=1#f"),
            "https://****@h.example:8443/v1/chat?key=****&x=****#f"
        );
        assert_eq!(redact_url("http://127.0.0.1:1/v1"), "http://127.0.0.1:1/v1");
        assert_eq!(redact_url("h/p?flag"), "h/p?flag");
    }

    #[test]
    fn paths_go_before_the_query() {
        assert_eq!(
            join_path("https://h/v1/?key=k", "/chat/completions"),
            "https://h/v1/chat/completions?key=k"
        );
        assert_eq!(
            join_path("https://h/v1/chat/completions", "/chat/completions"),
            "https://h/v1/chat/completions"
        );
    }

    #[test]
    fn loopback_urls() {
        assert!(is_loopback_url("http://127.0.0.1:8080/v1"));
        assert!(is_loopback_url("http://localhost"));
        assert!(is_loopback_url("http://[::1]:11434/v1"));
        assert!(is_loopback_url("http://user:pw@127.0.0.2/"));
        assert!(!is_loopback_url("https://api.anthropic.com"));
        assert!(!is_loopback_url("http://10.0.0.1:8080"));
        assert!(!is_loopback_url("http://localhost.example.com"));
    }
}
