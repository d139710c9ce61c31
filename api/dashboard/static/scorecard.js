// Foresight dashboard, shadow scorecard panel: per pool, what the plan would have
// changed over the last day and week, and a plot of the day (GET scorecard/{pool}).
// Kept apart from dashboard.js: it reads its own route and draws its own section.
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const REFRESH_MS = 60000;
  const config = JSON.parse(document.getElementById("foresight-config").textContent);
  // dashboard.js (loaded first) moves a #token=... fragment into this tab's storage.
  const token = sessionStorage.getItem("foresight-token");

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    return node;
  }

  async function getJSON(url) {
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = `Bearer ${token}`;
    const response = await fetch(url, { headers });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(body.message || `${url}: HTTP ${response.status}`);
    return body;
  }

  function num(value, digits) {
    return Number(value).toFixed(digits);
  }

  // One row per window: the two figures a platform team reads first, then both sides.
  function figures(card) {
    const table = el("table", { class: "scorecard-figures" });
    const head = el("tr");
    for (const name of ["window", "waiting GPU-h avoided", "node-h added", "waiting GPU-h (actual → plan)",
      "node-h (actual → plan)", "coverage"]) head.append(el("th", {}, name));
    table.append(head);
    for (const [name, w] of Object.entries(card.windows)) {
      const row = el("tr", { "data-window": name });
      const cells = [
        ["window", name],
        ["avoided", num(w.waiting_gpu_hours_avoided, 1)],
        ["added", num(w.node_hours_added, 1)],
        ["waiting", `${num(w.waiting_gpu_hours.actual, 1)} → ${num(w.waiting_gpu_hours.plan, 1)}`],
        ["nodes", `${num(w.node_hours.actual, 1)} → ${num(w.node_hours.plan, 1)}`],
        ["coverage", `${num(100 * w.coverage, 0)} % (${w.samples} samples)`],
      ];
      for (const [field, text] of cells) row.append(el("td", { "data-field": field }, text));
      table.append(row);
    }
    return table;
  }

  function path(points, x, y, cls) {
    // Breaks the line where a value is unknown (null) instead of bridging the gap.
    let d = "", pen = false;
    for (const [t, v] of points) {
      if (v === null || !Number.isFinite(v)) { pen = false; continue; }
      d += `${pen ? "L" : "M"}${x(t).toFixed(1)},${y(v).toFixed(1)}`;
      pen = true;
    }
    return svg("path", { d, class: cls });
  }

  // Demand against the GPUs of the nodes that existed and of the plan's nodes.
  function plot(card) {
    const width = 680, height = 180, left = 44, right = 12, top = 8, bottom = 22;
    const g = card.gpus_per_node;
    const pts = card.timeline.map((p) => ({
      t: Date.parse(p.ds), demand: p.demand_gpus,
      nodes: p.nodes === null ? null : p.nodes * g,
      plan: p.plan_nodes === null ? null : p.plan_nodes * g,
    }));
    const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart scorecard-plot",
      role: "img", "aria-label": `${card.pool}: demand, GPUs that existed and the plan's GPUs` });
    const title = svg("title");
    title.textContent = `${card.pool}: ${pts.length} samples of the last day`;
    chart.append(title);
    if (!pts.length) return chart;
    const t0 = pts[0].t, t1 = Math.max(pts[pts.length - 1].t, t0 + 1);
    const values = pts.flatMap((p) => [p.demand, p.nodes, p.plan]).filter(Number.isFinite);
    const yMax = Math.max(1, ...values) * 1.05;
    const x = (t) => left + ((t - t0) / (t1 - t0)) * (width - left - right);
    const y = (v) => top + (1 - v / yMax) * (height - top - bottom);
    for (let i = 0; i <= 3; i++) {
      const v = (yMax * i) / 3;
      chart.append(svg("line", { x1: left, x2: width - right, y1: y(v), y2: y(v), class: "axis" }));
      const label = svg("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end" });
      label.textContent = num(v, 0);
      chart.append(label);
    }
    for (const [t, anchor] of [[t0, "start"], [t1, "end"]]) {
      const label = svg("text", { x: x(t), y: height - 6, "text-anchor": anchor });
      label.textContent = new Date(t).toISOString().slice(0, 16).replace("T", " ");
      chart.append(label);
    }
    chart.append(
      path(pts.map((p) => [p.t, p.demand]), x, y, "sc-demand"),
      path(pts.map((p) => [p.t, p.nodes]), x, y, "sc-nodes"),
      path(pts.map((p) => [p.t, p.plan]), x, y, "sc-plan"),
    );
    return chart;
  }

  function legend() {
    const box = el("div", { class: "legend" });
    for (const [cls, label] of [["sc-demand", "demand (GPUs)"],
      ["sc-nodes", "GPUs of the nodes that existed"], ["sc-plan", "GPUs of the plan's nodes"]]) {
      const item = el("span", {}, label);
      item.prepend(el("i", { class: `swatch ${cls}` }));
      box.append(item);
    }
    return box;
  }

  async function renderPool(panel, name) {
    try {
      const card = await getJSON(`${config.scorecard}${encodeURIComponent(name)}`);
      const plural = card.recommendations === 1 ? "" : "s";
      panel.replaceChildren(
        el("h3", {}, name),
        el("p", { class: "muted" },
          `${card.recommendations} recommendation${plural} in force; lead time ` +
          `${num(card.lead_time_seconds / 60, 0)} min`),
        figures(card), plot(card), legend(),
      );
      panel.dataset.state = "ready";
    } catch (error) {
      panel.replaceChildren(el("h3", {}, name), el("p", { class: "status error" }, String(error.message)));
      panel.dataset.state = "unavailable";
    }
  }

  async function refresh() {
    const box = document.getElementById("scorecard");
    if (!box || !config.scorecard) return;
    const body = box.querySelector(".body");
    box.hidden = false;
    await Promise.all(config.pool_names.map((name) => {
      let panel = body.querySelector(`[data-pool="${CSS.escape(name)}"]`);
      if (!panel) {
        panel = el("article", { class: "scorecard-pool", "data-pool": name });
        body.append(panel);
      }
      return renderPool(panel, name);
    }));
    box.dataset.state = "ready";
  }

  function loop() {
    refresh().finally(() => setTimeout(loop, REFRESH_MS));
  }

  loop();
})();
