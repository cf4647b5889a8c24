//! File-system helpers every module shares: atomic replacement of a file, an exclusive lock,
//! private directories and files (crush(1) FILES: data directories 0700, their files 0600), and
//! the one way a file is opened for reading when it may be anything (crush(1) SECURITY: a
//! repository can ship `crush.json -> /dev/zero` or a link to a FIFO).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// An exclusive `flock` on a lock file, released on drop (closing the descriptor).
pub(crate) struct Lock {
    _file: File,
}

impl Lock {
    pub(crate) fn acquire(path: &Path) -> io::Result<Lock> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)?;
        loop {
            // SAFETY: flock on a descriptor we own and keep open for the lock's lifetime.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                return Ok(Lock { _file: file });
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}

/// Creates `dir` (and missing parents) with mode 0700, or makes an existing one 0700. A directory
/// that is not the user's own — owned by another user, or a symbolic link to one — is refused
/// (`PermissionDenied`, naming the owner): what crush stores there would be theirs to read.
pub(crate) fn private_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    let meta = fs::metadata(dir)?;
    if !meta.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    if meta.uid() != me {
        let link = fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink());
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{}{} is owned by another user (uid {}), not by you (uid {me}): refusing to keep data there",
                dir.display(),
                if link { " (a symbolic link)" } else { "" },
                meta.uid()
            ),
        ));
    }
    // A sticky directory (/tmp, /var/tmp) is shared by design: its mode is left alone, and
    // what crush keeps there is private by its own mode (0600 files).
    let mode = meta.permissions().mode();
    if mode & 0o1000 == 0 && mode & 0o777 != 0o700 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Makes `file` readable and writable by its owner only (0600) when it exists; creates it empty
/// with that mode when `create` and it does not.
pub(crate) fn private_file(file: &Path, create: bool) -> io::Result<()> {
    match fs::metadata(file) {
        Ok(m) if m.permissions().mode() & 0o777 != 0o600 => {
            fs::set_permissions(file, fs::Permissions::from_mode(0o600))
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound && create => OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(file)
            .map(drop),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes `bytes` to a temp file (mode 0600, a name unique to this process and call) in the same
/// directory, fsyncs it, renames it over `file` and syncs the directory. Shared by every file
/// crush rewrites in place (projects.json, state.json, the provider catalog cache).
pub(crate) fn write_atomic(file: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_mode(file, bytes, 0o600)
}

/// `write_atomic` with the file created at `mode` (before the umask).
pub(crate) fn write_atomic_mode(file: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = file
        .parent()
        .ok_or_else(|| io::Error::other(format!("{} has no parent directory", file.display())))?;
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.tmp.{}.{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, file)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
        return result;
    }
    // Make the rename durable; not fatal where directories cannot be synced.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// The most of a configuration or state file crush reads (crush(1) FILES): a project file larger
/// than this is refused with an error naming it.
pub(crate) const CONFIG_CAP: u64 = 4 << 20;

/// Whether `open_regular` follows a symbolic link at the path itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Links {
    /// A link to a regular file is read as that file (configuration files: a repository may
    /// link a shared `crush.json`).
    Follow,
    /// The path must be the file itself (tool paths are resolved first; a walk must not leave
    /// the tree through a link).
    Refuse,
}

/// What kind of file `t` is, for messages.
pub(crate) fn file_kind(t: &fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "a regular file"
    }
}

/// Opens `path` for reading only if it is a regular file. A FIFO, socket, device or directory
/// is refused before it is opened (reading one can block forever or never end), and checked
/// again on the open descriptor, which is opened non-blocking in case the path was replaced in
/// between. Err with `ErrorKind::InvalidInput` and a message naming the path and the kind for
/// anything else; `NotFound` when nothing is there.
pub(crate) fn open_regular(path: &Path, links: Links) -> io::Result<(File, fs::Metadata)> {
    let not_regular = |t: &fs::FileType| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is {}, not a regular file", path.display(), file_kind(t)),
        )
    };
    let meta = match links {
        Links::Follow => fs::metadata(path)?,
        Links::Refuse => fs::symlink_metadata(path)?,
    };
    if !meta.is_file() {
        return Err(not_regular(&meta.file_type()));
    }
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY;
    if links == Links::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let file = File::options().read(true).custom_flags(flags).open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(&meta.file_type()));
    }
    Ok((file, meta))
}

/// The contents of the regular file `path` (see `open_regular`), at most `cap` bytes: a larger
/// file is `ErrorKind::FileTooLarge`, naming the path and the limit. Only what is there is read,
/// never more than `cap + 1` bytes whatever the file claims.
pub(crate) fn read_regular(path: &Path, links: Links, cap: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let (file, meta) = open_regular(path, links)?;
    let too_large = || {
        io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!(
                "{} is larger than {} (the limit for this file)",
                path.display(),
                size_text(cap)
            ),
        )
    };
    if meta.len() > cap {
        return Err(too_large());
    }
    let mut data = Vec::with_capacity(meta.len().min(1 << 20) as usize);
    file.take(cap.saturating_add(1)).read_to_end(&mut data)?;
    if data.len() as u64 > cap {
        return Err(too_large());
    }
    Ok(data)
}

/// A configuration or state file (`read_regular` with links followed, up to `CONFIG_CAP`):
/// None when it does not exist.
pub(crate) fn read_config(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match read_regular(path, Links::Follow, CONFIG_CAP) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Why a file could not be read, as a message that names it: the helpers' own messages
/// already do; an OS error gets the path in front.
pub(crate) fn read_error(path: &Path, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::InvalidInput | io::ErrorKind::FileTooLarge => e.to_string(),
        _ => format!("{}: cannot read: {e}", path.display()),
    }
}

fn size_text(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::time::{Duration, Instant};

    #[test]
    fn a_private_dir_is_made_0700_but_a_shared_sticky_one_is_left_as_it_is() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        let own = t.path().join("own");
        fs::create_dir(&own).unwrap();
        fs::set_permissions(&own, fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&own).unwrap();
        assert_eq!(mode(&own), 0o700);
        let shared = t.path().join("shared");
        fs::create_dir(&shared).unwrap();
        fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).unwrap();
        private_dir(&shared).unwrap();
        assert_eq!(mode(&shared), 0o1777, "a /tmp-like folder keeps its mode");
    }

    #[test]
    fn only_regular_files_are_read_and_never_past_the_cap() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        fs::write(d.join("f"), b"{}").unwrap();
        symlink(d.join("f"), d.join("to-f")).unwrap();
        symlink("/dev/zero", d.join("zero")).unwrap();
        let fifo = d.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string naming a path in our own temporary directory.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        symlink(&fifo, d.join("to-fifo")).unwrap();
        let start = Instant::now();
        assert_eq!(read_config(&d.join("to-f")).unwrap().unwrap(), b"{}");
        assert!(read_config(&d.join("missing")).unwrap().is_none());
        for (name, kind) in [
            ("zero", "a device"),
            ("to-fifo", "a FIFO"),
            ("fifo", "a FIFO"),
        ] {
            let e = read_config(&d.join(name)).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{name}");
            let msg = read_error(&d.join(name), &e);
            assert!(msg.contains(name) && msg.contains(kind), "{msg}");
        }
        let e = read_config(Path::new("/dev/stdin")).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert!(start.elapsed() < Duration::from_secs(1));
        // A link is refused where links must not be followed.
        let e = open_regular(&d.join("to-f"), Links::Refuse).unwrap_err();
        assert!(e.to_string().contains("a symbolic link"), "{e}");
        fs::write(d.join("big"), vec![b' '; 11]).unwrap();
        assert_eq!(
            read_regular(&d.join("big"), Links::Follow, 11)
                .unwrap()
                .len(),
            11
        );
        let e = read_regular(&d.join("big"), Links::Follow, 10).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
        assert!(e.to_string().contains("larger than 10 bytes"), "{e}");
        assert_eq!(size_text(CONFIG_CAP), "4 MiB");
    }
}
