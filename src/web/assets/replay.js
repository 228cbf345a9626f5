// The web view's player: plays a recording of a session or of one command
// as frames of HTML rows made by the server (src/web/replay.rs: asciinema's
// terminal emulator runs there, so the page needs neither WebAssembly nor
// styles of its own). Controls: play/pause, a seek bar whose marks are the
// commands' starts and ends (a click on one goes there), and a list of
// the marks. No inline script or style: positions go through the CSSOM.
"use strict";

(function () {
  function el(tag, cls, text) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== null) n.textContent = String(text);
    return n;
  }

  function seconds(ms) {
    const s = Math.floor(ms / 1000);
    return Math.floor(s / 60) + ":" + String(s % 60).padStart(2, "0");
  }

  // Opens a player in `box` for the frames at `url`, titled `title`.
  window.dtmcpReplay = async function (box, url, title) {
    box.replaceChildren();
    box.hidden = false;
    const head = el("div", "replayhead");
    const close = el("button", "close", "close");
    close.type = "button";
    head.append(el("h3", null, "Replay · " + title), close);
    const screen = el("pre", "term screen replayscreen");
    const controls = el("div", "replaybar");
    const play = el("button", "play", "play");
    play.type = "button";
    const track = el("div", "track");
    const seek = el("input", "seek");
    seek.type = "range";
    seek.min = "0";
    seek.step = "10";
    seek.setAttribute("aria-label", "position in the recording");
    const marks = el("div", "marks");
    track.append(seek, marks);
    const clockNode = el("span", "meta", "0:00");
    controls.append(play, track, clockNode);
    const list = el("ul", "marklist");
    box.append(head, screen, controls, list);
    box.dataset.state = "loading";
    box.scrollIntoView({ block: "start" });

    let d;
    try {
      const r = await fetch(url, { credentials: "same-origin", cache: "no-store" });
      d = await r.json();
      if (!r.ok) throw new Error(d.error || r.statusText);
    } catch (e) {
      box.dataset.state = "failed";
      box.append(el("p", "error", e.message));
      return;
    }
    seek.max = String(d.duration);

    let rows = [];      // each row's HTML now
    let nodes = [];     // the row elements
    let next = 0;       // the next frame to apply
    let at = 0;         // where the play is, in ms
    let timer = null;
    let started = 0;    // performance.now() minus `at` while playing

    function size(cols, count) {
      screen.style.setProperty("--cols", String(cols));
      rows = new Array(count).fill("");
      nodes = [];
      screen.replaceChildren();
      for (let i = 0; i < count; i++) {
        const n = el("div", "r");
        nodes.push(n);
        screen.appendChild(n);
      }
    }

    // Applies the frames up to `t`; the rows that changed are drawn.
    function advance(t) {
      const changed = new Set();
      while (next < d.frames.length && d.frames[next].t <= t) {
        const f = d.frames[next++];
        if (f.size) {
          size(f.size[0], f.size[1]);
          for (let i = 0; i < rows.length; i++) changed.add(i);
        }
        for (const [i, html] of f.rows) {
          if (i < rows.length) {
            rows[i] = html;
            changed.add(i);
          }
        }
      }
      for (const i of changed) nodes[i].innerHTML = rows[i]; // escaped by the server
      at = t;
      seek.value = String(t);
      clockNode.textContent = seconds(t) + " / " + seconds(d.duration);
    }

    function jump(t) {
      next = 0;
      size(d.cols, d.rows);
      advance(Math.max(0, Math.min(t, d.duration)));
      if (timer !== null) started = performance.now() - at;
    }

    function tick() {
      const t = performance.now() - started;
      advance(Math.min(t, d.duration));
      if (t >= d.duration) {
        stop("ended");
      } else {
        timer = setTimeout(tick, 15);
      }
    }

    function start() {
      if (at >= d.duration) jump(0);
      started = performance.now() - at;
      play.textContent = "pause";
      box.dataset.state = "playing";
      timer = setTimeout(tick, 0);
    }

    function stop(state) {
      if (timer !== null) clearTimeout(timer);
      timer = null;
      play.textContent = "play";
      box.dataset.state = state;
    }

    play.addEventListener("click", function () { if (timer === null) start(); else stop("paused"); });
    seek.addEventListener("input", function () { jump(Number(seek.value)); });
    close.addEventListener("click", function () { stop("closed"); box.hidden = true; box.replaceChildren(); });

    for (const m of d.markers) {
      const go = function () { jump(m.t); };
      const mark = el("button", "mark");
      mark.type = "button";
      mark.title = seconds(m.t) + " " + m.label;
      mark.setAttribute("aria-label", mark.title);
      mark.style.left = (d.duration ? (100 * m.t) / d.duration : 0) + "%";
      mark.addEventListener("click", go);
      marks.appendChild(mark);
      const li = el("li", "marked");
      li.append(el("span", "n", seconds(m.t)), document.createTextNode(m.label));
      li.addEventListener("click", go);
      list.appendChild(li);
    }
    jump(0);
    start();
  };
})();
