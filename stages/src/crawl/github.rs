//! GitHub portfolio sources: an owner's repositories carrying a topic, listed through
//! the REST API (pagination by `Link: rel="next"`, rate limits honoured), each then
//! read as a git source. The API base is configurable for GitHub Enterprise.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use atlas_dist::http::{self, Attempt};
use reqwest::header::{HeaderMap, LINK};
use serde::Deserialize;

use super::CrawlParams;
use super::fetch::user_agent;

/// The fields of a repository object that the portfolio uses.
#[derive(Debug, Clone, Deserialize)]
pub struct Repo {
    pub name: String,
    pub full_name: String,
    pub clone_url: String,
    pub html_url: String,
    #[serde(default)]
    pub default_branch: Option<String>,
    #[serde(default)]
    pub topics: Vec<String>,
    #[serde(default)]
    pub archived: bool,
}

/// The most pages of 100 repositories read from the API.
const MAX_PAGES: usize = 100;

/// Lists `owner`'s repositories (as an organisation, else as a user) that carry `topic`.
pub async fn list_repos(
    api: &str,
    owner: &str,
    topic: &str,
    token: Option<&str>,
    p: &CrawlParams,
    notes: &mut Vec<String>,
) -> anyhow::Result<Vec<Repo>> {
    let client = http::client_with(
        &user_agent(p),
        Duration::from_secs_f64(p.connect_timeout_s),
        Some(Duration::from_secs_f64(p.total_timeout_s)),
        None,
    )?;
    // The one GitHub client: its API headers, and the token bound to the API's origin
    // (a redirect elsewhere never carries it).
    let gh = atlas_dist::github::GitHub::with_client(client, api, owner, "", token.map(str::to_owned))?;
    let api = gh.api.as_str();
    let mut all = Vec::new();
    let mut next = Some(format!("{api}/orgs/{owner}/repos?per_page=100&type=all"));
    let mut tried_user = false;
    let origin = url::Url::parse(api).with_context(|| format!("bad api_url {api}"))?.origin();
    let mut pages = 0usize;
    while let Some(url) = next.take() {
        // The token goes with every request: never follow a link to another origin,
        // and never page forever.
        if url::Url::parse(&url).map(|u| u.origin()).ok() != Some(origin.clone()) {
            bail!("GitHub API at {api} linked to another origin ({url}); refusing to send the token there");
        }
        pages += 1;
        if pages > MAX_PAGES {
            bail!("GitHub API at {api} listed more than {MAX_PAGES} pages of repositories; narrow the owner or topic");
        }
        let cap = Duration::from_secs_f64(p.retry_after_cap_s);
        let retry = http::Retry { backoff: super::fetch::backoff(p), max_retries: p.max_retries, retry_after_cap: cap };
        let (gh, url) = (&gh, &url);
        let attempt = move |_| async move {
            let req = match gh.request(reqwest::Method::GET, url).build() {
                Ok(r) => r,
                Err(e) => return Attempt::Done(Err(anyhow::Error::new(e).context(format!("GET {url}")))),
            };
            let resp = match http::send(&gh.client, req, gh.credential(), http::Redirects::Follow).await {
                Ok(r) => r,
                Err(e) => return Attempt::Done(Err(anyhow::Error::new(e).context(format!("GET {url}")))),
            };
            let status = resp.status().as_u16();
            match rate_limit_wait(resp.headers(), SystemTime::now()) {
                Some(wait) if status == 403 || status == 429 => {
                    let wait = wait.min(cap);
                    Attempt::Again { after: Some(wait), why: format!("waiting {wait:?} before retrying {url}") }
                }
                _ => Attempt::Done(Ok(resp)),
            }
        };
        let resp = match retry.run(attempt, |_, why| notes.push(format!("GitHub API rate limit: {why}"))).await {
            Ok(r) => r?,
            Err(g) => bail!(
                "GitHub API at {api} kept answering rate limited for {url} (gave up after {} attempts); set \
                 GITHUB_TOKEN to raise the limit, or wait",
                g.attempts
            ),
        };
        let status = resp.status().as_u16();
        if status == 404 && !tried_user && all.is_empty() {
            // Not an organisation: list the user's repositories instead.
            tried_user = true;
            next = Some(format!("{api}/users/{owner}/repos?per_page=100&type=owner"));
            continue;
        }
        if status == 401 || status == 403 {
            bail!(
                "GitHub API answered {status} for {url}; set GITHUB_TOKEN to a token that can read {owner}'s repositories"
            );
        }
        if !(200..300).contains(&status) {
            bail!("GitHub API answered {status} for {url}");
        }
        next = next_link(resp.headers());
        let body = match http::read_capped(resp, p.max_body_bytes).await {
            Ok(b) => b,
            Err(http::ReadError::TooBig(n)) => {
                bail!("GitHub API answer from {url} is over max_body_bytes ({n} bytes read)")
            }
            Err(http::ReadError::Transport(why)) => bail!("reading {url}: {why}"),
        };
        let page: Vec<Repo> =
            serde_json::from_slice(&body).with_context(|| format!("decoding the repository list from {url}"))?;
        all.extend(page);
    }
    let total = all.len();
    all.retain(|r| r.topics.iter().any(|t| t.eq_ignore_ascii_case(topic)));
    all.sort_by(|a, b| a.name.cmp(&b.name));
    notes.push(format!("GitHub {owner}: {} of {total} repositories carry topic `{topic}`", all.len()));
    Ok(all)
}

/// `Link: <url>; rel="next", …` → the next page.
fn next_link(h: &HeaderMap) -> Option<String> {
    let link = h.get(LINK)?.to_str().ok()?;
    link.split(',').find_map(|part| {
        let (url, rest) = part.split_once(';')?;
        rest.contains("rel=\"next\"").then(|| url.trim().trim_start_matches('<').trim_end_matches('>').to_owned())
    })
}

/// How long a rate-limited answer asks us to wait: Retry-After, or the reset time of
/// an exhausted `X-RateLimit-Remaining`.
fn rate_limit_wait(h: &HeaderMap, now: SystemTime) -> Option<Duration> {
    if let Some(v) = h.get("retry-after").and_then(|v| v.to_str().ok())
        && let Ok(d) = super::fetch::retry_after(v, now)
    {
        return Some(d);
    }
    let remaining = h.get("x-ratelimit-remaining")?.to_str().ok()?.trim().parse::<u64>().ok()?;
    if remaining > 0 {
        return None;
    }
    let reset = h.get("x-ratelimit-reset")?.to_str().ok()?.trim().parse::<u64>().ok()?;
    let now_s = now.duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(Duration::from_secs(reset.saturating_sub(now_s).max(1)))
}
