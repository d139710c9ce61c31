// Foresight dashboard: reads the JSON routes and draws each pool as inline SVG.
// No framework, no build step, no network access beyond this server.
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const REFRESH_MS = 30000;
  const config = JSON.parse(document.getElementById("foresight-config").textContent);

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

  // With read tokens configured the JSON routes need a bearer token: open the page as
  // /#token=<read token>. The fragment never reaches a server or a log; the token is
  // kept for this tab only and removed from the address bar.
  const token = (() => {
    const found = new URLSearchParams(location.hash.slice(1)).get("token");
    if (found) {
      sessionStorage.setItem("foresight-token", found);
      history.replaceState(null, "", location.pathname + location.search);
    }
    return sessionStorage.getItem("foresight-token");
  })();

  async function getJSON(url) {
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = `Bearer ${token}`;
    const response = await fetch(url, { headers });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      throw new Error(body.message || body.detail || `${url}: HTTP ${response.status}`);
    }
    return body;
  }

  function fmt(value, digits) {
    if (value === null || value === undefined || Number.isNaN(value)) return "–";
    return Number(value).toFixed(digits === undefined ? 0 : digits);
  }

  function hhmm(ms) {
    return new Date(ms).toISOString().slice(11, 16);
  }

  function niceMax(value) {
    if (!(value > 0)) return 1;
    const power = Math.pow(10, Math.floor(Math.log10(value)));
    for (const step of [1, 2, 2.5, 5, 10]) {
      if (step * power >= value) return step * power;
    }
    return 10 * power;
  }

  // The interval drawn is the widest the forecast carries; the mean is the centre line.
  function forecastSeries(forecast) {
    if (!forecast || !forecast.records.length) return null;
    const levels = forecast.levels.slice().sort((a, b) => a - b);
    const lo = `q${levels[0]}`;
    const hi = `q${levels[levels.length - 1]}`;
    const points = forecast.records.map((r) => ({
      t: Date.parse(r.ds), mean: r.mean, lo: r[lo], hi: r[hi],
    }));
    return { points, lo: levels[0], hi: levels[levels.length - 1] };
  }

  function polyline(points, x, y, cls) {
    const d = points.map((p, i) => `${i ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`);
    return svg("path", { d: d.join(""), class: cls });
  }

  function drawChart(pool, history, forecast, rec, now) {
    const width = 680, height = 240, left = 44, right = 12, top = 10, bottom = 26;
    const demand = history.series.demand_gpus.map((p) => [Date.parse(p.ds), p.y]);
    const fc = forecastSeries(forecast);
    const capacity = rec ? rec.desired_nodes * pool.gpus_per_node : null;
    const times = demand.map((p) => p[0]).concat(fc ? fc.points.map((p) => p.t) : []);
    times.push(now);
    const t0 = Math.min(...times), t1 = Math.max(...times, t0 + 1);
    const values = demand.map((p) => p[1]);
    if (fc) fc.points.forEach((p) => values.push(p.hi ?? p.mean, p.mean));
    if (capacity !== null) values.push(capacity);
    const yMax = niceMax(Math.max(1, ...values.filter((v) => Number.isFinite(v))) * 1.05);
    const x = (t) => left + ((t - t0) / (t1 - t0)) * (width - left - right);
    const y = (v) => top + (1 - v / yMax) * (height - top - bottom);

    const chart = svg("svg", {
      viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img",
      "aria-label": `${pool.name}: demand, forecast and recommended capacity`,
    });
    for (let i = 0; i <= 4; i++) {
      const v = (yMax * i) / 4;
      chart.append(svg("line", { x1: left, x2: width - right, y1: y(v), y2: y(v), class: "axis" }));
      const label = svg("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end" });
      label.textContent = fmt(v, Number.isInteger(v) ? 0 : 1);
      chart.append(label);
    }
    for (let i = 0; i <= 6; i++) {
      const t = t0 + ((t1 - t0) * i) / 6;
      const anchor = i === 0 ? "start" : i === 6 ? "end" : "middle";
      const label = svg("text", { x: x(t), y: height - 8, "text-anchor": anchor });
      label.textContent = hhmm(t);
      chart.append(label);
    }
    if (fc) {
      const band = fc.points.filter((p) => Number.isFinite(p.lo) && Number.isFinite(p.hi));
      if (band.length) {
        const upper = band.map((p) => `${x(p.t).toFixed(1)},${y(p.hi).toFixed(1)}`);
        const lower = band.slice().reverse().map((p) => `${x(p.t).toFixed(1)},${y(p.lo).toFixed(1)}`);
        chart.append(svg("polygon", { points: upper.concat(lower).join(" "), class: "band" }));
      }
      chart.append(polyline(fc.points.map((p) => [p.t, p.mean]), x, y, "mean"));
    }
    if (demand.length) chart.append(polyline(demand, x, y, "demand"));
    if (capacity !== null) {
      chart.append(svg("line", {
        x1: left, x2: width - right, y1: y(capacity), y2: y(capacity), class: "capacity",
      }));
    }
    chart.append(svg("line", { x1: x(now), x2: x(now), y1: top, y2: height - bottom, class: "now" }));
    const title = svg("title");
    title.textContent = `${pool.name}: ${demand.length} demand samples` +
      (fc ? `, ${fc.points.length} forecast steps` : ", no forecast");
    chart.prepend(title);
    return { chart, fc };
  }

  function legend(fc) {
    const box = el("div", { class: "legend" });
    const items = [["var(--demand)", "demand (GPUs)"]];
    if (fc) {
      items.push(["var(--forecast)", "forecast mean"]);
      items.push(["var(--band)", `interval q${fc.lo}–q${fc.hi}`]);
    }
    items.push(["var(--capacity)", "recommended capacity (GPUs)"], ["var(--now)", "now"]);
    for (const [color, label] of items) {
      const item = el("span", {}, label);
      const swatch = el("i");
      swatch.style.background = color;
      item.prepend(swatch);
      box.append(item);
    }
    return box;
  }

  function numbers(rec) {
    const box = el("div", { class: "numbers" });
    const cells = [
      ["desired nodes", fmt(rec.desired_nodes)],
      ["current nodes", fmt(rec.current_nodes)],
      ["headroom pods", fmt(rec.headroom_pods)],
      [`demand q${rec.quantile}`, fmt(rec.forecast_quantiles[`q${rec.quantile}`], 1)],
      ["data age", `${fmt(rec.data_freshness_seconds)} s`],
    ];
    for (const [label, value] of cells) {
      const cell = el("div", { class: "cell", "data-field": label });
      cell.append(el("b", {}, value), el("span", { class: "muted" }, label));
      box.append(cell);
    }
    return box;
  }

  function explanation(rec) {
    const box = el("div", { class: "explanation" });
    const ex = rec.explanation;
    box.append(el("p", { class: "summary" }, ex.summary));
    const table = el("table");
    const rows = [
      ["set by", ex.term],
      ["mode", ex.mode + (ex.health_reasons.length ? ` (${ex.health_reasons.join(", ")})` : "")],
      ["forecast → floor → need", `${fmt(ex.stages.forecast_nodes)} → ${ex.stages.floor_nodes} → ${ex.stages.need}`],
      ["bounded → stabilised → final", `${ex.stages.bounded} → ${ex.stages.stabilised} → ${ex.stages.final}`],
      ["latency", ex.latency.reason || `+${ex.latency.applied_nodes} nodes`],
      ["model version", rec.model_version ?? "none"],
      ["valid until", rec.valid_until],
    ];
    if (ex.health_detail) rows.splice(2, 0, ["health", ex.health_detail]);
    if (ex.latency.not_gpu_bound) rows.push(["not GPU-bound", "latency is high while GPUs idle"]);
    for (const [key, value] of rows) {
      const tr = el("tr");
      tr.append(el("th", {}, key), el("td", {}, String(value)));
      table.append(tr);
    }
    box.append(table);
    return box;
  }

  function showError(section, message) {
    section.querySelector(".status")?.remove();
    section.append(el("p", { class: "status error" }, message));
    section.setAttribute("aria-busy", "false");
    section.dataset.state = "unavailable";
  }

  async function renderPool(section, pool, rec, unavailable, now) {
    const heading = el("h2", { class: "pool-name" }, pool.name);
    section.replaceChildren(heading);
    if (pool.node_group_warning) {
      section.append(el("p", { class: "status warning" }, `node group: ${pool.node_group_warning}`));
    }
    if (!rec) {
      showError(section, `no recommendation: ${unavailable || "unknown reason"}`);
      return;
    }
    heading.append(
      el("span", { class: `badge ${rec.action}` }, rec.action.replace("_", " ")),
      el("span", { class: `badge ${rec.mode}` }, rec.mode),
    );
    const wantsForecast = !rec.explanation.health_reasons.includes("no_forecast");
    const [history, forecast] = await Promise.all([
      getJSON(`${config.history}${encodeURIComponent(pool.name)}`),
      wantsForecast
        ? getJSON(`${config.forecast}${encodeURIComponent(pool.name)}`).catch(() => null)
        : Promise.resolve(null),
    ]);
    const grid = el("div", { class: "grid" });
    const left = el("div");
    // One time on the page: the decision clock's, as the recommendation set gave it.
    const drawn = drawChart(pool, history, forecast, rec, now);
    left.append(numbers(rec), drawn.chart, legend(drawn.fc));
    grid.append(left, explanation(rec));
    section.append(grid);
    section.setAttribute("aria-busy", "false");
    section.dataset.state = "ready";
  }

  // The call chain from /signals/chain: services in columns by depth from the roots,
  // an arrow per caller -> callee edge, each box with p95 and own (exclusive) p95, the
  // blamed services outlined and labelled with their verdict.
  function drawChain(data) {
    const services = data.services.filter((s) => (s.call_count || 0) > 0 || s.culprit);
    if (!services.length) return el("p", { class: "muted" }, "no spans in the window yet");
    const byName = new Map(services.map((s) => [s.service, s]));
    const depth = new Map();
    const roots = services.filter((s) => !(s.callers || []).some((c) => byName.has(c)));
    const queue = (roots.length ? roots : services.slice(0, 1)).map((s) => [s.service, 0]);
    while (queue.length) {
      const [name, d] = queue.shift();
      if (depth.has(name) || d > services.length) continue;
      depth.set(name, d);
      for (const callee of byName.get(name)?.callees || []) {
        if (byName.has(callee)) queue.push([callee, d + 1]);
      }
    }
    for (const s of services) if (!depth.has(s.service)) depth.set(s.service, 0);
    const columns = [];
    for (const s of services) {
      const d = depth.get(s.service);
      (columns[d] = columns[d] || []).push(s);
    }
    const W = 190, H = 74, GAP_X = 60, GAP_Y = 18;
    const rows = Math.max(...columns.map((c) => (c ? c.length : 0)));
    const width = columns.length * (W + GAP_X), height = rows * (H + GAP_Y) + 10;
    const root = svg("svg", { class: "chain", viewBox: `0 0 ${width} ${height}`,
      role: "img", "aria-label": "call chain" });
    const defs = svg("defs");
    const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
      markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
    marker.append(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }));
    defs.append(marker);
    root.append(defs);
    const at = new Map();
    columns.forEach((column, d) => (column || []).forEach((s, i) => {
      at.set(s.service, { x: d * (W + GAP_X) + 5, y: i * (H + GAP_Y) + 5 });
    }));
    for (const edge of data.edges || []) {
      const from = at.get(edge.caller), to = at.get(edge.callee);
      if (!from || !to) continue;
      root.append(svg("line", { class: "edge", x1: from.x + W, y1: from.y + H / 2,
        x2: to.x, y2: to.y + H / 2, "marker-end": "url(#arrow)" }));
    }
    for (const s of services) {
      const { x, y } = at.get(s.service);
      const outside = s.verdict === "outside_gpu_pools";
      const g = svg("g", {
        class: `service ${s.culprit ? "bottleneck" : ""} ${outside ? "outside" : ""} ${s.status || ""}`,
        "data-service": s.service, "data-verdict": s.verdict || "" });
      g.append(svg("rect", { x, y, width: W, height: H, rx: 6 }));
      const lines = [
        `${s.service}${s.pool ? ` · ${s.pool}` : " · no GPU pool"}`,
        `p95 ${fmt(s.p95_ms)} ms · own ${fmt(s.own_p95_ms)} ms`,
        `${s.threshold_ms ? `SLO ${fmt(s.threshold_ms)} ms · ` : ""}${s.call_count || 0} calls`,
        outside ? "BOTTLENECK: no GPU pool, GPUs won't help"
          : s.culprit ? `BOTTLENECK: ${s.verdict.replaceAll("_", " ")}`
          : (s.verdict || "").replaceAll("_", " "),
      ];
      lines.forEach((text, i) => {
        const t = svg("text", { x: x + 8, y: y + 17 + i * 16, class: i === 3 ? "verdict" : "" });
        t.textContent = text;
        g.append(t);
      });
      const title = svg("title");
      title.textContent = s.note || s.service;
      g.append(title);
      root.append(g);
    }
    return root;
  }

  async function renderBottlenecks() {
    if (!config.bottlenecks) return;
    const box = document.getElementById("bottlenecks");
    const body = box.querySelector(".body");
    try {
      const data = await getJSON(config.bottlenecks);
      if (Array.isArray(data.services) && Array.isArray(data.edges)) {
        const names = data.bottlenecks.length ? data.bottlenecks.join(", ") : "none";
        // A bottleneck outside every GPU pool is the case where buying GPUs helps least:
        // said in words above the drawing, not only by the outline.
        const outside = data.services.filter((s) => s.verdict === "outside_gpu_pools");
        body.replaceChildren(
          el("p", { class: "summary" }, `bottleneck: ${names} · analysed ${data.analysed_at || "not yet"}`),
          ...outside.map((s) => el("p", { class: "status warning outside", "data-service": s.service },
            `${s.service} is slow in its own work; buying GPUs will not help (it runs on no GPU pool)`)),
          drawChain(data),
        );
      } else {
        body.replaceChildren(el("pre", {}, JSON.stringify(data, null, 2)));
      }
    } catch (error) {
      body.replaceChildren(el("p", { class: "status error" }, String(error.message)));
    }
    box.hidden = false;
  }

  async function refresh() {
    document.body.dataset.state = "loading";
    const [pools, recs] = await Promise.all([getJSON(config.pools), getJSON(config.recommendation)]);
    const byName = new Map(recs.pools.map((r) => [r.pool, r]));
    const why = new Map(recs.unavailable.map((u) => [u.pool, u.reason]));
    // The decision clock's time (with --clock replay: the newest sample's), which the
    // chart's "now", each pool's "valid until" and the call chain's analysis share.
    const now = Date.parse(recs.generated_at);
    const clock = document.getElementById("clock");
    clock.textContent = `${pools.pools.length} pools · as of ${recs.generated_at}`;
    clock.dataset.now = recs.generated_at;
    const main = document.getElementById("pools");
    await Promise.all(pools.pools.map(async (pool) => {
      let section = document.getElementById(`pool-${pool.name}`);
      if (!section) {
        section = el("section", { class: "pool", id: `pool-${pool.name}`, "data-pool": pool.name });
        main.append(section);
      }
      try {
        await renderPool(section, pool, byName.get(pool.name), why.get(pool.name), now);
      } catch (error) {
        showError(section, String(error.message));
      }
    }));
    await renderBottlenecks();
    document.body.dataset.state = "ready";
  }

  function loop() {
    refresh()
      .catch((error) => {
        document.body.dataset.state = "error";
        document.getElementById("clock").textContent = `could not load: ${error.message}`;
      })
      .finally(() => setTimeout(loop, REFRESH_MS));
  }

  loop();
})();
