// The console's only script (served from /assets/console.js; the Content-Security-Policy allows
// no other). Pages work without it; it adds two things to Needs attention:
// - the lists refresh every data-refresh-ms from GET /attention, replacing only #attention and
//   only when they changed, so the filter box, anything typed elsewhere and the keyboard focus
//   (put back on the same link) stay as they are;
// - the filter box hides rows that do not contain its text (again after each refresh);
// - times marked data-ago (absolute UTC from the server, so a refreshed list changes only when
//   its contents do) read "5m ago", kept current at every refresh; the title keeps the time.
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

  function ago(ms) {
    const s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + "s ago";
    if (s < 3600) return Math.floor(s / 60) + "m ago";
    if (s < 86400) return Math.floor(s / 3600) + "h ago";
    return Math.floor(s / 86400) + "d ago";
  }

  function relativeTimes() {
    const now = Date.now();
    for (const t of lists.querySelectorAll("time[data-ago]")) {
      const at = Date.parse(t.getAttribute("datetime") || "");
      if (!Number.isNaN(at)) t.textContent = ago(now - at);
    }
  }

  // The same link again: in the same section first (a record may be listed in two).
  function findLink(href, sectionId) {
    const same = (a) => a.getAttribute("href") === href;
    const section = sectionId ? document.getElementById(sectionId) : null;
    const inSection = section && lists.contains(section) ? section : null;
    return (
      (inSection && Array.from(inSection.querySelectorAll("a[href]")).find(same)) ||
      Array.from(lists.querySelectorAll("a[href]")).find(same)
    );
  }

  function replace(html) {
    const focused = document.activeElement;
    const inLists = focused && lists.contains(focused);
    const href = inLists ? focused.getAttribute("href") : null;
    const where = inLists ? focused.closest("section[id]") : null;
    // The server escaped every stored string; this HTML carries no script.
    lists.innerHTML = html;
    applyFilter();
    relativeTimes();
    if (href !== null) {
      const again = findLink(href, where ? where.id : null);
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
        relativeTimes();
        if (refreshed) refreshed.textContent = "Updated " + new Date().toLocaleTimeString() + ".";
      }
    } catch (e) {
      // The console is unreachable for a moment: keep what is shown, try again later.
    }
    setTimeout(refresh, every);
  }

  if (filter) filter.addEventListener("input", applyFilter);
  relativeTimes();
  setTimeout(refresh, every);
})();
