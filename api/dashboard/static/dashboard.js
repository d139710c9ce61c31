// Foresight dashboard, the pools: per pool a headline (what to do and why), the
// numbers, the chart (chart.js) and the table of terms with the data's freshness.
// Reads GET pools, recommendation and dashboard/pool/{pool}; refreshes every 30 s.
"use strict";

(function () {
  const F = window.Foresight;
  const { config, el, getJSON, fmt, duration, ago, stamp } = F;
  const REFRESH_MS = 30000;
  const RANGES = [6, 24, 72];
  // The chart's history range (hours), kept for this tab.
  let hours = Number(sessionStorage.getItem("foresight-hours")) || RANGES[0];

  function rangeControl() {
    const box = document.getElementById("range");
    box.replaceChildren(el("span", { class: "muted" }, "history: "));
    for (const h of RANGES) {
      const button = el("button", { type: "button", "data-hours": String(h),
        "aria-pressed": String(h === hours) }, h < 48 ? `${h} h` : `${h / 24} d`);
      button.addEventListener("click", () => {
        hours = h;
        sessionStorage.setItem("foresight-hours", String(h));
        rangeControl();
        refresh().catch(() => null);
      });
      box.append(button);
    }
  }

  function numbers(rec) {
    const box = el("div", { class: "numbers" });
    const cells = [
      ["desired nodes", fmt(rec.desired_nodes)],
      ["current nodes", fmt(rec.current_nodes)],
      ["headroom pods", fmt(rec.headroom_pods)],
      // Without a forecast the quantiles are the live demand the decision used: say so.
      [rec.mode === "reactive" ? "demand now (GPUs)" : `demand peak q${rec.quantile}`,
        fmt(rec.forecast_quantiles[`q${rec.quantile}`], 1)],
    ];
    for (const [label, value] of cells) {
      const cell = el("div", { class: "cell", "data-field": label });
      cell.append(el("b", {}, value), el("span", { class: "muted" }, label));
      box.append(cell);
    }
    return box;
  }

  // The explanation's chain as a table: each term's node count, what it used, its age.
  function termsTable(view, rec) {
    const table = el("table", { class: "terms" });
    const head = el("tr");
    for (const name of ["term", "nodes", "from", "age"]) head.append(el("th", {}, name));
    table.append(head);
    for (const t of view.terms) {
      const tr = el("tr", { "data-term": t.term, class: t.decisive ? "decisive" : "" });
      tr.append(el("td", {}, t.term),
        el("td", { class: "n" }, t.nodes === null ? "–" : String(t.nodes)),
        el("td", {}, t.decisive ? `${t.detail} ◀ set the number` : t.detail),
        el("td", { class: "n" }, duration(t.age_seconds)));
      table.append(tr);
    }
    const final = el("tr", { "data-term": "final", class: "final" });
    final.append(el("td", {}, "final"), el("td", { class: "n" }, String(rec.desired_nodes)),
      el("td", {}, `valid until ${stamp(rec.valid_until)}`), el("td"));
    table.append(final);
    return table;
  }

  function freshness(view, rec) {
    const table = el("table", { class: "freshness" });
    const rows = [
      ["newest-sample", "newest sample", view.newest_sample.at
        ? `${stamp(view.newest_sample.at)}, ${ago(view.newest_sample.age_seconds)}` : "none yet"],
      ["forecast", "forecast", view.band
        ? `made ${ago((Date.parse(rec.generated_at) - Date.parse(view.band.generated_at)) / 1000)}` +
          ` from data until ${stamp(view.band.observed_until)}` : view.band_missing],
    ];
    const e = view.live_error;
    rows.push(["live-error", "live error", e.mase === null
      ? "not measured yet (the evaluate job scores forecasts once actuals arrive)"
      : `MASE ${fmt(e.mase, 2)} (reactive above ${fmt(e.bound, 1)}), ` +
        `measured ${ago(e.measured.age_seconds)}`]);
    rows.push(["model", "model", rec.model_version ? `version ${rec.model_version}` : "none"]);
    for (const [field, key, value] of rows) {
      const tr = el("tr", { "data-field": field });
      tr.append(el("th", {}, key), el("td", {}, value));
      table.append(tr);
    }
    return table;
  }

  function why(view, rec) {
    const box = el("div", { class: "explanation" });
    const ex = rec.explanation;
    // Said only when the forecast is not trusted; a healthy one needs no banner.
    if (ex.mode === "reactive" && ex.health_detail) {
      box.append(el("p", { class: "status warning" }, `reactive: ${ex.health_detail}`));
    }
    box.append(el("h3", {}, "Why"), termsTable(view, rec));
    const full = el("details", { class: "summary" });
    full.append(el("summary", {}, "the policy's full sentence"), el("p", {}, ex.summary));
    box.append(full, el("h3", {}, "Freshness"), freshness(view, rec));
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
    const view = await getJSON(`${config.pool_view}${encodeURIComponent(pool.name)}?hours=${hours}`);
    section.append(el("p", { class: "headline" }, view.headline || ""));
    const grid = el("div", { class: "grid" });
    const left = el("div");
    // One time on the page: the decision clock's, as the recommendation set gave it.
    left.append(numbers(rec), F.drawChart(view, rec, now), F.chartLegend(view));
    grid.append(left, why(view, rec));
    section.append(grid);
    section.setAttribute("aria-busy", "false");
    section.dataset.state = "ready";
  }

  async function refresh() {
    document.body.dataset.state = "loading";
    const [pools, recs] = await Promise.all([getJSON(config.pools), getJSON(config.recommendation)]);
    const byName = new Map(recs.pools.map((r) => [r.pool, r]));
    const reasons = new Map(recs.unavailable.map((u) => [u.pool, u.reason]));
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
        await renderPool(section, pool, byName.get(pool.name), reasons.get(pool.name), now);
      } catch (error) {
        showError(section, String(error.message));
      }
    }));
    await Promise.all([F.renderStatus(), F.renderChain()]);
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

  rangeControl();
  loop();
})();
