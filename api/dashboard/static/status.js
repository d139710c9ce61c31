// Foresight dashboard, the status panel (GET dashboard/status): is the machinery behind
// the numbers alive? The served model and its forecast run (ages on the decision
// clock), and the scheduler: its leader and each job's last outcome and next run
// (wall clock, which the scheduler runs on whatever clock decisions replay).
"use strict";

(function () {
  const { config, el, getJSON, stamp, ago, duration } = window.Foresight;

  function row(table, field, key, ...cells) {
    const tr = el("tr", { "data-field": field });
    tr.append(el("th", {}, key));
    for (const cell of cells) tr.append(typeof cell === "string" ? el("td", {}, cell) : cell);
    table.append(tr);
  }

  function modelTable(model) {
    const table = el("table", { class: "model" });
    const version = el("td");
    if (model.version === null) {
      version.textContent = "none loaded: recommendations are reactive";
    } else if (model.mlflow_url) {
      const link = el("a", { href: model.mlflow_url, target: "_blank", rel: "noopener",
        class: "mlflow" }, `version ${model.version} in MLflow`);
      version.append(link, ` (${model.source})`);
    } else {
      version.textContent = `version ${model.version} (${model.source}; no MLflow UI address: ` +
        "serve --mlflow-ui-port)";
    }
    row(table, "model", "served model", version);
    const none = model.version === null;
    row(table, "promoted", "promoted", model.promoted_at
      ? `${stamp(model.promoted_at)} (wall clock)` : none ? "–" : "not by a train job in this store");
    const run = model.forecast_generated, seen = model.forecast_observed_until;
    row(table, "forecast-run", "forecast run", run.at
      ? `made ${stamp(run.at)}, ${ago(run.age_seconds)}` : none ? "–" : "none stored for this version");
    row(table, "observed-until", "made from data until", seen.at
      ? `${stamp(seen.at)}, ${ago(seen.age_seconds)}` : "–");
    return table;
  }

  function jobsTable(scheduler) {
    const table = el("table", { class: "jobs" });
    const head = el("tr");
    for (const name of ["job", "last outcome", "last run", "next run"]) head.append(el("th", {}, name));
    table.append(head);
    const wall = Date.parse(scheduler.wall_now);
    for (const job of scheduler.jobs) {
      const tr = el("tr", { "data-job": job.name });
      const outcome = el("td", { class: `outcome ${job.outcome || "never"}`, title: job.summary },
        job.outcome || "never ran");
      const last = job.last_run ? ago((wall - Date.parse(job.last_run)) / 1000) : "–";
      const next = job.next_run
        ? `in ${duration((Date.parse(job.next_run) - wall) / 1000)} (${job.trigger})`
        : `not scheduled (${job.trigger})`;
      tr.append(el("td", {}, job.name), outcome, el("td", {}, last), el("td", {}, next));
      table.append(tr);
    }
    return table;
  }

  async function renderStatus() {
    const box = document.getElementById("status");
    const body = box.querySelector(".body");
    try {
      const status = await getJSON(config.status);
      const s = status.scheduler;
      const leader = s.leader
        ? `scheduler leader ${s.leader} since ${stamp(s.leader_since)}`
        : "no scheduler leader recorded (serve --no-scheduler, or none has started)";
      body.replaceChildren(
        modelTable(status.model),
        el("p", { class: "leader", "data-field": "leader" }, leader),
        jobsTable(s),
      );
      box.dataset.state = "ready";
    } catch (error) {
      body.replaceChildren(el("p", { class: "status error" }, String(error.message)));
      box.dataset.state = "error";
    }
    box.hidden = false;
  }

  window.Foresight.renderStatus = renderStatus;
})();
