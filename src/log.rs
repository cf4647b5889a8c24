//! The log file `<project data>/logs/crush.log`: one JSON object per line
//! (`{"time","level","msg"}`), as Go Crush writes it, so `crush logs` and any JSON tool read it.
//! Debug lines are written only with `-d` / `options.debug`, which also echoes them to stderr.
//! Logging never fails a command: a log that cannot be written is skipped.

use serde_json::json;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Past this size the log is moved to `crush.log.1` (one old copy is kept).
const MAX_BYTES: u64 = 10 * 1024 * 1024;

struct Logger {
    file: File,
    debug: bool,
}

static LOGGER: Mutex<Option<Logger>> = Mutex::new(None);
/// The file `init` opened.
static FILE: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The log file this process writes, once `init` ran.
pub(crate) fn file() -> Option<PathBuf> {
    FILE.lock().ok().and_then(|f| f.clone())
}

/// The log file of a project data dir.
pub(crate) fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("logs").join("crush.log")
}

/// Opens (creating) the log of `data_dir`. Called once the data dir exists.
pub(crate) fn init(data_dir: &Path, debug: bool) {
    let p = path(data_dir);
    let open = || -> io::Result<File> {
        if let Some(dir) = p.parent() {
            crate::fsutil::private_dir(dir)?;
        }
        if fs::metadata(&p).is_ok_and(|m| m.len() > MAX_BYTES) {
            let _ = fs::rename(&p, p.with_extension("log.1"));
        }
        // The log names files, commands and errors of the project: the user's only.
        crate::fsutil::private_file(&p, false)?;
        OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&p)
    };
    if let (Ok(file), Ok(mut g)) = (open(), LOGGER.lock()) {
        *g = Some(Logger { file, debug });
        if let Ok(mut f) = FILE.lock() {
            *f = Some(p);
        }
    }
}

fn write(level: &str, msg: &str) {
    let Ok(mut g) = LOGGER.lock() else { return };
    let Some(l) = g.as_mut() else { return };
    if level == "DEBUG" && !l.debug {
        return;
    }
    if l.debug {
        // A message may quote a server's error or a project file: shown, never acted on.
        crate::ewriteln!(
            "crush: {}: {}",
            level.to_ascii_lowercase(),
            crate::visible::text(msg)
        );
    }
    let line = json!({
        "time": crate::time::rfc3339_utc(std::time::SystemTime::now()),
        "level": level,
        "msg": msg,
    });
    // One write per line, so lines of concurrent processes do not interleave.
    let _ = l.file.write_all(format!("{line}\n").as_bytes());
}

pub(crate) fn debug(msg: &str) {
    write("DEBUG", msg);
}

pub(crate) fn info(msg: &str) {
    write("INFO", msg);
}

pub(crate) fn warn(msg: &str) {
    write("WARN", msg);
}

/// One log line as `crush logs` prints it on a `terminal` or not: [`render`], with every control
/// character shown visibly on a terminal (a message may quote a server's error, and the log
/// file may come with the repository: crush(1) FILES).
pub(crate) fn shown(line: &str, terminal: bool) -> String {
    let r = render(line);
    if terminal {
        crate::visible::text(&r).into_owned()
    } else {
        r
    }
}

/// One log line as `crush logs` prints it: `TIME LEVEL message` (other JSON fields follow as
/// key=value; a line that is not JSON is printed as it is).
pub(crate) fn render(line: &str) -> String {
    let Ok(serde_json::Value::Object(mut m)) = serde_json::from_str::<serde_json::Value>(line)
    else {
        return line.to_string();
    };
    let take = |m: &mut serde_json::Map<String, serde_json::Value>, k: &str| -> String {
        match m.remove(k) {
            Some(serde_json::Value::String(s)) => s,
            Some(v) => v.to_string(),
            None => String::new(),
        }
    };
    let time = take(&mut m, "time");
    let level = take(&mut m, "level");
    let msg = take(&mut m, "msg");
    let mut out = format!("{time} {level:<5} {msg}");
    for (k, v) in m {
        out.push_str(&format!(" {k}={v}"));
    }
    out
}

/// The last `n` lines of the log (all of them when n is 0).
pub(crate) fn tail(p: &Path, n: usize) -> io::Result<Vec<String>> {
    let f = File::open(p)?;
    let mut lines: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    for l in BufReader::new(f).lines() {
        lines.push_back(l?);
        if n > 0 && lines.len() > n {
            lines.pop_front();
        }
    }
    Ok(lines.into())
}

/// Prints what is appended to the log from its current end on (as [`shown`] on a `terminal`),
/// until `stop` says so or the output closes.
pub(crate) fn follow(
    p: &Path,
    out: &mut dyn Write,
    terminal: bool,
    stop: &dyn Fn() -> bool,
) -> io::Result<()> {
    let mut f = File::open(p)?;
    let mut pos = f.seek(SeekFrom::End(0))?;
    let mut pending = String::new();
    while !stop() {
        let len = fs::metadata(p).map(|m| m.len()).unwrap_or(pos);
        if len < pos {
            // Rotated or truncated: start over from the new file's beginning.
            f = File::open(p)?;
            pos = 0;
        }
        if len > pos {
            f.seek(SeekFrom::Start(pos))?;
            let mut buf = String::new();
            let n = (&mut f).take(len - pos).read_to_string(&mut buf)?;
            pos += n as u64;
            pending.push_str(&buf);
            while let Some(i) = pending.find('\n') {
                let line: String = pending.drain(..=i).collect();
                writeln!(out, "{}", shown(line.trim_end(), terminal))?;
            }
            out.flush()?;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_and_tail() {
        assert_eq!(
            render(r#"{"time":"2026-11-30T09:06:47Z","level":"WARN","msg":"retry","attempt":2}"#),
            "2026-11-30T09:06:47Z WARN  retry attempt=2"
        );
        assert_eq!(render("not json"), "not json");
        let title = r#"{"time":"t","level":"WARN","msg":"HTTP 500: \u001b]0;pwned\u0007"}"#;
        assert_eq!(shown(title, true), "t WARN  HTTP 500: ^[]0;pwned^G");
        assert_eq!(shown(title, false), "t WARN  HTTP 500: \x1b]0;pwned\x07");
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("l");
        fs::write(&p, "a\nb\nc\n").unwrap();
        assert_eq!(tail(&p, 2).unwrap(), vec!["b", "c"]);
        assert_eq!(tail(&p, 0).unwrap().len(), 3);
    }
}
