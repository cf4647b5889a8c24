//! Amazon Web Services, as far as crush calls them: request signing (SigV4), the event-stream
//! framing Bedrock streams replies in, and where credentials and the region come from. It knows
//! no model and no dialect: `llm::bedrock` builds on it.

pub(crate) mod credentials;
pub mod eventstream;
pub mod sigv4;

use crate::sha256;

pub(crate) use credentials::{CredError, Limits};

/// `YYYYMMDDTHHMMSSZ` (UTC) for Unix seconds `secs`, as SigV4 dates requests.
pub(crate) fn amz_date(secs: i64) -> String {
    crate::time::rfc3339_secs(secs).replace(['-', ':'], "")
}

/// How a Bedrock provider authenticates and where its requests go.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Settings {
    /// Used when nothing names a region (`us-east-1`; `eu-west-1` for `bedrock-europe`).
    pub default_region: String,
    /// The credentials of the environment and the profile may be sent: the URL is AWS's own, or
    /// the one AWS's endpoint variables name. Otherwise only the provider's own key is.
    pub credentials_allowed: bool,
    /// The provider's `aws_auth_refresh`: a shell command run once when the credentials are
    /// refused or have expired, before trying again.
    pub auth_refresh: Option<String>,
    /// Where that command runs.
    pub cwd: std::path::PathBuf,
    /// How long the command may run.
    pub refresh_timeout: std::time::Duration,
    pub limits: Limits,
    /// The session's variables (its `.env` and `env` map), read before crush's environment.
    pub env: crate::env::Overlay,
}

impl Settings {
    /// The region calls go to: `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's, else the
    /// default.
    pub(crate) fn region(&self) -> String {
        credentials::region(&self.env).unwrap_or_else(|| self.default_region.clone())
    }
}

/// Whether `url` is an AWS endpoint (`*.amazonaws.com`, `*.amazonaws.com.cn`, `*.api.aws`).
pub(crate) fn is_aws_url(url: &str) -> bool {
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
