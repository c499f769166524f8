/* logetl monitor: the all-applications page and the run page. No framework, no CDN.
 * Refreshes update the DOM in place (rows and nodes keyed by id), so scroll position and the user's
 * selection survive them. */
(function () {
  "use strict";
  const REFRESH_MS = 30000;
  const $ = (sel, el) => (el || document).querySelector(sel);

  const { el, api, fmtTime } = window.LogetlCommon;
  function fmtDur(s) {
    if (s === null || s === undefined) return "";
    if (s < 60) return s.toFixed(s < 10 ? 2 : 1) + " s";
    const m = Math.floor(s / 60), r = Math.round(s % 60);
    return m < 60 ? `${m} min ${r} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
  }
  const fmtInt = (n) => (n === null || n === undefined ? "" : Number(n).toLocaleString("en-US"));
  const NOT_COUNTED = "not counted";
  const fmtShare = (x) => (x === null || x === undefined ? "" : (100 * x).toFixed(2) + " %");
  const fmtBytes = (n) => (n === null || n === undefined ? "" : n >= 1e6 ? (n / 1e6).toFixed(1) + " MB" : fmtInt(n) + " B");

  /* A running run's progress ({step, done, total, unit, percent, rate, eta}, sent by the run): the step,
   * a bar and percent when the total is known, the rate and the ETA. */
  function progressParts(p) {
    const amount = (n) => (p.unit === "bytes" ? fmtBytes(n) : `${fmtInt(Math.round(n))} ${p.unit || ""}`.trim());
    const parts = [p.step || "run"];
    if (p.percent !== null && p.percent !== undefined) parts.push(p.percent.toFixed(1) + " %");
    const bare = (n) => (p.unit === "bytes" ? fmtBytes(n) : fmtInt(Math.round(n)));
    if (p.done) parts.push(p.total ? `${bare(p.done)} of ${amount(p.total)}` : amount(p.done));
    if (p.rate) parts.push(p.unit === "bytes" ? (p.rate / 1e6).toFixed(1) + " MB/s" : `${fmtInt(Math.round(p.rate))} ${p.unit}/s`);
    if (p.eta !== null && p.eta !== undefined) parts.push("ETA " + fmtDur(p.eta));
    return parts;
  }
  function progressEl(p) {
    if (!p) return "";
    const wrap = el("span", { class: "progress", "data-step": p.step || "", title: progressParts(p).join(" · ") });
    if (p.percent !== null && p.percent !== undefined) wrap.append(el("span", { class: "bar" }, el("span", { style: `width: ${Math.min(100, p.percent).toFixed(1)}%` })));
    wrap.append(el("span", { class: "text", text: progressParts(p).join(" · ") }));
    return wrap;
  }

  /* Auto-refresh every 30 s (every 5 s while the page shows a running run, whose progress moves), ON by
   * default; the choice is remembered. ``load`` resolves to true when something on the page is running. */
  const LIVE_MS = 5000;
  function autoRefresh(load) {
    const button = $("#refresh-toggle");
    let on = localStorage.getItem("logetl.refresh") !== "off";
    let timer = null;
    const show = () => {
      button.textContent = "Auto-refresh: " + (on ? "ON" : "OFF");
      button.setAttribute("aria-pressed", String(on));
      button.dataset.state = on ? "on" : "off";
    };
    let live = false;
    const arm = () => { clearTimeout(timer); timer = on ? setTimeout(tick, live ? LIVE_MS : REFRESH_MS) : null; };
    async function tick() {
      try { live = !!(await load()); $("#updated").textContent = "updated " + new Date().toLocaleTimeString(); }
      catch (e) { $("#updated").textContent = "refresh failed: " + e.message; }
      arm();
    }
    button.addEventListener("click", () => { on = !on; localStorage.setItem("logetl.refresh", on ? "on" : "off"); show(); arm(); });
    show();
    return tick;
  }

  /* ------------------------------------------------------------------------------------------------ */
  /* All applications                                                                                   */

  const COLUMNS = [
    { key: "application", label: "Application" },
    { key: "run_id", label: "Run id", link: true },
    { key: "owner", label: "Owner" },
    { key: "status", label: "Status", badge: true },
    { key: "progress", label: "Progress", nosort: true, el: progressEl },
    { key: "started_at", label: "Start", fmt: fmtTime },
    { key: "finished_at", label: "End", fmt: fmtTime },
    { key: "duration", label: "Duration", fmt: fmtDur, num: true },
    { key: "records_read", label: "Lines read", fmt: fmtInt, num: true },
    { key: "malformed", label: "Malformed", fmt: fmtInt, num: true },
    { key: "malformed_share", label: "Malformed share", fmt: fmtShare, num: true },
    { key: "dropped", label: "Dropped", fmt: fmtInt, num: true },
    { key: "records_written", label: "Records written", fmt: fmtInt, num: true },
    { key: "engine", label: "Engine" },
    { key: "program", label: "Program" },
    { key: "tags", label: "Tags", fmt: (t) => Object.entries(t || {}).map(([k, v]) => `${k}=${v}`).join(" "), nosort: true },
  ];
  const DEFAULT_COLUMNS = ["application", "run_id", "owner", "status", "progress", "started_at", "duration", "records_read",
    "malformed_share", "dropped", "records_written", "engine"];

  function runsPage() {
    const saved = JSON.parse(localStorage.getItem("logetl.columns") || "null");
    const params = new URLSearchParams(location.search);
    const state = {
      columns: Array.isArray(saved) && saved.length ? saved.filter((k) => COLUMNS.some((c) => c.key === k)) : DEFAULT_COLUMNS.slice(),
      status: params.getAll("status"), application: params.get("application") || "",
      since: params.get("since") || "", until: params.get("until") || "",
      minMalformed: params.get("min_malformed_share") || "",
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
    // malformed share at least X %: the box holds a percentage, the URL and the API a share (0..1)
    const minBad = $("#f-min-malformed");
    minBad.value = state.minMalformed === "" ? "" : String(+(Number(state.minMalformed) * 100).toFixed(4));
    minBad.addEventListener("change", () => {
      const v = minBad.value.trim();
      state.minMalformed = v === "" || !(Number(v) >= 0 && Number(v) <= 100) ? "" : String(Number(v) / 100);
      if (state.minMalformed === "") minBad.value = "";
      state.page = 1; load();
    });
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
      if (state.minMalformed !== "") q.set("min_malformed_share", state.minMalformed);
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
      const text = c.fmt ? c.fmt(run[c.key]) : c.el ? "" : String(run[c.key] ?? "");
      if (c.link) return el("a", { href: "/runs/" + run.run_id, text });
      if (c.badge) return el("span", { class: "badge " + String(text).toLowerCase(), text });
      if (c.el) return c.el(run[c.key]);
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
      return body.runs.some((x) => x.status === "RUNNING");
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
      // a step whose lines read are null failed on Spark before its counters came back: unknown, not 0
      const counted = !(r.steps || []).some((s) => s.lines_read === null);
      const items = [["Run id", r.run_id], ["Program", r.program], ["Engine", r.engine], ["Owner", r.owner],
        ["Started", fmtTime(r.started_at)], ["Ended", fmtTime(r.finished_at)],
        ["Duration", fmtDur(r.duration ?? (r.started_at ? Date.now() / 1000 - r.started_at : null))],
        ["Lines read", counted ? fmtInt(r.records_read) : NOT_COUNTED], ["Malformed share", fmtShare(r.malformed_share)],
        ["Dropped (size '-')", counted ? fmtInt((r.steps || []).reduce((n, s) => n + (s.dropped_size_dash || 0), 0)) : NOT_COUNTED],
        ["Records written", fmtInt(r.records_written)],
        ["Inputs", (r.inputs || []).map((i) => typeof i === "string" ? i
        : (i.size == null ? i.path : `${i.path} (${fmtBytes(i.size)})`)).join(", ") || "—"],
        ["Flow definition", r.flow_hash || "—"],
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
      // notices; a run id in one (the failed run a restart continues) links to that run
      const notes = $("#notices");
      notes.hidden = !(r.notices && r.notices.length);
      const noteKey = JSON.stringify(r.notices || []);
      if (notes.dataset.key !== noteKey) {
        notes.textContent = "";
        (r.notices || []).forEach((n, i) => {
          if (i) notes.append("\n");
          n.split(/\b([0-9A-F]{32})\b/).forEach((part, j) => notes.append(j % 2 ? el("a", { href: "/runs/" + part, class: "earlier-run", text: part }) : part));
        });
        notes.dataset.key = noteKey;
      }
      const box = $("#progress");
      box.hidden = !(r.status === "RUNNING" && r.progress);
      if (!box.hidden) { box.textContent = ""; box.append(el("span", { class: "label", text: "Now " }), progressEl(r.progress)); }
    }

    function compareLink(previous) {
      const a = $("#compare-previous");
      a.hidden = !previous;
      if (previous) a.setAttribute("href", `/runs/${previous}/compare/${runId}`);
    }

    /* A layered layout by dagre (Sugiyama: ranks, crossing reduction, coordinates; vendored, see
     * static/vendor/README.md): operators left to right, each step a cluster around its operators, and
     * an edge that spans ranks is routed through dummy nodes of its own, so it never runs through an
     * unrelated operator (Join's unique_ip -> join passes beside the checkpoint, not through it). */
    const NODE_W = 150, NODE_H = 46, LABEL_H = 20;
    function layout(graph) {
      const ops = graph.nodes.filter((n) => n.type === "operator").sort((a, b) => a.order - b.order);
      const data = graph.edges.filter((e) => e.type === "data");
      const g = new dagre.graphlib.Graph({ compound: true });
      g.setGraph({ rankdir: "LR", nodesep: 28, ranksep: 56, edgesep: 16, marginx: 16, marginy: 16 + LABEL_H });
      g.setDefaultEdgeLabel(() => ({}));
      for (const step of graph.nodes.filter((n) => n.type === "step")) g.setNode(step.id, { label: step.name });
      for (const op of ops) {
        g.setNode(op.id, { width: NODE_W, height: NODE_H });
        if (op.step !== undefined && g.hasNode("step:" + op.step)) g.setParent(op.id, "step:" + op.step);
      }
      for (const e of data) if (g.hasNode(e.from) && g.hasNode(e.to)) g.setEdge(e.from, e.to);
      dagre.layout(g);
      const pos = {};
      for (const op of ops) { const n = g.node(op.id); pos[op.id] = { x: n.x - NODE_W / 2, y: n.y - NODE_H / 2, w: NODE_W, h: NODE_H }; }
      const boxes = {};
      for (const step of graph.nodes.filter((n) => n.type === "step")) {
        const n = g.node(step.id);
        if (n && n.width) boxes[step.name] = { x: n.x - n.width / 2, y: n.y - n.height / 2 - LABEL_H, w: n.width, h: n.height + LABEL_H };
      }
      const routes = data.filter((e) => g.hasEdge(e.from, e.to)).map((e) => ({ ...e, points: g.edge(e.from, e.to).points }));
      const size = g.graph();
      return { ops, data: routes, pos, boxes, width: Math.ceil(size.width), height: Math.ceil(size.height) };
    }

    /* A smooth path through dagre's points (a B-spline: it stays within the polyline's hull). */
    function splinePath(pts) {
      if (pts.length < 3) return `M ${pts[0].x} ${pts[0].y}` + pts.slice(1).map((p) => ` L ${p.x} ${p.y}`).join("");
      let d = `M ${pts[0].x} ${pts[0].y}`;
      for (let i = 1; i < pts.length - 1; i++) {
        const p = pts[i], q = pts[i + 1];
        const mx = i === pts.length - 2 ? q.x : (p.x + q.x) / 2, my = i === pts.length - 2 ? q.y : (p.y + q.y) / 2;
        d += ` Q ${p.x} ${p.y} ${mx} ${my}`;
      }
      return d;
    }

    /* An operator's status: its step's, except in a step that FAILED or was STOPPED, where an operator that
     * never received a record never started: PENDING. */
    function opStatus(step, name) {
      const st = step ? step.status : "PENDING";
      if (st !== "FAILED" && st !== "STOPPED") return st;
      const c = step.counters && step.counters[name];
      return c && ((c.in || 0) > 0 || (c.out || 0) > 0) ? st : "PENDING";
    }

    function drawGraph(r) {
      const svg = $("#graph");
      const g = r.graph || { nodes: [], edges: [] };
      const steps = {};
      for (const st of r.steps || []) steps[st.name] = st;
      const shape = JSON.stringify(g);
      if (shape !== lastGraph) {       // structure changed (first load): draw it whole
        lastGraph = shape;
        svg.textContent = "";
        if (!g.nodes.some((n) => n.type === "operator")) return;
        const L = layout(g);
        svg.setAttribute("viewBox", `0 0 ${L.width} ${L.height}`);
        svg.setAttribute("width", L.width); svg.setAttribute("height", L.height);
        const defs = el("svg:defs", {}, el("svg:marker", { id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" }, el("svg:path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#555" })));
        svg.append(defs);
        for (const step of g.nodes.filter((n) => n.type === "step")) {
          const b = L.boxes[step.name];
          if (!b) continue;
          svg.append(el("svg:g", { class: "step", "data-step": step.name },
            el("svg:rect", { x: b.x, y: b.y, width: b.w, height: b.h, rx: 8, class: "step-box" }),
            el("svg:text", { x: b.x + 8, y: b.y + 15, class: "step-label", text: `step ${step.index + 1}: ${step.name}` })));
        }
        for (const e of L.data) {
          svg.append(el("svg:path", { d: splinePath(e.points), class: "edge", "marker-end": "url(#arrow)", "data-from": e.from, "data-to": e.to }));
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
      // in place: colours follow the statuses
      for (const node of svg.querySelectorAll("g.node")) {
        const st = opStatus(steps[node.dataset.step], node.dataset.node);
        node.dataset.status = st;
        node.querySelector("rect").setAttribute("fill", STATUS_COLORS[st] || "#fff");
      }
      for (const box of svg.querySelectorAll("g.step")) {
        const st = (steps[box.dataset.step] || {}).status || "PENDING";
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
        el("p", { text: `step ${op.step}: ${step ? step.status : "PENDING"}; operator: ${opStatus(step, selected)}` }),
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
        if (s.lines_read === null) extra.push(`lines read ${NOT_COUNTED} (the step failed before its counters came back)`);
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
      facts(run); compareLink(body.previous_successful); drawGraph(run); drawTimeline(run); drawCounters(run); details();
      await drawDurations(run);
      return run.status === "RUNNING";
    }
    const tick = autoRefresh(load);
    tick();
  }

  window.Logetl = { runsPage, runPage };
})();
