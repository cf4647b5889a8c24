//! The on-disk cache (`<global data>/providers.json`) and its metadata
//! (`providers.meta.json`: the server's ETag, the URL it belongs to, when it was last checked),
//! written atomically, plus the HTTP fetch with `If-None-Match`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub(crate) const CACHE_FILE: &str = "providers.json";
pub(crate) const META_FILE: &str = "providers.meta.json";

/// What we remember about the cache.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Meta {
    /// The `ETag` header value exactly as the server sent it (quotes included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// The URL the cache (and the ETag) came from; None for a file or the embedded copy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Unix seconds of the last refresh attempt.
    pub checked: u64,
    /// Whether that attempt succeeded (200 or 304).
    pub ok: bool,
}

pub(crate) fn now_secs() -> u64 {
    u64::try_from(crate::time::unix_now()).unwrap_or(0)
}

/// The split of the cache ([`super::split`]), kept so a start does not scan the cache again;
/// it names the cache's length and modification time and is ignored when either differs.
pub(crate) const INDEX_FILE: &str = "providers.index.json";

#[derive(Serialize, Deserialize)]
struct Index {
    len: usize,
    mtime_ns: i128,
    rows: Vec<[usize; 4]>,
}

fn mtime_ns(path: &Path) -> Option<i128> {
    let t = std::fs::metadata(path).ok()?.modified().ok()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(d.as_nanos() as i128)
}

/// The kept split of the cache at `cache` (`len` bytes), when it is the split of this file.
pub(crate) fn read_index(dir: &Path, cache: &Path, len: usize) -> Option<Vec<super::split::Entry>> {
    let bytes = std::fs::read(dir.join(INDEX_FILE)).ok()?;
    let index: Index = serde_json::from_slice(&bytes).ok()?;
    (index.len == len && Some(index.mtime_ns) == mtime_ns(cache))
        .then(|| super::split::from_rows(&index.rows))
}

/// Keeps the split of the cache; failing only means the next start splits it again.
pub(crate) fn write_index(dir: &Path, cache: &Path, len: usize, rows: &[[usize; 4]]) {
    let Some(mtime_ns) = mtime_ns(cache) else {
        return;
    };
    let index = Index {
        len,
        mtime_ns,
        rows: rows.to_vec(),
    };
    if let Ok(text) = serde_json::to_vec(&index) {
        let _ = write_atomic(&dir.join(INDEX_FILE), &text);
    }
}

pub(crate) fn cache_path(dir: &Path) -> PathBuf {
    dir.join(CACHE_FILE)
}

pub(crate) fn meta_path(dir: &Path) -> PathBuf {
    dir.join(META_FILE)
}

/// The metadata, or the default when missing or unreadable (it is only a hint).
pub(crate) fn read_meta(dir: &Path) -> Meta {
    std::fs::read(meta_path(dir))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

pub(crate) fn write_meta(dir: &Path, meta: &Meta) -> Result<(), WriteError> {
    // Serialising plain strings and numbers cannot fail.
    let bytes = serde_json::to_vec(meta).unwrap_or_default();
    write_atomic(&meta_path(dir), &bytes)
}

/// A file of the cache could not be written; the file is as it was.
#[derive(Debug)]
pub(crate) enum WriteError {
    /// The directory that holds it could not be created.
    Dir {
        dir: PathBuf,
        source: io::Error,
    },
    File {
        path: PathBuf,
        source: io::Error,
    },
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Dir { dir, source } => {
                write!(f, "cannot create the directory {}: {source}", dir.display())
            }
            WriteError::File { path, source } => {
                write!(f, "cannot write {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for WriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WriteError::Dir { source, .. } | WriteError::File { source, .. } => Some(source),
        }
    }
}

/// Writes `bytes` atomically (`fsutil::write_atomic`: a private temp file beside
/// `path`, fsynced, renamed over `path`, the directory synced), creating the directory first.
/// Readers (and other crush processes) see the old file or the new one, never half of one; on
/// any failure `path` is untouched.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    crate::fsutil::private_dir(dir).map_err(|source| WriteError::Dir {
        dir: dir.to_path_buf(),
        source,
    })?;
    crate::fsutil::write_atomic(path, bytes).map_err(|source| WriteError::File {
        path: path.to_path_buf(),
        source,
    })
}

/// The answer to a catalog request.
#[derive(Debug)]
pub(crate) enum Fetched {
    /// 304: the cache is current.
    NotModified,
    Body {
        bytes: Vec<u8>,
        etag: Option<String>,
    },
}

/// Why a catalog request got no usable answer.
#[derive(Debug)]
pub(crate) enum FetchError {
    /// The worker thread could not be started.
    Spawn(io::Error),
    /// Nothing (or not all of it) within this limit.
    Timeout(Duration),
    /// The request failed (name resolution, connection, TLS...).
    Request(ureq::Error),
    /// A status other than 200 and 304.
    Status(u16),
    /// The body could not be read.
    Body(ureq::Error),
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchError::Spawn(e) => write!(f, "cannot start the download: {e}"),
            FetchError::Timeout(t) => write!(f, "no answer within {} ms", t.as_millis()),
            FetchError::Request(e) => write!(f, "{e}"),
            FetchError::Status(status) => write!(f, "HTTP {status}"),
            FetchError::Body(e) => write!(f, "reading the reply: {e}"),
        }
    }
}

impl std::error::Error for FetchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FetchError::Spawn(e) => Some(e),
            FetchError::Request(e) | FetchError::Body(e) => Some(e),
            FetchError::Timeout(_) | FetchError::Status(_) => None,
        }
    }
}

/// `GET url` (with `If-None-Match: etag` when given), all of it within `timeout`. Runs on a worker
/// thread and is abandoned at the deadline, so a resolver or a server that hangs cannot hold the
/// caller longer than `timeout` (plus a few milliseconds).
pub(crate) fn fetch(
    url: &str,
    etag: Option<&str>,
    timeout: Duration,
) -> Result<Fetched, FetchError> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let (u, e) = (url.to_string(), etag.map(str::to_string));
    std::thread::Builder::new()
        .name("catalog-fetch".into())
        .spawn(move || {
            let _ = tx.send(fetch_blocking(&u, e.as_deref(), timeout));
        })
        .map_err(FetchError::Spawn)?;
    match rx.recv_timeout(timeout + Duration::from_millis(50)) {
        Ok(r) => r,
        Err(_) => Err(FetchError::Timeout(timeout)),
    }
}

fn fetch_blocking(url: &str, etag: Option<&str>, timeout: Duration) -> Result<Fetched, FetchError> {
    let agent = crate::net::agent(
        url,
        crate::net::Timeouts {
            global: Some(timeout),
            ..Default::default()
        },
    );
    let mut req = agent.get(url).header("accept", "application/json");
    if let Some(tag) = etag {
        req = req.header("if-none-match", tag);
    }
    let mut resp = req.call().map_err(|e| match e {
        ureq::Error::Timeout(_) => FetchError::Timeout(timeout),
        other => FetchError::Request(other),
    })?;
    let status = resp.status().as_u16();
    if status == 304 {
        return Ok(Fetched::NotModified);
    }
    if status != 200 {
        return Err(FetchError::Status(status));
    }
    let etag = resp
        .headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .filter(|t| !t.is_empty());
    let bytes = resp
        .body_mut()
        .with_config()
        .limit(64 * 1024 * 1024)
        .read_to_vec()
        .map_err(FetchError::Body)?;
    Ok(Fetched::Body { bytes, etag })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("sub").join("f.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn concurrent_atomic_writes_never_collide() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("providers.json");
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let p = p.clone();
                std::thread::spawn(move || {
                    for j in 0..50 {
                        write_atomic(&p, format!("{i}-{j}").as_bytes()).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let names: Vec<_> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        // Private to the user, like the other files crush writes.
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_failed_write_names_the_file_and_keeps_the_io_error() {
        use std::error::Error;
        let t = tempfile::tempdir().unwrap();
        let blocker = t.path().join("file");
        std::fs::write(&blocker, b"x").unwrap();
        let e = write_atomic(&blocker.join("f.json"), b"{}").unwrap_err();
        assert!(matches!(e, WriteError::Dir { .. }), "{e:?}");
        let io = e.source().unwrap().downcast_ref::<io::Error>().unwrap();
        assert_eq!(
            e.to_string(),
            format!("cannot create the directory {}: {io}", blocker.display())
        );
        // A directory where the file should be: the rename over it fails (one inside the
        // test's own directory, so the write never touches the system's temporary folder).
        let target = t.path().join("dir");
        std::fs::create_dir(&target).unwrap();
        let e = write_atomic(&target, b"{}").unwrap_err();
        assert!(matches!(e, WriteError::File { .. }), "{e:?}");
        let io = e.source().unwrap().downcast_ref::<io::Error>().unwrap();
        assert_eq!(
            e.to_string(),
            format!("cannot write {}: {io}", target.display())
        );
    }

    #[test]
    fn a_failed_fetch_keeps_the_http_error_or_says_the_status() {
        use std::error::Error;
        use std::io::{Read, Write};
        let wait = Duration::from_secs(5);
        // Nothing listens on a port just freed: the connection is refused.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = fetch(&format!("http://127.0.0.1:{port}/v2/providers"), None, wait).unwrap_err();
        assert!(matches!(e, FetchError::Request(_)), "{e:?}");
        let cause = e.source().unwrap().downcast_ref::<ureq::Error>().unwrap();
        assert_eq!(e.to_string(), cause.to_string());

        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        let answer = std::thread::spawn(move || {
            let (mut conn, _) = server.accept().unwrap();
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf).unwrap();
            conn.write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n")
                .unwrap();
        });
        let e = fetch(&format!("http://{addr}/v2/providers"), None, wait).unwrap_err();
        answer.join().unwrap();
        assert!(matches!(e, FetchError::Status(503)), "{e:?}");
        assert_eq!(e.to_string(), "HTTP 503");
        assert!(e.source().is_none());
    }

    #[test]
    fn meta_round_trips_and_tolerates_garbage() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(read_meta(t.path()), Meta::default());
        let m = Meta {
            etag: Some("\"abc\"".into()),
            url: Some("http://x/v2/providers".into()),
            checked: 42,
            ok: true,
        };
        write_meta(t.path(), &m).unwrap();
        assert_eq!(read_meta(t.path()), m);
        std::fs::write(meta_path(t.path()), b"{nope").unwrap();
        assert_eq!(read_meta(t.path()), Meta::default());
    }
}
