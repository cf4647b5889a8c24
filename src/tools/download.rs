//! The `download` tool: a URL saved to a file, streaming and binary-safe, through the one web
//! request path (`net::web`: http(s) only, redirects checked, proxies honoured), with a size
//! limit (`CRUSH_DOWNLOAD_MAX_BYTES`, default 100 MB) checked against the announced length
//! before anything is written and against the bytes as they arrive. The file appears whole or
//! not at all (a temporary file renamed into place) and the change enters the file history.

use super::common::{display_path, opt_u64, read_regular, req_str, resolve};
use super::{Content, PermissionRequest, Tool, ToolCtx, ToolError, ToolOutput};
use crate::net::WebError;
use crate::store::MAX_KEPT_BYTES;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub(crate) struct Download;

pub(crate) const DEFAULT_TIMEOUT_SECS: u64 = 300;
pub(crate) const MAX_TIMEOUT_SECS: u64 = 600;
pub(crate) const DEFAULT_MAX_BYTES: u64 = 100 * 1024 * 1024;

/// The size limit: `CRUSH_DOWNLOAD_MAX_BYTES`, else 100 MB.
fn max_bytes() -> u64 {
    std::env::var("CRUSH_DOWNLOAD_MAX_BYTES")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_MAX_BYTES)
}

fn timeout_secs(input: &Value) -> Result<u64, ToolError> {
    Ok(opt_u64(input, "timeout")?
        .filter(|t| *t > 0)
        .unwrap_or(DEFAULT_TIMEOUT_SECS)
        .min(MAX_TIMEOUT_SECS))
}

/// The URL and the file, checked.
fn target(input: &Value, ctx: &ToolCtx) -> Result<(String, PathBuf), ToolError> {
    let url = req_str(input, "url")?.trim().to_string();
    crate::net::check_web_url(&url)?;
    let path = resolve(ctx, req_str(input, "file_path")?)?;
    if path.is_dir() {
        return Err(format!("{} is a directory, not a file", path.display()).into());
    }
    timeout_secs(input)?;
    Ok((url, path))
}

/// Why `fetch_to` has no file.
#[derive(Debug)]
enum Failed {
    Web(WebError),
    /// The server answered with this status, not 200.
    Status(u16),
    /// The body is larger than the limit: as announced (Some), or as it arrived.
    TooLarge {
        size: Option<u64>,
        limit: u64,
    },
    /// The temporary file could not be created, written or synced.
    CreateTemp(PathBuf, std::io::Error),
    WriteTemp(PathBuf, std::io::Error),
    SyncTemp(std::io::Error),
    Canceled,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::Web(e) => write!(f, "{e}"),
            Failed::Status(n) => write!(f, "Request failed with status code: {n}"),
            Failed::TooLarge {
                size: Some(n),
                limit,
            } => write!(
                f,
                "the download is too large: {n} bytes, more than the limit of {limit} bytes \
                 (CRUSH_DOWNLOAD_MAX_BYTES); nothing was written"
            ),
            Failed::TooLarge { size: None, limit } => write!(
                f,
                "the download is too large: more than the limit of {limit} bytes arrived \
                 (CRUSH_DOWNLOAD_MAX_BYTES); nothing was written"
            ),
            Failed::CreateTemp(p, e) => write!(f, "cannot create {}: {e}", p.display()),
            Failed::WriteTemp(p, e) => write!(f, "cannot write {}: {e}", p.display()),
            Failed::SyncTemp(e) => write!(f, "{e}"),
            Failed::Canceled => f.write_str("download canceled"),
        }
    }
}

impl From<WebError> for Failed {
    fn from(e: WebError) -> Failed {
        match e {
            WebError::Canceled => Failed::Canceled,
            e => Failed::Web(e),
        }
    }
}

impl From<Failed> for ToolError {
    fn from(e: Failed) -> ToolError {
        match e {
            Failed::Web(e) => e.into(),
            // crush's own file, not the model's.
            Failed::CreateTemp(..) | Failed::WriteTemp(..) | Failed::SyncTemp(_) => {
                ToolError::Internal(e.to_string())
            }
            e => ToolError::RespondToModel(e.to_string()),
        }
    }
}

/// What arrived: its size and content type.
struct Got {
    bytes: u64,
    content_type: String,
    /// Where the bytes came from, after redirects.
    final_url: String,
}

/// Fetches `url` into the temporary file `tmp`, at most `limit` bytes, stopping when `cancel`
/// is set. The file is removed on any failure.
fn fetch_to(
    url: &str,
    tmp: &Path,
    limit: u64,
    timeout: Duration,
    cancel: &AtomicBool,
    env: &crate::env::Overlay,
) -> Result<Got, Failed> {
    let mut resp = crate::net::web(&crate::net::WebRequest::get(url, timeout).env(env))?;
    if resp.status() != 200 {
        return Err(Failed::Status(resp.status()));
    }
    if let Some(n) = resp.content_length().filter(|n| *n > limit) {
        return Err(Failed::TooLarge {
            size: Some(n),
            limit,
        });
    }
    let content_type = resp.header("content-type");
    let final_url = resp.url.clone();
    let mut file =
        std::fs::File::create(tmp).map_err(|e| Failed::CreateTemp(tmp.to_path_buf(), e))?;
    let mut reader = resp.reader();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    let result = loop {
        if cancel.load(Ordering::Relaxed) {
            break Err(Failed::Canceled);
        }
        match reader.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => {
                total += n as u64;
                if total > limit {
                    break Err(Failed::TooLarge { size: None, limit });
                }
                if let Err(e) = file.write_all(&buf[..n]) {
                    break Err(Failed::WriteTemp(tmp.to_path_buf(), e));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => break Err(WebError::Read(e).into()),
        }
    };
    let result = result.and_then(|()| file.sync_all().map_err(Failed::SyncTemp));
    if let Err(e) = result {
        let _ = std::fs::remove_file(tmp);
        return Err(e);
    }
    Ok(Got {
        bytes: total,
        content_type,
        final_url,
    })
}

/// A file's content for the history: its bytes, unless it is larger than the history keeps.
fn snapshot(path: &Path) -> Option<Vec<u8>> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.len() > MAX_KEPT_BYTES as u64 {
        return None;
    }
    read_regular(path).ok()
}

fn download(input: &Value, ctx: &ToolCtx, limit: u64) -> Result<ToolOutput, ToolError> {
    let (url, path) = target(input, ctx)?;
    let timeout = Duration::from_secs(timeout_secs(input)?);
    let dir = path
        .parent()
        .ok_or_else(|| format!("{} has no directory", path.display()))?
        .to_path_buf();
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("cannot create directory {}: {e}", dir.display()))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.crush-download-{}", std::process::id()));
    let worker_cancel = Arc::new(AtomicBool::new(false));
    let (u, t, c, env) = (
        url.clone(),
        tmp.clone(),
        worker_cancel.clone(),
        ctx.env.clone(),
    );
    let got = crate::net::cancellable(&ctx.cancel, move || {
        fetch_to(&u, &t, limit, timeout, &c, &env)
    });
    let got = match got {
        Ok(g) => g,
        Err(e) => {
            // A canceled worker stops at its next read and removes its file.
            worker_cancel.store(true, Ordering::Relaxed);
            return Err(e.into());
        }
    };
    let existed = path.exists();
    let before = if existed { snapshot(&path) } else { None };
    if let Err(e) = std::fs::rename(&tmp, &path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("cannot write {}: {e}", path.display()).into());
    }
    let after = snapshot(&path);
    fn content(exists: bool, bytes: &Option<Vec<u8>>) -> Content<'_> {
        match (exists, bytes) {
            (false, _) => Content::Absent,
            (true, Some(b)) => Content::Bytes(b),
            (true, None) => Content::Omitted,
        }
    }
    ctx.session
        .file_changed(&path, content(existed, &before), content(true, &after));
    let shown = display_path(ctx, &path);
    let mut text = format!("Successfully downloaded {} bytes to {shown}", got.bytes);
    if !got.content_type.is_empty() {
        text.push_str(&format!(" (Content-Type: {})", got.content_type));
    }
    Ok(ToolOutput {
        content: text,
        metadata: json!({
            "url": url,
            "final_url": got.final_url,
            "file_path": path.display().to_string(),
            "bytes": got.bytes,
            "content_type": got.content_type,
        }),
        ..Default::default()
    })
}

impl Tool for Download {
    fn name(&self) -> &'static str {
        "download"
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Fetch
    }

    fn read_only(&self) -> bool {
        false
    }

    fn title(&self, input: &Value, cwd: &Path) -> String {
        let to = super::common::shown_arg(input, "file_path", cwd)
            .map(|p| format!(" to {p}"))
            .unwrap_or_default();
        format!(
            "Download {}{to}",
            super::common::arg(input, "url").unwrap_or("")
        )
    }

    fn locations(&self, input: &Value, cwd: &Path) -> Vec<super::Location> {
        super::Location::of(input, "file_path", cwd)
            .into_iter()
            .collect()
    }

    fn description(&self) -> String {
        format!(
            "Download a URL (http or https) directly to a local file (binary-safe, streaming, \
             max {MAX_TIMEOUT_SECS} s timeout, default {DEFAULT_TIMEOUT_SECS} s); overwrites \
             without warning. Files larger than {} MB are refused. For reading content into \
             context use fetch.",
            max_bytes() / (1024 * 1024)
        )
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "The URL to download from"},
                "file_path": {
                    "type": "string",
                    "description": "The local file path where the downloaded content should be saved"
                },
                "timeout": {
                    "type": "integer",
                    "description": format!("Optional timeout in seconds (max {MAX_TIMEOUT_SECS})")
                }
            },
            "required": ["url", "file_path"]
        })
    }

    fn permission(
        &self,
        input: &Value,
        ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        let (url, path) = target(input, ctx)?;
        Ok(Some(PermissionRequest {
            tool: self.name().to_string(),
            action: "download",
            description: format!("Download {url} to {}", path.display()),
            path,
            diff: None,
            ..Default::default()
        }))
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        download(input, ctx, max_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::test_server::{Canned, serve};
    use crate::tools::testutil::{Fixture, Out};

    fn run(input: Value, fx: &Fixture, limit: u64) -> ToolOutput {
        match download(&input, &fx.ctx(), limit) {
            Ok(o) => o,
            Err(e) => ToolOutput::error(e),
        }
    }

    #[test]
    fn binary_bytes_arrive_whole_and_enter_the_history() {
        let fx = Fixture::new();
        let bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
        let url = serve(vec![
            Canned::new(200, bytes.clone()).header("Content-Type", "application/octet-stream"),
            Canned::new(200, b"second".to_vec()),
        ])
        .url;
        let out = run(
            json!({"url": format!("{url}/f.bin"), "file_path": "d/f.bin"}),
            &fx,
            1 << 20,
        );
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(
            out.content,
            "Successfully downloaded 70000 bytes to d/f.bin (Content-Type: application/octet-stream)"
        );
        assert_eq!(std::fs::read(fx.path("d/f.bin")).unwrap(), bytes);
        let out = run(json!({"url": url, "file_path": "d/f.bin"}), &fx, 1 << 20);
        assert!(!out.is_error, "{}", out.content);
        let changes = fx.reads.changes.lock().unwrap().clone();
        assert_eq!(changes.len(), 2);
        assert_eq!(changes[0].1, None);
        assert_eq!(changes[0].2.as_deref(), Some(bytes.as_slice()));
        assert_eq!(changes[1].1.as_deref(), Some(bytes.as_slice()));
        assert_eq!(changes[1].2.as_deref(), Some(&b"second"[..]));
        let leftovers: Vec<_> = std::fs::read_dir(fx.path("d")).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left");
    }

    #[test]
    fn a_temporary_file_that_cannot_be_made_is_crushs_failure_and_a_cancel_is_said() {
        let url = serve(vec![Canned::new(200, "abc"), Canned::new(200, "abc")]).url;
        let d = tempfile::tempdir().unwrap();
        let tmp = d.path().join("missing").join(".x.crush-download");
        let timeout = Duration::from_secs(5);
        let e = fetch_to(
            &url,
            &tmp,
            100,
            timeout,
            &AtomicBool::new(false),
            &Default::default(),
        )
        .err()
        .unwrap();
        assert!(matches!(&e, Failed::CreateTemp(p, _) if *p == tmp), "{e}");
        match ToolError::from(e) {
            ToolError::Internal(m) => assert!(m.starts_with("cannot create "), "{m}"),
            other => panic!("{other:?}"),
        }
        let tmp = d.path().join(".y.crush-download");
        let e = fetch_to(
            &url,
            &tmp,
            100,
            timeout,
            &AtomicBool::new(true),
            &Default::default(),
        )
        .err()
        .unwrap();
        assert!(matches!(e, Failed::Canceled), "{e}");
        assert_eq!(ToolError::from(e), "download canceled".into());
        assert!(!tmp.exists());
    }

    #[test]
    fn too_large_redirected_away_or_failing_downloads_write_nothing() {
        let fx = Fixture::new();
        let url = serve(vec![
            // A 2 GB file, announced: refused before a byte is read.
            Canned::new(200, Vec::new()).header("Content-Length", "2147483648"),
            Canned::new(302, "").header("Location", "file:///etc/passwd"),
            Canned::new(404, "nope"),
        ])
        .url;
        let out = run(json!({"url": url, "file_path": "big"}), &fx, 1 << 20);
        assert!(
            out.is_error && out.content.contains("2147483648 bytes"),
            "{}",
            out.content
        );
        let out = run(json!({"url": url, "file_path": "big"}), &fx, 1 << 20);
        assert!(
            out.is_error && out.content.contains("file:///etc/passwd"),
            "{}",
            out.content
        );
        let out = run(json!({"url": url, "file_path": "big"}), &fx, 1 << 20);
        assert!(
            out.is_error && out.content.contains("404"),
            "{}",
            out.content
        );
        // More bytes than allowed, with no length announced.
        let url = serve(vec![Canned::new(200, vec![b'x'; 5000]).without_length()]).url;
        let out = run(json!({"url": url, "file_path": "big"}), &fx, 1000);
        assert!(
            out.is_error && out.content.contains("too large"),
            "{}",
            out.content
        );
        assert_eq!(
            std::fs::read_dir(fx.root()).unwrap().count(),
            0,
            "nothing written"
        );
        assert!(fx.reads.changes.lock().unwrap().is_empty());
    }

    #[test]
    fn every_download_asks_with_its_own_action() {
        let fx = Fixture::new();
        let ctx = fx.ctx();
        let req = Download
            .permission(
                &json!({"url": "https://e.x/a.zip", "file_path": "a.zip"}),
                &ctx,
            )
            .unwrap()
            .unwrap();
        assert_eq!(req.action, "download");
        assert_eq!(req.path, fx.path("a.zip"));
        for bad in [
            json!({"url": "file:///etc/passwd", "file_path": "x"}),
            json!({"url": "https://e.x"}),
            json!({"url": "https://e.x", "file_path": "."}),
        ] {
            assert!(Download.permission(&bad, &ctx).is_err(), "{bad}");
            assert!(Download.run(&bad, &ctx).out().is_error, "{bad}");
        }
    }
}
