//! One polite HTTP GET with conditional validators, retries, timeouts, a body cap and
//! same-site redirects.

use std::time::{Duration, SystemTime};

use atlas_dist::http::{self, Attempt};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, ETAG, HeaderMap, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED, RETRY_AFTER};
use url::Url;

use super::CrawlParams;

#[derive(Debug)]
pub enum Outcome {
    Fetched {
        body: Vec<u8>,
        etag: Option<String>,
        last_modified: Option<String>,
        content_type: Option<String>,
    },
    NotModified,
    /// 404 or 410: the page is gone upstream.
    Gone(u16),
    /// 401 or 403: the server wants credentials (or refuses the ones sent).
    Denied(u16),
    Failed(String),
}

/// What a GET sends besides the URL ([`Fetcher::get_with`]).
#[derive(Debug, Default)]
pub struct Extra<'a> {
    /// Validators of a conditional GET.
    pub etag: Option<&'a str>,
    pub last_modified: Option<&'a str>,
    pub accept: Option<&'a str>,
    /// Sent on hops to its own origin only.
    pub credential: Option<&'a http::Credential>,
    /// Follow redirects to other hosts (a registry's downloads), not only the URL's.
    pub any_host: bool,
}

#[derive(Debug)]
pub struct Fetcher {
    client: reqwest::Client,
    p: CrawlParams,
    backoff: http::Backoff,
}

/// The crawl's waits between tries, from its params.
pub(super) fn backoff(p: &CrawlParams) -> http::Backoff {
    http::Backoff { base: Duration::from_millis(p.backoff_base_ms), max: Duration::from_millis(p.backoff_max_ms) }
}

/// The User-Agent: product token, version and a contact URL.
pub fn user_agent(p: &CrawlParams) -> String {
    p.user_agent.clone().unwrap_or_else(|| format!("atlas/{} (+{})", env!("CARGO_PKG_VERSION"), p.contact_url))
}

impl Fetcher {
    /// The one HTTP client policy (`atlas_dist::http`) with the crawl's timeouts; the
    /// redirects are followed by hand, on the site's own host only.
    pub fn new(p: &CrawlParams) -> anyhow::Result<Fetcher> {
        let client = http::client_with(
            &user_agent(p),
            Duration::from_secs_f64(p.connect_timeout_s),
            Some(Duration::from_secs_f64(p.total_timeout_s)),
            Some(Duration::from_secs_f64(p.read_timeout_s)),
        )?;
        Ok(Fetcher { client, p: p.clone(), backoff: backoff(p) })
    }

    /// GETs `url`, retrying what is worth retrying. `notes` collects one line per retry.
    pub async fn get(
        &self,
        url: &Url,
        etag: Option<&str>,
        last_modified: Option<&str>,
        limit: usize,
        notes: &mut Vec<String>,
    ) -> Outcome {
        let conditional = Extra { etag, last_modified, ..Extra::default() };
        self.get_with(url, &conditional, limit, notes).await
    }

    /// [`Fetcher::get`] with what a registry needs besides: an `Accept`, a credential
    /// bound to its origin, redirects to other hosts.
    pub async fn get_with(&self, url: &Url, x: &Extra<'_>, limit: usize, notes: &mut Vec<String>) -> Outcome {
        let (etag, last_modified) = (x.etag, x.last_modified);
        let redirects =
            if x.any_host { http::Redirects::Follow } else { http::Redirects::SameHost(self.p.max_redirects) };
        let attempt = move |_| async move {
            let mut req = self.client.get(url.clone());
            if let Some(e) = etag {
                req = req.header(IF_NONE_MATCH, e);
            }
            if let Some(m) = last_modified {
                req = req.header(IF_MODIFIED_SINCE, m);
            }
            if let Some(a) = x.accept {
                req = req.header(reqwest::header::ACCEPT, a);
            }
            let req = match req.build() {
                Ok(r) => r,
                Err(e) => return Attempt::Done(Outcome::Failed(atlas_runtime::exit::one_line(&e))),
            };
            let resp = match http::send_raw(&self.client, req, x.credential, redirects).await {
                Ok(resp) => resp,
                Err(http::SendError::Redirect(why)) => return Attempt::Done(Outcome::Failed(why)),
                Err(http::SendError::Transport { error, .. }) => {
                    return Attempt::Again { after: None, why: atlas_runtime::exit::one_line(&error) };
                }
            };
            let status = resp.status();
            Attempt::Done(match status {
                // A 304 answers only a conditional GET; to any other it is a broken
                // server, and that page fails (not the crawl).
                StatusCode::NOT_MODIFIED if etag.is_some() || last_modified.is_some() => Outcome::NotModified,
                StatusCode::NOT_MODIFIED => Outcome::Failed("HTTP 304 Not Modified to an unconditional GET".to_owned()),
                StatusCode::NOT_FOUND | StatusCode::GONE => Outcome::Gone(status.as_u16()),
                s if s.is_success() => {
                    let headers = resp.headers().clone();
                    match http::read_capped(resp, limit).await {
                        Ok(body) => Outcome::Fetched {
                            body,
                            etag: header(&headers, ETAG),
                            last_modified: header(&headers, LAST_MODIFIED),
                            content_type: header(&headers, CONTENT_TYPE),
                        },
                        Err(http::ReadError::TooBig(n)) => {
                            Outcome::Failed(format!("body over the {limit}-byte cap ({n} bytes read); cut off"))
                        }
                        Err(http::ReadError::Transport(why)) => return Attempt::Again { after: None, why },
                    }
                }
                StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
                    let (after, why) = match resp.headers().get(RETRY_AFTER).map(|v| v.to_str().unwrap_or("")) {
                        None => (None, "no Retry-After; backoff".to_owned()),
                        Some(v) => match retry_after(v, SystemTime::now()) {
                            Ok(d) if d > self.cap() => (Some(d), format!("Retry-After {v} capped to {:?}", self.cap())),
                            Ok(d) => (Some(d), format!("Retry-After {v}")),
                            Err(e) => (None, format!("Retry-After {v:?} {e}; backoff")),
                        },
                    };
                    return Attempt::Again { after, why: format!("HTTP {} ({why})", status.as_u16()) };
                }
                s if s.is_server_error() => return Attempt::Again { after: None, why: format!("HTTP {}", s.as_u16()) },
                s if matches!(s.as_u16(), 401 | 403) => Outcome::Denied(s.as_u16()),
                s => Outcome::Failed(format!("HTTP {}", s.as_u16())),
            })
        };
        let retry = http::Retry { backoff: self.backoff, max_retries: self.p.max_retries, retry_after_cap: self.cap() };
        match retry.run(attempt, |n, why| notes.push(format!("attempt {}: {why}", n + 1))).await {
            Ok(outcome) => outcome,
            Err(g) => {
                let last = format!("attempt {}: {}", g.attempts, g.why);
                notes.push(last.clone());
                Outcome::Failed(format!("gave up after {} attempts ({last})", g.attempts))
            }
        }
    }

    fn cap(&self) -> Duration {
        Duration::from_secs_f64(self.p.retry_after_cap_s)
    }
}

fn header(h: &HeaderMap, name: reqwest::header::HeaderName) -> Option<String> {
    h.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

pub use atlas_dist::http::retry_after;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_forms() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2026 07:28:00 GMT").unwrap();
        assert_eq!(retry_after("120", now), Ok(Duration::from_secs(120)));
        assert_eq!(retry_after("Wed, 21 Oct 2026 07:29:00 GMT", now), Ok(Duration::from_secs(60)));
        assert_eq!(retry_after("Wed, 21 Oct 2026 07:00:00 GMT", now), Err("is in the past"));
        assert_eq!(retry_after("soon", now), Err("is neither seconds nor an HTTP date"));
        assert!(retry_after("-5", now).is_err());
    }
}
