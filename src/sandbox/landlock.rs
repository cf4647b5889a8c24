//! Landlock through its three syscalls (crush(1) SECURITY, sandbox): the ABI the kernel offers,
//! and a ruleset built before fork that a child restricts itself with.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: libc::c_int = 1;

const FS_EXECUTE: u64 = 1 << 0;
const FS_WRITE_FILE: u64 = 1 << 1;
const FS_READ_FILE: u64 = 1 << 2;
const FS_READ_DIR: u64 = 1 << 3;
/// ABI 1's rights: bits 0 to 12 (execute, write and read files, read directories, remove and
/// make every kind of entry).
const FS_ABI1: u64 = (1 << 13) - 1;
const FS_REFER: u64 = 1 << 13;
const FS_TRUNCATE: u64 = 1 << 14;
/// What a rule on a file (not a directory) may grant.
const FS_FILE: u64 = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE;
const FS_READ: u64 = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR;

const NET_BIND_TCP: u64 = 1 << 0;
const NET_CONNECT_TCP: u64 = 1 << 1;

const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

/// The oldest ABI the sandbox runs with: 3 handles truncation (below it, `truncate(2)` on any
/// file is out of the rules' reach).
pub(crate) const MIN_ABI: i32 = 3;
/// The ABI whose TCP rules the network cut needs.
pub(crate) const NET_ABI: i32 = 4;
/// The ABI from which signals and abstract Unix sockets are scoped to the sandbox.
pub(super) const SCOPE_ABI: i32 = 6;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The Landlock ABI of the running kernel (0: none, or switched off at boot).
pub(super) fn kernel_abi() -> i32 {
    // SAFETY: the version query takes no attribute and returns a number or -1.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    v.max(0) as i32
}

/// A ruleset ready for `restrict_self`: reads everywhere, writes only beneath the given paths,
/// and (with `net_off`) no TCP bind or connect.
#[derive(Debug)]
pub(super) struct Ruleset {
    fd: OwnedFd,
}

impl Ruleset {
    /// Builds the ruleset for `abi`. `writable` are opened now (`O_PATH`); a path that cannot
    /// be opened is an error naming it.
    pub(super) fn new(
        abi: i32,
        writable: &[&Path],
        net_off: bool,
    ) -> Result<Ruleset, (Option<std::path::PathBuf>, io::Error)> {
        let mut fs = FS_ABI1;
        if abi >= 2 {
            fs |= FS_REFER;
        }
        if abi >= 3 {
            fs |= FS_TRUNCATE;
        }
        let attr = RulesetAttr {
            handled_access_fs: fs,
            handled_access_net: if net_off && abi >= NET_ABI {
                NET_BIND_TCP | NET_CONNECT_TCP
            } else {
                0
            },
            scoped: match (abi >= SCOPE_ABI, net_off) {
                (false, _) => 0,
                (true, true) => SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET,
                (true, false) => SCOPE_SIGNAL,
            },
        };
        // SAFETY: the attribute is a live local of the size passed.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &attr as *const RulesetAttr,
                std::mem::size_of::<RulesetAttr>(),
                0u32,
            )
        };
        if fd < 0 {
            return Err((None, io::Error::last_os_error()));
        }
        let ruleset = Ruleset {
            // SAFETY: a new descriptor the kernel just returned (close-on-exec), owned here alone.
            fd: unsafe { OwnedFd::from_raw_fd(fd as i32) },
        };
        ruleset.allow(Path::new("/"), FS_READ)?;
        for p in writable {
            ruleset.allow(p, fs)?;
        }
        Ok(ruleset)
    }

    /// Grants `access` beneath `path` (only the file rights when it is not a directory).
    fn allow(
        &self,
        path: &Path,
        access: u64,
    ) -> Result<(), (Option<std::path::PathBuf>, io::Error)> {
        let err = |e: io::Error| (Some(path.to_path_buf()), e);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
            .open(path)
            .map_err(err)?;
        let is_dir = file.metadata().map_err(err)?.is_dir();
        let rule = PathBeneathAttr {
            allowed_access: if is_dir { access } else { access & FS_FILE },
            parent_fd: file.as_raw_fd(),
        };
        // SAFETY: the rule is a live local; both descriptors are open.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.fd.as_raw_fd(),
                RULE_PATH_BENEATH,
                &rule as *const PathBeneathAttr,
                0u32,
            )
        };
        if rc != 0 {
            return Err(err(io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Restricts the calling thread (and all it starts) to the ruleset. Only a syscall: safe
    /// between fork and exec. `no_new_privs` must be set first.
    pub(super) fn restrict_self(&self) -> io::Result<()> {
        // SAFETY: a plain syscall on an open descriptor.
        let rc =
            unsafe { libc::syscall(libc::SYS_landlock_restrict_self, self.fd.as_raw_fd(), 0u32) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

use std::os::unix::fs::OpenOptionsExt;
