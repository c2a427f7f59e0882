//! Downloads that survive a cut connection: the bytes go to
//! `ATLAS_HOME/downloads/<sha256>.part`, named by the hash they must have, so an
//! interrupted download resumes (HTTP Range, or an object store's range read) in the
//! same run or the next one, and a finished one is checked before it is used.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt as _};

use crate::http::{Attempt, Retry};
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

/// A cut download is resumed 4 times in one run, the waits between growing from
/// 200 ms to 5 s (the one retry driver, [`crate::http::Retry`]; no server wait here).
const RESUME: Retry = Retry {
    backoff: crate::http::Backoff { base: Duration::from_millis(200), max: Duration::from_secs(5) },
    max_retries: 4,
    retry_after_cap: Duration::from_secs(5),
};

/// Downloads into `dir/<sha256>.download` (resuming `dir/<sha256>.part`) with a
/// progress bar; returns the finished file, whose sha256 the caller checks.
pub async fn download<'a>(
    dir: &Path,
    sha256: &str,
    label: &str,
    open: impl Fn(u64) -> OpenFuture<'a>,
) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let done = dir.join(format!("{sha256}.download"));
    if done.is_file() {
        return Ok(done);
    }
    let part = dir.join(format!("{sha256}.part"));
    let bar = progress(label);
    let have = |part: &Path| std::fs::metadata(part).map(|m| m.len()).unwrap_or(0);
    let (part, bar, done, open) = (&part, &bar, &done, &open);
    let attempt = move |_| async move {
        let have = have(part);
        let opened = match open(have).await {
            Ok(o) => o,
            // Not there is an answer, not a cut connection: no retry.
            Err(e @ Error::NotFound(_)) => return Attempt::Done(Err(e)),
            Err(e) => return Attempt::Again { after: None, why: e.to_string() },
        };
        Attempt::Done(match write_part(opened, part, have, bar).await {
            Ok(None) => {
                bar.finish_and_clear();
                std::fs::rename(part, done).map_err(io(done)).map(|()| done.clone())
            }
            Ok(Some(why)) => return Attempt::Again { after: None, why },
            Err(e) => Err(e),
        })
    };
    let resumed = |n: u32, why: &str| {
        eprintln!("atlas: {label}: {why}; resuming at byte {} (attempt {})", have(part), n + 2);
    };
    match RESUME.run(attempt, resumed).await {
        Ok(r) => r.inspect_err(|_| bar.abandon()),
        Err(g) => {
            bar.abandon();
            Err(Error::Remote(format!(
                "{label}: {}; gave up after {} attempts (rerun to resume from byte {})",
                g.why,
                g.attempts,
                have(part)
            )))
        }
    }
}

/// Appends what `opened` streams to `part` (from scratch when the remote ignored the
/// range); `Some(why)` when the stream broke off or ended short: worth a resume.
async fn write_part(opened: Opened, part: &Path, have: u64, bar: &indicatif::ProgressBar) -> Result<Option<String>> {
    use tokio::io::AsyncWriteExt as _;
    let mut file = tokio::fs::OpenOptions::new().create(true).append(true).open(part).await.map_err(io(part))?;
    let mut pos = have;
    if opened.start != have {
        // The remote ignored the range: start over.
        file.set_len(0).await.map_err(io(part))?;
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
                file.write_all(&b).await.map_err(io(part))?;
                pos += b.len() as u64;
                bar.set_position(pos);
            }
            Err(e) => {
                cut = Some(e);
                break;
            }
        }
    }
    file.flush().await.map_err(io(part))?;
    file.sync_all().await.map_err(io(part))?;
    Ok(match (cut, opened.total) {
        (Some(e), _) => Some(format!("the connection was cut after {pos} bytes ({e})")),
        (None, Some(t)) if pos < t => Some(format!("the connection ended after {pos} of {t} bytes")),
        (None, _) => None,
    })
}

fn progress(label: &str) -> indicatif::ProgressBar {
    if !atlas_runtime::progress::shown() {
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
        .map_err(|e| crate::remote(what, e))?;
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
    let limit = usize::try_from(max).unwrap_or(usize::MAX);
    crate::http::read_capped(resp, limit).await.map_err(|e| match e {
        crate::http::ReadError::TooBig(_) => Error::Remote(format!("{what}: more than {max} bytes")),
        crate::http::ReadError::Transport(why) => Error::Remote(format!("{what}: {why}")),
    })
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
