//! How the servers talk: stdio (one JSON-RPC message per line) and streamable HTTP.
//!
//! rmcp's stdio transport silently ignores a line that is not JSON and silently drops
//! an over-long one; a client waiting on either hangs. So stdin goes through a guard
//! first: each line is bounded in memory (`MAX_LINE_BYTES`), a leading BOM is
//! stripped, and a line that is not JSON, a batch array, or a line over the cap gets a
//! JSON-RPC error back (id null) while the session goes on. Everything written to
//! stdout, rmcp's replies and the guard's errors alike, goes through one writer task,
//! a whole line at a time, so nothing but protocol reaches stdout.

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::{ServerHandler, ServiceExt as _};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWriteExt as _, BufReader};
use tokio::sync::mpsc;

/// The longest request line accepted on stdio.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

fn error_line(code: i64, message: &str) -> Vec<u8> {
    let mut v = serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}
    }))
    .unwrap_or_default();
    v.push(b'\n');
    v
}

/// One stdin line, bounded: `Ok(Some(line))`, `Err(len)` for a line over the cap
/// (consumed and dropped), `Ok(None)` at end of input.
async fn read_bounded<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    max: usize,
) -> std::io::Result<Result<Option<Vec<u8>>, usize>> {
    let mut line = Vec::new();
    let mut dropped = 0usize;
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(if dropped > 0 {
                Err(dropped)
            } else if line.is_empty() {
                Ok(None)
            } else {
                Ok(Some(line))
            });
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if dropped > 0 || line.len() + take > max {
            dropped += line.len() + take;
            line.clear();
        } else {
            line.extend_from_slice(&buf[..take]);
        }
        r.consume(take);
        if done {
            return Ok(if dropped > 0 { Err(dropped) } else { Ok(Some(line)) });
        }
    }
}

/// What the guard does with one line.
pub fn guard_line(line: &[u8]) -> Result<Option<Vec<u8>>, Vec<u8>> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    match serde_json::from_slice::<serde_json::Value>(line) {
        Err(e) => Err(error_line(-32700, &format!("parse error: {e}; send one JSON-RPC message per line"))),
        Ok(serde_json::Value::Array(_)) => {
            Err(error_line(-32600, "batch arrays are not supported; send one JSON-RPC message per line"))
        }
        Ok(_) => {
            let mut v = line.to_vec();
            v.push(b'\n');
            Ok(Some(v))
        }
    }
}

/// Serves `server` over stdin/stdout until the client closes stdin.
pub async fn serve_stdio<S: ServerHandler>(server: S) -> anyhow::Result<()> {
    let (mut to_rmcp, rmcp_in) = tokio::io::duplex(1 << 20);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(1 << 20);
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(256);
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = rx.recv().await {
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let pump_tx = tx.clone();
    let pump = tokio::spawn(async move {
        let mut lines = BufReader::new(from_rmcp);
        loop {
            let mut line = Vec::new();
            match lines.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if pump_tx.send(line).await.is_err() {
                        break;
                    }
                }
            }
        }
    });
    let guard_tx = tx;
    let guard = tokio::spawn(async move {
        let mut stdin = BufReader::with_capacity(64 * 1024, tokio::io::stdin());
        loop {
            match read_bounded(&mut stdin, MAX_LINE_BYTES).await {
                Ok(Ok(None)) | Err(_) => break,
                Ok(Err(len)) => {
                    tracing::warn!("dropped a {len}-byte request line (over {MAX_LINE_BYTES})");
                    let msg = format!("request line of {len} bytes is over the {MAX_LINE_BYTES}-byte limit; dropped");
                    if guard_tx.send(error_line(-32600, &msg)).await.is_err() {
                        break;
                    }
                }
                Ok(Ok(Some(line))) => match guard_line(&line) {
                    Ok(None) => {}
                    Ok(Some(ok)) => {
                        if to_rmcp.write_all(&ok).await.is_err() {
                            break;
                        }
                    }
                    Err(reply) => {
                        tracing::warn!("answered a malformed request line with a JSON-RPC error");
                        if guard_tx.send(reply).await.is_err() {
                            break;
                        }
                    }
                },
            }
        }
        // End of input: rmcp sees EOF and the session ends.
        drop(to_rmcp);
    });
    let service = server.serve((rmcp_in, rmcp_out)).await.map_err(|e| anyhow::anyhow!("MCP handshake failed: {e}"))?;
    let _ = service.waiting().await;
    guard.abort();
    let _ = pump.await;
    let _ = writer.await;
    Ok(())
}

/// Serves a fresh server per session over streamable HTTP at `http://ADDR/mcp` until
/// Ctrl-C. Only loopback Host headers are accepted (DNS-rebinding protection).
pub async fn serve_http<S>(factory: impl Fn() -> S + Send + Sync + 'static, addr: SocketAddr) -> anyhow::Result<()>
where
    S: ServerHandler + Send + 'static,
{
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
    let ct = tokio_util::sync::CancellationToken::new();
    let service: StreamableHttpService<S, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(factory()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default().with_cancellation_token(ct.child_token()),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("binding {addr}: {e}; pick a free port, e.g. --http 127.0.0.1:8765"))?;
    let local = listener.local_addr()?;
    tracing::info!("listening on http://{local}/mcp");
    eprintln!("atlas: serving MCP on http://{local}/mcp");
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            let _ = tokio::signal::ctrl_c().await;
            ct.cancel();
        })
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_answers_what_rmcp_would_ignore() {
        let ok = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        assert_eq!(guard_line(ok).unwrap().unwrap(), [&ok[..], b"\n"].concat());
        let bom = [&b"\xEF\xBB\xBF"[..], ok, b"\r\n"].concat();
        assert_eq!(guard_line(&bom).unwrap().unwrap(), [&ok[..], b"\n"].concat());
        let err = String::from_utf8(guard_line(b"{not json\n").unwrap_err()).unwrap();
        assert!(err.contains("-32700") && err.contains("\"id\":null"), "{err}");
        let err = String::from_utf8(guard_line(b"[{\"jsonrpc\":\"2.0\"}]").unwrap_err()).unwrap();
        assert!(err.contains("-32600") && err.contains("batch"), "{err}");
        assert_eq!(guard_line(b"  \n").unwrap(), None);
    }

    #[tokio::test]
    async fn over_long_lines_are_bounded_and_reported() {
        let input = [vec![b'x'; 100], b"\n".to_vec(), b"ok\n".to_vec()].concat();
        let mut r = BufReader::with_capacity(16, &input[..]);
        assert_eq!(read_bounded(&mut r, 50).await.unwrap(), Err(101));
        assert_eq!(read_bounded(&mut r, 50).await.unwrap(), Ok(Some(b"ok\n".to_vec())));
        assert_eq!(read_bounded(&mut r, 50).await.unwrap(), Ok(None));
    }
}
