//! Amazon Bedrock in the fake server: a reply's Anthropic events framed as an AWS event stream
//! (each a `chunk` whose `bytes` are the event's JSON in base64), the faults of the other
//! dialects in event-stream form (a frame cut in half, a frame with a bad checksum, an exception
//! message), and the check of the SigV4 signature or bearer key a request arrives with.

use super::eventstream::{base64, encode};
use super::reply::{Events, Fault, Step, Stream};
use super::sigv4;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// What a Bedrock request must be signed with.
#[derive(Clone, Debug)]
pub(crate) enum Auth {
    /// SigV4 with this key pair (and session token), for this region.
    SigV4 {
        access_key_id: String,
        secret: String,
        session_token: Option<String>,
        region: String,
    },
    /// `authorization: Bearer KEY`.
    Bearer(String),
    /// No authorization header at all.
    None,
}

/// One Anthropic event (as `{"type": …}` JSON) framed as Bedrock frames it.
pub(crate) fn chunk(event: &Value) -> Vec<u8> {
    let payload = json!({"bytes": base64(event.to_string().as_bytes()), "p": "abcdefgh"});
    encode(
        &[
            (":event-type", "chunk"),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        payload.to_string().as_bytes(),
    )
}

/// An exception message, as Bedrock sends one mid-stream.
pub(crate) fn exception(kind: &str, message: &str) -> Vec<u8> {
    encode(
        &[
            (":exception-type", kind),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        json!({ "message": message }).to_string().as_bytes(),
    )
}

/// The JSON of an SSE event `event: x\ndata: {...}\n\n`.
fn event_json(sse: &str) -> Value {
    let data = sse
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or("null");
    serde_json::from_str(data).unwrap_or(Value::Null)
}

/// The frames of a reply, with its faults.
pub(crate) fn steps(s: &Stream, e: Events) -> (Vec<Step>, bool) {
    let Events {
        events,
        last_args_piece,
        tail,
    } = e;
    let mut frames: Vec<Vec<u8>> = events
        .iter()
        .map(|ev| {
            let mut v = event_json(ev);
            if v["type"] == "message_stop" {
                let u = s.usage.unwrap_or(super::Usage::new(0, 0, 0, 0));
                v["amazon-bedrock-invocationMetrics"] = json!({
                    "inputTokenCount": u.input, "outputTokenCount": u.output,
                    "invocationLatency": 120, "firstByteLatency": 40});
            }
            chunk(&v)
        })
        .collect();
    let bytes = |f: Vec<Vec<u8>>| f.into_iter().map(Step::Bytes).collect::<Vec<_>>();
    match &s.fault {
        None => (bytes(frames), true),
        Some(Fault::CutMidStream) => {
            frames.truncate(tail);
            if let Some(i) = last_args_piece
                && i + 1 == frames.len()
            {
                frames.pop();
            }
            // Half of a frame, then the connection closes.
            let half = chunk(&json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": "cut"}}));
            frames.push(half[..half.len() / 2].to_vec());
            (bytes(frames), false)
        }
        Some(Fault::NoFinish) => {
            frames.truncate(tail);
            (bytes(frames), true)
        }
        Some(Fault::Malformed) => {
            // A frame whose message checksum is wrong; the rest follows.
            let mut bad = chunk(&json!({"type": "ping"}));
            let n = bad.len();
            bad[n - 5] ^= 0x55;
            frames.insert(1, bad);
            (bytes(frames), true)
        }
        Some(Fault::Stall(d)) => {
            let mut steps = bytes(frames.into_iter().take(1).collect());
            steps.push(Step::Sleep(*d));
            (steps, false)
        }
        Some(Fault::StallAfterContent(d)) => {
            frames.truncate(tail);
            let mut steps = bytes(frames);
            steps.push(Step::Sleep(*d));
            (steps, false)
        }
        Some(Fault::ErrorEvent { kind, message }) => {
            frames.truncate(tail);
            frames.push(exception(kind, message));
            (bytes(frames), true)
        }
    }
}

/// What is wrong with a Bedrock request: its body (Bedrock's Messages form), and its
/// authorization against `auth` (the signature recomputed from what arrived).
pub(crate) fn check(
    method: &str,
    path: &str,
    headers: &BTreeMap<String, String>,
    body: &[u8],
    auth: Option<&Auth>,
) -> Vec<String> {
    let mut v = Vec::new();
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    if json["anthropic_version"] != "bedrock-2023-05-31" {
        v.push("bedrock: anthropic_version is not bedrock-2023-05-31".into());
    }
    for k in ["model", "stream"] {
        if json.get(k).is_some() {
            v.push(format!("bedrock: the body carries `{k}`"));
        }
    }
    if !json["max_tokens"].is_u64() || !json["messages"].is_array() {
        v.push("bedrock: max_tokens or messages missing".into());
    }
    let authz = headers.get("authorization").map(String::as_str);
    match auth {
        None => {}
        Some(Auth::None) if authz.is_some() => {
            v.push("bedrock: an authorization header was sent".into());
        }
        Some(Auth::Bearer(k)) if authz != Some(&format!("Bearer {k}")) => {
            v.push(format!("bedrock: expected bearer key, got {authz:?}"));
        }
        Some(Auth::None | Auth::Bearer(_)) => {}
        Some(Auth::SigV4 {
            access_key_id,
            secret,
            session_token,
            region,
        }) => v.extend(check_sigv4(
            method,
            path,
            headers,
            body,
            (access_key_id, secret, session_token.as_deref(), region),
        )),
    }
    v
}

fn check_sigv4(
    method: &str,
    path: &str,
    headers: &BTreeMap<String, String>,
    body: &[u8],
    (akid, secret, token, region): (&str, &str, Option<&str>, &str),
) -> Vec<String> {
    let mut v = Vec::new();
    let Some((got_akid, scope, names, sig)) = headers
        .get("authorization")
        .and_then(|a| sigv4::parse_authorization(a))
    else {
        return vec![format!(
            "sigv4: no AWS4-HMAC-SHA256 authorization header ({:?})",
            headers.get("authorization")
        )];
    };
    let date = headers.get("x-amz-date").cloned().unwrap_or_default();
    if got_akid != akid {
        v.push(format!("sigv4: access key {got_akid}, expected {akid}"));
    }
    let want_scope = sigv4::scope(&date, region, "bedrock");
    if scope != want_scope {
        v.push(format!("sigv4: scope {scope}, expected {want_scope}"));
    }
    if headers.get("x-amz-security-token").map(String::as_str) != token {
        v.push("sigv4: x-amz-security-token does not match the session token".into());
    }
    for must in ["host", "x-amz-date"] {
        if !names.iter().any(|n| n == must) {
            v.push(format!("sigv4: {must} is not signed"));
        }
    }
    if token.is_some() && !names.iter().any(|n| n == "x-amz-security-token") {
        v.push("sigv4: the session token is not signed".into());
    }
    let signed: Vec<(String, String)> = names
        .iter()
        .map(|n| (n.clone(), headers.get(n).cloned().unwrap_or_default()))
        .collect();
    let (p, q) = path.split_once('?').unwrap_or((path, ""));
    let (canonical, _) = sigv4::canonical_request(method, p, q, &signed, body);
    let want = sigv4::signature(
        secret,
        &scope,
        &sigv4::string_to_sign(&date, &scope, &canonical),
    );
    if sig != want {
        v.push(format!(
            "sigv4: the signature does not match the request as it arrived; canonical request:\n{canonical}"
        ));
    }
    v
}
