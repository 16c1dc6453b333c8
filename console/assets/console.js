// The console's only script (served from /assets/console.js; the Content-Security-Policy allows
// no other). Pages work without it; it adds two things to Needs attention:
// - the lists refresh every data-refresh-ms from GET /attention, replacing only #attention, so
//   the filter box and anything typed elsewhere stay as they are;
// - the filter box hides rows that do not contain its text (again after each refresh).
"use strict";
(function () {
  const lists = document.getElementById("attention");
  if (!lists) return;
  const filter = document.getElementById("filter");
  const every = Math.max(1000, Number(lists.dataset.refreshMs) || 5000);

  function applyFilter() {
    const needle = filter ? filter.value.trim().toLowerCase() : "";
    for (const row of lists.querySelectorAll("tr.row")) {
      row.hidden = needle !== "" && !row.textContent.toLowerCase().includes(needle);
    }
  }

  async function refresh() {
    try {
      const answer = await fetch("/attention", { credentials: "same-origin", cache: "no-store" });
      if (answer.status === 401) {
        const note = document.createElement("p");
        note.className = "error";
        note.textContent = "Your session ended: sign in again to see current lists.";
        lists.replaceChildren(note);
        return; // stop refreshing
      }
      if (answer.ok) {
        // The server escaped every stored string; this HTML carries no script.
        lists.innerHTML = await answer.text();
        applyFilter();
      }
    } catch (e) {
      // The console is unreachable for a moment: keep what is shown, try again later.
    }
    setTimeout(refresh, every);
  }

  if (filter) filter.addEventListener("input", applyFilter);
  setTimeout(refresh, every);
})();
