//! Finds, without decoding, where each provider of a catalog document starts and ends and where
//! its `models` array is, so a start decodes the small provider heads and leaves the models
//! (nearly all of the document's bytes) as text until a provider's models are used.
//!
//! This is a fast path only: it trusts nothing it does not check and answers `None` for
//! anything it does not expect (a document that is not an array of objects, a duplicate
//! `models` key, a string that does not end), and the caller then decodes the document the
//! slow, strict way, which reports the error where there is one.

use std::ops::Range;

/// One provider object of the array: its bytes, and the bytes of its `models` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub object: Range<usize>,
    pub models: Option<Range<usize>>,
}

/// Whether `entries` can be the split of `doc`: in order, inside it, each object between braces
/// and each models value between brackets (an index kept from an earlier split is checked so
/// before it is trusted; a head that then fails to decode sends the caller the strict way).
pub(super) fn fits(doc: &[u8], entries: &[Entry]) -> bool {
    let mut after = 0;
    entries.iter().all(|e| {
        let o = &e.object;
        let ok = o.start >= after
            && o.start < o.end
            && o.end <= doc.len()
            && doc[o.start] == b'{'
            && doc[o.end - 1] == b'}'
            && e.models.as_ref().is_none_or(|m| {
                m.start > o.start
                    && m.start < m.end
                    && m.end < o.end
                    && doc[m.start] == b'['
                    && doc[m.end - 1] == b']'
            });
        after = o.end;
        ok
    })
}

/// `entries` as rows of four numbers (object start and end, models start and end, 0 and 0
/// for none), the form the index is kept in.
pub(super) fn to_rows(entries: &[Entry]) -> Vec<[usize; 4]> {
    entries
        .iter()
        .map(|e| {
            let m = e.models.clone().unwrap_or(0..0);
            [e.object.start, e.object.end, m.start, m.end]
        })
        .collect()
}

/// The entries of [`to_rows`]'s rows.
pub(super) fn from_rows(rows: &[[usize; 4]]) -> Vec<Entry> {
    rows.iter()
        .map(|r| Entry {
            object: r[0]..r[1],
            models: (r[2] < r[3]).then_some(r[2]..r[3]),
        })
        .collect()
}

/// The providers of `doc`, a JSON array of objects; `None` when the document is anything else.
pub(super) fn providers(doc: &[u8]) -> Option<Vec<Entry>> {
    let mut at = skip_ws(doc, 0);
    if doc.get(at) != Some(&b'[') {
        return None;
    }
    at = skip_ws(doc, at + 1);
    let mut out = Vec::new();
    if doc.get(at) == Some(&b']') {
        return Some(out);
    }
    loop {
        let (entry, end) = object(doc, at)?;
        out.push(entry);
        at = skip_ws(doc, end);
        match doc.get(at)? {
            b',' => at = skip_ws(doc, at + 1),
            b']' => break,
            _ => return None,
        }
    }
    // Nothing but white space may follow the array.
    (skip_ws(doc, at + 1) == doc.len()).then_some(out)
}

/// The object at `at` (which must start there) and the offset just past it.
fn object(doc: &[u8], at: usize) -> Option<(Entry, usize)> {
    if doc.get(at) != Some(&b'{') {
        return None;
    }
    let mut models = None;
    let mut i = skip_ws(doc, at + 1);
    if doc.get(i) == Some(&b'}') {
        return Some((
            Entry {
                object: at..i + 1,
                models,
            },
            i + 1,
        ));
    }
    loop {
        if doc.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(doc, i + 1)?;
        let key = &doc[i + 1..key_end - 1];
        i = skip_ws(doc, key_end);
        if doc.get(i) != Some(&b':') {
            return None;
        }
        let start = skip_ws(doc, i + 1);
        let end = value_end(doc, start)?;
        if key == b"models" {
            if models.is_some() {
                return None;
            }
            models = Some(start..end);
        }
        i = skip_ws(doc, end);
        match doc.get(i)? {
            b',' => i = skip_ws(doc, i + 1),
            b'}' => {
                return Some((
                    Entry {
                        object: at..i + 1,
                        models,
                    },
                    i + 1,
                ));
            }
            _ => return None,
        }
    }
}

/// The offset just past the value starting at `at`: a string, an array or object (brackets
/// counted outside strings), or a scalar (up to the next delimiter).
fn value_end(doc: &[u8], at: usize) -> Option<usize> {
    match doc.get(at)? {
        b'"' => string_end(doc, at + 1),
        b'[' | b'{' => {
            let mut depth = 0usize;
            let mut i = at;
            while i < doc.len() {
                match doc[i] {
                    b'"' => {
                        i = string_end(doc, i + 1)?;
                        continue;
                    }
                    b'[' | b'{' => depth += 1,
                    b']' | b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let len = doc[at..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace())
                .unwrap_or(doc.len() - at);
            (len > 0).then_some(at + len)
        }
    }
}

/// The offset just past the closing quote of the string whose contents start at `at`.
fn string_end(doc: &[u8], mut at: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has = |v: u64, b: u8| {
        let x = v ^ (ONES * u64::from(b));
        x.wrapping_sub(ONES) & !x & HIGH
    };
    loop {
        // Eight bytes at a time while none of them is a quote or a backslash.
        while let Some(chunk) = doc.get(at..at + 8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            let v = u64::from_le_bytes(word);
            if has(v, b'"') | has(v, b'\\') != 0 {
                break;
            }
            at += 8;
        }
        match doc.get(at)? {
            b'"' => return Some(at + 1),
            b'\\' => at += 2,
            _ => at += 1,
        }
    }
}

fn skip_ws(doc: &[u8], mut at: usize) -> usize {
    while doc.get(at).is_some_and(|b| b.is_ascii_whitespace()) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(doc: &str) -> Option<Vec<(String, Option<String>)>> {
        Some(
            providers(doc.as_bytes())?
                .into_iter()
                .map(|e| {
                    (
                        doc[e.object].to_string(),
                        e.models.map(|m| doc[m].to_string()),
                    )
                })
                .collect(),
        )
    }

    #[test]
    fn finds_each_object_and_its_models() {
        let doc = r#" [ {"id":"a","models":[{"id":"m\"]}{","n":[1,2]}],"x":{"models":3}} ,
            {"models" : [] , "id":"b"}, {} ] "#;
        let got = pieces(doc).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].1.as_deref(), Some(r#"[{"id":"m\"]}{","n":[1,2]}]"#));
        assert!(got[0].0.ends_with(r#""x":{"models":3}}"#));
        assert_eq!(got[1].1.as_deref(), Some("[]"));
        assert_eq!(got[2], ("{}".to_string(), None));
        assert_eq!(pieces("[]"), Some(vec![]));
    }

    #[test]
    fn anything_unexpected_is_left_to_the_strict_decoder() {
        for doc in [
            "",
            "{}",
            "[1]",
            r#"[{"id":"x","#,
            r#"[{"id":"x"}"#,
            r#"[{"id":"x}]"#,
            r#"[{"models":[],"models":[]}]"#,
            r#"[{"id" "x"}]"#,
            r#"[{"id":"x"}] trailing"#,
            r#"[{"id":"x"} {"id":"y"}]"#,
        ] {
            assert_eq!(providers(doc.as_bytes()), None, "{doc}");
        }
    }

    #[test]
    fn an_index_is_trusted_only_where_it_fits() {
        let doc = br#"[{"id":"a","models":[1]},{"id":"b"}]"#;
        let entries = providers(doc).unwrap();
        assert!(fits(doc, &entries));
        let rows = to_rows(&entries);
        assert_eq!(from_rows(&rows), entries);
        let mut shifted = rows.clone();
        shifted[0][0] += 1;
        assert!(!fits(doc, &from_rows(&shifted)));
        let mut long = rows;
        long[1][1] = doc.len() + 5;
        assert!(!fits(doc, &from_rows(&long)));
        assert!(!fits(br#"[{"id":"a","models":"x1"},{"id":"b"}]"#, &entries));
    }

    #[test]
    fn long_strings_with_escapes_end_where_they_end() {
        let long = format!(
            r#"[{{"d":"{}\\\"{}","models":[7]}}]"#,
            "a".repeat(37),
            "é".repeat(20)
        );
        let got = pieces(&long).unwrap();
        assert_eq!(got[0].1.as_deref(), Some("[7]"));
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&got[0].0).unwrap()["models"][0],
            7
        );
    }
}
