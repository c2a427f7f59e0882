// Atlas web page: progressive enhancement over server-rendered HTML. Without this
// script every form still works (plain GET forms); with it, results come as you
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
      if (!q || typeof EventSource === "undefined") return; // the plain GET form
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
      const es = new EventSource("/api/ask/stream?q=" + encodeURIComponent(q));
      es.addEventListener("sources", (ev) => {
        sources.innerHTML = ev.data; // server-rendered, escaped
      });
      es.addEventListener("text", (ev) => {
        if (!document.body.dataset.firstTokenMs) {
          document.body.dataset.firstTokenMs = String(Math.round(performance.now() - started));
        }
        para.textContent += JSON.parse(ev.data); // text, never HTML
        document.body.dataset.textEvents = String(Number(document.body.dataset.textEvents || 0) + 1);
      });
      es.addEventListener("notice", (ev) => {
        const n = document.createElement("p");
        n.className = "notice";
        n.setAttribute("role", "status");
        n.textContent = ev.data;
        box.insertBefore(n, text);
      });
      es.addEventListener("done", (ev) => {
        es.close();
        out.innerHTML = ev.data; // the final answer, server-rendered with linked citations
        document.body.dataset.answered = "1";
      });
      es.addEventListener("failed", (ev) => {
        es.close();
        const p = document.createElement("p");
        p.className = "error";
        p.setAttribute("role", "alert");
        p.textContent = ev.data;
        out.appendChild(p);
        document.body.dataset.answered = "1";
      });
      es.onerror = () => {
        if (es.readyState === EventSource.CLOSED) return;
        es.close();
        if (!document.body.dataset.answered) {
          para.textContent += " (the connection was lost; press Ask to retry)";
        }
      };
    });
  }
})();
