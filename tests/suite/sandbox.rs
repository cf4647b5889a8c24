//! The OS sandbox end to end (crush(1) SECURITY, sandbox): the real binary, its job server and
//! the real kernel, with the fake model server asking for the tool calls.

use crate::support::{Dialect, FakeServer, Reply, TestEnv};
use serde_json::json;

fn env_with(server: &FakeServer) -> TestEnv {
    let env = TestEnv::new();
    env.use_server(server, Dialect::OpenAi);
    std::fs::create_dir_all(env.project().join(".git/hooks")).unwrap();
    env
}

/// A directory beside the project, outside it.
fn outside(env: &TestEnv) -> std::path::PathBuf {
    let d = env.root().join("outside");
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn auto_runs_commands_in_the_project_without_asking_and_the_kernel_refuses_the_rest() {
    let server = FakeServer::with_script(vec![]);
    let env = env_with(&server);
    let evil = outside(&env).join("evil");
    server.push_all(vec![
        Reply::tool_call("bash", json!({"command": "echo hi > f.txt"})),
        Reply::tool_call(
            "bash",
            json!({"command": format!("echo x > {}", evil.display())}),
        ),
        Reply::tool_call("bash", json!({"command": "echo x > .git/hooks/pre-commit"})),
        Reply::tool_call(
            "bash",
            json!({"command": "(sleep 0.3; echo x > ../outside/late) & echo started"}),
        ),
        Reply::tool_call("crush_info", json!({})),
        Reply::text("done"),
    ]);
    let out = env.run(&["run", "-q", "--auto", "work"], None);
    out.assert_success();
    assert_eq!(env.read_project_file("f.txt"), "hi\n");
    std::thread::sleep(std::time::Duration::from_millis(800));
    assert!(!evil.exists() && !outside(&env).join("late").exists());
    assert!(!env.project().join(".git/hooks/pre-commit").exists());
    let results = server.last_request().tool_results();
    assert_eq!(results.len(), 5, "{results:?}");
    assert!(
        results[4]
            .1
            .contains("sandbox = workspace-write (network off, landlock ABI"),
        "{:?}",
        results[4]
    );
    assert!(
        results[1].1.contains("Permission denied") && results[1].1.contains("sandbox"),
        "{:?}",
        results[1]
    );
    assert!(
        results[2].1.contains("Read-only file system"),
        "{:?}",
        results[2]
    );
}

#[test]
fn auto_still_refuses_a_write_outside_the_project_with_exit_3() {
    let server = FakeServer::with_script(vec![]);
    let env = env_with(&server);
    let target = outside(&env).join("w.txt");
    server.push(Reply::tool_call(
        "write",
        json!({"file_path": target.display().to_string(), "content": "x"}),
    ));
    let out = env.run(&["run", "-q", "--auto", "write it"], None);
    out.assert_code(3);
    assert!(!target.exists());
}

#[test]
fn a_kernel_without_landlock_stops_auto_and_a_configured_sandbox() {
    let server = FakeServer::with_script(vec![]);
    let env = env_with(&server);
    let out = env.run_with_env(
        &["run", "--auto", "hello"],
        &[("CRUSH_SANDBOX_FORCE_ABI", "0")],
    );
    out.assert_code(2);
    assert!(out.stderr.contains("no Landlock"), "{}", out.stderr);
    let mut config = env.config_for(&server, Dialect::OpenAi);
    config["options"]["sandbox"] = json!({"mode": "read-only"});
    env.write_config(&config);
    let out = env.run_with_env(&["run", "hello"], &[("CRUSH_SANDBOX_FORCE_ABI", "3")]);
    out.assert_code(2);
    assert!(out.stderr.contains("network cut needs 4"), "{}", out.stderr);
    let out = env.run_with_env(&["sandbox", "check"], &[("CRUSH_SANDBOX_FORCE_ABI", "0")]);
    out.assert_success();
    assert!(out.stdout.contains("landlock ABI      0"), "{}", out.stdout);
}

#[test]
fn an_untrusted_project_can_neither_switch_the_sandbox_off_nor_widen_it() {
    let server = FakeServer::with_script(vec![]);
    let env = env_with(&server);
    let out_dir = outside(&env);
    let mut config = env.config_for(&server, Dialect::OpenAi);
    config["options"]["sandbox"] = json!({"mode": "workspace-write"});
    env.write_config(&config);
    env.write_project_file(
        "crush.json",
        &json!({"options": {"sandbox": {"mode": "off", "writable_roots": [out_dir.display().to_string()]}}})
            .to_string(),
    );
    server.push_all(vec![
        Reply::tool_call(
            "bash",
            json!({"command": format!("echo x > {}/w", out_dir.display())}),
        ),
        Reply::text("done"),
    ]);
    let out = env.run(&["run", "-q", "-y", "go"], None);
    out.assert_success();
    assert!(out.stderr.contains("options.sandbox"), "{}", out.stderr);
    assert!(!out_dir.join("w").exists());
}

#[test]
fn a_bad_writable_root_is_a_config_error_with_file_and_line() {
    let server = FakeServer::with_script(vec![]);
    let env = env_with(&server);
    for bad in ["relative/dir", "/no/such/dir/anywhere"] {
        let mut config = env.config_for(&server, Dialect::OpenAi);
        config["options"]["sandbox"] = json!({"mode": "workspace-write", "writable_roots": [bad]});
        env.write_config(&config);
        let out = env.run(&["run", "hello"], None);
        out.assert_code(2);
        assert!(
            out.stderr.contains("crush.json:") && out.stderr.contains("writable_roots[0]"),
            "{}",
            out.stderr
        );
    }
}

#[test]
fn crush_sandbox_runs_a_command_confined_and_exits_with_its_status() {
    let env = TestEnv::new();
    let out_dir = outside(&env);
    std::fs::create_dir_all(env.project()).unwrap();
    let out = env.run(
        &[
            "sandbox",
            "--",
            "bash",
            "-c",
            "echo in > f && echo x > ../outside/x; exit 7",
        ],
        None,
    );
    out.assert_code(7);
    assert!(out.stderr.contains("Permission denied"), "{}", out.stderr);
    assert_eq!(env.read_project_file("f"), "in\n");
    assert!(!out_dir.join("x").exists());
    let out = env.run(
        &["sandbox", "--mode", "read-only", "--", "touch", "g"],
        None,
    );
    assert_ne!(out.code, 0);
    assert!(!env.project().join("g").exists());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port}");
    let out = env.run(&["sandbox", "--", "bash", "-c", &connect], None);
    assert_ne!(out.code, 0);
    let out = env.run(
        &["sandbox", "--network", "--", "bash", "-c", &connect],
        None,
    );
    out.assert_success();
}

#[test]
fn the_repls_sandbox_command_shows_and_changes_the_mode_for_the_session() {
    let (server, env) = crate::suite::repl::setup(vec![
        Reply::tool_call("bash", json!({"command": "echo x > f.txt"})),
        Reply::text("done"),
    ]);
    std::fs::create_dir_all(env.project()).unwrap();
    let out = env.run(
        &["--auto"],
        Some("/sandbox\n/sandbox read-only\nmake f.txt\n/sandbox bogus\n/sandbox off\n"),
    );
    out.assert_success();
    assert!(
        out.stdout.contains("sandbox  workspace-write (network off"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("sandbox  read-only"), "{}", out.stdout);
    assert!(out.stdout.contains("sandbox  off"), "{}", out.stdout);
    assert!(out.stderr.contains("not a sandbox mode"), "{}", out.stderr);
    assert!(
        out.stderr.contains("auto approval mode ends"),
        "{}",
        out.stderr
    );
    assert!(!env.project().join("f.txt").exists());
    let results = crate::suite::repl::turns(&server)
        .last()
        .map(|r| r.tool_results())
        .unwrap_or_default();
    assert!(
        results.iter().any(|r| r.1.contains("sandbox")),
        "{results:?}"
    );
}

#[test]
fn the_configuration_builtins_still_record_inside_the_sandbox() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "option progress false"})),
        Reply::text("done"),
    ]);
    let env = env_with(&server);
    env.run(&["run", "-q", "--auto", "quiet please"], None)
        .assert_success();
    let results = server.last_request().tool_results();
    assert!(
        results[0]
            .1
            .contains("session config: option progress = false"),
        "{results:?}"
    );
}

#[test]
fn a_user_other_than_root_gets_the_same_sandbox_through_a_user_namespace() {
    // SAFETY: a plain getter.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || !std::path::Path::new("/usr/bin/setpriv").exists() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    // The other user must be able to walk down to the temporary folder; a machine whose
    // temporary directory is closed to others (mode 0700) cannot run this test.
    if let Some(closed) = base.ancestors().skip(1).find(|a| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(a).is_ok_and(|m| m.permissions().mode() & 0o001 == 0)
    }) {
        eprintln!("skipped: {} is closed to other users", closed.display());
        return;
    }
    let project = base.join("p");
    std::fs::create_dir_all(project.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(base.join("home")).unwrap();
    for p in [
        base,
        &project,
        &project.join(".git"),
        &project.join(".git/hooks"),
        &base.join("home"),
    ] {
        std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
    }
    let out = std::process::Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_crush"))
        .args(["sandbox", "--", "bash", "-c"])
        .arg("id -u; echo a > a; echo b > .git/hooks/pre-commit; echo c > ../c; true")
        .current_dir(&project)
        .env("HOME", base.join("home"))
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env("CRUSH_DISABLE_PROVIDER_AUTO_UPDATE", "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout, "65534\n");
    assert!(project.join("a").exists());
    assert!(!project.join(".git/hooks/pre-commit").exists(), "{stderr}");
    assert!(!base.join("c").exists(), "{stderr}");
}

#[test]
fn config_show_reports_the_configured_sandbox_and_the_kernels_abi() {
    let server = FakeServer::with_script(vec![]);
    let env = env_with(&server);
    let mut config = env.config_for(&server, Dialect::OpenAi);
    config["options"]["sandbox"] = json!({"mode": "read-only", "network": true});
    env.write_config(&config);
    let out = env.run(&["config", "show", "--origin"], None);
    out.assert_success();
    assert!(
        out.stdout
            .contains("# sandbox: read-only (network on, landlock ABI "),
        "{}",
        out.stdout
    );
    let out = env.run(&["config", "show", "--origin", "--json"], None);
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(
        doc["sandbox"].as_str().unwrap().starts_with("read-only"),
        "{doc}"
    );
}

#[test]
fn an_untrusted_project_may_narrow_the_sandbox() {
    let server = FakeServer::with_script(vec![]);
    let env = env_with(&server);
    let mut config = env.config_for(&server, Dialect::OpenAi);
    config["options"]["sandbox"] = json!({"mode": "workspace-write"});
    env.write_config(&config);
    env.write_project_file(
        "crush.json",
        &json!({"options": {"sandbox": {"mode": "read-only", "network": true}}}).to_string(),
    );
    let out = env.run(&["config", "show", "--origin"], None);
    assert!(
        out.stdout
            .contains("# sandbox: read-only (network off, landlock ABI"),
        "{}",
        out.stdout
    );
    server.push_all(vec![
        Reply::tool_call("bash", json!({"command": "echo x > f.txt"})),
        Reply::text("done"),
    ]);
    env.run(&["run", "-q", "-y", "go"], None).assert_success();
    assert!(!env.project().join("f.txt").exists());
    // Looser than the user's: the user's stands.
    env.write_project_file(
        "crush.json",
        &json!({"options": {"sandbox": {"mode": "off"}}}).to_string(),
    );
    let out = env.run(&["config", "show", "--origin"], None);
    assert!(
        out.stdout.contains("# sandbox: workspace-write"),
        "{}",
        out.stdout
    );
}
