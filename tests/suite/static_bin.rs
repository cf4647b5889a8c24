//! The static binary of `make static`, run once end to end: `make static-test` points
//! CRUSH_STATIC_BIN at it and runs this ignored test.

use crate::support::env::run_command;
use crate::support::{Dialect, FakeServer, RUN_TIMEOUT, Reply, TestEnv};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

fn static_bin() -> PathBuf {
    let path = std::env::var_os("CRUSH_STATIC_BIN")
        .expect("CRUSH_STATIC_BIN names the static binary to test (see `make static-test`)");
    std::fs::canonicalize(&path)
        .unwrap_or_else(|e| panic!("CRUSH_STATIC_BIN={}: {e}", Path::new(&path).display()))
}

/// Whether the ELF file has a PT_INTERP program header, i.e. asks for a dynamic loader.
fn has_interpreter(elf: &[u8]) -> bool {
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(elf[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap()) as usize;
    assert!(
        elf.len() > 64 && elf.starts_with(b"\x7fELF") && elf[4] == 2 && elf[5] == 1,
        "not a 64-bit little-endian ELF file"
    );
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    (0..phnum).any(|i| u32_at(phoff + i * phentsize) == 3)
}

#[test]
#[ignore = "needs CRUSH_STATIC_BIN: run by `make static-test`"]
fn static_binary_runs_a_two_step_turn() {
    let bin = static_bin();
    let elf = std::fs::read(&bin).expect("read the static binary");
    assert!(
        !has_interpreter(&elf),
        "{} asks for a dynamic loader: not a static binary",
        bin.display()
    );

    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "bash",
            json!({"command": "echo hello > hello.txt; echo made"}),
        ),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let mut cmd = env.crush_at(&bin);
    cmd.args(["run", "-q", "-y", "say hello"]);
    let out = run_command(cmd, None, RUN_TIMEOUT);
    out.assert_success();
    assert_eq!(out.stdout.trim(), "done");
    assert_eq!(env.read_project_file("hello.txt"), "hello\n");
    let results = server.last_request().tool_results();
    assert!(
        results.len() == 1 && results[0].1.contains("made"),
        "{results:?}"
    );

    // The session is in the store (the bundled SQLite of the static build).
    let mut cmd = env.crush_at(&bin);
    cmd.args(["sessions", "list", "--json"]);
    let list = run_command(cmd, None, RUN_TIMEOUT);
    list.assert_success();
    let sessions: Value = serde_json::from_str(&list.stdout).expect("sessions list --json");
    assert_eq!(sessions.as_array().map(Vec::len), Some(1), "{sessions}");
}

#[test]
fn the_static_check_tells_how_the_test_build_is_linked() {
    // The binary under test is built like this test: static only with crt-static (the default
    // of the musl targets).
    let elf = std::fs::read(env!("CARGO_BIN_EXE_crush")).expect("read crush");
    assert_eq!(has_interpreter(&elf), !cfg!(target_feature = "crt-static"));
}
