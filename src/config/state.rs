//! Machine-managed state (crush(1) CONFIGURATION, FILES): `state.json` in the global data dir and
//! in the project data dir. The program writes these files (atomically, under a lock) and never
//! writes a user's config file. State holds the last chosen models, recent models, UI preferences
//! and, globally, trust records and MCP OAuth tokens. Go Crush's machine-written
//! `<global data>/crush.json` is read as global state, below `state.json`, and its
//! `<project data>/crush.json` as workspace state, below that `state.json`; crush never writes
//! them.
//!
//! Layout: `{"version": 1, "models": {...}, "recent_models": {...}, "options": {...},
//! "trust": {"<project root>": {"hash": "...", "trusted_at": "RFC 3339"}},
//! "mcp_oauth": {"<server>": {"access_token": "...", ...}}}`. Everything but `version`, `trust`
//! and `mcp_oauth` is a configuration layer (2 = global, 3 = workspace).

use crate::fsutil::{Lock, write_atomic};
use crate::time::rfc3339_utc;
use serde_json::{Map, Value, json};
use std::io;
use std::path::{Path, PathBuf};

pub(crate) const FILE_NAME: &str = "state.json";
/// Go Crush's global data file, read as global state.
pub(crate) const LEGACY_FILE_NAME: &str = "crush.json";
/// Keys of a state file that are not configuration (`mcp_oauth`: the OAuth tokens of MCP
/// servers).
const NOT_CONFIG: &[&str] = &["version", "trust", "mcp_oauth"];

pub(crate) fn global_path() -> PathBuf {
    crate::paths::global_data_dir().join(FILE_NAME)
}

pub(crate) fn legacy_global_path() -> PathBuf {
    crate::paths::global_data_dir().join(LEGACY_FILE_NAME)
}

pub(crate) fn workspace_path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE_NAME)
}

/// Go Crush's workspace config, where its UI writes the models chosen in a project: read as
/// workspace state, below `state.json`, and never written.
pub(crate) fn legacy_workspace_path(data_dir: &Path) -> PathBuf {
    data_dir.join(LEGACY_FILE_NAME)
}

/// Reads a state file; a missing file is empty state. A file that is not a JSON object is
/// reported (the caller warns) and treated as empty: state is rebuilt, never a reason to fail.
pub(crate) fn read(path: &Path) -> Result<Value, StateError> {
    let path = path.to_path_buf();
    match crate::fsutil::read_config(&path) {
        Ok(Some(bytes)) if bytes.iter().all(u8::is_ascii_whitespace) => Ok(json!({})),
        Ok(Some(bytes)) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(v @ Value::Object(_)) => Ok(v),
            Ok(_) => Err(StateError::NotObject(path)),
            Err(source) => Err(StateError::Json { path, source }),
        },
        Ok(None) => Ok(json!({})),
        Err(source) => Err(StateError::Read { path, source }),
    }
}

/// A state file that was ignored, and why (the message ends "; ignored").
#[derive(Debug)]
pub(crate) enum StateError {
    Read {
        path: PathBuf,
        source: io::Error,
    },
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    NotObject(PathBuf),
}

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateError::Read { path, source } => {
                write!(f, "{}; ignored", crate::fsutil::read_error(path, source))
            }
            StateError::Json { path, source } => {
                write!(f, "{}: invalid JSON ({source}); ignored", path.display())
            }
            StateError::NotObject(path) => {
                write!(f, "{}: not a JSON object; ignored", path.display())
            }
        }
    }
}

impl std::error::Error for StateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StateError::Read { source, .. } => Some(source),
            StateError::Json { source, .. } => Some(source),
            StateError::NotObject(_) => None,
        }
    }
}

/// The configuration part of a state value.
pub(crate) fn config_view(state: &Value) -> Value {
    let mut m = match state {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    for k in NOT_CONFIG {
        m.remove(*k);
    }
    Value::Object(m)
}

/// Read-modify-write of a state file under an exclusive lock, written atomically (temp file +
/// rename). Creates the directory (0700) when missing, and keeps it private.
pub(crate) fn update(path: &Path, f: impl FnOnce(&mut Value)) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other("state file has no parent directory"))?;
    crate::fsutil::private_dir(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| FILE_NAME.into());
    let _lock = Lock::acquire(&dir.join(format!("{name}.lock")))?;
    let mut v = read(path).unwrap_or_else(|_| json!({}));
    f(&mut v);
    if let Value::Object(m) = &mut v {
        m.insert("version".into(), json!(1));
    }
    let text = serde_json::to_string_pretty(&v)
        .map_err(|e| io::Error::other(format!("cannot encode state: {e}")))?;
    write_atomic(path, format!("{text}\n").as_bytes())
}

/// The trust record of a project: its hash, if any.
pub(crate) fn trusted_hash(global_state: &Value, project_root: &Path) -> Option<String> {
    global_state
        .get("trust")?
        .get(project_root.to_string_lossy().as_ref())?
        .get("hash")?
        .as_str()
        .map(str::to_string)
}

/// Records trust for `project_root` bound to `hash` in the global state.
pub(crate) fn record_trust(project_root: &Path, hash: &str) -> io::Result<()> {
    update(&global_path(), |v| {
        if !matches!(v.get("trust"), Some(Value::Object(_))) {
            v["trust"] = json!({});
        }
        v["trust"][project_root.to_string_lossy().as_ref()] = json!({
            "hash": hash,
            "trusted_at": rfc3339_utc(std::time::SystemTime::now()),
        });
    })
}

/// Removes the trust record of `project_root`; returns whether there was one.
pub(crate) fn revoke_trust(project_root: &Path) -> io::Result<bool> {
    let mut had = false;
    update(&global_path(), |v| {
        if let Some(Value::Object(t)) = v.get_mut("trust") {
            had = t.remove(project_root.to_string_lossy().as_ref()).is_some();
        }
    })?;
    Ok(had)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_is_atomic_and_keeps_other_keys() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("d").join(FILE_NAME);
        update(&p, |v| v["options"] = json!({"progress": false})).unwrap();
        update(&p, |v| {
            v["models"] = json!({"large": {"provider": "a", "model": "b"}})
        })
        .unwrap();
        let v = read(&p).unwrap();
        assert_eq!(v["options"]["progress"], json!(false));
        assert_eq!(v["version"], json!(1));
        assert_eq!(
            config_view(&v),
            json!({"options": {"progress": false}, "models": {"large": {"provider": "a", "model": "b"}}})
        );
        // No temp files left behind.
        let names: Vec<String> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains(".tmp.")), "{names:?}");
    }

    #[test]
    fn broken_state_is_reported_not_fatal() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join(FILE_NAME);
        std::fs::write(&p, "{oops").unwrap();
        assert!(read(&p).unwrap_err().to_string().contains("invalid JSON"));
        update(&p, |v| v["x"] = json!(1)).unwrap();
        assert_eq!(read(&p).unwrap()["x"], json!(1));
    }
}
