// gpudoctor dashboard: reads the agent's JSON API and draws GPUs, open
// findings and history charts (uPlot). Everything it needs is served by the
// agent itself.
//
// Text from the API is only ever set with textContent, never parsed as HTML:
// findings quote kernel log lines and process names.
(function () {
  "use strict";

  const REFRESH_MS = 5000;
  const CHART_REFRESH_MS = 30000;
  const PALETTE = ["#2563eb", "#db2777", "#16a34a", "#ea580c", "#7c3aed", "#0891b2", "#ca8a04", "#dc2626",
                   "#4f46e5", "#059669", "#c026d3", "#65a30d", "#0284c7", "#e11d48", "#9333ea", "#d97706"];
  const GIB = 1024 * 1024 * 1024;
  const CHARTS = {
    temperature_c: { digits: 0, scale: 1 },
    power_w: { digits: 0, scale: 1 },
    utilization_gpu_percent: { digits: 0, scale: 1, min: 0, max: 100 },
    memory_used_bytes: { digits: 1, scale: 1 / GIB, min: 0 },
  };

  const state = {
    token: null,
    snapshot: null,
    findings: [],
    diagnostics: [],  // each GPU's newest gpudoctor diag tests
    status: null,
    rangeSeconds: 3600,
    gpuFilter: "all",
    plots: new Map(),  // metric -> uPlot
    chartsLoadedAt: 0,
    firstRender: { overview: false, charts: false },
  };

  // ---- helpers ----------------------------------------------------------

  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key.startsWith("data-")) node.setAttribute(key, String(value));
      else if (key === "title") node.title = value;
      else node.setAttribute(key, String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // A reading that is missing is shown as such, never as 0.
  function reading(gpu, key, format) {
    const value = gpu[key];
    if (value === null || value === undefined) {
      const error = gpu.errors && gpu.errors[key];
      return el("span", { class: "na", title: error ? "error: " + error : "not supported" },
                error ? "error" : "n/a");
    }
    return format(value);
  }

  const fixed = (digits) => (v) => Number(v).toFixed(digits);
  const severityRank = { ok: 0, unknown: 1, warning: 2, critical: 3 };
  const worse = (a, b) => (severityRank[b] > severityRank[a] ? b : a);

  function ago(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m";
    if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
    return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
  }

  function formatBytes(bytes) {
    return (bytes / GIB).toFixed(1) + " GiB";
  }

  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  // ---- API --------------------------------------------------------------

  function readToken() {
    const match = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
    if (match) {
      sessionStorage.setItem("gpudoctor-token", decodeURIComponent(match[1]));
      history.replaceState(null, "", location.pathname + location.search);
    }
    state.token = sessionStorage.getItem("gpudoctor-token");
  }

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function api(path) {
    const headers = state.token ? { Authorization: "Bearer " + state.token } : {};
    let response;
    try {
      response = await fetch(path, { headers, cache: "no-store" });
    } catch (e) {
      throw new ApiError(0, "cannot reach the agent");
    }
    if (!response.ok) {
      let message = response.status + " " + response.statusText;
      try {
        const body = await response.json();
        if (body && body.error) message = body.error;
      } catch (e) { /* not JSON */ }
      throw new ApiError(response.status, message);
    }
    return response.json();
  }

  function showBanner(message) {
    const banner = $("banner");
    banner.textContent = message;
    banner.hidden = !message;
  }

  function reportError(error) {
    if (error.status === 401) {
      showBanner("This agent requires a token. Open the dashboard as /#token=YOUR_TOKEN.");
    } else if (error.status === 503 && /no sample/.test(error.message)) {
      showBanner("The agent has not taken its first sample yet.");
    } else {
      showBanner("Cannot load data: " + error.message);
    }
    const live = $("live");
    live.dataset.state = "offline";
    $("live-text").textContent = error.status === 401 ? "unauthorized" : "offline";
  }

  // ---- overview ---------------------------------------------------------

  function gpuHealth(gpu, findings) {
    let health = "ok";
    if (gpu.access_error) health = "critical";
    for (const f of findings) {
      if (f.gpu && f.gpu.index === gpu.index) health = worse(health, f.severity);
    }
    return health;
  }

  function renderHeader() {
    const snap = state.snapshot;
    const status = state.status;
    $("hostname").textContent = snap.hostname || "unknown host";
    const parts = [];
    if (snap.driver_version) parts.push("driver " + snap.driver_version);
    if (snap.cuda_driver_version) parts.push("CUDA " + snap.cuda_driver_version);
    parts.push(snap.gpus.length + (snap.gpus.length === 1 ? " GPU" : " GPUs"));
    if (snap.driver_error && snap.driver_error !== "none") parts.push("driver: " + snap.driver_error);
    $("platform").textContent = parts.join(" · ");
    if (status && status.version) $("version").textContent = "gpudoctor " + status.version;
    updateLive();
  }

  function updateLive() {
    const status = state.status;
    if (!status || status.last_sample_at_ms === null) return;
    const age = Date.now() - status.last_sample_at_ms;
    const live = $("live");
    live.dataset.state = status.fresh ? "live" : "stale";
    $("live-text").textContent = (status.fresh ? "live · sampled " : "stale · last sample ") + ago(age) + " ago";
  }

  function renderSummary() {
    const gpus = state.snapshot.gpus;
    const counts = { ok: 0, warning: 0, critical: 0, unknown: 0 };
    for (const gpu of gpus) counts[gpuHealth(gpu, state.findings)]++;
    $("sum-gpus").textContent = gpus.length;
    $("sum-healthy").textContent = counts.ok;
    $("sum-warning").textContent = state.findings.filter((f) => f.severity === "warning").length;
    $("sum-critical").textContent = state.findings.filter((f) => f.severity === "critical").length;
  }

  function renderFindings() {
    const box = $("findings");
    const findings = state.findings;
    $("findings-count").textContent = findings.length;
    if (findings.length === 0) {
      box.replaceChildren(el("div", { class: "empty ok" }, "No open findings. Every check passes."));
      return;
    }
    const now = Date.now();
    box.replaceChildren(...findings.map((f) => {
      const where = f.gpu && f.gpu.index !== null && f.gpu.index !== undefined
        ? "GPU " + f.gpu.index + (f.gpu.pci_bus_id ? " · " + f.gpu.pci_bus_id : "")
        : "host";
      return el("article", { class: "finding " + f.severity, "data-finding-id": f.id,
                             "data-severity": f.severity,
                             "data-gpu": f.gpu && f.gpu.index !== null ? f.gpu.index : "" },
        el("div", { class: "finding-head" },
          el("span", { class: "badge " + f.severity }, f.severity),
          el("span", { class: "finding-id" }, f.id),
          el("span", { class: "finding-where" },
             where + " · open " + ago(now - f.opened_at_ms),
          )),
        el("p", { class: "finding-summary" }, f.summary),
        el("div", { class: "finding-body" },
          el("div", { class: "finding-cause" }, el("h3", {}, "Probable cause"), el("p", {}, f.cause || "—")),
          el("div", { class: "finding-actions" }, el("h3", {}, "What to do"),
            f.actions && f.actions.length
              ? el("ol", {}, f.actions.map((a) => el("li", {}, a)))
              : el("p", {}, "—"))),
        f.evidence && f.evidence.length
          ? el("details", {}, el("summary", {}, "Evidence (" + f.evidence.length + ")"),
               el("ul", {}, f.evidence.map((e) => el("li", {}, e))))
          : null);
    }));
  }

  // A bar under a reading; `warnAt` (0-1) turns it amber, e.g. memory above 90 %.
  function meter(ratio, warnAt) {
    const clamped = Math.max(0, Math.min(1, ratio));
    const bar = el("span");
    bar.style.width = (clamped * 100).toFixed(1) + "%";
    return el("div", { class: "meter" + (warnAt !== undefined && clamped >= warnAt ? " high" : "") }, bar);
  }

  // The GPU's newest diagnostics, one line per test: "memtest passed · 2d 3h ago".
  function lastDiagnostics(gpu) {
    const records = state.diagnostics.filter((d) =>
      d.uuid && gpu.uuid ? d.uuid === gpu.uuid : d.gpu_index === gpu.index);
    if (records.length === 0) return el("span", { class: "na" }, "none recorded");
    const now = Date.now();
    return records.map((d) => {
      const fault = d.state === "faulty" || d.state === "hung";
      return el("div", { class: "diag" + (fault ? " bad" : ""), title: d.summary + "\n" + d.command },
                d.test + " " + d.state.replace(/_/g, " ") + " · " + ago(now - d.finished_at_ms) + " ago");
    });
  }

  function renderGpus() {
    const box = $("gpus");
    box.replaceChildren(...state.snapshot.gpus.map((gpu) => {
      const health = gpuHealth(gpu, state.findings);
      const stats = el("dl", { class: "stats" });
      const row = (label, value) => stats.append(el("dt", {}, label), el("dd", {}, value));
      row("Temperature", reading(gpu, "temperature_c", (v) => v + " °C"));
      row("Power", reading(gpu, "power_draw_w", (v) =>
        fixed(0)(v) + (gpu.power_limit_w ? " / " + fixed(0)(gpu.power_limit_w) : "") + " W"));
      row("Utilization", reading(gpu, "utilization_gpu_percent", (v) => v + " %"));
      if (gpu.utilization_gpu_percent !== null && gpu.utilization_gpu_percent !== undefined) {
        stats.append(meter(gpu.utilization_gpu_percent / 100));
      }
      row("Memory", reading(gpu, "memory_used_bytes", (v) =>
        formatBytes(v) + (gpu.memory_total_bytes ? " / " + formatBytes(gpu.memory_total_bytes) : "")));
      if (gpu.memory_used_bytes !== null && gpu.memory_total_bytes) {
        stats.append(meter(gpu.memory_used_bytes / gpu.memory_total_bytes, 0.9));
      }
      row("Fans", reading(gpu, "fan_speeds_percent", (v) => (v.length ? v.join(" / ") + " %" : "none")));
      row("PCIe", reading(gpu, "pcie_generation_current", (v) =>
        "Gen" + v + (gpu.pcie_width_current ? " x" + gpu.pcie_width_current : "")));
      row("ECC errors", reading(gpu, "ecc_volatile_uncorrected", (v) =>
        v + " uncorr." + (gpu.ecc_volatile_corrected !== null ? " · " + gpu.ecc_volatile_corrected + " corr." : "")));
      const processes = gpu.processes;
      row("Processes", processes === null || processes === undefined
        ? el("span", { class: "na" }, "n/a") : String(processes.length));
      row("Last diag", lastDiagnostics(gpu));

      const label = health === "ok" ? "healthy" : health;
      return el("article", { class: "gpu-card", "data-gpu-index": gpu.index, "data-health": health },
        el("div", { class: "gpu-head" },
          el("span", { class: "gpu-title" }, "GPU " + gpu.index),
          el("span", { class: "badge " + health }, label)),
        el("div", { class: "gpu-name", title: gpu.name || "" }, gpu.name || "unknown model"),
        gpu.access_error
          ? el("div", { class: "gpu-error" }, gpu.access_error + (gpu.access_message ? ": " + gpu.access_message : ""))
          : null,
        stats,
        el("div", { class: "gpu-ids", title: (gpu.uuid || "") + " " + (gpu.pci_bus_id || "") },
          (gpu.pci_bus_id || "") + (gpu.uuid ? " · " + gpu.uuid : "")));
    }));
  }

  function renderGpuFilter() {
    const select = $("gpu-filter");
    const wanted = ["all", ...state.snapshot.gpus.map((g) => String(g.index))];
    const have = Array.from(select.options).map((o) => o.value);
    if (wanted.join() === have.join()) return;
    select.replaceChildren(el("option", { value: "all" }, "All GPUs"),
      ...state.snapshot.gpus.map((g) => el("option", { value: String(g.index) }, "GPU " + g.index)));
    select.value = wanted.includes(state.gpuFilter) ? state.gpuFilter : "all";
  }

  async function refreshOverview() {
    try {
      const [status, snapshot, findings] = await Promise.all([
        api("api/v1/status"), api("api/v1/snapshot"), api("api/v1/findings")]);
      state.status = status;
      state.snapshot = snapshot;
      state.findings = findings.findings;
      // An agent without a history has no diagnostics to show; that is no error.
      state.diagnostics = await api("api/v1/diagnostics").then((d) => d.diagnostics, () => []);
      showBanner("");
      renderHeader();
      renderSummary();
      renderFindings();
      renderGpus();
      renderGpuFilter();
      state.firstRender.overview = true;
      markReady();
      if (Date.now() - state.chartsLoadedAt > CHART_REFRESH_MS) refreshCharts();
    } catch (error) {
      reportError(error);
    }
  }

  // ---- charts -----------------------------------------------------------

  function selectedGpus() {
    const all = state.snapshot ? state.snapshot.gpus.map((g) => g.index) : [];
    return state.gpuFilter === "all" ? all : all.filter((i) => String(i) === state.gpuFilter);
  }

  // Marks real gaps (the agent was down, the GPU was lost) with a null point,
  // which uPlot draws as a break: a gap is a step between two points of more
  // than three times the series' usual spacing.
  function withGaps(points) {
    if (points.length < 3) return points;
    const deltas = [];
    for (let i = 1; i < points.length; i++) deltas.push(points[i][0] - points[i - 1][0]);
    const usual = deltas.slice().sort((a, b) => a - b)[Math.floor(deltas.length / 2)];
    const out = [points[0]];
    for (let i = 1; i < points.length; i++) {
      if (points[i][0] - points[i - 1][0] > 3 * usual) {
        out.push([(points[i][0] + points[i - 1][0]) / 2, null]);
      }
      out.push(points[i]);
    }
    return out;
  }

  // Puts every GPU's points on one shared time axis, bucketed by `step`
  // seconds. A GPU without a point in another GPU's bucket gets undefined,
  // which uPlot joins over; only withGaps' nulls break a line.
  function align(perGpu, step) {
    const buckets = new Map();
    perGpu.forEach((points, series) => {
      for (const [ms, value] of withGaps(points)) {
        const t = Math.floor(ms / 1000 / step) * step;
        let row = buckets.get(t);
        if (!row) buckets.set(t, (row = new Array(perGpu.length).fill(undefined)));
        if (row[series] === undefined || value !== null) row[series] = value;
      }
    });
    const times = Array.from(buckets.keys()).sort((a, b) => a - b);
    const data = [times];
    for (let s = 0; s < perGpu.length; s++) data.push(times.map((t) => buckets.get(t)[s]));
    return data;
  }

  function chartWidth(figure) {
    return Math.max(280, Math.floor(figure.querySelector(".plot").getBoundingClientRect().width));
  }

  function drawChart(figure, gpus, perGpu, step) {
    const metric = figure.dataset.metric;
    const spec = CHARTS[metric];
    const plotBox = figure.querySelector(".plot");
    const old = state.plots.get(metric);
    if (old) {
      old.destroy();
      state.plots.delete(metric);
    }
    const pointCount = perGpu.reduce((n, points) => n + points.length, 0);
    figure.dataset.points = String(pointCount);
    figure.dataset.series = String(gpus.length);
    if (pointCount === 0) {
      plotBox.replaceChildren(el("div", { class: "no-data" }, "No history in this range yet."));
      figure.dataset.drawn = "empty";
      return;
    }
    plotBox.replaceChildren();
    const scaled = perGpu.map((points) => points.map(([t, v]) => [t, v === null ? null : v * spec.scale]));
    const data = align(scaled, step);
    const axisColor = cssVar("--muted");
    const gridColor = cssVar("--border");
    const format = (u, v) => (v === null || v === undefined ? "–" : v.toFixed(spec.digits));
    const opts = {
      width: chartWidth(figure),
      height: 240,
      cursor: { sync: { key: "gpudoctor" } },
      scales: {
        x: { time: true },
        y: spec.max !== undefined
          ? { range: [spec.min, spec.max] }
          : { range: (u, min, max) => [spec.min !== undefined ? spec.min : Math.floor(min * 0.95),
                                       Math.ceil(max * 1.05) || 1] },
      },
      axes: [
        { stroke: axisColor, grid: { stroke: gridColor, width: 1 }, ticks: { stroke: gridColor } },
        { stroke: axisColor, grid: { stroke: gridColor, width: 1 }, ticks: { stroke: gridColor }, size: 48 },
      ],
      series: [{}].concat(gpus.map((index, i) => ({
        label: "GPU " + index,
        stroke: PALETTE[index % PALETTE.length],
        width: 1.5,
        spanGaps: false,
        points: { show: false },
        value: format,
      }))),
      hooks: {
        draw: [() => {
          figure.dataset.drawn = "true";
          markReady();
        }],
      },
    };
    state.plots.set(metric, new uPlot(opts, data, plotBox));
  }

  async function refreshCharts() {
    if (!state.snapshot) return;
    state.chartsLoadedAt = Date.now();
    const gpus = selectedGpus();
    const to = Date.now();
    const from = to - state.rangeSeconds * 1000;
    const figures = Array.from(document.querySelectorAll(".chart"));
    const points = Math.min(2000, chartWidth(figures[0]));
    const step = Math.max(1, Math.round(state.rangeSeconds / points));
    const metrics = figures.map((f) => f.dataset.metric).join(",");
    try {
      const replies = await Promise.all(gpus.map((gpu) =>
        api(`api/v1/history?gpu=${gpu}&metric=${metrics}&from=${from}&to=${to}&points=${points}`)));
      for (const figure of figures) {
        const perGpu = replies.map((reply) => {
          const series = reply.series.find((s) => s.metric === figure.dataset.metric);
          return series ? series.points : [];
        });
        drawChart(figure, gpus, perGpu, step);
      }
      state.firstRender.charts = true;
      markReady();
    } catch (error) {
      for (const figure of figures) {
        figure.querySelector(".plot").replaceChildren(
          el("div", { class: "no-data" }, "History unavailable: " + error.message));
        figure.dataset.drawn = "error";
      }
      state.firstRender.charts = true;
      markReady();
    }
  }

  function markReady() {
    if (state.firstRender.overview && state.firstRender.charts) document.body.dataset.ready = "true";
  }

  // ---- wiring -----------------------------------------------------------

  function wireControls() {
    for (const button of document.querySelectorAll("#ranges button")) {
      button.addEventListener("click", () => {
        for (const b of document.querySelectorAll("#ranges button")) b.setAttribute("aria-pressed", "false");
        button.setAttribute("aria-pressed", "true");
        state.rangeSeconds = Number(button.dataset.range);
        refreshCharts();
      });
    }
    $("gpu-filter").addEventListener("change", (event) => {
      state.gpuFilter = event.target.value;
      refreshCharts();
    });
    let resizeTimer = null;
    window.addEventListener("resize", () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(() => {
        for (const figure of document.querySelectorAll(".chart")) {
          const plot = state.plots.get(figure.dataset.metric);
          if (plot) plot.setSize({ width: chartWidth(figure), height: 240 });
        }
      }, 150);
    });
  }

  readToken();
  wireControls();
  refreshOverview();
  setInterval(refreshOverview, REFRESH_MS);
  setInterval(updateLive, 1000);
})();
