//! The one place HTTP clients are built: every ureq agent in crush (model calls, the catalog,
//! discovery, MCP) comes from `agent`, with the same user agent, status handling, certificates
//! and proxy rule; the web tools (fetch, download, sourcegraph, web search) send every request
//! through `web`, which also checks each URL and redirect (http and https only) and leaves the
//! body to be read with a cap.

use std::sync::OnceLock;
use std::time::Duration;
use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};

/// How long an agent's requests may take; None: no limit of that kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Timeouts {
    pub connect: Option<Duration>,
    pub response: Option<Duration>,
    pub per_read: Option<Duration>,
    pub global: Option<Duration>,
}

/// An agent for requests to `url`. Statuses are returned, not errors. Requests go through the
/// proxy `proxy_for` names. HTTPS trusts the built-in roots, the system's store and
/// `SSL_CERT_FILE`/`SSL_CERT_DIR` (crush(1) ENVIRONMENT).
pub(crate) fn agent(url: &str, t: Timeouts) -> ureq::Agent {
    config(url, t).build().into()
}

/// `agent` through `proxy` (None: none), as `proxy_for_in` names it for a session.
pub(crate) fn agent_via(url: &str, t: Timeouts, proxy: Option<&str>) -> ureq::Agent {
    config_via(url, t, proxy).build().into()
}

/// The configuration `agent` builds from (the web tools' requests add theirs).
fn config(url: &str, t: Timeouts) -> ureq::config::ConfigBuilder<ureq::typestate::AgentScope> {
    config_via(url, t, proxy_for(url).as_deref())
}

fn config_via(
    url: &str,
    t: Timeouts,
    proxy: Option<&str>,
) -> ureq::config::ConfigBuilder<ureq::typestate::AgentScope> {
    let mut cfg = ureq::Agent::config_builder()
        .timeout_connect(t.connect)
        .timeout_recv_response(t.response)
        .timeout_per_read(t.per_read)
        .timeout_global(t.global)
        .http_status_as_error(false)
        .user_agent(concat!("crush/", env!("CARGO_PKG_VERSION")))
        .proxy(proxy.and_then(|p| ureq::Proxy::new(p).ok()));
    if url
        .get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
    {
        cfg = cfg.tls_config(TlsConfig::builder().root_certs(root_certs()).build());
    }
    cfg
}

/// The proxy a request to `url` goes through, from the environment as curl reads it:
/// `https_proxy`/`HTTPS_PROXY` for https, `http_proxy`/`HTTP_PROXY` for http, else
/// `all_proxy`/`ALL_PROXY`; none for this machine or a host `no_proxy`/`NO_PROXY` lists.
/// For requests made with no session's variables at hand (crush login, the catalog, discovery);
/// a session's requests use `proxy_for_in` (crush(1) ENVIRONMENT, HTTPS_PROXY).
pub(crate) fn proxy_for(url: &str) -> Option<String> {
    proxy_from(url, &|k| std::env::var(k).ok())
}

/// `proxy_for` with the session's variables `env` (its `.env` and `env` map) read first.
pub(crate) fn proxy_for_in(url: &str, env: &crate::env::Overlay) -> Option<String> {
    proxy_from(url, &|k| env.var(k))
}

fn proxy_from(url: &str, var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if is_loopback_url(url) {
        return None;
    }
    let first = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| var(n).filter(|v| !v.trim().is_empty()))
    };
    let https = url
        .get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("https://"));
    let proxy = if https {
        first(&["https_proxy", "HTTPS_PROXY"])
    } else {
        first(&["http_proxy", "HTTP_PROXY"])
    }
    .or_else(|| first(&["all_proxy", "ALL_PROXY"]))?;
    let no_proxy = first(&["no_proxy", "NO_PROXY"]).unwrap_or_default();
    (!no_proxy_matches(&no_proxy, &host_of(url))).then(|| proxy.trim().to_string())
}

/// `host[:port]` of `url`, without user info: how a message names a server.
pub(crate) fn authority_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority.rsplit_once('@').map_or(authority, |(_, h)| h)
}

/// The host of `url`, lowercase, without port or brackets.
pub(crate) fn host_of(url: &str) -> String {
    let hostport = authority_of(url);
    match hostport.strip_prefix('[') {
        Some(r) => r.split(']').next().unwrap_or(""),
        None => hostport.split(':').next().unwrap_or(""),
    }
    .to_ascii_lowercase()
}

/// Whether a `NO_PROXY` list (comma-separated: `*`, host names that also cover their
/// subdomains, with or without a leading dot, IP addresses and IPv4 networks such as
/// `10.0.0.0/8`) names `host`.
fn no_proxy_matches(list: &str, host: &str) -> bool {
    list.split([',', ' '])
        .map(|e| e.trim().to_ascii_lowercase())
        .filter(|e| !e.is_empty())
        .any(|e| {
            if e == "*" {
                return true;
            }
            if let Some((net, bits)) = e.split_once('/') {
                return in_network(host, net, bits);
            }
            // A port in the entry is ignored.
            let name = match e.rsplit_once(':') {
                Some((n, p)) if p.chars().all(|c| c.is_ascii_digit()) && !n.contains(':') => n,
                _ => e.as_str(),
            };
            let name = name.trim_start_matches("*.").trim_start_matches('.');
            host == name || host.ends_with(&format!(".{name}"))
        })
}

fn in_network(host: &str, net: &str, bits: &str) -> bool {
    let (Ok(h), Ok(n), Ok(b)) = (
        host.parse::<std::net::Ipv4Addr>(),
        net.parse::<std::net::Ipv4Addr>(),
        bits.parse::<u32>(),
    ) else {
        return false;
    };
    let mask = if b == 0 {
        0
    } else {
        u32::MAX << (32 - b.min(32))
    };
    u32::from(h) & mask == u32::from(n) & mask
}

/// Where the system keeps its certificate bundle, by distribution (as OpenSSL's builds look).
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/ssl/cert.pem",
    "/usr/local/share/certs/ca-root-nss.crt",
];

/// The roots HTTPS trusts, read once: the built-in ones, the system's bundle, `SSL_CERT_FILE`
/// and the files of the `SSL_CERT_DIR` directories.
fn root_certs() -> RootCerts {
    static ROOTS: OnceLock<RootCerts> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let extra = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
            roots_from(
                SYSTEM_BUNDLES,
                extra("SSL_CERT_FILE").as_deref(),
                extra("SSL_CERT_DIR").as_deref(),
            )
        })
        .clone()
}

fn roots_from(
    bundles: &[&str],
    file: Option<&std::ffi::OsStr>,
    dirs: Option<&std::ffi::OsStr>,
) -> RootCerts {
    let mut certs: Vec<Certificate<'static>> = webpki_root_certs::TLS_SERVER_ROOT_CERTS
        .iter()
        .map(|c| Certificate::from_der(c.as_ref()).to_owned())
        .collect();
    let mut add_file = |path: &std::path::Path| {
        let Ok(pem) = std::fs::read(path) else {
            return;
        };
        for item in ureq::tls::parse_pem(&pem).flatten() {
            if let PemItem::Certificate(c) = item
                && !certs.iter().any(|x| x.der() == c.der())
            {
                certs.push(c.to_owned());
            }
        }
    };
    if let Some(b) = bundles.iter().find(|b| std::path::Path::new(b).is_file()) {
        add_file(std::path::Path::new(b));
    }
    if let Some(f) = file {
        add_file(std::path::Path::new(f));
    }
    for dir in dirs.into_iter().flat_map(std::env::split_paths) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if e.path().is_file() {
                add_file(&e.path());
            }
        }
    }
    RootCerts::new_with_certs(&certs)
}

/// `url` with its credentials hidden, for messages, logs and the store: the user and password
/// before `@` and every query value become `****` (`https://****@host/v1?key=****`).
pub(crate) fn redact_url(url: &str) -> String {
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
pub(crate) fn join_path(base: &str, path: &str) -> String {
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

/// The host of `url`, lowercase, without brackets, port or user.
fn url_host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    match hostport.strip_prefix('[') {
        Some(r) => r.split(']').next().unwrap_or(""),
        None => hostport.split(':').next().unwrap_or(""),
    }
    .to_ascii_lowercase()
}

/// True when `url` points at this machine.
pub(crate) fn is_loopback_url(url: &str) -> bool {
    let host = url_host(url);
    host == "localhost"
        || host.ends_with(".localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_loopback())
}

/// True when `url` points at this machine or a private network (10/8, 172.16/12, 192.168/16,
/// link-local, IPv6 unique-local): a server of one's own, such as a local model server, that
/// may answer one request at a time.
pub(crate) fn is_local_url(url: &str) -> bool {
    if is_loopback_url(url) {
        return true;
    }
    let host = url_host(url);
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(a)) => a.is_private() || a.is_link_local(),
        Ok(std::net::IpAddr::V6(a)) => {
            (a.segments()[0] & 0xfe00) == 0xfc00 || (a.segments()[0] & 0xffc0) == 0xfe80
        }
        Err(_) => host.ends_with(".local") || host.ends_with(".lan"),
    }
}

/// The most redirects a web request follows.
pub(crate) const MAX_REDIRECTS: u32 = 10;

/// Why a URL is not one the web tools may reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotWeb {
    /// Neither http:// nor https:// (the URL as given, shortened).
    Scheme(String),
    NoHost,
}

impl std::fmt::Display for NotWeb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotWeb::Scheme(url) => {
                write!(f, "URL must start with http:// or https:// (got {url})")
            }
            NotWeb::NoHost => f.write_str("URL has no host"),
        }
    }
}

impl std::error::Error for NotWeb {}

/// Checks that `url` is an http or https URL with a host: what the web tools may reach.
pub(crate) fn check_web_url(url: &str) -> Result<(), NotWeb> {
    let lower = url.trim().to_ascii_lowercase();
    let rest = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"))
        .ok_or_else(|| NotWeb::Scheme(shorten(url.trim())))?;
    if rest.is_empty() || rest.starts_with(['/', '?', '#']) {
        return Err(NotWeb::NoHost);
    }
    Ok(())
}

/// Why a request of the web tools got no response, or its body could not be read. URLs in it
/// are shortened.
#[derive(Debug)]
pub enum WebError {
    /// The URL asked for is not one the web tools may reach.
    Blocked(NotWeb),
    /// A redirect led to a URL the web tools may not reach.
    Redirect {
        from: String,
        to: String,
        why: NotWeb,
    },
    TooManyRedirects(String),
    /// The request's time ran out (its timeout in seconds).
    TimedOut(u64),
    /// The request could not be built (a header the HTTP library refuses).
    Invalid {
        url: String,
        why: ureq::http::Error,
    },
    /// The request was sent, and failed (no connection, a TLS error, the timeout).
    Failed {
        url: String,
        why: ureq::Error,
    },
    /// The response's body could not be read.
    Read(std::io::Error),
    /// The user canceled the turn while the request was on its way (`cancellable`).
    Canceled,
    /// No thread could be started for the request (`cancellable`).
    Thread(std::io::Error),
    /// The request's thread ended without an answer (`cancellable`).
    Lost,
}

impl std::fmt::Display for WebError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WebError::Blocked(why) => write!(f, "{why}"),
            WebError::Redirect { from, to, why } => {
                write!(f, "refused a redirect from {from} to {to}: {why}")
            }
            WebError::TooManyRedirects(url) => {
                write!(
                    f,
                    "too many redirects (more than {MAX_REDIRECTS}) from {url}"
                )
            }
            WebError::TimedOut(secs) => write!(f, "timed out after {secs} s"),
            WebError::Invalid { url, why } => write!(f, "invalid request for {url}: {why}"),
            WebError::Failed { url, why } => write!(f, "request to {url} failed: {why}"),
            WebError::Read(e) => write!(f, "failed to read the response: {e}"),
            WebError::Canceled => f.write_str("canceled"),
            WebError::Thread(e) => write!(f, "cannot start the request: {e}"),
            WebError::Lost => f.write_str("the request failed"),
        }
    }
}

impl std::error::Error for WebError {}

impl From<NotWeb> for WebError {
    fn from(e: NotWeb) -> WebError {
        WebError::Blocked(e)
    }
}

fn shorten(s: &str) -> String {
    let mut out: String = s.chars().take(100).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// One request of the web tools (fetch, download, sourcegraph, web search): its method, URL,
/// headers, body and how long it may take, redirects included.
#[derive(Clone, Debug)]
pub(crate) struct WebRequest<'a> {
    pub method: &'a str,
    pub url: &'a str,
    pub headers: Vec<(&'a str, String)>,
    pub body: Option<&'a [u8]>,
    /// For the whole request, redirects included.
    pub timeout: Duration,
    /// The session's variables, read before the process's for the proxy (`proxy_for_in`).
    pub env: crate::env::Overlay,
}

impl<'a> WebRequest<'a> {
    pub(crate) fn get(url: &'a str, timeout: Duration) -> WebRequest<'a> {
        WebRequest {
            method: "GET",
            url,
            headers: Vec::new(),
            body: None,
            timeout,
            env: crate::env::Overlay::default(),
        }
    }

    /// The request with the session's variables `env` (its proxy settings first).
    pub(crate) fn env(mut self, env: &crate::env::Overlay) -> WebRequest<'a> {
        self.env = env.clone();
        self
    }

    pub(crate) fn header(mut self, name: &'a str, value: impl Into<String>) -> WebRequest<'a> {
        self.headers.push((name, value.into()));
        self
    }
}

/// A response of `web`: the URL it came from (after redirects) and the response itself.
pub(crate) struct WebResponse {
    pub url: String,
    pub response: ureq::http::Response<ureq::Body>,
}

impl WebResponse {
    pub(crate) fn status(&self) -> u16 {
        self.response.status().as_u16()
    }

    /// A header's value ("" when absent or not text).
    pub(crate) fn header(&self, name: &str) -> String {
        self.response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    }

    /// The `Content-Length` the server announced, if any.
    pub(crate) fn content_length(&self) -> Option<u64> {
        self.header("content-length").trim().parse().ok()
    }

    /// Reads the body up to `cap` bytes: the bytes, and whether more were there.
    pub(crate) fn read_capped(&mut self, cap: u64) -> Result<(Vec<u8>, bool), WebError> {
        use std::io::Read;
        let mut body = Vec::new();
        self.response
            .body_mut()
            .with_config()
            .limit(u64::MAX)
            .reader()
            .take(cap.saturating_add(1))
            .read_to_end(&mut body)
            .map_err(WebError::Read)?;
        let more = body.len() as u64 > cap;
        body.truncate(cap as usize);
        Ok((body, more))
    }

    /// The body as a reader (no limit of ureq's own: the caller caps what it reads).
    pub(crate) fn reader(&mut self) -> impl std::io::Read + '_ {
        self.response
            .body_mut()
            .with_config()
            .limit(u64::MAX)
            .reader()
    }
}

/// The one way the web tools reach the network: `req` sent with the agent of `agent`
/// (the environment's proxies, loopback never proxied), redirects followed here, each one
/// checked: a redirect to anything but http(s) (`file:`, `ftp:`, `data:`) is refused, and so
/// are more than `MAX_REDIRECTS`. A 307 or 308 repeats the method and body; the other
/// redirects continue with GET. Statuses are returned, not errors.
pub(crate) fn web(req: &WebRequest) -> Result<WebResponse, WebError> {
    check_web_url(req.url)?;
    let deadline = std::time::Instant::now() + req.timeout;
    let mut url = req.url.trim().to_string();
    let mut method = req.method.to_string();
    let mut body = req.body;
    for _ in 0..=MAX_REDIRECTS {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(WebError::TimedOut(req.timeout.as_secs()));
        }
        let t = Timeouts {
            global: Some(left),
            ..Default::default()
        };
        let proxy = proxy_for_in(&url, &req.env);
        let agent: ureq::Agent = config_via(&url, t, proxy.as_deref())
            .max_redirects(0)
            .build()
            .into();
        let mut builder = ureq::http::Request::builder()
            .method(method.as_str())
            .uri(url.as_str());
        for (k, v) in &req.headers {
            builder = builder.header(*k, v.as_str());
        }
        let invalid = |why| WebError::Invalid {
            url: shorten(&url),
            why,
        };
        let sent = match body {
            Some(b) => agent.run(builder.body(b.to_vec()).map_err(invalid)?),
            None => agent.run(builder.body(()).map_err(invalid)?),
        };
        let response = sent.map_err(|why| WebError::Failed {
            url: shorten(&url),
            why,
        })?;
        let status = response.status().as_u16();
        if !matches!(status, 301 | 302 | 303 | 307 | 308) {
            return Ok(WebResponse { url, response });
        }
        let location = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .trim()
            .to_string();
        if location.is_empty() {
            return Ok(WebResponse { url, response });
        }
        let next = resolve_location(&url, &location);
        if let Err(why) = check_web_url(&next) {
            return Err(WebError::Redirect {
                from: shorten(&url),
                to: shorten(&next),
                why,
            });
        }
        if !matches!(status, 307 | 308) {
            method = "GET".to_string();
            body = None;
        }
        url = next;
    }
    Err(WebError::TooManyRedirects(shorten(req.url)))
}

/// A `Location` header resolved against the URL that sent it.
fn resolve_location(base: &str, location: &str) -> String {
    let has_scheme = location.split_once(':').is_some_and(|(s, _)| {
        !s.is_empty()
            && s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    });
    if has_scheme {
        return location.to_string();
    }
    let (scheme, rest) = base.split_once("://").unwrap_or(("http", base));
    if let Some(r) = location.strip_prefix("//") {
        return format!("{scheme}://{r}");
    }
    let host_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let origin = format!("{scheme}://{}", &rest[..host_end]);
    if location.starts_with('/') {
        return format!("{origin}{location}");
    }
    let path = &rest[host_end..];
    let path = path.split(['?', '#']).next().unwrap_or("");
    if location.starts_with(['?', '#']) {
        return format!(
            "{origin}{}{location}",
            if path.is_empty() { "/" } else { path }
        );
    }
    let dir = match path.rfind('/') {
        Some(i) => &path[..=i],
        None => "/",
    };
    format!("{origin}{dir}{location}")
}

/// Runs `work` on a thread of its own and waits for it, returning at once when `cancel` is
/// set (the thread is then abandoned: it ends at its own timeout). Its errors, and this
/// function's own (`WebError::Canceled`, `Thread`, `Lost`), come as `E`.
pub(crate) fn cancellable<T: Send + 'static, E: From<WebError> + Send + 'static>(
    cancel: &std::sync::atomic::AtomicBool,
    work: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, E> {
    use std::sync::atomic::Ordering;
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::Builder::new()
        .name("web-request".into())
        .spawn(move || {
            let _ = tx.send(work());
        })
        .map_err(WebError::Thread)?;
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(r) => return r,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                if cancel.load(Ordering::Relaxed) {
                    return Err(WebError::Canceled.into());
                }
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                return Err(WebError::Lost.into());
            }
        }
    }
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
    fn proxies_as_curl_reads_them() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let vars = env(&[
            ("HTTPS_PROXY", "http://corp:3128"),
            ("http_proxy", "http://plain:8080"),
            (
                "NO_PROXY",
                "internal.example, .corp.lan:443, 10.0.0.0/8,192.168.1.7",
            ),
        ]);
        let p = |u: &str| proxy_from(u, &vars);
        assert_eq!(
            p("https://api.anthropic.com/v1").as_deref(),
            Some("http://corp:3128")
        );
        assert_eq!(
            p("http://models.example/v1").as_deref(),
            Some("http://plain:8080")
        );
        assert_eq!(p("https://internal.example/x"), None);
        assert_eq!(p("https://a.internal.example/x"), None);
        assert_eq!(p("https://git.corp.lan/x"), None);
        assert_eq!(p("https://10.2.3.4:8443/x"), None);
        assert_eq!(p("https://192.168.1.7/x"), None);
        assert_eq!(
            p("https://192.168.1.8/x").as_deref(),
            Some("http://corp:3128")
        );
        assert_eq!(p("http://127.0.0.1:8080/v1"), None);
        assert_eq!(
            p("https://notinternal.example/x").as_deref(),
            Some("http://corp:3128")
        );
        let all = env(&[("ALL_PROXY", "socks5://s:1080"), ("no_proxy", "*")]);
        assert_eq!(proxy_from("https://x.example", &all), None);
        let all = env(&[("ALL_PROXY", "http://s:1")]);
        assert_eq!(
            proxy_from("https://x.example", &all).as_deref(),
            Some("http://s:1")
        );
        assert_eq!(proxy_from("https://x.example", &env(&[])), None);
    }

    #[test]
    fn roots_add_the_system_bundle_and_ssl_cert_file_to_the_built_in_ones() {
        let builtin = webpki_root_certs::TLS_SERVER_ROOT_CERTS.len();
        let count = |r: RootCerts| match r {
            RootCerts::Specific(c) => c.len(),
            other => panic!("{other:?}"),
        };
        assert_eq!(count(roots_from(&[], None, None)), builtin);
        // A private CA in a file of its own, and a bundle repeating a built-in root.
        let dir = tempfile::tempdir().unwrap();
        let der = webpki_root_certs::TLS_SERVER_ROOT_CERTS[0]
            .as_ref()
            .to_vec();
        let pem = |der: &[u8]| {
            let b64 = base64(der);
            let lines: Vec<&str> = b64
                .as_bytes()
                .chunks(64)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect();
            format!(
                "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
                lines.join("\n")
            )
        };
        let mut private = der.clone();
        // Not a valid certificate, but a distinct one: it is the parser's to judge later.
        private.push(0);
        std::fs::write(dir.path().join("bundle.pem"), pem(&der)).unwrap();
        std::fs::write(dir.path().join("corp.pem"), pem(&private)).unwrap();
        let sub = dir.path().join("certs");
        std::fs::create_dir(&sub).unwrap();
        let mut other = der.clone();
        other.extend_from_slice(&[1, 2]);
        std::fs::write(sub.join("abcd1234.0"), pem(&other)).unwrap();
        let bundle = dir.path().join("bundle.pem").display().to_string();
        let r = roots_from(
            &["/nonexistent/bundle.crt", bundle.as_str()],
            Some(dir.path().join("corp.pem").as_os_str()),
            Some(sub.as_os_str()),
        );
        assert_eq!(count(r), builtin + 2);
    }

    fn base64(data: &[u8]) -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for c in data.chunks(3) {
            let n = (u32::from(c[0]) << 16)
                | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
                | u32::from(*c.get(2).unwrap_or(&0));
            for i in 0..4 {
                if i <= c.len() {
                    out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    #[test]
    fn loopback_urls() {
        assert!(is_loopback_url("http://127.0.0.1:8080/v1"));
        assert!(is_loopback_url("http://localhost"));
        assert!(is_loopback_url("http://[::1]:11434/v1"));
        assert!(is_local_url("http://192.168.1.20:8080/v1"));
        assert!(is_local_url("http://10.0.0.5:11434"));
        assert!(is_local_url("http://[fd00::1]:1234/v1"));
        assert!(is_local_url("http://gpu-box.local:8080"));
        assert!(!is_local_url("https://api.openai.com/v1"));
        assert!(!is_local_url("http://8.8.8.8/v1"));
        assert!(is_loopback_url("http://user:pw@127.0.0.2/"));
        assert!(!is_loopback_url("https://api.anthropic.com"));
        assert!(!is_loopback_url("http://10.0.0.1:8080"));
        assert!(!is_loopback_url("http://localhost.example.com"));
    }

    #[test]
    fn web_urls_are_http_or_https_with_a_host() {
        assert!(check_web_url("https://e.x/a").is_ok());
        assert!(check_web_url(" HTTP://e.x").is_ok());
        for bad in [
            "file:///etc/passwd",
            "ftp://x",
            "http://",
            "http:///p",
            "javascript:1",
            "x",
        ] {
            assert!(check_web_url(bad).is_err(), "{bad}");
        }
        assert_eq!(
            check_web_url("ftp://x"),
            Err(NotWeb::Scheme("ftp://x".into()))
        );
        assert_eq!(check_web_url("http:///p"), Err(NotWeb::NoHost));
        let req = WebRequest::get("file:///etc/passwd", Duration::from_secs(1));
        let e = web(&req).err().unwrap();
        assert!(matches!(e, WebError::Blocked(NotWeb::Scheme(_))), "{e}");
        assert_eq!(
            e.to_string(),
            "URL must start with http:// or https:// (got file:///etc/passwd)"
        );
    }

    #[test]
    fn a_canceled_request_returns_at_once_with_its_cause() {
        let cancel = std::sync::atomic::AtomicBool::new(true);
        let r: Result<(), WebError> = cancellable(&cancel, || {
            std::thread::sleep(Duration::from_secs(5));
            Ok(())
        });
        assert!(matches!(r, Err(WebError::Canceled)));
        let done = std::sync::atomic::AtomicBool::new(false);
        let r: Result<u8, WebError> = cancellable(&done, || Err(WebError::TimedOut(3)));
        assert_eq!(r.err().unwrap().to_string(), "timed out after 3 s");
    }

    #[test]
    fn locations_resolve_against_the_url_that_sent_them() {
        let base = "http://h:1/a/b/c?q=1";
        assert_eq!(resolve_location(base, "https://o/x"), "https://o/x");
        assert_eq!(resolve_location(base, "//o/x"), "http://o/x");
        assert_eq!(resolve_location(base, "/x?y"), "http://h:1/x?y");
        assert_eq!(resolve_location(base, "d"), "http://h:1/a/b/d");
        assert_eq!(resolve_location(base, "?z"), "http://h:1/a/b/c?z");
        assert_eq!(resolve_location("http://h", "d"), "http://h/d");
        assert_eq!(
            resolve_location(base, "file:///etc/passwd"),
            "file:///etc/passwd"
        );
        assert_eq!(
            resolve_location(base, "data:text/plain,x"),
            "data:text/plain,x"
        );
    }

    #[test]
    fn redirects_are_followed_and_checked() {
        use test_server::{Canned, serve};
        let served = serve(vec![
            Canned::new(302, "").header("Location", "/next"),
            Canned::new(200, "landed"),
            Canned::new(301, "").header("Location", "file:///etc/passwd"),
        ]);
        let base = served.url.clone();
        let t = Duration::from_secs(5);
        let mut r = web(&WebRequest::get(&format!("{base}/start"), t)).unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.url, format!("{base}/next"));
        assert_eq!(r.read_capped(3).unwrap(), (b"lan".to_vec(), true));
        let seen = served.seen.lock().unwrap().clone();
        assert_eq!(seen[1].line, "GET /next HTTP/1.1");
        assert!(seen[1].body.is_empty());
        let err = web(&WebRequest::get(&base, t)).err().unwrap();
        assert!(
            err.to_string().contains("refused a redirect")
                && err.to_string().contains("file:///etc/passwd"),
            "{err}"
        );
        let loops: Vec<_> = (0..=MAX_REDIRECTS)
            .map(|_| Canned::new(302, "").header("Location", "/again"))
            .collect();
        let base = serve(loops).url;
        let err = web(&WebRequest::get(&base, t)).err().unwrap();
        assert!(err.to_string().contains("too many redirects"), "{err}");
    }
}

/// A loopback HTTP server for unit tests: one canned response per connection, in order, and
/// every request it received.
#[cfg(test)]
pub(crate) mod test_server {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::{Arc, Mutex};

    pub(crate) struct Canned {
        pub status: u16,
        pub headers: Vec<(String, String)>,
        pub body: Vec<u8>,
        /// No Content-Length: the body ends when the connection closes.
        pub no_length: bool,
    }

    impl Canned {
        pub(crate) fn new(status: u16, body: impl Into<Vec<u8>>) -> Canned {
            Canned {
                status,
                headers: Vec::new(),
                body: body.into(),
                no_length: false,
            }
        }

        pub(crate) fn without_length(mut self) -> Canned {
            self.no_length = true;
            self
        }

        pub(crate) fn header(mut self, k: &str, v: &str) -> Canned {
            self.headers.push((k.to_string(), v.to_string()));
            self
        }
    }

    /// A request as received: the request line and the body.
    #[derive(Clone, Debug)]
    pub(crate) struct Seen {
        pub line: String,
        pub body: Vec<u8>,
    }

    pub(crate) struct Served {
        pub url: String,
        pub seen: Arc<Mutex<Vec<Seen>>>,
    }

    pub(crate) fn serve(responses: Vec<Canned>) -> Served {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for c in responses {
                let Ok((mut s, _)) = listener.accept() else {
                    return;
                };
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut first = String::new();
                let _ = r.read_line(&mut first);
                let mut len = 0usize;
                let mut line = String::new();
                while r.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    line.clear();
                }
                let mut body = vec![0u8; len];
                let _ = r.read_exact(&mut body);
                log.lock().unwrap().push(Seen {
                    line: first.trim_end().to_string(),
                    body,
                });
                let mut head = format!("HTTP/1.1 {} X\r\n", c.status);
                for (k, v) in &c.headers {
                    head.push_str(&format!("{k}: {v}\r\n"));
                }
                if !c.no_length
                    && !c
                        .headers
                        .iter()
                        .any(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                {
                    head.push_str(&format!("Content-Length: {}\r\n", c.body.len()));
                }
                head.push_str("Connection: close\r\n\r\n");
                let _ = s.write_all(head.as_bytes());
                let _ = s.write_all(&c.body);
            }
        });
        Served {
            url: format!("http://{addr}"),
            seen,
        }
    }
}
