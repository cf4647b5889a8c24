//! Which failures are worth another attempt, how long to wait, and how to read error bodies.
//! Everything here is pure; the client applies it.

use super::{LlmError, RetryPolicy};
use serde_json::Value;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One failed attempt.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Failure {
    pub error: LlmError,
    pub retryable: bool,
    /// What the server asked us to wait, if it said.
    pub retry_after: Option<Duration>,
}

impl Failure {
    pub(crate) fn retry(error: LlmError) -> Failure {
        Failure {
            error,
            retryable: true,
            retry_after: None,
        }
    }
    pub(crate) fn fatal(error: LlmError) -> Failure {
        Failure {
            error,
            retryable: false,
            retry_after: None,
        }
    }
}

/// The parts of an error body worth keeping.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ErrorBody {
    pub message: String,
    /// `error.type` (Anthropic, OpenAI) or `error.code` when it is a string.
    pub kind: Option<String>,
    /// `error.code`, as text (string or number).
    pub code: Option<String>,
    /// `request_id` from the body, if any.
    pub request_id: Option<String>,
}

/// Reads an error body leniently: Anthropic `{"type":"error","error":{type,message}}`, OpenAI
/// `{"error":{message,type,code}}` or `{"error":"text"}`, `{"object":"error","message":…}`,
/// `{"message":…}`, else `<first 200 bytes>` (or `HTTP <status>` when empty).
pub(crate) fn parse_error_body(body: &str) -> ErrorBody {
    if let Ok(v) = serde_json::from_str::<Value>(body.trim())
        && let Some(eb) = error_from_json(&v)
    {
        return eb;
    }
    ErrorBody {
        message: snippet(body, 200),
        ..ErrorBody::default()
    }
}

/// An error carried by a JSON value, if it looks like one.
pub(crate) fn error_from_json(v: &Value) -> Option<ErrorBody> {
    let obj = v.as_object()?;
    let request_id = obj
        .get("request_id")
        .and_then(Value::as_str)
        .map(str::to_string);
    let text = |v: Option<&Value>| -> Option<String> {
        match v? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    match obj.get("error") {
        Some(Value::Object(e)) => {
            let code = text(e.get("code"));
            let kind = e
                .get("type")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| e.get("code").and_then(Value::as_str).map(str::to_string));
            let mut message = text(e.get("message")).unwrap_or_default();
            if message.is_empty() {
                message = kind.clone().unwrap_or_else(|| "unknown error".to_string());
            }
            // OpenRouter wraps the upstream provider's message in metadata.raw.
            if let Some(raw) = e
                .get("metadata")
                .and_then(|m| m.get("raw"))
                .and_then(Value::as_str)
                && !raw.is_empty()
                && !message.contains(raw)
            {
                message = format!("{message}: {}", snippet(raw, 200));
            }
            Some(ErrorBody {
                message,
                kind,
                code,
                request_id,
            })
        }
        Some(Value::String(s)) => Some(ErrorBody {
            message: s.clone(),
            request_id,
            ..ErrorBody::default()
        }),
        _ => {
            let is_error = obj.get("object").and_then(Value::as_str) == Some("error")
                || obj.get("type").and_then(Value::as_str) == Some("error");
            let message = obj.get("message").and_then(Value::as_str)?;
            if !is_error && obj.len() > 3 {
                return None;
            }
            Some(ErrorBody {
                message: message.to_string(),
                kind: obj.get("type").and_then(Value::as_str).map(str::to_string),
                code: text(obj.get("code")),
                request_id,
            })
        }
    }
}

/// At most `max` bytes of `s` (cut on a character boundary), trimmed, whitespace runs collapsed.
pub(crate) fn snippet(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = s[..end].split_whitespace().collect::<Vec<_>>().join(" ");
    if end < s.len() {
        out.push('…');
    }
    out
}

/// Whether an HTTP status is worth another attempt (before looking at the body and headers).
pub(crate) fn status_retryable(status: u16) -> bool {
    matches!(status, 408 | 409 | 429 | 498) || status >= 500
}

/// Whether an error kind/code reported by a server marks a failure as retryable (mid-stream errors,
/// 200 replies carrying an error). Unknown kinds are retried.
pub(crate) fn kind_retryable(kind: Option<&str>, code: Option<&str>) -> bool {
    if let Some(c) = code.and_then(|c| c.parse::<u16>().ok()) {
        return status_retryable(c);
    }
    for k in [kind, code].into_iter().flatten() {
        match k {
            "insufficient_quota"
            | "invalid_request_error"
            | "authentication_error"
            | "permission_error"
            | "billing_error"
            | "not_found_error"
            | "request_too_large"
            | "context_length_exceeded"
            | "invalid_api_key"
            | "model_not_found" => return false,
            _ => {}
        }
    }
    true
}

/// Looks a header up case-insensitively.
pub(crate) fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
}

/// `retry-after-ms`, else `retry-after` (delta-seconds or HTTP-date, relative to `now`).
pub(crate) fn parse_retry_after(headers: &[(String, String)], now: SystemTime) -> Option<Duration> {
    if let Some(ms) = header(headers, "retry-after-ms")
        && let Ok(ms) = ms.parse::<f64>()
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms.min(1e12) / 1000.0));
    }
    let v = header(headers, "retry-after")?;
    if let Ok(secs) = v.parse::<f64>() {
        if secs.is_finite() && secs >= 0.0 {
            return Some(Duration::from_secs_f64(secs.min(1e9)));
        }
        return None;
    }
    let at = parse_http_date(v)?;
    let now = now.duration_since(UNIX_EPOCH).ok()?.as_secs() as i64;
    Some(Duration::from_secs(at.saturating_sub(now).max(0) as u64))
}

/// Unix seconds of an HTTP-date (IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`; also the RFC 850
/// and asctime forms).
pub(crate) fn parse_http_date(s: &str) -> Option<i64> {
    let s = s.trim();
    // Drop the weekday: everything up to the first comma, or the first word for asctime.
    let (rest, asctime) = match s.split_once(',') {
        Some((_, r)) => (r.trim(), false),
        None => (s.split_once(' ')?.1.trim(), true),
    };
    let fields: Vec<&str> = rest.split([' ', '-']).filter(|f| !f.is_empty()).collect();
    let (day, month, year, time) = if asctime {
        // Nov  6 08:49:37 1994
        if fields.len() < 4 {
            return None;
        }
        (fields[1], fields[0], fields[3], fields[2])
    } else {
        // 06 Nov 1994 08:49:37 GMT | 06-Nov-94 08:49:37 GMT
        if fields.len() < 4 {
            return None;
        }
        (fields[0], fields[1], fields[2], fields[3])
    };
    let day: i64 = day.parse().ok()?;
    let month = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ]
    .iter()
    .position(|m| month.get(..3).is_some_and(|p| p.eq_ignore_ascii_case(m)))?
        as i64
        + 1;
    let mut year: i64 = year.parse().ok()?;
    if year < 100 {
        year += if year < 70 { 2000 } else { 1900 };
    }
    let mut hms = time.split(':').map(|p| p.parse::<i64>());
    let (h, m, sec) = (hms.next()?.ok()?, hms.next()?.ok()?, hms.next()?.ok()?);
    if !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    Some(
        crate::time::days_from_civil(year, month as u32, day as u32) * 86_400
            + h * 3600
            + m * 60
            + sec,
    )
}

/// Classifies a non-2xx reply from its status, headers and body.
pub(crate) fn classify_http(
    status: u16,
    headers: &[(String, String)],
    body: &str,
    policy: &RetryPolicy,
    now: SystemTime,
) -> Failure {
    let eb = parse_error_body(body);
    let request_id = header(headers, "request-id")
        .or_else(|| header(headers, "x-request-id"))
        .map(str::to_string)
        .or(eb.request_id.clone());
    let message = if eb.message.is_empty() {
        reason_phrase(status).to_string()
    } else {
        eb.message.clone()
    };
    let error = LlmError::Http {
        status,
        message,
        request_id,
    };
    let quota = [eb.kind.as_deref(), eb.code.as_deref()]
        .into_iter()
        .flatten()
        .any(|k| k == "insufficient_quota");
    let mut retryable = status_retryable(status) && !quota;
    match header(headers, "x-should-retry") {
        Some(v) if v.eq_ignore_ascii_case("false") => retryable = false,
        Some(v) if v.eq_ignore_ascii_case("true") && !quota => retryable = true,
        _ => {}
    }
    let retry_after = parse_retry_after(headers, now);
    if retryable
        && let Some(wait) = retry_after
        && wait > policy.max_retry_after
    {
        return Failure::fatal(LlmError::RetryAfterTooLong {
            status,
            secs: wait.as_secs_f64().ceil() as u64,
        });
    }
    Failure {
        error,
        retryable,
        retry_after,
    }
}

/// The standard reason phrase of common error statuses (for empty error bodies).
pub(crate) fn reason_phrase(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "(no details)",
    }
}

/// Exponential backoff before attempt `attempt + 1` (`attempt` = 1 for the first failure):
/// base, 2×base, 4×base… capped at `max_backoff`.
pub(crate) fn backoff(policy: &RetryPolicy, attempt: u32) -> Duration {
    let shift = attempt.saturating_sub(1).min(30);
    policy
        .base_backoff
        .saturating_mul(1u32 << shift)
        .min(policy.max_backoff)
}

/// `backoff` less up to 25% jitter (`seed` is any changing number, e.g. clock nanos).
pub(crate) fn jittered(d: Duration, seed: u64) -> Duration {
    // xorshift of the seed, mapped to 0..=250 per mille.
    let mut x = seed | 1;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    let permille = (x % 251) as u32;
    d.saturating_sub(d.saturating_mul(permille) / 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn now() -> SystemTime {
        // Sun, 06 Nov 1994 08:49:37 GMT
        UNIX_EPOCH + Duration::from_secs(784_111_777)
    }

    #[test]
    fn http_date_forms() {
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(
            parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(
            parse_http_date("Sun Nov  6 08:49:37 1994"),
            Some(784_111_777)
        );
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(parse_http_date("garbage"), None);
        assert_eq!(parse_http_date("Sun, 06 Né 1994 08:49:37 GMT"), None);
        assert_eq!(parse_http_date(""), None);
    }

    #[test]
    fn retry_after_headers() {
        let n = now();
        assert_eq!(
            parse_retry_after(&h(&[("Retry-After", "2")]), n),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            parse_retry_after(&h(&[("retry-after", "2"), ("retry-after-ms", "1500")]), n),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after(&h(&[("retry-after", "Sun, 06 Nov 1994 08:49:40 GMT")]), n),
            Some(Duration::from_secs(3))
        );
        // A date in the past: retry now.
        assert_eq!(
            parse_retry_after(&h(&[("retry-after", "Sun, 06 Nov 1994 08:00:00 GMT")]), n),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after(&h(&[("retry-after", "soon")]), n), None);
        assert!(parse_retry_after(&h(&[("retry-after-ms", "1e300")]), n).is_some());
        assert!(parse_retry_after(&h(&[("retry-after", "1e300")]), n).is_some());
        assert_eq!(parse_retry_after(&h(&[("retry-after", "-1")]), n), None);
        assert_eq!(parse_retry_after(&h(&[]), n), None);
        // A bad retry-after-ms falls back to retry-after.
        assert_eq!(
            parse_retry_after(&h(&[("retry-after-ms", "x"), ("retry-after", "1")]), n),
            Some(Duration::from_secs(1))
        );
    }

    #[test]
    fn status_classes() {
        for s in [408, 409, 429, 500, 502, 503, 504, 529] {
            assert!(status_retryable(s), "{s}");
        }
        for s in [400, 401, 402, 403, 404, 413, 422] {
            assert!(!status_retryable(s), "{s}");
        }
    }

    #[test]
    fn classify_anthropic_429_and_401() {
        let p = RetryPolicy::default();
        let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"},"request_id":"req_1"}"#;
        let f = classify_http(429, &h(&[("retry-after", "2")]), body, &p, now());
        assert!(f.retryable);
        assert_eq!(f.retry_after, Some(Duration::from_secs(2)));
        assert_eq!(
            f.error,
            LlmError::Http {
                status: 429,
                message: "slow down".into(),
                request_id: Some("req_1".into())
            }
        );
        let body = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
        let f = classify_http(401, &h(&[("request-id", "req_2")]), body, &p, now());
        assert!(!f.retryable);
        let shown = f.error.to_string();
        assert!(
            shown.contains("invalid x-api-key") && shown.contains("req_2"),
            "{shown}"
        );
    }

    #[test]
    fn classify_quota_too_long_and_should_retry() {
        let p = RetryPolicy::default();
        let body = r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
        let f = classify_http(429, &h(&[("x-request-id", "r9")]), body, &p, now());
        assert!(!f.retryable);
        assert!(f.error.to_string().contains("quota"));
        let f = classify_http(429, &h(&[("retry-after", "3600")]), "{}", &p, now());
        assert!(!f.retryable);
        assert_eq!(
            f.error,
            LlmError::RetryAfterTooLong {
                status: 429,
                secs: 3600
            }
        );
        let f = classify_http(503, &h(&[("x-should-retry", "false")]), "", &p, now());
        assert!(!f.retryable);
        let f = classify_http(400, &h(&[("x-should-retry", "true")]), "", &p, now());
        assert!(f.retryable);
        let f = classify_http(
            529,
            &h(&[]),
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            &p,
            now(),
        );
        assert!(f.retryable && f.retry_after.is_none());
    }

    #[test]
    fn error_bodies() {
        assert_eq!(
            parse_error_body(
                r#"{"error":{"message":"bad","type":"invalid_request_error","code":null}}"#
            )
            .message,
            "bad"
        );
        assert_eq!(parse_error_body(r#"{"error":"plain"}"#).message, "plain");
        let eb = parse_error_body(
            r#"{"object":"error","message":"mistral says no","type":"x","code":3}"#,
        );
        assert_eq!(eb.message, "mistral says no");
        assert_eq!(eb.code.as_deref(), Some("3"));
        let eb = parse_error_body(
            r#"{"error":{"code":429,"message":"Rate limited","metadata":{"raw":"upstream busy"}}}"#,
        );
        assert_eq!(eb.message, "Rate limited: upstream busy");
        assert_eq!(eb.code.as_deref(), Some("429"));
        let html = format!("<html><body>{}</body></html>", "x".repeat(300));
        let eb = parse_error_body(&html);
        assert!(eb.message.starts_with("<html><body>xx"));
        assert!(eb.message.len() <= 204);
        let f = classify_http(
            502,
            &h(&[]),
            "<html>Bad Gateway</html>",
            &RetryPolicy::default(),
            now(),
        );
        assert!(f.retryable);
        assert_eq!(f.error.to_string(), "HTTP 502: <html>Bad Gateway</html>");
        let f = classify_http(500, &h(&[]), "", &RetryPolicy::default(), now());
        assert_eq!(f.error.to_string(), "HTTP 500: Internal Server Error");
    }

    #[test]
    fn kinds() {
        assert!(kind_retryable(Some("overloaded_error"), None));
        assert!(kind_retryable(Some("api_error"), None));
        assert!(!kind_retryable(Some("invalid_request_error"), None));
        assert!(kind_retryable(None, Some("502")));
        assert!(!kind_retryable(None, Some("402")));
        assert!(kind_retryable(None, None));
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let p = RetryPolicy::default();
        assert_eq!(backoff(&p, 1), Duration::from_millis(500));
        assert_eq!(backoff(&p, 2), Duration::from_secs(1));
        assert_eq!(backoff(&p, 3), Duration::from_secs(2));
        assert_eq!(backoff(&p, 10), Duration::from_secs(8));
        assert_eq!(backoff(&p, 1000), Duration::from_secs(8));
        for seed in 0..100 {
            let j = jittered(Duration::from_secs(1), seed);
            assert!(j >= Duration::from_millis(750) && j <= Duration::from_secs(1));
        }
    }
}
