// Foresight dashboard, the call-chain panel (GET signals/chain): services in columns by
// depth, an arrow per caller -> callee edge, the blamed ones outlined; with no spans
// yet, how to send them.
"use strict";

(function () {
  const { config, el, svg, getJSON, fmt } = window.Foresight;

  // An empty panel says how to fill it: the OTLP/HTTP route and an exporter's settings.
  function hint() {
    const base = new URL(".", location.href).href.replace(/\/$/, "");
    const box = el("div", { class: "chain-hint" });
    box.append(
      el("p", {}, "No spans in the window yet. Send traces as OTLP/HTTP (protobuf or JSON) " +
        "to POST /v1/traces, from an OpenTelemetry SDK:"),
      el("pre", { class: "otel-sdk" }, `export OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=${base}/v1/traces\n` +
        "export OTEL_EXPORTER_OTLP_TRACES_HEADERS=\"Authorization=Bearer%20<write token>\""),
      el("p", {}, "or from an OpenTelemetry Collector's exporters:"),
      el("pre", { class: "otel-collector" },
        `otlphttp/foresight:\n  traces_endpoint: ${base}/v1/traces`),
      el("p", { class: "muted" }, "Each service's pool and SLO come from the pools file; " +
        "see “POST /v1/traces” in docs/api.md."),
    );
    return box;
  }

  // The call chain from /signals/chain: services in columns by depth from the roots,
  // an arrow per caller -> callee edge, each box with p95 and own (exclusive) p95, the
  // blamed services outlined and labelled with their verdict.
  function drawChain(data) {
    const services = data.services.filter((s) => (s.call_count || 0) > 0 || s.culprit);
    if (!services.length) return hint();
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

  window.Foresight.renderChain = renderBottlenecks;
})();
