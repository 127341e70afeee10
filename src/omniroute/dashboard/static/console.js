// OmniRoute console: charts, live-region polling rules, error messages, small form helpers.
// No inline scripts anywhere (the pages' Content-Security-Policy allows only this file and the
// vendored libraries), so everything interactive is wired here by data attributes.
(function () {
  "use strict";

  // --- error messages -----------------------------------------------------------------------
  function toast(message) {
    var el = document.getElementById("toast");
    if (!el) return;
    el.textContent = message;
    el.hidden = false;
    clearTimeout(el._timer);
    el._timer = setTimeout(function () { el.hidden = true; }, 8000);
  }

  document.addEventListener("htmx:responseError", function (evt) {
    var xhr = evt.detail.xhr;
    var message = "Request failed (" + xhr.status + ").";
    try {
      var body = JSON.parse(xhr.responseText);
      if (body && body.error && body.error.message) message = body.error.message;
    } catch (e) { /* not JSON: keep the status line */ }
    toast(message);
  });
  document.addEventListener("htmx:sendError", function () {
    toast("The gateway did not answer. Is it still running?");
  });

  // --- live regions: do not replace what the operator is using --------------------------------
  // A polling region ([data-live]) skips its refresh while keyboard focus is inside it, a details
  // element in it is open, or the tab is hidden; a swap would otherwise steal focus or close it.
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail.elt;  // a [data-live] element issues only its own polls
    if (!elt.hasAttribute || !elt.hasAttribute("data-live")) return;
    if (document.hidden || elt.contains(document.activeElement) || elt.querySelector("details[open]")) {
      evt.preventDefault();
    }
  });

  // --- charts ----------------------------------------------------------------------------------
  var COLORS = { requests: "#2563eb", errors: "#dc2626", fallbacks: "#d97706", p50: "#2563eb", p95: "#7c3aed", ttft: "#059669", cost: "#0f766e" };
  var CHARTS = {
    traffic: [["requests", "Requests"], ["errors", "Errors"], ["fallbacks", "Fallbacks"]],
    latency: [["p50", "p50 latency"], ["p95", "p95 latency"], ["ttft", "p50 TTFT"]],
    spend: [["cost", "Spend (USD)"]]
  };

  function drawCharts(root) {
    var dataEl = root.querySelector("[data-chart-data]");
    if (!dataEl || typeof uPlot === "undefined") return;
    var data = JSON.parse(dataEl.textContent);
    root.querySelectorAll("[data-chart]").forEach(function (box) {
      var spec = CHARTS[box.getAttribute("data-chart")];
      if (!spec) return;
      if (box._plot) box._plot.destroy();
      box.textContent = "";
      var width = Math.max(box.clientWidth, 240);
      var money = box.getAttribute("data-chart") === "spend";
      var series = [{}];
      var cols = [data.x];
      spec.forEach(function (s) {
        // latency lines join the buckets that had traffic; a lone bucket still shows as a point
        series.push({ label: s[1], stroke: COLORS[s[0]], width: 2, spanGaps: box.getAttribute("data-chart") === "latency",
                      fill: s[0] === "requests" || s[0] === "cost" ? COLORS[s[0]] + "22" : undefined,
                      points: { show: box.getAttribute("data-chart") === "latency", size: 5 } });
        cols.push(data[s[0]]);
      });
      box._plot = new uPlot({
        width: width, height: 180, series: series,
        scales: { x: { time: true } },
        axes: [{ stroke: "#6b7280", grid: { stroke: "#eef0f3" } },
               { stroke: "#6b7280", grid: { stroke: "#eef0f3" }, size: 64,
                 values: money ? function (u, vals) { return vals.map(function (v) { return v === 0 ? "$0" : "$" + v.toPrecision(2); }); } : undefined }],
        legend: { live: true },
        cursor: { drag: { x: false, y: false } }
      }, cols, box);
    });
  }

  function resizeCharts() {
    document.querySelectorAll("[data-chart]").forEach(function (box) {
      if (box._plot) box._plot.setSize({ width: Math.max(box.clientWidth, 240), height: 180 });
    });
  }

  // --- form helpers ----------------------------------------------------------------------------
  document.addEventListener("click", function (evt) {
    var add = evt.target.closest("[data-add-row]");
    if (add) {
      var body = document.getElementById(add.getAttribute("data-add-row"));
      var tpl = document.getElementById(add.getAttribute("data-template"));
      // the template row says __N__ where a row's number goes (ids, labels)
      var n = body.children.length + 1;
      var holder = document.createElement("tbody");
      holder.innerHTML = tpl.innerHTML.replace(/__N__/g, String(n));
      var row = holder.firstElementChild;
      body.appendChild(row);
      var first = row.querySelector("input");
      if (first) first.focus();
      return;
    }
    var remove = evt.target.closest("[data-remove-row]");
    if (remove) {
      var tr = remove.closest("tr");
      var next = tr.nextElementSibling || tr.previousElementSibling;
      tr.remove();
      var focus = next && next.querySelector("input");
      if (focus) focus.focus();
      return;
    }
    var copy = evt.target.closest("[data-copy]");
    if (copy) {
      var input = document.getElementById(copy.getAttribute("data-copy"));
      input.select();
      if (navigator.clipboard) navigator.clipboard.writeText(input.value);
      copy.textContent = "Copied";
    }
  });

  document.addEventListener("htmx:afterSettle", function (evt) { drawCharts(evt.detail.elt.ownerDocument || document); });
  window.addEventListener("resize", resizeCharts);
  document.addEventListener("DOMContentLoaded", function () { drawCharts(document); });
})();
