/* logetl monitor: what every page's script shares (loaded first by base.html). No framework, no CDN. */
(function () {
  "use strict";
  const SVG = "http://www.w3.org/2000/svg";

  /* an element (or "svg:..." an SVG element) with attributes ("text": its text, "onX": a listener) */
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

  /* GET of the app's JSON API; a missing session goes to the login page, an error is thrown with its message */
  async function api(path) {
    const r = await fetch(path, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    if (r.status === 401) { location.href = "/login"; throw new Error("unauthorized"); }
    const body = await r.json();
    if (!r.ok) throw new Error(body.error ? body.error.message : r.statusText);
    return body;
  }

  const fmtTime = (t) => (t ? new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19) : "");

  window.LogetlCommon = { el, api, fmtTime };
})();
