//! The sandbox against the real kernel: real processes started through the process runner,
//! and what the kernel refuses them.

use super::*;
use crate::proc::{self, Spec};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Fixture {
    _dir: tempfile::TempDir,
    project: PathBuf,
    outside: PathBuf,
    tmp: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let project = root.join("project");
    let outside = root.join("outside");
    let tmp = root.join("tmp");
    for d in [&project, &outside, &tmp] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::create_dir_all(project.join(".git/hooks")).unwrap();
    std::fs::write(project.join(".git/config"), "[core]\n").unwrap();
    Fixture {
        _dir: dir,
        project,
        outside,
        tmp,
    }
}

impl Fixture {
    fn sandbox(&self, mode: Mode, network: bool, roots: &[PathBuf]) -> Arc<Sandbox> {
        let policy = Policy::new(mode, network, &self.project, roots, &self.tmp).unwrap();
        Arc::new(Sandbox::new(policy).unwrap())
    }

    /// Runs `script` with bash in the project under `sb`.
    fn run(&self, sb: &Arc<Sandbox>, script: &str) -> proc::Outcome {
        let mut spec = Spec::exec(
            vec!["bash".into(), "-c".into(), script.into()],
            &self.project,
        );
        spec.sandbox = Some(sb.clone());
        spec.timeout = Some(Duration::from_secs(20));
        proc::run(&spec).unwrap()
    }
}

fn ws(f: &Fixture) -> Arc<Sandbox> {
    f.sandbox(Mode::WorkspaceWrite, false, &[])
}

#[test]
fn workspace_write_writes_in_the_project_and_its_private_tmpdir() {
    let f = fixture();
    let r = f.run(
        &ws(&f),
        "echo a > in.txt && mkdir -p sub && echo b > sub/f && mv sub/f g && rm g && echo t > \"$TMPDIR/t\" && echo ok > /dev/null && python3 -c 'import multiprocessing; multiprocessing.Lock()' && echo done",
    );
    assert_eq!(r.stdout_text(), "done\n", "{}", r.stderr_text());
    assert_eq!(
        std::fs::read_to_string(f.project.join("in.txt")).unwrap(),
        "a\n"
    );
    assert!(f.tmp.join("t").exists());
}

#[test]
fn workspace_write_refuses_writes_outside_and_into_hooks_config_and_dot_crush() {
    let f = fixture();
    let sb = ws(&f);
    let home = PathBuf::from(std::env::var("HOME").unwrap());
    let marker = format!("crush-sandbox-test-{}", std::process::id());
    std::os::unix::fs::symlink(&f.outside, f.project.join("link")).unwrap();
    let targets = [
        home.join(&marker),
        PathBuf::from("/etc").join(&marker),
        f.outside.join("x"),
        f.project.join("link/through-link"),
        f.project.join(".git/hooks/pre-commit"),
        f.project.join(".crush/crush.json"),
    ];
    for t in &targets {
        let r = f.run(&sb, &format!("echo evil > '{}'", t.display()));
        assert_ne!(r.exit_code, Some(0), "{} was written", t.display());
        let err = r.stderr_text();
        assert!(
            err.contains("Permission denied") || err.contains("Read-only file system"),
            "{}: {err}",
            t.display()
        );
        assert!(!t.exists(), "{} exists", t.display());
        assert!(!f.outside.join("through-link").exists());
    }
    // The config stays as it was, and the protected directories cannot be moved away.
    let r = f.run(
        &sb,
        "echo '[core] hooksPath=/tmp' >> .git/config; mv .git/hooks .git/h2; mv .git .g; mv .crush .c; rm -rf .crush; true",
    );
    assert!(r.success());
    assert_eq!(
        std::fs::read_to_string(f.project.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(f.project.join(".git/hooks").is_dir());
    assert!(f.project.join(".crush").is_dir());
    assert!(!f.project.join(".g").exists() && !f.project.join(".c").exists());
    // The mounts were the child's own: crush still writes there.
    std::fs::write(f.project.join(".crush/ok"), "x").unwrap();
}

#[test]
fn a_hooks_path_inside_the_project_is_read_only_too() {
    let f = fixture();
    std::fs::write(
        f.project.join(".git/config"),
        "[core]\n\tbare = false\n[Core]\n\thooksPath = \".husky\"\n",
    )
    .unwrap();
    let r = f.run(&ws(&f), "echo x > .husky/pre-commit; echo y > other.txt");
    assert!(
        r.stderr_text().contains("Read-only file system"),
        "{}",
        r.stderr_text()
    );
    assert!(f.project.join(".husky").is_dir() && !f.project.join(".husky/pre-commit").exists());
    assert!(f.project.join("other.txt").exists());
    assert_eq!(
        hooks_path("[core]\n hooksPath = /x\n[other]\nhookspath = y\n").as_deref(),
        Some("/x")
    );
    assert_eq!(hooks_path("[alias]\nhookspath = y\n"), None);
    assert_eq!(in_project(&f.project, "/etc"), None);
    assert_eq!(in_project(&f.project, "../outside"), None);
}

#[test]
fn writable_roots_are_writable_and_read_only_mode_writes_only_its_tmpdir() {
    let f = fixture();
    let sb = f.sandbox(Mode::WorkspaceWrite, false, &[f.outside.join("../outside")]);
    assert_eq!(sb.policy().writable_roots, std::slice::from_ref(&f.outside));
    let r = f.run(
        &sb,
        &format!("echo x > '{}/w' && echo ok", f.outside.display()),
    );
    assert_eq!(r.stdout_text(), "ok\n", "{}", r.stderr_text());
    let ro = f.sandbox(Mode::ReadOnly, false, &[]);
    let r = f.run(&ro, "echo x > in.txt");
    assert_ne!(r.exit_code, Some(0));
    assert!(!f.project.join("in.txt").exists());
    let r = f.run(&ro, "cat .git/config && echo t > \"$TMPDIR/t\" && echo ok");
    assert_eq!(r.stdout_text(), "[core]\nok\n", "{}", r.stderr_text());
}

#[test]
fn setuid_cannot_escape_no_new_privs_is_set() {
    let f = fixture();
    let r = f.run(&ws(&f), "grep NoNewPrivs /proc/self/status");
    assert_eq!(r.stdout_text().split_whitespace().nth(1), Some("1"));
}

fn wait_for(p: &Path) -> bool {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if p.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn background_jobs_and_double_forked_daemons_stay_confined() {
    let f = fixture();
    let sb = ws(&f);
    let out = f.outside.join("daemon");
    let script = format!(
        "setsid bash -c '(echo x > {o}; echo $? > done1) &' & (echo y > {o}2; echo $? > done2) & disown; sleep 1; echo started",
        o = out.display()
    );
    let mut spec = Spec::exec(vec!["bash".into(), "-c".into(), script], &f.project);
    spec.sandbox = Some(sb);
    let job = proc::job::Job::start(&spec).unwrap();
    job.wait(Some(Instant::now() + Duration::from_secs(10)), None);
    assert!(wait_for(&f.project.join("done1")) && wait_for(&f.project.join("done2")));
    assert!(!out.exists() && !f.outside.join("daemon2").exists());
    let code = std::fs::read_to_string(f.project.join("done1")).unwrap();
    assert_ne!(code.trim(), "0");
}

/// Runs the Python program `py` under `sb` and checks the kernel refused it.
fn assert_python_refused(f: &Fixture, sb: &Arc<Sandbox>, py: &str) {
    let r = f.run(sb, &format!("python3 -c \"{py}\""));
    assert_ne!(r.exit_code, Some(0));
    let err = r.stderr_text();
    assert!(err.contains("PermissionError"), "{err}");
}

fn connect_script(port: u16) -> String {
    format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")
}

#[test]
fn network_off_refuses_tcp_udp_and_unix_sockets_and_network_on_connects() {
    let f = fixture();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let off = ws(&f);
    let r = f.run(&off, &connect_script(port));
    assert_ne!(r.exit_code, Some(0));
    assert!(!r.stdout_text().contains("connected"));
    assert!(
        r.stderr_text().contains("Operation not permitted"),
        "{}",
        r.stderr_text()
    );

    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let uport = udp.local_addr().unwrap().port();
    let py = format!(
        "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('127.0.0.1', {uport}))"
    );
    assert_python_refused(&f, &off, &py);
    std::thread::sleep(Duration::from_millis(100));
    assert!(udp.recv(&mut [0u8; 8]).is_err(), "a datagram got out");

    let sock = f.outside.join("daemon.sock");
    let _unix = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let py = format!(
        "import socket; s = socket.socket(socket.AF_UNIX); s.connect('{}')",
        sock.display()
    );
    assert_python_refused(&f, &off, &py);

    let on = f.sandbox(Mode::WorkspaceWrite, true, &[]);
    let r = f.run(&on, &connect_script(port));
    assert_eq!(r.stdout_text(), "connected\n", "{}", r.stderr_text());
    let r = f.run(&on, &format!("python3 -c \"{py}\""));
    assert_eq!(r.exit_code, Some(0), "{}", r.stderr_text());
}

#[test]
fn an_unsandboxed_command_is_unaffected() {
    let f = fixture();
    let mut spec = Spec::shell(
        format!("echo x > '{}/free'", f.outside.display()),
        &f.project,
    );
    spec.timeout = Some(Duration::from_secs(10));
    assert!(proc::run(&spec).unwrap().success());
    assert!(f.outside.join("free").exists());
}

#[test]
fn policies_cross_the_job_socket_whole_and_bad_paths_are_errors() {
    let f = fixture();
    let p = Policy::new(
        Mode::WorkspaceWrite,
        true,
        &f.project.join("sub/.."),
        std::slice::from_ref(&f.outside),
        &f.tmp,
    );
    let p = match p {
        Err(Error::Path { path, .. }) => {
            assert!(path.ends_with("sub/.."));
            std::fs::create_dir(f.project.join("sub")).unwrap();
            Policy::new(
                Mode::WorkspaceWrite,
                true,
                &f.project.join("sub/.."),
                std::slice::from_ref(&f.outside),
                &f.tmp,
            )
            .unwrap()
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(p.project_root, f.project);
    assert_eq!(Policy::decode(&p.encode()), Some(p));
    assert_eq!(Policy::decode(&["bogus".into()]), None);
    let missing = Policy::new(
        Mode::ReadOnly,
        false,
        &f.project,
        &[f.outside.join("missing")],
        &f.tmp,
    );
    assert!(matches!(missing, Err(Error::Path { .. })));
}

#[test]
fn a_forced_abi_only_lowers_and_refuses_with_a_message() {
    assert_eq!(effective_abi(7, Some("0")), 0);
    assert_eq!(effective_abi(7, Some("4")), 4);
    assert_eq!(effective_abi(3, Some("9")), 3);
    assert_eq!(effective_abi(7, Some("x")), 7);
    assert_eq!(effective_abi(7, Some("-2")), 0);
    let e = Error::Unsupported {
        abi: 0,
        need: MIN_ABI,
        what: "the sandbox",
    };
    assert!(e.to_string().contains("no Landlock"), "{e}");
}

#[test]
fn the_refusal_hint_names_the_sandbox_and_how_to_allow() {
    let f = fixture();
    let p = Policy::new(Mode::WorkspaceWrite, false, &f.project, &[], &f.tmp).unwrap();
    assert_eq!(refusal_hint(&p, "all good"), None);
    let h = refusal_hint(&p, "bash: /etc/x: Permission denied").unwrap();
    assert!(h.contains("workspace-write") && h.contains("writable_roots") && h.contains("network"));
}

/// Measures the sandbox's setup: preparing a policy (once per session) and the extra CPU of
/// applying it in the child (per command), against a child that forks the same way (an empty
/// pre-exec hook: std then forks instead of using posix_spawn). Run with `--ignored
/// --nocapture`.
#[test]
#[ignore]
fn measure_setup_cost() {
    use std::os::unix::process::CommandExt;
    let f = fixture();
    let n = 300;
    let cpu = || {
        // SAFETY: getrusage fills the zeroed local.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid, writable local.
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
        let t = |tv: libc::timeval| tv.tv_sec as f64 * 1e6 + tv.tv_usec as f64;
        t(ru.ru_utime) + t(ru.ru_stime)
    };
    let t = Instant::now();
    for _ in 0..n {
        drop(ws(&f));
    }
    println!(
        "prepare: {:.1} us wall each",
        t.elapsed().as_micros() as f64 / n as f64
    );
    let runs = [
        ("fork, no sandbox", None),
        ("workspace-write, network off", Some(ws(&f))),
        (
            "workspace-write, network on",
            Some(f.sandbox(Mode::WorkspaceWrite, true, &[])),
        ),
        ("read-only", Some(f.sandbox(Mode::ReadOnly, false, &[]))),
    ];
    for round in 0..2 {
        for (name, sandbox) in &runs {
            let before = cpu();
            for _ in 0..n {
                let mut cmd = std::process::Command::new("/bin/true");
                let sb = sandbox.clone();
                // SAFETY: `apply` only makes syscalls.
                unsafe {
                    cmd.pre_exec(move || sb.as_ref().map_or(Ok(()), |s| s.apply()));
                }
                assert!(cmd.status().unwrap().success());
            }
            println!(
                "round {round} {name}: {:.1} us child CPU each",
                (cpu() - before) / n as f64
            );
        }
    }
}
