//! A client of OpenAI-compatible `/v1/chat/completions` endpoints (Ollama, llama.cpp
//! server, vLLM, OpenAI), streaming. Every failure is an error with one line that
//! says what happened: connection refused, a timeout (for the first byte and between
//! chunks), an HTTP error status, or a stream that does not parse or ends early.

use std::time::Duration;

use serde::Serialize;

/// The most bytes of one SSE line, and of a whole non-streamed reply (a tool call's
/// arguments, up to [`MAX_ARGUMENT_BYTES`], fit one).
const MAX_LINE: usize = 4 << 20;
/// The most bytes of answer text taken from one reply; the rest is dropped and the
/// answer says so.
pub const MAX_ANSWER_BYTES: usize = 256 << 10;
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

/// How a streamed reply ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The endpoint finished the answer.
    Complete,
    /// The answer passed [`MAX_ANSWER_BYTES`]; the rest was not read.
    Truncated,
}

/// Streams the completion of `messages`, calling `on` with each piece of text (at most
/// [`MAX_ANSWER_BYTES`] of it). Errors name no key: what the endpoint echoes is redacted.
pub async fn stream(llm: &Llm, messages: &[Message], on: &mut (dyn FnMut(&str) + Send)) -> anyhow::Result<Ended> {
    let mut taken = 0usize;
    let mut capped = |t: &str| -> bool {
        let room = MAX_ANSWER_BYTES.saturating_sub(taken);
        let cut = atlas_runtime::utf8::floor_char_boundary(t, room);
        taken += cut;
        on(&t[..cut]);
        cut < t.len()
    };
    let r = tokio::time::timeout(MAX_TOTAL, stream_inner(llm, messages, &mut capped))
        .await
        .map_err(|_| anyhow::anyhow!("no complete answer within {} s", MAX_TOTAL.as_secs()))?;
    r.map_err(|e| anyhow::anyhow!("{}", atlas_dist::http::redact(&format!("{e:#}"), llm.api_key.as_deref())))
}

/// `on` returns true when it wants no more text.
async fn stream_inner(
    llm: &Llm,
    messages: &[Message],
    on: &mut (dyn FnMut(&str) -> bool + Send),
) -> anyhow::Result<Ended> {
    let body = serde_json::json!({ "model": llm.model, "messages": messages, "stream": true, "temperature": 0 });
    read_reply(llm, &body, &mut |data| {
        Ok(match data {
            Data::Chunk(choice) => choice["delta"]["content"].as_str().is_some_and(&mut *on),
            Data::Whole(v) => {
                let text = v["choices"][0]["message"]["content"]
                    .as_str()
                    .ok_or_else(|| anyhow::anyhow!("the reply has no choices[0].message.content"))?;
                on(text)
            }
            Data::Usage(_) => false,
        })
    })
    .await
}

/// What a reply holds, as it is read: one streamed chunk's `choices[0]`, the whole
/// body of an endpoint that does not stream, or a chunk's `usage`.
enum Data<'a> {
    Chunk(&'a serde_json::Value),
    Whole(&'a serde_json::Value),
    Usage(&'a serde_json::Value),
}

/// Posts `body` and reads the reply (an SSE stream or one JSON body), handing each
/// piece to `on`, which returns true when it wants no more. Every bound here: the
/// first byte and each chunk within the timeout, a line or a body at most
/// [`MAX_LINE`] bytes, no redirect followed (the key stays with its origin).
async fn read_reply(
    llm: &Llm,
    body: &serde_json::Value,
    on: &mut (dyn FnMut(Data<'_>) -> anyhow::Result<bool> + Send),
) -> anyhow::Result<Ended> {
    use atlas_dist::http::{Credential, Redirects};
    let client = atlas_dist::http::client()?;
    let req = client.post(&llm.url).header("content-type", "application/json").body(body.to_string()).build()?;
    // The key is bound to the endpoint's origin, and no redirect is followed: a key
    // never reaches a host the user did not name.
    let cred = llm.api_key.as_deref().map(|k| Credential::bearer(&llm.url, k)).transpose()?;
    let wait = llm.timeout;
    let mut resp = tokio::time::timeout(wait, atlas_dist::http::send(&client, req, cred.as_ref(), Redirects::Refuse))
        .await
        .map_err(|_| anyhow::anyhow!("no reply within {} s", wait.as_secs()))??;
    let status = resp.status();
    if status.is_redirection() {
        let to = atlas_dist::http::location(&resp).map_or_else(|| "nowhere".to_owned(), |u| u.to_string());
        anyhow::bail!(
            "HTTP {status}: the endpoint redirects to {}; redirects are not followed (the key stays with the URL you gave): give --llm the final URL",
            atlas_dist::http::redact_url(&to)
        );
    }
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
            .map_err(|e| anyhow::anyhow!("the stream broke: {}", atlas_dist::http::describe(&e)))?;
        let Some(chunk) = chunk else { break };
        buf.extend_from_slice(&chunk);
        if !is_sse {
            anyhow::ensure!(buf.len() <= MAX_LINE, "the reply is over {MAX_LINE} bytes");
            continue;
        }
        while let Some(i) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            if feed(sse_line(&line)?, &mut done, on)? {
                return Ok(Ended::Truncated);
            }
        }
        anyhow::ensure!(buf.len() <= MAX_LINE, "a stream line is over {MAX_LINE} bytes");
        if done {
            return Ok(Ended::Complete);
        }
    }
    if !is_sse {
        // An endpoint that ignores `stream: true` answers in one JSON body.
        let v: serde_json::Value =
            serde_json::from_slice(&buf).map_err(|e| anyhow::anyhow!("the reply is not JSON ({e})"))?;
        if let Some(msg) = v.get("error") {
            anyhow::bail!("the endpoint reported an error: {}", msg.get("message").unwrap_or(msg));
        }
        let full = on(Data::Whole(&v))?;
        if let Some(u) = v.get("usage") {
            on(Data::Usage(u))?;
        }
        return Ok(if full { Ended::Truncated } else { Ended::Complete });
    }
    let last = sse_line(&buf)?;
    let was_done = matches!(last, Line::Done) && !buf.is_empty();
    let _ = feed(last, &mut done, on)?;
    anyhow::ensure!(was_done, "the stream ended before `data: [DONE]`");
    Ok(Ended::Complete)
}

/// Hands one SSE line to `on`; true when `on` wants no more.
fn feed(
    line: Line,
    done: &mut bool,
    on: &mut (dyn FnMut(Data<'_>) -> anyhow::Result<bool> + Send),
) -> anyhow::Result<bool> {
    match line {
        Line::Done => {
            *done = true;
            Ok(false)
        }
        Line::Data(v) => {
            if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
                on(Data::Usage(u))?;
            }
            match v.get("choices").and_then(|c| c.get(0)) {
                Some(choice) => on(Data::Chunk(choice)),
                None => Ok(false),
            }
        }
        Line::Other => Ok(false),
    }
}

/// One tool call an LLM asks for: its id, the tool's name, and its arguments as the
/// LLM wrote them (a JSON object in text, unchecked).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One turn of a tool-calling conversation: the text written and the tools asked for.
#[derive(Debug, Clone, Default)]
pub struct Turn {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    /// `usage.prompt_tokens` and `usage.completion_tokens`, when the endpoint says them.
    pub usage: Option<(u64, u64)>,
    /// The text or a call's arguments passed their cap; the rest was not read.
    pub truncated: bool,
}

/// The most tool calls taken from one turn.
pub const MAX_TOOL_CALLS: usize = 16;
/// The most bytes of one tool call's arguments (longer ones are cut; the caller refuses them).
pub const MAX_ARGUMENT_BYTES: usize = 1 << 20;

/// One turn of a conversation with tools (`tools`, `tool_calls`; OpenAI's format),
/// streamed or not as the endpoint answers. `messages` are chat messages as JSON (the
/// assistant's tool calls and the tools' results among them); `max_tokens` is the most
/// the turn may write, sent as `max_tokens`, which OpenAI-compatible servers read. An
/// endpoint that refuses that name for `max_completion_tokens` (OpenAI's newer models
/// do, with HTTP 400) is asked once more with that one.
pub async fn chat(
    llm: &Llm,
    messages: &[serde_json::Value],
    tools: &[serde_json::Value],
    max_tokens: u64,
) -> anyhow::Result<Turn> {
    let mut body = serde_json::json!({
        "model": llm.model, "messages": messages, "stream": true, "temperature": 0,
        "max_tokens": max_tokens, "stream_options": { "include_usage": true },
    });
    if !tools.is_empty() {
        body["tools"] = serde_json::Value::Array(tools.to_vec());
    }
    match chat_turn(llm, &body).await {
        Err(e) if refuses_max_tokens(&e) => {
            if let Some(b) = body.as_object_mut() {
                b.remove("max_tokens");
                b.insert("max_completion_tokens".into(), max_tokens.into());
            }
            chat_turn(llm, &body).await
        }
        r => r,
    }
}

/// Whether an endpoint refused a request for its `max_tokens`, asking for
/// `max_completion_tokens`.
fn refuses_max_tokens(e: &anyhow::Error) -> bool {
    let text = e.to_string();
    text.starts_with("HTTP 400") && text.contains("max_completion_tokens")
}

/// One request of [`chat`] and its reply.
async fn chat_turn(llm: &Llm, body: &serde_json::Value) -> anyhow::Result<Turn> {
    let mut turn = Turn::default();
    let r = tokio::time::timeout(MAX_TOTAL, read_reply(llm, body, &mut |data| take(&mut turn, data)))
        .await
        .map_err(|_| anyhow::anyhow!("no complete answer within {} s", MAX_TOTAL.as_secs()))?;
    let ended =
        r.map_err(|e| anyhow::anyhow!("{}", atlas_dist::http::redact(&format!("{e:#}"), llm.api_key.as_deref())))?;
    turn.truncated |= ended == Ended::Truncated;
    turn.tool_calls.retain(|c| !c.name.is_empty());
    Ok(turn)
}

/// Adds one piece of a reply to `turn`: text, tool-call pieces (streamed calls come
/// by `index`, their arguments in fragments), usage; each within its cap.
fn take(turn: &mut Turn, data: Data<'_>) -> anyhow::Result<bool> {
    let add = |s: &mut String, piece: &str, cap: usize, cut: &mut bool| {
        let room = cap.saturating_sub(s.len());
        let keep = atlas_runtime::utf8::floor_char_boundary(piece, room);
        *cut |= keep < piece.len();
        s.push_str(&piece[..keep]);
    };
    let (msg, streamed) = match data {
        Data::Usage(u) => {
            let n = |k: &str| u.get(k).map_or(0, count);
            turn.usage = Some((n("prompt_tokens"), n("completion_tokens")));
            return Ok(false);
        }
        Data::Chunk(choice) => (&choice["delta"], true),
        Data::Whole(v) => {
            let m = &v["choices"][0]["message"];
            anyhow::ensure!(m.is_object(), "the reply has no choices[0].message");
            (m, false)
        }
    };
    if let Some(t) = msg["content"].as_str() {
        add(&mut turn.content, t, MAX_ANSWER_BYTES, &mut turn.truncated);
    }
    for (i, c) in msg["tool_calls"].as_array().into_iter().flatten().enumerate() {
        let index = if streamed { c["index"].as_u64().map_or(i, |n| n as usize) } else { turn.tool_calls.len() };
        if index >= MAX_TOOL_CALLS {
            turn.truncated = true;
            continue;
        }
        if turn.tool_calls.len() <= index {
            turn.tool_calls.resize(index + 1, ToolCall::default());
        }
        let call = &mut turn.tool_calls[index];
        if let Some(id) = c["id"].as_str() {
            add(&mut call.id, id, 256, &mut turn.truncated);
        }
        let f = &c["function"];
        if let Some(name) = f["name"].as_str() {
            add(&mut call.name, name, 256, &mut turn.truncated);
        }
        if let Some(a) = f["arguments"].as_str() {
            add(&mut call.arguments, a, MAX_ARGUMENT_BYTES, &mut turn.truncated);
        } else if f["arguments"].is_object() {
            add(&mut call.arguments, &f["arguments"].to_string(), MAX_ARGUMENT_BYTES, &mut turn.truncated);
        }
    }
    Ok(false)
}

/// A token count as an endpoint reports it: one past `u64` (which JSON reads as a
/// float) is the most there is, not none; a negative one or another type is none.
fn count(v: &serde_json::Value) -> u64 {
    v.as_u64().or_else(|| v.as_f64().filter(|f| *f > 0.0).map(|f| f as u64)).unwrap_or(0)
}

/// What one SSE line holds.
#[derive(Debug, PartialEq)]
enum Line {
    Data(serde_json::Value),
    Done,
    /// Comments, `event:`, `id:`, blank lines.
    Other,
}

/// One SSE line of an OpenAI-compatible stream.
fn sse_line(line: &[u8]) -> anyhow::Result<Line> {
    let line = std::str::from_utf8(line).map_err(|_| anyhow::anyhow!("the stream is not UTF-8"))?.trim_end();
    let Some(data) = line.strip_prefix("data:") else {
        return Ok(Line::Other);
    };
    let data = data.trim_start();
    if data == "[DONE]" {
        return Ok(Line::Done);
    }
    let v: serde_json::Value = serde_json::from_str(data).map_err(|e| {
        let shown: String = data.chars().take(60).collect();
        anyhow::anyhow!("malformed stream: {shown:?} is not JSON ({e})")
    })?;
    if let Some(msg) = v.get("error") {
        anyhow::bail!("the endpoint reported an error: {}", msg.get("message").unwrap_or(msg));
    }
    // The last chunk of a stream with usage has an empty `choices`.
    let usage_only = v["choices"].as_array().is_some_and(Vec::is_empty) && v["usage"].is_object();
    anyhow::ensure!(usage_only || v["choices"][0].is_object(), "malformed stream: a chunk without choices[0]");
    Ok(Line::Data(v))
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

    use super::{Line, sse_line};

    /// A local endpoint that answers its requests, one connection each, with `replies`
    /// in turn (a status and a JSON body); joined, it gives the requests' bodies.
    fn replying(replies: &'static [(u16, &'static str)]) -> (String, std::thread::JoinHandle<Vec<String>>) {
        use std::io::{BufRead, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1/chat/completions", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let mut bodies = Vec::new();
            for (status, reply) in replies {
                let (stream, _) = listener.accept().unwrap();
                let mut r = std::io::BufReader::new(stream);
                let mut len = 0;
                loop {
                    let mut line = String::new();
                    r.read_line(&mut line).unwrap();
                    if line.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = line.split_once(':')
                        && k.eq_ignore_ascii_case("content-length")
                    {
                        len = v.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0; len];
                r.read_exact(&mut body).unwrap();
                let head = format!("HTTP/1.1 {status} X\r\ncontent-type: application/json\r\nconnection: close");
                write!(r.get_mut(), "{head}\r\ncontent-length: {}\r\n\r\n{reply}", reply.len()).unwrap();
                bodies.push(String::from_utf8(body).unwrap());
            }
            bodies
        });
        (url, server)
    }

    fn turn_of(url: String, max_tokens: u64) -> anyhow::Result<super::Turn> {
        let llm = super::Llm { url, model: "m".into(), api_key: None, timeout: std::time::Duration::from_secs(20) };
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let hi = serde_json::json!({"role": "user", "content": "hi"});
        rt.block_on(super::chat(&llm, &[hi], &[], max_tokens))
    }

    #[test]
    fn a_turn_sends_its_max_tokens_and_reads_usage_past_u64_as_the_most() {
        let (url, server) = replying(&[(
            200,
            r#"{"choices":[{"message":{"role":"assistant","content":"ok"}}],
                "usage":{"prompt_tokens":1e30,"completion_tokens":18446744073709551615}}"#,
        )]);
        let turn = turn_of(url, 1234).unwrap();
        let sent: serde_json::Value = serde_json::from_str(&server.join().unwrap()[0]).unwrap();
        assert_eq!(sent["max_tokens"], 1234, "{sent}");
        assert_eq!((turn.content.as_str(), turn.usage), ("ok", Some((u64::MAX, u64::MAX))));
    }

    #[test]
    fn an_endpoint_that_refuses_max_tokens_is_asked_with_max_completion_tokens() {
        let (url, server) = replying(&[
            (
                400,
                r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}"#,
            ),
            (200, r#"{"choices":[{"message":{"role":"assistant","content":"ok"}}]}"#),
        ]);
        let turn = turn_of(url, 777).unwrap();
        let sent: Vec<serde_json::Value> =
            server.join().unwrap().iter().map(|b| serde_json::from_str(b).unwrap()).collect();
        assert_eq!(
            (&sent[0]["max_tokens"], &sent[0]["max_completion_tokens"]),
            (&serde_json::json!(777), &serde_json::Value::Null)
        );
        assert_eq!(
            (&sent[1]["max_tokens"], &sent[1]["max_completion_tokens"]),
            (&serde_json::Value::Null, &serde_json::json!(777))
        );
        assert_eq!(turn.content, "ok");
    }

    #[test]
    fn usage_counts_saturate_and_nonsense_counts_as_none() {
        let count = |v: serde_json::Value| super::count(&v);
        assert_eq!(count(serde_json::json!(1e300)), u64::MAX);
        assert_eq!(count(serde_json::json!(u64::MAX)), u64::MAX);
        assert_eq!(count(serde_json::json!(-5)), 0);
        assert_eq!(count(serde_json::json!("12")), 0);
        assert_eq!(count(serde_json::json!(42)), 42);
    }

    #[test]
    fn sse_lines_give_text_or_stop() {
        let hi = serde_json::json!({"choices":[{"delta":{"content":"Hi"}}]});
        assert_eq!(sse_line(br#"data: {"choices":[{"delta":{"content":"Hi"}}]}"#).unwrap(), Line::Data(hi));
        assert_eq!(sse_line(b": keep-alive\n").unwrap(), Line::Other);
        assert_eq!(sse_line(b"data: [DONE]\n").unwrap(), Line::Done);
        assert!(sse_line(b"data: {oops").unwrap_err().to_string().contains("malformed"));
    }

    proptest::proptest! {
        /// The SSE parser takes any bytes without panicking, and what it returns as
        /// text is what the line's JSON holds.
        #[test]
        fn sse_lines_of_any_bytes_never_panic(line in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let _ = sse_line(&line);
        }

        #[test]
        fn sse_text_round_trips(t in "\\PC{0,80}") {
            let v = serde_json::json!({"choices":[{"delta":{"content": t}}]});
            let line = format!("data: {v}");
            proptest::prop_assert_eq!(sse_line(line.as_bytes()).unwrap(), Line::Data(v));
        }
    }
}
