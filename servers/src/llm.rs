//! A client of OpenAI-compatible `/v1/chat/completions` endpoints (Ollama, llama.cpp
//! server, vLLM, OpenAI), streaming. Every failure is an error with one line that
//! says what happened: connection refused, a timeout (for the first byte and between
//! chunks), an HTTP error status, or a stream that does not parse or ends early.

use std::time::Duration;

use serde::Serialize;

/// The most bytes of one SSE line, and of a whole non-streamed reply.
const MAX_LINE: usize = 1 << 20;
/// The longest a whole answer may take.
const MAX_TOTAL: Duration = Duration::from_secs(600);

/// An endpoint and model.
#[derive(Debug, Clone)]
pub struct Llm {
    /// The full `…/chat/completions` URL.
    pub url: String,
    pub model: String,
    pub api_key: Option<String>,
    /// For the reply's first byte and between streamed chunks.
    pub timeout: Duration,
}

#[derive(Debug, Clone, Serialize)]
pub struct Message {
    pub role: &'static str,
    pub content: String,
}

/// The chat-completions URL for a base the user gives: `http://h:11434`,
/// `http://h:11434/v1` or the full `…/v1/chat/completions`.
pub fn endpoint(base: &str) -> Result<String, String> {
    let u = url::Url::parse(base.trim())
        .map_err(|e| format!("--llm {base:?} is not a URL ({e}); e.g. http://127.0.0.1:11434/v1"))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(format!("--llm {base:?}: use an http:// or https:// URL"));
    }
    let s = u.as_str().trim_end_matches('/');
    Ok(if s.ends_with("/chat/completions") {
        s.to_owned()
    } else if s.ends_with("/v1") {
        format!("{s}/chat/completions")
    } else {
        format!("{s}/v1/chat/completions")
    })
}

/// Streams the completion of `messages`, calling `on` with each piece of text.
pub async fn stream(llm: &Llm, messages: &[Message], on: &mut (dyn FnMut(&str) + Send)) -> anyhow::Result<()> {
    tokio::time::timeout(MAX_TOTAL, stream_inner(llm, messages, on))
        .await
        .map_err(|_| anyhow::anyhow!("no complete answer within {} s", MAX_TOTAL.as_secs()))?
}

async fn stream_inner(llm: &Llm, messages: &[Message], on: &mut (dyn FnMut(&str) + Send)) -> anyhow::Result<()> {
    let client = atlas_dist::http_client()?;
    let body = serde_json::json!({ "model": llm.model, "messages": messages, "stream": true, "temperature": 0 });
    let mut req = client.post(&llm.url).header("content-type", "application/json").body(body.to_string());
    if let Some(k) = &llm.api_key {
        req = req.bearer_auth(k);
    }
    let wait = llm.timeout;
    let mut resp = tokio::time::timeout(wait, req.send())
        .await
        .map_err(|_| anyhow::anyhow!("no reply within {} s", wait.as_secs()))?
        .map_err(|e| anyhow::anyhow!("{}", describe(&e)))?;
    let status = resp.status();
    if !status.is_success() {
        let text = tokio::time::timeout(wait, resp.text()).await.ok().and_then(Result::ok).unwrap_or_default();
        let text: String = text.chars().take(200).collect();
        anyhow::bail!("HTTP {status}: {}", text.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    let is_sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let mut buf: Vec<u8> = Vec::new();
    let mut done = false;
    loop {
        let chunk = tokio::time::timeout(wait, resp.chunk())
            .await
            .map_err(|_| anyhow::anyhow!("the stream stalled for {} s", wait.as_secs()))?
            .map_err(|e| anyhow::anyhow!("the stream broke: {}", describe(&e)))?;
        let Some(chunk) = chunk else { break };
        buf.extend_from_slice(&chunk);
        if !is_sse {
            anyhow::ensure!(buf.len() <= MAX_LINE, "the reply is over {MAX_LINE} bytes");
            continue;
        }
        while let Some(i) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            if sse_line(&line, on)? {
                done = true;
            }
        }
        anyhow::ensure!(buf.len() <= MAX_LINE, "a stream line is over {MAX_LINE} bytes");
        if done {
            return Ok(());
        }
    }
    if !is_sse {
        // An endpoint that ignores `stream: true` answers in one JSON body.
        let v: serde_json::Value =
            serde_json::from_slice(&buf).map_err(|e| anyhow::anyhow!("the reply is not JSON ({e})"))?;
        let text = v["choices"][0]["message"]["content"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("the reply has no choices[0].message.content"))?;
        on(text);
        return Ok(());
    }
    if !buf.is_empty() && sse_line(&buf, on)? {
        return Ok(());
    }
    anyhow::bail!("the stream ended before `data: [DONE]`")
}

/// One SSE line: text to `on`; true at `[DONE]` or a finish reason.
fn sse_line(line: &[u8], on: &mut (dyn FnMut(&str) + Send)) -> anyhow::Result<bool> {
    let line = std::str::from_utf8(line).map_err(|_| anyhow::anyhow!("the stream is not UTF-8"))?.trim_end();
    let Some(data) = line.strip_prefix("data:") else {
        return Ok(false); // comments, `event:`, `id:`, blank lines
    };
    let data = data.trim_start();
    if data == "[DONE]" {
        return Ok(true);
    }
    let v: serde_json::Value = serde_json::from_str(data).map_err(|e| {
        let shown: String = data.chars().take(60).collect();
        anyhow::anyhow!("malformed stream: {shown:?} is not JSON ({e})")
    })?;
    if let Some(msg) = v.get("error") {
        anyhow::bail!("the endpoint reported an error: {}", msg.get("message").unwrap_or(msg));
    }
    let choice = &v["choices"][0];
    anyhow::ensure!(choice.is_object(), "malformed stream: a chunk without choices[0]");
    if let Some(t) = choice["delta"]["content"].as_str() {
        on(t);
    }
    Ok(false)
}

/// reqwest's error, said plainly.
fn describe(e: &reqwest::Error) -> String {
    if e.is_connect() {
        format!("could not connect: {}", root(e))
    } else if e.is_timeout() {
        "timed out".to_owned()
    } else {
        root(e)
    }
}

fn root(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn endpoints_take_a_base_or_the_full_path() {
        let check = |base: &str, want: &str| assert_eq!(super::endpoint(base).unwrap_or_else(|e| e), want, "{base}");
        check("http://127.0.0.1:11434", "http://127.0.0.1:11434/v1/chat/completions");
        check("http://127.0.0.1:11434/v1/", "http://127.0.0.1:11434/v1/chat/completions");
        check("https://api.x.test/v1/chat/completions", "https://api.x.test/v1/chat/completions");
        assert!(super::endpoint("ftp://x").is_err());
        assert!(super::endpoint("not a url").is_err());
    }

    #[test]
    fn sse_lines_give_text_or_stop() {
        let mut got = String::new();
        let mut on = |t: &str| got.push_str(t);
        assert!(!super::sse_line(br#"data: {"choices":[{"delta":{"content":"Hi"}}]}"#, &mut on).unwrap());
        assert!(!super::sse_line(b": keep-alive\n", &mut on).unwrap());
        assert!(super::sse_line(b"data: [DONE]\n", &mut on).unwrap());
        assert!(super::sse_line(b"data: {oops", &mut on).unwrap_err().to_string().contains("malformed"));
        assert_eq!(got, "Hi");
    }
}
