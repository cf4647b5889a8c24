//! Local model servers for the first run (crush(1) CONFIGURATION, options.auto_local): with no
//! provider configured, crush asks ollama's, LM Studio's and llama.cpp's default ports on this
//! machine once whether a server answers, and says how to use it (or uses it).

use std::sync::OnceLock;
use std::time::Duration;

/// The id of the provider a found server becomes with `options.auto_local`.
pub(crate) const PROVIDER_ID: &str = "local";

/// How long each probe may take; the probes run at once, so the whole check takes no longer.
const PROBE_TIMEOUT: Duration = Duration::from_millis(100);

/// The servers asked, in order of preference: their usual ports on this machine.
const DEFAULT_PROBES: &[(&str, &str)] = &[
    ("127.0.0.1:11434", "ollama"),
    ("127.0.0.1:1234", "LM Studio"),
    ("127.0.0.1:8080", "llama.cpp"),
];

/// A local server that answered.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Found {
    /// Its OpenAI-compatible base URL (`http://127.0.0.1:11434/v1`).
    pub base_url: String,
    /// What usually listens there (`ollama`), or `a local server`.
    pub kind: String,
}

impl Found {
    /// The one line saying how to use it.
    pub(crate) fn hint(&self) -> String {
        format!(
            "a local model server ({}) answers at {}: set \"options\": {{\"auto_local\": true}} to use it, or add it as a provider with that base_url",
            self.kind, self.base_url
        )
    }
}

/// The addresses to ask: `CRUSH_LOCAL_PROBE` (comma-separated `host:port`, loopback only;
/// empty: none), else the usual ports.
fn probes() -> Vec<(String, String)> {
    match std::env::var("CRUSH_LOCAL_PROBE") {
        Ok(list) => list
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .filter(|a| crate::net::is_loopback_url(&format!("http://{a}")))
            .map(|a| (a.to_string(), "a local server".to_string()))
            .collect(),
        Err(_) => DEFAULT_PROBES
            .iter()
            .map(|(a, k)| (a.to_string(), k.to_string()))
            .collect(),
    }
}

/// The first local server that lists its models at `/v1/models`, asked once per process.
pub(crate) fn found() -> Option<Found> {
    static FOUND: OnceLock<Option<Found>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let started = std::time::Instant::now();
            let probes = probes();
            let answers: Vec<bool> = std::thread::scope(|s| {
                let asks: Vec<_> = probes
                    .iter()
                    .map(|(addr, _)| s.spawn(move || answers(addr)))
                    .collect();
                asks.into_iter()
                    .map(|h| h.join().unwrap_or(false))
                    .collect()
            });
            let found =
                probes
                    .into_iter()
                    .zip(answers)
                    .find(|(_, ok)| *ok)
                    .map(|((addr, kind), _)| Found {
                        base_url: format!("http://{addr}/v1"),
                        kind,
                    });
            crate::log::info(&format!(
                "local model servers probed in {:.1} ms: {found:?}",
                started.elapsed().as_secs_f64() * 1e3
            ));
            found
        })
        .clone()
}

/// Whether a server at `addr` answers `GET /v1/models` with a model list within the timeout.
fn answers(addr: &str) -> bool {
    let url = format!("http://{addr}/v1/models");
    let agent = crate::net::agent(
        &url,
        crate::net::Timeouts {
            connect: Some(PROBE_TIMEOUT),
            global: Some(PROBE_TIMEOUT),
            ..Default::default()
        },
    );
    let Ok(resp) = agent.get(&url).call() else {
        return false;
    };
    if resp.status().as_u16() != 200 {
        return false;
    }
    let mut body = resp.into_body();
    body.with_config()
        .limit(1024 * 1024)
        .read_to_string()
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .is_some_and(|v| v["data"].is_array())
}
