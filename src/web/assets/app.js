// The web view's script: draws the overview (/) or one session's page
// (/s/NAME) from the server's event streams and read-only GET requests.
// It never sends anything to a pane: there is no input, resize or close
// here. Its one write is a person's answer to what the policy asks
// (Allow / Deny on an ask), sent with the page's CSRF token. Text from
// the server goes in through textContent; only the screen rows, which
// the server renders and escapes, go in as HTML.
"use strict";

(function () {
  const main = document.getElementById("main");
  const live = document.getElementById("live");

  // ---- small helpers ----------------------------------------------------

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function add(parent, ...children) {
    for (const c of children) if (c) parent.appendChild(c);
    return parent;
  }

  function ago(ms) {
    if (!ms) return "";
    const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
    if (s < 60) return s + " s ago";
    if (s < 3600) return Math.round(s / 60) + " min ago";
    if (s < 86400) return Math.round(s / 3600) + " h ago";
    return Math.round(s / 86400) + " d ago";
  }

  function span(ms) {
    const s = Math.max(0, ms / 1000);
    if (s < 1) return Math.round(ms) + " ms";
    if (s < 60) return s.toFixed(1) + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.round((s % 3600) / 60) + " min";
  }

  // Relative times are redrawn now and then by the page itself; the
  // server is not asked for anything.
  const clocks = new Set();
  function clock(node, ms, prefix) {
    node.dataset.ms = String(ms || 0);
    node.dataset.prefix = prefix || "";
    node.textContent = ms ? (prefix || "") + ago(ms) : "";
    clocks.add(node);
    return node;
  }
  setInterval(function () {
    for (const n of clocks) {
      if (!n.isConnected) { clocks.delete(n); continue; }
      const ms = Number(n.dataset.ms);
      if (ms) n.textContent = n.dataset.prefix + ago(ms);
    }
  }, 5000);

  function status(on, text) {
    live.className = "live " + (on ? "on" : "off");
    live.textContent = text;
  }

  function stream(url, handlers) {
    const es = new EventSource(url);
    es.onopen = function () { status(true, "live"); };
    es.onerror = function () {
      if (es.readyState !== EventSource.CLOSED) {
        status(false, "reconnecting…");
        return;
      }
      // Refused outright: signed out (a restarted server forgets its
      // cookies) shows the login page; anything else is said.
      fetch(location.pathname, { credentials: "same-origin", cache: "no-store" }).then(function (r) {
        if (r.status === 401) location.reload();
        else status(false, "unavailable: reload to try again");
      }, function () { status(false, "server unreachable: reload to try again"); });
    };
    for (const kind of Object.keys(handlers)) {
      es.addEventListener(kind, function (e) { handlers[kind](JSON.parse(e.data)); });
    }
    return es;
  }

  async function getJSON(url) {
    const r = await fetch(url, { credentials: "same-origin", cache: "no-store" });
    const body = await r.json().catch(function () { return { error: r.statusText }; });
    if (!r.ok) throw new Error(body.error || r.statusText);
    return body;
  }

  function exitText(exit) {
    if (exit === null || exit === undefined) return "running";
    return "exit " + exit;
  }

  function exitClass(exit) {
    if (exit === null || exit === undefined) return "";
    return exit === 0 ? "exit-ok" : "exit-fail";
  }

  function place(c) {
    const parts = [];
    if (c.host) parts.push("on " + c.host);
    if (c.user) parts.push("as " + c.user);
    return parts.join(" ");
  }

  function rowsInto(pre, rows) {
    pre.replaceChildren();
    for (const html of rows) {
      const r = el("div", "r");
      r.innerHTML = html; // rendered and escaped by the server
      pre.appendChild(r);
    }
  }

  // ---- the facts of a card, shared by both pages -----------------------

  function lastLine(c) {
    if (!c.last) return null;
    const p = el("p", "last");
    add(p, el("span", "meta", c.last.exit === null ? "running " : "last "));
    add(p, el("code", null, c.last.command));
    p.appendChild(document.createTextNode(" "));
    add(p, el("span", exitClass(c.last.exit), exitText(c.last.exit)));
    if (c.last.by) add(p, el("span", "meta", " · by " + c.last.by));
    const when = c.last.ended_ms || c.last.started_ms;
    if (when) add(p, clock(el("span", "meta"), when, " · "));
    return p;
  }

  function whoLine(c) {
    const parts = [];
    if (c.typing_now) parts.push(el("span", null, "typing now: " + c.typing_now));
    for (const a of c.agents) {
      const s = el("span", "agent", a.actor + " ");
      add(s, clock(el("span", "meta"), a.at * 1000));
      parts.push(s);
    }
    if (c.people.length) {
      const s = el("span", "people", c.people.length + (c.people.length === 1 ? " person" : " people") + " attached");
      const typed = Math.max(0, ...c.people.map(function (p) { return p.last_input || 0; }));
      if (typed) add(s, clock(el("span", "meta"), typed * 1000, ", typed "));
      parts.push(s);
    }
    if (!parts.length) return null;
    const p = el("p", "who");
    add(p, el("span", "meta", "agents/people: "));
    parts.forEach(function (x, i) {
      if (i) p.appendChild(document.createTextNode(" · "));
      p.appendChild(x);
    });
    return p;
  }

  // What the session's processes listen on; a TCP port on loopback links
  // to itself (the page cannot know it speaks HTTP; a person may try).
  function portsLine(c) {
    const listening = c.listening || [], jobs = c.jobs || [], unseen = c.unseen || [];
    if (!listening.length && !jobs.length && !unseen.length) return null;
    const p = el("p", "ports");
    if (listening.length) add(p, el("span", "meta", "listening: "));
    listening.forEach(function (l, i) {
      if (i) p.appendChild(document.createTextNode(" · "));
      let at = el("code", null, l.at);
      if (l.link) {
        const a = el("a", null);
        a.href = l.link;
        a.target = "_blank";
        a.rel = "noopener noreferrer";
        add(a, at);
        at = a;
      }
      add(p, at, el("span", "meta", " (" + l.by + ")"));
    });
    for (const j of jobs) add(p, el("span", "job", (p.childNodes.length ? " · " : "") + "background: " + j));
    for (const u of unseen) add(p, el("span", "meta", (p.childNodes.length ? " · " : "") + "ports on " + u + " are not seen"));
    return p;
  }

  function badge(c) {
    return el("span", "badge " + c.state, c.state === "input" ? "waiting" : c.state);
  }

  // ---- asks: what the policy asks a person -------------------------------

  // The login's token, which the server put in the page.
  const csrfMeta = document.querySelector("meta[name='csrf-token']");
  const csrf = csrfMeta ? csrfMeta.content : "";

  // The open asks (of `only` session, or all) and the latest answered,
  // live from /web/asks; each ask with its buttons.
  function asksBox(only) {
    const box = el("section", "asks");
    box.id = "asks";
    box.hidden = true;
    const list = el("div", "asklist");
    const done = el("div", "askdone");
    add(box, el("div", "askhead", "Waiting for you"), list, done);
    // Answers sent from this page, by ask, until the list says so.
    const sent = new Map();

    async function send(a, decision, scope, why, node) {
      for (const b of node.querySelectorAll("button, input")) b.disabled = true;
      const note = node.querySelector(".asknote");
      note.textContent = "sending…";
      let r, body;
      try {
        r = await fetch("/web/asks/" + encodeURIComponent(a.id), {
          method: "POST",
          credentials: "same-origin",
          cache: "no-store",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ decision: decision, scope: scope, why: why || null, csrf: csrf }),
        });
        body = await r.json().catch(function () { return { error: r.statusText }; });
      } catch (e) {
        note.textContent = "not sent: " + e.message;
        for (const b of node.querySelectorAll("button, input")) b.disabled = false;
        return;
      }
      if (r.ok) {
        sent.set(a.id, body.by_whom);
        note.textContent = body.by_whom;
      } else if (r.status === 401) {
        location.reload();
      } else {
        note.textContent = body.error || r.statusText;
        if (r.status !== 409 && r.status !== 404) {
          for (const b of node.querySelectorAll("button, input")) b.disabled = false;
        }
      }
    }

    function askNode(a) {
      const n = el("article", "ask");
      n.dataset.ask = String(a.id);
      const top = el("div", "row1");
      const where = el("a", "session", a.session);
      where.href = "/s/" + encodeURIComponent(a.session);
      add(top, el("span", "asknum", "ask " + a.id), el("span", "agent", a.agent),
        el("span", "meta", "wants to type in"), where,
        el("span", "meta", a.to === "shell" ? "(to the shell)" : "(into " + a.to + ")"),
        clock(el("span", "meta age"), a.since_ms));
      const line = el("pre", "askline");
      add(line, el("code", null, a.line)); // textContent: escaped by the page
      add(n, top, line);
      if (a.why) add(n, el("p", "askwhy", "the policy asks because: " + a.why));
      const buttons = el("div", "askbuttons");
      const choice = function (cls, text, decision, scope) {
        const b = el("button", cls, text);
        b.type = "button";
        b.addEventListener("click", function () {
          send(a, decision, scope, decision === "deny" ? reason.value.trim() : null, n);
        });
        return b;
      };
      const reason = el("input", "denywhy");
      reason.type = "text";
      reason.maxLength = 500;
      reason.placeholder = "reason (optional, for Deny)";
      reason.setAttribute("aria-label", "reason for a denial (optional)");
      add(buttons,
        choice("allow-once", "Allow once", "allow", "once"),
        choice("allow-session", "Allow in this session", "allow", "session"),
        choice("allow-agent", "Allow this agent", "allow", "agent"),
        reason,
        choice("deny", "Deny", "deny", "once"));
      add(n, buttons, el("p", "asknote meta", sent.get(a.id) || ""));
      return n;
    }

    // Redraws the list, keeping the nodes (and a reason being typed) of
    // asks still open.
    function draw(d) {
      const pending = d.pending.filter(function (a) { return !only || a.session === only; });
      const answered = d.answered.filter(function (x) { return !only || x.session === only; }).slice(0, 5);
      const kept = new Map();
      for (const n of list.querySelectorAll("article.ask")) kept.set(n.dataset.ask, n);
      list.replaceChildren(...pending.map(function (a) { return kept.get(String(a.id)) || askNode(a); }));
      done.replaceChildren(...answered.map(function (x) {
        const p = el("p", "answered");
        p.dataset.ask = String(x.id);
        add(p, el("span", null, "ask " + x.id + ": " + x.says), el("span", "meta", " · "), el("code", null, x.line));
        return p;
      }));
      box.hidden = !pending.length && !answered.length;
    }

    const es = new EventSource("/web/asks");
    es.addEventListener("asks", function (e) { draw(JSON.parse(e.data)); });
    return box;
  }

  // ---- the overview ------------------------------------------------------

  function overviewPage() {
    document.title = "Terminal sessions";
    const cards = new Map();
    const openBox = el("div", "cards");
    const closedBox = el("div", "cards");
    add(main, asksBox(null), el("h3", null, "Open sessions"), openBox, el("h3", null, "Recently closed"), closedBox);

    function cardNode(c) {
      const a = el("article", "card state-" + c.state);
      a.dataset.name = c.name;
      const head = el("div", "row1");
      const h = el("h2");
      const link = el("a", null, c.name);
      link.href = "/s/" + encodeURIComponent(c.name);
      add(h, link);
      add(head, h, badge(c), el("span", "meta", c.program + (place(c) ? " · " + place(c) : "")));
      add(a, head, el("p", "says", c.says));
      add(a, lastLine(c), portsLine(c), whoLine(c));
      if (!c.open && c.last_output_ms) add(a, clock(el("p", "meta"), c.last_output_ms, "closed "));
      if (c.tail.length) {
        const pre = el("pre", "tail term");
        rowsInto(pre, c.tail);
        add(a, pre);
      }
      return a;
    }

    function draw() {
      const all = Array.from(cards.values());
      const open = all.filter(function (c) { return c.open; }).sort(function (a, b) { return a.name.localeCompare(b.name, undefined, { numeric: true }); });
      const closed = all.filter(function (c) { return !c.open; }).sort(function (a, b) { return b.last_output_ms - a.last_output_ms; });
      openBox.replaceChildren(...open.map(cardNode));
      closedBox.replaceChildren(...closed.map(cardNode));
      if (!open.length) openBox.appendChild(el("p", "empty", "No session is open."));
      if (!closed.length) closedBox.appendChild(el("p", "empty", "None."));
    }

    stream("/web/overview", {
      overview: function (d) {
        if (d.reset) cards.clear();
        for (const c of d.cards) cards.set(c.name, c);
        for (const n of d.removed) cards.delete(n);
        draw();
      },
    });
  }

  // ---- a session's page --------------------------------------------------

  function sessionPage(name) {
    document.title = name + " · Terminal sessions";
    const base = "/web/s/" + encodeURIComponent(name);

    const head = el("section", "headbox");
    const layout = el("div", "layout");
    const left = el("section", "screenbox");
    const right = el("section", "side");
    add(layout, left, right);
    add(main, asksBox(name), head, layout);

    // The live screen.
    const screenInfo = el("div", "screeninfo");
    const screen = el("pre", "term screen");
    screen.id = "screen";
    add(left, el("h3", null, "Screen"), screenInfo, screen);
    let rows = [];

    function paint(f) {
      if (f.full || rows.length !== f.rows) {
        screen.replaceChildren();
        rows = [];
        for (let i = 0; i < f.rows; i++) {
          const r = el("div", "r");
          rows.push(r);
          screen.appendChild(r);
        }
      }
      for (const [i, html] of f.lines) if (rows[i]) rows[i].innerHTML = html; // escaped by the server
      screen.style.setProperty("--cols", String(f.cols)); // the stylesheet fits this many columns
      screenInfo.textContent = f.cols + "×" + f.rows + (f.alternate ? " · full-screen program" : "");
    }

    // The output of a region, a hit, or any lines: paged, numbered as `read` numbers them.
    const output = el("section", "output");
    add(left, output);
    const PAGE = 100;
    let chosen = null;

    async function showLines(title, first, last, hit) {
      output.replaceChildren();
      const t = el("div", "title");
      add(t, el("h3", null, "Output"), el("span", "meta", title));
      add(output, t);
      if (last !== null && last < first) {
        add(output, el("p", "empty", "(no output)"));
        return;
      }
      const box = el("div", "lines");
      const pager = el("div", "pager");
      add(output, pager, box);
      let from = first;
      if (hit) from = Math.max(first, hit - 20);
      async function load() {
        let data;
        try {
          data = await getJSON(base + "/lines?from=" + from + "&count=" + PAGE);
        } catch (e) {
          box.replaceChildren(el("p", "error", e.message));
          return;
        }
        const end = last === null ? data.total : Math.min(last, data.total);
        box.replaceChildren();
        data.lines.forEach(function (text, i) {
          const n = data.first + i;
          if (n > end) return;
          const l = el("div", "l" + (n === hit ? " hit" : ""));
          add(l, el("span", "n", n), document.createTextNode(text));
          box.appendChild(l);
        });
        if (!box.childNodes.length) box.appendChild(el("p", "empty", "(no lines yet)"));
        pager.replaceChildren();
        const shownTo = Math.min(end, data.first + data.lines.length - 1);
        const prev = el("button", null, "◀ earlier");
        prev.type = "button";
        prev.disabled = from <= first;
        prev.addEventListener("click", function () { from = Math.max(first, from - PAGE); load(); });
        const next = el("button", null, "later ▶");
        next.type = "button";
        next.disabled = shownTo >= end;
        next.addEventListener("click", function () { from = from + PAGE; load(); });
        add(pager, prev, el("span", null, "lines " + from + "–" + shownTo + " of " + end), next);
      }
      await load();
    }

    // The head: state, facts, attach command.
    function drawHead(c) {
      head.replaceChildren();
      const top = el("div", "head");
      add(top, el("h1", null, c.name), badge(c), el("span", "says", c.says));
      add(head, top);
      const facts = [c.program];
      if (place(c)) facts.push(place(c));
      if (c.size) facts.push(c.size[0] + "×" + c.size[1]);
      if (c.prompt) facts.push("prompt: " + c.prompt);
      add(head, el("p", "facts", facts.join(" · ")), lastLine(c), portsLine(c), whoLine(c));
      if (c.attach) {
        const box = el("div", "attach");
        const code = el("code", "attach-command", c.attach);
        const copy = el("button", "copy", "Copy");
        copy.type = "button";
        copy.addEventListener("click", function () { copyText(c.attach, copy); });
        add(box, el("span", "meta", "join in a terminal:"), code, copy);
        add(head, box);
      }
      if (!c.open) {
        screenInfo.textContent = "closed · the last lines of its log:";
        rowsInto(screen, c.tail);
        rows = [];
      }
    }

    function copyText(text, button) {
      const done = function () { button.textContent = "Copied"; setTimeout(function () { button.textContent = "Copy"; }, 1500); };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, function () { selectFallback(text, done); });
      } else {
        selectFallback(text, done);
      }
    }

    function selectFallback(text, done) {
      const t = el("textarea");
      t.value = text;
      t.readOnly = true;
      document.body.appendChild(t);
      t.select();
      try { document.execCommand("copy"); done(); } catch (e) { /* the text stays selected to copy by hand */ }
      t.remove();
    }

    // The timeline.
    add(right, el("h3", null, "Commands"));
    const scroller = el("div", "scroller");
    const table = el("table", "timeline");
    const thead = el("thead");
    const hr = el("tr");
    for (const h of ["#", "command", "agent", "exit", "took", "lines", "when", ""]) {
      add(hr, el("th", h === "agent" ? "agent" : h === "when" ? "when" : null, h));
    }
    add(thead, hr);
    const tbody = el("tbody");
    add(table, thead, tbody);
    add(scroller, table);
    const earlier = el("button", "earlier", "load earlier commands");
    earlier.type = "button";
    earlier.hidden = true;
    add(right, scroller, earlier);
    const regions = new Map();

    function regionRow(r) {
      const failed = r.exit !== null && r.exit !== undefined && r.exit !== 0;
      const tr = el("tr", failed ? "fail" : "");
      tr.dataset.region = String(r.id);
      if (chosen === r.id) tr.classList.add("chosen");
      const took = r.ended_ms ? span(r.ended_ms - r.started_ms) : clock(el("span"), r.started_ms, "for ");
      const lines = r.last_line === null ? "…" : Math.max(0, r.last_line - r.first_line + 1);
      add(tr,
        el("td", "num", r.id),
        el("td", "cmd", r.command || "(no command)"),
        el("td", "agent", (r.by || "person") + (r.allowed ? " · " + r.allowed : "")),
        el("td", "num " + exitClass(r.exit), exitText(r.exit)),
        add(el("td", "num"), typeof took === "string" ? document.createTextNode(took) : took),
        el("td", "num", lines),
        add(el("td", "when"), clock(el("span", "meta"), r.started_ms)),
        add(el("td"), replayButton(r.id, "region " + r.id + " · " + (r.command || ""))));
      tr.addEventListener("click", function () {
        chosen = r.id;
        drawRegions();
        showLines("region " + r.id + " `" + r.command + "` · " + exitText(r.exit), r.first_line, r.last_line, null);
      });
      return tr;
    }

    // Replays (assets/replay.js): one command, or the whole session.
    const player = el("section", "player");
    player.id = "replay";
    player.hidden = true;
    add(left, player);
    function replayButton(region, title) {
      const b = el("button", "replay", region === null ? "replay the session" : "replay");
      b.type = "button";
      b.addEventListener("click", function (e) {
        e.stopPropagation();
        window.dtmcpReplay(player, base + "/replay" + (region === null ? "" : "?region=" + region), title);
      });
      return b;
    }
    add(right, replayButton(null, name));

    function drawRegions() {
      const list = Array.from(regions.values()).sort(function (a, b) { return b.id - a.id; });
      tbody.replaceChildren(...list.map(regionRow));
      if (!list.length) {
        const tr = el("tr");
        const td = el("td", "empty", "No command yet.");
        td.colSpan = 8;
        add(tbody, add(tr, td));
      }
    }

    earlier.addEventListener("click", async function () {
      const first = Math.min(...regions.keys());
      try {
        const d = await getJSON(base + "/regions?before=" + first);
        for (const r of d.regions) regions.set(r.id, r);
        earlier.hidden = !d.more_before;
        drawRegions();
      } catch (e) {
        earlier.textContent = e.message;
      }
    });

    // Search over the whole log.
    add(right, el("h3", null, "Search the log"));
    const form = el("div", "search");
    const input = el("input");
    input.type = "search";
    input.placeholder = "regex, e.g. error|warning";
    input.setAttribute("aria-label", "search the log (regex)");
    input.autocomplete = "off";
    const go = el("button", "find", "Search");
    go.type = "button";
    add(form, input, go);
    const found = el("div", "found");
    add(right, form, found);

    async function search(offset) {
      const q = input.value;
      found.replaceChildren(el("p", "meta", "searching…"));
      let d;
      try {
        d = await getJSON(base + "/search?q=" + encodeURIComponent(q) + "&offset=" + offset);
      } catch (e) {
        found.replaceChildren(el("p", "error", e.message));
        return;
      }
      found.replaceChildren();
      const shown = d.hits.length ? (d.offset + 1) + "–" + (d.offset + d.hits.length) : "0";
      add(found, el("p", "meta", d.total + " matching line" + (d.total === 1 ? "" : "s") + (d.total ? ", showing " + shown : "")));
      if (d.stopped_after !== null && d.stopped_after !== undefined) {
        add(found, el("p", "meta", "the search took too long and stopped after line " + d.stopped_after + "; the count covers the lines up to it"));
      }
      const ul = el("ul", "hits");
      for (const h of d.hits) {
        const li = el("li", "hit");
        li.dataset.line = String(h.line);
        add(li, el("span", "n", h.line), document.createTextNode(h.text));
        li.addEventListener("click", function () {
          showLines("line " + h.line + (h.region ? " · region " + h.region : ""), 1, null, h.line);
        });
        ul.appendChild(li);
      }
      add(found, ul);
      if (d.offset + d.hits.length < d.total) {
        const more = el("button", null, "more hits");
        more.type = "button";
        more.addEventListener("click", function () { search(d.offset + d.hits.length); });
        add(found, more);
      }
    }
    go.addEventListener("click", function () { search(0); });
    input.addEventListener("keydown", function (e) { if (e.key === "Enter") search(0); });

    stream(base + "/events", {
      screen: paint,
      card: drawHead,
      regions: function (d) {
        if (d.reset) {
          regions.clear();
          earlier.hidden = !d.more_before;
        }
        for (const r of d.regions) regions.set(r.id, r);
        drawRegions();
      },
    });
    drawRegions();
  }

  const path = location.pathname;
  if (path.startsWith("/s/")) sessionPage(decodeURIComponent(path.slice(3)));
  else overviewPage();
})();
