//! Background jobs of the bash tool (`run_in_background`, or a command still running after
//! `auto_background_after` seconds) and the tools that read and stop them: `job_output` and
//! `job_kill`. Ids are Go Crush's (`001`, `002`, … in hexadecimal).
//!
//! The table belongs to the process; each job remembers its session, and the front ends kill a
//! session's jobs when it ends (`end_session`). Every job is a `proc::job::Job`: its whole
//! process group dies with crush, however crush ends.

use super::common::{opt_bool, req_str, truncate_middle};
use super::{PermissionRequest, Tool, ToolCtx, ToolError, ToolOutput};
use crate::proc::job::Job;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// At most this many jobs may run at once (Go Crush's limit).
pub(crate) const MAX_JOBS: usize = 50;
/// Finished jobs are forgotten this long after they ended (Go Crush's retention).
const RETENTION: Duration = Duration::from_secs(8 * 3600);

/// What `job_output` and `/jobs` show of a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Info {
    pub id: String,
    pub command: String,
    pub description: String,
    pub working_dir: String,
    pub running: bool,
    /// The exit code, once it ended.
    pub exit_code: Option<i32>,
    pub elapsed: Duration,
}

struct Entry {
    /// Empty for what a finished foreground command left running (kept so that it dies with
    /// the session, never listed).
    id: String,
    session_id: String,
    command: String,
    description: String,
    working_dir: String,
    job: Arc<Job>,
    ended: Option<Instant>,
}

impl Entry {
    fn info(&self) -> Info {
        let st = self.job.status();
        Info {
            id: self.id.clone(),
            command: self.command.clone(),
            description: self.description.clone(),
            working_dir: self.working_dir.clone(),
            running: st.exit.is_none(),
            exit_code: st.exit.map(|e| e.code()),
            elapsed: st.elapsed,
        }
    }
}

static JOBS: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn table() -> MutexGuard<'static, Vec<Entry>> {
    let mut t = JOBS.lock().unwrap_or_else(|e| e.into_inner());
    // Forget what is gone: leftovers whose last process ended, jobs finished long ago.
    let now = Instant::now();
    for e in t.iter_mut() {
        if e.ended.is_none() && e.job.status().exit.is_some() {
            e.ended = Some(now);
        }
    }
    t.retain(|e| {
        let st = e.job.status();
        if e.id.is_empty() {
            !st.gone
        } else {
            e.ended.is_none_or(|at| now.duration_since(at) < RETENTION)
        }
    });
    t
}

/// The running jobs (at most `MAX_JOBS` may run): Err with Go Crush's message when full.
pub(crate) fn check_room() -> Result<(), ToolError> {
    let running = table()
        .iter()
        .filter(|e| !e.id.is_empty() && e.ended.is_none())
        .count();
    if running >= MAX_JOBS {
        return Err(format!(
            "maximum number of background jobs ({MAX_JOBS}) reached. Please terminate or wait for some jobs to complete"
        ).into());
    }
    Ok(())
}

/// Adds a job of `session_id` to the table; its id.
pub(crate) fn add(
    session_id: &str,
    command: &str,
    description: &str,
    working_dir: &str,
    job: Job,
) -> String {
    let id = format!("{:03X}", NEXT_ID.fetch_add(1, Ordering::Relaxed));
    table().push(Entry {
        id: id.clone(),
        session_id: session_id.to_string(),
        command: command.to_string(),
        description: description.to_string(),
        working_dir: working_dir.to_string(),
        job: Arc::new(job),
        ended: None,
    });
    id
}

/// Keeps what a finished foreground command left running (`server &`) until the session ends.
pub(crate) fn keep_leftovers(session_id: &str, job: Job) {
    if job.status().gone {
        return;
    }
    table().push(Entry {
        id: String::new(),
        session_id: session_id.to_string(),
        command: String::new(),
        description: String::new(),
        working_dir: String::new(),
        job: Arc::new(job),
        ended: None,
    });
}

/// Job `id` of `session_id`: another session's jobs (two editor sessions in one `crush acp`)
/// are not found.
fn find(id: &str, session_id: &str) -> Option<(Arc<Job>, Info)> {
    let id = id.trim();
    table()
        .iter()
        .find(|e| !e.id.is_empty() && e.id.eq_ignore_ascii_case(id) && e.session_id == session_id)
        .map(|e| (e.job.clone(), e.info()))
}

/// The jobs of `session_id`, oldest first.
pub(crate) fn list(session_id: &str) -> Vec<Info> {
    table()
        .iter()
        .filter(|e| !e.id.is_empty() && e.session_id == session_id)
        .map(Entry::info)
        .collect()
}

/// Kills every job of `session_id` (and what its commands left running) and forgets them.
pub(crate) fn end_session(session_id: &str) {
    let gone: Vec<Entry> = {
        let mut t = table();
        let (ended, kept): (Vec<Entry>, Vec<Entry>) = std::mem::take(&mut *t)
            .into_iter()
            .partition(|e| e.session_id == session_id);
        *t = kept;
        ended
    };
    for e in &gone {
        e.job.stop();
    }
}

/// `/jobs`: one line per job of the session.
pub(crate) fn list_text(session_id: &str) -> String {
    let jobs = list(session_id);
    if jobs.is_empty() {
        return "No background jobs in this session.\n".to_string();
    }
    let mut s = String::new();
    for j in jobs {
        let state = match j.exit_code {
            None => "running".to_string(),
            Some(c) => format!("exit {c}"),
        };
        let what = if j.description.is_empty() {
            j.command.lines().next().unwrap_or("").to_string()
        } else {
            format!(
                "{} ({})",
                j.command.lines().next().unwrap_or(""),
                j.description
            )
        };
        s.push_str(&format!(
            "{}  {:<9} {:>6}  {what}\n",
            j.id,
            state,
            format!("{}s", j.elapsed.as_secs())
        ));
    }
    s
}

/// New output of a job (stdout, then stderr), as the model is shown it.
pub(crate) fn new_output(job: &Job) -> String {
    let (out, out_lost, err, err_lost) = job.unread();
    let mut parts = Vec::new();
    for (bytes, lost) in [(out, out_lost), (err, err_lost)] {
        let mut text = String::new();
        if lost > 0 {
            text.push_str(&format!(
                "[... {lost} bytes of output were dropped: more arrived than is kept ...]\n"
            ));
        }
        text.push_str(String::from_utf8_lossy(&bytes).trim_end_matches('\n'));
        if !text.is_empty() {
            parts.push(text);
        }
    }
    truncate_middle(&parts.join("\n"), super::bash::MAX_OUTPUT_CHARS, 0)
}

pub(crate) struct JobOutput;

impl Tool for JobOutput {
    fn name(&self) -> &'static str {
        "job_output"
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Read
    }

    /// It reads what a background command printed; the command itself came from bash.
    fn read_only(&self) -> bool {
        true
    }

    fn claude_name(&self) -> Option<String> {
        Some("BashOutput".into())
    }

    fn description(&self) -> String {
        "Get stdout/stderr from a background shell by ID; set wait=true to block until \
         completion. Returns the output that arrived since the last call, whether the job is \
         still running, and its exit code once it ended."
            .to_string()
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "shell_id": {
                    "type": "string",
                    "description": "The ID of the background shell to retrieve output from"
                },
                "wait": {
                    "type": "boolean",
                    "description": "If true, block until the background shell completes before returning output"
                }
            },
            "required": ["shell_id"]
        })
    }

    fn permission(
        &self,
        input: &Value,
        _ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        req_str(input, "shell_id")?;
        opt_bool(input, "wait")?;
        Ok(None)
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let id = req_str(input, "shell_id")?;
        let wait = opt_bool(input, "wait")?;
        let (job, info) = find(id, ctx.session.session_id())
            .ok_or_else(|| format!("background shell not found: {id}"))?;
        if wait {
            job.wait(None, Some(&ctx.cancel));
        }
        let text = new_output(&job);
        let st = job.status();
        let done = st.exit.is_some();
        let mut body = if text.is_empty() {
            super::bash::NO_OUTPUT.to_string()
        } else {
            text
        };
        if let Some(e) = st.exit.filter(|e| e.code() != 0) {
            body.push_str(&format!("\nExit code {}", e.code()));
        }
        Ok(ToolOutput {
            content: format!(
                "Status: {}\n\n{body}",
                if done { "completed" } else { "running" }
            ),
            metadata: json!({
                "shell_id": info.id,
                "command": info.command,
                "description": info.description,
                "done": done,
                "working_directory": info.working_dir,
                "exit_code": st.exit.map(|e| e.code()),
            }),
            ..Default::default()
        })
    }
}

pub(crate) struct JobKill;

impl Tool for JobKill {
    fn name(&self) -> &'static str {
        "job_kill"
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Execute
    }

    fn read_only(&self) -> bool {
        false
    }

    fn claude_name(&self) -> Option<String> {
        Some("KillShell".into())
    }

    fn description(&self) -> String {
        "Terminate a background shell process.\n\n\
         - Provide the shell ID returned from a background bash execution.\n\
         - The process and everything it started get SIGTERM, then SIGKILL a moment later.\n\
         - After killing, the shell ID becomes invalid."
            .to_string()
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "shell_id": {
                    "type": "string",
                    "description": "The ID of the background shell to terminate"
                }
            },
            "required": ["shell_id"]
        })
    }

    fn permission(
        &self,
        input: &Value,
        _ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        req_str(input, "shell_id")?;
        Ok(None)
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let id = req_str(input, "shell_id")?;
        let (job, info) = find(id, ctx.session.session_id())
            .ok_or_else(|| format!("background shell not found: {id}"))?;
        job.stop();
        table().retain(|e| e.id != info.id);
        Ok(ToolOutput {
            content: format!("Background shell {} terminated successfully", info.id),
            metadata: json!({
                "shell_id": info.id,
                "command": info.command,
                "description": info.description,
            }),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::Spec;
    use crate::tools::testutil::{Fixture, Out};
    use crate::tools::{Content, SessionState};

    /// A session with this id and nothing else.
    struct Session(&'static str);

    impl SessionState for Session {
        fn session_id(&self) -> &str {
            self.0
        }
        fn todos(&self) -> Result<Vec<crate::tools::todos::Todo>, crate::tools::ToolError> {
            Ok(Vec::new())
        }
        fn set_todos(
            &self,
            _: &[crate::tools::todos::Todo],
        ) -> Result<(), crate::tools::ToolError> {
            Ok(())
        }
        fn file_changed(&self, _: &std::path::Path, _: Content, _: Content) {}
    }

    fn start(script: &str, dir: &std::path::Path) -> Job {
        let mut spec = Spec::shell(script, dir);
        spec.linger = Duration::from_millis(100);
        spec.kill_grace = Duration::from_millis(200);
        Job::start(&spec).unwrap()
    }

    #[test]
    fn output_is_read_once_then_the_job_is_killed_and_forgotten() {
        let fx = Fixture::new();
        let session = Session("s-output");
        let ctx = ToolCtx {
            session: &session,
            ..fx.ctx()
        };
        let job = start("echo first; sleep 30", fx.root());
        let id = add("s-output", "echo first; sleep 30", "waits", "/w", job);
        let out = JobOutput.run(&json!({"shell_id": id}), &ctx).out();
        assert!(
            out.content.starts_with("Status: running"),
            "{}",
            out.content
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = out.content.clone();
        while !seen.contains("first") {
            assert!(Instant::now() < deadline, "{seen}");
            std::thread::sleep(Duration::from_millis(20));
            seen = JobOutput.run(&json!({"shell_id": id}), &ctx).out().content;
        }
        let again = JobOutput.run(&json!({"shell_id": id}), &ctx).out();
        assert!(!again.content.contains("first"), "{}", again.content);
        assert_eq!(list("s-output").len(), 1);
        assert!(list_text("s-output").contains("running"));
        let killed = JobKill.run(&json!({"shell_id": id}), &ctx).out();
        assert!(!killed.is_error, "{}", killed.content);
        assert!(list("s-output").is_empty());
        let gone = JobOutput.run(&json!({"shell_id": id}), &ctx).out();
        assert!(gone.is_error && gone.content.contains("not found"));
    }

    #[test]
    fn waiting_returns_the_exit_code_and_unknown_ids_are_errors() {
        let fx = Fixture::new();
        let session = Session("s-wait");
        let ctx = ToolCtx {
            session: &session,
            ..fx.ctx()
        };
        let id = add(
            "s-wait",
            "x",
            "",
            "/w",
            start("echo done; exit 4", fx.root()),
        );
        let out = JobOutput
            .run(&json!({"shell_id": id, "wait": true}), &ctx)
            .out();
        assert_eq!(out.content, "Status: completed\n\ndone\nExit code 4");
        assert_eq!(out.metadata["done"], true);
        for bad in [json!({"shell_id": "FFF"}), json!({})] {
            assert!(JobKill.run(&bad, &ctx).out().is_error, "{bad}");
            assert!(JobOutput.run(&bad, &ctx).out().is_error, "{bad}");
        }
        end_session("s-wait");
        assert!(list("s-wait").is_empty());
    }

    #[test]
    fn ending_a_session_kills_its_jobs_only_and_no_session_sees_anothers() {
        let fx = Fixture::new();
        let a = add("s-a", "sleep", "", "/w", start("sleep 30", fx.root()));
        let b = add("s-b", "sleep", "", "/w", start("sleep 30", fx.root()));
        let (ja, _) = find(&a, "s-a").unwrap();
        let session = Session("s-b");
        let in_b = ToolCtx {
            session: &session,
            ..fx.ctx()
        };
        for tool in [&JobOutput as &dyn Tool, &JobKill] {
            let out = tool.run(&json!({"shell_id": a}), &in_b).out();
            assert!(
                out.is_error && out.content.contains("not found"),
                "{}",
                out.content
            );
        }
        assert!(!ja.wait(Some(Instant::now() + Duration::from_millis(50)), None));
        end_session("s-a");
        assert!(find(&a, "s-a").is_none());
        assert!(ja.wait(Some(Instant::now() + Duration::from_secs(5)), None));
        assert!(find(&b, "s-b").is_some());
        end_session("s-b");
    }
}
