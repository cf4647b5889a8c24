//! Opening a URL in the user's browser (crush(1) LOGIN, MCP SERVERS).

/// The host (`host[:port]`) of a URL the browser may be given: an http or https URL only. The
/// authorization server chooses the URL, and a browser (or `xdg-open`) would as readily open a
/// `file://` path, a `javascript:` URL or another program's scheme (crush(1) MCP SERVERS).
pub fn browser_host(url: &str) -> Result<String, NotWebUrl> {
    let authority = url.split_once("://").and_then(|(scheme, rest)| {
        let web = scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https");
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let a = rest[..end].rsplit('@').next().unwrap_or("");
        (web && !a.is_empty() && !a.contains(char::is_whitespace)).then(|| a.to_ascii_lowercase())
    });
    match authority {
        Some(a) => Ok(a),
        _ => Err(NotWebUrl(url.chars().take(200).collect())),
    }
}

/// A URL crush will not hand to the browser (the first 200 characters of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotWebUrl(pub String);

impl std::fmt::Display for NotWebUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the authorization server's URL is not an http or https URL, so it is not opened: {}",
            crate::visible::line(&self.0)
        )
    }
}

impl std::error::Error for NotWebUrl {}

impl From<NotWebUrl> for String {
    fn from(e: NotWebUrl) -> String {
        e.to_string()
    }
}

/// Opens `url` in the user's browser: `$BROWSER`, else `xdg-open` (or `open` on macOS), on a
/// thread of its own (a browser may not return at once). Anything but an http or https URL is
/// refused ([`browser_host`]).
pub fn open_browser(url: &str, cwd: &std::path::Path) -> Result<(), NotWebUrl> {
    browser_host(url)?;
    let program = std::env::var("BROWSER")
        .ok()
        .and_then(|b| b.split(':').next().map(str::to_string))
        .filter(|b| !b.trim().is_empty())
        .or_else(|| {
            ["xdg-open", "open"]
                .iter()
                .find(|p| crate::proc::which(p).is_some())
                .map(|p| p.to_string())
        });
    let Some(program) = program else {
        return Ok(());
    };
    let spec = crate::proc::Spec::exec(vec![program, url.to_string()], cwd);
    let _ = std::thread::Builder::new()
        .name("mcp-browser".into())
        .spawn(move || {
            let _ = crate::proc::run(&spec);
        });
    Ok(())
}
