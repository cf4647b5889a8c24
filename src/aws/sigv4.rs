//! AWS Signature Version 4 (the `AWS4-HMAC-SHA256` scheme): the canonical request, the string to
//! sign, the signing key and the headers a signed request carries. Pure: the caller gives the
//! time and the credentials.
//!
//! The path is signed as sent, encoded once more (every service but S3 does so), so a model id
//! carrying `:` travels as `%3A` and is signed as `%253A`.

use super::sha256;
use std::fmt;

/// An access key pair, with the session token of temporary credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"****")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "****"),
            )
            .finish()
    }
}

/// One request to sign.
pub struct Request<'a> {
    pub method: &'a str,
    /// The full URL as it is sent (`https://host/path?query`).
    pub url: &'a str,
    /// Headers to sign besides `host`, `x-amz-date` and `x-amz-security-token` (which `sign`
    /// adds). A repeated name is one header whose values join with `,`.
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
}

/// `s` with every byte but `A-Z a-z 0-9 - . _ ~` (and `/` when `keep_slash`) as `%XX`.
pub fn uri_encode(s: &[u8], keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s {
        if b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'.' | b'_' | b'~')
            || (keep_slash && b == b'/')
        {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `%XX` escapes decoded (an invalid one stays as it is; `+` stays a plus).
fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// (host as the `Host` header carries it, path, query) of a URL; the default port is left out.
pub fn split_url(url: &str) -> (String, &str, &str) {
    let (scheme, rest) = url.split_once("://").unwrap_or(("https", url));
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, target) = rest.split_at(end);
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => ":80",
        _ => ":443",
    };
    let host = authority.strip_suffix(default_port).unwrap_or(authority);
    let target = target.split('#').next().unwrap_or("");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    (host.to_ascii_lowercase(), path, query)
}

fn canonical_uri(path: &str) -> String {
    if path.is_empty() {
        return "/".into();
    }
    uri_encode(path.as_bytes(), true)
}

fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (
                uri_encode(&percent_decode(k), false),
                uri_encode(&percent_decode(v), false),
            )
        })
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// The canonical headers block and the signed-header list: names lowercased and sorted, values
/// trimmed with runs of spaces made one, a repeated name's values joined with `,`.
fn canonical_headers(headers: &[(String, String)]) -> (String, String) {
    let mut grouped: Vec<(String, Vec<String>)> = Vec::new();
    for (k, v) in headers {
        let name = k.trim().to_ascii_lowercase();
        let value = v.split_whitespace().collect::<Vec<_>>().join(" ");
        match grouped.iter_mut().find(|(n, _)| *n == name) {
            Some((_, vs)) => vs.push(value),
            None => grouped.push((name, vec![value])),
        }
    }
    grouped.sort_by(|a, b| a.0.cmp(&b.0));
    let block: String = grouped
        .iter()
        .map(|(n, vs)| format!("{n}:{}\n", vs.join(",")))
        .collect();
    let names = grouped
        .iter()
        .map(|(n, _)| n.as_str())
        .collect::<Vec<_>>()
        .join(";");
    (block, names)
}

/// The canonical request of `method` to `path?query` with exactly `headers` signed, and the
/// signed-header list.
pub fn canonical_request(
    method: &str,
    path: &str,
    query: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> (String, String) {
    let (block, names) = canonical_headers(headers);
    let text = format!(
        "{method}\n{}\n{}\n{block}\n{names}\n{}",
        canonical_uri(path),
        canonical_query(query),
        sha256::hex(body)
    );
    (text, names)
}

/// `date/region/service/aws4_request`
pub fn scope(amz_date: &str, region: &str, service: &str) -> String {
    format!(
        "{}/{region}/{service}/aws4_request",
        &amz_date[..8.min(amz_date.len())]
    )
}

pub fn string_to_sign(amz_date: &str, scope: &str, canonical: &str) -> String {
    format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        sha256::hex(canonical.as_bytes())
    )
}

/// The hex signature of `string_to_sign` for `scope` (`date/region/service/aws4_request`).
pub fn signature(secret: &str, scope: &str, string_to_sign: &str) -> String {
    let mut key = format!("AWS4{secret}").into_bytes();
    for part in scope.split('/') {
        key = sha256::hmac(&key, part.as_bytes()).to_vec();
    }
    sha256::to_hex(&sha256::hmac(&key, string_to_sign.as_bytes()))
}

/// The headers that make `req` a signed request at `amz_date` (`YYYYMMDDTHHMMSSZ`):
/// `x-amz-date`, `x-amz-security-token` for temporary credentials, and `authorization`.
pub fn sign(
    req: &Request,
    creds: &Credentials,
    region: &str,
    service: &str,
    amz_date: &str,
) -> Vec<(String, String)> {
    let (host, path, query) = split_url(req.url);
    let mut added = vec![("x-amz-date".to_string(), amz_date.to_string())];
    if let Some(t) = creds.session_token.as_deref().filter(|t| !t.is_empty()) {
        added.push(("x-amz-security-token".to_string(), t.to_string()));
    }
    let mut signed = vec![("host".to_string(), host)];
    signed.extend(req.headers.iter().cloned());
    signed.extend(added.iter().cloned());
    let (canonical, names) = canonical_request(req.method, path, query, &signed, req.body);
    let scope = scope(amz_date, region, service);
    let sig = signature(
        &creds.secret_access_key,
        &scope,
        &string_to_sign(amz_date, &scope, &canonical),
    );
    added.push((
        "authorization".to_string(),
        format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={names}, Signature={sig}",
            creds.access_key_id
        ),
    ));
    added
}

/// The parts of an `authorization` header: (access key id, scope, signed headers, signature).
pub fn parse_authorization(value: &str) -> Option<(String, String, Vec<String>, String)> {
    let rest = value.strip_prefix("AWS4-HMAC-SHA256 ")?;
    let mut cred = None;
    let mut names = None;
    let mut sig = None;
    for part in rest.split(',') {
        let (k, v) = part.trim().split_once('=')?;
        match k {
            "Credential" => cred = Some(v.to_string()),
            "SignedHeaders" => names = Some(v.split(';').map(str::to_string).collect()),
            "Signature" => sig = Some(v.to_string()),
            _ => {}
        }
    }
    let cred = cred?;
    let (akid, scope) = cred.split_once('/')?;
    Some((akid.to_string(), scope.to_string(), names?, sig?))
}
