//! Opening a URL in the user's browser (crush(1) LOGIN, MCP SERVERS).

/// The host (`host[:port]`) of a URL the browser may be given: an http or https URL only. The
/// authorization server chooses the URL, and a browser (or `xdg-open`) would as readily open a
/// `file://` path, a `javascript:` URL or another program's scheme (crush(1) MCP SERVERS).
pub(crate) fn browser_host(url: &str) -> Result<String, NotWebUrl> {
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

/// The browser to hand a URL or page to: `$BROWSER` (its first entry), else `xdg-open` (or
/// `open` on macOS) when found on PATH.
fn browser_program() -> Option<String> {
    std::env::var("BROWSER")
        .ok()
        .and_then(|b| b.split(':').next().map(str::to_string))
        .filter(|b| !b.trim().is_empty())
        .or_else(|| {
            ["xdg-open", "open"]
                .iter()
                .find(|p| crate::proc::which(p).is_some())
                .map(|p| p.to_string())
        })
}

/// Opens `url` in the user's browser: `$BROWSER`, else `xdg-open` (or `open` on macOS), on a
/// thread of its own (a browser may not return at once). Anything but an http or https URL is
/// refused ([`browser_host`]).
pub(crate) fn open_browser(url: &str, cwd: &std::path::Path) -> Result<(), NotWebUrl> {
    browser_host(url)?;
    let Some(program) = browser_program() else {
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

/// The `file://` URL of an absolute path, its bytes outside the unreserved set and `/`
/// percent-encoded.
pub(crate) fn file_url(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut url = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            url.push(b as char);
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
    url
}

/// Opens a page crush wrote, an existing file given by its absolute path, in the browser as a
/// `file://` URL; the browser is left running on its own when crush exits. False when no
/// browser is known or it could not be started.
pub(crate) fn open_page(page: &std::path::Path) -> bool {
    if !page.is_absolute() || !page.is_file() {
        return false;
    }
    let Some(program) = browser_program() else {
        return false;
    };
    std::process::Command::new(program)
        .arg(file_url(page))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .is_ok()
}
