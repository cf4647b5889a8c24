//! Images and attachments: `view` of an image, `crush run --attach`, an image piped to
//! `crush run`, `@path` and `/attach` in the REPL, in the shapes each dialect takes, and as
//! text for a model that takes no images.

use crate::support::{Dialect, FakeServer, Reply, TestEnv};
use serde_json::{Value, json};

/// A 2x2 PNG (header and one chunk: what the checks read).
fn png() -> Vec<u8> {
    let mut d = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    d.extend(2u32.to_be_bytes());
    d.extend(2u32.to_be_bytes());
    d.extend([8, 6, 0, 0, 0, 0x72, 0xb6, 0x0d, 0x24]);
    d
}

fn b64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The fake provider's model, taking images or not.
fn env_for(server: &FakeServer, dialect: Dialect, images: bool) -> TestEnv {
    let env = TestEnv::new();
    let mut cfg = env.config_for(server, dialect);
    cfg["providers"]["fake"]["models"][0]["supports_attachments"] = json!(images);
    env.write_config(&cfg);
    std::fs::write(env.project().join("shot.png"), png()).unwrap();
    env
}

fn blocks_of_type<'a>(v: &'a Value, kind: &str, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(m) => {
            if m.get("type").and_then(Value::as_str) == Some(kind) {
                out.push(v);
            }
            m.values().for_each(|x| blocks_of_type(x, kind, out));
        }
        Value::Array(a) => a.iter().for_each(|x| blocks_of_type(x, kind, out)),
        _ => {}
    }
}

#[test]
fn a_viewed_image_is_inside_the_anthropic_tool_result() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("view", json!({"file_path": "shot.png"})),
        Reply::text("a square"),
    ]);
    let env = env_for(&server, Dialect::Anthropic, true);
    env.run(&["run", "-q", "look"], None).assert_success();
    let body = server.model_requests()[1].body.clone();
    let mut results = Vec::new();
    blocks_of_type(&body, "tool_result", &mut results);
    assert_eq!(results.len(), 1);
    assert_eq!(
        results[0]["content"],
        json!([
            {"type": "text", "text": "Image file shot.png (image/png, 2x2, 33 bytes)"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                "data": b64(&png())}}
        ])
    );
}

#[test]
fn a_viewed_image_follows_the_openai_tool_messages_in_a_user_message() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("view", json!({"file_path": "shot.png"})),
        Reply::text("a square"),
    ]);
    let env = env_for(&server, Dialect::OpenAi, true);
    env.run(&["run", "-q", "look"], None).assert_success();
    let msgs = server.model_requests()[1].messages();
    let tool = msgs.iter().position(|m| m["role"] == "tool").unwrap();
    assert_eq!(msgs[tool + 1]["role"], "user");
    let mut parts = Vec::new();
    blocks_of_type(&msgs[tool + 1]["content"], "image_url", &mut parts);
    assert_eq!(
        parts[0]["image_url"]["url"],
        format!("data:image/png;base64,{}", b64(&png()))
    );
}

#[test]
fn a_model_without_images_gets_a_line_instead() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("view", json!({"file_path": "shot.png"})),
        Reply::text("ok"),
    ]);
    let env = env_for(&server, Dialect::Anthropic, false);
    env.run(&["run", "-q", "--attach", "shot.png", "look"], None)
        .assert_success();
    let first = server.model_requests()[0].body.clone();
    let second = server.model_requests()[1].body.clone();
    for body in [&first, &second] {
        let mut images = Vec::new();
        blocks_of_type(body, "image", &mut images);
        assert!(images.is_empty(), "{body}");
    }
    let texts = server.model_requests()[0].user_texts().join("\n");
    assert!(
        texts.contains("shot.png (image/png, 33 bytes): not sent, this model is sent text only"),
        "{texts}"
    );
    let (_, result, _) = server.model_requests()[1].tool_results()[0].clone();
    assert!(result.contains("does not take images"), "{result}");
}

#[test]
fn attachments_of_crush_run_reach_the_hook_and_the_model_text_inline_images_as_images() {
    let server = FakeServer::with_script(vec![Reply::text("seen")]);
    let env = env_for(&server, Dialect::Anthropic, true);
    env.write_project_file("notes.md", "remember the milk\n");
    let seen = env.root().join("ups.json");
    let mut cfg: Value = serde_json::from_str(
        &std::fs::read_to_string(env.config_dir().join("crush.json")).unwrap(),
    )
    .unwrap();
    cfg["hooks"] = json!({"UserPromptSubmit": [{"command": format!("cat > {}", seen.display())}]});
    env.write_config(&cfg);
    let out = env.run(
        &[
            "run",
            "-q",
            "--attach",
            "shot.png",
            "--attach",
            "notes.md",
            "what do you see",
        ],
        None,
    );
    out.assert_success();
    let payload: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(payload["attachments"], json!(["shot.png", "notes.md"]));
    let user = &server.model_requests()[0].messages()[0];
    let content = user["content"].as_array().unwrap();
    assert_eq!(content[0]["text"], "what do you see");
    let file = content
        .iter()
        .find(|b| b["text"].as_str().is_some_and(|t| t.contains("<file")))
        .expect("the text file inline");
    assert!(
        file["text"]
            .as_str()
            .unwrap()
            .contains("<file path='notes.md'>\n\nremember the milk\n\n</file>"),
        "{user}"
    );
    let image = content
        .iter()
        .find(|b| b["type"] == "image")
        .expect("the image block");
    assert_eq!(image["source"]["data"], b64(&png()));
    // Stored as Go Crush's binary parts.
    let last = env.run(&["sessions", "last"], None);
    assert!(
        last.stdout
            .contains("[attached shot.png (image/png, 33 bytes)]")
            && last
                .stdout
                .contains("[attached notes.md (text/plain, 18 bytes)]"),
        "{}",
        last.stdout
    );
}

#[test]
fn an_image_piped_to_crush_run_is_attached_by_its_bytes() {
    let server = FakeServer::with_script(vec![Reply::text("seen")]);
    let env = env_for(&server, Dialect::OpenAi, true);
    let mut cmd = env.crush();
    cmd.args(["run", "-q", "describe it"]);
    // Raw bytes on stdin: run_command writes text, so the PNG goes through a file.
    cmd.stdin(std::fs::File::open(env.project().join("shot.png")).unwrap());
    let out = {
        use std::process::Stdio;
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.wait_with_output().unwrap()
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let user = &server.model_requests()[0].messages()[1];
    assert_eq!(
        user["content"][0],
        json!({"type": "text", "text": "describe it"})
    );
    assert_eq!(
        user["content"][1]["image_url"]["url"],
        format!("data:image/png;base64,{}", b64(&png()))
    );
}

#[test]
fn bad_attachments_are_clear_errors() {
    let server = FakeServer::start();
    let env = env_for(&server, Dialect::OpenAi, true);
    env.write_project_file("fake.png", "not a picture");
    let out = env.run(&["run", "-q", "--attach", "fake.png", "hi"], None);
    out.assert_code(2);
    assert!(
        out.stderr.contains("fake.png is named like image/png"),
        "{}",
        out.stderr
    );
    let out = env.run(&["run", "-q", "--attach", "missing.txt", "hi"], None);
    out.assert_code(2);
    assert!(out.stderr.contains("no such file"), "{}", out.stderr);
}

#[test]
fn the_repl_attaches_at_paths_asks_outside_the_project_and_attach_detach_work() {
    let (server, env) = super::repl::setup(vec![Reply::text("one"), Reply::text("two")]);
    env.write_project_file("notes.md", "inside\n");
    std::fs::write(env.project().join("shot.png"), png()).unwrap();
    let outside = env.root().join("outside.txt");
    std::fs::write(&outside, "secret\n").unwrap();
    let input = format!(
        "/attach shot.png\n/detach\n/attach notes.md\nlook at @{} please\nn\nand again @notes.md\n",
        outside.display()
    );
    let out = env.run(&["-y"], Some(&input));
    out.assert_success();
    assert!(
        out.stderr.contains("outside.txt not attached"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("Detached 1 file."), "{}", out.stderr);
    let turns = super::repl::turns(&server);
    let first = turns[0].user_texts().join("\n");
    assert!(first.contains("<file path='notes.md'>"), "{first}");
    assert!(!first.contains("secret"), "{first}");
    assert!(!first.contains("image"), "{first}");
    let second = turns[1].user_texts().join("\n");
    assert!(second.contains("and again @notes.md"), "{second}");
}

#[test]
fn a_viewed_image_reaches_responses_and_gemini_after_the_tool_output() {
    for dialect in [Dialect::Responses, Dialect::Gemini] {
        let server = FakeServer::with_script(vec![
            Reply::tool_call("view", json!({"file_path": "shot.png"})),
            Reply::text("a square"),
        ]);
        let env = env_for(&server, dialect, true);
        env.run(&["run", "-q", "look"], None).assert_success();
        let body = server.model_requests()[1].body.clone();
        let data = b64(&png());
        match dialect {
            // The function_call_output is text; the image follows it as the user's.
            Dialect::Responses => {
                let items = body["input"].as_array().unwrap();
                let out = items
                    .iter()
                    .position(|i| i["type"] == "function_call_output")
                    .unwrap();
                assert_eq!(items[out + 1]["role"], "user", "{body}");
                let mut images = Vec::new();
                blocks_of_type(&items[out + 1], "input_image", &mut images);
                assert_eq!(
                    images[0]["image_url"],
                    format!("data:image/png;base64,{data}")
                );
            }
            // The functionResponse opens the turn; the image is an inline part after it.
            _ => {
                let contents = body["contents"].as_array().unwrap();
                let parts = contents.last().unwrap()["parts"].as_array().unwrap();
                assert!(parts[0].get("functionResponse").is_some(), "{body}");
                let inline = parts
                    .iter()
                    .find_map(|p| p.get("inlineData"))
                    .unwrap_or_else(|| panic!("{body}"));
                assert_eq!(inline["mimeType"], "image/png");
                assert_eq!(inline["data"], data.as_str());
            }
        }
    }
}
