//! The HTTP server under `serve rag|fs --http` and `serve web`: one accept loop that
//! reads each request head itself before hyper sees it, and one layer that puts the
//! security headers on every response.
//!
//! hyper answers an over-long request line (414) or head (431) on its own, below any
//! middleware, so those answers would carry none of the headers. Here the head is read
//! first, bounded in bytes ([`MAX_HEAD_BYTES`]) and time ([`HEAD_TIMEOUT`]); one that
//! is too long gets Atlas's own answer, headers included. Connections serve one
//! request each (no keep-alive) so every request head passes this check.
//!
//! Architecture invariant: every HTTP response carries the security headers.
//! *`tests/it/hardening.rs` (`every_http_response_carries_the_security_headers`).*

use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::{HeaderValue, header};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};

/// The policy every response carries: scripts and styles from this origin only, no
/// inline script, no framing.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                       connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";
/// The longest request head read (request line and headers).
pub const MAX_HEAD_BYTES: usize = 32 << 10;
/// The longest request line.
pub const MAX_REQUEST_LINE_BYTES: usize = 16 << 10;
/// What is read and dropped after refusing an over-long head.
const MAX_DRAIN_BYTES: usize = 1 << 20;
/// How long a client may take to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// The headers every response carries, in one place.
pub const SECURITY_HEADERS: [(header::HeaderName, &str); 4] = [
    (header::CONTENT_SECURITY_POLICY, CSP),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (header::REFERRER_POLICY, "no-referrer"),
    (header::X_FRAME_OPTIONS, "DENY"),
];

/// Adds [`SECURITY_HEADERS`] to whatever `next` answers.
pub async fn security_headers(req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    for (name, value) in SECURITY_HEADERS {
        h.insert(name, HeaderValue::from_static(value));
    }
    resp
}

/// Serves `router` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    use hyper_util::rt::TokioIo;
    use hyper_util::service::TowerToHyperService;
    let app = router.layer(axum::middleware::from_fn(security_headers));
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    // Out of file descriptors and the like: wait and go on serving.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        let app = app.clone();
        tokio::spawn(async move {
            let Some(stream) = read_head(stream, peer).await else { return };
            let svc = TowerToHyperService::new(app);
            let conn = hyper::server::conn::http1::Builder::new()
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), svc)
                .with_upgrades();
            if let Err(e) = conn.await {
                tracing::debug!("connection from {peer}: {e}");
            }
        });
    }
}

/// Reads the request head; a head that is too long gets Atlas's own answer (and
/// `None`), a silent or closed connection just `None`.
async fn read_head(mut stream: tokio::net::TcpStream, peer: SocketAddr) -> Option<Prefixed> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let read = async {
        loop {
            let line_end = buf.iter().position(|&b| b == b'\n');
            if line_end.map_or(buf.len(), |i| i) > MAX_REQUEST_LINE_BYTES {
                return Err(414);
            }
            if buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n") {
                return Ok(true);
            }
            if buf.len() > MAX_HEAD_BYTES {
                return Err(431);
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return Ok(!buf.is_empty()),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    };
    match tokio::time::timeout(HEAD_TIMEOUT, read).await {
        Ok(Ok(true)) => Some(Prefixed { head: buf, at: 0, stream }),
        Ok(Ok(false)) | Err(_) => None,
        Ok(Err(status)) => {
            tracing::warn!("refused a request from {peer}: its head is over the limit ({status})");
            let (reason, what) = match status {
                414 => ("URI Too Long", format!("the request line is over {MAX_REQUEST_LINE_BYTES} bytes")),
                _ => ("Request Header Fields Too Large", format!("the request head is over {MAX_HEAD_BYTES} bytes")),
            };
            let body = format!("{what}; shorten it\n");
            let mut resp = format!(
                "HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (name, value) in SECURITY_HEADERS {
                resp.push_str(&format!("{name}: {value}\r\n"));
            }
            resp.push_str("\r\n");
            resp.push_str(&body);
            let _ = stream.write_all(resp.as_bytes()).await;
            let _ = stream.shutdown().await;
            // A lingering close: read (and drop) what the client is still sending, a
            // bounded while, so its kernel does not answer our close with a reset
            // that loses the response.
            let drain = async {
                let mut left = MAX_DRAIN_BYTES;
                while left > 0 {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => left = left.saturating_sub(n),
                    }
                }
            };
            let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
            None
        }
    }
}

/// A connection whose first bytes were already read: those, then the rest.
struct Prefixed {
    head: Vec<u8>,
    at: usize,
    stream: tokio::net::TcpStream,
}

impl AsyncRead for Prefixed {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, out: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        if self.at < self.head.len() {
            let n = (self.head.len() - self.at).min(out.remaining());
            let at = self.at;
            out.put_slice(&self.head[at..at + n]);
            self.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.stream).poll_read(cx, out)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, b)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
