//! Files and secrets at rest (crush(1) FILES, SECURITY): private data directories, database and
//! log; credentials in URLs never shown; wrong types named precisely; runaway replies cut.

use crate::support::{Dialect, FakeServer, Reply, TestEnv};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o777
}

fn set_mode(p: &Path, m: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
}

#[test]
fn data_directories_are_private_and_so_are_the_database_and_the_log() {
    let server = FakeServer::with_script(vec![Reply::text("ok"), Reply::text("ok")]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    // Directories and files left open by hand or by an older version.
    let dot = env.project().join(".crush");
    std::fs::create_dir_all(dot.join("logs")).unwrap();
    std::fs::write(dot.join("logs/crush.log"), "").unwrap();
    set_mode(&dot, 0o755);
    set_mode(&dot.join("logs"), 0o755);
    set_mode(&dot.join("logs/crush.log"), 0o644);
    set_mode(&env.data_dir(), 0o755);
    env.run(&["run", "hi"], None).assert_success();
    for (p, want) in [
        (dot.clone(), 0o700),
        (dot.join("logs"), 0o700),
        (dot.join("logs/crush.log"), 0o600),
        (dot.join("crush.db"), 0o600),
        (env.data_dir(), 0o700),
    ] {
        assert_eq!(mode(&p), want, "{}", p.display());
    }
    for side in ["crush.db-wal", "crush.db-shm"] {
        if dot.join(side).exists() {
            assert_eq!(mode(&dot.join(side)), 0o600, "{side}");
        }
    }
    // A -D directory anyone could write to.
    let shared = env.root().join("shared");
    std::fs::create_dir(&shared).unwrap();
    set_mode(&shared, 0o777);
    let d = shared.to_string_lossy().into_owned();
    env.run(&["-D", &d, "run", "hi"], None).assert_success();
    assert_eq!(mode(&shared), 0o700);
    assert_eq!(mode(&shared.join("crush.db")), 0o600);
}

#[test]
fn a_data_dir_that_is_not_the_users_own_is_refused() {
    let server = FakeServer::start();
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let theirs = if root {
        let d = env.root().join("theirs");
        std::fs::create_dir(&d).unwrap();
        set_mode(&d, 0o777);
        let c = std::ffi::CString::new(d.to_string_lossy().as_bytes()).unwrap();
        // SAFETY: a plain syscall on a path we created.
        assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, 65534) }, 0);
        d
    } else {
        // Owned by root, and not writable: nothing can be created there anyway.
        Path::new("/usr").to_path_buf()
    };
    std::os::unix::fs::symlink(&theirs, env.project().join(".crush")).unwrap();
    let out = env.run(&["run", "hi"], None);
    out.assert_code(2);
    assert!(
        out.stderr.contains("owned by another user"),
        "{}",
        out.stderr
    );
    if root {
        assert_eq!(std::fs::read_dir(&theirs).unwrap().count(), 0);
        assert_eq!(mode(&theirs), 0o777);
    }
    assert_eq!(server.request_count(), 0);
}

#[test]
fn credentials_in_a_base_url_are_sent_but_never_shown() {
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    let env = TestEnv::new();
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    let creds = |base: &str| {
        format!(
            "{}?key=qsecret",
            base.replacen("http://", "http://user:secretpw@", 1)
        )
    };
    cfg["providers"]["fake"]["base_url"] = creds(&server.openai_base_url()).into();
    cfg["providers"]["fake"]
        .as_object_mut()
        .unwrap()
        .remove("api_key");
    env.write_config(&cfg);
    env.run(&["run", "hi"], None).assert_success();
    // The path goes before the query.
    assert_eq!(
        server.last_request().path,
        "/v1/chat/completions?key=qsecret"
    );

    // A server that cannot be reached: its address shows, its credentials never do.
    cfg["providers"]["fake"]["base_url"] = creds("http://127.0.0.1:1/v1").into();
    env.write_config(&cfg);
    let out = env.run_with_env(&["run", "hi"], &[("CRUSH_RETRY_BASE_MS", "1")]);
    out.assert_code(1);
    assert!(out.stderr.contains("127.0.0.1:1"), "{}", out.stderr);
    let show = env.run(&["config", "show", "--origin"], None);
    show.assert_success();
    let dot = env.project().join(".crush");
    let mut places = vec![
        ("stderr", out.stderr.clone()),
        ("config show", show.stdout.clone()),
        (
            "log",
            std::fs::read_to_string(dot.join("logs/crush.log")).unwrap(),
        ),
    ];
    for f in ["crush.db", "crush.db-wal"] {
        if let Ok(b) = std::fs::read(dot.join(f)) {
            places.push((f, String::from_utf8_lossy(&b).into_owned()));
        }
    }
    for (what, text) in places {
        assert!(
            !text.contains("secretpw") && !text.contains("qsecret"),
            "{what} shows a credential:\n{text}"
        );
    }
    assert!(
        show.stdout.contains("****@127.0.0.1:1/v1?key=****"),
        "{}",
        show.stdout
    );
}

#[test]
fn a_value_of_the_wrong_type_names_file_line_key_and_type() {
    let env = TestEnv::new();
    let cfg = env.config_dir().join("crush.json");
    std::fs::write(
        &cfg,
        "{\n  \"options\": {\n    \"debug\": \"yes\"\n  }\n}\n",
    )
    .unwrap();
    let out = env.run(&["config", "show"], None);
    out.assert_code(2);
    let want = format!(
        "{}:3: options.debug: expected a boolean, got string \"yes\"",
        cfg.display()
    );
    assert!(out.stderr.contains(&want), "{}", out.stderr);
}

#[test]
fn a_runaway_reply_is_stored_cut_with_a_marker() {
    let big = "x".repeat(300_000);
    let server = FakeServer::with_script(vec![Reply::text(&big), Reply::text("ok")]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    // The limit is 64 MiB; CRUSH_MAX_REPLY_BYTES lowers it for the test.
    let out = env.run_with_env(&["run", "go"], &[("CRUSH_MAX_REPLY_BYTES", "200000")]);
    out.assert_code(1);
    assert!(out.stderr.contains("the reply exceeded"), "{}", out.stderr);
    // Continuing the session sends the stored reply again: cut, with the marker.
    env.run(&["run", "-C", "again"], None).assert_success();
    let sent: Vec<String> = server
        .last_request()
        .messages()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .map(|m| crate::support::server::content_text(&m["content"]))
        .collect();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(
        sent[0].len() < 70_000
            && sent[0].contains("[crush: this reply was cut for being too large"),
        "{} bytes sent again: {}",
        sent[0].len(),
        &sent[0][sent[0].len().saturating_sub(200)..]
    );
}

#[test]
fn a_data_dir_shipped_with_symbolic_links_is_refused() {
    // A repository can ship `.crush/logs/crush.log -> ~/.bashrc`: what crush appends to its log
    // (or a transcript) would run in the user's next shell.
    let server = FakeServer::start();
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let victim = env.home().join(".bashrc");
    std::fs::write(&victim, "# mine\n").unwrap();
    set_mode(&victim, 0o644);
    for link in ["logs/crush.log", "transcripts/0001.jsonl"] {
        let data = env.project().join(".crush");
        let _ = std::fs::remove_dir_all(&data);
        let at = data.join(link);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&victim, &at).unwrap();
        let out = env.run(&["-d", "run", "hi"], None);
        out.assert_code(2);
        assert!(
            out.stderr.contains("holds a symbolic link") && out.stderr.contains(link),
            "{}",
            out.stderr
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "# mine\n");
        assert_eq!(mode(&victim), 0o644);
    }
    assert_eq!(server.request_count(), 0);
}
