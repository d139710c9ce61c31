// Foresight dashboard, shared helpers: DOM and SVG builders, the token, JSON reads and
// time formatting. Loaded first; the panels (chart.js, status.js, chain.js,
// dashboard.js) find them on window.Foresight. No framework, no network beyond here.
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const config = JSON.parse(document.getElementById("foresight-config").textContent);

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    if (text !== undefined) node.textContent = text;
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

  // "2025-03-30 23:55Z": minutes are what an operator compares; seconds are noise.
  function stamp(iso) {
    if (!iso) return "–";
    return new Date(Date.parse(iso)).toISOString().slice(0, 16).replace("T", " ") + "Z";
  }

  // An age in the largest unit that keeps it short: 40 s, 12 min, 3.5 h, 2.1 d.
  function duration(seconds) {
    if (seconds === null || seconds === undefined) return "–";
    const s = Math.abs(seconds);
    if (s < 90) return `${Math.round(s)} s`;
    if (s < 90 * 60) return `${Math.round(s / 60)} min`;
    if (s < 36 * 3600) return `${(s / 3600).toFixed(1)} h`;
    return `${(s / 86400).toFixed(1)} d`;
  }

  function ago(seconds) {
    return seconds === null || seconds === undefined ? "–" : `${duration(seconds)} ago`;
  }

  window.Foresight = { config, el, svg, getJSON, fmt, hhmm, stamp, duration, ago };
})();
