//! The sign-in token files (crush(1) LOGIN): `<global data>/auth/NAME.json`, mode 0600, in Go
//! Crush's token format. A file that is a symbolic link, not the user's own, or readable by
//! others is refused with the reason, as ssh refuses such a key.

use super::LoginError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;

/// An OAuth token as Go Crush writes it (`providers.NAME.oauth`, the token files).
#[derive(Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default)]
pub(crate) struct Token {
    pub access_token: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub refresh_token: String,
    pub expires_in: i64,
    /// Unix seconds; 0: unknown (refreshed before use).
    pub expires_at: i64,
}

/// Tokens never show in logs or messages.
impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("access_token", &mask(&self.access_token))
            .field("refresh_token", &mask(&self.refresh_token))
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

fn mask(s: &str) -> &'static str {
    if s.is_empty() { "" } else { "***" }
}

pub(crate) fn dir() -> PathBuf {
    crate::paths::global_data_dir().join("auth")
}

pub(crate) fn path(name: &str) -> PathBuf {
    dir().join(format!("{name}.json"))
}

/// The stored token of `name`; None when there is none.
pub(crate) fn load(name: &str) -> Result<Option<Token>, LoginError> {
    let p = path(name);
    let refuse = |why: String| LoginError::Store {
        path: p.clone(),
        message: format!("{why}: refusing it (remove it and run 'crush login {name}')"),
    };
    let meta = match std::fs::symlink_metadata(&p) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(refuse(e.to_string())),
    };
    if meta.file_type().is_symlink() {
        return Err(refuse("it is a symbolic link".into()));
    }
    if !meta.is_file() {
        return Err(refuse("it is not a regular file".into()));
    }
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(refuse(format!(
            "it is owned by another user (uid {}), not by you (uid {me})",
            meta.uid()
        )));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(LoginError::Store {
            path: p.clone(),
            message: format!(
                "its mode {mode:04o} lets others read it: refusing it (chmod 600 it, or run 'crush login {name}' again)"
            ),
        });
    }
    let text = std::fs::read_to_string(&p).map_err(|e| refuse(e.to_string()))?;
    let token: Token = serde_json::from_str(&text).map_err(|e| LoginError::Store {
        path: p.clone(),
        message: format!(
            "line {} column {}: not a token file ({e}); run 'crush login {name}' again",
            e.line(),
            e.column()
        ),
    })?;
    if token.refresh_token.is_empty() && token.access_token.is_empty() {
        return Err(refuse("it holds no token".into()));
    }
    Ok(Some(token))
}

/// Writes the token of `name` whole (a temp file renamed over the old one) with mode 0600.
pub(crate) fn save(name: &str, token: &Token) -> Result<(), LoginError> {
    let p = path(name);
    let fail = |e: std::io::Error| LoginError::Store {
        path: p.clone(),
        message: format!("cannot write it: {e}"),
    };
    crate::fsutil::private_dir(&dir()).map_err(fail)?;
    if std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(LoginError::Store {
            path: p.clone(),
            message: "it is a symbolic link: refusing to write through it (remove it first)".into(),
        });
    }
    // Serialising a struct of strings and numbers cannot fail.
    let text = serde_json::to_vec_pretty(token).unwrap_or_default();
    crate::fsutil::write_atomic(&p, &text).map_err(fail)
}

/// Removes the token of `name`; false when there was none.
pub(crate) fn remove(name: &str) -> Result<bool, LoginError> {
    let p = path(name);
    match std::fs::remove_file(&p) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(LoginError::Store {
            path: p,
            message: format!("cannot remove it: {e}"),
        }),
    }
}
