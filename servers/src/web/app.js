// Atlas web page: progressive enhancement over server-rendered HTML. Without this
// script every form still works (plain forms); with it, results come as you
// type, `/` focuses the box, and the Ask tab streams its answer. No corpus text is
// ever put into the page as HTML here except what the server rendered and escaped.
"use strict";

(function () {
  const $ = (sel) => document.querySelector(sel);

  // `/` focuses the query box unless the user is typing somewhere.
  document.addEventListener("keydown", (e) => {
    const t = e.target;
    const typing = t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable);
    if (e.key === "/" && !typing && !e.ctrlKey && !e.metaKey && !e.altKey) {
      const q = $("#q");
      if (q) {
        e.preventDefault();
        q.focus();
        q.select();
      }
    }
  });

  // Scroll the cited range of a source view into view.
  const cited = document.getElementById("cited");
  if (cited && !location.hash) {
    cited.scrollIntoView({ block: "center" });
  }

  const search = $("#search");
  if (search) {
    let timer = 0;
    let seq = 0;
    let typedAt = 0; // the first keystroke not yet searched for
    const run = () => {
      const params = new URLSearchParams(new FormData(search));
      const url = "/?" + params.toString();
      const mine = ++seq;
      const since = typedAt;
      const sent = performance.now();
      typedAt = 0;
      history.replaceState(null, "", url);
      params.set("partial", "1");
      fetch("/?" + params.toString(), { headers: { Accept: "text/html" } })
        .then((r) => r.text())
        .then((html) => {
          if (mine !== seq) return; // a newer request is on its way
          const results = $("#results");
          // The server rendered (and escaped) this block.
          results.outerHTML = html;
          // For the browser test: keystroke → results, and request → results.
          const now = performance.now();
          document.body.dataset.renderMs = String(Math.round(now - (since || sent)));
          document.body.dataset.fetchMs = String(Math.round(now - sent));
          document.body.dataset.renderedQuery = params.get("q") || "";
          document.body.dataset.searches = String(mine);
        })
        .catch(() => {
          const results = $("#results");
          if (results) {
            results.textContent = "Search failed; press Enter to retry.";
          }
        });
    };
    $("#q").addEventListener("input", () => {
      typedAt = typedAt || performance.now();
      clearTimeout(timer);
      timer = setTimeout(run, 150);
    });
    for (const sel of ["#mode", "#kind"]) {
      $(sel).addEventListener("change", run);
    }
  }

  const ask = $("#ask");
  if (ask) {
    ask.addEventListener("submit", (e) => {
      const q = $("#q").value.trim();
      if (!q || typeof TextDecoderStream === "undefined") return; // the plain POST form
      e.preventDefault();
      history.replaceState(null, "", "/ask?q=" + encodeURIComponent(q));
      const out = $("#answer");
      out.textContent = "";
      const box = document.createElement("div");
      box.className = "answer streaming";
      const text = document.createElement("div");
      text.className = "text";
      const para = document.createElement("p");
      text.appendChild(para);
      box.appendChild(text);
      const sources = document.createElement("div");
      out.appendChild(box);
      out.appendChild(sources);
      const started = performance.now();
      const on = {
        sources(data) {
          sources.innerHTML = data; // server-rendered, escaped
        },
        text(data) {
          if (!document.body.dataset.firstTokenMs) {
            document.body.dataset.firstTokenMs = String(Math.round(performance.now() - started));
          }
          para.textContent += JSON.parse(data); // text, never HTML
          document.body.dataset.textEvents = String(Number(document.body.dataset.textEvents || 0) + 1);
        },
        notice(data) {
          const n = document.createElement("p");
          n.className = "notice";
          n.setAttribute("role", "status");
          n.textContent = data;
          box.insertBefore(n, text);
        },
        done(data) {
          out.innerHTML = data; // the final answer, server-rendered with linked citations
          document.body.dataset.answered = "1";
        },
        failed(data) {
          const p = document.createElement("p");
          p.className = "error";
          p.setAttribute("role", "alert");
          p.textContent = data;
          out.appendChild(p);
          document.body.dataset.answered = "1";
        },
      };
      // Asking spends the LLM's budget: a same-origin POST (the server refuses others).
      const lost = () => {
        if (!document.body.dataset.answered) {
          para.textContent += " (the connection was lost; press Ask to retry)";
        }
      };
      fetch("/api/ask/stream", {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded" },
        body: "q=" + encodeURIComponent(q),
        credentials: "same-origin",
      })
        .then(async (resp) => {
          if (!resp.ok || !resp.body) {
            on.failed("the server answered " + resp.status);
            return;
          }
          // Server-sent events: blocks split by a blank line, `event:` and `data:` lines.
          const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
          let buf = "";
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buf += value;
            let cut;
            while ((cut = buf.indexOf("\n\n")) >= 0) {
              const block = buf.slice(0, cut);
              buf = buf.slice(cut + 2);
              let event = "message";
              const data = [];
              for (const line of block.split("\n")) {
                if (line.startsWith("event:")) event = line.slice(6).trim();
                else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
              }
              if (Object.prototype.hasOwnProperty.call(on, event)) on[event](data.join("\n"));
            }
          }
          lost();
        })
        .catch(lost);
    });
  }
})();
