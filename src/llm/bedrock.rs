//! Amazon Bedrock: Anthropic models through `InvokeModelWithResponseStream` (crush(1)
//! CONFIGURATION, Amazon Bedrock). The request body is the Messages body without `model` and
//! `stream`, with Bedrock's `anthropic_version`; the model id goes in the path. The reply is an AWS
//! event stream whose `chunk` events carry, base64-encoded, the same events the Messages API
//! streams, so the Anthropic accumulator builds the response. Requests are signed with SigV4, or
//! carry a Bedrock API key as a bearer token.

use super::anthropic;
use super::dialect::Accumulator as _;
use super::retry::{Failure, classify_http};
use super::sse::SseEvent;
use super::{ChatRequest, Endpoint, LlmError, RetryPolicy, StreamEvent};
use crate::aws::{self, eventstream};
use serde_json::{Value, json};
use std::time::SystemTime;

pub(crate) const ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";

/// The cross-region inference profile prefixes a model id may carry, with the region calls
/// go to when the configured one lies outside that geography.
const PROFILES: &[(&str, &str)] = &[
    ("global.", ""),
    ("us-gov.", "us-gov-west-1"),
    ("us.", "us-east-1"),
    ("eu.", "eu-west-1"),
    ("apac.", "ap-southeast-1"),
    ("jp.", "ap-northeast-1"),
    ("au.", "ap-southeast-2"),
    ("ca.", "ca-central-1"),
];

/// Whether `region` lies in the geography of inference profile `prefix`.
fn in_geography(prefix: &str, region: &str) -> bool {
    match prefix {
        "global." => true,
        "us-gov." => region.starts_with("us-gov-"),
        "us." => region.starts_with("us-") && !region.starts_with("us-gov-"),
        "eu." => region.starts_with("eu-"),
        "apac." | "jp." | "au." => region.starts_with("ap-"),
        "ca." => region.starts_with("ca-"),
        _ => true,
    }
}

/// The inference-profile prefix of the region's geography, for a bare model id (as Go Crush
/// adds it).
fn prefix_for(region: &str) -> &'static str {
    match region {
        r if r.starts_with("us-gov-") => "us-gov.",
        r if r.starts_with("us-") || r == "ca-central-1" => "us.",
        r if r.starts_with("eu-") => "eu.",
        "ap-northeast-1" => "jp.",
        "ap-southeast-2" => "au.",
        r if r.starts_with("ap-") => "apac.",
        _ => "global.",
    }
}

/// The model id sent and the region it goes to. An id with an inference-profile prefix is
/// kept, and called in a region of its geography (the configured one when it is); an ARN is
/// kept; a bare id gets the prefix of the region's geography.
pub(crate) fn model_and_region(model: &str, region: &str) -> (String, String) {
    if model.starts_with("arn:") {
        return (model.to_string(), region.to_string());
    }
    for (prefix, home) in PROFILES {
        if model.starts_with(prefix) {
            let r = if in_geography(prefix, region) || home.is_empty() {
                region
            } else {
                home
            };
            return (model.to_string(), r.to_string());
        }
    }
    (format!("{}{model}", prefix_for(region)), region.to_string())
}

/// The region a Bedrock provider calls when neither its settings nor the environment name one:
/// the catalog's `bedrock-europe` is in Europe, every other in `us-east-1`.
pub(crate) fn default_region(provider_id: &str) -> &'static str {
    if provider_id == "bedrock-europe" {
        "eu-west-1"
    } else {
        "us-east-1"
    }
}

/// What one call sends: the URL, the region it is signed for, and the model id in the path.
pub(crate) struct Target {
    pub url: String,
    pub region: String,
    pub model: String,
}

/// The provider's URL (its `base_url`, AWS's endpoint variables) or Bedrock's own in the region.
pub(crate) fn target(ep: &Endpoint, model: &str) -> Target {
    let settings = ep.aws.as_ref();
    let configured = settings.map_or_else(|| "us-east-1".to_string(), aws::Settings::region);
    let (model, region) = model_and_region(model, &configured);
    let base = if ep.base_url.trim().is_empty() {
        format!("https://bedrock-runtime.{region}.amazonaws.com")
    } else {
        ep.base_url.trim().trim_end_matches('/').to_string()
    };
    let url = format!(
        "{base}/model/{}/invoke-with-response-stream",
        aws::sigv4::uri_encode(model.as_bytes(), false)
    );
    Target { url, region, model }
}

/// The request body: the Messages body without `model` and `stream`, with Bedrock's
/// `anthropic_version`, and the `anthropic-beta` header values (if any) and the request's own
/// beta (interleaved thinking) as `anthropic_beta`.
pub(crate) fn build_request(req: &ChatRequest, ep: &Endpoint) -> Value {
    let mut body = anthropic::build_request(req);
    if let Some(o) = body.as_object_mut() {
        o.remove("model");
        o.remove("stream");
        o.insert("anthropic_version".into(), json!(ANTHROPIC_VERSION));
        let mut betas: Vec<&str> = ep
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("anthropic-beta"))
            .flat_map(|(_, v)| v.split(','))
            .map(str::trim)
            .filter(|b| !b.is_empty())
            .collect();
        if let Some(b) = anthropic::beta(req).filter(|b| !betas.contains(b)) {
            betas.push(b);
        }
        if !betas.is_empty() {
            o.insert("anthropic_beta".into(), json!(betas));
        }
    }
    // Bedrock takes images as base64 only: an image by URL is named instead.
    if let Some(msgs) = body["messages"].as_array_mut() {
        for block in msgs
            .iter_mut()
            .filter_map(|m| m["content"].as_array_mut())
            .flatten()
        {
            if block["type"] == "image" && block["source"]["type"] == "url" {
                let url = block["source"]["url"].as_str().unwrap_or("").to_string();
                *block = json!({"type": "text",
                    "text": format!("[Image {url}: not sent, Bedrock takes attached images only]")});
            }
        }
    }
    body
}

/// The provider's fixed headers (the bearer key, when it has one); the signature is added per
/// attempt by `sign`.
pub(crate) fn headers(ep: &Endpoint) -> Vec<(String, String)> {
    let mut h = vec![(
        "accept".to_string(),
        "application/vnd.amazon.eventstream".to_string(),
    )];
    if let Some(k) = ep.api_key.as_deref().filter(|k| !k.is_empty()) {
        h.push(("authorization".into(), format!("Bearer {k}")));
    }
    h
}

/// Whether the request is signed with the credentials of the environment and profile.
pub(crate) fn signs(ep: &Endpoint) -> bool {
    ep.api_key.as_deref().is_none_or(str::is_empty)
        && ep.aws.as_ref().is_some_and(|s| s.credentials_allowed)
}

/// Headers that sign one attempt now, and where the credentials came from.
pub(crate) fn sign(
    url: &str,
    region: &str,
    body: &[u8],
    settings: &aws::Settings,
) -> Result<(Vec<(String, String)>, String), Failure> {
    let r = aws::credentials::resolve(&settings.limits, &settings.env).map_err(cred_failure)?;
    let signed = [("content-type".to_string(), "application/json".to_string())];
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let headers = aws::sigv4::sign(
        &aws::sigv4::Request {
            method: "POST",
            url,
            headers: &signed,
            body,
        },
        &r.creds,
        region,
        "bedrock",
        &aws::amz_date(now),
    );
    Ok((headers, r.source))
}

/// Credentials that could not be had: not retried, but `refreshable` ones may be after the
/// provider's `aws_auth_refresh`.
pub(crate) fn cred_failure(e: aws::CredError) -> Failure {
    Failure::fatal(LlmError::Auth {
        message: e.message,
        refreshable: e.refreshable,
    })
}

/// AWS error types that say the credentials themselves were refused or have expired.
const CREDENTIAL_ERRORS: &[&str] = &[
    "UnrecognizedClientException",
    "ExpiredTokenException",
    "InvalidSignatureException",
    "IncompleteSignatureException",
    "MissingAuthenticationTokenException",
    "InvalidClientTokenId",
    "AccessDeniedException",
];

/// The AWS error type of a reply: the `x-amzn-errortype` header (`Type:namespace`), else the
/// body's `__type`.
fn error_type(headers: &[(String, String)], body: &str) -> Option<String> {
    if let Some(t) = super::retry::header(headers, "x-amzn-errortype") {
        return Some(t.split(':').next().unwrap_or(t).to_string());
    }
    let v: Value = serde_json::from_str(body.trim()).ok()?;
    let t = v.get("__type").and_then(Value::as_str)?;
    Some(t.rsplit('#').next().unwrap_or(t).to_string())
}

/// How the message of a reply refusing an unknown model id begins (Bedrock answers 400 or 404).
pub(crate) const NO_MODEL: &str = "Amazon Bedrock has no model";

/// An error reply, said in Bedrock's terms: which model id went to which region, whose
/// credentials were refused. 429 and 5xx are retried as usual; refused credentials may be
/// refreshed once.
pub(crate) fn classify(
    status: u16,
    headers: &[(String, String)],
    body: &str,
    policy: &RetryPolicy,
    call: &CallInfo,
) -> Failure {
    let mut f = classify_http(status, headers, body, policy, SystemTime::now());
    let kind = error_type(headers, body);
    let message = serde_json::from_str::<Value>(body.trim())
        .ok()
        .and_then(|v| {
            v.get("message")
                .or_else(|| v.get("Message"))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| super::retry::snippet(body, 200));
    let what = match &kind {
        Some(k) => format!("{k}: {message}"),
        None => message,
    };
    let request_id = super::retry::header(headers, "x-amzn-requestid").map(str::to_string);
    let refused = matches!(status, 401 | 403)
        && kind
            .as_deref()
            .is_none_or(|k| CREDENTIAL_ERRORS.contains(&k));
    let text = if refused {
        format!(
            "Amazon Bedrock refused {} ({what})",
            call.credentials.as_deref().map_or_else(
                || "the request".to_string(),
                |c| format!("the credentials from {c}")
            )
        )
    } else if matches!(status, 400 | 404)
        && (what.contains("model identifier")
            || kind.as_deref() == Some("ResourceNotFoundException"))
    {
        format!(
            "{NO_MODEL} '{}' in region {} ({what})",
            call.model, call.region
        )
    } else {
        format!("Amazon Bedrock: {what}")
    };
    if let LlmError::Http {
        message,
        request_id: rid,
        ..
    } = &mut f.error
    {
        *message = text.clone();
        if rid.is_none() {
            *rid = request_id;
        }
    }
    if refused {
        f.error = LlmError::Auth {
            message: format!("HTTP {status}: {text}"),
            refreshable: status == 403 || status == 401,
        };
        f.retryable = false;
    }
    f
}

/// What the messages of one call name.
pub(crate) struct CallInfo {
    pub model: String,
    pub region: String,
    /// Where the signing credentials came from (None: a bearer key, or none).
    pub credentials: Option<String>,
}

/// One Bedrock call's signer: SigV4 with the environment's credentials (when no key is sent),
/// Bedrock's reading of refusals, and the provider's `aws_auth_refresh`.
pub(crate) struct Call {
    pub url: String,
    info: CallInfo,
    /// Sign each attempt with these settings' credentials (None: a bearer key, or nothing).
    signer: Option<aws::Settings>,
    /// The command run once when the credentials are refused or expired.
    refresh: Option<aws::Settings>,
}

impl Call {
    pub(crate) fn new(ep: &Endpoint, model: &str) -> Call {
        let t = target(ep, model);
        Call {
            url: t.url,
            info: CallInfo {
                model: t.model,
                region: t.region,
                credentials: None,
            },
            refresh: ep.aws.clone().filter(|s| s.auth_refresh.is_some()),
            signer: ep.aws.clone().filter(|_| signs(ep)),
        }
    }
}

impl super::dialect::Signer for Call {
    fn sign(&self, url: &str, body: &[u8]) -> Result<super::dialect::Signed, Failure> {
        match &self.signer {
            Some(settings) => {
                let (headers, source) = sign(url, &self.info.region, body, settings)?;
                Ok((headers, Some(source)))
            }
            None => Ok((Vec::new(), None)),
        }
    }

    fn classify(&self, reply: &super::dialect::ErrorReply, policy: &RetryPolicy) -> Failure {
        let info = CallInfo {
            credentials: reply.credentials.clone(),
            model: self.info.model.clone(),
            region: self.info.region.clone(),
        };
        classify(reply.status, reply.headers, reply.body, policy, &info)
    }

    fn refresh(
        &self,
        err: &LlmError,
        tx: &crossbeam_channel::Sender<StreamEvent>,
    ) -> Option<Result<(), LlmError>> {
        let settings = self.refresh.as_ref()?;
        Some(refresh(settings, err, tx))
    }
}

/// Turns event-stream messages into the Anthropic events inside them.
pub(crate) struct Frames {
    acc: anthropic::Accumulator,
    /// A guardrail or Bedrock's content filter stopped the reply.
    filtered: bool,
}

/// Whether an event says Bedrock's guardrails or content filters stopped the reply
/// (`amazon-bedrock-guardrailAction: INTERVENED`, stop reason `guardrail_intervened` or
/// `content_filtered`).
fn filtered(ev: &Value) -> bool {
    let stop = ev
        .get("delta")
        .and_then(|d| d.get("stop_reason"))
        .or_else(|| ev.get("stopReason"))
        .or_else(|| ev.get("stop_reason"))
        .and_then(Value::as_str);
    matches!(stop, Some("guardrail_intervened" | "content_filtered"))
        || ev
            .get("amazon-bedrock-guardrailAction")
            .and_then(Value::as_str)
            == Some("INTERVENED")
}

impl Frames {
    pub(crate) fn new(limit: usize) -> Frames {
        Frames {
            acc: anthropic::Accumulator::with_limit(limit),
            filtered: false,
        }
    }

    /// Takes one message; returns whether the reply is complete.
    pub(crate) fn feed(
        &mut self,
        m: &eventstream::Message,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, Failure> {
        match m.header(":message-type") {
            Some("event") | None => {}
            Some("exception") => {
                let kind = m.header(":exception-type").unwrap_or("exception");
                let v: Value = serde_json::from_slice(&m.payload).unwrap_or(Value::Null);
                let msg = v
                    .get("message")
                    .or_else(|| v.get("Message"))
                    .and_then(Value::as_str)
                    .map_or_else(
                        || String::from_utf8_lossy(&m.payload).into_owned(),
                        str::to_string,
                    );
                return Err(exception(kind, &msg));
            }
            Some(other) => {
                let code = m.header(":error-code").unwrap_or(other);
                let msg = m.header(":error-message").unwrap_or("");
                return Err(exception(code, msg));
            }
        }
        if m.header(":event-type").is_some_and(|t| t != "chunk") {
            return Ok(false);
        }
        let v: Value = serde_json::from_slice(&m.payload).map_err(|e| {
            Failure::retry(LlmError::Protocol(format!(
                "a Bedrock chunk is not JSON: {e}"
            )))
        })?;
        let Some(b64) = v.get("bytes").and_then(Value::as_str) else {
            return Ok(false);
        };
        let inner = super::base64_decode(b64)
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| {
                Failure::retry(LlmError::Protocol(
                    "a Bedrock chunk's bytes are not base64 of UTF-8 text".into(),
                ))
            })?;
        let ev: Value = serde_json::from_str(&inner).unwrap_or(Value::Null);
        let ty = ev.get("type").and_then(Value::as_str).unwrap_or("");
        self.filtered |= filtered(&ev);
        // Bedrock's own count arrives with message_stop; it stands in only when the events
        // carried no usage.
        if ty == "message_stop"
            && !self.acc.has_usage()
            && let Some(m) = ev.get("amazon-bedrock-invocationMetrics")
        {
            let n = |k: &str| m.get(k).cloned().unwrap_or(Value::Null);
            let usage = json!({"type": "message_delta", "delta": {}, "usage": {
                "input_tokens": n("inputTokenCount"),
                "output_tokens": n("outputTokenCount"),
                "cache_read_input_tokens": n("cacheReadInputTokenCount"),
                "cache_creation_input_tokens": n("cacheWriteInputTokenCount"),
            }});
            let usage = strip_nulls(usage);
            self.acc.feed(
                &SseEvent {
                    event: "message_delta".into(),
                    data: usage.to_string(),
                    id: None,
                },
                out,
            )?;
        }
        self.acc.feed(
            &SseEvent {
                event: ty.to_string(),
                data: inner,
                id: None,
            },
            out,
        )
    }

    pub(crate) fn finish(self) -> Result<super::Response, Failure> {
        let mut r = self.acc.finish()?;
        if self.filtered {
            r.finish = super::FinishReason::ContentFilter;
        }
        Ok(r)
    }
}

fn strip_nulls(mut v: Value) -> Value {
    if let Some(u) = v.get_mut("usage").and_then(Value::as_object_mut) {
        u.retain(|_, x| !x.is_null());
    }
    v
}

/// An exception the stream carried: throttling and the service's own failures are retried.
fn exception(kind: &str, msg: &str) -> Failure {
    let k = kind.to_ascii_lowercase();
    // Throttling, quotas, the service's and the model's own failures, and anything new: retried.
    let retryable = ![
        "validation",
        "accessdenied",
        "notfound",
        "unrecognizedclient",
        "expired",
    ]
    .iter()
    .any(|w| k.contains(w));
    let f = LlmError::Protocol(format!("Amazon Bedrock {kind}: {msg}"));
    if retryable {
        Failure::retry(f)
    } else {
        Failure::fatal(f)
    }
}

/// A frame that could not be read: a cut or corrupted stream is retried like a cut SSE stream.
pub(crate) fn frame_failure(e: eventstream::FrameError) -> Result<Failure, std::io::Error> {
    use eventstream::FrameError as F;
    Ok(match e {
        F::Truncated => Failure::retry(LlmError::truncated("the end of an event-stream frame")),
        F::Crc { .. } | F::Malformed(_) => Failure::retry(LlmError::Protocol(e.to_string())),
        F::TooLarge { .. } => Failure::fatal(LlmError::Protocol(e.to_string())),
        F::Io(io) => return Err(io),
    })
}

/// Runs the provider's `aws_auth_refresh` after `err` (refused or expired credentials): the
/// first https URL it prints (where to sign in) is passed on as a notice; when it succeeds the
/// credentials are looked up afresh. Err: the command failed, said with `err`.
pub(crate) fn refresh(
    settings: &aws::Settings,
    err: &LlmError,
    tx: &crossbeam_channel::Sender<StreamEvent>,
) -> Result<(), LlmError> {
    let Some(cmd) = settings.auth_refresh.as_deref() else {
        return Err(err.clone());
    };
    let _ = tx.send(StreamEvent::Notice(format!(
        "{err}; running aws_auth_refresh: {cmd}"
    )));
    let mut spec = crate::proc::Spec::shell(cmd, &settings.cwd);
    spec.env = settings.env.vars();
    spec.timeout = Some(settings.refresh_timeout);
    spec.merge_output = true;
    spec.output_cap = 64 * 1024;
    let mut seen = String::new();
    let mut told = false;
    let outcome = crate::proc::run_streaming(&spec, &mut |chunk| {
        if told {
            return;
        }
        seen.push_str(&String::from_utf8_lossy(chunk));
        if let Some(i) = seen.find("https://") {
            let url: String = seen[i..]
                .chars()
                .take_while(|c| !c.is_whitespace())
                .collect();
            if url.len() < seen.len() - i {
                told = true;
                let _ = tx.send(StreamEvent::Notice(format!(
                    "to sign in to AWS, open {url}"
                )));
            }
        }
    });
    let fail = |why: String| LlmError::Auth {
        message: format!("{err}; aws_auth_refresh ({cmd}) {why}"),
        refreshable: false,
    };
    match outcome {
        Err(e) => Err(fail(format!("could not start: {e}"))),
        Ok(o) if o.timed_out => Err(fail(format!(
            "did not finish within {} s",
            settings.refresh_timeout.as_secs()
        ))),
        Ok(o) if !o.success() => {
            let text = o.stdout_text();
            let last = text
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            Err(fail(format!(
                "failed (exit {}): {}",
                o.code(),
                super::retry::snippet(last, 200)
            )))
        }
        Ok(_) => {
            aws::credentials::forget();
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::eventstream::encode;
    use crate::llm::{FinishReason, Message, Part};

    /// A `chunk` event carrying `ev` as Bedrock frames it.
    pub(crate) fn chunk(ev: &Value) -> Vec<u8> {
        let b64 = eventstream::base64(ev.to_string().as_bytes());
        let payload = json!({"bytes": b64, "p": "abc"}).to_string();
        encode(
            &[
                (":event-type", "chunk"),
                (":content-type", "application/json"),
                (":message-type", "event"),
            ],
            payload.as_bytes(),
        )
    }

    fn feed_all(frames: &[Vec<u8>]) -> (Result<crate::llm::Response, Failure>, Vec<StreamEvent>) {
        let bytes: Vec<u8> = frames.concat();
        let mut d = eventstream::Decoder::new(&bytes[..], 1 << 20);
        let mut f = Frames::new(1 << 20);
        let mut out = Vec::new();
        while let Some(m) = d.next_message().unwrap() {
            match f.feed(&m, &mut out) {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => return (Err(e), out),
            }
        }
        (f.finish(), out)
    }

    fn text_reply(usage: bool) -> Vec<Vec<u8>> {
        let mut start = json!({"type":"message_start","message":{"id":"m","model":"claude"}});
        if usage {
            start["message"]["usage"] =
                json!({"input_tokens": 12, "cache_read_input_tokens": 30, "output_tokens": 1});
        }
        let mut stop = json!({"type":"message_stop","amazon-bedrock-invocationMetrics":{
            "inputTokenCount": 7, "outputTokenCount": 5, "invocationLatency": 100, "firstByteLatency": 50}});
        if usage {
            stop["amazon-bedrock-invocationMetrics"]["inputTokenCount"] = json!(999);
        }
        let mut delta = json!({"type":"message_delta","delta":{"stop_reason":"end_turn"}});
        if usage {
            delta["usage"] = json!({"output_tokens": 4});
        }
        vec![
            chunk(&start),
            chunk(
                &json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            ),
            chunk(
                &json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}),
            ),
            chunk(&json!({"type":"content_block_stop","index":0})),
            chunk(&delta),
            chunk(&stop),
        ]
    }

    #[test]
    fn a_guardrail_or_content_filter_stop_is_a_content_filter_finish() {
        use crate::llm::FinishReason;
        assert_eq!(
            feed_all(&text_reply(false)).0.unwrap().finish,
            FinishReason::EndTurn
        );
        for stop in [
            json!({"type":"message_delta","delta":{"stop_reason":"guardrail_intervened"}}),
            json!({"type":"message_delta","delta":{"stop_reason":"content_filtered"}}),
            json!({"type":"message_delta","delta":{"stop_reason":"refusal"}}),
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},
                   "amazon-bedrock-guardrailAction":"INTERVENED"}),
        ] {
            let mut frames = text_reply(false);
            frames[4] = chunk(&stop);
            let r = feed_all(&frames).0.unwrap();
            assert_eq!(r.finish, FinishReason::ContentFilter, "{stop}");
        }
    }

    #[test]
    fn chunks_carry_anthropic_events_and_usage_maps_honestly() {
        let (r, out) = feed_all(&text_reply(true));
        let r = r.unwrap();
        assert_eq!(
            r.parts,
            vec![Part::Text {
                text: "Hello".into()
            }]
        );
        assert_eq!(r.finish, FinishReason::EndTurn);
        assert!(matches!(&out[0], StreamEvent::TextDelta(t) if t == "Hello"));
        // The events' own counts win over Bedrock's metrics.
        let u = r.usage.unwrap();
        assert_eq!((u.input, u.output, u.cache_read), (12, 4, 30));
        // Without them, Bedrock's invocation metrics are the usage.
        let u = feed_all(&text_reply(false)).0.unwrap().usage.unwrap();
        assert_eq!(
            (u.input, u.output, u.cache_read, u.cache_write),
            (7, 5, 0, 0)
        );
    }

    #[test]
    fn exceptions_are_clear_and_throttling_is_retried() {
        let ex = |kind: &str, msg: &str| {
            encode(
                &[
                    (":exception-type", kind),
                    (":content-type", "application/json"),
                    (":message-type", "exception"),
                ],
                json!({"message": msg}).to_string().as_bytes(),
            )
        };
        let mut frames = text_reply(true);
        frames.truncate(3);
        frames.push(ex("throttlingException", "Too many requests, please wait."));
        let (r, out) = feed_all(&frames);
        let f = r.unwrap_err();
        assert!(f.retryable);
        assert_eq!(
            f.error.to_string(),
            "unexpected reply from the model server: Amazon Bedrock throttlingException: Too many requests, please wait."
        );
        assert_eq!(out.len(), 1);
        let f = feed_all(&[ex("validationException", "bad input")])
            .0
            .unwrap_err();
        assert!(!f.retryable);
        let err = encode(
            &[
                (":message-type", "error"),
                (":error-code", "InternalFailure"),
                (":error-message", "oops"),
            ],
            b"",
        );
        let f = feed_all(&[err]).0.unwrap_err();
        assert!(f.retryable && f.error.to_string().contains("InternalFailure: oops"));
        // A chunk that is not base64.
        let bad = encode(
            &[(":event-type", "chunk"), (":message-type", "event")],
            br#"{"bytes":"$$$"}"#,
        );
        assert!(feed_all(&[bad]).0.unwrap_err().retryable);
        // The stream ended before message_stop.
        let mut cut = text_reply(true);
        cut.pop();
        assert_eq!(
            feed_all(&cut).0.unwrap_err().error,
            LlmError::truncated("message_stop")
        );
    }

    #[test]
    fn model_ids_and_regions() {
        let m = |id: &str, r: &str| model_and_region(id, r);
        let p = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(
            m("us.anthropic.claude-haiku-4-5-20251001-v1:0", "us-west-2"),
            p("us.anthropic.claude-haiku-4-5-20251001-v1:0", "us-west-2")
        );
        // A US profile is not called from Europe, nor a European one from the US.
        assert_eq!(
            m("us.anthropic.x", "eu-central-1"),
            p("us.anthropic.x", "us-east-1")
        );
        assert_eq!(
            m("eu.anthropic.x", "us-east-1"),
            p("eu.anthropic.x", "eu-west-1")
        );
        assert_eq!(
            m("global.anthropic.x", "eu-north-1"),
            p("global.anthropic.x", "eu-north-1")
        );
        assert_eq!(
            m("anthropic.x", "eu-west-3"),
            p("eu.anthropic.x", "eu-west-3")
        );
        assert_eq!(
            m("anthropic.x", "ap-northeast-1"),
            p("jp.anthropic.x", "ap-northeast-1")
        );
        assert_eq!(
            m("anthropic.x", "ap-south-1"),
            p("apac.anthropic.x", "ap-south-1")
        );
        assert_eq!(
            m("arn:aws:bedrock:x", "us-east-1"),
            p("arn:aws:bedrock:x", "us-east-1")
        );
    }

    fn ep(base: &str, key: Option<&str>) -> Endpoint {
        Endpoint {
            kind: crate::llm::ApiKind::Bedrock,
            base_url: base.into(),
            api_key: key.map(str::to_string),
            headers: vec![("anthropic-beta".into(), "a-1, b-2".into())],
            ..Default::default()
        }
    }

    #[test]
    fn request_url_body_and_headers() {
        let req = ChatRequest {
            model: "us.anthropic.claude-x-v1:0".into(),
            system: "sys".into(),
            messages: vec![Message::user("hi")],
            tools: vec![],
            max_tokens: Some(100),
            temperature: None,
            ..Default::default()
        };
        let e = ep("", Some("ABSKkey"));
        let t = target(&e, &req.model);
        assert_eq!(
            t.url,
            "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.claude-x-v1%3A0/invoke-with-response-stream"
        );
        let t = target(&ep("http://127.0.0.1:9/", None), &req.model);
        assert!(
            t.url.starts_with("http://127.0.0.1:9/model/us.anthropic"),
            "{}",
            t.url
        );
        let body = build_request(&req, &e);
        assert!(body.get("model").is_none() && body.get("stream").is_none());
        assert_eq!(body["anthropic_version"], ANTHROPIC_VERSION);
        assert_eq!(body["anthropic_beta"], json!(["a-1", "b-2"]));
        let mut thinking = req.clone();
        thinking.options.provider_options =
            serde_json::from_value(json!({"thinking": {"budget_tokens": 2000}})).unwrap();
        assert_eq!(
            build_request(&thinking, &e)["anthropic_beta"],
            json!(["a-1", "b-2", "interleaved-thinking-2025-05-14"])
        );
        assert_eq!(body["max_tokens"], 100);
        assert_eq!(body["messages"][0]["content"][0]["text"], "hi");
        let h = headers(&e);
        assert!(h.contains(&("authorization".into(), "Bearer ABSKkey".into())));
        assert!(!signs(&e));
    }

    #[test]
    fn refused_credentials_and_unknown_models_say_so() {
        let info = CallInfo {
            model: "us.anthropic.nope".into(),
            region: "us-east-1".into(),
            credentials: Some("profile 'dev' of /h/.aws/config".into()),
        };
        let policy = RetryPolicy::default();
        let hdr = |t: &str| {
            vec![
                (
                    "x-amzn-errortype".to_string(),
                    format!("{t}:http://internal.amazon.com/coral/com.amazon.coral.service/"),
                ),
                ("x-amzn-requestid".to_string(), "rid-1".to_string()),
            ]
        };
        let f = classify(
            403,
            &hdr("UnrecognizedClientException"),
            r#"{"message":"The security token included in the request is invalid."}"#,
            &policy,
            &info,
        );
        assert!(!f.retryable);
        assert!(matches!(
            &f.error,
            LlmError::Auth {
                refreshable: true,
                ..
            }
        ));
        let s = f.error.to_string();
        assert!(
            s.contains("HTTP 403")
                && s.contains("refused the credentials from profile 'dev'")
                && s.contains("UnrecognizedClientException"),
            "{s}"
        );
        let f = classify(
            400,
            &hdr("ValidationException"),
            r#"{"message":"The provided model identifier is invalid."}"#,
            &policy,
            &info,
        );
        let s = f.error.to_string();
        assert!(
            s.contains("no model 'us.anthropic.nope' in region us-east-1") && s.contains("rid-1"),
            "{s}"
        );
        let f = classify(
            429,
            &hdr("ThrottlingException"),
            r#"{"message":"Too many requests"}"#,
            &policy,
            &info,
        );
        assert!(f.retryable);
        assert!(
            f.error
                .to_string()
                .contains("ThrottlingException: Too many requests")
        );
    }

    #[test]
    fn attached_images_go_as_base64_and_image_urls_are_named() {
        let req = crate::llm::ChatRequest {
            model: "anthropic.claude".into(),
            messages: vec![crate::llm::types::fixtures::attached_image()],
            ..Default::default()
        };
        let ep = crate::llm::Endpoint {
            kind: crate::llm::ApiKind::Bedrock,
            ..Default::default()
        };
        let body = build_request(&req, &ep);
        let blocks = &body["messages"][0]["content"];
        assert_eq!(blocks[1]["source"]["type"], "base64");
        assert_eq!(blocks[2]["type"], "text");
        assert!(
            blocks[2]["text"]
                .as_str()
                .unwrap()
                .contains("https://e.x/a.png")
        );
    }
}
