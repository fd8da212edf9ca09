/* splitaudit UI: start an audit from the browser (multipart POST /api/v1/audits with upload progress). */
"use strict";
(function () {
  const SA = window.SA;
  const form = document.getElementById("upload-form");
  if (!form) return;
  const errorBox = document.getElementById("upload-error");
  const progressBox = document.getElementById("upload-progress");
  const bar = document.getElementById("upload-bar");
  const pct = document.getElementById("upload-pct");
  const submit = document.getElementById("upload-submit");

  function fail(message, focus) {
    errorBox.textContent = message;
    errorBox.hidden = false;
    if (focus) focus.focus();
  }

  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    errorBox.hidden = true;
    const split = document.getElementById("split-file");
    if (!split.files.length) { fail("Choose the archive of your test split.", split); return; }
    const corpora = Array.prototype.slice.call(form.querySelectorAll('input[name="corpus"]:checked')).map(function (c) { return c.value; });
    if (!corpora.length) { fail("Tick at least one corpus to audit against.", form.querySelector('input[name="corpus"]')); return; }
    const thresholds = {};
    let bad = null;
    form.querySelectorAll("[data-threshold]").forEach(function (input) {
      if (input.value === "") return;
      if (!input.checkValidity()) { bad = bad || input; return; }
      thresholds[input.dataset.threshold] = Number(input.value);
    });
    if (bad) { fail("Threshold " + bad.dataset.threshold + " is out of range (" + bad.min + " to " + bad.max + ").", bad); return; }

    const data = new FormData();
    data.append("split", split.files[0]);
    corpora.forEach(function (c) { data.append("corpus", c); });
    const labels = document.getElementById("labels-file");
    if (labels && labels.files.length) data.append("labels", labels.files[0]);
    const name = document.getElementById("audit-name").value.trim();
    if (name) data.append("name", name);
    if (Object.keys(thresholds).length) data.append("thresholds", JSON.stringify(thresholds));

    const xhr = new XMLHttpRequest();
    xhr.open("POST", "/api/v1/audits");
    const headers = SA.authHeaders({ "Accept": "application/json" });
    Object.keys(headers).forEach(function (k) { xhr.setRequestHeader(k, headers[k]); });
    progressBox.hidden = false;
    submit.disabled = true;
    xhr.upload.addEventListener("progress", function (e) {
      if (!e.lengthComputable) return;
      bar.value = e.loaded / e.total;
      pct.textContent = Math.round(100 * e.loaded / e.total) + "%";
    });
    xhr.addEventListener("load", function () {
      let json = null;
      try { json = JSON.parse(xhr.responseText); } catch (e) { json = null; }
      if (xhr.status === 202 && json && json.id) {
        location.href = "/ui/audits/" + json.id;
        return;
      }
      submit.disabled = false;
      progressBox.hidden = true;
      const message = (json && json.error && json.error.message) || ("the server answered " + xhr.status);
      if (xhr.status === 401) SA.openTokenDialog(message);
      fail("The audit was not started: " + message);
    });
    xhr.addEventListener("error", function () {
      submit.disabled = false;
      progressBox.hidden = true;
      fail("The upload failed: the server did not answer.");
    });
    xhr.send(data);
  });
})();
