/* splitaudit UI: reviewing dedup cluster members (the verdict is kept for the next run). */
"use strict";
(function () {
  const SA = window.SA;
  const body = document.body;
  if (body.dataset.page !== "dedup") return;
  const run = body.dataset.run;
  document.querySelectorAll("[data-dedup-verdict]").forEach(function (button) {
    button.addEventListener("click", async function () {
      const member = button.closest(".member");
      const verdict = button.dataset.dedupVerdict;
      try {
        await SA.api("PUT", "/api/v1/dedup/" + run + "/members/" + member.dataset.item + "/review", { verdict: verdict });
        const badge = member.querySelector("[data-verdict]");
        badge.className = "badge verdict-" + verdict;
        badge.textContent = verdict.replace("_", " ");
        SA.toast("saved: " + verdict.replace("_", " ") + " (applies from the next dedup run)");
      } catch (err) {
        SA.toast("not saved: " + err.message, "error");
      }
    });
  });
})();
