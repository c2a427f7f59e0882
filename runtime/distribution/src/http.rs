//! The one network module: every HTTP request Atlas makes (the crawl, package
//! registries, the GitHub API, downloads, the LLM) goes through its client (rustls on
//! ring, timeouts), its redirects (followed by hand, so that a credential reaches only
//! the origin it was configured for), its one retry driver ([`Retry`]: backoff, or the
//! server's `Retry-After` capped) and its one capped body reader ([`read_capped`]).
//! Errors print through the one chain printer, `atlas_runtime::exit::one_line`.
//!
//! reqwest's own redirect policy strips `Authorization` on a cross-host hop but not on
//! the hops after it (A → B → B keeps the header for B), so clients built here follow
//! no redirect by themselves. [`send`] follows them: at every hop the credential is set
//! when the hop's origin (scheme, host, port) is the credential's and removed otherwise.
//!
//! Architecture invariant: no credential crosses an origin. *`tests/it/hardening.rs`
//! (`a_credential_never_follows_a_redirect_to_another_origin`).*

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderValue};

use crate::{Error, Result};

/// The most redirects one request follows.
pub const MAX_REDIRECTS: usize = 10;

/// Installs the process's rustls crypto provider (ring); every client needs it once.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A client with Atlas's user agent and timeouts that follows no redirect itself.
pub fn client() -> Result<reqwest::Client> {
    client_with(
        concat!("atlas/", env!("CARGO_PKG_VERSION")),
        Duration::from_secs(20),
        None,
        Some(Duration::from_secs(60)),
    )
}

/// A client with this user agent and timeouts (`total`: the whole request; `read`:
/// between bytes); it follows no redirect itself.
pub fn client_with(
    user_agent: &str,
    connect: Duration,
    total: Option<Duration>,
    read: Option<Duration>,
) -> Result<reqwest::Client> {
    install_crypto();
    let mut b = reqwest::Client::builder()
        .user_agent(user_agent)
        .connect_timeout(connect)
        .redirect(reqwest::redirect::Policy::none());
    if let Some(t) = total {
        b = b.timeout(t);
    }
    if let Some(t) = read {
        b = b.read_timeout(t);
    }
    b.build().map_err(|e| crate::remote("starting the HTTP client", e))
}

/// A secret header value bound to the one origin it was given for.
#[derive(Clone)]
pub struct Credential {
    origin: url::Origin,
    value: HeaderValue,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential").field("origin", &self.origin.ascii_serialization()).finish_non_exhaustive()
    }
}

impl Credential {
    /// `Authorization: Bearer <token>` for the origin of `for_url`.
    pub fn bearer(for_url: &str, token: &str) -> Result<Credential> {
        Credential::header(for_url, format!("Bearer {token}"))
    }

    /// `Authorization: <token>`, the token as it is (how cargo sends a registry's
    /// token), for the origin of `for_url`.
    pub fn raw(for_url: &str, token: &str) -> Result<Credential> {
        Credential::header(for_url, token.to_owned())
    }

    /// `Authorization: Basic <base64(user:password)>` (a Python index's user info, as
    /// pip and uv send it), for the origin of `for_url`.
    pub fn basic(for_url: &str, user: &str, password: &str) -> Result<Credential> {
        use base64::Engine as _;
        let pair = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        Credential::header(for_url, format!("Basic {pair}"))
    }

    fn header(for_url: &str, value: String) -> Result<Credential> {
        let u =
            url::Url::parse(for_url).map_err(|e| Error::Usage(format!("{}: not a URL ({e})", redact_url(for_url))))?;
        let mut value = HeaderValue::from_str(&value)
            .map_err(|_| Error::Usage("the token holds characters a header cannot carry".into()))?;
        value.set_sensitive(true);
        Ok(Credential { origin: u.origin(), value })
    }

    /// Whether `url` is on the credential's origin.
    pub fn applies_to(&self, url: &url::Url) -> bool {
        url.origin() == self.origin
    }

    /// The token itself, for redacting it from text an endpoint echoes.
    pub fn secret(&self) -> Option<&str> {
        let v = self.value.to_str().ok()?;
        Some(v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("Basic ")).unwrap_or(v))
    }
}

/// Whether [`send`] follows redirects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redirects {
    /// Up to [`MAX_REDIRECTS`], the credential only on its own origin.
    Follow,
    /// None: a 3xx answer is returned as it came.
    Refuse,
    /// Up to this many, every hop on the first URL's host and port and none twice
    /// (a crawl stays on its site).
    SameHost(usize),
}

/// Why [`send_raw`] gave no response.
#[derive(Debug)]
pub enum SendError {
    /// The request failed at `url` (a connection, a timeout, a cut body): worth a retry.
    Transport { url: String, error: reqwest::Error },
    /// A redirect that is not followed: off the host, a loop, too many, not HTTP.
    Redirect(String),
}

/// Sends `req`, following redirects by `redirects`; `cred` is attached to each hop on
/// its origin and to no other. A 303 (and a 301 or 302 after a POST) becomes a GET
/// without a body, as browsers do.
pub async fn send(
    client: &reqwest::Client,
    req: reqwest::Request,
    cred: Option<&Credential>,
    redirects: Redirects,
) -> Result<reqwest::Response> {
    send_raw(client, req, cred, redirects).await.map_err(|e| match e {
        SendError::Transport { url, error } => Error::Remote(format!("{url}: {}", describe(&error))),
        SendError::Redirect(why) => Error::Remote(why),
    })
}

/// [`send`], with the transport error kept whole (for callers that retry on it).
pub async fn send_raw(
    client: &reqwest::Client,
    req: reqwest::Request,
    cred: Option<&Credential>,
    redirects: Redirects,
) -> std::result::Result<reqwest::Response, SendError> {
    let max = match redirects {
        Redirects::Follow => MAX_REDIRECTS,
        Redirects::Refuse => 0,
        Redirects::SameHost(n) => n,
    };
    let first = req.url().clone();
    let mut seen = vec![first.clone()];
    let mut req = req;
    for _hop in 0..=max {
        req.headers_mut().remove(AUTHORIZATION);
        if let Some(c) = cred.filter(|c| c.applies_to(req.url())) {
            req.headers_mut().insert(AUTHORIZATION, c.value.clone());
        }
        let next = match redirects {
            Redirects::Refuse => None,
            Redirects::Follow | Redirects::SameHost(_) => req.try_clone(),
        };
        let what = redact_url(req.url().as_str());
        let resp = client.execute(req).await.map_err(|error| SendError::Transport { url: what.clone(), error })?;
        let status = resp.status().as_u16();
        let (Some(mut next), true) = (next, matches!(status, 301 | 302 | 303 | 307 | 308)) else {
            return Ok(resp);
        };
        let Some(to) = location(&resp) else { return Ok(resp) };
        if !matches!(to.scheme(), "http" | "https") {
            return Err(SendError::Redirect(format!("{what}: redirected to a {} URL; refusing", to.scheme())));
        }
        if let Redirects::SameHost(_) = redirects {
            if first.host_str() != to.host_str() || first.port_or_known_default() != to.port_or_known_default() {
                return Err(SendError::Redirect(format!("off-site redirect to {to}")));
            }
            if seen.contains(&to) {
                return Err(SendError::Redirect(format!("redirect loop at {to}")));
            }
            seen.push(to.clone());
        }
        if status == 303 || (matches!(status, 301 | 302) && next.method() == reqwest::Method::POST) {
            *next.method_mut() = reqwest::Method::GET;
            *next.body_mut() = None;
            next.headers_mut().remove(reqwest::header::CONTENT_TYPE);
            next.headers_mut().remove(reqwest::header::CONTENT_LENGTH);
        }
        *next.url_mut() = to;
        req = next;
    }
    Err(SendError::Redirect(match redirects {
        Redirects::SameHost(n) => format!("more than {n} redirects"),
        _ => format!("{}: more than {max} redirects", redact_url(req.url().as_str())),
    }))
}

/// Retry waits: exponential backoff with full jitter (uniform in
/// `[0, min(max, base·2^attempt)]`), and the server's `Retry-After` capped. The one
/// retry policy of every HTTP client (the crawl, downloads).
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Backoff {
    /// The wait before retry number `attempt + 1`.
    pub fn wait(&self, attempt: u32) -> Duration {
        let base = self.base.as_millis() as u64;
        let ceiling = base.saturating_mul(1u64 << attempt.min(20)).min(self.max.as_millis() as u64);
        Duration::from_millis(fastrand::u64(0..=ceiling))
    }
}

/// The one retry driver every HTTP caller uses (the crawl, the GitHub listing,
/// resumable downloads): tries until one is done, waiting between tries the server's
/// `Retry-After` (capped) or else the [`Backoff`].
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    pub backoff: Backoff,
    /// Tries after the first.
    pub max_retries: u32,
    /// The longest `Retry-After` waited out.
    pub retry_after_cap: Duration,
}

/// What one try came to.
#[derive(Debug)]
pub enum Attempt<T> {
    /// An answer (a failure that a retry would not change included).
    Done(T),
    /// Worth another try; `after` is the server's wait when it gave one.
    Again { after: Option<Duration>, why: String },
}

/// No tries left: how many were made, and what the last one came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GaveUp {
    pub attempts: u32,
    pub why: String,
}

impl Retry {
    /// `attempt(n)` (`n` from 0) until it is [`Attempt::Done`] or no retries are
    /// left. `on_retry(n, why)` hears each try that is retried, before the wait; the
    /// last try's `why` is in [`GaveUp`].
    pub async fn run<T, F: Future<Output = Attempt<T>>>(
        &self,
        mut attempt: impl FnMut(u32) -> F,
        mut on_retry: impl FnMut(u32, &str),
    ) -> std::result::Result<T, GaveUp> {
        let mut n = 0;
        loop {
            match attempt(n).await {
                Attempt::Done(t) => return Ok(t),
                Attempt::Again { after, why } => {
                    if n >= self.max_retries {
                        return Err(GaveUp { attempts: n + 1, why });
                    }
                    on_retry(n, &why);
                    let wait = after.map_or_else(|| self.backoff.wait(n), |d| d.min(self.retry_after_cap));
                    tokio::time::sleep(wait).await;
                    n += 1;
                }
            }
        }
    }
}

/// Why a response body was not read whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// Over the cap (by its Content-Length, or as it streamed): bytes seen so far.
    #[error("over the cap ({0} bytes read)")]
    TooBig(usize),
    /// The connection failed while reading (one line): worth a retry.
    #[error("{0}")]
    Transport(String),
}

/// The one capped body reader: a body of at most `limit` bytes, read as it streams;
/// a remote that sends (or announces) more is refused before it fills memory.
pub async fn read_capped(mut resp: reqwest::Response, limit: usize) -> std::result::Result<Vec<u8>, ReadError> {
    if let Some(n) = resp
        .headers()
        .get(reqwest::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        && n > limit
    {
        return Err(ReadError::TooBig(n));
    }
    let mut body = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > limit {
                    return Err(ReadError::TooBig(body.len() + chunk.len()));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(e) => return Err(ReadError::Transport(atlas_runtime::exit::one_line(&e))),
        }
    }
}

/// Parses Retry-After: delay-seconds or an HTTP date. A past date or garbage is an
/// error, and the caller falls back to backoff.
pub fn retry_after(value: &str, now: std::time::SystemTime) -> std::result::Result<Duration, &'static str> {
    let v = value.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        return v.parse::<u64>().map(Duration::from_secs).map_err(|_| "is out of range");
    }
    let when = httpdate::parse_http_date(v).map_err(|_| "is neither seconds nor an HTTP date")?;
    when.duration_since(now).map_err(|_| "is in the past")
}

/// A redirect's target, resolved against the URL that answered.
pub fn location(resp: &reqwest::Response) -> Option<url::Url> {
    let loc = resp.headers().get(reqwest::header::LOCATION)?.to_str().ok()?;
    resp.url().join(loc).ok()
}

/// GET `url` with no credential, following redirects.
pub async fn get(client: &reqwest::Client, url: &str) -> Result<reqwest::Response> {
    let req = client.get(url).build().map_err(|e| Error::Usage(format!("{}: {e}", redact_url(url))))?;
    send(client, req, None, Redirects::Follow).await
}

/// A URL as it may be printed: a password in it replaced by `***`.
pub fn redact_url(s: &str) -> String {
    match url::Url::parse(s) {
        Ok(mut u) if u.password().is_some() || !u.username().is_empty() => {
            let _ = u.set_password(None);
            let _ = u.set_username("***");
            u.to_string()
        }
        Ok(_) => s.to_owned(),
        // Not a URL to parse, yet it may still hold `scheme://user:password@`.
        Err(_) => redact(&s.chars().take(200).collect::<String>(), None),
    }
}

/// `text` with every occurrence of `secret` (and of credentials in URLs) replaced by
/// `***`, for text an endpoint sent back.
pub fn redact(text: &str, secret: Option<&str>) -> String {
    let mut out = match secret.filter(|s| s.len() >= 4) {
        Some(s) => text.replace(s, "***"),
        None => text.to_owned(),
    };
    // `scheme://user:password@` anywhere in the text.
    let mut i = 0;
    while let Some(at) = out[i..].find("://").map(|p| p + i + 3) {
        let rest = &out[at..];
        let end = rest.find(|c: char| c == '/' || c.is_whitespace() || c == '"' || c == '\'').unwrap_or(rest.len());
        if let Some(userinfo) = rest[..end].rfind('@') {
            out.replace_range(at..at + userinfo, "***");
            i = at + 4;
        } else {
            i = at;
        }
    }
    out
}

/// reqwest's error, said plainly in one line.
pub fn describe(e: &reqwest::Error) -> String {
    let root = atlas_runtime::exit::causes(e).last().map_or_else(String::new, |c| redact(&c.to_string(), None));
    if e.is_connect() {
        format!("could not connect: {root}")
    } else if e.is_timeout() {
        "timed out".to_owned()
    } else {
        root
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_texts_lose_their_secrets() {
        assert_eq!(redact_url("http://u:pw@127.0.0.1:9/v1"), "http://***@127.0.0.1:9/v1");
        assert_eq!(redact_url("http://127.0.0.1:9/v1"), "http://127.0.0.1:9/v1");
        assert_eq!(redact_url("http://u:pw@bad host/"), "http://***@bad host/", "not a URL, still redacted");
        assert_eq!(redact("bad key sk-secret-1 sent", Some("sk-secret-1")), "bad key *** sent");
        assert_eq!(redact("see http://a:b@h/x and https://h2/", None), "see http://***@h/x and https://h2/");
    }

    #[test]
    fn a_credential_applies_to_its_origin_only() {
        let c = Credential::bearer("http://127.0.0.1:8080/v1", "t0ken").unwrap();
        let u = |s: &str| url::Url::parse(s).unwrap();
        assert!(c.applies_to(&u("http://127.0.0.1:8080/other")));
        assert!(!c.applies_to(&u("http://127.0.0.1:8081/v1")));
        assert!(!c.applies_to(&u("https://127.0.0.1:8080/v1")));
        assert!(!c.applies_to(&u("http://localhost:8080/v1")));
        assert_eq!(c.secret(), Some("t0ken"));
        assert!(!format!("{c:?}").contains("t0ken"));
    }
}
