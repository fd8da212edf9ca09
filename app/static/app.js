/* splitaudit UI: shared behaviour (token, API calls, thumbnails, polling, help, keyboard). No dependencies. */
"use strict";
(function () {
  const TOKEN_KEY = "splitaudit.token";
  const body = document.body;
  const authOn = body.dataset.auth === "on";
  const readAuth = body.dataset.readAuth === "on";
  const keyHandlers = {};

  function token() { try { return sessionStorage.getItem(TOKEN_KEY) || ""; } catch (e) { return ""; } }
  function setToken(value) {
    try { if (value) sessionStorage.setItem(TOKEN_KEY, value); else sessionStorage.removeItem(TOKEN_KEY); } catch (e) { /* private mode */ }
    updateTokenButton();
  }
  function authHeaders(extra) {
    const h = Object.assign({}, extra || {});
    const t = token();
    if (t) h["Authorization"] = "Bearer " + t;
    return h;
  }

  /** Call the REST API; resolves to the JSON body, rejects with {status, code, message}. */
  async function api(method, url, data) {
    const init = { method: method, headers: authHeaders({ "Accept": "application/json" }) };
    if (data !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(data);
    }
    let resp;
    try { resp = await fetch(url, init); } catch (e) {
      throw { status: 0, code: "network", message: "the server did not answer (" + e.message + ")" };
    }
    let json = null;
    try { json = await resp.json(); } catch (e) { json = null; }
    if (!resp.ok) {
      const err = (json && json.error) || {};
      const failure = { status: resp.status, code: err.code || "http_" + resp.status, message: err.message || resp.statusText };
      if (resp.status === 401 && authOn) openTokenDialog(failure.message);
      throw failure;
    }
    return json;
  }

  let toastTimer = null;
  function toast(message, kind) {
    const el = document.getElementById("toast");
    if (!el) return;
    el.textContent = message;
    el.className = "toast show" + (kind ? " " + kind : "");
    clearTimeout(toastTimer);
    toastTimer = setTimeout(function () { el.className = "toast"; }, kind === "error" ? 6000 : 2500);
  }

  /* ---------------------------------------------------------------- dialogs */
  function openDialog(dialog) {
    if (!dialog || dialog.open) return;
    if (typeof dialog.showModal === "function") dialog.showModal(); else dialog.setAttribute("open", "");
  }
  function closeDialog(dialog) { if (dialog && dialog.open) dialog.close(); }

  function updateTokenButton() {
    const btn = document.getElementById("token-button");
    if (btn) btn.textContent = token() ? "API token ✓" : "API token";
  }
  function openTokenDialog(message) {
    const dialog = document.getElementById("token-dialog");
    if (!dialog) return;
    const err = document.getElementById("token-error");
    if (err) { err.hidden = !message; err.textContent = message || ""; }
    openDialog(dialog);
    const input = document.getElementById("token-input");
    if (input) { input.value = ""; input.focus(); }
  }

  function wireDialogs() {
    document.querySelectorAll("[data-help-open]").forEach(function (b) {
      b.addEventListener("click", function () { openDialog(document.getElementById("help-dialog")); });
    });
    document.querySelectorAll("[data-token-open]").forEach(function (b) {
      b.addEventListener("click", function () { openTokenDialog(""); });
    });
    document.querySelectorAll("[data-dialog-close]").forEach(function (b) {
      b.addEventListener("click", function () { closeDialog(b.closest("dialog")); });
    });
    const form = document.getElementById("token-form");
    if (form) {
      form.addEventListener("submit", function (ev) {
        const input = document.getElementById("token-input");
        const value = input ? input.value.trim() : "";
        if (!value) { ev.preventDefault(); return; }
        setToken(value);
        toast("Token saved for this tab");
        if (readAuth) setTimeout(function () { location.reload(); }, 50);
      });
    }
    document.querySelectorAll("[data-token-forget]").forEach(function (b) {
      b.addEventListener("click", function () { setToken(""); closeDialog(b.closest("dialog")); toast("Token forgotten"); });
    });
    updateTokenButton();
  }

  /* ---------------------------------------------------------------- thumbnails */
  function shortHash(h) { return h ? h.slice(0, 16) + "…" : "unknown"; }
  function showMissing(img) {
    if (img.dataset.missing) return;
    img.dataset.missing = "1";
    const big = img.classList.contains("big");
    const box = document.createElement("span");
    box.className = "thumb-missing" + (big ? " big" : " mini");
    box.setAttribute("role", "img");
    box.setAttribute("aria-label", (img.alt || "image") + ": image unavailable");
    const title = document.createElement("strong");
    title.textContent = big ? "Image source unavailable" : "missing";
    box.appendChild(title);
    [["sha256", img.dataset.sha256], ["pixels", img.dataset.pixel]].forEach(function (pair) {
      if (!pair[1] && (pair[0] === "pixels" || !big)) return;
      const line = document.createElement("code");
      line.textContent = pair[0] + " " + (big ? (pair[1] || "unknown") : shortHash(pair[1]));
      line.title = pair[1] || "";
      box.appendChild(line);
    });
    if (big) {
      const reason = document.createElement("span");
      reason.className = "reason";
      box.appendChild(reason);
      const url = img.dataset.authSrc || img.getAttribute("src");
      if (url) {
        fetch(url, { headers: authHeaders() }).then(function (r) { return r.json(); }).then(function (j) {
          if (j && j.error) reason.textContent = j.error.message;
        }).catch(function () { /* the placeholder already says enough */ });
      }
    }
    img.replaceWith(box);
  }
  function loadAuthImages(root) {
    root.querySelectorAll("img[data-auth-src]:not([data-loading])").forEach(function (img) {
      img.dataset.loading = "1";
      fetch(img.dataset.authSrc, { headers: authHeaders() }).then(function (r) {
        if (!r.ok) throw new Error(String(r.status));
        return r.blob();
      }).then(function (blob) { img.src = URL.createObjectURL(blob); }).catch(function () { showMissing(img); });
    });
  }
  function wireThumbnails() {
    document.addEventListener("error", function (ev) {
      const t = ev.target;
      if (t && t.tagName === "IMG" && t.classList.contains("thumb")) showMissing(t);
    }, true);
    document.querySelectorAll("img.thumb").forEach(function (img) {
      if (img.complete && img.getAttribute("src") && img.naturalWidth === 0) showMissing(img);
    });
    loadAuthImages(document);
  }

  /* ---------------------------------------------------------------- polling audits */
  const TERMINAL = ["done", "failed"];
  function setField(root, name, value) {
    root.querySelectorAll('[data-field="' + name + '"]').forEach(function (el) { el.textContent = value; });
  }
  function fmt(n) { return n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US"); }
  function applyAudit(el, a) {
    el.querySelectorAll('[data-field="status"]').forEach(function (s) {
      s.textContent = a.status;
      s.className = "status status-" + a.status;
    });
    el.querySelectorAll('[data-field="progress"]').forEach(function (p) { p.value = a.progress || 0; });
    setField(el, "pct", Math.round((a.progress || 0) * 100) + "%");
    setField(el, "message", a.message || "");
    if (TERMINAL.indexOf(a.status) >= 0) {
      el.querySelectorAll('[data-field="progress-wrap"]').forEach(function (w) { w.hidden = true; });
      const s = a.summary || {};
      if (s.by_kind) {
        setField(el, "items", fmt(s.items));
        setField(el, "flagged", fmt(s.flagged));
        el.querySelectorAll("[data-kind]").forEach(function (c) { c.textContent = fmt(s.by_kind[c.dataset.kind]); });
      }
      if (a.status === "failed" && a.error) {
        const err = document.createElement("div");
        err.className = "error small";
        err.textContent = a.error;
        const cell = el.querySelector(".status-cell") || el;
        cell.appendChild(err);
      }
    }
  }
  function poll(el) {
    const url = el.dataset.poll;
    const every = Number(body.dataset.pollMs || 1000);
    function tick() {
      api("GET", url).then(function (a) {
        applyAudit(el, a);
        if (TERMINAL.indexOf(a.status) >= 0) {
          delete el.dataset.poll;
          if (el.hasAttribute("data-reload-on-done")) location.reload();
          return;
        }
        setTimeout(tick, every);
      }).catch(function (err) {
        if (err.status === 401 || err.status === 404) return;
        setTimeout(tick, every * 3);
      });
    }
    setTimeout(tick, every);
  }

  /* ---------------------------------------------------------------- forms, downloads */
  function wireForms() {
    document.querySelectorAll("form[data-autosubmit]").forEach(function (form) {
      form.querySelectorAll("select").forEach(function (s) {
        s.addEventListener("change", function () {
          // Drop empty fields so the URL stays short and shareable.
          form.querySelectorAll("select, input").forEach(function (f) { if (f.name && !f.value) f.disabled = true; });
          form.submit();
        });
      });
    });
    if (!readAuth) return;
    document.querySelectorAll("a[data-download]").forEach(function (a) {
      a.addEventListener("click", function (ev) {
        ev.preventDefault();
        fetch(a.href, { headers: authHeaders() }).then(function (r) {
          if (!r.ok) throw new Error("HTTP " + r.status);
          const disp = r.headers.get("Content-Disposition") || "";
          const m = /filename="([^"]+)"/.exec(disp);
          return r.blob().then(function (b) { return [b, m ? m[1] : "download"]; });
        }).then(function (pair) {
          const link = document.createElement("a");
          link.href = URL.createObjectURL(pair[0]);
          link.download = pair[1];
          document.body.appendChild(link);
          link.click();
          link.remove();
        }).catch(function (e) { toast("Download failed: " + e.message, "error"); });
      });
    });
  }

  /* When reads need a token, pages come back as a prompt; reload them with the stored token. */
  function authedReload() {
    if (body.dataset.page !== "auth-required" || !token()) return;
    fetch(location.href, { headers: authHeaders({ "Accept": "text/html" }) }).then(function (r) {
      if (r.status === 401) { setToken(""); openTokenDialog("That token was refused; enter a valid one."); return null; }
      return r.text();
    }).then(function (html) {
      if (html === null) return;
      document.open();
      document.write(html);
      document.close();
    }).catch(function (e) { toast("Could not load the page: " + e.message, "error"); });
  }

  /* ---------------------------------------------------------------- keyboard */
  function typing(target) {
    if (!target) return false;
    const tag = target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || target.isContentEditable;
  }
  function wireKeys() {
    document.addEventListener("keydown", function (ev) {
      if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.defaultPrevented) return;
      if (typing(ev.target)) {
        if (ev.key === "Escape") ev.target.blur();
        return;
      }
      if (document.querySelector("dialog[open]")) return;
      if (ev.key === "?") { ev.preventDefault(); openDialog(document.getElementById("help-dialog")); return; }
      const handler = keyHandlers[ev.key];
      if (handler) { ev.preventDefault(); handler(ev); }
    });
  }

  window.SA = {
    api: api, toast: toast, token: token, authHeaders: authHeaders, openTokenDialog: openTokenDialog,
    onKey: function (key, fn) { keyHandlers[key] = fn; }, fmt: fmt,
  };

  wireDialogs();
  wireThumbnails();
  wireForms();
  wireKeys();
  document.querySelectorAll("[data-poll]").forEach(poll);
  authedReload();
})();
