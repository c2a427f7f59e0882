//! The GitHub releases API, the subset publishing and installing use: a release by
//! tag or the latest, create a release, upload, list and delete assets, download an
//! asset. `api_url` is configurable for GitHub Enterprise (`GITHUB_API_URL`).

use serde::Deserialize;

use crate::http::{Credential, Redirects};
use crate::{Error, Result};

pub const DEFAULT_API: &str = "https://api.github.com";

#[derive(Debug, Clone, Deserialize)]
pub struct Release {
    pub id: u64,
    pub tag_name: String,
    pub upload_url: String,
    #[serde(default)]
    pub html_url: String,
    #[serde(default)]
    pub assets: Vec<Asset>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Asset {
    pub id: u64,
    pub name: String,
    pub size: u64,
    /// The API URL of the asset (download with `Accept: application/octet-stream`).
    pub url: String,
}

impl Release {
    pub fn asset(&self, name: &str) -> Option<&Asset> {
        self.assets.iter().find(|a| a.name == name)
    }
}

#[derive(Debug, Clone)]
pub struct GitHub {
    pub client: reqwest::Client,
    pub api: String,
    pub owner: String,
    pub repo: String,
    /// `GITHUB_TOKEN`, bound to the API's origin: an asset's redirect to a storage
    /// host (and any hop after it) never carries it.
    token: Option<Credential>,
}

/// The API root: `GITHUB_API_URL`, else api.github.com.
pub fn api_from_env() -> String {
    std::env::var("GITHUB_API_URL").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| DEFAULT_API.to_owned())
}

impl GitHub {
    pub fn new(api: &str, owner: &str, repo: &str, token: Option<String>) -> Result<GitHub> {
        GitHub::with_client(crate::http::client()?, api, owner, repo, token)
    }

    /// [`GitHub::new`] over a client of the caller's (the crawl's timeouts and user
    /// agent); `repo` may be empty for owner-level calls.
    pub fn with_client(
        client: reqwest::Client,
        api: &str,
        owner: &str,
        repo: &str,
        token: Option<String>,
    ) -> Result<GitHub> {
        let api = api.trim_end_matches('/').to_owned();
        let token = match token.filter(|t| !t.is_empty()) {
            Some(t) => Some(Credential::bearer(&api, &t)?),
            None => None,
        };
        Ok(GitHub { client, api, owner: owner.to_owned(), repo: repo.to_owned(), token })
    }

    /// A request to the API (the token is added by [`GitHub::send`], on the API's origin only).
    pub fn request(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, url)
            .header("Accept", "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2022-11-28")
    }

    /// The token, for requests sent through [`crate::http::send`].
    pub fn credential(&self) -> Option<&Credential> {
        self.token.as_ref()
    }

    fn repo_url(&self, rest: &str) -> String {
        format!("{}/repos/{}/{}/{rest}", self.api, self.owner, self.repo)
    }

    async fn send(&self, what: &str, r: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        self.send_with(what, r, self.credential()).await
    }

    /// Sends `r` with `cred` on its own origin only; a failure status is one line.
    async fn send_with(
        &self,
        what: &str,
        r: reqwest::RequestBuilder,
        cred: Option<&Credential>,
    ) -> Result<reqwest::Response> {
        let req = r.build().map_err(|e| Error::Usage(format!("GitHub: {what}: {e}")))?;
        let resp = crate::http::send(&self.client, req, cred, Redirects::Follow)
            .await
            .map_err(|e| crate::remote(format!("GitHub: {what}"), e))?;
        let status = resp.status();
        if status.is_success() || status == reqwest::StatusCode::NOT_FOUND {
            return Ok(resp);
        }
        let body = resp.text().await.unwrap_or_default();
        let msg = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_owned))
            .unwrap_or_else(|| body.chars().take(200).collect());
        let hint = match status.as_u16() {
            401 | 403 => "; check GITHUB_TOKEN (it needs contents: write to publish)",
            _ => "",
        };
        Err(Error::Remote(format!("GitHub: {what}: {status} {msg}{hint}")))
    }

    async fn json<T: serde::de::DeserializeOwned>(what: &str, resp: reqwest::Response) -> Result<T> {
        // A release with its assets is a few KiB; the cap keeps a hostile API from filling memory.
        let body = crate::fetch::body_capped(resp, 16 << 20, &format!("GitHub: {what}")).await?;
        serde_json::from_slice(&body).map_err(|e| crate::remote(format!("GitHub: {what}: an unreadable answer"), e))
    }

    /// The release of `tag`, or None.
    pub async fn release_by_tag(&self, tag: &str) -> Result<Option<Release>> {
        let what = format!("release {tag} of {}/{}", self.owner, self.repo);
        let url = self.repo_url(&format!("releases/tags/{}", urlencode(tag)));
        let resp = self.send(&what, self.request(reqwest::Method::GET, &url)).await?;
        if resp.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        Ok(Some(Self::json(&what, resp).await?))
    }

    pub async fn latest_release(&self) -> Result<Release> {
        let what = format!("the latest release of {}/{}", self.owner, self.repo);
        let resp = self.send(&what, self.request(reqwest::Method::GET, &self.repo_url("releases/latest"))).await?;
        if resp.status() == reqwest::StatusCode::NOT_FOUND {
            return Err(Error::Remote(format!(
                "GitHub: {}/{} has no release (or it is private: set GITHUB_TOKEN)",
                self.owner, self.repo
            )));
        }
        Self::json(&what, resp).await
    }

    pub async fn create_release(&self, tag: &str, name: &str, body: &str) -> Result<Release> {
        let what = format!("creating release {tag} of {}/{}", self.owner, self.repo);
        let payload = serde_json::json!({ "tag_name": tag, "name": name, "body": body });
        let resp =
            self.send(&what, self.request(reqwest::Method::POST, &self.repo_url("releases")).json(&payload)).await?;
        if resp.status() == reqwest::StatusCode::NOT_FOUND {
            return Err(Error::Remote(format!("GitHub: {what}: 404 (no such repository, or the token cannot see it)")));
        }
        Self::json(&what, resp).await
    }

    pub async fn upload(&self, release: &Release, name: &str, bytes: Vec<u8>) -> Result<Asset> {
        let base = release.upload_url.split('{').next().unwrap_or(&release.upload_url);
        let url = format!("{base}?name={}", urlencode(name));
        let what = format!("uploading {name}");
        let r =
            self.request(reqwest::Method::POST, &url).header("Content-Type", "application/octet-stream").body(bytes);
        let cred = self.upload_credential(&url)?;
        let resp = self.send_with(&what, r, cred.as_ref()).await?;
        Self::json(&what, resp).await
    }

    /// The token for GitHub's upload host: uploads go to `uploads.github.com` for
    /// api.github.com (and to the API's own host on GitHub Enterprise). The token goes
    /// to that origin and no other; an upload URL elsewhere is refused.
    fn upload_credential(&self, url: &str) -> Result<Option<Credential>> {
        let Some(token) = self.token.as_ref().and_then(Credential::secret) else { return Ok(None) };
        let u = url::Url::parse(url).map_err(|e| crate::remote(format!("GitHub: an upload URL {url:?}"), e))?;
        let api = url::Url::parse(&self.api).map_err(|e| Error::Usage(format!("GitHub API {:?}: {e}", self.api)))?;
        let github_pair = api.host_str() == Some("api.github.com") && u.host_str() == Some("uploads.github.com");
        if u.origin() != api.origin() && !(github_pair && u.scheme() == "https") {
            return Err(Error::Remote(format!(
                "GitHub: the release's upload URL is on {}, not the API's host; refusing to send the token there",
                crate::short(u.host_str().unwrap_or("?"))
            )));
        }
        Credential::bearer(url, token).map(Some)
    }

    pub async fn delete_asset(&self, asset: &Asset) -> Result<()> {
        let url = self.repo_url(&format!("releases/assets/{}", asset.id));
        self.send(&format!("deleting {}", asset.name), self.request(reqwest::Method::DELETE, &url)).await?;
        Ok(())
    }

    /// An asset's bytes request (GitHub answers with a redirect to its storage); send
    /// it with [`GitHub::credential`].
    pub fn download(&self, asset: &Asset) -> reqwest::RequestBuilder {
        self.client.get(&asset.url).header("Accept", "application/octet-stream")
    }

    /// A small asset (a `.sha256`, a signature) in memory.
    pub async fn download_small(&self, asset: &Asset, max: u64) -> Result<Vec<u8>> {
        if asset.size > max {
            return Err(Error::Remote(format!("GitHub: {} is {} bytes, more than {max}", asset.name, asset.size)));
        }
        let what = format!("downloading {}", asset.name);
        let resp = self.send(&what, self.download(asset)).await?;
        if !resp.status().is_success() {
            return Err(Error::Remote(format!("GitHub: {what}: {}", resp.status())));
        }
        crate::fetch::body_capped(resp, max, &format!("GitHub: {what}")).await
    }
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::GitHub;

    #[test]
    fn the_token_goes_to_the_api_and_github_s_upload_host_only() {
        let gh = GitHub::new("https://api.github.com", "o", "r", Some("t0k".into())).unwrap();
        let up = gh.upload_credential("https://uploads.github.com/repos/o/r/releases/1/assets?name=x").unwrap();
        assert!(up.is_some_and(|c| c.applies_to(&url::Url::parse("https://uploads.github.com/x").unwrap())));
        assert!(gh.upload_credential("https://evil.example/upload").is_err());
        assert!(gh.upload_credential("http://uploads.github.com/x").is_err(), "not over plain HTTP");
        let ghe = GitHub::new("https://ghe.example.com/api/v3", "o", "r", Some("t0k".into())).unwrap();
        assert!(ghe.upload_credential("https://ghe.example.com/api/uploads/x").unwrap().is_some());
        assert!(ghe.upload_credential("https://uploads.github.com/x").is_err());
        let anon = GitHub::new("https://api.github.com", "o", "r", None).unwrap();
        assert!(anon.upload_credential("https://evil.example/upload").unwrap().is_none());
    }
}
