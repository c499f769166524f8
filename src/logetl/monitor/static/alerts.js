/* logetl monitor: alerts (list page, markers on the run list and the run page), run search, daily trend.
 * Kept apart from app.js: the run list is marked by watching its rows (a MutationObserver), so the list's
 * own code stays as it is. No framework, no CDN. */
(function () {
  "use strict";
  const REFRESH_MS = 30000;
  const $ = (sel, el) => (el || document).querySelector(sel);

  const { el, api, fmtTime } = window.LogetlCommon;
  const fmtInt = (n) => (n === null || n === undefined ? "" : Number(n).toLocaleString("en-US"));
  const fmtDur = (s) => (s === null || s === undefined ? "" : s < 60 ? s.toFixed(s < 10 ? 2 : 1) + " s" : (s / 60).toFixed(1) + " min");
  const fmtTags = (t) => Object.entries(t || {}).map(([k, v]) => `${k}=${v}`).join(" ");

  function marker(runId, list) {
    return el("a", { class: "alert-marker", href: "/alerts?run_id=" + runId, "data-alerts": String(list.length),
      title: list.map((a) => a.message).join("\n"), text: "⚑ " + list.length });
  }

  /* The run list: a ⚑ marker in the first cell of each run that fired alerts (whatever the columns). */
  function runsMarkers() {
    const tbody = $("#runs tbody");
    let timer = null, busy = false;
    async function mark() {
      if (busy) return;
      busy = true;
      try {
        const ids = [...tbody.rows].map((r) => r.dataset.runId).filter(Boolean);
        if (!ids.length) return;
        const body = await api("/api/alerts?limit=1000&run_id=" + ids.join(","));
        const by = {};
        for (const a of body.alerts) (by[a.run_id] = by[a.run_id] || []).push(a);
        for (const tr of tbody.rows) {
          const list = by[tr.dataset.runId] || [];
          const old = tr.querySelector(".alert-marker");
          const want = list.length ? String(list.length) : null;
          if ((old ? old.dataset.alerts : null) === want) continue;
          if (old) old.remove();
          if (want && tr.firstChild) tr.firstChild.append(marker(tr.dataset.runId, list));
          tr.classList.toggle("has-alert", !!want);
        }
      } catch (e) { /* the list itself shows refresh failures */ }
      finally { busy = false; }
    }
    // rows are added, reordered and redrawn by the list's own refresh: mark again after each change
    new MutationObserver(() => { clearTimeout(timer); timer = setTimeout(mark, 50); })
      .observe(tbody, { childList: true, subtree: true });
    setInterval(mark, REFRESH_MS);
    mark();
  }

  /* The run page: the marker beside the status, and the alerts in a box. */
  function runMarker(runId) {
    async function load() {
      const body = await api("/api/alerts?run_id=" + runId);
      const mark = $("#run-alert"), box = $("#alerts-box");
      mark.hidden = box.hidden = !body.alerts.length;
      if (!body.alerts.length) return;
      mark.textContent = "⚑ " + body.alerts.length;
      mark.dataset.alerts = String(body.alerts.length);
      mark.title = body.alerts.map((a) => a.message).join("\n");
      const ul = el("ul");
      for (const a of body.alerts) ul.append(el("li", { "data-alert-id": a.id, text: `${a.when}: ${a.message}` }));
      box.textContent = "";
      box.append(el("strong", { text: "Alerts" }), ul);
    }
    load().catch(() => {});
    setInterval(() => load().catch(() => {}), REFRESH_MS);
  }

  /* /alerts: fired alerts (newest first) with their webhook delivery, and the rules. */
  function alertsPage() {
    const params = new URLSearchParams(location.search);
    const runId = params.get("run_id") || "";
    if (runId) $("#alerts-filter").textContent = "run " + runId;
    async function load() {
      const [fired, rules] = await Promise.all([
        api("/api/alerts" + (runId ? "?run_id=" + encodeURIComponent(runId) : "")), api("/api/alert-rules")]);
      const tbody = $("#alerts tbody");
      tbody.textContent = "";
      for (const a of fired.alerts) {
        const d = a.delivery;
        const last = d && d.tries.length ? d.tries[d.tries.length - 1] : null;
        const state = d ? el("span", { class: "badge " + d.state, title: last ? `attempt ${last.attempt}: ${last.status || last.error}` : "", text: `${d.state} (${d.attempts})` }) : "";
        tbody.append(el("tr", { "data-alert-id": a.id, "data-run-id": a.run_id },
          el("td", { text: fmtTime(a.created_at) }), el("td", { text: a.application }),
          el("td", {}, el("a", { href: "/runs/" + a.run_id, text: a.run_id })),
          el("td", { text: `#${a.rule_id} ${a.when}` }), el("td", { class: "message", text: a.message }), el("td", {}, state)));
      }
      if (!fired.alerts.length) tbody.append(el("tr", {}, el("td", { colspan: 6, class: "empty", text: "No alerts." })));
      const rb = $("#rules tbody");
      rb.textContent = "";
      for (const r of rules.rules) {
        rb.append(el("tr", { "data-rule-id": r.id }, ...[r.id, r.application, r.tag || "", r.when,
          r.threshold === null ? "" : String(r.threshold), r.last || "", r.owner || "everyone", r.webhook].map((v) => el("td", { text: String(v) }))));
      }
      if (!rules.rules.length) rb.append(el("tr", {}, el("td", { colspan: 8, class: "empty", text: "No rules." })));
    }
    load();
    setInterval(load, REFRESH_MS);
  }

  /* /search?q=...: runs by input or output path, tag, error text or application. */
  async function searchPage() {
    const q = $("#search-q").value.trim();
    const info = $("#search-info"), tbody = $("#results tbody");
    if (!q) { info.textContent = "Type a path, a tag (KEY=VALUE), error text or an application."; return; }
    try {
      const body = await api("/api/search?limit=200&q=" + encodeURIComponent(q));
      info.textContent = `${fmtInt(body.total)} run(s) match “${q}”` + (body.total > body.runs.length ? `; the newest ${body.runs.length} shown` : "");
      for (const r of body.runs) {
        tbody.append(el("tr", { "data-run-id": r.run_id }, el("td", { text: r.application }),
          el("td", {}, el("a", { href: "/runs/" + r.run_id, text: r.run_id })),
          el("td", {}, el("span", { class: "badge " + r.status.toLowerCase(), text: r.status })),
          el("td", { text: fmtTime(r.started_at) }), el("td", { class: "paths", text: r.inputs.join("\n") }),
          el("td", { class: "paths", text: r.outputs.join("\n") }), el("td", { text: fmtTags(r.tags) }),
          el("td", { class: "paths", text: r.error || "" })));
      }
      if (!body.runs.length) tbody.append(el("tr", {}, el("td", { colspan: 8, class: "empty", text: "No runs match." })));
    } catch (e) { info.textContent = "search failed: " + e.message; }
  }

  function bars(svg, days, key, fmt, cls) {
    const W = 760, H = 160, LEFT = 70, BOTTOM = 22;
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`); svg.setAttribute("width", W); svg.setAttribute("height", H);
    svg.textContent = "";
    const shown = days.filter((d) => d[key] !== null);
    if (!shown.length) { svg.append(el("svg:text", { x: 10, y: 20, text: "No data." })); return; }
    const max = Math.max(...shown.map((d) => d[key]), 1e-9);
    const bw = Math.max(2, Math.min(30, (W - LEFT - 10) / days.length - 2));
    svg.append(el("svg:text", { x: 4, y: 14, class: "axis-label", text: fmt(max) }),
      el("svg:line", { x1: LEFT - 4, x2: W, y1: H - BOTTOM, y2: H - BOTTOM, class: "baseline" }));
    days.forEach((d, i) => {
      if (d[key] === null) return;
      const h = ((H - BOTTOM - 20) * d[key]) / max;
      svg.append(el("svg:rect", { x: LEFT + i * (bw + 2), y: H - BOTTOM - h, width: bw, height: h, class: "trend-bar " + cls, "data-day": d.day },
        el("svg:title", { text: `${d.day}: ${fmt(d[key])} (${d.runs} runs${d.pruned ? `, ${d.pruned} pruned` : ""})` })));
    });
    svg.append(el("svg:text", { x: LEFT, y: H - 4, class: "axis-label", text: days[0].day }),
      el("svg:text", { x: W - 70, y: H - 4, class: "axis-label", text: days[days.length - 1].day }));
  }

  /* /trend?application=...: per-day runs, durations and volumes, pruned runs included. */
  async function trendPage(application) {
    const body = await api("/api/trend?application=" + encodeURIComponent(application));
    bars($("#trend-duration"), body.days, "mean_duration", fmtDur, "duration");
    bars($("#trend-records"), body.days, "records_written", fmtInt, "records");
    const tbody = $("#trend tbody");
    for (const d of body.days) {
      tbody.append(el("tr", { "data-day": d.day }, el("td", { text: d.day }),
        ...[fmtInt(d.runs), fmtInt(d.successful), fmtInt(d.failed), fmtDur(d.mean_duration), fmtDur(d.max_duration),
          fmtInt(d.records_read), fmtInt(d.records_written), fmtInt(d.pruned)].map((v) => el("td", { class: "num", text: v }))));
    }
    if (!body.days.length) tbody.append(el("tr", {}, el("td", { colspan: 9, class: "empty", text: "No runs." })));
  }

  window.LogetlAlerts = { runsMarkers, runMarker, alertsPage, searchPage, trendPage };
})();
