//! Running hook processes: one worker thread per hook; each hook is a child of the process
//! runner (`crate::proc`) in its own process group, with its payload on stdin and its output
//! captured up to a cap. No hook can hang the caller: past its timeout a hook's group gets
//! SIGTERM, then SIGKILL after a grace, and a hook whose leftover children keep its pipes open
//! is abandoned.

use super::HookError;
use super::envelope::{Captured, Exit};
use crate::proc::{self, Keep, Program, Spec, which};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Bytes kept per stream; the rest is read and discarded so the hook never blocks on a full pipe.
pub(crate) const OUTPUT_CAP: usize = 1 << 20;
/// Between SIGTERM and SIGKILL, and how long to wait for pipes after the hook exited.
pub(crate) const GRACE: Duration = Duration::from_secs(1);

/// One hook process to run.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    pub command: String,
    /// The exec form's program and arguments (then `command` is only their text).
    pub argv: Option<Vec<String>>,
    pub cwd: PathBuf,
    pub env: Arc<Vec<(String, String)>>,
    pub stdin: Vec<u8>,
    pub timeout: Duration,
    /// Stops the hook's group at once when set.
    pub cancel: Option<Arc<AtomicBool>>,
}

/// Runs every job in parallel and returns their captures in the order given.
pub(crate) fn run_all(jobs: Vec<Job>) -> Vec<Captured> {
    let n = jobs.len();
    if n == 1 {
        // The calling thread is the single hook's worker.
        return jobs.into_iter().map(run_one).collect();
    }
    let (tx, rx) = crossbeam_channel::unbounded::<(usize, Captured)>();
    for (i, job) in jobs.into_iter().enumerate() {
        let worker_tx = tx.clone();
        let spawned = std::thread::Builder::new()
            .name("hook".into())
            .spawn(move || {
                let _ = worker_tx.send((i, run_one(job)));
            });
        if let Err(e) = spawned {
            let _ = tx.send((
                i,
                Captured::not_started(format!("cannot start a thread: {e}")),
            ));
        }
    }
    drop(tx);
    let mut out: Vec<Option<Captured>> = vec![None; n];
    // Every worker ends within its timeout plus two graces; the channel closes when all are done.
    for (i, c) in rx.iter() {
        out[i] = Some(c);
    }
    out.into_iter()
        .map(|c| c.unwrap_or_else(|| Captured::not_started("the hook's worker thread failed")))
        .collect()
}

const SHELL_META: &[char] = &[
    '"', '\'', '\\', '$', '`', '|', '&', ';', '<', '>', '(', ')', '{', '}', '*', '?', '[', ']',
    '~', '#', '!', '\n', '\r', '=',
];

/// Words that mean something else to the shell than the program of the same name (or have no
/// program at all): a command starting with one goes to the shell.
const SHELL_WORDS: &[&str] = &[
    ".", ":", "alias", "bg", "break", "builtin", "case", "cd", "command", "continue", "coproc",
    "declare", "do", "done", "elif", "else", "enable", "esac", "eval", "exec", "exit", "export",
    "fc", "fg", "fi", "for", "function", "getopts", "hash", "history", "if", "jobs", "let",
    "local", "popd", "pushd", "read", "readonly", "return", "select", "set", "shift", "shopt",
    "source", "then", "time", "times", "trap", "type", "typeset", "ulimit", "umask", "unalias",
    "unset", "until", "wait", "while",
];

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// How a command is started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Exec directly: program and arguments.
    Exec(PathBuf, Vec<String>),
    /// `SHELL -c SCRIPT` (`proc::shell_path`).
    Shell(String),
}

/// The interpreter of a `#!` line: (program, arguments). `/usr/bin/env NAME` is unwrapped; a
/// missing absolute interpreter is looked up by its base name on PATH.
pub(crate) fn shebang_interpreter(line: &str) -> Result<(PathBuf, Vec<String>), HookError> {
    let line = line.trim_start_matches("#!").trim_end_matches('\r').trim();
    let (prog, rest) = match line.split_once(char::is_whitespace) {
        Some((p, r)) => (p, r.trim()),
        None => (line, ""),
    };
    if prog.is_empty() {
        return Err(HookError::NoInterpreter);
    }
    let base = Path::new(prog)
        .file_name()
        .map(|b| b.to_string_lossy().into_owned())
        .unwrap_or_default();
    if base == "env" {
        let mut words = rest.split_whitespace().filter(|w| *w != "-S");
        let name = words.next().ok_or_else(|| HookError::EnvNoProgram {
            line: line.to_string(),
        })?;
        let found = if name.contains('/') {
            Some(PathBuf::from(name)).filter(|p| proc::executable(p))
        } else {
            which(name)
        };
        let found = found.ok_or_else(|| HookError::EnvNotFound {
            name: name.to_string(),
            line: line.to_string(),
        })?;
        return Ok((found, words.map(str::to_string).collect()));
    }
    let args = if rest.is_empty() {
        Vec::new()
    } else {
        // As the kernel does: everything after the interpreter is one argument.
        vec![rest.to_string()]
    };
    let p = PathBuf::from(prog);
    if proc::executable(&p) {
        return Ok((p, args));
    }
    match which(&base) {
        Some(found) => Ok((found, args)),
        None => Err(HookError::InterpreterNotFound {
            prog: prog.to_string(),
            base,
        }),
    }
}

/// How to start `command` (crush(1) HOOKS): a command with no shell syntax at all (no
/// metacharacters, quotes, `$`, `~` or globs) whose first word is a program on PATH runs
/// directly, split on blanks; a first word naming an existing file with a `#!` line runs that
/// interpreter; a file without one runs as a script of crush's shell (binaries run as they are);
/// anything else is `SHELL -c COMMAND`.
pub(crate) fn plan(command: &str, cwd: &Path) -> Result<Plan, HookError> {
    let cmd = command.trim();
    let first = cmd.split_whitespace().next().unwrap_or("");
    let rest = &cmd[first.len()..];
    if !first.contains('/') {
        if !cmd.contains(SHELL_META)
            && !SHELL_WORDS.contains(&first)
            && let Some(prog) = which(first)
        {
            let args = rest.split_whitespace().map(str::to_string).collect();
            return Ok(Plan::Exec(prog, args));
        }
        return Ok(Plan::Shell(command.to_string()));
    }
    if first.contains(SHELL_META) {
        return Ok(Plan::Shell(command.to_string()));
    }
    let path = if Path::new(first).is_absolute() {
        PathBuf::from(first)
    } else {
        cwd.join(first)
    };
    if !path.is_file() {
        return Ok(Plan::Shell(command.to_string()));
    }
    let Some((prog, mut args)) = interpreter_of(&path)? else {
        // A binary: let the kernel run it.
        return Ok(Plan::Shell(command.to_string()));
    };
    let script = path.to_string_lossy().into_owned();
    if rest.contains(SHELL_META) {
        // Keep the shell syntax of the arguments; replace only the program.
        let mut s = format!("exec {}", sh_quote(&prog.to_string_lossy()));
        for a in &args {
            s.push(' ');
            s.push_str(&sh_quote(a));
        }
        s.push(' ');
        s.push_str(&sh_quote(&script));
        s.push_str(rest);
        return Ok(Plan::Shell(s));
    }
    args.push(script);
    args.extend(rest.split_whitespace().map(str::to_string));
    Ok(Plan::Exec(prog, args))
}

/// What runs the file `path`: the interpreter of its `#!` line, crush's shell for a text file
/// without one, None for a binary (the kernel runs it).
fn interpreter_of(path: &Path) -> Result<Option<(PathBuf, Vec<String>)>, HookError> {
    let mut head = [0u8; 256];
    let n = crate::fsutil::open_regular(path, crate::fsutil::Links::Follow)
        .and_then(|(mut f, _)| f.read(&mut head))
        .map_err(|source| HookError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    let head = &head[..n];
    if head.starts_with(b"#!") {
        let line_end = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
        let line = String::from_utf8_lossy(&head[..line_end]).into_owned();
        return shebang_interpreter(&line).map(Some);
    }
    if head.starts_with(b"\x7fELF") || head.contains(&0) {
        return Ok(None);
    }
    Ok(Some((proc::shell_path().to_path_buf(), Vec::new())))
}

/// The hooks' own variables, which a hook in exec form may name without a shell to expand them
/// (crush(1) HOOKS, Running).
const EXEC_FORM_VARS: &[&str] = &[
    "CLAUDE_PROJECT_DIR",
    "CRUSH_PROJECT_DIR",
    "CLAUDE_PLUGIN_ROOT",
    "CLAUDE_PLUGIN_DATA",
];

/// How to start a hook in exec form (Claude Code's `command` + `args`): no shell; the hooks'
/// own variables in `$NAME` or `${NAME}` form are replaced from `env`; the program is looked
/// up on PATH unless it has a `/` (relative to `cwd`); a script runs as `plan` runs one.
pub(crate) fn plan_exec(
    argv: &[String],
    cwd: &Path,
    env: &[(String, String)],
) -> Result<Plan, HookError> {
    let expand = |w: &String| {
        let mut w = w.clone();
        for var in EXEC_FORM_VARS {
            if let Some((_, v)) = env.iter().find(|(k, _)| k == var) {
                w = w
                    .replace(&format!("${{{var}}}"), v)
                    .replace(&format!("${var}"), v);
            }
        }
        w
    };
    let mut words = argv.iter().map(expand);
    let first = words.next().unwrap_or_default();
    let rest: Vec<String> = words.collect();
    if !first.contains('/') {
        let prog = which(&first).ok_or(HookError::ProgramNotFound(first))?;
        return Ok(Plan::Exec(prog, rest));
    }
    let path = cwd.join(&first);
    if !path.is_file() {
        return Err(HookError::ProgramNotFound(first));
    }
    Ok(match interpreter_of(&path)? {
        None => Plan::Exec(path, rest),
        Some((prog, mut args)) => {
            args.push(path.to_string_lossy().into_owned());
            args.extend(rest);
            Plan::Exec(prog, args)
        }
    })
}

impl Plan {
    fn program(self) -> Program {
        match self {
            Plan::Exec(prog, args) => {
                let mut argv = vec![prog.to_string_lossy().into_owned()];
                argv.extend(args);
                Program::Exec(argv)
            }
            Plan::Shell(s) => Program::Shell(s),
        }
    }
}

/// Runs one hook to completion, timeout or abandonment.
pub(crate) fn run_one(job: Job) -> Captured {
    let planned = match &job.argv {
        Some(argv) => plan_exec(argv, &job.cwd, &job.env),
        None => plan(&job.command, &job.cwd),
    };
    let plan = match planned {
        Ok(p) => p,
        Err(e) => return Captured::not_started(e.to_string()),
    };
    let what = match &plan {
        Plan::Exec(p, _) => p.display().to_string(),
        Plan::Shell(_) => proc::shell_path().display().to_string(),
    };
    let mut spec = Spec::new(plan.program(), &job.cwd);
    spec.env = job.env.as_ref().clone();
    spec.stdin = Some(job.stdin);
    spec.timeout = Some(job.timeout);
    spec.cancel = job.cancel;
    spec.output_cap = OUTPUT_CAP;
    spec.keep = Keep::Head;
    spec.kill_grace = GRACE;
    spec.linger = GRACE;
    let r = match proc::run(&spec) {
        Ok(r) => r,
        Err(e) => return Captured::not_started(format!("cannot start {what}: {e}")),
    };
    let exit = if r.timed_out {
        Exit::TimedOut(job.timeout)
    } else if r.canceled {
        Exit::Canceled
    } else {
        match (r.exit_code, r.signal) {
            (Some(c), _) => Exit::Code(c),
            (None, Some(sig)) => Exit::Signal(sig),
            (None, None) => Exit::NotStarted("the process vanished".into()),
        }
    };
    Captured {
        exit,
        stdout_truncated: r.stdout_dropped > 0,
        stderr_truncated: r.stderr_dropped > 0,
        stdout: r.stdout,
        stderr: r.stderr,
        abandoned: r.abandoned,
        duration_ms: r.duration.as_millis() as u64,
        program: what,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::time::Instant;

    fn job(dir: &Path, command: &str, stdin: &str, timeout: Duration) -> Job {
        Job {
            command: command.to_string(),
            argv: None,
            cwd: dir.to_path_buf(),
            env: Arc::new(vec![("HOOK_TEST".into(), "yes".into())]),
            stdin: stdin.as_bytes().to_vec(),
            timeout,
            cancel: None,
        }
    }

    #[test]
    fn the_exec_form_replaces_only_the_hooks_variables_and_finds_its_program() {
        let t = tempfile::tempdir().unwrap();
        let script = t.path().join("h.sh");
        std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
        let env = [(
            "CLAUDE_PROJECT_DIR".to_string(),
            t.path().display().to_string(),
        )];
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let plan = plan_exec(
            &argv(&["${CLAUDE_PROJECT_DIR}/h.sh", "$HOME", "a b"]),
            t.path(),
            &env,
        )
        .unwrap();
        let sh = script.display().to_string();
        assert_eq!(
            plan,
            Plan::Exec(
                "/bin/sh".into(),
                vec![sh.clone(), "$HOME".into(), "a b".into()]
            )
        );
        // Relative to the working directory, as a command's script is.
        let plan = plan_exec(&argv(&["./h.sh"]), t.path(), &[]).unwrap();
        assert!(matches!(&plan, Plan::Exec(_, a) if a.last().is_some_and(|s| s.ends_with("h.sh"))));
        let e = plan_exec(&argv(&["no-such-program-x9", "x"]), t.path(), &[]).unwrap_err();
        assert_eq!(e.to_string(), "program 'no-such-program-x9' not found");
        assert!(plan_exec(&argv(&["./missing.sh"]), t.path(), &[]).is_err());
    }

    #[test]
    fn a_cancel_stops_a_running_hook_long_before_its_timeout() {
        let d = tempfile::tempdir().unwrap();
        let cancel = Arc::new(AtomicBool::new(false));
        let mut j = job(
            d.path(),
            "echo started; sleep 600",
            "",
            Duration::from_secs(600),
        );
        j.cancel = Some(cancel.clone());
        let flag = cancel.clone();
        let setter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        // Without the cancel this would wait for the 600 s timeout.
        let c = run_one(j);
        setter.join().unwrap();
        assert_eq!(c.exit, Exit::Canceled);
        assert_eq!(String::from_utf8_lossy(&c.stdout), "started\n");
    }

    fn run(dir: &Path, command: &str) -> Captured {
        run_one(job(dir, command, "{}", Duration::from_secs(20)))
    }

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn exit_codes_stdout_stderr_and_env() {
        let d = tempfile::tempdir().unwrap();
        let c = run(d.path(), "echo out; echo err >&2; echo $HOOK_TEST; exit 3");
        assert_eq!(c.exit, Exit::Code(3));
        assert_eq!(String::from_utf8_lossy(&c.stdout), "out\nyes\n");
        assert_eq!(String::from_utf8_lossy(&c.stderr), "err\n");
        assert_eq!(run(d.path(), "exit 49").exit, Exit::Code(49));
    }

    #[test]
    fn stdin_carries_the_payload_and_cwd_is_set() {
        let d = tempfile::tempdir().unwrap();
        let c = run_one(job(
            d.path(),
            "cat; pwd",
            "{\"a\":1}",
            Duration::from_secs(20),
        ));
        let out = String::from_utf8_lossy(&c.stdout).into_owned();
        assert!(out.starts_with("{\"a\":1}"), "{out}");
        let cwd = d.path().canonicalize().unwrap();
        assert!(out.contains(&*cwd.to_string_lossy()), "{out}");
    }

    #[test]
    fn a_hook_that_never_reads_stdin_is_fine() {
        let d = tempfile::tempdir().unwrap();
        // Bigger than any pipe buffer: the writer would block if anything waited on it.
        let big = "x".repeat(4 << 20);
        let c = run_one(job(d.path(), "echo ok", &big, Duration::from_secs(20)));
        assert_eq!(c.exit, Exit::Code(0));
        assert_eq!(String::from_utf8_lossy(&c.stdout), "ok\n");
    }

    #[test]
    fn a_hook_past_its_timeout_is_killed_with_its_group() {
        let d = tempfile::tempdir().unwrap();
        let marker = d.path().join("survived");
        let cmd = format!("(sleep 2; touch {}) & sleep 30", marker.display());
        let c = run_one(job(d.path(), &cmd, "", Duration::from_millis(300)));
        assert_eq!(c.exit, Exit::TimedOut(Duration::from_millis(300)));
        std::thread::sleep(Duration::from_millis(2500));
        assert!(
            !marker.exists(),
            "the background child was killed with the group"
        );
    }

    #[test]
    fn a_hook_ignoring_sigterm_is_killed() {
        let d = tempfile::tempdir().unwrap();
        let c = run_one(job(
            d.path(),
            "trap '' TERM; sleep 30",
            "",
            Duration::from_millis(200),
        ));
        assert!(matches!(c.exit, Exit::TimedOut(_)), "{:?}", c.exit);
    }

    /// Whether `pid` is gone: no such process, or a zombie waiting for init to reap it.
    fn is_dead(pid: i32) -> bool {
        // SAFETY: signal 0 only checks that the process exists.
        if unsafe { libc::kill(pid, 0) } != 0 {
            return true;
        }
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(true)
    }

    #[test]
    fn a_term_ignoring_grandchild_is_killed_when_the_hook_exits_during_the_grace() {
        struct Reap(i32);
        impl Drop for Reap {
            fn drop(&mut self) {
                // SAFETY: cleanup of the test's own straggler if the assertion failed.
                unsafe {
                    libc::kill(self.0, libc::SIGKILL);
                }
            }
        }
        let d = tempfile::tempdir().unwrap();
        let pid_file = d.path().join("grandchild.pid");
        // The background child inherits SIGTERM ignored; the hook itself dies of SIGTERM at
        // once, inside the grace, so only a final SIGKILL to the group can reach the child.
        let cmd = format!(
            "trap '' TERM; (exec sleep 60) >/dev/null 2>&1 & echo $! > {}; trap - TERM; sleep 30",
            pid_file.display()
        );
        let c = run_one(job(d.path(), &cmd, "", Duration::from_secs(1)));
        assert!(matches!(c.exit, Exit::TimedOut(_)), "{:?}", c.exit);
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .expect("the hook wrote its child's pid before the timeout")
            .trim()
            .parse()
            .unwrap();
        let _reap = Reap(pid);
        // Give init a moment to reap; the bound only ends a failing test.
        let give_up = Instant::now() + Duration::from_secs(10);
        while !is_dead(pid) && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(is_dead(pid), "the TERM-ignoring grandchild {pid} survived");
    }

    #[test]
    fn a_background_child_holding_stdout_is_abandoned_keeping_the_output() {
        let d = tempfile::tempdir().unwrap();
        let c = run(d.path(), "sleep 5 & echo '{\"decision\":\"deny\"}'");
        assert_eq!(c.exit, Exit::Code(0));
        assert!(c.abandoned);
        assert_eq!(
            String::from_utf8_lossy(&c.stdout).trim(),
            "{\"decision\":\"deny\"}"
        );
    }

    #[test]
    fn output_is_capped_and_the_rest_drained() {
        let d = tempfile::tempdir().unwrap();
        let c = run(d.path(), "head -c 10000000 /dev/zero | tr '\\0' x");
        assert_eq!(c.exit, Exit::Code(0));
        assert_eq!(c.stdout.len(), OUTPUT_CAP);
        assert!(c.stdout_truncated);
    }

    #[test]
    fn parallel_hooks_overlap_and_results_keep_config_order() {
        let d = tempfile::tempdir().unwrap();
        let stamp = |name: &str, sleep: &str| {
            format!(
                "date +%s%N > {0}.start; sleep {sleep}; date +%s%N > {0}.end; echo {name}",
                d.path().join(name).display()
            )
        };
        let jobs = vec![
            job(d.path(), &stamp("a", "0.5"), "", Duration::from_secs(20)),
            job(d.path(), &stamp("b", "0.1"), "", Duration::from_secs(20)),
        ];
        let out = run_all(jobs);
        assert_eq!(String::from_utf8_lossy(&out[0].stdout), "a\n");
        assert_eq!(String::from_utf8_lossy(&out[1].stdout), "b\n");
        let read = |f: &str| -> u128 {
            std::fs::read_to_string(d.path().join(f))
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        };
        // Each started before the other ended: they ran at the same time.
        assert!(read("a.start") < read("b.end"));
        assert!(read("b.start") < read("a.end"));
    }

    #[test]
    fn shebang_runs_the_interpreter_directly() {
        let d = tempfile::tempdir().unwrap();
        script(d.path(), "h.sh", "#!/bin/sh\necho \"arg=$1\"\n");
        let p = plan("./h.sh one", d.path()).unwrap();
        assert_eq!(
            p,
            Plan::Exec(
                PathBuf::from("/bin/sh"),
                vec![d.path().join("./h.sh").display().to_string(), "one".into()]
            )
        );
        assert_eq!(
            String::from_utf8_lossy(&run(d.path(), "./h.sh one").stdout),
            "arg=one\n"
        );
    }

    #[test]
    fn a_missing_absolute_interpreter_falls_back_to_path() {
        let d = tempfile::tempdir().unwrap();
        script(d.path(), "h", "#!/nonexistent/bin/sh\necho fallback\n");
        let c = run(d.path(), "./h");
        assert_eq!(c.exit, Exit::Code(0));
        assert_eq!(String::from_utf8_lossy(&c.stdout), "fallback\n");
    }

    #[test]
    fn env_shebangs_are_unwrapped() {
        let (prog, args) = shebang_interpreter("#!/usr/bin/env -S sh -e").unwrap();
        assert!(prog.ends_with("sh"), "{prog:?}");
        assert_eq!(args, vec!["-e"]);
    }

    #[test]
    fn an_interpreter_not_found_is_a_warning_not_a_crash() {
        let d = tempfile::tempdir().unwrap();
        script(d.path(), "h", "#!/nonexistent/no-such-interpreter-xyz\n");
        match run(d.path(), "./h").exit {
            Exit::NotStarted(m) => assert!(m.contains("no-such-interpreter-xyz"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_file_without_shebang_runs_as_a_sh_script() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("plain");
        std::fs::write(&p, "echo plain \"$1\"\n").unwrap(); // not even executable
        assert_eq!(
            String::from_utf8_lossy(&run(d.path(), "./plain x").stdout),
            "plain x\n"
        );
    }

    #[test]
    fn shell_syntax_in_arguments_is_kept() {
        let d = tempfile::tempdir().unwrap();
        script(d.path(), "h.sh", "#!/nonexistent/sh\necho \"[$1]\"\n");
        let c = run(d.path(), "./h.sh \"two words\" | tr a-z A-Z");
        assert_eq!(String::from_utf8_lossy(&c.stdout), "[TWO WORDS]\n");
    }

    #[test]
    fn a_command_without_shell_syntax_runs_without_a_shell() {
        let d = tempfile::tempdir().unwrap();
        let t = which("true").unwrap();
        assert_eq!(
            plan("true 0  x", d.path()).unwrap(),
            Plan::Exec(t, vec!["0".into(), "x".into()])
        );
        let p = which("printf").unwrap();
        assert_eq!(
            plan("printf x-%s y", d.path()).unwrap(),
            Plan::Exec(p, vec!["x-%s".into(), "y".into()])
        );
        let c = run(d.path(), "printf x-%s y");
        assert_eq!(String::from_utf8_lossy(&c.stdout), "x-y");
        assert_eq!(c.program, which("printf").unwrap().display().to_string());
        // Anything the shell would read differently goes to the shell.
        for cmd in [
            "echo $HOME",
            "echo ~",
            "ls *.rs",
            "echo 'a b'",
            "a=1 env",
            "true && false",
            "exit 2",
            "cd /",
            "no-such-program-crush-test x",
            "time true",
        ] {
            assert!(
                matches!(plan(cmd, d.path()).unwrap(), Plan::Shell(_)),
                "{cmd}"
            );
        }
        assert_eq!(run(d.path(), "exit 2").exit, Exit::Code(2));
    }

    #[test]
    fn bash_syntax_works_and_a_shell_that_cannot_run_it_is_reported() {
        let d = tempfile::tempdir().unwrap();
        if which("bash").is_some() {
            let c = run(d.path(), "[[ $HOOK_TEST == y* ]] && exit 2; exit 0");
            assert_eq!(c.exit, Exit::Code(2));
        }
        let c = run(d.path(), "no-such-program-crush-test");
        assert_eq!(c.exit, Exit::Code(127));
        assert_eq!(c.program, proc::shell_path().display().to_string());
    }

    #[test]
    fn anything_else_runs_with_sh_c() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(
            plan("\"$CLAUDE_PROJECT_DIR\"/x.sh", d.path()).unwrap(),
            Plan::Shell("\"$CLAUDE_PROJECT_DIR\"/x.sh".into())
        );
    }
}
