// The console's only script (served from /assets/console.js; the Content-Security-Policy allows
// no other). Pages work without it; it adds two things to Needs attention:
// - the lists refresh every data-refresh-ms from GET /attention, replacing only #attention and
//   only when they changed, so the filter box, anything typed elsewhere and the keyboard focus
//   (put back on the same link) stay as they are;
// - the filter box hides rows that do not contain its text (again after each refresh).
"use strict";
(function () {
  const lists = document.getElementById("attention");
  if (!lists) return;
  const filter = document.getElementById("filter");
  const refreshed = document.getElementById("refreshed");
  const changes = document.getElementById("changes"); // a status region: announced when set
  const every = Math.max(1000, Number(lists.dataset.refreshMs) || 5000);
  let shown = null; // the HTML last fetched

  function applyFilter() {
    const needle = filter ? filter.value.trim().toLowerCase() : "";
    for (const row of lists.querySelectorAll("tr.row")) {
      row.hidden = needle !== "" && !row.textContent.toLowerCase().includes(needle);
    }
  }

  function replace(html) {
    const focused = document.activeElement;
    const href = focused && lists.contains(focused) ? focused.getAttribute("href") : null;
    // The server escaped every stored string; this HTML carries no script.
    lists.innerHTML = html;
    applyFilter();
    if (href !== null) {
      const again = Array.from(lists.querySelectorAll("a[href]")).find(
        (a) => a.getAttribute("href") === href
      );
      if (again) again.focus();
    }
  }

  async function refresh() {
    try {
      const answer = await fetch("/attention", { credentials: "same-origin", cache: "no-store" });
      if (answer.status === 401) {
        const note = document.createElement("p");
        note.className = "error";
        note.setAttribute("role", "alert");
        note.textContent = "Your session ended: sign in again to see current lists.";
        lists.replaceChildren(note);
        return; // stop refreshing
      }
      if (answer.ok) {
        const html = await answer.text();
        if (html !== shown) {
          if (shown !== null && changes) changes.textContent = "The lists changed.";
          replace(html);
        }
        shown = html;
        if (refreshed) refreshed.textContent = "Updated " + new Date().toLocaleTimeString() + ".";
      }
    } catch (e) {
      // The console is unreachable for a moment: keep what is shown, try again later.
    }
    setTimeout(refresh, every);
  }

  if (filter) filter.addEventListener("input", applyFilter);
  setTimeout(refresh, every);
})();
