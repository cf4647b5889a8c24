//! Files as language servers name and measure them: `file://` URIs, language ids, which entry
//! handles which file, positions in the negotiated encoding (UTF-16 code units unless the server
//! chose UTF-8 or UTF-32), and text edits applied to a file's content.

use serde_json::Value;
use std::path::{Path, PathBuf};

/// The `file://` URI of an absolute path (bytes outside the unreserved set percent-encoded).
pub(crate) fn uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The path of a `file://` URI (None for other schemes or a malformed escape).
pub(crate) fn path_of(uri: &str) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let rest = uri.strip_prefix("file://")?;
    // `file://host/path`: only an empty or local host is a path here.
    let rest = match rest.strip_prefix("localhost") {
        Some(r) if r.starts_with('/') => r,
        _ => rest,
    };
    if !rest.starts_with('/') {
        return None;
    }
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(PathBuf::from(std::ffi::OsString::from_vec(out)))
}

/// The LSP language id of a file, from its name.
pub(crate) fn language_id(path: &Path) -> &'static str {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    match name.as_str() {
        "go.mod" => return "gomod",
        "go.work" => return "gowork",
        "makefile" | "gnumakefile" => return "makefile",
        "dockerfile" => return "dockerfile",
        "cmakelists.txt" => return "cmake",
        _ => {}
    }
    let ext = name.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    match ext {
        "go" => "go",
        "rs" => "rust",
        "py" | "pyi" => "python",
        "ts" | "mts" | "cts" => "typescript",
        "tsx" => "typescriptreact",
        "js" | "mjs" | "cjs" => "javascript",
        "jsx" => "javascriptreact",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => "cpp",
        "m" => "objective-c",
        "mm" => "objective-cpp",
        "cu" => "cuda",
        "java" => "java",
        "kt" | "kts" => "kotlin",
        "rb" => "ruby",
        "php" => "php",
        "cs" => "csharp",
        "swift" => "swift",
        "zig" => "zig",
        "lua" => "lua",
        "sh" | "bash" => "shellscript",
        "json" => "json",
        "jsonc" => "jsonc",
        "yaml" | "yml" => "yaml",
        "toml" => "toml",
        "html" | "htm" => "html",
        "css" => "css",
        "scss" => "scss",
        "less" => "less",
        "md" | "markdown" => "markdown",
        "ex" | "exs" => "elixir",
        "erl" | "hrl" => "erlang",
        "hs" => "haskell",
        "ml" | "mli" => "ocaml",
        "scala" => "scala",
        "dart" => "dart",
        "vue" => "vue",
        "svelte" => "svelte",
        "sql" => "sql",
        "tf" => "terraform",
        "nix" => "nix",
        "proto" => "proto",
        _ => "plaintext",
    }
}

/// Whether an entry with `filetypes` handles `path`: a file type is an extension (`go`, `.go`,
/// or a name's ending such as `mod` for `go.mod`) or a language id (`typescript`). No file
/// types: every file.
pub(crate) fn handles(filetypes: &[String], path: &Path) -> bool {
    if filetypes.is_empty() {
        return true;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let lang = language_id(path);
    filetypes.iter().any(|ft| {
        let ft = ft.trim().to_ascii_lowercase();
        let suffix = if ft.starts_with('.') {
            ft.clone()
        } else {
            format!(".{ft}")
        };
        !ft.is_empty()
            && (name.ends_with(&suffix) || ft == lang || (ft == "sh" && lang == "shellscript"))
    })
}

/// How a server counts the characters of a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Encoding {
    Utf8,
    Utf16,
    Utf32,
}

impl Encoding {
    /// The encoding a server chose in its `initialize` result (`capabilities.positionEncoding`).
    pub(crate) fn from_capabilities(caps: &Value) -> Encoding {
        match caps.get("positionEncoding").and_then(Value::as_str) {
            Some("utf-8") => Encoding::Utf8,
            Some("utf-32") => Encoding::Utf32,
            _ => Encoding::Utf16,
        }
    }

    fn units(self, c: char) -> usize {
        match self {
            Encoding::Utf8 => c.len_utf8(),
            Encoding::Utf16 => c.len_utf16(),
            Encoding::Utf32 => 1,
        }
    }

    /// The column (in this encoding) of byte `byte` of `line`.
    pub(crate) fn column(self, line: &str, byte: usize) -> usize {
        line.char_indices()
            .take_while(|(i, _)| *i < byte)
            .map(|(_, c)| self.units(c))
            .sum()
    }

    /// The byte of `line` at `column` (in this encoding), clamped to the line's end.
    pub(crate) fn byte(self, line: &str, column: usize) -> usize {
        let mut units = 0;
        for (i, c) in line.char_indices() {
            if units >= column {
                return i;
            }
            units += self.units(c);
        }
        line.len()
    }
}

/// The byte offset in `text` of an LSP position (`{line, character}`), clamped to the text.
pub(crate) fn offset(text: &str, pos: &Value, enc: Encoding) -> usize {
    let line = pos.get("line").and_then(Value::as_u64).unwrap_or(0) as usize;
    let col = pos.get("character").and_then(Value::as_u64).unwrap_or(0) as usize;
    let mut start = 0;
    for _ in 0..line {
        match text[start..].find('\n') {
            Some(i) => start += i + 1,
            None => return text.len(),
        }
    }
    let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let line_text = text[start..end]
        .strip_suffix('\r')
        .unwrap_or(&text[start..end]);
    start + enc.byte(line_text, col)
}

/// `text` with LSP `TextEdit`s (`{range, newText}`) applied. Err when a range is malformed or
/// two ranges overlap.
pub(crate) fn apply_edits(text: &str, edits: &[Value], enc: Encoding) -> Result<String, EditError> {
    let mut spans = Vec::with_capacity(edits.len());
    for e in edits {
        let range = e.get("range").ok_or(EditError::NoRange)?;
        let (Some(start), Some(end)) = (range.get("start"), range.get("end")) else {
            return Err(EditError::BadRange);
        };
        let (s, t) = (offset(text, start, enc), offset(text, end, enc));
        if t < s {
            return Err(EditError::Backwards);
        }
        let new = e.get("newText").and_then(Value::as_str).unwrap_or("");
        spans.push((s, t, new));
    }
    // Stable: edits at the same position apply in the order given.
    spans.sort_by_key(|(s, t, _)| (*s, *t));
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (s, t, new) in spans {
        if s < at {
            return Err(EditError::Overlap);
        }
        out.push_str(&text[at..s]);
        out.push_str(new);
        at = t;
    }
    out.push_str(&text[at..]);
    Ok(out)
}

/// Why `TextEdit`s could not be applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EditError {
    NoRange,
    BadRange,
    Backwards,
    Overlap,
}

impl std::fmt::Display for EditError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EditError::NoRange => "a text edit has no range",
            EditError::BadRange => "a text edit has a malformed range",
            EditError::Backwards => "a text edit ends before it starts",
            EditError::Overlap => "two text edits overlap",
        })
    }
}

impl std::error::Error for EditError {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn uris_round_trip_and_escape() {
        let p = Path::new("/tmp/a b/ü#1.rs");
        let u = uri(p);
        assert_eq!(u, "file:///tmp/a%20b/%C3%BC%231.rs");
        assert_eq!(path_of(&u).unwrap(), p);
        assert_eq!(path_of("file://localhost/x/y").unwrap(), Path::new("/x/y"));
        assert!(path_of("http://x/y").is_none());
        assert!(path_of("file:///bad%zz").is_none());
    }

    #[test]
    fn file_types_by_extension_and_language() {
        let ft = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(handles(&ft(&["go", "mod"]), Path::new("/p/go.mod")));
        assert!(handles(&ft(&[".py"]), Path::new("/p/a.PY")));
        assert!(handles(&ft(&["typescript"]), Path::new("/p/a.mts")));
        assert!(!handles(&ft(&["typescript"]), Path::new("/p/a.tsx")));
        assert!(!handles(&ft(&["go"]), Path::new("/p/cargo")));
        assert!(handles(&[], Path::new("/p/anything")));
        assert_eq!(language_id(Path::new("x.tsx")), "typescriptreact");
    }

    #[test]
    fn columns_in_each_encoding() {
        let line = "a😀é=1";
        let byte = line.find('=').unwrap();
        assert_eq!(Encoding::Utf8.column(line, byte), 7);
        assert_eq!(Encoding::Utf16.column(line, byte), 4);
        assert_eq!(Encoding::Utf32.column(line, byte), 3);
        for e in [Encoding::Utf8, Encoding::Utf16, Encoding::Utf32] {
            assert_eq!(e.byte(line, e.column(line, byte)), byte);
            assert_eq!(e.byte(line, 99), line.len());
        }
    }

    #[test]
    fn edits_apply_from_the_end_and_overlaps_are_refused() {
        let text = "let x = 1;\r\nprint(x);\n";
        let r = |l1: u64, c1: u64, l2: u64, c2: u64| json!({"start": {"line": l1, "character": c1}, "end": {"line": l2, "character": c2}});
        let edits = [
            json!({"range": r(1, 6, 1, 7), "newText": "yy"}),
            json!({"range": r(0, 4, 0, 5), "newText": "yy"}),
        ];
        assert_eq!(
            apply_edits(text, &edits, Encoding::Utf16).unwrap(),
            "let yy = 1;\r\nprint(yy);\n"
        );
        let overlapping = [
            json!({"range": r(0, 0, 0, 5), "newText": ""}),
            json!({"range": r(0, 4, 0, 6), "newText": ""}),
        ];
        assert!(apply_edits(text, &overlapping, Encoding::Utf16).is_err());
        // Past the end of a line or of the file: clamped.
        let far = [json!({"range": r(0, 90, 9, 0), "newText": "!"})];
        assert_eq!(
            apply_edits(text, &far, Encoding::Utf8).unwrap(),
            "let x = 1;!"
        );
    }
}
