//! The stdio transport: the server is a child process in its own process group (through
//! `crate::proc`), messages are newline-delimited JSON on its stdin and stdout, its stderr goes to
//! the log. A line that is not JSON is skipped with a warning; a line longer than the message cap
//! ends the connection (its answer cannot be told apart from what follows).

use super::conn::{Dispatch, Envelope, Failure, Transport};
use crate::proc::{self, Piped};
use crossbeam_channel::Sender;
use serde_json::Value;
use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How to start a stdio server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Command {
    pub command: String,
    pub args: Vec<String>,
    /// Added to crush's own environment.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
}

/// How long a server may take to exit by itself once its input is closed, before SIGTERM.
const EOF_WAIT: Duration = Duration::from_millis(20);

/// Lines of stderr kept for error messages.
const STDERR_TAIL: usize = 20;

pub(super) struct Stdio {
    piped: Arc<Mutex<Option<Piped>>>,
    out: Arc<Mutex<Option<Sender<Vec<u8>>>>>,
    grace: Duration,
}

/// What reading one line gave.
enum Line {
    Eof,
    Message(Vec<u8>),
    TooLarge(usize),
}

/// Reads one line of at most `max` bytes (without its newline); a longer one is read to its end
/// and reported with its size.
fn read_line(r: &mut impl BufRead, max: usize, buf: &mut Vec<u8>) -> io::Result<Line> {
    buf.clear();
    let mut total = 0usize;
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(if total == 0 {
                Line::Eof
            } else if total > max {
                Line::TooLarge(total)
            } else {
                Line::Message(std::mem::take(buf))
            });
        }
        let (part, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        total += part.len();
        if total <= max {
            buf.extend_from_slice(part);
        } else if !buf.is_empty() {
            *buf = Vec::new();
        }
        let used = done.unwrap_or(part.len());
        r.consume(used);
        if done.is_some() {
            return Ok(if total > max {
                Line::TooLarge(total)
            } else {
                Line::Message(std::mem::take(buf))
            });
        }
    }
}

/// A server process that could not be started.
#[derive(Debug)]
pub(super) enum StartError {
    /// The program could not be run.
    Spawn {
        command: String,
        source: std::io::Error,
    },
    /// A thread to feed or read it could not be made.
    Thread(std::io::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Spawn { command, source } => {
                write!(f, "cannot start '{command}': {source}")
            }
            StartError::Thread(e) => write!(f, "cannot start a thread: {e}"),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Spawn { source, .. } | StartError::Thread(source) => Some(source),
        }
    }
}

impl Stdio {
    /// Starts the server. Err: it cannot be started (missing program or directory).
    pub(super) fn spawn(
        cmd: &Command,
        dispatch: Arc<Dispatch>,
        max_message: usize,
        label: String,
        grace: Duration,
    ) -> Result<Stdio, StartError> {
        let mut argv = vec![cmd.command.clone()];
        argv.extend(cmd.args.iter().cloned());
        let mut spec = proc::Spec::exec(argv, &cmd.cwd);
        spec.env = cmd.env.clone();
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let tail = stderr.clone();
        let log_label = label.clone();
        let mut piped = proc::spawn_piped(
            &spec,
            Box::new(move |line: &str| {
                crate::log::debug(&format!("{log_label} stderr: {line}"));
                let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                if t.len() == STDERR_TAIL {
                    t.pop_front();
                }
                t.push_back(line.to_string());
            }),
        )
        .map_err(|source| StartError::Spawn {
            command: cmd.command.clone(),
            source,
        })?;
        let (Some(mut stdin), Some(stdout)) = (piped.stdin.take(), piped.stdout.take()) else {
            return Err(StartError::Spawn {
                command: cmd.command.clone(),
                source: std::io::Error::other("no pipes"),
            });
        };
        let piped = Arc::new(Mutex::new(Some(piped)));

        let (tx, rx) = crossbeam_channel::unbounded::<Vec<u8>>();
        std::thread::Builder::new()
            .name("mcp-stdin".into())
            .spawn(move || {
                // A server that stops reading blocks only this thread.
                for line in rx {
                    if stdin.write_all(&line).and_then(|_| stdin.flush()).is_err() {
                        break;
                    }
                }
            })
            .map_err(StartError::Thread)?;

        let out = Arc::new(Mutex::new(Some(tx)));
        let replies = out.clone();
        let (p, err_tail) = (piped.clone(), stderr);
        std::thread::Builder::new()
            .name("mcp-stdout".into())
            .spawn(move || {
                let mut r = BufReader::with_capacity(64 * 1024, stdout);
                let mut buf = Vec::new();
                let why = loop {
                    match read_line(&mut r, max_message, &mut buf) {
                        Ok(Line::Message(bytes)) => {
                            let text = String::from_utf8_lossy(&bytes);
                            let text = text.trim();
                            if text.is_empty() {
                                continue;
                            }
                            match serde_json::from_str::<Value>(text) {
                                Ok(v) => {
                                    for reply in dispatch.handle(v) {
                                        let mut line = reply.to_string().into_bytes();
                                        line.push(b'\n');
                                        if let Some(tx) = replies
                                            .lock()
                                            .unwrap_or_else(|e| e.into_inner())
                                            .as_ref()
                                        {
                                            let _ = tx.send(line);
                                        }
                                    }
                                }
                                Err(_) => dispatch.garbage(text),
                            }
                        }
                        Ok(Line::TooLarge(n)) => {
                            let why = format!(
                                "the server sent a message of {} MB, over the limit of {} MB: \
                                 the connection was closed",
                                n / (1024 * 1024),
                                max_message / (1024 * 1024)
                            );
                            // The end of the connection is the warning.
                            if let Some(mut child) =
                                p.lock().unwrap_or_else(|e| e.into_inner()).take()
                            {
                                child.stop(Duration::ZERO);
                            }
                            break why;
                        }
                        Ok(Line::Eof) | Err(_) => break exit_reason(&p, &err_tail),
                    }
                };
                dispatch.close(why);
            })
            .map_err(StartError::Thread)?;
        Ok(Stdio { piped, out, grace })
    }
}

/// Why the server's stdout ended: its exit status and the last line of its stderr.
fn exit_reason(p: &Mutex<Option<Piped>>, tail: &Mutex<VecDeque<String>>) -> String {
    let status = p
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .and_then(|mut child| child.stop(Duration::from_millis(200)));
    let mut why = match status {
        Some(s) => match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
            (Some(c), _) => format!("the server exited with status {c}"),
            (None, Some(sig)) => format!("the server was killed by signal {sig}"),
            _ => "the server exited".to_string(),
        },
        None => "the server closed its output".to_string(),
    };
    if let Some(last) = tail.lock().unwrap_or_else(|e| e.into_inner()).back() {
        why.push_str(&format!(" (stderr: {last})"));
    }
    why
}

impl Transport for Stdio {
    fn send(&self, msg: &Value, _env: &Envelope) -> Result<(), Failure> {
        let mut line = msg.to_string().into_bytes();
        line.push(b'\n');
        let out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        match out.as_ref() {
            Some(tx) if tx.send(line).is_ok() => Ok(()),
            _ => Err(Failure::Closed("the server's input is closed".into())),
        }
    }

    /// Closes the server's stdin and gives it a moment to exit on its own (`EOF_WAIT`), then
    /// stops its group: SIGTERM, SIGKILL after the grace. A server that only exits slowly on
    /// end of input (node takes a third of a second) does not hold crush's exit up.
    fn close(&self) {
        self.out.lock().unwrap_or_else(|e| e.into_inner()).take();
        let child = self.piped.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut child) = child {
            let end = Instant::now() + EOF_WAIT.min(self.grace);
            while child.running() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(2));
            }
            child.stop(self.grace);
        }
    }
}

impl Drop for Stdio {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn lines_are_capped_and_skipped_whole() {
        let mut r = Cursor::new(b"{\"a\":1}\n0123456789abcdef\n{}\npartial".to_vec());
        let mut buf = Vec::new();
        assert!(
            matches!(read_line(&mut r, 10, &mut buf).unwrap(), Line::Message(m) if m == b"{\"a\":1}")
        );
        assert!(matches!(
            read_line(&mut r, 10, &mut buf).unwrap(),
            Line::TooLarge(16)
        ));
        assert!(matches!(read_line(&mut r, 10, &mut buf).unwrap(), Line::Message(m) if m == b"{}"));
        assert!(
            matches!(read_line(&mut r, 10, &mut buf).unwrap(), Line::Message(m) if m == b"partial")
        );
        assert!(matches!(
            read_line(&mut r, 10, &mut buf).unwrap(),
            Line::Eof
        ));
    }
}
