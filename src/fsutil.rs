//! File-system helpers every module shares: atomic replacement of a file, an exclusive lock, and
//! private directories and files (crush(1) FILES: data directories 0700, their files 0600).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// An exclusive `flock` on a lock file, released on drop (closing the descriptor).
pub struct Lock {
    _file: File,
}

impl Lock {
    pub fn acquire(path: &Path) -> io::Result<Lock> {
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
pub fn private_dir(dir: &Path) -> io::Result<()> {
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
    if meta.permissions().mode() & 0o777 != 0o700 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Makes `file` readable and writable by its owner only (0600) when it exists; creates it empty
/// with that mode when `create` and it does not.
pub fn private_file(file: &Path, create: bool) -> io::Result<()> {
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
pub fn write_atomic(file: &Path, bytes: &[u8]) -> io::Result<()> {
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
            .mode(0o600)
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
