//! File history: the `files` table as Go Crush writes it (one row per version of a path in a
//! session, numbered from 0), plus three columns of this program's: the tool call that wrote
//! the version, whether the version is "no file" (before a file was created, after it was
//! removed), and whether its content was too large to keep.
//!
//! A change made by a tool call stores the file's previous content (unless the latest version
//! already is that content) and its new content, marked with the call's id. Undoing the last
//! change of a session deletes the versions that call wrote; its previous versions are then the
//! latest again.

use super::{Result, Store, StoreError, now_secs, path_text};
use rusqlite::{OptionalExtension, params, types::ValueRef};
use std::path::Path;

/// Content larger than this is not kept (the version records that it was omitted).
pub(crate) const MAX_KEPT_BYTES: usize = 10 * 1024 * 1024;

/// A file's content as the history is given it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Content<'a> {
    /// There is no file.
    Absent,
    Bytes(&'a [u8]),
    /// Too large to keep (or to read): only the fact is recorded.
    Omitted,
}

/// One stored version of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileVersion {
    pub session_id: String,
    pub path: String,
    /// The bytes (empty when `absent` or `omitted`).
    pub content: Vec<u8>,
    pub version: i64,
    /// Unix seconds.
    pub created_at: i64,
    /// The tool call that wrote this version (None: the content found before a change, or a
    /// version Go Crush wrote).
    pub tool_call_id: Option<String>,
    /// There was no file.
    pub absent: bool,
    /// The content was too large to keep.
    pub omitted: bool,
}

impl FileVersion {
    /// The content as it was, if it was kept: Some(None) for "no file".
    pub(crate) fn state(&self) -> Option<Option<&[u8]>> {
        match (self.absent, self.omitted) {
            (true, _) => Some(None),
            (false, true) => None,
            (false, false) => Some(Some(&self.content)),
        }
    }
}

/// The last change of a session: for each file the call changed, the version before it and
/// the version it left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Change {
    pub tool_call_id: String,
    pub files: Vec<(FileVersion, FileVersion)>,
}

/// The columns read, with what a database without this program's columns reads instead.
pub(super) const COLUMNS: &[(&str, &str)] = &[
    ("session_id", "session_id"),
    ("path", "path"),
    ("content", "''"),
    ("version", "0"),
    ("created_at", "0"),
    ("tool_call_id", "NULL"),
    ("absent", "0"),
    ("omitted", "0"),
];

fn version_from_row(r: &rusqlite::Row) -> rusqlite::Result<FileVersion> {
    let content = match r.get_ref(2)? {
        ValueRef::Text(b) | ValueRef::Blob(b) => b.to_vec(),
        _ => Vec::new(),
    };
    Ok(FileVersion {
        session_id: r.get(0)?,
        path: r.get(1)?,
        content,
        version: r.get(3)?,
        created_at: r.get(4)?,
        tool_call_id: r.get(5)?,
        absent: r.get(6)?,
        omitted: r.get(7)?,
    })
}

/// Text when it is UTF-8 (what Go Crush writes and reads), else a blob.
fn content_value(bytes: &[u8]) -> rusqlite::types::Value {
    match std::str::from_utf8(bytes) {
        Ok(s) => rusqlite::types::Value::Text(s.to_string()),
        Err(_) => rusqlite::types::Value::Blob(bytes.to_vec()),
    }
}

impl Store {
    /// Records that the tool call `tool_call_id` changed `path` from `before` to `after` (None:
    /// no file), in one transaction.
    pub(crate) fn record_file_change(
        &self,
        session_id: &str,
        tool_call_id: &str,
        path: &Path,
        before: Content,
        after: Content,
    ) -> Result<()> {
        let path = path_text(path);
        let tx = self.write_tx()?;
        if !super::session_exists(&tx, session_id)? {
            return Err(StoreError::NotFound(session_id.to_string()));
        }
        let latest = tx
            .prepare_cached(&format!(
                "SELECT {} FROM files WHERE session_id = ?1 AND path = ?2
                 ORDER BY version DESC LIMIT 1",
                self.layout.files
            ))?
            .query_row(params![session_id, path], version_from_row)
            .optional()?;
        let mut next = latest.as_ref().map_or(0, |v| v.version + 1);
        let mut insert = |content: Content, call: Option<&str>| -> Result<()> {
            let omitted = match content {
                Content::Bytes(c) => c.len() > MAX_KEPT_BYTES,
                Content::Omitted => true,
                Content::Absent => false,
            };
            let stored = match content {
                Content::Bytes(c) if !omitted => content_value(c),
                _ => rusqlite::types::Value::Text(String::new()),
            };
            let now = now_secs();
            tx.prepare_cached(
                "INSERT INTO files (id, session_id, path, content, version, created_at,
                     updated_at, tool_call_id, absent, omitted)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7, ?8, ?9)",
            )?
            .execute(params![
                super::new_id()?,
                session_id,
                path,
                stored,
                next,
                now,
                call,
                content == Content::Absent,
                omitted
            ])?;
            next += 1;
            Ok(())
        };
        // The content before the change, unless the history already ends with it (a file
        // changed outside crush since gets a version of its own, as Go Crush does).
        let known = match before {
            Content::Absent => Some(None),
            Content::Bytes(b) => Some(Some(b)),
            Content::Omitted => None,
        };
        if known.is_none() || latest.as_ref().and_then(FileVersion::state) != known {
            insert(before, None)?;
        }
        insert(after, Some(tool_call_id))?;
        tx.commit()?;
        Ok(())
    }

    /// The versions of the session's files (of `path` only, if given), by path then version.
    pub(crate) fn file_versions(
        &self,
        session_id: &str,
        path: Option<&Path>,
    ) -> Result<Vec<FileVersion>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {} FROM files WHERE session_id = ?1 AND (?2 IS NULL OR path = ?2)
             ORDER BY path, version",
            self.layout.files
        ))?;
        let rows = stmt
            .query_map(params![session_id, path.map(path_text)], version_from_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// The session's last change a tool call made that is still in its history.
    pub(crate) fn last_file_change(&self, session_id: &str) -> Result<Option<Change>> {
        let Some(call) = self
            .conn
            .prepare_cached(
                "SELECT tool_call_id FROM files WHERE session_id = ?1 AND tool_call_id IS NOT NULL
                 ORDER BY rowid DESC LIMIT 1",
            )?
            .query_row([session_id], |r| r.get::<_, String>(0))
            .optional()?
        else {
            return Ok(None);
        };
        let all = self.file_versions(session_id, None)?;
        let mut files = Vec::new();
        for v in all
            .iter()
            .filter(|v| v.tool_call_id.as_deref() == Some(&call))
        {
            if files
                .iter()
                .any(|(_, a): &(FileVersion, FileVersion)| a.path == v.path)
            {
                continue;
            }
            let of_path: Vec<&FileVersion> = all.iter().filter(|o| o.path == v.path).collect();
            let first = of_path
                .iter()
                .position(|o| o.tool_call_id.as_deref() == Some(&call))
                .unwrap_or(0);
            let last = of_path
                .iter()
                .rposition(|o| o.tool_call_id.as_deref() == Some(&call))
                .unwrap_or(first);
            let before = match first.checked_sub(1) {
                Some(i) => of_path[i].clone(),
                // No version before it (Go Crush's history, or rows removed): nothing known.
                None => FileVersion {
                    omitted: true,
                    ..of_path[first].clone()
                },
            };
            files.push((before, of_path[last].clone()));
        }
        Ok(Some(Change {
            tool_call_id: call,
            files,
        }))
    }

    /// Removes from the history the versions the tool call wrote (after it was undone).
    pub(crate) fn forget_file_change(&self, session_id: &str, tool_call_id: &str) -> Result<usize> {
        let tx = self.write_tx()?;
        let n = tx
            .prepare_cached("DELETE FROM files WHERE session_id = ?1 AND tool_call_id = ?2")?
            .execute(params![session_id, tool_call_id])?;
        tx.commit()?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("crush.db")).unwrap();
        (d, s)
    }

    #[test]
    fn a_change_stores_the_content_before_and_after_numbered_per_session() {
        let (_d, s) = store();
        let a = s.create_session("a", None).unwrap();
        let b = s.create_session("b", None).unwrap();
        let p = Path::new("/p/f.txt");
        s.record_file_change(&a.id, "c1", p, Content::Absent, Content::Bytes(b"one"))
            .unwrap();
        s.record_file_change(
            &a.id,
            "c2",
            p,
            Content::Bytes(b"one"),
            Content::Bytes(b"two"),
        )
        .unwrap();
        // Changed outside crush in between: the found content gets a version of its own.
        s.record_file_change(
            &a.id,
            "c3",
            p,
            Content::Bytes(b"edited"),
            Content::Bytes(&[0xff, 0]),
        )
        .unwrap();
        s.record_file_change(&b.id, "c9", p, Content::Bytes(b"x"), Content::Bytes(b"y"))
            .unwrap();
        let v = s.file_versions(&a.id, Some(p)).unwrap();
        let summary: Vec<(i64, Option<&str>, bool, &[u8])> = v
            .iter()
            .map(|v| {
                (
                    v.version,
                    v.tool_call_id.as_deref(),
                    v.absent,
                    v.content.as_slice(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (0, None, true, &b""[..]),
                (1, Some("c1"), false, b"one"),
                (2, Some("c2"), false, b"two"),
                (3, None, false, b"edited"),
                (4, Some("c3"), false, &[0xff, 0]),
            ]
        );
        assert_eq!(s.file_versions(&b.id, None).unwrap().len(), 2);
        assert_eq!(s.file_versions(&b.id, None).unwrap()[0].version, 0);
    }

    #[test]
    fn the_last_change_pairs_each_file_with_its_version_before_and_is_forgotten() {
        let (_d, s) = store();
        let a = s.create_session("a", None).unwrap();
        let (p, q) = (Path::new("/p/a"), Path::new("/p/b"));
        assert_eq!(s.last_file_change(&a.id).unwrap(), None);
        s.record_file_change(&a.id, "c1", p, Content::Bytes(b"1"), Content::Bytes(b"2"))
            .unwrap();
        s.record_file_change(&a.id, "c2", q, Content::Absent, Content::Bytes(b"new"))
            .unwrap();
        s.record_file_change(&a.id, "c2", p, Content::Bytes(b"2"), Content::Bytes(b"3"))
            .unwrap();
        let c = s.last_file_change(&a.id).unwrap().unwrap();
        assert_eq!(c.tool_call_id, "c2");
        type State<'a> = Option<Option<&'a [u8]>>;
        let pairs: Vec<(&str, State, State)> = c
            .files
            .iter()
            .map(|(b, a)| (b.path.as_str(), b.state(), a.state()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("/p/a", Some(Some(&b"2"[..])), Some(Some(&b"3"[..]))),
                ("/p/b", Some(None), Some(Some(&b"new"[..]))),
            ]
        );
        assert_eq!(s.forget_file_change(&a.id, "c2").unwrap(), 2);
        assert_eq!(
            s.last_file_change(&a.id).unwrap().unwrap().tool_call_id,
            "c1"
        );
    }

    #[test]
    fn content_too_large_is_recorded_as_omitted() {
        let (_d, s) = store();
        let a = s.create_session("a", None).unwrap();
        let big = vec![b'x'; MAX_KEPT_BYTES + 1];
        s.record_file_change(
            &a.id,
            "c1",
            Path::new("/big"),
            Content::Bytes(b"small"),
            Content::Bytes(&big),
        )
        .unwrap();
        let v = s.file_versions(&a.id, None).unwrap();
        assert!(v[1].omitted && v[1].content.is_empty() && v[1].state().is_none());
    }
}
