//! Line numbers of the keys and array elements of a JSON text, for `config show --origin` and
//! for warnings that name `file:line`.
//!
//! A small scanner over text that serde_json has already accepted: it follows strings, objects
//! and arrays and records, for each JSON pointer (`/options/context_paths/0`), the line where the
//! key (or, in an array, the element) starts. It never fails; on unexpected input it stops and
//! returns what it has.

use std::collections::BTreeMap;

/// JSON pointer → 1-based line.
pub(crate) type Positions = BTreeMap<String, u32>;

/// Escapes one pointer segment (RFC 6901).
pub(crate) fn escape(seg: &str) -> String {
    seg.replace('~', "~0").replace('/', "~1")
}

/// Removes the value at `ptr` from `v` (an array element is taken out, or, with `blank`, replaced
/// by "" so that the pointers of later elements stay valid). False if nothing was there.
pub(crate) fn remove(v: &mut serde_json::Value, ptr: &str, blank: bool) -> bool {
    use serde_json::Value;
    let Some((parent, last)) = ptr.rsplit_once('/') else {
        return false;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    match v.pointer_mut(parent) {
        Some(Value::Object(m)) => m.remove(&last).is_some(),
        Some(Value::Array(a)) => match last.parse::<usize>() {
            Ok(i) if i < a.len() && blank => {
                a[i] = Value::String(String::new());
                true
            }
            Ok(i) if i < a.len() => {
                a.remove(i);
                true
            }
            _ => false,
        },
        _ => false,
    }
}

/// Joins a pointer and a segment.
pub(crate) fn child(ptr: &str, seg: &str) -> String {
    format!("{ptr}/{}", escape(seg))
}

/// `options.context_paths[0]`, `providers."a.b".api_key`.
pub(crate) fn dotted(ptr: &str) -> String {
    let mut out = String::new();
    for seg in ptr.trim_start_matches('/').split('/') {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if !seg.is_empty() && seg.chars().all(|c| c.is_ascii_digit()) && !out.is_empty() {
            out.push_str(&format!("[{seg}]"));
            continue;
        }
        if !out.is_empty() {
            out.push('.');
        }
        if seg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '$')
        {
            out.push_str(&seg);
        } else {
            out.push_str(&format!("{seg:?}"));
        }
    }
    out
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    line: u32,
    out: Positions,
}

impl Scanner<'_> {
    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.i) {
            match c {
                b'\n' => {
                    self.line += 1;
                    self.i += 1;
                }
                b' ' | b'\t' | b'\r' => self.i += 1,
                _ => break,
            }
        }
    }

    /// Reads a string starting at `"`; returns its decoded value.
    fn string(&mut self) -> Option<String> {
        let start = self.i;
        self.i += 1;
        while let Some(&c) = self.b.get(self.i) {
            match c {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    let raw = std::str::from_utf8(&self.b[start..self.i]).ok()?;
                    return serde_json::from_str(raw).ok();
                }
                b'\n' => {
                    self.line += 1;
                    self.i += 1;
                }
                _ => self.i += 1,
            }
        }
        None
    }

    fn value(&mut self, ptr: &str) -> Option<()> {
        self.ws();
        match *self.b.get(self.i)? {
            b'{' => {
                self.i += 1;
                loop {
                    self.ws();
                    match *self.b.get(self.i)? {
                        b'}' => {
                            self.i += 1;
                            return Some(());
                        }
                        b',' => self.i += 1,
                        b'"' => {
                            let line = self.line;
                            let key = self.string()?;
                            let p = child(ptr, &key);
                            self.out.insert(p.clone(), line);
                            self.ws();
                            if self.b.get(self.i) != Some(&b':') {
                                return None;
                            }
                            self.i += 1;
                            self.value(&p)?;
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let mut idx = 0usize;
                loop {
                    self.ws();
                    match *self.b.get(self.i)? {
                        b']' => {
                            self.i += 1;
                            return Some(());
                        }
                        b',' => self.i += 1,
                        _ => {
                            let p = format!("{ptr}/{idx}");
                            self.out.insert(p.clone(), self.line);
                            self.value(&p)?;
                            idx += 1;
                        }
                    }
                }
            }
            b'"' => self.string().map(|_| ()),
            _ => {
                while let Some(&c) = self.b.get(self.i) {
                    if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
                        break;
                    }
                    self.i += 1;
                }
                Some(())
            }
        }
    }
}

/// The positions of every key and array element of `text`.
pub(crate) fn positions(text: &str) -> Positions {
    let mut s = Scanner {
        b: text.as_bytes(),
        i: 0,
        line: 1,
        out: Positions::new(),
    };
    let _ = s.value("");
    s.out
}

/// The line of `ptr`, else of its nearest ancestor that has one.
pub(crate) fn line_of(pos: &Positions, ptr: &str) -> Option<u32> {
    let mut p = ptr;
    loop {
        if let Some(&l) = pos.get(p) {
            return Some(l);
        }
        match p.rfind('/') {
            Some(i) if i > 0 => p = &p[..i],
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_elements_have_lines() {
        let text = "{\n  \"a\": 1,\n  \"o\": {\n    \"x/y\": \"s\\\"}\",\n    \"arr\": [\n      1,\n      {\"k\": true}\n    ]\n  }\n}\n";
        let p = positions(text);
        assert_eq!(p["/a"], 2);
        assert_eq!(p["/o"], 3);
        assert_eq!(p["/o/x~1y"], 4);
        assert_eq!(p["/o/arr"], 5);
        assert_eq!(p["/o/arr/0"], 6);
        assert_eq!(p["/o/arr/1"], 7);
        assert_eq!(p["/o/arr/1/k"], 7);
        assert_eq!(line_of(&p, "/o/arr/9"), Some(5));
        assert_eq!(line_of(&p, "/zz"), None);
    }

    #[test]
    fn multiline_strings_do_not_confuse_lines() {
        // JSON strings cannot hold raw newlines, but escaped ones must not count.
        let p = positions("{\"a\": \"x\\ny\",\n\"b\": 2}");
        assert_eq!(p["/b"], 2);
    }
    #[test]
    fn dotted_paths() {
        assert_eq!(
            dotted("/options/context_paths/0"),
            "options.context_paths[0]"
        );
        assert_eq!(
            dotted("/providers/a.b/api_key"),
            "providers.\"a.b\".api_key"
        );
        assert_eq!(dotted("/x~1y"), "\"x/y\"");
    }
}
