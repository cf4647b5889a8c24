//! crush_info and crush_logs: crush's own state and log, for the model.

use crate::support::{Dialect, FakeServer, Reply, TestEnv};
use serde_json::json;

#[test]
fn crush_info_reports_the_state_and_crush_logs_the_log() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("crush_info", json!({})),
        Reply::tool_call("crush_logs", json!({"lines": 5})),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    let mut cfg = env.config_for(&server, Dialect::Anthropic);
    cfg["options"] = json!({"disabled_tools": ["sourcegraph"]});
    cfg["permissions"] = json!({"allowed_tools": ["view"]});
    env.write_config(&cfg);
    let out = env.run(&["run", "-q", "what is wrong"], None);
    out.assert_success();
    let result = |i: usize| {
        let r = server.model_requests()[i].tool_results();
        r.last().cloned().unwrap()
    };
    let (_, info, err) = result(1);
    assert!(!err);
    assert!(info.starts_with("[crush]\nversion = "), "{info}");
    assert!(
        info.contains("[model]\nlarge = fake-model (fake)"),
        "{info}"
    );
    let config_file = env.config_dir().join("crush.json");
    assert!(
        info.contains(&format!("[config_files]\n{}", config_file.display())),
        "{info}"
    );
    assert!(info.contains("[disabled_tools]\nsourcegraph"), "{info}");
    assert!(info.contains("allowed_tools = view"), "{info}");
    assert!(info.contains("fake = enabled (1 models)"), "{info}");
    let (_, logs, err) = result(2);
    assert!(!err);
    assert!(logs.contains("INFO  run: session"), "{logs}");
    assert!(logs.lines().count() <= 5, "{logs}");
    // The model is never offered sourcegraph here.
    assert!(
        !server.model_requests()[0]
            .tool_names()
            .contains(&"sourcegraph".to_string())
    );
}

#[test]
fn crush_info_lists_the_skills_and_which_were_loaded() {
    let env = TestEnv::new();
    for name in ["review", "deploy"] {
        env.write_project_file(
            &format!(".crush/skills/{name}/SKILL.md"),
            &format!("---\nname: {name}\ndescription: The {name} steps.\n---\nSteps.\n"),
        );
    }
    let review =
        std::fs::canonicalize(env.project().join(".crush/skills/review/SKILL.md")).unwrap();
    let server = FakeServer::with_script(vec![
        Reply::tool_call("view", json!({"file_path": review.to_string_lossy()})),
        Reply::tool_call("crush_info", json!({})),
        Reply::text("done"),
    ]);
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["options"] = json!({"disabled_skills": ["crush-hooks"]});
    env.write_config(&cfg);
    env.run(&["run", "-q", "which skills"], None)
        .assert_success();
    let info = server.model_requests()[2]
        .tool_results()
        .last()
        .cloned()
        .unwrap()
        .1;
    // Active: review, deploy and the built-in crush-config; only review was read.
    for line in [
        "[skills]\nloaded_this_session = 1/3\n",
        "crush-config = builtin, unloaded\n",
        "crush-hooks = builtin, disabled\n",
        "deploy = project, unloaded\n",
        "review = project, loaded\n",
    ] {
        assert!(info.contains(line), "{line:?} in {info}");
    }
}
