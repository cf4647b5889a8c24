//! Small encodings the client needs and no crate provides here: base64 (standard and URL-safe),
//! percent-encoding, the parts of an URL, and random bytes.

use std::io::Read;

const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn encode(data: &[u8], alphabet: &[u8; 64], pad: bool) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..4 {
            if i < chars {
                out.push(alphabet[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else if pad {
                out.push('=');
            }
        }
    }
    out
}

/// Standard base64 with padding (RFC 4648 §4).
pub(crate) fn base64(data: &[u8]) -> String {
    encode(data, STD, true)
}

/// URL-safe base64 without padding (RFC 4648 §5), as PKCE and OAuth `state` values use it.
pub(crate) fn base64url(data: &[u8]) -> String {
    encode(data, URL, false)
}

/// `s` with every byte outside the unreserved set (`A-Z a-z 0-9 - . _ ~`) percent-encoded.
pub(crate) fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes `%XX` escapes and (form encoding) `+` as a space; invalid escapes stay as they are.
pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = |b: u8| (b as char).to_digit(16);
                match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `key=value&...` with both sides percent-encoded (a query string or a form body).
pub(crate) fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", percent_encode(k), percent_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The value of `key` in a query string (decoded), if present.
pub(crate) fn query_value(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (percent_decode(k) == key).then(|| percent_decode(v))
    })
}

/// An absolute `http(s)` URL in its parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Url {
    pub scheme: String,
    /// `host[:port]` (userinfo removed).
    pub authority: String,
    /// Starts with `/`.
    pub path: String,
    /// Without the `?`.
    pub query: Option<String>,
}

impl Url {
    /// Parses an absolute URL; None when it has no scheme and host.
    pub(crate) fn parse(s: &str) -> Option<Url> {
        let (scheme, rest) = s.trim().split_once("://")?;
        if scheme.is_empty()
            || !scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+')
        {
            return None;
        }
        let rest = rest.split('#').next().unwrap_or("");
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let authority = &rest[..end];
        let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        if authority.is_empty() {
            return None;
        }
        let tail = &rest[end..];
        let (path, query) = match tail.split_once('?') {
            Some((p, q)) => (p, Some(q.to_string())),
            None => (tail, None),
        };
        Some(Url {
            scheme: scheme.to_ascii_lowercase(),
            authority: authority.to_ascii_lowercase(),
            path: if path.is_empty() { "/" } else { path }.to_string(),
            query,
        })
    }

    /// `scheme://authority`.
    pub(crate) fn origin(&self) -> String {
        format!("{}://{}", self.scheme, self.authority)
    }

    /// The whole URL (without a fragment).
    pub(crate) fn full(&self) -> String {
        match &self.query {
            Some(q) => format!("{}{}?{q}", self.origin(), self.path),
            None => format!("{}{}", self.origin(), self.path),
        }
    }

    /// `reference` resolved against this URL (absolute, `//host`, `/path` or relative path).
    pub(crate) fn join(&self, reference: &str) -> String {
        let r = reference.trim();
        if r.contains("://") {
            return r.to_string();
        }
        if let Some(rest) = r.strip_prefix("//") {
            return format!("{}://{rest}", self.scheme);
        }
        if r.starts_with('/') {
            return format!("{}{r}", self.origin());
        }
        if let Some(q) = r.strip_prefix('?') {
            return format!("{}{}?{q}", self.origin(), self.path);
        }
        let dir = match self.path.rfind('/') {
            Some(i) => &self.path[..=i],
            None => "/",
        };
        format!("{}{dir}{r}", self.origin())
    }
}

/// `n` random bytes from the kernel. Should /dev/urandom be unreadable, the bytes come from
/// hashing the clock, the process id and a counter: unpredictable enough for a `state` value,
/// never a reason to fail.
pub(crate) fn random_bytes(n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut out))
        .is_ok()
    {
        return out;
    }
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut filled = 0;
    while filled < n {
        let seed = format!(
            "{:?}{}{}",
            std::time::SystemTime::now(),
            std::process::id(),
            COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let d = crate::sha256::digest(seed.as_bytes());
        let k = (n - filled).min(d.len());
        out[filled..filled + k].copy_from_slice(&d[..k]);
        filled += k;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_vectors() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
        // RFC 7636 appendix B: the S256 challenge of the example verifier.
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        assert_eq!(
            base64url(&crate::sha256::digest(verifier.as_bytes())),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn percent_round_trip_and_queries() {
        assert_eq!(percent_encode("a b/c?d=é"), "a%20b%2Fc%3Fd%3D%C3%A9");
        assert_eq!(percent_decode("a%20b+c%2F%C3%A9%zz"), "a b c/é%zz");
        assert_eq!(form(&[("a", "1 2"), ("b", "x&y")]), "a=1%202&b=x%26y");
        assert_eq!(query_value("code=ab%2Bc&state=s", "code").unwrap(), "ab+c");
        assert_eq!(query_value("code=x", "state"), None);
    }

    #[test]
    fn urls_parse_and_join() {
        let u = Url::parse("HTTPS://user@Example.com:8443/a/b?x=1#f").unwrap();
        assert_eq!(u.origin(), "https://example.com:8443");
        assert_eq!(u.path, "/a/b");
        assert_eq!(u.query.as_deref(), Some("x=1"));
        assert_eq!(
            u.join("/messages?s=1"),
            "https://example.com:8443/messages?s=1"
        );
        assert_eq!(u.join("c"), "https://example.com:8443/a/c");
        assert_eq!(u.join("http://o/x"), "http://o/x");
        assert_eq!(
            Url::parse("http://[::1]:9/").unwrap().origin(),
            "http://[::1]:9"
        );
        assert!(Url::parse("no-scheme").is_none());
        assert_eq!(Url::parse("http://h").unwrap().full(), "http://h/");
    }

    #[test]
    fn random_bytes_differ() {
        let a = random_bytes(32);
        assert_eq!(a.len(), 32);
        assert_ne!(a, random_bytes(32));
    }
}
