//! Files the user attaches to a prompt (`@path` and `/attach` in the REPL, `crush run --attach`,
//! an image piped to `crush run`): text files (sent inline with their path) and images (sent as
//! images to a model that takes them). Stored as Go Crush's `binary` parts.

use super::common::open_regular;
use super::image;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Text attachments larger than this are refused.
pub(crate) const MAX_TEXT_BYTES: u64 = 1024 * 1024;

/// One attached file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Attachment {
    /// As the user named it (what hooks and the model see).
    pub path: String,
    pub mime_type: String,
    pub data: Vec<u8>,
}

impl Attachment {
    /// The part a user message stores it as (Go Crush's `binary`).
    pub(crate) fn part(&self) -> crate::llm::Part {
        crate::llm::Part::Binary {
            path: self.path.clone(),
            mime_type: self.mime_type.clone(),
            data: crate::mcp::wire::base64(&self.data),
        }
    }

    /// `shot.png (image/png, 800x600, 1234 bytes)`.
    pub(crate) fn describe(&self) -> String {
        if self.mime_type.starts_with("image/") {
            image::describe(&self.path, &self.mime_type, &self.data)
        } else {
            format!(
                "{} ({}, {} bytes)",
                self.path,
                self.mime_type,
                self.data.len()
            )
        }
    }
}

/// Why a file cannot be attached.
#[derive(Debug)]
pub(crate) enum AttachError {
    /// Not there (the path).
    Missing(PathBuf),
    /// It cannot be opened as a regular file.
    Open(PathBuf, std::io::Error),
    /// Larger than any attachment may be (the name, its size, the limit).
    TooLarge(String, u64, u64),
    Read(PathBuf, std::io::Error),
    /// An image that cannot be sent, or bytes named like one that are not.
    Image(image::BadImage),
    /// Text larger than `MAX_TEXT_BYTES` (the name, its size).
    TooMuchText(String, usize),
    /// Neither text nor an image (the name).
    Binary(String),
}

impl std::fmt::Display for AttachError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttachError::Missing(p) => write!(f, "cannot attach {}: no such file", p.display()),
            AttachError::Open(p, e) => write!(f, "cannot attach {}: {e}", p.display()),
            AttachError::TooLarge(name, len, limit) => {
                write!(
                    f,
                    "{name} is too large to attach ({len} bytes; at most {limit})"
                )
            }
            AttachError::Read(p, e) => write!(f, "cannot read {}: {e}", p.display()),
            AttachError::Image(e) => write!(f, "{e}"),
            AttachError::TooMuchText(name, len) => write!(
                f,
                "{name} is too large to attach ({len} bytes; text is attached up to {MAX_TEXT_BYTES} bytes)"
            ),
            AttachError::Binary(name) => write!(
                f,
                "{name} is neither text nor a PNG, JPEG, GIF or WebP image: it cannot be attached"
            ),
        }
    }
}

impl std::error::Error for AttachError {}

impl From<image::BadImage> for AttachError {
    fn from(e: image::BadImage) -> AttachError {
        AttachError::Image(e)
    }
}

/// Text or image bytes as an attachment named `name`.
pub(crate) fn from_bytes(name: &str, data: Vec<u8>) -> Result<Attachment, AttachError> {
    if let Some(mime) = image::sniff(&data) {
        image::check(Path::new(name), &data)?;
        return Ok(Attachment {
            path: name.to_string(),
            mime_type: mime.to_string(),
            data,
        });
    }
    if image::mime_for_extension(Path::new(name)).is_some() {
        // Named like an image, not one.
        image::check(Path::new(name), &data)?;
    }
    if data.len() as u64 > MAX_TEXT_BYTES {
        return Err(AttachError::TooMuchText(name.to_string(), data.len()));
    }
    if super::common::looks_binary(&data) || std::str::from_utf8(&data).is_err() {
        return Err(AttachError::Binary(name.to_string()));
    }
    Ok(Attachment {
        path: name.to_string(),
        mime_type: "text/plain".to_string(),
        data,
    })
}

/// The file `path` (absolute), named as the user sees it from `cwd`.
pub(crate) fn load(path: &Path, cwd: &Path) -> Result<Attachment, AttachError> {
    let (file, meta) = open_regular(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            AttachError::Missing(path.to_path_buf())
        } else {
            AttachError::Open(path.to_path_buf(), e)
        }
    })?;
    let limit = MAX_TEXT_BYTES.max(image::MAX_IMAGE_BYTES);
    let name = match path.strip_prefix(cwd) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => path.display().to_string(),
    };
    if meta.len() > limit {
        return Err(AttachError::TooLarge(name, meta.len(), limit));
    }
    let mut data = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut data)
        .map_err(|e| AttachError::Read(path.to_path_buf(), e))?;
    from_bytes(&name, data)
}

/// The `@path` words of a prompt that name existing files (relative to `cwd`, `~/` expanded),
/// each with its resolved path; other `@words` are left alone (a hook may expand them).
pub(crate) fn mentions(prompt: &str, cwd: &Path) -> Vec<(String, std::path::PathBuf)> {
    let mut out: Vec<(String, std::path::PathBuf)> = Vec::new();
    for word in prompt.split_whitespace() {
        let Some(raw) = word.strip_prefix('@') else {
            continue;
        };
        let raw = raw.trim_end_matches([',', '.', ';', ':', '!', '?', ')']);
        if raw.is_empty() {
            continue;
        }
        let path = crate::paths::resolve_real(cwd, raw);
        if path.is_file() && !out.iter().any(|(_, p)| *p == path) {
            out.push((raw.to_string(), path));
        }
    }
    out
}

/// Whether `path` lies outside `project_root` (attaching it then needs the user's yes).
pub(crate) fn outside(path: &Path, project_root: &Path) -> bool {
    !path.starts_with(crate::paths::canonicalize_lenient(project_root))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_images_attach_and_the_rest_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap();
        std::fs::write(root.join("notes.md"), "hello\n").unwrap();
        std::fs::write(root.join("shot.png"), crate::tools::image::tests::png(2, 2)).unwrap();
        std::fs::write(root.join("fake.png"), "text").unwrap();
        std::fs::write(root.join("blob.bin"), [0u8, 1, 2]).unwrap();
        let a = load(&root.join("notes.md"), &root).unwrap();
        assert_eq!(
            (a.path.as_str(), a.mime_type.as_str()),
            ("notes.md", "text/plain")
        );
        assert_eq!(a.describe(), "notes.md (text/plain, 6 bytes)");
        let i = load(&root.join("shot.png"), &root).unwrap();
        assert_eq!(i.mime_type, "image/png");
        assert!(
            matches!(i.part(), crate::llm::Part::Binary { ref mime_type, .. } if mime_type == "image/png")
        );
        assert!(
            load(&root.join("fake.png"), &root)
                .unwrap_err()
                .to_string()
                .contains("not a PNG")
        );
        assert!(
            load(&root.join("blob.bin"), &root)
                .unwrap_err()
                .to_string()
                .contains("neither text")
        );
        assert!(
            load(&root.join("none.txt"), &root)
                .unwrap_err()
                .to_string()
                .contains("no such file")
        );
        let m = mentions(
            "see @notes.md, and @shot.png @TODO @none.txt @notes.md",
            &root,
        );
        let names: Vec<&str> = m.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["notes.md", "shot.png"]);
        assert!(outside(Path::new("/etc/hostname"), &root));
        assert!(!outside(&root.join("notes.md"), &root));
        // An image piped in: known by its bytes.
        let piped = from_bytes("stdin", crate::tools::image::tests::png(1, 1)).unwrap();
        assert_eq!(piped.mime_type, "image/png");
    }
}
