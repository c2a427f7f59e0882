//! Downloads that survive a cut connection: the bytes go to
//! `ATLAS_HOME/downloads/<sha256>.part`, named by the hash they must have, so an
//! interrupted download resumes (HTTP Range, or an object store's range read) in the
//! same run or the next one, and a finished one is checked before it is used.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use bytes::Bytes;
use futures_util::{Stream, StreamExt as _};

use crate::{Error, Result, io};

/// A remote's bytes as they arrive; an error is the transport's or the store's.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, StreamError>> + Send>>;
/// Why a stream of bytes broke off.
pub type StreamError = Box<dyn std::error::Error + Send + Sync>;

/// What a remote answered for a read from an offset: the bytes, the offset they
/// start at (0 when the remote ignored the range), and the total size when known.
pub struct Opened {
    pub stream: ByteStream,
    pub start: u64,
    pub total: Option<u64>,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened").field("start", &self.start).field("total", &self.total).finish_non_exhaustive()
    }
}

type OpenFuture<'a> = Pin<Box<dyn Future<Output = Result<Opened>> + Send + 'a>>;

/// How many times a cut download is resumed in one run.
const ATTEMPTS: u32 = 5;
/// The waits between resumes (the one retry policy, [`crate::http::Backoff`]).
const RESUME_BACKOFF: crate::http::Backoff =
    crate::http::Backoff { base: std::time::Duration::from_millis(200), max: std::time::Duration::from_secs(5) };

/// Downloads into `dir/<sha256>.download` (resuming `dir/<sha256>.part`) with a
/// progress bar; returns the finished file, whose sha256 the caller checks.
pub async fn download<'a>(
    dir: &Path,
    sha256: &str,
    label: &str,
    open: impl Fn(u64) -> OpenFuture<'a>,
) -> Result<PathBuf> {
    use tokio::io::AsyncWriteExt as _;
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let done = dir.join(format!("{sha256}.download"));
    if done.is_file() {
        return Ok(done);
    }
    let part = dir.join(format!("{sha256}.part"));
    let bar = progress(label);
    let mut last_error = String::new();
    for attempt in 0..ATTEMPTS {
        let have = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
        if attempt > 0 {
            eprintln!("atlas: {label}: {last_error}; resuming at byte {have} (attempt {})", attempt + 1);
            tokio::time::sleep(RESUME_BACKOFF.wait(attempt - 1)).await;
        }
        let opened = match open(have).await {
            Ok(o) => o,
            // Not there is an answer, not a cut connection: no retry.
            Err(e @ Error::NotFound(_)) => {
                bar.abandon();
                return Err(e);
            }
            Err(e) => {
                last_error = e.to_string();
                continue;
            }
        };
        let mut file = tokio::fs::OpenOptions::new().create(true).append(true).open(&part).await.map_err(io(&part))?;
        let mut pos = have;
        if opened.start != have {
            // The remote ignored the range: start over.
            file.set_len(0).await.map_err(io(&part))?;
            pos = 0;
        }
        if let Some(t) = opened.total {
            bar.set_length(t);
        }
        bar.set_position(pos);
        let mut stream = opened.stream;
        let mut cut = None;
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(b) => {
                    file.write_all(&b).await.map_err(io(&part))?;
                    pos += b.len() as u64;
                    bar.set_position(pos);
                }
                Err(e) => {
                    cut = Some(e);
                    break;
                }
            }
        }
        file.flush().await.map_err(io(&part))?;
        file.sync_all().await.map_err(io(&part))?;
        drop(file);
        match (cut, opened.total) {
            (Some(e), _) => last_error = format!("the connection was cut after {pos} bytes ({e})"),
            (None, Some(t)) if pos < t => last_error = format!("the connection ended after {pos} of {t} bytes"),
            (None, _) => {
                bar.finish_and_clear();
                std::fs::rename(&part, &done).map_err(io(&done))?;
                return Ok(done);
            }
        }
    }
    bar.abandon();
    Err(Error::Remote(format!(
        "{label}: {last_error}; gave up after {ATTEMPTS} attempts (rerun to resume from byte {})",
        std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0)
    )))
}

fn progress(label: &str) -> indicatif::ProgressBar {
    if std::env::var_os("ATLAS_NO_PROGRESS").is_some() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec} {eta}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message(label.to_owned());
    bar
}

/// Opens an HTTP GET at `offset` (Range when past 0), following redirects with `cred`
/// on its own origin only.
pub async fn http_open(
    client: &reqwest::Client,
    req: reqwest::RequestBuilder,
    cred: Option<&crate::http::Credential>,
    offset: u64,
    what: &str,
) -> Result<Opened> {
    let req = if offset > 0 { req.header("Range", format!("bytes={offset}-")) } else { req };
    let req = req.build().map_err(|e| Error::Usage(format!("{what}: {e}")))?;
    let resp = crate::http::send(client, req, cred, crate::http::Redirects::Follow)
        .await
        .map_err(|e| Error::Remote(format!("{what}: {e}")))?;
    let status = resp.status();
    let len = resp.content_length();
    let start = match status.as_u16() {
        206 => resp
            .headers()
            .get("content-range")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("bytes "))
            .and_then(|v| v.split('-').next())
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| Error::Remote(format!("{what}: a 206 answer without a readable Content-Range")))?,
        200 => 0,
        416 if offset > 0 => {
            // Asked past the end: the part file is complete, or longer than the remote.
            return Ok(Opened { stream: Box::pin(futures_util::stream::empty()), start: offset, total: None });
        }
        404 | 410 => return Err(Error::NotFound(format!("{what}: HTTP {status}: not found at the source"))),
        _ => return Err(Error::Remote(format!("{what}: HTTP {status}"))),
    };
    let total = len.map(|l| start + l);
    let stream = resp.bytes_stream().map(|r| r.map_err(StreamError::from));
    Ok(Opened { stream: Box::pin(stream), start, total })
}

/// A response body of at most `max` bytes, read as it streams: a remote that sends
/// more is refused before it fills memory.
pub async fn body_capped(resp: reqwest::Response, max: u64, what: &str) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| Error::Remote(format!("{what}: {e}")))?;
        if (out.len() + chunk.len()) as u64 > max {
            return Err(Error::Remote(format!("{what}: more than {max} bytes")));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The hash in a `.sha256` file (`<hex>  <name>` or just `<hex>`).
pub fn parse_sha256_file(text: &str) -> Result<String> {
    let word = text.split_whitespace().next().unwrap_or_default().to_ascii_lowercase();
    if word.len() == 64 && word.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(word)
    } else {
        Err(Error::DataCorruption(format!("not a sha256 file: {:?}", text.chars().take(80).collect::<String>())))
    }
}
