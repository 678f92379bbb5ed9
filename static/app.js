// anvil's little JavaScript: copy buttons and confirmations of plain forms.
// Everything else is htmx. The Content-Security-Policy allows no inline
// script, so no page carries an on…= handler: behaviour lives here.
document.addEventListener("click", (ev) => {
  const btn = ev.target.closest("[data-copy]");
  if (!btn) return;
  const el = document.querySelector(btn.getAttribute("data-copy"));
  if (!el) return;
  navigator.clipboard?.writeText(el.textContent.trim()).then(() => {
    const old = btn.textContent;
    btn.textContent = "Copied";
    setTimeout(() => { btn.textContent = old; }, 1500);
  });
});

// A plain form with data-confirm asks before it is sent (htmx elements use
// hx-confirm instead).
document.addEventListener("submit", (ev) => {
  const form = ev.target.closest("form[data-confirm]");
  if (form && !window.confirm(form.getAttribute("data-confirm"))) ev.preventDefault();
});

// The run page's log tools: a search box that filters lines (new lines
// arriving live are filtered too), jumps to the first error line and to
// the end, and the live duration of a running run.
(() => {
  const log = () => document.getElementById("run-log");
  const filter = () => {
    const box = document.getElementById("log-search");
    const el = log();
    if (!box || !el) return;
    const q = box.value.trim().toLowerCase();
    // A pipeline step chosen in the Steps list (data-step-filter) shows
    // that step's lines alone (views.LogHTMLStep marks them data-step).
    const step = el.dataset.step || "";
    let shown = 0, all = 0;
    for (const line of el.querySelectorAll(".log-line")) {
      all++;
      const hit = (step === "" || line.dataset.step === step) && (q === "" || line.textContent.toLowerCase().includes(q));
      line.style.display = hit ? "" : "none"; // (the hidden attribute loses to the line's display class)
      if (hit) shown++;
    }
    const count = document.getElementById("log-count");
    if (count) count.textContent = q === "" && step === "" ? "" : `${shown} of ${all} lines`;
  };
  const filtering = () => document.getElementById("log-search")?.value || log()?.dataset.step;
  document.addEventListener("input", (ev) => {
    if (ev.target.id === "log-search") filter();
  });
  document.addEventListener("htmx:sseMessage", () => {
    if (filtering()) filter();
  });
  document.addEventListener("htmx:afterSwap", (ev) => {
    if (ev.target.id === "run-log" && filtering()) filter();
    if (ev.target.id === "run-steps-live") mark();
  });
  // The Services section is fetched again on every change of the run: a
  // service's log someone opened stays open, and where it was scrolled
  // (the end, when it was there, to follow new lines).
  let opened = new Map();
  document.addEventListener("htmx:beforeSwap", (ev) => {
    if (ev.target.id !== "run-services-live") return;
    opened = new Map();
    for (const d of ev.target.querySelectorAll("details[data-service-key][open]")) {
      const pre = d.querySelector("pre");
      const end = !pre || pre.scrollHeight - pre.scrollTop - pre.clientHeight < 40;
      opened.set(d.dataset.serviceKey, end ? -1 : pre.scrollTop);
    }
  });
  document.addEventListener("htmx:afterSwap", (ev) => {
    if (ev.target.id !== "run-services-live") return;
    for (const d of ev.target.querySelectorAll("details[data-service-key]")) {
      if (!opened.has(d.dataset.serviceKey)) continue;
      d.dataset.restored = "1"; // its toggle event keeps the place restored here
      d.open = true;
      const pre = d.querySelector("pre"), at = opened.get(d.dataset.serviceKey);
      if (pre) pre.scrollTop = at < 0 ? pre.scrollHeight : at;
    }
  });
  // A service's log opens at its end, where the latest lines are.
  document.addEventListener("toggle", (ev) => {
    const d = ev.target;
    if (!d.matches || !d.matches("details[data-service-key]") || !d.open) return;
    if (d.dataset.restored) {
      delete d.dataset.restored;
      return;
    }
    const pre = d.querySelector("pre");
    if (pre) pre.scrollTop = pre.scrollHeight;
  }, true);
  // The chosen step's button stays pressed across the list's live swaps.
  const mark = () => {
    const step = log()?.dataset.step || "";
    for (const b of document.querySelectorAll("[data-step-filter]")) {
      b.setAttribute("aria-pressed", String(b.dataset.stepFilter === step && !b.hasAttribute("data-first-error")));
    }
  };
  const firstError = (el) => {
    const first = [...el.querySelectorAll(".log-error")].find((l) => l.style.display !== "none");
    if (first) {
      first.scrollIntoView({ block: "center" });
      first.classList.add("outline", "outline-1", "outline-red-400");
    }
  };
  document.addEventListener("click", (ev) => {
    const el = log();
    if (!el) return;
    const pick = ev.target.closest("[data-step-filter]");
    if (pick) {
      el.dataset.step = pick.dataset.stepFilter;
      filter();
      mark();
      if (pick.hasAttribute("data-first-error")) firstError(el);
      else el.scrollTop = 0;
      return;
    }
    if (ev.target.closest("#log-end")) {
      el.scrollTop = el.scrollHeight;
    } else if (ev.target.closest("#log-first-error")) {
      firstError(el);
    }
  });
  const tick = () => {
    const dd = document.querySelector("[data-testid=run-duration][data-started]");
    if (!dd || !dd.dataset.started || dd.dataset.finished) return;
    // The words of views.Duration (views/words.go): "0.4 s", "12 s",
    // "3 min 5 s", "2 h 5 min".
    const ms = Math.max(0, Date.now() - Date.parse(dd.dataset.started));
    const s = Math.floor(ms / 1000), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    dd.textContent = s < 10 ? `${(Math.floor(ms / 100) / 10).toFixed(1)} s`
      : s < 60 ? `${s} s` : h === 0 ? `${m} min ${s % 60} s` : `${h} h ${m} min`;
  };
  setInterval(tick, 1000);
})();

// A log marked data-scroll-end (a repair run's, on its incident) opens at
// its end, where the failure is, and follows new lines while it is there.
(() => {
  const atEnd = (el) => el.scrollHeight - el.scrollTop - el.clientHeight < 40;
  const toEnd = () => {
    for (const el of document.querySelectorAll("[data-scroll-end]")) el.scrollTop = el.scrollHeight;
  };
  document.addEventListener("DOMContentLoaded", toEnd);
  if (document.readyState !== "loading") toEnd();
  document.addEventListener("htmx:beforeSwap", (ev) => {
    const el = ev.target;
    if (el && el.hasAttribute && el.hasAttribute("data-scroll-end")) el.dataset.follow = atEnd(el) ? "1" : "";
  });
  document.addEventListener("htmx:afterSwap", (ev) => {
    const el = ev.target;
    if (!el || !el.hasAttribute) return;
    if (el.hasAttribute("data-scroll-end")) {
      if (el.dataset.follow) el.scrollTop = el.scrollHeight;
      return;
    }
    // A fragment that brings a log of its own (the incident's live part,
    // fetched again on every change of the incident or its run) opens it
    // at the end too, as the page did.
    for (const log of el.querySelectorAll("[data-scroll-end]")) log.scrollTop = log.scrollHeight;
  });
})();

// Times shown in the viewer's own zone: <time datetime="…" data-local>
// (the cron monitors' next expected run, docs/monitors.md). The server
// renders UTC; this turns it into local time, again after every htmx swap.
(() => {
  const localize = (root) => {
    for (const el of (root || document).querySelectorAll("time[data-local]")) {
      const d = new Date(el.getAttribute("datetime"));
      if (!isNaN(d)) el.textContent = d.toLocaleString(undefined, { weekday: "short", hour: "2-digit", minute: "2-digit", day: "numeric", month: "short" }) + " (your time)";
    }
  };
  document.addEventListener("DOMContentLoaded", () => localize());
  document.addEventListener("htmx:afterSwap", (ev) => localize(ev.target));
})();

// Times are written relative ("5 min ago") with the exact time in UTC on
// hover; here the hover text becomes the viewer's own zone, with the zone's
// name. ECMA-402 refuses dateStyle/timeStyle together with timeZoneName
// (a TypeError that stopped every later time on the page), so the parts
// are named one by one.
(() => {
  const exact = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric",
    hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short",
  });
  const local = (root) => {
    for (const el of root.querySelectorAll("time[data-local-time]")) {
      const t = new Date(el.getAttribute("datetime"));
      if (!isNaN(t)) el.title = exact.format(t);
    }
  };
  document.addEventListener("DOMContentLoaded", () => local(document));
  if (document.readyState !== "loading") local(document);
  document.addEventListener("htmx:afterSwap", (ev) => local(ev.target));
})();

// The navigation folds into a menu below the lg breakpoint:
// the "Menu" button shows and hides the links.
document.addEventListener("click", (ev) => {
  const btn = ev.target.closest("[data-nav-toggle]");
  if (!btn) return;
  const items = document.getElementById(btn.getAttribute("aria-controls"));
  if (!items) return;
  const open = items.classList.toggle("hidden") === false;
  items.classList.toggle("flex", open);
  btn.setAttribute("aria-expanded", String(open));
});

// The inbox's keyboard: j and k move through the incidents,
// enter opens the selected one. Keys typed into a field are left alone.
document.addEventListener("keydown", (ev) => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
  if (ev.target.closest("input, textarea, select, [contenteditable]")) return;
  const rows = [...document.querySelectorAll("[data-keynav]")];
  if (rows.length === 0) return;
  let i = rows.findIndex((r) => r.hasAttribute("data-selected"));
  if (ev.key === "j" || ev.key === "k") {
    if (i >= 0) rows[i].removeAttribute("data-selected");
    i = ev.key === "j" ? Math.min(rows.length - 1, i + 1) : Math.max(0, i - 1);
    rows[i].setAttribute("data-selected", "");
    rows[i].scrollIntoView({ block: "nearest" });
    rows[i].querySelector("a")?.focus({ preventScroll: true });
    ev.preventDefault();
  } else if (ev.key === "Enter" && i >= 0 && !ev.target.closest("a, button")) {
    rows[i].querySelector("a")?.click();
  }
});

// A live region is rendered with the page, and its event stream opens a
// moment later: what happened in between (an incident that arrived while
// the inbox loaded, a run that finished) was published to no one. When a
// stream opens, or opens again after a drop, each region it feeds fetches
// itself once, so a page never misses what the server already told nobody
// (docs/architecture.md, "One writer per project").
document.addEventListener("htmx:sseOpen", (ev) => {
  for (const el of ev.target.querySelectorAll("[hx-trigger]")) {
    const m = (el.getAttribute("hx-trigger") || "").match(/sse:[\w-]+/);
    if (m && el.getAttribute("hx-get")) htmx.trigger(el, m[0]);
  }
});
