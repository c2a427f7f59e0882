//! One polite HTTP GET with conditional validators, retries, timeouts, a body cap and
//! same-site redirects.

use std::time::{Duration, SystemTime};

use reqwest::StatusCode;
use reqwest::header::{
    CONTENT_LENGTH, CONTENT_TYPE, ETAG, HeaderMap, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED, RETRY_AFTER,
};
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
    Failed(String),
}

#[derive(Debug)]
pub struct Fetcher {
    client: reqwest::Client,
    p: CrawlParams,
}

/// The User-Agent: product token, version and a contact URL.
pub fn user_agent(p: &CrawlParams) -> String {
    p.user_agent.clone().unwrap_or_else(|| format!("atlas/{} (+{})", env!("CARGO_PKG_VERSION"), p.contact_url))
}

impl Fetcher {
    pub fn new(p: &CrawlParams) -> anyhow::Result<Fetcher> {
        // reqwest is built without a default crypto provider; install ring once.
        atlas_dist::http::install_crypto();
        let max_redirects = p.max_redirects;
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            let first = attempt.previous().first().cloned();
            if attempt.previous().len() > max_redirects {
                attempt.error(format!("more than {max_redirects} redirects"))
            } else if first.is_some_and(|f| {
                f.host_str() != attempt.url().host_str()
                    || f.port_or_known_default() != attempt.url().port_or_known_default()
            }) {
                let to = attempt.url().to_string();
                attempt.error(format!("off-site redirect to {to}"))
            } else if attempt.previous().iter().any(|u| u == attempt.url()) {
                let to = attempt.url().to_string();
                attempt.error(format!("redirect loop at {to}"))
            } else {
                attempt.follow()
            }
        });
        let client = reqwest::Client::builder()
            .user_agent(user_agent(p))
            .connect_timeout(Duration::from_secs_f64(p.connect_timeout_s))
            .read_timeout(Duration::from_secs_f64(p.read_timeout_s))
            .timeout(Duration::from_secs_f64(p.total_timeout_s))
            .redirect(policy)
            .build()?;
        Ok(Fetcher { client, p: p.clone() })
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
        let mut attempt = 0u32;
        loop {
            let mut req = self.client.get(url.clone());
            if let Some(e) = etag {
                req = req.header(IF_NONE_MATCH, e);
            }
            if let Some(m) = last_modified {
                req = req.header(IF_MODIFIED_SINCE, m);
            }
            let wait = match req.send().await {
                Ok(resp) => {
                    let status = resp.status();
                    match status {
                        // A 304 answers only a conditional GET; to any other it is a broken
                        // server, and that page fails (not the crawl).
                        StatusCode::NOT_MODIFIED if etag.is_some() || last_modified.is_some() => {
                            return Outcome::NotModified;
                        }
                        StatusCode::NOT_MODIFIED => {
                            return Outcome::Failed("HTTP 304 Not Modified to an unconditional GET".to_owned());
                        }
                        StatusCode::NOT_FOUND | StatusCode::GONE => return Outcome::Gone(status.as_u16()),
                        s if s.is_success() => {
                            let headers = resp.headers().clone();
                            match read_capped(resp, limit).await {
                                Ok(body) => {
                                    return Outcome::Fetched {
                                        body,
                                        etag: header(&headers, ETAG),
                                        last_modified: header(&headers, LAST_MODIFIED),
                                        content_type: header(&headers, CONTENT_TYPE),
                                    };
                                }
                                Err(ReadError::TooBig(n)) => {
                                    return Outcome::Failed(format!(
                                        "body over the {limit}-byte cap ({n} bytes read); cut off"
                                    ));
                                }
                                Err(ReadError::Transport(why)) => {
                                    notes.push(format!("attempt {}: {why}", attempt + 1));
                                    self.backoff(attempt)
                                }
                            }
                        }
                        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
                            let (wait, why) = match resp.headers().get(RETRY_AFTER).map(|v| v.to_str().unwrap_or("")) {
                                None => (self.backoff(attempt), "no Retry-After; backoff".to_owned()),
                                Some(v) => match retry_after(v, SystemTime::now()) {
                                    Ok(d) if d > self.cap() => {
                                        (self.cap(), format!("Retry-After {v} capped to {:?}", self.cap()))
                                    }
                                    Ok(d) => (d, format!("Retry-After {v}")),
                                    Err(e) => (self.backoff(attempt), format!("Retry-After {v:?} {e}; backoff")),
                                },
                            };
                            notes.push(format!("attempt {}: HTTP {} ({why})", attempt + 1, status.as_u16()));
                            wait
                        }
                        s if s.is_server_error() => {
                            notes.push(format!("attempt {}: HTTP {}", attempt + 1, s.as_u16()));
                            self.backoff(attempt)
                        }
                        s => return Outcome::Failed(format!("HTTP {}", s.as_u16())),
                    }
                }
                Err(e) => {
                    let why = error_chain(&e);
                    if e.is_redirect() || e.is_builder() {
                        return Outcome::Failed(why);
                    }
                    notes.push(format!("attempt {}: {why}", attempt + 1));
                    self.backoff(attempt)
                }
            };
            if attempt >= self.p.max_retries {
                let last = notes.last().cloned().unwrap_or_default();
                return Outcome::Failed(format!("gave up after {} attempts ({last})", attempt + 1));
            }
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    fn cap(&self) -> Duration {
        Duration::from_secs_f64(self.p.retry_after_cap_s)
    }

    /// Exponential backoff with full jitter: uniform in [0, min(max, base·2^attempt)].
    fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self.p.backoff_base_ms.saturating_mul(1u64 << attempt.min(20)).min(self.p.backoff_max_ms);
        Duration::from_millis(fastrand::u64(0..=ceiling))
    }
}

fn header(h: &HeaderMap, name: reqwest::header::HeaderName) -> Option<String> {
    h.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

pub(crate) enum ReadError {
    TooBig(usize),
    Transport(String),
}

pub(crate) async fn read_capped(mut resp: reqwest::Response, limit: usize) -> Result<Vec<u8>, ReadError> {
    if let Some(n) =
        resp.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok())
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
            Err(e) => return Err(ReadError::Transport(error_chain(&e))),
        }
    }
}

/// Parses Retry-After: delay-seconds or an HTTP date. A past date or garbage is an
/// error, and the caller falls back to backoff.
pub fn retry_after(value: &str, now: SystemTime) -> Result<Duration, &'static str> {
    let v = value.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        return v.parse::<u64>().map(Duration::from_secs).map_err(|_| "is out of range");
    }
    let when = httpdate::parse_http_date(v).map_err(|_| "is neither seconds nor an HTTP date")?;
    when.duration_since(now).map_err(|_| "is in the past")
}

/// An error and its causes on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = c.source();
    }
    s
}

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
