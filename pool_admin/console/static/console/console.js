// The console's refresh: re-reads the page's live part (?part=live) every N seconds and puts it
// in place, without reloading the page. N is the operator's choice (kept in localStorage), at
// least 2 s (Sidekiq's floor), or off. Paused while the tab is hidden; a failed read keeps the
// last figures and says so.
"use strict";
(function () {
  const FLOOR_S = 2;
  const KEY = "proxyPoolConsoleInterval";
  const live = document.getElementById("console-live");
  const select = document.getElementById("console-interval");
  const status = document.getElementById("console-status");
  if (!live || !select) return;
  let timer = null;
  let inFlight = null;

  function seconds() {
    const n = Number(select.value);
    return n === 0 ? 0 : Math.max(FLOOR_S, n);
  }

  function schedule() {
    if (timer) clearTimeout(timer);
    timer = null;
    const s = seconds();
    if (s && !document.hidden) timer = setTimeout(refresh, s * 1000);
  }

  async function refresh() {
    if (inFlight) inFlight.abort();
    inFlight = new AbortController();
    const url = new URL(window.location.href);
    url.searchParams.set("part", "live");
    try {
      const response = await fetch(url, {
        credentials: "same-origin",
        headers: { "X-Requested-With": "console" },
        signal: inFlight.signal,
      });
      if (response.redirected || !response.ok) throw new Error(String(response.status));
      live.innerHTML = await response.text();
      status.textContent = "";
      document.dispatchEvent(new CustomEvent("console:refreshed"));
    } catch (error) {
      if (error.name === "AbortError") return;
      status.textContent = "refresh failed (" + error.message + "); showing the last figures";
    } finally {
      inFlight = null;
      schedule();
    }
  }

  const stored = window.localStorage.getItem(KEY);
  const initial = stored !== null ? stored : select.dataset.default;
  if ([...select.options].some((o) => o.value === initial)) select.value = initial;
  select.addEventListener("change", () => {
    window.localStorage.setItem(KEY, select.value);
    schedule();
  });
  document.addEventListener("visibilitychange", schedule);
  schedule();
})();
