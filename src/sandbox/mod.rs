//! The OS sandbox of the commands the model runs (crush(1) SECURITY, sandbox).
//!
//! A `Policy` (the mode, the network switch, resolved paths) is built once per session; a
//! `Sandbox` is that policy prepared: the Landlock ruleset, the seccomp program and the mount
//! list made before fork, so that `apply`, run in the child between fork and exec, only makes
//! syscalls (no allocation, no lock).
//!
//! In the child, in order:
//! 1. `workspace-write`: a mount namespace of its own (and a user namespace when crush is not
//!    root), in which the project's `.git` and `.crush` are pinned (bind-mounted on themselves,
//!    so they cannot be renamed away) and `.git/hooks`, `.git/config` and `.crush` are
//!    re-mounted read-only: Landlock can only grant, so a writable project would otherwise
//!    include them.
//! 2. `no_new_privs`: setuid and file capabilities are ignored from here on.
//! 3. Landlock: read and execute everywhere; write only beneath the writable paths; with the
//!    network off, no TCP bind or connect; signals (and, network off, abstract Unix sockets)
//!    only within the sandbox. Inherited by everything the command starts, and never lifted.
//! 4. Network off: the seccomp filter of `seccomp.rs`.

mod landlock;
mod seccomp;

use std::ffi::{CString, OsString};
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

pub(crate) use landlock::{MIN_ABI, NET_ABI};

/// The environment variable that lowers the Landlock ABI crush believes the kernel has (to try
/// how crush behaves on an older kernel; crush(1) ENVIRONMENT). It can only lower it, so it can
/// only make the sandbox refuse to start, never weaken it.
pub(crate) const FORCE_ABI_VAR: &str = "CRUSH_SANDBOX_FORCE_ABI";

/// What the sandbox lets a command write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Mode {
    /// No sandbox.
    #[default]
    Off,
    /// No writes but the private temporary directory and `/dev/null`.
    ReadOnly,
    /// Writes in the project, the writable roots and the private temporary directory.
    WorkspaceWrite,
}

impl Mode {
    pub(crate) const NAMES: &'static str = "off, read-only or workspace-write";

    pub(crate) fn parse(s: &str) -> Option<Mode> {
        match s {
            "off" => Some(Mode::Off),
            "read-only" => Some(Mode::ReadOnly),
            "workspace-write" => Some(Mode::WorkspaceWrite),
            _ => None,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::ReadOnly => "read-only",
            Mode::WorkspaceWrite => "workspace-write",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a sandbox cannot be had.
#[derive(Debug)]
pub(crate) enum Error {
    /// The kernel's Landlock ABI is below what the policy needs.
    Unsupported {
        abi: i32,
        need: i32,
        what: &'static str,
    },
    /// A path of the policy cannot be resolved or opened.
    Path { path: PathBuf, source: io::Error },
    /// A kernel call refused while the sandbox was prepared.
    Kernel {
        call: &'static str,
        source: io::Error,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unsupported { abi: 0, .. } => write!(
                f,
                "the kernel has no Landlock (or it is switched off): commands cannot be sandboxed; set the sandbox mode to off to run them unconfined"
            ),
            Error::Unsupported { abi, need, what } => write!(
                f,
                "the kernel's Landlock ABI is {abi}, and {what} needs {need}: commands cannot be sandboxed so; set the sandbox mode to off to run them unconfined"
            ),
            Error::Path { path, source } => {
                write!(f, "sandbox path {}: {source}", path.display())
            }
            Error::Kernel { call, source } => write!(f, "sandbox setup ({call}): {source}"),
        }
    }
}

impl std::error::Error for Error {}

/// The Landlock ABI crush uses: the kernel's, lowered by `CRUSH_SANDBOX_FORCE_ABI`.
pub(crate) fn abi() -> i32 {
    effective_abi(
        landlock::kernel_abi(),
        std::env::var(FORCE_ABI_VAR).ok().as_deref(),
    )
}

/// The `kernel`'s ABI lowered by a forced value (a number; anything else is ignored).
fn effective_abi(kernel: i32, forced: Option<&str>) -> i32 {
    match forced.and_then(|v| v.trim().parse::<i32>().ok()) {
        Some(forced) => kernel.min(forced.max(0)),
        None => kernel,
    }
}

/// What `crush sandbox check` prints: the kernel's Landlock ABI and what the sandbox can do.
pub(crate) fn check_report() -> String {
    let abi = abi();
    let yes = |ok: bool| if ok { "yes" } else { "no" };
    let mut out = format!("landlock ABI      {abi}\n");
    out.push_str(&format!("filesystem rules  {}\n", yes(abi >= MIN_ABI)));
    out.push_str(&format!("network cut       {}\n", yes(abi >= NET_ABI)));
    out.push_str(&format!(
        "scoping           {}\n",
        yes(abi >= landlock::SCOPE_ABI)
    ));
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    out.push_str(&format!(
        "seccomp           {}\n",
        yes(status.lines().any(|l| l.starts_with("Seccomp:")))
    ));
    out.push_str(&format!(
        "sandbox           {}\n",
        match abi {
            a if a >= NET_ABI =>
                "available (read-only, workspace-write; network off or on)".to_string(),
            a if a >= MIN_ABI => "available with network: true only".to_string(),
            _ => format!(
                "unavailable (needs Landlock ABI {MIN_ABI}, {NET_ABI} with the network off)"
            ),
        }
    ));
    out
}

/// The sandbox of a session, with every path resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Policy {
    pub mode: Mode,
    /// The network is reachable from inside.
    pub network: bool,
    /// The project root (canonical).
    pub project_root: PathBuf,
    /// The user's extra writable directories (canonical).
    pub writable_roots: Vec<PathBuf>,
    /// The session's private temporary directory (canonical), exported as `TMPDIR`.
    pub tmpdir: PathBuf,
}

/// Files and directories that are always writable: what shells redirect to and terminals are,
/// and POSIX shared memory (Python's multiprocessing locks, for one, are made there).
const DEVICES: [&str; 7] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/random",
    "/dev/urandom",
    "/dev/shm",
];

fn canonical(p: &Path) -> Result<PathBuf, Error> {
    std::fs::canonicalize(p).map_err(|source| Error::Path {
        path: p.to_path_buf(),
        source,
    })
}

impl Policy {
    /// The policy for `mode`, with `project_root`, `writable_roots` and `tmpdir` canonicalised
    /// (`..` resolved, symbolic links followed); a path that does not resolve is an error.
    pub(crate) fn new(
        mode: Mode,
        network: bool,
        project_root: &Path,
        writable_roots: &[PathBuf],
        tmpdir: &Path,
    ) -> Result<Policy, Error> {
        Ok(Policy {
            mode,
            network,
            project_root: canonical(project_root)?,
            writable_roots: writable_roots
                .iter()
                .map(|p| canonical(p))
                .collect::<Result<_, _>>()?,
            tmpdir: canonical(tmpdir)?,
        })
    }

    /// The paths beneath which writes are allowed.
    fn writable(&self) -> Vec<&Path> {
        let mut w: Vec<&Path> = vec![&self.tmpdir];
        if self.mode == Mode::WorkspaceWrite {
            w.push(&self.project_root);
            w.extend(self.writable_roots.iter().map(PathBuf::as_path));
        }
        w.extend(DEVICES.iter().map(Path::new).filter(|p| p.exists()));
        w
    }

    /// The fields `decode` reads back (the job server's request carries them).
    pub(crate) fn encode(&self) -> Vec<OsString> {
        let mut f: Vec<OsString> = vec![
            self.mode.as_str().into(),
            if self.network { "net" } else { "nonet" }.into(),
            self.project_root.clone().into(),
            self.tmpdir.clone().into(),
        ];
        f.extend(
            self.writable_roots
                .iter()
                .map(|p| p.clone().into_os_string()),
        );
        f
    }

    pub(crate) fn decode(fields: &[OsString]) -> Option<Policy> {
        let [mode, net, root, tmp, rest @ ..] = fields else {
            return None;
        };
        Some(Policy {
            mode: Mode::parse(mode.to_str()?)?,
            network: match net.to_str()? {
                "net" => true,
                "nonet" => false,
                _ => return None,
            },
            project_root: root.into(),
            tmpdir: tmp.into(),
            writable_roots: rest.iter().map(PathBuf::from).collect(),
        })
    }
}

/// One bind mount made in the child.
#[derive(Debug)]
struct Bind {
    path: CString,
    /// Re-mounted read-only, with these flags of the mount it sits on kept (a user namespace
    /// may not drop them).
    read_only: Option<libc::c_ulong>,
}

/// What a child not running as root writes to enter a user namespace of its own.
#[derive(Debug)]
struct UserMaps {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

/// A policy made ready to apply between fork and exec.
#[derive(Debug)]
pub(crate) struct Sandbox {
    policy: Policy,
    ruleset: landlock::Ruleset,
    filter: Option<seccomp::Filter>,
    binds: Vec<Bind>,
    user: Option<UserMaps>,
}

/// statvfs's "relative atime" flag: the kernel's value, which libc names for glibc only (musl's
/// headers leave it out).
const ST_RELATIME: libc::c_ulong = 4096;

/// The flags of the mount `path` is on, as `MS_*` bits a read-only bind re-mount keeps.
fn mount_flags(path: &Path) -> Result<libc::c_ulong, Error> {
    let c = cstring(path)?;
    // SAFETY: statvfs fills the zeroed local.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a valid, writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(Error::Path {
            path: path.to_path_buf(),
            source: io::Error::last_os_error(),
        });
    }
    let map = [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (ST_RELATIME, libc::MS_RELATIME),
    ];
    Ok(map
        .iter()
        .filter(|(st_bit, _)| st.f_flag & *st_bit != 0)
        .fold(0, |acc, (_, ms)| acc | ms))
}

/// `core.hooksPath` of a git configuration text, if it sets one.
fn hooks_path(config: &str) -> Option<String> {
    let mut in_core = false;
    let mut found = None;
    for line in config.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_core = line
                .trim_start_matches('[')
                .trim_end_matches(']')
                .trim()
                .eq_ignore_ascii_case("core");
            continue;
        }
        if let Some((k, v)) = line.split_once('=')
            && in_core
            && k.trim().eq_ignore_ascii_case("hookspath")
        {
            let v = v.trim().trim_matches('"');
            found = (!v.is_empty()).then(|| v.to_string());
        }
    }
    found
}

/// `hooks` (relative to the project `root`, or absolute) when it lies inside the project, made
/// if missing (a command could make it otherwise).
fn in_project(root: &Path, hooks: &str) -> Option<PathBuf> {
    let p = root.join(hooks);
    let parent = std::fs::canonicalize(p.parent()?).ok()?;
    if !parent.starts_with(root) {
        return None;
    }
    ensure_dir(&p).ok()?;
    let p = std::fs::canonicalize(&p).ok()?;
    (p.starts_with(root) && p != root && p.is_dir()).then_some(p)
}

/// Makes `dir` when nothing is there: a protected directory that did not exist could be made
/// by the command.
fn ensure_dir(dir: &Path) -> Result<(), Error> {
    if dir.symlink_metadata().is_err() {
        std::fs::create_dir(dir).map_err(|source| Error::Path {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    Ok(())
}

fn cstring(p: &Path) -> Result<CString, Error> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| Error::Path {
        path: p.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "the path holds a NUL byte"),
    })
}

impl Sandbox {
    /// Prepares `policy` (which must not be `Mode::Off`) for the kernel: errors when the
    /// kernel's Landlock cannot enforce it.
    pub(crate) fn new(policy: Policy) -> Result<Sandbox, Error> {
        let abi = abi();
        if abi < MIN_ABI {
            return Err(Error::Unsupported {
                abi,
                need: MIN_ABI,
                what: "the sandbox",
            });
        }
        if !policy.network && abi < NET_ABI {
            return Err(Error::Unsupported {
                abi,
                need: NET_ABI,
                what: "the sandbox's network cut",
            });
        }
        let ruleset = landlock::Ruleset::new(abi, &policy.writable(), !policy.network).map_err(
            |(path, source)| match path {
                Some(path) => Error::Path { path, source },
                None => Error::Kernel {
                    call: "landlock_create_ruleset",
                    source,
                },
            },
        )?;
        let mut binds = Vec::new();
        if policy.mode == Mode::WorkspaceWrite {
            let root = &policy.project_root;
            let git = root.join(".git");
            if git.is_dir() {
                // A repository without the directory would let one be made.
                let hooks = git.join("hooks");
                ensure_dir(&hooks)?;
                binds.push(Bind {
                    path: cstring(&git)?,
                    read_only: None,
                });
                let mut protect = vec![hooks, git.join("config")];
                // Hooks somewhere else in the project (core.hooksPath = .husky) run as well.
                let config = std::fs::read_to_string(git.join("config")).unwrap_or_default();
                if let Some(dir) = hooks_path(&config).and_then(|h| in_project(root, &h)) {
                    protect.push(dir);
                }
                for p in protect {
                    if p.exists() {
                        binds.push(Bind {
                            read_only: Some(mount_flags(&p)?),
                            path: cstring(&p)?,
                        });
                    }
                }
            }
            let dot_crush = root.join(".crush");
            ensure_dir(&dot_crush)?;
            if dot_crush.is_dir() {
                binds.push(Bind {
                    read_only: Some(mount_flags(&dot_crush)?),
                    path: cstring(&dot_crush)?,
                });
            }
        }
        // SAFETY: plain getters.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let user = (!binds.is_empty() && uid != 0).then(|| UserMaps {
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        });
        Ok(Sandbox {
            filter: (!policy.network).then(seccomp::Filter::network_off),
            policy,
            ruleset,
            binds,
            user,
        })
    }

    pub(crate) fn policy(&self) -> &Policy {
        &self.policy
    }

    /// What the sandboxed command's environment gets: its private temporary directory.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        vec![(
            "TMPDIR".to_string(),
            self.policy.tmpdir.to_string_lossy().into_owned(),
        )]
    }

    /// Confines the calling process as the policy says; meant for the child between fork and
    /// exec: only syscalls on what `new` prepared, no allocation.
    pub(crate) fn apply(&self) -> io::Result<()> {
        if !self.binds.is_empty() {
            self.enter_mount_namespace()?;
        }
        // SAFETY: plain prctl.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        self.ruleset.restrict_self()?;
        if let Some(f) = &self.filter {
            f.install()?;
        }
        Ok(())
    }

    fn enter_mount_namespace(&self) -> io::Result<()> {
        let check = |rc: libc::c_int| {
            if rc != 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        let flags = libc::CLONE_NEWNS
            | if self.user.is_some() {
                libc::CLONE_NEWUSER
            } else {
                0
            };
        // SAFETY: unshare, open, write, close and mount on prepared NUL-terminated strings and
        // buffers; nothing allocates.
        unsafe {
            check(libc::unshare(flags))?;
            if let Some(maps) = &self.user {
                // crush makes itself non-dumpable (crush(1) SECURITY, Environments), which
                // makes /proc/self root's: the child takes its own files back to write its
                // maps (the exec that follows would make it dumpable anyway).
                check(libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0))?;
                write_file(c"/proc/self/setgroups", b"deny")?;
                write_file(c"/proc/self/uid_map", &maps.uid_map)?;
                write_file(c"/proc/self/gid_map", &maps.gid_map)?;
            }
            // Nothing mounted here may reach crush's own namespace.
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            for b in &self.binds {
                check(libc::mount(
                    b.path.as_ptr(),
                    b.path.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                ))?;
                if let Some(keep) = b.read_only {
                    check(libc::mount(
                        std::ptr::null(),
                        b.path.as_ptr(),
                        std::ptr::null(),
                        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | keep,
                        std::ptr::null(),
                    ))?;
                }
            }
        }
        Ok(())
    }
}

/// Writes `data` to `path` with raw syscalls (between fork and exec).
unsafe fn write_file(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: the caller's; open, write and close on a NUL-terminated path and a live buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let err = io::Error::last_os_error();
        libc::close(fd);
        if n != data.len() as isize {
            return Err(err);
        }
    }
    Ok(())
}

/// The private temporary directory of this crush process's sandboxed commands (created, mode
/// 0700, once; `remove_tmpdir` removes it).
pub(crate) fn session_tmpdir() -> Result<PathBuf, Error> {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    if let Some(d) = DIR.get() {
        return Ok(d.clone());
    }
    let base = std::env::temp_dir();
    let dir = base.join(format!("crush-sandbox-{}", std::process::id()));
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && owned_private_dir(&dir) => {}
        Err(source) => return Err(Error::Path { path: dir, source }),
    }
    Ok(DIR.get_or_init(|| dir).clone())
}

/// Whether `dir` is a real directory of ours that nobody else can enter (a leftover of an
/// earlier crush with the same pid).
fn owned_private_dir(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(dir).is_ok_and(|m| {
        // SAFETY: a plain getter.
        m.is_dir() && m.uid() == unsafe { libc::geteuid() } && m.mode() & 0o077 == 0
    })
}

/// Removes the private temporary directory, if one was made (when crush ends).
pub(crate) fn remove_tmpdir() {
    let dir = std::env::temp_dir().join(format!("crush-sandbox-{}", std::process::id()));
    if owned_private_dir(&dir) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The one line a refused command's tool result gets, when its output shows the sandbox
/// refused it (crush(1) SECURITY, sandbox).
pub(crate) fn refusal_hint(policy: &Policy, output: &str) -> Option<String> {
    let denied = |s: &str| {
        s.contains("Permission denied")
            || s.contains("Operation not permitted")
            || s.contains("Read-only file system")
    };
    if !output.lines().any(denied) {
        return None;
    }
    let net = if policy.network {
        ""
    } else {
        " or a network connection (the network is off in the sandbox: options.sandbox.network)"
    };
    Some(format!(
        "The {} sandbox may have refused a write outside the project{net}; the user can allow more with options.sandbox.writable_roots or --sandbox off.",
        policy.mode
    ))
}

#[cfg(test)]
mod tests;
