//! `projects.json` in the global data dir: known projects, most recent first, written atomically.
//!
//! Format (Crush's): `{"projects":[{"path","data_dir","last_accessed"}]}`, `last_accessed` in
//! RFC 3339 UTC, keyed by exact path, sorted by `last_accessed` descending, mode 0600.

use crate::fsutil::{Lock, write_atomic};
use crate::time::{parse_rfc3339, rfc3339_utc};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

const FILE_NAME: &str = "projects.json";
const LOCK_NAME: &str = "projects.json.lock";

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Project {
    pub path: String,
    pub data_dir: String,
    /// RFC 3339, UTC.
    pub last_accessed: String,
}

#[derive(Serialize, Deserialize, Default)]
struct ProjectList {
    #[serde(default)]
    projects: Vec<Project>,
}

/// How stale `last_accessed` may be before a start rewrites the file: a script that runs crush
/// in a loop pays for one synced write a minute, not one per run.
const FRESH_SECS: i64 = 60;

/// Records that `project` (with data dir `data_dir`) was used now. Safe when several processes
/// write at once (temp file + rename under a lock file). Skipped when the project is already the
/// most recent entry and was touched less than a minute ago.
///
/// A damaged file (other tools use it to find databases) is not silently replaced: it is moved
/// aside to `projects.json.corrupt-<unix time>`, the entries that still parse are kept, and a
/// warning goes to stderr.
pub(crate) fn touch(global_data: &Path, project: &Path, data_dir: &Path) -> io::Result<()> {
    if let Some(w) = touch_reporting(global_data, project, data_dir)? {
        crate::ewriteln!("crush: warning: {}", crate::visible::text(&w));
    }
    Ok(())
}

/// `touch`, returning the warning instead of printing it.
fn touch_reporting(
    global_data: &Path,
    project: &Path,
    data_dir: &Path,
) -> io::Result<Option<String>> {
    let now = SystemTime::now();
    let file = global_data.join(FILE_NAME);
    if let Some(first) = read_strict(&file)
        .ok()
        .and_then(Result::ok)
        .and_then(|p| p.into_iter().next())
        && first.path == project.to_string_lossy()
        && first.data_dir == data_dir.to_string_lossy()
        && let (Some(seen), Some(now_s)) = (
            parse_rfc3339(&first.last_accessed).map(|(secs, _)| secs),
            now.duration_since(UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs() as i64),
        )
        && (0..FRESH_SECS).contains(&(now_s - seen))
    {
        return Ok(None);
    }
    crate::fsutil::private_dir(global_data)?;
    let _lock = Lock::acquire(&global_data.join(LOCK_NAME))?;

    let (mut projects, warning) = match read_strict(&file)? {
        Ok(p) => (p, None),
        Err((e, bytes)) => {
            let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
            let aside = move_aside(&file, secs)?;
            let kept = salvage(&bytes);
            let w = format!(
                "{} could not be read ({e}); moved it to {} and kept its {} valid entries",
                file.display(),
                aside.display(),
                kept.len()
            );
            (kept, Some(w))
        }
    };
    let path = project.to_string_lossy().into_owned();
    projects.retain(|p| p.path != path);
    projects.push(Project {
        path,
        data_dir: data_dir.to_string_lossy().into_owned(),
        last_accessed: rfc3339_utc(now),
    });
    // Stable sort, newest first; unparseable timestamps go last.
    projects.sort_by_key(|p| std::cmp::Reverse(parse_rfc3339(&p.last_accessed)));

    let mut text = serde_json::to_string_pretty(&ProjectList { projects })
        .map_err(|e| io::Error::other(format!("cannot encode {FILE_NAME}: {e}")))?;
    text.push('\n');
    write_atomic(&file, text.as_bytes())?;
    Ok(warning)
}

/// The file's projects; the inner error (with the file's bytes) when it is not valid. A missing
/// or blank file is an empty list.
#[allow(clippy::type_complexity)]
fn read_strict(file: &Path) -> io::Result<Result<Vec<Project>, (serde_json::Error, Vec<u8>)>> {
    match fs::read(file) {
        Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => Ok(Ok(Vec::new())),
        Ok(bytes) => Ok(match serde_json::from_slice::<ProjectList>(&bytes) {
            Ok(l) => Ok(l.projects),
            Err(e) => Err((e, bytes)),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Ok(Vec::new())),
        Err(e) => Err(e),
    }
}

/// The entries of a damaged file that are still valid on their own.
fn salvage(bytes: &[u8]) -> Vec<Project> {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes) else {
        return Vec::new();
    };
    let Some(entries) = v.get("projects").and_then(|p| p.as_array()) else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|e| serde_json::from_value::<Project>(e.clone()).ok())
        .collect()
}

/// Renames `file` to `<file>.corrupt-<secs>` (with `-2`, `-3`... if taken); the new name.
fn move_aside(file: &Path, secs: u64) -> io::Result<std::path::PathBuf> {
    let base = format!("{}.corrupt-{secs}", file.display());
    let mut aside = std::path::PathBuf::from(&base);
    let mut n = 1;
    while aside.exists() {
        n += 1;
        aside = format!("{base}-{n}").into();
    }
    fs::rename(file, &aside)?;
    Ok(aside)
}

/// The known projects, most recent first. A missing or unreadable-as-JSON file is an empty list.
pub(crate) fn list(global_data: &Path) -> io::Result<Vec<Project>> {
    read_projects(&global_data.join(FILE_NAME))
}

fn read_projects(file: &Path) -> io::Result<Vec<Project>> {
    match fs::read(file) {
        Ok(bytes) => Ok(serde_json::from_slice::<ProjectList>(&bytes)
            .map(|l| l.projects)
            .unwrap_or_default()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touch_adds_updates_and_sorts() {
        let dir = tempfile::tempdir().unwrap();
        let g = dir.path().join("global");
        // Existing entries written by Go Crush (fractional seconds, an offset).
        fs::create_dir_all(&g).unwrap();
        fs::write(
            g.join(FILE_NAME),
            r#"{"projects":[
                {"path":"/old","data_dir":"/old/.crush","last_accessed":"2020-01-01T00:00:00.123456Z"},
                {"path":"/mid","data_dir":"/mid/.crush","last_accessed":"2021-01-01T01:00:00+01:00"},
                {"path":"/a","data_dir":"/a/.crush","last_accessed":"2019-01-01T00:00:00Z"}
            ]}"#,
        )
        .unwrap();
        touch(&g, Path::new("/a"), Path::new("/a/.crush2")).unwrap();
        let l = list(&g).unwrap();
        let paths: Vec<&str> = l.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, ["/a", "/mid", "/old"]);
        assert_eq!(l[0].data_dir, "/a/.crush2");
        assert!(parse_rfc3339(&l[0].last_accessed).is_some());
        assert!(l[0].last_accessed.ends_with('Z'));
        // Untouched entries keep their text.
        assert_eq!(l[2].last_accessed, "2020-01-01T00:00:00.123456Z");
        // No temp files left behind.
        let names: Vec<String> = fs::read_dir(&g)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains(".tmp.")), "{names:?}");
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(g.join(FILE_NAME))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    fn corrupt_copies(g: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(g)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("projects.json.corrupt-"))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_corrupt_file_is_moved_aside_not_lost() {
        let dir = tempfile::tempdir().unwrap();
        let g = dir.path();
        fs::write(g.join(FILE_NAME), "{not json").unwrap();
        assert!(list(g).unwrap().is_empty());
        let w = touch_reporting(g, Path::new("/p"), Path::new("/p/.crush"))
            .unwrap()
            .expect("a warning");
        let l = list(g).unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].path, "/p");
        let copies = corrupt_copies(g);
        assert_eq!(copies.len(), 1, "{copies:?}");
        assert!(w.contains(&copies[0]), "{w}");
        assert_eq!(fs::read_to_string(g.join(&copies[0])).unwrap(), "{not json");

        // Damaged again in the same second: a second copy, the first one kept.
        fs::write(g.join(FILE_NAME), r#"{"projects":5}"#).unwrap();
        touch(g, Path::new("/q"), Path::new("/q/.crush")).unwrap();
        assert_eq!(corrupt_copies(g).len(), 2);
        // A healthy file gives no warning.
        let w = touch_reporting(g, Path::new("/r"), Path::new("/r/.crush")).unwrap();
        assert_eq!(w, None);
    }

    #[test]
    fn one_bad_entry_keeps_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let g = dir.path();
        let text = r#"{"projects":[
            {"path":"/good","data_dir":"/good/.crush","last_accessed":"2020-01-01T00:00:00Z"},
            {"path":"/bad","data_dir":7}
        ]}"#;
        fs::write(g.join(FILE_NAME), text).unwrap();
        let w = touch_reporting(g, Path::new("/p"), Path::new("/p/.crush")).unwrap();
        assert!(w.unwrap().contains("kept its 1 valid entries"));
        let paths: Vec<String> = list(g).unwrap().into_iter().map(|p| p.path).collect();
        assert_eq!(paths, ["/p", "/good"]);
        let copies = corrupt_copies(g);
        assert_eq!(fs::read_to_string(g.join(&copies[0])).unwrap(), text);
    }

    #[test]
    fn a_blank_file_is_an_empty_list() {
        let dir = tempfile::tempdir().unwrap();
        let g = dir.path();
        fs::write(g.join(FILE_NAME), "\n").unwrap();
        let w = touch_reporting(g, Path::new("/p"), Path::new("/p/.crush")).unwrap();
        assert_eq!(w, None);
        assert!(corrupt_copies(g).is_empty());
    }

    #[test]
    fn missing_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        assert!(list(&dir.path().join("nope")).unwrap().is_empty());
    }

    #[test]
    fn concurrent_touches_keep_every_entry() {
        let dir = tempfile::tempdir().unwrap();
        let g = dir.path().join("g");
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let g = g.clone();
                std::thread::spawn(move || {
                    for i in 0..10 {
                        let p = format!("/proj/{t}/{i}");
                        touch(&g, Path::new(&p), Path::new(&format!("{p}/.crush"))).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let text = fs::read_to_string(g.join(FILE_NAME)).unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        let l = list(&g).unwrap();
        assert_eq!(parsed["projects"].as_array().unwrap().len(), 80);
        assert_eq!(l.len(), 80);
        let mut paths: Vec<&str> = l.iter().map(|p| p.path.as_str()).collect();
        paths.sort();
        paths.dedup();
        assert_eq!(paths.len(), 80);
        // Sorted newest first.
        let keys: Vec<_> = l.iter().map(|p| parse_rfc3339(&p.last_accessed)).collect();
        assert!(keys.windows(2).all(|w| w[0] >= w[1]));
    }
}
