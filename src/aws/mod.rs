//! Amazon Web Services, as far as crush calls them: request signing (SigV4), the event-stream
//! framing Bedrock streams replies in, and where credentials and the region come from. It knows
//! no model and no dialect: `llm::bedrock` builds on it.

pub mod eventstream;
pub mod sigv4;

use crate::sha256;

pub use sigv4::Credentials;

/// `YYYYMMDDTHHMMSSZ` (UTC) for Unix seconds `secs`, as SigV4 dates requests.
pub fn amz_date(secs: i64) -> String {
    crate::time::rfc3339_secs(secs).replace(['-', ':'], "")
}

/// Whether `url` is an AWS endpoint (`*.amazonaws.com`, `*.amazonaws.com.cn`, `*.api.aws`).
pub fn is_aws_url(url: &str) -> bool {
    let (host, _, _) = sigv4::split_url(url);
    let host = host.rsplit_once(':').map_or(host.as_str(), |(h, p)| {
        if p.bytes().all(|b| b.is_ascii_digit()) {
            h
        } else {
            host.as_str()
        }
    });
    let https = url
        .get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("https://"));
    https
        && [".amazonaws.com", ".amazonaws.com.cn", ".api.aws"]
            .iter()
            .any(|d| host.ends_with(d))
}

#[cfg(test)]
mod tests;
