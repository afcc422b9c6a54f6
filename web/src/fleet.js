// The fleet page of `gpudoctor fleet --listen`: the checklist of every host,
// the top offenders and the card-or-slot verdicts, from /api/v1/fleet/.
// Plain DOM, no framework and nothing fetched from elsewhere.
"use strict";

const REFRESH_MS = 15000;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

function badge(severity, text) {
  return el("span", { class: `badge ${severity}` }, text ?? severity);
}

// A page served with --page-token-file is opened as /#token=TOKEN once; the
// token is kept for the tab and sent with every view, never put in a URL.
function readToken() {
  const match = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem("gpudoctor-fleet-token", decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("gpudoctor-fleet-token");
}
const token = readToken();

async function getJson(view) {
  const headers = token ? { Authorization: "Bearer " + token } : {};
  const answer = await fetch(`api/v1/fleet/${view}`, { headers, cache: "no-store" });
  if (answer.status === 401) throw new Error("this page requires a token: open it as /#token=YOUR_TOKEN");
  const body = await answer.json();
  if (!answer.ok) throw new Error(body.error || `HTTP ${answer.status}`);
  return body;
}

// What a checklist cell shows: passed only when the item was checked and found ok.
function cellState(item) {
  if (item.severity === "critical" || item.severity === "warning") return item.severity;
  if (item.checked === null) return "not-known";
  if (item.checked === false) return "not-checked";
  return item.severity === "ok" ? "passed" : "unknown";
}
const CELL_MARKS = { passed: "✓", "not-checked": "—", "not-known": "?" };

function renderChecklist(data) {
  document.getElementById("source").textContent = data.source;
  document.getElementById("hosts").textContent = data.summary.hosts;
  document.getElementById("not-answering").textContent = data.summary.not_answering;
  document.getElementById("critical").textContent = data.summary.critical;
  document.getElementById("warning").textContent = data.summary.warning;
  const table = document.getElementById("checklist");
  const head = el("tr", {}, el("th", {}, "Host"), el("th", {}, "State"));
  data.titles.forEach((title) => head.append(el("th", { class: "item", title }, title)));
  head.append(el("th", {}, "Other findings"));
  table.replaceChildren(el("thead", {}, head));
  const body = el("tbody");
  for (const host of data.hosts) {
    const state = host.answering ? badge(host.worst) : badge("critical", "not answering");
    const row = el("tr", { "data-host": host.hostname, "data-worst": host.answering ? host.worst : "not_answering" },
      el("td", { class: "mono", title: host.instance }, host.hostname), el("td", {}, state));
    for (const item of host.items) {
      const state = cellState(item);
      const cell = el("td", { class: `cell ${state}`, "data-state": state,
                              title: item.summary ? `${item.title}: ${item.summary}` : item.title });
      cell.textContent = CELL_MARKS[state] ?? item.summary;
      row.append(cell);
    }
    const other = host.answering ? host.other_findings.map((f) => f.id + (f.gpu ? ` gpu ${f.gpu}` : "")).join(", ")
                                 : host.trouble;
    row.append(el("td", { class: "why" }, other));
    body.append(row);
  }
  table.append(body);
}

function errorsText(e) {
  const parts = [];
  if (e.fell_off_bus_steps) parts.push(`off the bus ×${e.fell_off_bus_steps}`);
  if (e.uncorrectable_ecc) parts.push(`${e.uncorrectable_ecc} uncorrectable ECC`);
  if (e.row_remap) parts.push(`${e.row_remap} rows remapped`);
  if (e.xid) parts.push(`${e.xid} Xid`);
  if (e.pcie_replays) parts.push(`${e.pcie_replays} PCIe replays`);
  return parts.join(", ") || "–";
}

function renderOffenders(data) {
  document.getElementById("range").textContent = data.with_history ? `errors over ${data.range}` : "open findings only";
  const table = document.getElementById("offenders");
  table.replaceChildren(el("thead", {}, el("tr", {}, ...["Host", "GPU", "Serial", "Open", "Errors", "Verdict"]
    .map((title) => el("th", {}, title)))));
  const body = el("tbody");
  if (data.gpus.length === 0) body.append(el("tr", {}, el("td", { class: "empty", colspan: "6" }, "No GPU has an open finding or an error.")));
  for (const gpu of data.gpus) {
    body.append(el("tr", { "data-serial": gpu.serial },
      el("td", { class: "mono" }, gpu.hostname), el("td", { class: "mono" }, `${gpu.gpu || "–"} ${gpu.pci_bus_id}`),
      el("td", { class: "mono" }, gpu.serial || "–"), el("td", {}, gpu.open_findings.join(", ") || "–"),
      el("td", {}, errorsText(gpu.errors)), el("td", {}, gpu.verdict ? `${gpu.verdict.blame}: ${gpu.verdict.summary}` : "–")));
  }
  table.append(body);
}

function renderAttribution(data) {
  const box = document.getElementById("attribution");
  box.replaceChildren();
  if (data.verdicts.length === 0) box.append(el("div", { class: "empty" }, "No GPU errors to attribute."));
  for (const v of data.verdicts) {
    const severity = v.blame === "undetermined" ? "unknown" : "critical";
    const card = el("article", { class: `finding ${severity}`, "data-blame": v.blame },
      el("div", { class: "finding-head" }, badge(severity, v.blame), el("span", { class: "finding-id" }, v.serial || "unknown card"),
        el("span", { class: "finding-where" }, `${v.slot.hostname} ${v.slot.pci_bus_id} · ${Math.round(v.confidence * 100)}% confidence`)),
      el("p", { class: "finding-summary" }, v.summary),
      el("ul", {}, ...v.evidence.map((line) => el("li", {}, line))));
    if (v.proposal) {
      card.append(el("p", {}, `Swap: move ${v.proposal.move} to ${v.proposal.to.hostname} ${v.proposal.to.pci_bus_id}, ` +
        `and ${v.proposal.partner} from there into ${v.proposal.from.hostname} ${v.proposal.from.pci_bus_id}.`));
    }
    box.append(card);
  }
}

async function refresh() {
  const banner = document.getElementById("banner");
  try {
    renderChecklist(await getJson("checklist"));
    renderOffenders(await getJson("offenders"));
    try {
      renderAttribution(await getJson("attribution"));
    } catch (error) {
      document.getElementById("attribution").replaceChildren(el("div", { class: "empty" }, error.message));
    }
    banner.hidden = true;
    document.getElementById("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (error) {
    banner.hidden = false;
    banner.textContent = `Cannot read the fleet: ${error.message}`;
  }
  document.body.dataset.ready = "true";
}

refresh();
setInterval(refresh, REFRESH_MS);
