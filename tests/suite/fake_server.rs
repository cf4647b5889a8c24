//! Self-tests of the fake model server and the test environment, using a hand-written HTTP client.

use crate::support::server::EXHAUSTED;
use crate::support::{Dialect, FakeServer, Reply, Source, TestEnv, ToolCall};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends one request by hand and reads the whole response (the server closes the connection).
fn send(
    server: &FakeServer,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    let mut s = TcpStream::connect(server.addr()).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        server.addr(),
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read response");
    parse_response(&raw)
}

fn parse_response(raw: &[u8]) -> Response {
    let text = String::from_utf8_lossy(raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("response head");
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap();
            (k.trim().to_ascii_lowercase(), v.trim().to_owned())
        })
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Response {
        status,
        headers,
        body,
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size, 16).unwrap();
        if n == 0 || rest.len() < n {
            out.push_str(&rest[..n.min(rest.len())]);
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n..];
        s = s.strip_prefix("\r\n").unwrap_or(s);
    }
    out
}

/// Complete SSE events `(event name, data)`; a trailing unterminated event is dropped.
fn sse(body: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let complete = match body.rfind("\n\n") {
        Some(i) => &body[..i],
        None => return out,
    };
    for block in complete.split("\n\n") {
        let (mut name, mut data) = (String::new(), String::new());
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event: ") {
                name = v.to_owned();
            } else if let Some(v) = line.strip_prefix("data: ") {
                data.push_str(v);
            }
        }
        out.push((name, data));
    }
    out
}

fn anthropic_body() -> Value {
    json!({"model": "fake-model", "max_tokens": 1024, "stream": true,
           "messages": [{"role": "user", "content": "hi"}]})
}

fn post_anthropic(server: &FakeServer, body: &Value) -> Response {
    send(
        server,
        "POST",
        "/v1/messages",
        &[
            ("x-api-key", "test-key"),
            ("anthropic-version", "2023-06-01"),
        ],
        &body.to_string(),
    )
}

fn openai_body() -> Value {
    json!({"model": "fake-model", "stream": true, "stream_options": {"include_usage": true},
           "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]})
}

fn post_openai(server: &FakeServer, body: &Value) -> Response {
    send(
        server,
        "POST",
        "/v1/chat/completions",
        &[("Authorization", "Bearer test-key")],
        &body.to_string(),
    )
}

fn data_json(events: &[(String, String)]) -> Vec<Value> {
    events
        .iter()
        .filter(|(_, d)| d != "[DONE]")
        .map(|(_, d)| serde_json::from_str(d).unwrap_or_else(|e| panic!("bad JSON {d:?}: {e}")))
        .collect()
}

/// Concatenated text deltas of a parsed stream, in either dialect.
fn streamed_text(data: &[Value]) -> String {
    data.iter()
        .filter_map(|d| {
            d["delta"]["text"]
                .as_str()
                .or_else(|| d["choices"][0]["delta"]["content"].as_str())
        })
        .collect()
}

#[test]
fn anthropic_text_reply_has_the_full_event_sequence() {
    let server = FakeServer::with_script(vec![
        Reply::text("hello world").with_usage(12, 87, 2048, 100),
    ]);
    let resp = post_anthropic(&server, &anthropic_body());
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-type"), Some("text/event-stream"));
    assert_eq!(resp.header("connection"), Some("close"));
    let events = sse(&resp.body);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let data = data_json(&events);
    for (name, d) in names.iter().zip(&data) {
        assert_eq!(d["type"], *name, "event name matches data type");
    }
    let usage = &data[0]["message"]["usage"];
    assert_eq!(usage["input_tokens"], 12);
    assert_eq!(usage["cache_read_input_tokens"], 2048);
    assert_eq!(usage["cache_creation_input_tokens"], 100);
    let text: String = data
        .iter()
        .filter(|d| d["type"] == "content_block_delta")
        .map(|d| d["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "hello world");
    assert_eq!(data[5]["delta"]["stop_reason"], "end_turn");
    assert_eq!(data[5]["usage"]["output_tokens"], 87);
    assert!(resp.body.ends_with("\n\n"));
}

#[test]
fn anthropic_tool_calls_split_their_input_json() {
    let input = json!({"command": "echo hi > f.txt"});
    let server = FakeServer::with_script(vec![Reply::text_then_tools(
        "Running it.",
        vec![
            ToolCall::new("bash", input.clone()),
            ToolCall::new("view", json!({"file_path": "f.txt"})),
        ],
    )]);
    let data = data_json(&sse(&post_anthropic(&server, &anthropic_body()).body));
    let starts: Vec<&Value> = data
        .iter()
        .filter(|d| d["type"] == "content_block_start")
        .map(|d| &d["content_block"])
        .collect();
    assert_eq!(starts.len(), 3);
    assert_eq!(starts[1]["type"], "tool_use");
    assert_eq!(starts[1]["name"], "bash");
    assert_ne!(starts[1]["id"], starts[2]["id"], "distinct tool ids");
    let pieces: Vec<&str> = data
        .iter()
        .filter(|d| d["index"] == 1 && d["delta"]["type"] == "input_json_delta")
        .map(|d| d["delta"]["partial_json"].as_str().unwrap())
        .collect();
    assert!(pieces.len() >= 2, "split into pieces: {pieces:?}");
    let joined: Value = serde_json::from_str(&pieces.concat()).unwrap();
    assert_eq!(joined, input);
    let delta = data.iter().find(|d| d["type"] == "message_delta").unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
}

#[test]
fn openai_tool_call_reply_streams_fragments_usage_and_done() {
    let input = json!({"command": "echo hi > f.txt"});
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", input.clone()).with_usage(10, 5, 2048, 0),
    ]);
    let resp = post_openai(&server, &openai_body());
    assert_eq!(resp.status, 200);
    let events = sse(&resp.body);
    assert_eq!(events.last().unwrap().1, "[DONE]");
    assert!(
        events.iter().all(|(name, _)| name.is_empty()),
        "no event: lines"
    );
    let chunks = data_json(&events);
    let frags: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| {
            c["choices"][0]["delta"]["tool_calls"][0]
                .as_object()
                .map(|_| &c["choices"][0]["delta"]["tool_calls"][0])
        })
        .collect();
    assert!(frags.len() >= 3, "first fragment plus 2+ argument pieces");
    assert_eq!(frags[0]["function"]["name"], "bash");
    assert_eq!(frags[0]["type"], "function");
    assert!(frags[0]["id"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(frags.iter().all(|f| f["index"] == 0));
    assert!(frags[1..].iter().all(|f| f.get("id").is_none()));
    let args: String = frags
        .iter()
        .map(|f| f["function"]["arguments"].as_str().unwrap())
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&args).unwrap(), input);
    let finish = chunks
        .iter()
        .find(|c| !c["choices"][0]["finish_reason"].is_null())
        .unwrap();
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], 2058);
    assert_eq!(
        usage["usage"]["prompt_tokens_details"]["cached_tokens"],
        2048
    );
    assert_eq!(usage["usage"]["completion_tokens"], 5);
    assert!(
        chunks[..chunks.len() - 1]
            .iter()
            .all(|c| c["usage"].is_null())
    );
}

#[test]
fn requests_are_recorded_with_lowercase_headers_and_json_bodies() {
    let server = FakeServer::with_script(vec![Reply::text("one"), Reply::text("two")]);
    let first = anthropic_body();
    let second = openai_body();
    post_anthropic(&server, &first);
    post_openai(&server, &second);
    assert_eq!(server.request_count(), 2);
    let reqs = server.requests();
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].path, "/v1/messages");
    assert_eq!(reqs[0].dialect, Some(Dialect::Anthropic));
    assert_eq!(reqs[0].body, first);
    assert_eq!(reqs[0].header("X-API-Key"), Some("test-key"));
    assert_eq!(
        reqs[0].headers.get("anthropic-version").map(String::as_str),
        Some("2023-06-01")
    );
    assert_eq!(reqs[1].dialect, Some(Dialect::OpenAi));
    assert_eq!(reqs[1].header("authorization"), Some("Bearer test-key"));
    assert_eq!(server.last_body(), second);
    assert_eq!(reqs[1].system_text(), "sys");
    assert_eq!(reqs[1].user_texts(), ["hi"]);
    assert!(reqs.iter().all(|r| r.source == Source::Script));
}

#[test]
fn status_faults_return_their_status_headers_and_body() {
    let server = FakeServer::with_script(vec![
        Reply::status(500, "boom"),
        Reply::status(429, r#"{"error":"slow"}"#).header("retry-after", "1"),
        Reply::api_error(529, "overloaded_error", "Overloaded"),
        Reply::api_error(429, "insufficient_quota", "no money"),
    ]);
    let r = post_anthropic(&server, &anthropic_body());
    assert_eq!((r.status, r.body.as_str()), (500, "boom"));
    let r = post_openai(&server, &openai_body());
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.body, r#"{"error":"slow"}"#);
    let r = post_anthropic(&server, &anthropic_body());
    assert_eq!(r.status, 529);
    let body: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "overloaded_error");
    assert_eq!(r.header("request-id"), Some("req_fake_2"));
    let r = post_openai(&server, &openai_body());
    let body: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(body["error"]["code"], "insufficient_quota");
    assert_eq!(body["error"]["message"], "no money");
}

#[test]
fn cut_mid_stream_closes_without_the_final_event() {
    let server = FakeServer::with_script(vec![
        Reply::cut_mid_stream("partial answ"),
        Reply::cut_mid_stream("x"),
    ]);
    let r = post_anthropic(&server, &anthropic_body());
    assert_eq!(r.status, 200);
    assert_eq!(streamed_text(&data_json(&sse(&r.body))), "partial answ");
    assert!(!r.body.contains("message_stop"));
    assert!(!r.body.contains("message_delta"));
    assert!(!r.body.ends_with('\n'), "ends inside a line: {:?}", r.body);
    let r = post_openai(&server, &openai_body());
    assert!(!r.body.contains("[DONE]"));
    assert!(!r.body.contains("finish_reason\":\"stop"));
    assert!(!r.body.ends_with('\n'));
}

#[test]
fn cut_mid_stream_in_a_tool_call_drops_the_last_argument_piece() {
    let args = json!({"command": "rm -rf /tmp/never"});
    let reply = Reply::tool_call("bash", args.clone()).fault(crate::support::Fault::CutMidStream);
    let server = FakeServer::with_script(vec![reply.clone(), reply]);
    let r = post_openai(&server, &openai_body());
    let chunks = data_json(&sse(&r.body));
    let got: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert!(
        !got.is_empty() && serde_json::from_str::<Value>(&got).ok() != Some(args),
        "partial args {got:?}"
    );
    let r = post_anthropic(&server, &anthropic_body());
    let data = data_json(&sse(&r.body));
    assert!(data.iter().all(|d| d["type"] != "content_block_stop"));
}

#[test]
fn script_exhaustion_answers_500_and_is_counted() {
    let server = FakeServer::with_script(vec![Reply::text("only one")]);
    server.expect_exhaustion();
    assert_eq!(post_openai(&server, &openai_body()).status, 200);
    let r = post_openai(&server, &openai_body());
    assert_eq!(r.status, 500);
    assert!(r.body.contains(EXHAUSTED), "{}", r.body);
    assert_eq!(server.request_count(), 2);
    assert_eq!(server.exhausted_count(), 1);
    assert_eq!(server.last_request().source, Source::Exhausted);
    assert_eq!(server.remaining(), 0);
}

#[test]
fn fallback_answers_every_request_when_the_script_is_empty() {
    let server = FakeServer::always_text("ok");
    for _ in 0..3 {
        let data = data_json(&sse(&post_anthropic(&server, &anthropic_body()).body));
        assert_eq!(streamed_text(&data), "ok");
    }
    assert_eq!(server.exhausted_count(), 0);
    assert_eq!(server.last_request().source, Source::Fallback);
}

#[test]
fn routes_answer_non_model_paths_and_unknown_paths_get_404() {
    let server = FakeServer::start();
    let route = server.route_seq(
        "GET",
        "/v2/providers",
        vec![
            Reply::raw(
                200,
                vec![("content-type", "application/json"), ("etag", "\"v1\"")],
                "[]",
            ),
            Reply::raw(304, vec![], ""),
        ],
    );
    let r = send(&server, "GET", "/v2/providers", &[], "");
    assert_eq!(
        (r.status, r.body.as_str(), r.header("etag")),
        (200, "[]", Some("\"v1\""))
    );
    for _ in 0..2 {
        assert_eq!(
            send(&server, "GET", "/v2/providers?x=1", &[], "").status,
            304
        );
    }
    assert_eq!(send(&server, "GET", "/nope", &[], "").status, 404);
    let reqs = server.requests();
    assert_eq!(reqs[0].source, Source::Route(route));
    assert_eq!(reqs[3].source, Source::NotFound);
    assert_eq!(server.exhausted_count(), 0);
}

#[test]
fn route_when_takes_requests_out_of_the_script_order() {
    let server = FakeServer::with_script(vec![Reply::text("main answer")]);
    server.route_when(|r| r.tool_names().is_empty(), vec![Reply::text("A Title")]);
    let mut with_tools = openai_body();
    with_tools["tools"] = json!([{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]);
    let title = data_json(&sse(&post_openai(&server, &openai_body()).body));
    assert_eq!(streamed_text(&title), "A Title");
    let main = data_json(&sse(&post_openai(&server, &with_tools).body));
    assert_eq!(streamed_text(&main), "main answer");
}

#[test]
fn malformed_sse_sends_an_invalid_data_line_then_completes() {
    let server = FakeServer::with_script(vec![Reply::malformed_sse(), Reply::malformed_sse()]);
    for r in [
        post_anthropic(&server, &anthropic_body()),
        post_openai(&server, &openai_body()),
    ] {
        let events = sse(&r.body);
        let bad = events
            .iter()
            .filter(|(_, d)| d != "[DONE]" && serde_json::from_str::<Value>(d).is_err())
            .count();
        assert_eq!(bad, 1, "{}", r.body);
        assert!(r.body.contains("message_stop") || r.body.contains("[DONE]"));
    }
}

#[test]
fn stall_sends_one_event_then_silence() {
    let server = FakeServer::with_script(vec![Reply::stall(Duration::from_millis(300))]);
    let r = post_anthropic(&server, &anthropic_body());
    let events = sse(&r.body);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].0, "message_start");
}

#[test]
fn error_mid_stream_ends_with_an_error_event() {
    let server = FakeServer::with_script(vec![
        Reply::error_mid_stream("Hel", "overloaded_error", "Overloaded"),
        Reply::error_mid_stream("Hel", "server_error", "oops"),
    ]);
    let events = sse(&post_anthropic(&server, &anthropic_body()).body);
    let (name, data) = events.last().unwrap();
    assert_eq!(name, "error");
    assert!(data.contains("overloaded_error"));
    assert!(!events.iter().any(|(n, _)| n == "message_stop"));
    let chunks = data_json(&sse(&post_openai(&server, &openai_body()).body));
    let err = chunks.last().unwrap();
    assert_eq!(err["error"]["message"], "oops");
    assert_eq!(err["choices"][0]["finish_reason"], "error");
}

#[test]
fn invalid_tool_json_is_streamed_verbatim() {
    let server = FakeServer::with_script(vec![Reply::invalid_tool_json("bash", "{not json")]);
    let data = data_json(&sse(&post_anthropic(&server, &anthropic_body()).body));
    let args: String = data
        .iter()
        .filter_map(|d| d["delta"]["partial_json"].as_str())
        .collect();
    assert_eq!(args, "{not json");
}

#[test]
fn chunked_mode_frames_the_same_stream() {
    let server = FakeServer::with_script(vec![Reply::text("chunky")]);
    server.set_chunked(true);
    let r = post_openai(&server, &openai_body());
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(sse(&r.body).last().unwrap().1, "[DONE]");
}

#[test]
fn chunked_request_bodies_are_read() {
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    let body = openai_body().to_string();
    let (a, b) = body.split_at(10);
    let mut s = TcpStream::connect(server.addr()).unwrap();
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    assert_eq!(parse_response(&raw).status, 200);
    assert_eq!(server.last_body(), openai_body());
}

#[test]
fn violations_detect_openai_null_content_and_unmatched_tool_messages() {
    let server = FakeServer::always_text("ok");
    server.expect_violations();
    let call = json!({"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}});
    let mut good = openai_body();
    good["messages"] = json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "done"}]);
    post_openai(&server, &good);
    assert_eq!(server.violations(), Vec::<String>::new());

    let mut bad = good.clone();
    bad["messages"][1]["content"] = Value::Null;
    post_openai(&server, &bad);
    let v = server.violations();
    assert_eq!(v.len(), 1, "{v:#?}");
    assert!(
        v[0].starts_with("request #1:") && v[0].contains("content null"),
        "{v:#?}"
    );

    let mut orphan = good.clone();
    orphan["messages"][2]["tool_call_id"] = json!("call_zzz");
    post_openai(&server, &orphan);
    let v = server.violations();
    assert!(
        v.iter()
            .any(|m| m.contains("call_zzz") && m.contains("matches no preceding")),
        "{v:#?}"
    );
    assert!(
        v.iter()
            .any(|m| m.contains("\"call_1\"") && m.contains("no tool message")),
        "{v:#?}"
    );
}

#[test]
fn violations_detect_anthropic_mistakes() {
    let server = FakeServer::always_text("ok");
    server.expect_violations();
    let tool_use = json!({"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}});
    let mut good = anthropic_body();
    good["messages"] = json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}, tool_use]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"},
                                     {"type": "text", "text": "more"}]}]);
    post_anthropic(&server, &good);
    assert_eq!(server.violations(), Vec::<String>::new());

    // No anthropic-version header.
    send(
        &server,
        "POST",
        "/v1/messages",
        &[("x-api-key", "k")],
        &good.to_string(),
    );
    assert!(
        server
            .violations()
            .iter()
            .any(|m| m.contains("anthropic-version"))
    );

    let mut empty_text = good.clone();
    empty_text["messages"][1]["content"][0]["text"] = json!("  ");
    post_anthropic(&server, &empty_text);
    assert!(
        server
            .violations()
            .iter()
            .any(|m| m.starts_with("request #2") && m.contains("empty text block"))
    );

    let mut unanswered = good.clone();
    unanswered["messages"][2]["content"] = json!("I forgot the result");
    post_anthropic(&server, &unanswered);
    assert!(
        server
            .violations()
            .iter()
            .any(|m| m.starts_with("request #3") && m.contains("has no tool_result"))
    );
    assert_eq!(server.violations().len(), 3, "{:#?}", server.violations());
}

#[test]
#[should_panic(expected = "protocol violations:\nrequest #0: openai: messages is empty")]
fn a_dropped_server_fails_the_test_on_protocol_violations() {
    let server = FakeServer::always_text("ok");
    let mut body = openai_body();
    body["messages"] = json!([]);
    assert_eq!(post_openai(&server, &body).status, 200);
}

#[test]
#[should_panic(expected = "1 script replies left unused")]
fn a_dropped_server_fails_the_test_on_unused_replies() {
    let server = FakeServer::with_script(vec![Reply::text("one"), Reply::text("two")]);
    assert_eq!(post_openai(&server, &openai_body()).status, 200);
}

#[test]
#[should_panic(expected = "1 model requests after the script was exhausted")]
fn a_dropped_server_fails_the_test_on_exhaustion() {
    let server = FakeServer::start();
    assert_eq!(post_openai(&server, &openai_body()).status, 500);
}

/// The check on drop stays quiet while the test is already failing: a second panic during
/// unwinding would abort the whole test binary instead of reporting this failure.
#[test]
#[should_panic(expected = "the test's own failure")]
fn a_dropped_server_leaves_a_failing_test_its_own_message() {
    let server = FakeServer::with_script(vec![Reply::text("unused")]);
    assert_eq!(server.remaining(), 1);
    panic!("the test's own failure");
}

#[test]
fn test_env_builds_config_and_a_clean_command() {
    let server = FakeServer::start();
    let env = TestEnv::new();
    for d in [
        env.home(),
        env.config_dir(),
        env.data_dir(),
        env.xdg_cache(),
        env.project(),
    ] {
        assert!(d.is_dir(), "{}", d.display());
    }
    env.use_server(&server, Dialect::OpenAi);
    let cfg: Value = serde_json::from_str(
        &std::fs::read_to_string(env.config_dir().join("crush.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(cfg["providers"]["fake"]["type"], "openai-compat");
    assert_eq!(
        cfg["providers"]["fake"]["base_url"],
        format!("http://127.0.0.1:{}/v1", server.port())
    );
    assert_eq!(cfg["models"]["large"]["model"], "fake-model");
    let a = env.config_for(&server, Dialect::Anthropic);
    assert_eq!(a["providers"]["fake"]["type"], "anthropic");
    assert_eq!(a["providers"]["fake"]["base_url"], server.url());

    let cmd = env.crush();
    assert_eq!(cmd.get_current_dir(), Some(env.project().as_path()));
    let envs: std::collections::HashMap<String, Option<String>> = cmd
        .get_envs()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.map(|v| v.to_string_lossy().into_owned()),
            )
        })
        .collect();
    let get = |k: &str| envs.get(k).cloned().flatten();
    assert_eq!(get("HOME"), Some(env.home().display().to_string()));
    assert_eq!(
        get("CRUSH_GLOBAL_CONFIG"),
        Some(env.config_dir().display().to_string())
    );
    assert_eq!(
        get("CRUSH_GLOBAL_DATA"),
        Some(env.data_dir().display().to_string())
    );
    assert_eq!(
        get("XDG_DATA_HOME"),
        Some(env.xdg_data().display().to_string())
    );
    assert_eq!(
        get("CRUSH_DISABLE_PROVIDER_AUTO_UPDATE").as_deref(),
        Some("1")
    );
    for (k, _) in std::env::vars() {
        if k.ends_with("_API_KEY") || k.to_ascii_lowercase().ends_with("_proxy") {
            assert_eq!(envs.get(&k), Some(&None), "{k} must be removed");
        }
    }
}

#[test]
fn run_command_captures_output_and_kills_on_timeout() {
    use crate::support::env::run_command;
    let env = TestEnv::new();
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", "cat; echo err >&2; exit 3"])
        .current_dir(env.project());
    let out = run_command(cmd, Some("from stdin"), Duration::from_secs(30));
    assert_eq!(
        (out.code, out.stdout.as_str(), out.stderr.as_str()),
        (3, "from stdin", "err\n")
    );

    let mut slow = std::process::Command::new("sh");
    slow.args(["-c", "echo started; sleep 30"]);
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_command(slow, None, Duration::from_millis(300))
    }))
    .expect_err("must time out");
    let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("killed") && msg.contains("started"), "{msg}");
}

/// The product's HTTP client (ureq 3) reads close-delimited and chunked streams and error bodies.
#[test]
fn ureq_reads_the_fake_server_streams() {
    let server = FakeServer::with_script(vec![
        Reply::text("plain"),
        Reply::text("chunked"),
        Reply::api_error(429, "rate_limit_error", "slow").header("retry-after", "1"),
    ]);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let url = format!("{}/v1/messages", server.anthropic_base_url());
    let post = || {
        agent
            .post(&url)
            .header("x-api-key", "test-key")
            .header("anthropic-version", "2023-06-01")
            .header("content-type", "application/json")
            .send(anthropic_body().to_string())
            .expect("request")
    };
    let body = post().into_body().read_to_string().unwrap();
    assert_eq!(streamed_text(&data_json(&sse(&body))), "plain");
    server.set_chunked(true);
    let body = post().into_body().read_to_string().unwrap();
    assert_eq!(streamed_text(&data_json(&sse(&body))), "chunked");
    let resp = post();
    assert_eq!(resp.status().as_u16(), 429);
    assert_eq!(resp.headers()["retry-after"], "1");
    assert!(
        resp.into_body()
            .read_to_string()
            .unwrap()
            .contains("rate_limit_error")
    );
}
