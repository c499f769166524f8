/* logetl monitor: the all-applications page and the run page. No framework, no CDN.
 * Refreshes update the DOM in place (rows and nodes keyed by id), so scroll position and the user's
 * selection survive them. */
(function () {
  "use strict";
  const SVG = "http://www.w3.org/2000/svg";
  const REFRESH_MS = 30000;
  const $ = (sel, el) => (el || document).querySelector(sel);

  function el(tag, attrs, ...children) {
    const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined) continue;
      if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined) node.append(c);
    return node;
  }

  async function api(path) {
    const r = await fetch(path, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    if (r.status === 401) { location.href = "/login"; throw new Error("unauthorized"); }
    const body = await r.json();
    if (!r.ok) throw new Error(body.error ? body.error.message : r.statusText);
    return body;
  }

  const fmtTime = (t) => (t ? new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19) : "");
  function fmtDur(s) {
    if (s === null || s === undefined) return "";
    if (s < 60) return s.toFixed(s < 10 ? 2 : 1) + " s";
    const m = Math.floor(s / 60), r = Math.round(s % 60);
    return m < 60 ? `${m} min ${r} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
  }
  const fmtInt = (n) => (n === null || n === undefined ? "" : Number(n).toLocaleString("en-US"));

  /* Auto-refresh every 30 s, ON by default; the choice is remembered. */
  function autoRefresh(load) {
    const button = $("#refresh-toggle");
    let on = localStorage.getItem("logetl.refresh") !== "off";
    let timer = null;
    const show = () => {
      button.textContent = "Auto-refresh: " + (on ? "ON" : "OFF");
      button.setAttribute("aria-pressed", String(on));
      button.dataset.state = on ? "on" : "off";
    };
    const arm = () => { clearInterval(timer); timer = on ? setInterval(tick, REFRESH_MS) : null; };
    async function tick() {
      try { await load(); $("#updated").textContent = "updated " + new Date().toLocaleTimeString(); }
      catch (e) { $("#updated").textContent = "refresh failed: " + e.message; }
    }
    button.addEventListener("click", () => { on = !on; localStorage.setItem("logetl.refresh", on ? "on" : "off"); show(); arm(); });
    show(); arm();
    return tick;
  }

  /* ------------------------------------------------------------------------------------------------ */
  /* All applications                                                                                   */

  const COLUMNS = [
    { key: "application", label: "Application" },
    { key: "run_id", label: "Run id", link: true },
    { key: "owner", label: "Owner" },
    { key: "status", label: "Status", badge: true },
    { key: "started_at", label: "Start", fmt: fmtTime },
    { key: "finished_at", label: "End", fmt: fmtTime },
    { key: "duration", label: "Duration", fmt: fmtDur, num: true },
    { key: "records_read", label: "Lines read", fmt: fmtInt, num: true },
    { key: "records_written", label: "Records written", fmt: fmtInt, num: true },
    { key: "engine", label: "Engine" },
    { key: "program", label: "Program" },
    { key: "tags", label: "Tags", fmt: (t) => Object.entries(t || {}).map(([k, v]) => `${k}=${v}`).join(" "), nosort: true },
  ];
  const DEFAULT_COLUMNS = ["application", "run_id", "owner", "status", "started_at", "duration", "records_written", "engine"];

  function runsPage() {
    const saved = JSON.parse(localStorage.getItem("logetl.columns") || "null");
    const params = new URLSearchParams(location.search);
    const state = {
      columns: Array.isArray(saved) && saved.length ? saved.filter((k) => COLUMNS.some((c) => c.key === k)) : DEFAULT_COLUMNS.slice(),
      status: params.getAll("status"), application: params.get("application") || "",
      since: params.get("since") || "", until: params.get("until") || "",
      sort: params.get("sort") || "started_at", order: params.get("order") || "desc",
      page: Number(params.get("page") || 1), perPage: Number(params.get("per_page") || 50),
      selected: null, pages: 1,
    };
    const table = $("#runs"), tbody = $("tbody", table);

    // column chooser
    const list = $("#column-list");
    for (const c of COLUMNS) {
      const box = el("input", { type: "checkbox", value: c.key, "data-column": c.key });
      box.checked = state.columns.includes(c.key);
      box.addEventListener("change", () => {
        state.columns = COLUMNS.map((x) => x.key).filter((k) => $(`input[data-column="${k}"]`, list).checked);
        localStorage.setItem("logetl.columns", JSON.stringify(state.columns));
        tbody.textContent = "";
        load();
      });
      list.append(el("label", {}, box, " " + c.label));
    }
    // filters
    for (const box of document.querySelectorAll('#filters input[name="status"]')) {
      box.checked = state.status.includes(box.value);
      box.addEventListener("change", () => {
        state.status = [...document.querySelectorAll('#filters input[name="status"]:checked')].map((b) => b.value);
        state.page = 1; load();
      });
    }
    const since = $("#f-since"), until = $("#f-until"), app = $("#f-application"), perPage = $("#per-page");
    since.value = state.since; until.value = state.until; perPage.value = String(state.perPage);
    since.addEventListener("change", () => { state.since = since.value; state.page = 1; load(); });
    until.addEventListener("change", () => { state.until = until.value; state.page = 1; load(); });
    app.addEventListener("change", () => { state.application = app.value; state.page = 1; load(); });
    perPage.addEventListener("change", () => { state.perPage = Number(perPage.value); state.page = 1; load(); });
    $("#prev").addEventListener("click", () => { if (state.page > 1) { state.page--; load(); } });
    $("#next").addEventListener("click", () => { if (state.page < state.pages) { state.page++; load(); } });
    tbody.addEventListener("click", (e) => {
      const tr = e.target.closest("tr");
      if (!tr || e.target.closest("a")) return;
      state.selected = state.selected === tr.dataset.runId ? null : tr.dataset.runId;
      for (const row of tbody.rows) row.classList.toggle("selected", row.dataset.runId === state.selected);
    });

    function query() {
      const q = new URLSearchParams();
      for (const s of state.status) q.append("status", s);
      if (state.application) q.set("application", state.application);
      if (state.since) q.set("since", state.since);
      if (state.until) q.set("until", state.until);
      q.set("sort", state.sort); q.set("order", state.order);
      q.set("page", state.page); q.set("per_page", state.perPage);
      return q;
    }

    function header() {
      const tr = $("thead tr", table);
      const cols = COLUMNS.filter((c) => state.columns.includes(c.key));
      const want = cols.map((c) => c.key).join(",") + "|" + state.sort + state.order;
      if (tr.dataset.key === want) return cols;
      tr.textContent = "";
      for (const c of cols) {
        const arrow = state.sort === c.key ? (state.order === "desc" ? " ▼" : " ▲") : "";
        const th = el("th", { "data-column": c.key, class: c.num ? "num" : null, text: c.label + arrow });
        if (!c.nosort) {
          th.classList.add("sortable");
          th.addEventListener("click", () => {
            if (state.sort === c.key) state.order = state.order === "desc" ? "asc" : "desc";
            else { state.sort = c.key; state.order = c.key === "application" || c.key === "owner" ? "asc" : "desc"; }
            state.page = 1; load();
          });
        }
        tr.append(th);
      }
      tr.dataset.key = want;
      return cols;
    }

    function cell(c, run) {
      const text = c.fmt ? c.fmt(run[c.key]) : String(run[c.key] ?? "");
      if (c.link) return el("a", { href: "/runs/" + run.run_id, text });
      if (c.badge) return el("span", { class: "badge " + String(text).toLowerCase(), text });
      return text;
    }

    async function load() {
      const q = query();
      history.replaceState(null, "", "?" + q.toString());
      const [body, apps] = await Promise.all([api("/api/runs?" + q), api("/api/applications")]);
      // application choices, kept in place
      const known = [...app.options].map((o) => o.value);
      for (const a of apps.applications) if (!known.includes(a)) app.append(el("option", { value: a, text: a }));
      app.value = state.application;
      const cols = header();
      state.pages = body.pages;
      // rows keyed by run id: reuse, update, reorder; never rebuild the table
      const existing = new Map([...tbody.rows].map((r) => [r.dataset.runId, r]));
      const sig = cols.map((c) => c.key).join(",");
      let prev = null;
      for (const run of body.runs) {
        let tr = existing.get(run.run_id);
        const key = sig + JSON.stringify(cols.map((c) => run[c.key])) + JSON.stringify(run.warning || null);
        if (!tr || tr.dataset.sig !== sig) {
          tr = el("tr", { "data-run-id": run.run_id });
          tr.dataset.sig = sig;
        }
        if (tr.dataset.content !== key) {
          tr.textContent = "";
          for (const c of cols) tr.append(el("td", { "data-column": c.key, class: c.num ? "num" : null }, cell(c, run)));
          // a run that deserves a look (e.g. mostly malformed lines) is marked whatever the columns shown
          if (run.warning && tr.firstChild) tr.firstChild.append(" ", el("span", { class: "warning-marker", title: run.warning, text: "⚠" }));
          tr.classList.toggle("has-warning", !!run.warning);
          tr.dataset.content = key;
        }
        tr.classList.toggle("selected", run.run_id === state.selected);
        existing.delete(run.run_id);
        const next = prev ? prev.nextSibling : tbody.firstChild;
        if (next !== tr) tbody.insertBefore(tr, next);
        prev = tr;
      }
      for (const gone of existing.values()) gone.remove();
      if (!body.runs.length) tbody.append(el("tr", { "data-run-id": "" }, el("td", { colspan: cols.length, class: "empty", text: "No runs match." })));
      $("#page-info").textContent = `page ${body.page} of ${body.pages} · ${fmtInt(body.total)} runs`;
      $("#prev").disabled = state.page <= 1;
      $("#next").disabled = state.page >= body.pages;
    }

    const tick = autoRefresh(load);
    tick();
  }

  /* ------------------------------------------------------------------------------------------------ */
  /* One run                                                                                            */

  const STATUS_COLORS = { PENDING: "#f3f4f6", RUNNING: "#bfdbfe", SUCCESSFUL: "#bbf7d0", FAILED: "#fecaca", SKIPPED: "#e5e7eb", STOPPED: "#fed7aa" };

  function runPage(runId) {
    let selected = null, lastGraph = null, run = null;

    function facts(r) {
      const dl = $("#facts");
      const items = [["Run id", r.run_id], ["Program", r.program], ["Engine", r.engine], ["Owner", r.owner],
        ["Started", fmtTime(r.started_at)], ["Ended", fmtTime(r.finished_at)],
        ["Duration", fmtDur(r.duration ?? (r.started_at ? Date.now() / 1000 - r.started_at : null))],
        ["Lines read", fmtInt(r.records_read)], ["Records written", fmtInt(r.records_written)],
        ["Tags", Object.entries(r.tags || {}).map(([k, v]) => `${k}=${v}`).join(" ") || "—"]];
      if (r.restarted_after) items.push(["Restarted after", `checkpoint '${r.restarted_after}'`]);
      for (const [k, v] of items) {
        let dd = dl.querySelector(`dd[data-key="${k}"]`);
        if (!dd) { dd = el("dd", { "data-key": k }); dl.append(el("div", { class: "fact" }, el("dt", { text: k }), dd)); }
        if (dd.textContent !== String(v)) dd.textContent = v;
      }
      const badge = $("#run-status");
      badge.textContent = r.status; badge.className = "badge " + r.status.toLowerCase();
      const mark = $("#run-warning"), warn = $("#warning");
      mark.hidden = !r.warning; warn.hidden = !r.warning;
      if (r.warning) mark.setAttribute("title", r.warning); else mark.removeAttribute("title");
      warn.textContent = r.warning ? "Warning: " + r.warning : "";
      const err = $("#error");
      err.hidden = !r.error; err.textContent = r.error ? "Error: " + r.error : "";
      const notes = $("#notices");
      notes.hidden = !(r.notices && r.notices.length);
      notes.textContent = (r.notices || []).join("\n");
    }

    function stepStatus(r) {
      const m = {};
      for (const s of r.steps || []) m[s.name] = s.status;
      return m;
    }

    /* Operators in columns by depth (longest path from the source), steps as boxes around them. */
    function layout(graph) {
      const ops = graph.nodes.filter((n) => n.type === "operator").sort((a, b) => a.order - b.order);
      const data = graph.edges.filter((e) => e.type === "data");
      const depth = {};
      for (const op of ops) {
        const ins = data.filter((e) => e.to === op.id).map((e) => depth[e.from] + 1);
        depth[op.id] = ins.length ? Math.max(...ins) : 0;
      }
      const rows = {}, pos = {};
      const W = 150, H = 46, GX = 46, GY = 26, PAD = 30;
      for (const op of ops) {
        const d = depth[op.id];
        rows[d] = (rows[d] || 0);
        pos[op.id] = { x: PAD + d * (W + GX), y: PAD + 14 + rows[d] * (H + GY), w: W, h: H };
        rows[d]++;
      }
      const width = PAD * 2 + (Math.max(...Object.values(depth)) + 1) * (W + GX) - GX;
      const height = PAD * 2 + 14 + Math.max(...Object.values(rows)) * (H + GY) - GY;
      return { ops, data, pos, width, height };
    }

    function drawGraph(r) {
      const svg = $("#graph");
      const g = r.graph || { nodes: [], edges: [] };
      const status = stepStatus(r);
      const shape = JSON.stringify(g);
      if (shape !== lastGraph) {       // structure changed (first load): draw it whole
        lastGraph = shape;
        svg.textContent = "";
        const L = layout(g);
        svg.setAttribute("viewBox", `0 0 ${L.width} ${L.height}`);
        svg.setAttribute("width", L.width); svg.setAttribute("height", L.height);
        const defs = el("svg:defs", {}, el("svg:marker", { id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" }, el("svg:path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#555" })));
        svg.append(defs);
        for (const step of g.nodes.filter((n) => n.type === "step")) {
          const mine = L.ops.filter((o) => o.step === step.name).map((o) => L.pos[o.id]);
          if (!mine.length) continue;
          const x0 = Math.min(...mine.map((p) => p.x)) - 12, y0 = Math.min(...mine.map((p) => p.y)) - 24;
          const x1 = Math.max(...mine.map((p) => p.x + p.w)) + 12, y1 = Math.max(...mine.map((p) => p.y + p.h)) + 12;
          svg.append(el("svg:g", { class: "step", "data-step": step.name },
            el("svg:rect", { x: x0, y: y0, width: x1 - x0, height: y1 - y0, rx: 8, class: "step-box" }),
            el("svg:text", { x: x0 + 8, y: y0 + 15, class: "step-label", text: `step ${step.index + 1}: ${step.name}` })));
        }
        for (const e of L.data) {
          const a = L.pos[e.from], b = L.pos[e.to];
          const x1 = a.x + a.w, y1 = a.y + a.h / 2, x2 = b.x, y2 = b.y + b.h / 2, mx = (x1 + x2) / 2;
          svg.append(el("svg:path", { d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`, class: "edge", "marker-end": "url(#arrow)", "data-from": e.from, "data-to": e.to }));
        }
        for (const op of L.ops) {
          const p = L.pos[op.id];
          const node = el("svg:g", { class: "node", "data-node": op.name, "data-step": op.step, tabindex: "0" },
            el("svg:rect", { x: p.x, y: p.y, width: p.w, height: p.h, rx: 6 }),
            el("svg:text", { x: p.x + 8, y: p.y + 18, class: "kind", text: op.kind }),
            el("svg:text", { x: p.x + 8, y: p.y + 36, class: "name", text: op.name }),
            el("svg:title", { text: `${op.kind} ${op.name}${op.description ? "\n" + op.description : ""}\nfields: ${op.fields.join(", ")}` }));
          node.addEventListener("click", () => { selected = selected === op.name ? null : op.name; paintSelection(); details(); });
          svg.append(node);
        }
      }
      // in place: colours follow the steps' statuses
      for (const node of svg.querySelectorAll("g.node")) {
        const st = status[node.dataset.step] || "PENDING";
        node.dataset.status = st;
        node.querySelector("rect").setAttribute("fill", STATUS_COLORS[st] || "#fff");
      }
      for (const box of svg.querySelectorAll("g.step")) {
        const st = status[box.dataset.step] || "PENDING";
        box.dataset.status = st;
        const label = box.querySelector("text");
        const base = label.textContent.replace(/ \(.*\)$/, "");
        label.textContent = `${base} (${st})`;
      }
      paintSelection();
    }

    function paintSelection() {
      for (const node of document.querySelectorAll("#graph g.node")) node.classList.toggle("selected", node.dataset.node === selected);
    }

    function details() {
      const box = $("#node-details");
      if (!selected || !run) { box.textContent = "Select an operator to see its counters."; return; }
      const op = (run.graph.nodes || []).find((n) => n.type === "operator" && n.name === selected);
      const step = (run.steps || []).find((s) => s.name === (op && op.step));
      const c = (step && step.counters && step.counters[selected]) || {};
      box.textContent = "";
      box.append(el("h3", { text: `${op.kind} ${op.name}` }), el("p", { text: op.description || "" }),
        el("p", { text: `step ${op.step}: ${step ? step.status : "PENDING"}` }),
        el("p", { text: `records in ${fmtInt(c.in ?? 0)}, out ${fmtInt(c.out ?? 0)}` }),
        el("p", { class: "fields", text: "fields: " + op.fields.join(", ") }));
    }

    function drawTimeline(r) {
      const svg = $("#timeline");
      const steps = r.steps || [];
      const t0 = r.started_at || Date.now() / 1000;
      const now = Date.now() / 1000;
      const end = Math.max(r.finished_at || now, ...steps.filter((s) => s.status !== "SKIPPED").map((s) => s.finished_at || 0), t0 + 0.001);
      const total = end - t0;
      const W = 760, LEFT = 140, ROW = 28, TOP = 24;
      const H = TOP + steps.length * ROW + 10;
      svg.setAttribute("viewBox", `0 0 ${W} ${H}`); svg.setAttribute("width", W); svg.setAttribute("height", H);
      const scale = (t) => LEFT + ((t - t0) / total) * (W - LEFT - 20);
      let axis = svg.querySelector("g.axis");
      if (!axis) { axis = el("svg:g", { class: "axis" }); svg.append(axis); }
      axis.textContent = "";
      for (let i = 0; i <= 4; i++) {
        const t = t0 + (total * i) / 4, x = scale(t);
        axis.append(el("svg:line", { x1: x, x2: x, y1: TOP - 6, y2: H - 4 }), el("svg:text", { x, y: 12, "text-anchor": "middle", text: fmtDur(t - t0) }));
      }
      steps.forEach((s, i) => {
        let bar = svg.querySelector(`g.bar[data-step="${CSS.escape(s.name)}"]`);
        if (!bar) {
          bar = el("svg:g", { class: "bar", "data-step": s.name }, el("svg:text", { class: "label" }), el("svg:rect", { rx: 3 }), el("svg:title", {}));
          svg.append(bar);
        }
        const y = TOP + i * ROW;
        const skipped = s.status === "SKIPPED";
        const start = skipped || !s.started_at ? t0 : s.started_at;
        const stop = skipped ? t0 : (s.finished_at || (s.status === "RUNNING" ? now : start));
        const [label, rect, title] = bar.children;
        label.setAttribute("x", 8); label.setAttribute("y", y + 17); label.textContent = `${s.name}${skipped ? " (skipped)" : ""}`;
        rect.setAttribute("x", scale(start)); rect.setAttribute("y", y + 4);
        rect.setAttribute("width", Math.max(3, scale(stop) - scale(start))); rect.setAttribute("height", ROW - 8);
        rect.setAttribute("fill", STATUS_COLORS[s.status] || "#fff");
        bar.dataset.status = s.status;
        title.textContent = `${s.name}: ${s.status}, ${skipped ? "done by an earlier run" : fmtDur(stop - start)}`;
      });
    }

    function drawCounters(r) {
      const box = $("#counters");
      const table = el("table", { class: "counters" },
        el("thead", {}, el("tr", {}, ...["Step", "Status", "Operator", "Records in", "Records out"].map((h) => el("th", { text: h })))));
      const body = el("tbody");
      const order = {};
      for (const n of (r.graph && r.graph.nodes) || []) if (n.type === "operator") order[n.name] = n.order;
      for (const s of r.steps || []) {
        const ops = Object.entries(s.counters || {}).sort((a, b) => (order[a[0]] ?? 1e9) - (order[b[0]] ?? 1e9));
        const extra = [];
        if (s.lines_read) extra.push(`lines read ${fmtInt(s.lines_read)}`);
        const bad = Object.entries(s.malformed || {}).map(([k, v]) => `${k} ${fmtInt(v)}`);
        if (bad.length) extra.push("malformed: " + bad.join(", "));
        if (s.dropped_size_dash) extra.push(`dropped (size '-') ${fmtInt(s.dropped_size_dash)}`);
        const first = el("tr", { "data-step": s.name }, el("td", { rowspan: Math.max(1, ops.length) + (extra.length ? 1 : 0), text: s.name }),
          el("td", { rowspan: Math.max(1, ops.length) + (extra.length ? 1 : 0) }, el("span", { class: "badge " + s.status.toLowerCase(), text: s.status })));
        if (!ops.length) { first.append(el("td", { colspan: 3, text: "—" })); body.append(first); }
        ops.forEach(([name, c], i) => {
          const tr = i === 0 ? first : el("tr", { "data-step": s.name });
          tr.append(el("td", { text: name }), el("td", { class: "num", text: fmtInt(c.in) }), el("td", { class: "num", text: fmtInt(c.out) }));
          body.append(tr);
        });
        if (extra.length) body.append(el("tr", { class: "extra" }, el("td", { colspan: 3, text: extra.join(" · ") })));
      }
      table.append(body);
      const html = table.outerHTML;
      if (box.dataset.html !== html) { box.textContent = ""; box.append(table); box.dataset.html = html; }
    }

    async function drawDurations(r) {
      const body = await api(`/api/runs?application=${encodeURIComponent(r.application)}&sort=started_at&order=desc&per_page=30`);
      const runs = body.runs.filter((x) => x.duration !== null).reverse();
      const svg = $("#durations");
      const W = 760, H = 170, LEFT = 50, BOTTOM = 22;
      svg.setAttribute("viewBox", `0 0 ${W} ${H}`); svg.setAttribute("width", W); svg.setAttribute("height", H);
      svg.textContent = "";
      if (!runs.length) { svg.append(el("svg:text", { x: 10, y: 20, text: "No finished runs yet." })); return; }
      const max = Math.max(...runs.map((x) => x.duration), 0.001);
      const bw = Math.min(40, (W - LEFT - 10) / runs.length - 4);
      svg.append(el("svg:text", { x: 4, y: 14, class: "axis-label", text: fmtDur(max) }), el("svg:line", { x1: LEFT - 4, x2: W, y1: H - BOTTOM, y2: H - BOTTOM, class: "baseline" }));
      runs.forEach((x, i) => {
        const h = ((H - BOTTOM - 20) * x.duration) / max;
        const bar = el("svg:a", { href: "/runs/" + x.run_id },
          el("svg:rect", { x: LEFT + i * (bw + 4), y: H - BOTTOM - h, width: bw, height: h, fill: STATUS_COLORS[x.status] || "#ddd",
            class: x.run_id === r.run_id ? "current" : null, "data-run-id": x.run_id }),
          el("svg:title", { text: `${fmtTime(x.started_at)}: ${fmtDur(x.duration)} (${x.status})` }));
        svg.append(bar);
      });
    }

    async function load() {
      const body = await api("/api/runs/" + runId);
      run = body.run;
      facts(run); drawGraph(run); drawTimeline(run); drawCounters(run); details();
      await drawDurations(run);
    }
    const tick = autoRefresh(load);
    tick();
  }

  window.Logetl = { runsPage, runPage };
})();
