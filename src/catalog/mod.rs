//! The provider catalog (crush(1) PROVIDER CATALOG): Catwalk's providers and models, with prices.
//!
//! Sources, best first: a fresh download, the cache in the global data dir, the snapshot compiled
//! into the binary. Nothing here runs until a command needs a provider or a model
//! ([`get`] is lazy and memoised), and the network is asked at most once per [`Settings::ttl`]:
//!
//! - auto-update on (the default): when the cache is older than the TTL (24 h; 1 h after a failed
//!   attempt) or missing, `GET {CATWALK_URL}/v2/providers` with `If-None-Match` set to the ETag
//!   the server sent last time; 304 keeps the cache, 200 replaces it atomically. The whole request
//!   is capped at [`STARTUP_TIMEOUT`]; any failure prints one warning line and falls back to the
//!   cache, else the embedded copy.
//! - auto-update off (`options.disable_provider_auto_update`, `CRUSH_DISABLE_PROVIDER_AUTO_UPDATE=1`):
//!   no connection at all; the cache when present, else the embedded copy.
//! - `crush update-providers [SOURCE]` ([`update_providers`]) writes the cache on demand.

mod embedded_index;
pub(crate) mod schema;
mod split;
pub(crate) mod store;

pub(crate) use schema::{Model, Provider, ProviderType};

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The snapshot compiled into the binary (Catwalk, MIT: see `catwalk-LICENSE` beside it).
pub(crate) const EMBEDDED: &[u8] = include_bytes!("catwalk-providers.json");

pub(crate) const DEFAULT_URL: &str = "https://catwalk.charm.land";
/// How long a successful check is trusted before the next start asks the server again.
pub(crate) const TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// How long after a failed check the next start tries again.
pub(crate) const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(60 * 60);
/// The most a start waits on the catalog server.
pub(crate) const STARTUP_TIMEOUT: Duration = Duration::from_secs(2);
/// The most `crush update-providers` waits (the user asked for it).
pub(crate) const UPDATE_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the catalog comes from and whether the network may be used.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub auto_update: bool,
    /// Catwalk base URL (`$CATWALK_URL` or [`DEFAULT_URL`]).
    pub base_url: String,
    /// The global data dir, holding the cache.
    pub dir: PathBuf,
    pub timeout: Duration,
    pub ttl: Duration,
    /// Report on stderr where the catalog came from and what loading it cost.
    pub debug: bool,
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Settings {
    /// From the environment; `disabled_by_config` is `options.disable_provider_auto_update`.
    /// `CRUSH_CATALOG_TIMEOUT_MS` and `CRUSH_CATALOG_TTL` (seconds, 0 = check on every start)
    /// override the defaults.
    pub(crate) fn from_env(disabled_by_config: bool) -> Settings {
        let timeout = env_nonempty("CRUSH_CATALOG_TIMEOUT_MS")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_millis)
            .unwrap_or(STARTUP_TIMEOUT);
        let ttl = env_nonempty("CRUSH_CATALOG_TTL")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs)
            .unwrap_or(TTL);
        Settings {
            auto_update: !disabled_by_config
                && !std::env::var("CRUSH_DISABLE_PROVIDER_AUTO_UPDATE")
                    .is_ok_and(|v| crate::env::truthy(&v)),
            base_url: env_nonempty("CATWALK_URL").unwrap_or_else(|| DEFAULT_URL.to_string()),
            dir: crate::paths::global_data_dir(),
            timeout,
            ttl,
            debug: false,
        }
    }

    /// `{base_url}/v2/providers`.
    pub(crate) fn url(&self) -> String {
        providers_url(&self.base_url)
    }
}

fn providers_url(base: &str) -> String {
    format!("{}/v2/providers", base.trim_end_matches('/'))
}

/// Where the catalog in use came from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Origin {
    Embedded,
    Cache(PathBuf),
    Downloaded(String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Embedded => f.write_str("the embedded copy"),
            Origin::Cache(p) => write!(f, "the cache {}", p.display()),
            Origin::Downloaded(u) => write!(f, "{}", crate::net::redact_url(u)),
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Catalog {
    pub providers: Vec<Provider>,
    pub origin: Origin,
}

/// Charm's Hyper as a provider (crush(1) LOGIN) for a catalog that has none: its endpoint and
/// its default models; the rest of its models are listed by Hyper once signed in.
const HYPER: &[u8] = include_bytes!("hyper.json");

/// `catalog` with the Hyper entry when it has none.
fn with_hyper(mut catalog: Catalog) -> Catalog {
    if !catalog.providers.iter().any(|p| p.id.as_str() == "hyper")
        && let Ok(p) = serde_json::from_slice::<Provider>(HYPER)
    {
        catalog.providers.push(p);
    }
    catalog
}

/// The embedded snapshot, decoded.
pub(crate) fn embedded() -> Catalog {
    // The snapshot is checked by a unit test; an empty list is the worst a broken build can do.
    let index = split::from_rows(embedded_index::ROWS);
    let providers = schema::parse_static(EMBEDDED, Some(index)).unwrap_or_default();
    Catalog {
        providers,
        origin: Origin::Embedded,
    }
}

/// The catalog of a configuration: decoded on first use (see the module docs), then kept and
/// shared by every clone. Warnings go to stderr, one line each.
#[derive(Clone, Debug, Default)]
pub(crate) struct Lazy {
    /// None: the embedded copy, no network (a configuration built in code).
    settings: Option<Settings>,
    cell: Arc<OnceLock<Catalog>>,
}

impl Lazy {
    pub(crate) fn new(settings: Settings) -> Lazy {
        Lazy {
            settings: Some(settings),
            cell: Arc::default(),
        }
    }

    pub(crate) fn get(&self) -> &Catalog {
        self.cell.get_or_init(|| {
            let Some(settings) = &self.settings else {
                return with_hyper(embedded());
            };
            let started = std::time::Instant::now();
            let (catalog, warnings) = load(settings);
            let catalog = with_hyper(catalog);
            for w in warnings {
                crate::ewriteln!("crush: warning: {}", crate::visible::text(&w));
            }
            if settings.debug {
                crate::ewriteln!(
                    "crush: debug: provider catalog from {} ({} providers) in {:.2} ms",
                    catalog.origin,
                    catalog.providers.len(),
                    started.elapsed().as_secs_f64() * 1e3
                );
            }
            catalog
        })
    }
}

/// The user's models first, then the catalog's (deduplicated by id). A user model with the id of
/// a catalog model keeps what the user set and takes the rest (prices when the user gave none,
/// name, context window, output budget) from the catalog.
pub(crate) fn merge_models(user: &[Model], catalog: &[Model]) -> Vec<Model> {
    let mut out: Vec<Model> = Vec::with_capacity(user.len() + catalog.len());
    for u in user {
        let mut m = u.clone();
        if let Some(c) = catalog.iter().find(|c| c.id == u.id) {
            let c = c.clone();
            if m.cost_per_1m_in.is_none() && m.cost_per_1m_out.is_none() {
                m.cost_per_1m_in = c.cost_per_1m_in;
                m.cost_per_1m_out = c.cost_per_1m_out;
                m.cost_per_1m_in_cached = c.cost_per_1m_in_cached;
                m.cost_per_1m_out_cached = c.cost_per_1m_out_cached;
                m.price_source = c.price_source;
            }
            m.name = m.name.or(c.name);
            if m.context_window == 0 {
                m.context_window = c.context_window;
                m.window_source = c.window_source;
            }
            if m.default_max_tokens == 0 {
                m.default_max_tokens = c.default_max_tokens;
            }
            m.can_reason |= c.can_reason;
            m.supports_attachments |= c.supports_attachments;
        }
        out.push(m);
    }
    for c in catalog {
        if !out.iter().any(|m| m.id == c.id) {
            out.push(c.clone());
        }
    }
    out
}

/// The cache, if present and valid; a corrupt cache is reported and ignored.
fn read_cache(dir: &Path, warnings: &mut Vec<String>) -> Option<Catalog> {
    let path = store::cache_path(dir);
    let bytes = std::fs::read(&path).ok()?;
    let index = store::read_index(dir, &path, bytes.len()).or_else(|| {
        // First read of this cache: split it once and keep the split for the next start.
        let entries = split::providers(&bytes)?;
        store::write_index(dir, &path, bytes.len(), &split::to_rows(&entries));
        Some(entries)
    });
    match schema::parse_indexed(&bytes, index) {
        Ok(providers) => Some(Catalog {
            providers,
            origin: Origin::Cache(path),
        }),
        Err(e) => {
            warnings.push(format!(
                "ignoring the provider cache {}: {e}; run 'crush update-providers' to replace it",
                path.display()
            ));
            None
        }
    }
}

/// Why auto-update kept the catalog it had (the warning of [`load`]).
#[derive(Debug)]
enum RefreshError {
    Fetch(store::FetchError),
    /// A 304 when there is no cache to keep.
    NoCache,
    Unusable(schema::ParseError),
}

impl fmt::Display for RefreshError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefreshError::Fetch(e) => write!(f, "{e}"),
            RefreshError::NoCache => f.write_str("HTTP 304 but there is no cache"),
            RefreshError::Unusable(e) => write!(f, "the server sent an unusable catalog: {e}"),
        }
    }
}

impl std::error::Error for RefreshError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RefreshError::Fetch(e) => Some(e),
            RefreshError::NoCache => None,
            RefreshError::Unusable(e) => Some(e),
        }
    }
}

/// Loads the catalog per `settings`; returns it with the warnings to show.
pub(crate) fn load(settings: &Settings) -> (Catalog, Vec<String>) {
    let mut warnings = Vec::new();
    let cached = read_cache(&settings.dir, &mut warnings);
    if !settings.auto_update {
        return (cached.unwrap_or_else(embedded), warnings);
    }
    let url = settings.url();
    let meta = store::read_meta(&settings.dir);
    let same_url = meta.url.as_deref() == Some(url.as_str());
    let wait = if meta.ok {
        settings.ttl
    } else {
        RETRY_AFTER_FAILURE
    };
    let age = store::now_secs().saturating_sub(meta.checked);
    let fresh = same_url && meta.checked > 0 && age < wait.as_secs();
    // A fresh check (successful or not) means: do not ask again yet.
    if fresh && (cached.is_some() || !meta.ok) {
        return (cached.unwrap_or_else(embedded), warnings);
    }
    let etag = meta
        .etag
        .as_deref()
        .filter(|_| same_url && cached.is_some());
    let mut record = store::Meta {
        etag: meta.etag.clone().filter(|_| same_url),
        url: Some(url.clone()),
        checked: store::now_secs(),
        ok: false,
    };
    let outcome = match store::fetch(&url, etag, settings.timeout) {
        Ok(store::Fetched::NotModified) if cached.is_some() => Ok(None),
        Ok(store::Fetched::NotModified) => Err(RefreshError::NoCache),
        Ok(store::Fetched::Body { bytes, etag }) => schema::parse_checked(&bytes)
            .map(|providers| Some((providers, bytes, etag)))
            .map_err(RefreshError::Unusable),
        Err(e) => Err(RefreshError::Fetch(e)),
    };
    let catalog = match outcome {
        Ok(None) => {
            record.ok = true;
            cached.unwrap_or_else(embedded)
        }
        Ok(Some((providers, bytes, etag))) => {
            record.ok = true;
            record.etag = etag;
            match store::write_atomic(&store::cache_path(&settings.dir), &bytes) {
                Ok(()) => {}
                Err(e) => {
                    warnings.push(format!("provider catalog downloaded but not saved: {e}"));
                    record.etag = None;
                }
            }
            Catalog {
                providers,
                origin: Origin::Downloaded(url.clone()),
            }
        }
        Err(e) => {
            let fallback = cached.unwrap_or_else(embedded);
            warnings.push(format!(
                "cannot refresh the provider catalog from {}: {e}; using {fallback} (set CRUSH_DISABLE_PROVIDER_AUTO_UPDATE=1 to stop trying)",
                crate::net::redact_url(&url),
                fallback = fallback.origin
            ));
            fallback
        }
    };
    // Failing to record the check only means the next start checks again.
    let _ = store::write_meta(&settings.dir, &record);
    (catalog, warnings)
}

/// A failure of `crush update-providers`; the cache is left as it was.
#[derive(Debug)]
pub(crate) enum UpdateError {
    /// The source could not be read or is not a catalog (exit 2).
    Input(String),
    /// Network or disk trouble (exit 1).
    Runtime(String),
}

impl fmt::Display for UpdateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpdateError::Input(m) | UpdateError::Runtime(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for UpdateError {}

impl UpdateError {
    /// Whether the failure is the user's input (exit 2) rather than the network or disk (exit 1).
    pub(crate) fn is_usage(&self) -> bool {
        matches!(self, UpdateError::Input(_))
    }
}

/// `crush update-providers [SOURCE]` with the environment's settings and a 30 s limit
/// (`CRUSH_CATALOG_TIMEOUT_MS` overrides it).
pub(crate) fn update_providers_command(arg: Option<&str>) -> Result<String, UpdateError> {
    let mut settings = Settings::from_env(false);
    if env_nonempty("CRUSH_CATALOG_TIMEOUT_MS").is_none() {
        settings.timeout = UPDATE_TIMEOUT;
    }
    update_providers(arg, &settings)
}

/// What `update-providers SOURCE` reads.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum UpdateSource {
    Embedded,
    Url(String),
    File(PathBuf),
}

impl UpdateSource {
    /// No argument: the default URL; `embedded`; `http(s)://` base URL (+ `/v2/providers`), or
    /// a URL ending in `.json`, fetched as is; anything else is a local file.
    pub(crate) fn parse(arg: Option<&str>, settings: &Settings) -> UpdateSource {
        match arg {
            None => UpdateSource::Url(settings.url()),
            Some("embedded") => UpdateSource::Embedded,
            Some(a) if a.starts_with("http://") || a.starts_with("https://") => {
                let path = a.split(['?', '#']).next().unwrap_or(a);
                if path.ends_with(".json") {
                    UpdateSource::Url(a.to_string())
                } else {
                    UpdateSource::Url(providers_url(a))
                }
            }
            Some(p) => UpdateSource::File(PathBuf::from(p)),
        }
    }
}

/// `crush update-providers [SOURCE]`: validates the source and replaces the cache atomically.
/// Returns the line to print.
pub(crate) fn update_providers(
    arg: Option<&str>,
    settings: &Settings,
) -> Result<String, UpdateError> {
    let source = UpdateSource::parse(arg, settings);
    let (bytes, meta, from) = match &source {
        UpdateSource::Embedded => (
            EMBEDDED.to_vec(),
            store::Meta::default(),
            "the embedded copy".to_string(),
        ),
        UpdateSource::File(p) => {
            let bytes = std::fs::read(p)
                .map_err(|e| UpdateError::Input(format!("{}: cannot read: {e}", p.display())))?;
            (bytes, store::Meta::default(), p.display().to_string())
        }
        UpdateSource::Url(u) => match store::fetch(u, None, settings.timeout) {
            Ok(store::Fetched::Body { bytes, etag }) => {
                // The ETag only helps auto-update when it belongs to the URL auto-update asks.
                let meta = store::Meta {
                    etag: etag.filter(|_| *u == settings.url()),
                    ..Default::default()
                };
                (bytes, meta, crate::net::redact_url(u))
            }
            Ok(store::Fetched::NotModified) => {
                return Err(UpdateError::Runtime(format!(
                    "{}: HTTP 304 to a request without If-None-Match",
                    crate::net::redact_url(u)
                )));
            }
            Err(e) => {
                return Err(UpdateError::Runtime(format!(
                    "cannot download the provider catalog from {}: {e}",
                    crate::net::redact_url(u)
                )));
            }
        },
    };
    let providers = schema::parse_checked(&bytes)
        .map_err(|e| UpdateError::Input(format!("{from}: {e}; the cache was left unchanged")))?;
    let path = store::cache_path(&settings.dir);
    store::write_atomic(&path, &bytes)
        .map_err(|e| UpdateError::Runtime(format!("{e}; the cache was left unchanged")))?;
    // Whatever the source, the cache counts as checked now: auto-update leaves it alone for
    // one TTL (turn auto-update off to keep a custom catalog for good).
    let meta = store::Meta {
        url: Some(settings.url()),
        checked: store::now_secs(),
        ok: true,
        ..meta
    };
    let _ = store::write_meta(&settings.dir, &meta);
    let models: usize = providers.iter().map(|p| p.models.len()).sum();
    Ok(format!(
        "Updated the provider catalog from {from}: {} providers, {models} models ({})\n",
        providers.len(),
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(dir: &Path) -> Settings {
        Settings {
            auto_update: false,
            base_url: "http://catwalk.test".into(),
            dir: dir.to_path_buf(),
            timeout: Duration::from_millis(200),
            ttl: TTL,
            debug: false,
        }
    }

    #[test]
    fn sources() {
        let s = settings(Path::new("/d"));
        assert_eq!(
            UpdateSource::parse(None, &s),
            UpdateSource::Url("http://catwalk.test/v2/providers".into())
        );
        assert_eq!(
            UpdateSource::parse(Some("https://example.com/"), &s),
            UpdateSource::Url("https://example.com/v2/providers".into())
        );
        assert_eq!(
            UpdateSource::parse(Some("https://example.com/p.json"), &s),
            UpdateSource::Url("https://example.com/p.json".into())
        );
        assert_eq!(
            UpdateSource::parse(Some("embedded"), &s),
            UpdateSource::Embedded
        );
        assert_eq!(
            UpdateSource::parse(Some("./x.json"), &s),
            UpdateSource::File("./x.json".into())
        );
    }

    #[test]
    fn the_embedded_index_is_current() {
        let rows = split::to_rows(&split::providers(EMBEDDED).unwrap());
        if rows != embedded_index::ROWS {
            let head = include_str!("embedded_index.rs");
            let head = &head[..head.find("pub const").unwrap()];
            let mut text = format!("{head}pub const ROWS: &[[usize; 4]] = &[\n");
            for r in &rows {
                text.push_str(&format!("    [{}, {}, {}, {}],\n", r[0], r[1], r[2], r[3]));
            }
            text.push_str("];\n");
            if std::env::var_os("CRUSH_WRITE_CATALOG_INDEX").is_some() {
                std::fs::write("src/catalog/embedded_index.rs", text).unwrap();
            }
            panic!(
                "src/catalog/embedded_index.rs is stale (catwalk-providers.json changed): rewrite it \
                 with CRUSH_WRITE_CATALOG_INDEX=1 cargo test --lib catalog::"
            );
        }
    }

    #[test]
    fn a_cache_is_split_once_and_read_by_its_index_after() {
        let dir = tempfile::tempdir().unwrap();
        let cache = store::cache_path(dir.path());
        std::fs::write(&cache, br#"[{"id":"a","name":"A","models":[{"id":"m"}]}]"#).unwrap();
        let mut warnings = vec![];
        let first = read_cache(dir.path(), &mut warnings).unwrap();
        assert_eq!(first.providers[0].models[0].id, "m");
        let index = store::read_index(dir.path(), &cache, 45).unwrap();
        assert_eq!(split::to_rows(&index), vec![[1, 44, 31, 43]]);
        // A changed cache of another length is split anew, never read by the old index.
        std::fs::write(
            &cache,
            br#"[{"id":"b","models":[]},{"id":"c","models":[{"id":"x"}]}]"#,
        )
        .unwrap();
        let second = read_cache(dir.path(), &mut warnings).unwrap();
        assert_eq!(second.providers[1].models[0].id, "x");
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn offline_uses_the_cache_then_the_embedded_copy() {
        let t = tempfile::tempdir().unwrap();
        let s = settings(t.path());
        let (c, w) = load(&s);
        assert_eq!((c.origin, w.len()), (Origin::Embedded, 0));
        std::fs::write(
            store::cache_path(t.path()),
            br#"[{"id":"only","models":[{"id":"m"}]}]"#,
        )
        .unwrap();
        let (c, _) = load(&s);
        assert_eq!(c.providers.len(), 1);
        assert!(matches!(c.origin, Origin::Cache(_)));
        std::fs::write(store::cache_path(t.path()), b"[]").unwrap();
        let (c, w) = load(&s);
        assert_eq!(c.origin, Origin::Embedded);
        assert!(w[0].contains("ignoring the provider cache"), "{w:?}");
    }

    #[test]
    fn a_bad_file_leaves_the_cache_alone() {
        let t = tempfile::tempdir().unwrap();
        let s = settings(t.path());
        update_providers(Some("embedded"), &s).unwrap();
        let before = std::fs::read(store::cache_path(t.path())).unwrap();
        let bad = t.path().join("bad.json");
        std::fs::write(&bad, b"[]").unwrap();
        let e = update_providers(bad.to_str(), &s).unwrap_err();
        assert!(matches!(e, UpdateError::Input(_)), "{e}");
        assert!(e.to_string().contains("empty"), "{e}");
        assert_eq!(std::fs::read(store::cache_path(t.path())).unwrap(), before);
    }

    #[test]
    fn credentials_in_a_catalog_url_are_never_shown() {
        let t = tempfile::tempdir().unwrap();
        let e = update_providers(
            Some("http://user:pw-secret@127.0.0.1:1/p.json?key=q-secret"),
            &settings(t.path()),
        )
        .unwrap_err();
        let text = match e {
            UpdateError::Input(m) | UpdateError::Runtime(m) => m,
        };
        assert!(text.contains("****@127.0.0.1:1"), "{text}");
        assert!(
            !text.contains("pw-secret") && !text.contains("q-secret"),
            "{text}"
        );
    }
}
