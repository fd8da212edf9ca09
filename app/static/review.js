/* splitaudit UI: reviewing pairs (queue selection and the pair view), by mouse or keyboard. */
"use strict";
(function () {
  const SA = window.SA;
  const body = document.body;
  const page = body.dataset.page;
  const filter = body.dataset.reviewFilter || "";
  const NAMES = { duplicate: "duplicate", not_duplicate: "not duplicate", unsure: "unsure" };
  const KEYS = { d: "duplicate", n: "not_duplicate", u: "unsure" };
  const ADVANCE_KEY = "splitaudit.autoAdvance";

  /** Does a pair with this verdict still belong to the queue's review filter? */
  function stillInFilter(verdict) {
    if (!filter || filter === "reviewed") return true;
    if (filter === "unreviewed") return false;
    return filter === verdict;
  }

  function badge(verdict) {
    const b = document.createElement("span");
    b.className = "badge verdict-" + (verdict || "none");
    b.textContent = verdict ? NAMES[verdict] : "unreviewed";
    return b;
  }

  function when(iso) {
    if (!iso) return "";
    const d = new Date(/[zZ]|[+-]\d\d:\d\d$/.test(iso) ? iso : iso + "Z");
    if (isNaN(d.getTime())) return iso;
    return d.toISOString().slice(0, 16).replace("T", " ") + " UTC";
  }

  function saveVerdict(matchId, verdict, note) {
    return SA.api("PUT", "/api/v1/matches/" + matchId + "/review", { verdict: verdict, note: note || null });
  }

  /* ---------------------------------------------------------------- queue page */
  function initQueue() {
    const table = document.getElementById("queue");
    if (!table) return;
    const rows = Array.prototype.slice.call(table.querySelectorAll("tbody tr"));
    let current = -1;

    function select(i, focus) {
      if (!rows.length) return;
      i = Math.max(0, Math.min(rows.length - 1, i));
      rows.forEach(function (r, j) { r.classList.toggle("selected", j === i); r.setAttribute("aria-selected", String(j === i)); });
      current = i;
      const link = rows[i].querySelector(".row-link");
      if (focus !== false && link) link.focus({ preventScroll: true });
      rows[i].scrollIntoView({ block: "nearest" });
    }
    rows.forEach(function (r, i) {
      r.addEventListener("click", function (ev) { if (ev.target.tagName !== "A") select(i, false); });
      r.addEventListener("focusin", function () { if (current !== i) select(i, false); });
    });
    const hash = location.hash;
    if (hash === "#first") select(0);
    else if (hash === "#last") select(rows.length - 1);

    SA.onKey("j", function () {
      if (current === rows.length - 1) {
        const next = document.querySelector('[data-pager="next"]');
        if (next) { location.href = next.href + "#first"; return; }
      }
      select(current + 1);
    });
    SA.onKey("k", function () {
      if (current === 0) {
        const prev = document.querySelector('[data-pager="prev"]');
        if (prev) { location.href = prev.href + "#last"; return; }
      }
      select(current <= 0 ? 0 : current - 1);
    });
    function open() { if (current >= 0) location.href = rows[current].dataset.href; }
    SA.onKey("Enter", open);
    SA.onKey("o", open);
    Object.keys(KEYS).forEach(function (key) {
      SA.onKey(key, function () {
        if (current < 0) { SA.toast("Select a pair first (j/k)", "error"); return; }
        const row = rows[current];
        const verdict = KEYS[key];
        saveVerdict(row.dataset.matchId, verdict, null).then(function (saved) {
          const cell = row.querySelector('[data-field="verdict"]');
          cell.replaceChildren(badge(saved.verdict), document.createElement("br"));
          const who = document.createElement("span");
          who.className = "small muted";
          who.textContent = saved.reviewer || "anonymous";
          cell.appendChild(who);
          row.dataset.verdict = saved.verdict;
          if (!stillInFilter(saved.verdict) && !row.classList.contains("gone")) {
            // The pair left this filter: later rows move up one position in the queue.
            row.classList.add("gone");
            row.dataset.href = "/ui/matches/" + row.dataset.matchId;
            rows.slice(current + 1).forEach(function (r) {
              const pos = Number(r.dataset.pos) - 1;
              r.dataset.pos = String(pos);
              r.dataset.href = r.dataset.href.replace(/\/review\/\d+/, "/review/" + pos);
              const link = r.querySelector(".row-link");
              if (link) link.href = r.dataset.href;
            });
          }
          SA.toast("Saved: " + NAMES[saved.verdict]);
          select(current + 1);
        }).catch(function (err) { SA.toast("Not saved: " + err.message, "error"); });
      });
    });
  }

  /* ---------------------------------------------------------------- pair page */
  function initPair() {
    const matchId = body.dataset.matchId;
    const pos = Number(body.dataset.pos || 0);
    const base = body.dataset.baseUrl || "";
    const qs = body.dataset.filterQs || "";
    let leftFilter = false;

    function nextUrl() {
      if (!pos) return null;
      // A pair that left the filter no longer holds its slot: the next one moved into it.
      // Past the end, the server shows the end-of-queue page.
      return base + (leftFilter ? pos : pos + 1) + qs;
    }
    function go(url) { if (url) location.href = url; }

    SA.onKey("j", function () { go(pos ? nextUrl() : null); });
    SA.onKey("k", function () { go(body.dataset.prevUrl); });
    SA.onKey("b", function () { go(body.dataset.queueUrl); });

    const note = document.getElementById("note");
    SA.onKey("e", function () { if (note) note.focus(); });

    const advance = document.getElementById("auto-advance");
    if (advance) {
      try { advance.checked = localStorage.getItem(ADVANCE_KEY) === "1"; } catch (e) { /* no storage */ }
      advance.addEventListener("change", function () {
        try { localStorage.setItem(ADVANCE_KEY, advance.checked ? "1" : "0"); } catch (e) { /* no storage */ }
      });
    }

    const buttons = Array.prototype.slice.call(document.querySelectorAll("[data-verdict]"));
    let saving = false;
    function record(verdict) {
      if (saving) return;
      saving = true;
      buttons.forEach(function (b) { b.disabled = true; });
      saveVerdict(matchId, verdict, note ? note.value.trim() : "").then(function (saved) {
        const out = document.getElementById("current-verdict");
        const who = document.createElement("strong");
        who.dataset.field = "reviewer";
        who.textContent = saved.reviewer || "anonymous";
        const at = document.createElement("time");
        at.dataset.field = "at";
        at.dateTime = saved.at || "";
        at.textContent = when(saved.at);
        out.replaceChildren(badge(saved.verdict), document.createTextNode(" by "), who, document.createTextNode(" at "), at);
        if (saved.note) {
          const n = document.createElement("span");
          n.className = "small";
          n.textContent = "Note: " + saved.note;
          out.append(document.createElement("br"), n);
        }
        buttons.forEach(function (b) { b.setAttribute("aria-pressed", String(b.dataset.verdict === saved.verdict)); });
        leftFilter = !stillInFilter(saved.verdict);
        SA.toast("Saved: " + NAMES[saved.verdict]);
        if (advance && advance.checked && pos) go(nextUrl());
      }).catch(function (err) {
        SA.toast("Not saved: " + err.message, "error");
      }).finally(function () {
        saving = false;
        buttons.forEach(function (b) { b.disabled = false; });
      });
    }
    buttons.forEach(function (b) { b.addEventListener("click", function () { record(b.dataset.verdict); }); });
    Object.keys(KEYS).forEach(function (key) { SA.onKey(key, function () { record(KEYS[key]); }); });

    initCompare();
  }

  /* ---------------------------------------------------------------- compare modes */
  function initCompare() {
    const stage = document.getElementById("stage");
    if (!stage || !stage.querySelector(".pane-corpus")) return;
    const blend = document.getElementById("blend");
    const note = document.getElementById("flicker-note");
    const modeButtons = Array.prototype.slice.call(document.querySelectorAll("[data-mode-btn]"));
    let timer = null;

    function applyBlend() { stage.style.setProperty("--blend", String(Number(blend.value) / 100)); }
    function setMode(mode) {
      clearInterval(timer);
      timer = null;
      stage.dataset.mode = mode;
      stage.classList.remove("show-test");
      modeButtons.forEach(function (b) { b.setAttribute("aria-pressed", String(b.dataset.modeBtn === mode)); });
      if (note) note.textContent = "";
      if (mode === "flicker") {
        let showTest = false;
        const flip = function () {
          showTest = !showTest;
          stage.classList.toggle("show-test", showTest);
          if (note) note.textContent = "Showing the " + (showTest ? "test" : "corpus") + " image";
        };
        flip();
        timer = setInterval(flip, 650);
      }
    }
    modeButtons.forEach(function (b) { b.addEventListener("click", function () { setMode(b.dataset.modeBtn); }); });
    if (blend) {
      blend.addEventListener("input", function () { applyBlend(); if (stage.dataset.mode !== "overlay") setMode("overlay"); });
      applyBlend();
    }
    const mirror = document.querySelector("[data-mirror]");
    function toggleMirror() {
      const on = !stage.classList.contains("mirror-test");
      stage.classList.toggle("mirror-test", on);
      if (mirror) mirror.setAttribute("aria-pressed", String(on));
    }
    if (mirror) mirror.addEventListener("click", toggleMirror);
    SA.onKey("s", function () { setMode("side"); });
    SA.onKey("o", function () { setMode("overlay"); });
    SA.onKey("f", function () { setMode(stage.dataset.mode === "flicker" ? "side" : "flicker"); });
    SA.onKey("m", toggleMirror);
  }

  if (page === "queue") initQueue();
  if (page === "pair") initPair();
})();
