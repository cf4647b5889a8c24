//! The session's sandbox from the configuration and the flags (crush(1) SECURITY, sandbox):
//! `--sandbox MODE` over `options.sandbox.mode`, `--auto` (or `options.approval = "auto"`)
//! turning `workspace-write` on where nothing stricter is set, `options.sandbox.network` and
//! `options.sandbox.writable_roots` — the latter only from the user's own configuration. A
//! project's files (trusted or not) may only narrow the sandbox: a stricter mode, the network
//! off.

use crate::config::Loaded;
use crate::sandbox::{Error, Mode, Policy, Sandbox};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why the configured sandbox cannot be had.
#[derive(Debug)]
pub(crate) enum SettingsError {
    /// A bad value in a configuration file or flag: where, and what.
    Config(String),
    /// The kernel cannot enforce it (or a path of it cannot be opened).
    Sandbox(Error),
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettingsError::Config(m) => f.write_str(m),
            SettingsError::Sandbox(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SettingsError {}

/// What the flags ask for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Flags {
    /// `--sandbox MODE`.
    pub mode: Option<String>,
    /// `--network` (`crush sandbox`).
    pub network: bool,
    /// `--auto`.
    pub auto: bool,
}

/// Whether the session runs in the auto approval mode (`--auto`, `options.approval`).
pub(crate) fn auto_approval(loaded: &Loaded, flags: &Flags) -> Result<bool, SettingsError> {
    match loaded.config.options.approval.as_deref() {
        None | Some("ask") => Ok(flags.auto),
        Some("auto") => Ok(true),
        Some(other) => Err(SettingsError::Config(format!(
            "{}: options.approval: \"{other}\" is not an approval mode (ask or auto)",
            loaded.origin_of(&["options", "approval"])
        ))),
    }
}

/// The mode in force: the flag, else the configuration, else `workspace-write` under `--auto`,
/// else off.
pub(crate) fn mode(loaded: &Loaded, flags: &Flags) -> Result<Mode, SettingsError> {
    let bad = |v: &str, place: String| {
        SettingsError::Config(format!(
            "{place}: \"{v}\" is not a sandbox mode ({})",
            Mode::NAMES
        ))
    };
    let auto = auto_approval(loaded, flags)?;
    if let Some(v) = &flags.mode {
        let m = Mode::parse(v).ok_or_else(|| bad(v, "--sandbox".into()))?;
        if m == Mode::Off && auto {
            return Err(SettingsError::Config(
                "--auto runs the model's commands in the sandbox: it cannot be used with --sandbox off (--yolo runs them unconfined)".into(),
            ));
        }
        return Ok(m);
    }
    let parse = |v: &str| {
        Mode::parse(v).ok_or_else(|| {
            bad(
                v,
                format!(
                    "{}: options.sandbox.mode",
                    loaded.origin_of(&["options", "sandbox", "mode"])
                ),
            )
        })
    };
    let configured = match loaded.config.options.sandbox.mode.as_deref() {
        Some(v) if from_project(loaded, "mode") => {
            // Only a stricter mode than the user's counts.
            let user = users_own(loaded, "mode")
                .and_then(|v| v.as_str().map(str::to_string))
                .map(|v| parse(&v))
                .transpose()?;
            let project = parse(v)?;
            let rank = |m: Option<Mode>| match m {
                None | Some(Mode::Off) => 0,
                Some(Mode::WorkspaceWrite) => 1,
                Some(Mode::ReadOnly) => 2,
            };
            if rank(Some(project)) > rank(user) {
                Some(project)
            } else {
                user
            }
        }
        Some(v) => Some(parse(v)?),
        None => None,
    };
    Ok(match configured {
        Some(Mode::Off) | None if auto => Mode::WorkspaceWrite,
        Some(m) => m,
        None => Mode::Off,
    })
}

/// Whether `options.sandbox.KEY` in force was set by a project (trusted or not: a project may
/// only narrow the sandbox).
fn from_project(loaded: &Loaded, key: &str) -> bool {
    !loaded.set_by_user(&format!("/options/sandbox/{key}"))
}

/// `options.sandbox.KEY` as the user's own layers set it, the last of them winning.
fn users_own(loaded: &Loaded, key: &str) -> Option<serde_json::Value> {
    use crate::config::LayerKind as K;
    loaded
        .layers
        .iter()
        .filter(|l| {
            matches!(
                l.kind,
                K::Defaults | K::GlobalState | K::GlobalJson | K::GlobalCrushrc | K::Runtime
            )
        })
        .filter_map(|l| l.value.get("options")?.get("sandbox")?.get(key).cloned())
        .next_back()
}

/// Whether the network is on: a project may only turn it off.
fn network(loaded: &Loaded, flags: &Flags) -> bool {
    let merged = loaded.config.options.sandbox.network.unwrap_or(false);
    let on = if from_project(loaded, "network") {
        merged && users_own(loaded, "network").and_then(|v| v.as_bool()) == Some(true)
    } else {
        merged
    };
    flags.network || on
}

/// The user's writable roots: absolute, existing directories; an entry a project set is
/// ignored (a trusted project cannot widen the sandbox either).
fn writable_roots(loaded: &Loaded) -> Result<Vec<PathBuf>, SettingsError> {
    let mut roots = Vec::new();
    for (i, r) in loaded
        .config
        .options
        .sandbox
        .writable_roots
        .iter()
        .enumerate()
    {
        let idx = i.to_string();
        let path = ["options", "sandbox", "writable_roots", idx.as_str()];
        if !loaded.set_by_user(&format!("/options/sandbox/writable_roots/{i}"))
            && !loaded.set_by_user("/options/sandbox/writable_roots")
        {
            continue;
        }
        let place = loaded.origin_of(&path);
        let p = Path::new(r);
        if !p.is_absolute() {
            return Err(SettingsError::Config(format!(
                "{place}: options.sandbox.writable_roots[{i}]: \"{r}\" is not an absolute path"
            )));
        }
        if !p.is_dir() {
            return Err(SettingsError::Config(format!(
                "{place}: options.sandbox.writable_roots[{i}]: \"{r}\" is not an existing directory"
            )));
        }
        roots.push(p.to_path_buf());
    }
    Ok(roots)
}

/// The policy for `mode` in this configuration (None when off).
pub(crate) fn policy(
    loaded: &Loaded,
    mode: Mode,
    flags: &Flags,
) -> Result<Option<Policy>, SettingsError> {
    if mode == Mode::Off {
        return Ok(None);
    }
    let network = network(loaded, flags);
    let roots = writable_roots(loaded)?;
    let tmp = crate::sandbox::session_tmpdir().map_err(SettingsError::Sandbox)?;
    static CLEANUP: std::sync::Once = std::sync::Once::new();
    CLEANUP.call_once(|| crate::signal::on_exit(crate::sandbox::remove_tmpdir));
    Policy::new(mode, network, &loaded.project_root, &roots, &tmp)
        .map(Some)
        .map_err(SettingsError::Sandbox)
}

/// The session's sandbox, prepared; None when the mode is off. A sandbox that was asked for
/// and cannot be had is an error: crush does not run the commands unconfined instead.
pub(crate) fn session(
    loaded: &Loaded,
    flags: &Flags,
) -> Result<Option<Arc<Sandbox>>, SettingsError> {
    let mode = mode(loaded, flags)?;
    match policy(loaded, mode, flags)? {
        None => Ok(None),
        Some(p) => Sandbox::new(p)
            .map(|s| Some(Arc::new(s)))
            .map_err(SettingsError::Sandbox),
    }
}

/// One line for `crush_info`: the mode in force and the kernel's ABI.
pub(crate) fn describe(sandbox: Option<&Sandbox>) -> String {
    match sandbox {
        None => line(Mode::Off, false, &[]),
        Some(s) => {
            let p = s.policy();
            line(p.mode, p.network, &p.writable_roots)
        }
    }
}

/// The same for `crush config show`: what the configuration alone (no flag) puts in force.
pub(crate) fn configured(loaded: &Loaded) -> String {
    let flags = Flags::default();
    match mode(loaded, &flags) {
        Ok(m) => line(
            m,
            network(loaded, &flags),
            &writable_roots(loaded).unwrap_or_default(),
        ),
        Err(e) => format!("invalid: {e}"),
    }
}

fn line(mode: Mode, network: bool, roots: &[PathBuf]) -> String {
    let abi = crate::sandbox::abi();
    if mode == Mode::Off {
        return format!("off (landlock ABI {abi})");
    }
    let mut line = format!(
        "{mode} (network {}, landlock ABI {abi}",
        if network { "on" } else { "off" }
    );
    for r in roots {
        line.push_str(&format!(", writable {}", r.display()));
    }
    line.push(')');
    line
}
