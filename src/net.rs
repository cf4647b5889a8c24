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
