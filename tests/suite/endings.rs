//! How a turn that looks finished but is not reports itself (crush(1) EXIT STATUS): a reply the
//! provider's content filter stopped, a stream that ended without its protocol's finish
//! marker, and a call that returned nothing, in every dialect the fake server speaks.

use crate::support::{Dialect, FakeServer, Fault, Output, Reply, TestEnv};
use serde_json::Value;

const ALL: [Dialect; 5] = [
    Dialect::OpenAi,
    Dialect::Anthropic,
    Dialect::Responses,
    Dialect::Gemini,
    Dialect::Bedrock,
];

/// `crush run --json PROMPT` against `server` speaking `d`, and its finish event.
fn run_json(server: &FakeServer, d: Dialect, prompt: &str) -> (Output, Value) {
    let env = TestEnv::new();
    env.use_server(server, d);
    let out = env.run_with_env(
        &["run", "--json", prompt],
        &[("CRUSH_RETRY_BASE_MS", "1"), ("AWS_REGION", "us-east-1")],
    );
    let finish = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "finish")
        .unwrap_or_else(|| panic!("{d:?}: no finish event:\n{}\n{}", out.stdout, out.stderr));
    (out, finish)
}

#[test]
fn a_content_filtered_answer_says_so_and_fails_in_every_dialect() {
    for (d, reason) in [
        (Dialect::OpenAi, "content_filter"),
        (Dialect::Anthropic, "refusal"),
        (Dialect::Responses, "content_filter"),
        (Dialect::Gemini, "SAFETY"),
        (Dialect::Gemini, "PROHIBITED_CONTENT"),
        (Dialect::Bedrock, "guardrail_intervened"),
    ] {
        let server =
            FakeServer::with_script(vec![Reply::text("Here is half an ans").stop_reason(reason)]);
        let (out, finish) = run_json(&server, d, "hi");
        out.assert_code(1);
        assert_eq!(finish["reason"], "content_filter", "{d:?} {reason}");
        assert_eq!(finish["text"], "Here is half an ans", "{d:?} {reason}");
        assert!(
            out.stderr.contains("content filter stopped the answer"),
            "{d:?} {reason}: {}",
            out.stderr
        );
        // Plain output: the text, and the notice on stderr.
        let server =
            FakeServer::with_script(vec![Reply::text("Here is half an ans").stop_reason(reason)]);
        let env = TestEnv::new();
        env.use_server(&server, d);
        let out = env.run_with_env(&["run", "-q", "hi"], &[("AWS_REGION", "us-east-1")]);
        out.assert_code(1);
        assert_eq!(out.stdout, "Here is half an ans\n");
        assert!(out.stderr.contains("incomplete"), "{}", out.stderr);
    }
}

#[test]
fn a_stream_without_its_finish_marker_is_retried_then_names_the_server() {
    for d in ALL {
        // Retried like a dropped connection: the second attempt answers.
        let server = FakeServer::with_script(vec![
            Reply::text("half").fault(Fault::NoFinish),
            Reply::text("whole answer"),
        ]);
        let (out, finish) = run_json(&server, d, "hi");
        out.assert_success();
        assert_eq!(finish["text"], "whole answer", "{d:?}");
        assert_eq!(server.model_requests().len(), 2, "{d:?}");

        // Never complete: an error that names the server and what was missing.
        let cut = || Reply::text("").fault(Fault::NoFinish).without_usage();
        let server = FakeServer::with_script(vec![cut(), cut(), cut(), cut()]);
        let (out, finish) = run_json(&server, d, "hi");
        out.assert_code(1);
        assert_eq!(finish["reason"], "error", "{d:?}");
        let host = server.url().trim_start_matches("http://").to_string();
        let error = finish["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(&host) && error.contains("ended before"),
            "{d:?}: {error}"
        );
        let missing = match d {
            Dialect::OpenAi => "finish_reason",
            Dialect::Anthropic | Dialect::Bedrock => "message_stop",
            Dialect::Responses => "response.completed",
            _ => "finishReason",
        };
        assert!(error.contains(missing), "{d:?}: {error}");
        assert!(out.stderr.contains(missing), "{d:?}: {}", out.stderr);
    }
}

#[test]
fn done_without_a_finish_reason_or_content_is_not_an_empty_success() {
    // An OpenAI-compatible server that sends the role, then [DONE].
    let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\ndata: [DONE]\n\n";
    let server = FakeServer::with_script((0..4).map(|_| Reply::raw_sse(body)).collect());
    let (out, finish) = run_json(&server, Dialect::OpenAi, "hi");
    out.assert_code(1);
    assert_ne!(finish["reason"], "end_turn");
    assert!(
        finish["error"]
            .as_str()
            .is_some_and(|e| e.contains("finish_reason")),
        "{finish}"
    );
}

#[test]
fn an_empty_answer_is_reported_as_empty_in_every_dialect() {
    for d in ALL {
        let empty = Reply::stream(crate::support::Stream {
            thinking: None,
            text: None,
            tool_calls: Vec::new(),
            usage: Some(crate::support::Usage::DEFAULT),
            stop_reason: None,
            fault: None,
        });
        let server = FakeServer::with_script(vec![empty]);
        let (out, finish) = run_json(&server, d, "hi");
        out.assert_code(1);
        assert_eq!(finish["reason"], "empty", "{d:?}");
        assert!(
            out.stderr.contains("the model returned an empty answer"),
            "{d:?}: {}",
            out.stderr
        );
    }
}
