// Foresight dashboard, a pool's chart: demand, the GPUs of the nodes that existed and
// of the nodes recommended over the window (step lines from the audit trail), where
// either changed, and the served forecast band after "now". Inline SVG, GPUs on the
// left axis and the same scale in nodes on the right.
"use strict";

(function () {
  const { el, svg, fmt, hhmm } = window.Foresight;
  const W = 760, H = 320, LEFT = 44, RIGHT = 40, TOP = 24, BOTTOM = 26;

  // A round tick step that splits ``span`` into about ``count`` parts (1, 2 or 5 x 10^k).
  function niceStep(span, count) {
    const raw = Math.max(span / count, 1e-9);
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const step of [1, 2, 5, 10]) {
      if (step * power >= raw) return step * power;
    }
    return 10 * power;
  }

  function line(points, x, y, cls) {
    const d = points.map((p, i) => `${i ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`);
    return svg("path", { d: d.join(""), class: cls });
  }

  // A value holds until the next one: horizontal, then vertical at each change.
  function steps(points, end, x, y, cls) {
    let d = "";
    points.forEach(([t, v], i) => {
      d += i ? `H${x(t).toFixed(1)}V${y(v).toFixed(1)}` : `M${x(t).toFixed(1)},${y(v).toFixed(1)}`;
    });
    if (points.length) d += `H${x(end).toFixed(1)}`;
    return svg("path", { d, class: cls });
  }

  // GPUs on the left with grid lines; whole nodes on the right (GPUs / GPUs per node).
  function axes(chart, x, y, t0, t1, yMax, gpn) {
    const step = niceStep(yMax, 4);
    for (let v = 0; v <= yMax + 1e-9; v += step) {
      chart.append(svg("line", { x1: LEFT, x2: W - RIGHT, y1: y(v), y2: y(v), class: "axis" }));
      chart.append(svg("text", { x: LEFT - 6, y: y(v) + 4, "text-anchor": "end" }, fmt(v)));
    }
    const nodeStep = Math.max(1, niceStep(yMax / gpn, 4));
    for (let n = 0; n * gpn <= yMax + 1e-9; n += nodeStep) {
      chart.append(svg("line", { x1: W - RIGHT, x2: W - RIGHT + 4, y1: y(n * gpn), y2: y(n * gpn),
        class: "tick" }));
      chart.append(svg("text", { x: W - RIGHT + 7, y: y(n * gpn) + 4 }, fmt(n)));
    }
    chart.append(svg("text", { x: LEFT - 6, y: 12, class: "unit", "text-anchor": "end" }, "GPUs"));
    chart.append(svg("text", { x: W - 2, y: 12, class: "unit", "text-anchor": "end" }, "nodes"));
    for (let i = 0; i <= 6; i++) {
      const t = t0 + ((t1 - t0) * i) / 6;
      const anchor = i === 0 ? "start" : i === 6 ? "end" : "middle";
      chart.append(svg("text", { x: x(t), y: H - 8, "text-anchor": anchor }, hhmm(t)));
    }
  }

  function band(chart, points, x, y) {
    const upper = points.map((p) => `${x(p.t).toFixed(1)},${y(p.hi).toFixed(1)}`);
    const lower = points.slice().reverse().map((p) => `${x(p.t).toFixed(1)},${y(p.lo).toFixed(1)}`);
    chart.append(svg("polygon", { points: upper.concat(lower).join(" "), class: "band" }));
    // The median is drawn only inside the band (when the lowest quantile is below it).
    const mid = points.filter((p) => p.mid !== null && p.mid > p.lo);
    if (mid.length) chart.append(line(mid.map((p) => [p.t, p.mid]), x, y, "median"));
    chart.append(line(points.map((p) => [p.t, p.hi]), x, y, "served"));
  }

  // Scale events: a triangle where the recommendation changed (pointing the way it
  // went), a dot where the nodes that existed changed; each says what changed on hover.
  function events(chart, list, x, y, gpn) {
    for (const e of list) {
      const cx = x(Date.parse(e.ds)), cy = y(e.after * gpn);
      const title = svg("title", {}, `${e.ds.slice(11, 16)}Z ${e.kind === "nodes" ? "nodes" :
        "recommended"} ${fmt(e.before)} → ${fmt(e.after)}`);
      let mark;
      if (e.kind === "recommended") {
        const up = e.after > e.before, s = 6;
        const tip = up ? cy - s : cy + s, base = up ? cy + s / 2 : cy - s / 2;
        mark = svg("polygon", { class: "event recommended",
          points: `${cx},${tip} ${cx - s},${base} ${cx + s},${base}` });
      } else {
        mark = svg("circle", { class: "event nodes", cx, cy, r: 3.2 });
      }
      mark.append(title);
      chart.append(mark);
    }
  }

  function drawChart(view, rec, now) {
    const gpn = view.gpus_per_node;
    const demand = view.series.demand_gpus.map((p) => [Date.parse(p.ds), p.y]);
    const nodes = view.series.nodes.map((p) => [Date.parse(p.ds), p.y * gpn]);
    const planned = view.recommended.map((p) => [Date.parse(p.ds), p.nodes * gpn]);
    const fc = (view.band ? view.band.points : []).map((p) => ({
      t: Date.parse(p.ds), lo: p.lo, mid: p.mid, hi: p.hi }));
    const t0 = Date.parse(view.since);
    const t1 = Math.max(now, ...fc.map((p) => p.t), t0 + 1);
    const desired = rec ? rec.desired_nodes * gpn : null;
    const values = [...demand, ...nodes, ...planned].map((p) => p[1]);
    fc.forEach((p) => values.push(p.hi, p.lo));
    if (desired !== null) values.push(desired);
    const top = Math.max(1, ...values.filter((v) => Number.isFinite(v))) * 1.05;
    const yMax = Math.ceil(top / niceStep(top, 4)) * niceStep(top, 4);
    const x = (t) => LEFT + ((t - t0) / (t1 - t0)) * (W - LEFT - RIGHT);
    const y = (v) => TOP + (1 - v / yMax) * (H - TOP - BOTTOM);

    const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img",
      "aria-label": `${view.pool}: demand, nodes that existed, recommended nodes and forecast` });
    chart.append(svg("title", {}, `${view.pool}: ${demand.length} demand samples, ` +
      `${view.recommended.length} recommendations, ${view.events.length} scale events` +
      (fc.length ? `, ${fc.length} forecast steps` : ", no forecast")));
    // The future is shaded so the forecast never reads as history.
    chart.append(svg("rect", { x: x(now), y: TOP, width: Math.max(0, x(t1) - x(now)),
      height: H - TOP - BOTTOM, class: "future" }));
    axes(chart, x, y, t0, t1, yMax, gpn);
    if (fc.length) band(chart, fc, x, y);
    if (nodes.length) chart.append(steps(nodes, now, x, y, "nodes"));
    if (planned.length) chart.append(steps(planned, now, x, y, "recommended"));
    if (desired !== null) {
      // What is asked for now holds from now on: drawn over the future only.
      chart.append(svg("line", { x1: x(now), x2: x(t1), y1: y(desired), y2: y(desired),
        class: "desired" }));
    }
    if (demand.length) chart.append(line(demand, x, y, "demand"));
    events(chart, view.events, x, y, gpn);
    chart.append(svg("line", { x1: x(now), x2: x(now), y1: TOP, y2: H - BOTTOM, class: "now" }));
    chart.append(svg("text", { x: x(now) + 4, y: TOP + 10, class: "now-label" }, "now"));
    return chart;
  }

  function legend(view) {
    const box = el("div", { class: "legend" });
    const items = [
      ["demand", "demand (GPUs)"],
      ["nodes", "nodes that existed"],
      ["recommended", "recommended (history)"],
      ["desired", "recommended now"],
      ["event-rec", "▲▼ recommendation changed"],
      ["event-nodes", "● nodes changed"],
    ];
    if (!view.band) items.splice(3, 1); // nothing drawn after "now" without a forecast
    if (view.band) {
      const b = view.band;
      const cal = b.offset === null ? "" : `, calibrated ${b.offset >= 0 ? "+" : ""}${fmt(b.offset, 1)}`;
      items.splice(1, 0, ["band", `forecast q${b.lo_level}–q${b.level} (served${cal})`]);
    }
    for (const [cls, label] of items) {
      const item = el("span", { class: `key ${cls}` }, label);
      if (!cls.startsWith("event")) item.prepend(el("i"));
      box.append(item);
    }
    if (!view.band) box.append(el("span", { class: "muted" }, `no forecast band: ${view.band_missing}`));
    return box;
  }

  window.Foresight.drawChart = drawChart;
  window.Foresight.chartLegend = legend;
})();
