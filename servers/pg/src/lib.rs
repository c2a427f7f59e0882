//! PostgreSQL with pgvector: `atlas export` loads a bundle into a schema of its own
//! (`export/`), `atlas serve rag --backend` serves the exported bundles from there
//! (`index.rs`: the candidates a search asks for, as SQL). One connection policy for
//! both: a pool with timeouts on its own small runtime, so the synchronous search path
//! can call it from any thread. docs/scaling.md.

mod export;
mod index;

pub use export::{Provenance, VectorIndex, drop_bundle, export, list};
pub use index::{Unopened, open_all};

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use atlas_runtime::exit::UsageError;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Timeouts};

/// How long a connection may take to open, and a statement to run.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const STATEMENT_TIMEOUT_MS: u32 = 10_000;
/// How long past its statement timeout a call waits before giving up on the database
/// itself: the statement timeout is enforced by the server, and a server that stopped
/// answering (paused, a dead network) enforces nothing.
const DEADLINE_MARGIN: Duration = Duration::from_secs(2);
/// Export statements (COPY of a batch, index builds) may run long.
const EXPORT_STATEMENT_TIMEOUT_MS: u32 = 0;
/// The catalog of exported bundles.
const CATALOG: &str = "atlas.bundles";
/// BM25's constants, as tantivy scores (its `bm25.rs`).
const BM25_K1: f64 = 1.2;
const BM25_B: f64 = 0.75;
/// Postings per stored block: a query reads each term's first block per kind, its
/// best postings (`index.rs`).
const POSTING_BLOCK: usize = 2_000;
/// PostgreSQL truncates longer identifiers (two bundles could then share a schema).
const MAX_IDENTIFIER: usize = 63;

/// A database: a connection pool on a runtime of its own.
pub struct Db {
    pool: Pool,
    /// The most one [`Db::run`] may take, a connection included (none for exports,
    /// whose statements may run long).
    deadline: Option<Duration>,
    /// Where it is, without the password (what messages name).
    pub label: String,
    rt: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("label", &self.label).finish()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // Dropping a runtime blocks; a server drops its bundles on an async thread.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl Db {
    /// A pool of up to `size` connections to `url` (`postgres://…`), each with the
    /// connect and statement timeouts set. Connects once to fail early.
    pub fn connect(url: &str, size: usize, statement_timeout_ms: Option<u32>) -> anyhow::Result<Arc<Db>> {
        let mut cfg: tokio_postgres::Config = url.parse().map_err(|e| {
            UsageError(format!("{} is not a PostgreSQL URL ({e}); pass postgres://USER@HOST:PORT/DB", redact(url)))
        })?;
        if cfg.get_connect_timeout().is_none() {
            cfg.connect_timeout(CONNECT_TIMEOUT);
        }
        let timeout = statement_timeout_ms.unwrap_or(STATEMENT_TIMEOUT_MS);
        // Statements are prepared once per connection (`index::prepared`) and planned
        // for each call's parameters: a filter's selectivity (a language, a path
        // prefix) decides between the HNSW index and a scan, which a generic plan
        // cannot know.
        cfg.options(format!(
            "-c statement_timeout={timeout} -c hnsw.ef_search=100 -c hnsw.iterative_scan=relaxed_order \
             -c plan_cache_mode=force_custom_plan"
        ));
        cfg.application_name("atlas");
        let label = redact(url);
        let mgr = Manager::from_config(cfg, tls()?, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("atlas-pg")
            .enable_all()
            .build()
            .context("starting the database runtime")?;
        let pool = Pool::builder(mgr)
            .max_size(size.max(1))
            .timeouts(Timeouts {
                wait: Some(CONNECT_TIMEOUT),
                create: Some(CONNECT_TIMEOUT),
                recycle: Some(CONNECT_TIMEOUT),
            })
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .context("building the connection pool")?;
        let deadline = (timeout > 0).then(|| Duration::from_millis(u64::from(timeout)) + DEADLINE_MARGIN);
        let db = Arc::new(Db { pool, deadline, label, rt: Some(rt) });
        db.run(async |c| {
            c.simple_query("SELECT 1").await?;
            Ok(())
        })
        .map_err(|e| match format!("{e:#}") {
            m if m.contains("certificate") => anyhow::anyhow!(
                "{m}; set PGSSLROOTCERT to the file of the CA certificate that signed the server's (or sslmode=disable on a network you trust)"
            ),
            _ => e,
        })
        .with_context(|| format!("connecting to {}", db.label))?;
        Ok(db)
    }

    /// Runs `f` with a pooled connection, waiting for it here (any thread that is not
    /// itself running async code), within the deadline: a database that stops
    /// answering makes this an error, never a hang.
    pub fn run<T>(&self, f: impl AsyncFnOnce(&deadpool_postgres::Client) -> anyhow::Result<T>) -> anyhow::Result<T> {
        self.block_on(async {
            let work = async { f(&self.client().await?).await };
            match self.deadline {
                None => work.await,
                Some(d) => tokio::time::timeout(d, work).await.unwrap_or_else(|_| {
                    Err(anyhow::anyhow!(
                        "the database did not answer within {}s; check that it is running and reachable",
                        d.as_secs()
                    ))
                }),
            }
        })
    }

    /// Waits here for `work` on the database's runtime.
    fn block_on<T>(&self, work: impl Future<Output = T>) -> T {
        self.rt.as_ref().expect("the runtime lives as long as the pool").block_on(work)
    }

    /// A pooled connection.
    async fn client(&self) -> anyhow::Result<deadpool_postgres::Client> {
        self.pool.get().await.map_err(|e| anyhow::anyhow!(pool_error(&e)))
    }
}

/// TLS for every connection, as the URL's `sslmode` asks (`prefer` by default: TLS when
/// the server offers it). The server's certificate is always verified, as libpq's
/// `verify-full` does: against `PGSSLROOTCERT` (a PEM file of CA certificates, libpq's
/// variable) when set, else the system's trust store.
fn tls() -> anyhow::Result<tokio_postgres_rustls::MakeRustlsConnect> {
    use rustls_platform_verifier::ConfigVerifierExt as _;
    atlas_dist::http::install_crypto();
    let config = match std::env::var_os("PGSSLROOTCERT") {
        Some(path) => {
            use rustls::pki_types::{CertificateDer, pem::PemObject as _};
            let shown = std::path::Path::new(&path).display().to_string();
            let bad =
                |why: String| UsageError(format!("PGSSLROOTCERT {shown}: {why}; name a PEM file of CA certificates"));
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(&path).map_err(|e| bad(e.to_string()))? {
                roots.add(cert.map_err(|e| bad(e.to_string()))?).map_err(|e| bad(e.to_string()))?;
            }
            if roots.is_empty() {
                return Err(bad("it holds no certificate".into()).into());
            }
            rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth()
        }
        None => rustls::ClientConfig::with_platform_verifier().context("loading the system's trusted certificates")?,
    };
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// A driver error as an `anyhow` error of one line.
fn pg(e: tokio_postgres::Error) -> anyhow::Error {
    anyhow::anyhow!(db_error(&e))
}

/// Whether the catalog of exports exists (no export has run there otherwise).
async fn catalog_exists(c: &deadpool_postgres::Client) -> anyhow::Result<bool> {
    Ok(c.query_one(&format!("SELECT to_regclass('{CATALOG}') IS NOT NULL"), &[]).await.map_err(pg)?.get(0))
}

/// A pool error as one line (deadpool's wrap the driver's).
fn pool_error(e: &deadpool_postgres::PoolError) -> String {
    match e {
        deadpool_postgres::PoolError::Backend(e) => db_error(e),
        deadpool_postgres::PoolError::Timeout(_) => "the database did not answer in time".into(),
        other => other.to_string(),
    }
}

/// A driver error as one line: the server's message when it sent one.
pub fn db_error(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => d.message().to_owned(),
        None => atlas_runtime::exit::one_line(e),
    }
}

/// `url` without its password (and without a `password=` parameter).
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            if u.password().is_some() {
                let _ = u.set_password(Some("***"));
            }
            let pairs: Vec<(String, String)> = u
                .query_pairs()
                .map(|(k, v)| (k.to_string(), if k == "password" { "***".to_owned() } else { v.to_string() }))
                .collect();
            if !pairs.is_empty() {
                u.query_pairs_mut().clear().extend_pairs(pairs);
            }
            u.to_string()
        }
        Err(_) => "the database URL".to_owned(),
    }
}

/// The schema of `name@version`, quoted for SQL. Names and versions are checked when a
/// bundle is built and installed; here the identifier is quoted whatever it holds, and
/// one PostgreSQL would truncate is refused.
pub fn schema_ident(library: &str) -> anyhow::Result<String> {
    if library.len() > MAX_IDENTIFIER || library.contains('\0') {
        anyhow::bail!(UsageError(format!(
            "{library:?} is over PostgreSQL's {MAX_IDENTIFIER}-byte identifier limit; shorten the bundle's name"
        )));
    }
    Ok(format!("\"{}\"", library.replace('"', "\"\"")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_never_reaches_a_label() {
        let l = redact("postgres://atlas:s3cret@db.example:5432/docs?password=other&sslmode=disable");
        assert!(!l.contains("s3cret") && !l.contains("other"), "{l}");
        assert!(l.contains("db.example:5432/docs") && l.contains("sslmode=disable"));
        assert_eq!(redact("not a url with s3cret"), "the database URL");
    }

    #[test]
    fn schemas_are_quoted_and_never_truncated() {
        assert_eq!(schema_ident("docs@1.2.0").unwrap(), "\"docs@1.2.0\"");
        assert_eq!(schema_ident("a\"b@1").unwrap(), "\"a\"\"b@1\"");
        assert!(schema_ident(&format!("{}@1", "x".repeat(70))).is_err());
    }
}
