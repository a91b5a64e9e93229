// warren's management UI: plain JS over the management HTTP API (/api/...), no build step.
// Credentials are kept in sessionStorage and sent as HTTP basic auth, as RabbitMQ's UI does.
"use strict";

// RabbitMQ's sample interval; `?poll=MS` in the page's URL changes it (the browser tests use it)
const POLL_MS = Number(new URLSearchParams(location.search).get("poll")) || 5000;
const HISTORY = 60;            // points kept per chart series
const history = { at: [], depth: { ready: [], unacked: [] }, rates: { publish: [], deliver: [], ack: [] } };
const COLOURS = { ready: "#e8a33d", unacked: "#4a7fc1", publish: "#d9534f", deliver: "#5cb85c", ack: "#8e6bbf" };

function auth() { return sessionStorage.getItem("warren-auth"); }

async function api(path, options = {}) {
  const headers = Object.assign({ "Authorization": "Basic " + auth() }, options.headers || {});
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch("/api" + path, Object.assign({}, options, { headers }));
  if (resp.status === 401) { showLogin("Login failed or not allowed"); throw new Error("unauthorised"); }
  const text = await resp.text();
  const body = text ? JSON.parse(text) : null;
  if (!resp.ok) throw new Error((body && body.reason) || resp.statusText);
  return body;
}

function login(user, password) {
  sessionStorage.setItem("warren-auth", btoa(user + ":" + password));
  return start();
}

function showLogin(message) {
  document.querySelectorAll("main > section").forEach(s => s.hidden = s.id !== "login");
  document.getElementById("login-error").textContent = message || "";
}

function esc(v) {
  const s = v === null || v === undefined ? "" : (typeof v === "object" ? JSON.stringify(v) : String(v));
  return s.replace(/[&<>"]/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
}

function table(id, columns, rows) {
  const head = "<tr>" + columns.map(c => `<th>${esc(c[0])}</th>`).join("") + "</tr>";
  const body = rows.map(r => "<tr>" + columns.map(c => {
    const v = c[1](r);
    const cls = typeof v === "number" ? "num" : (c[2] ? c[2](r) : "");
    return `<td class="${cls}">${c[3] ? v : esc(v)}</td>`;
  }).join("") + "</tr>").join("");
  document.getElementById(id).innerHTML = head + (body || `<tr><td colspan="${columns.length}">none</td></tr>`);
}

const stateClass = r => "state-" + r.state;
const rate = (stats, name) => (stats && stats[name + "_details"]) ? stats[name + "_details"].rate : 0;

function drawChart(canvasId, legendId, series) {
  const canvas = document.getElementById(canvasId);
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, pad = 30;
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, w, h);
  const values = Object.values(series).flat();
  const max = Math.max(1, ...values);
  ctx.strokeStyle = "#ddd"; ctx.fillStyle = "#666"; ctx.font = "10px sans-serif";
  for (let i = 0; i <= 4; i++) {
    const y = pad / 2 + (h - pad) * i / 4;
    ctx.beginPath(); ctx.moveTo(pad, y); ctx.lineTo(w - 5, y); ctx.stroke();
    ctx.fillText(String(Math.round(max * (4 - i) / 4)), 2, y + 3);
  }
  let points = 0;
  for (const [name, data] of Object.entries(series)) {
    ctx.strokeStyle = COLOURS[name]; ctx.lineWidth = 3; ctx.beginPath();
    data.forEach((v, i) => {
      const x = pad + (w - pad - 5) * (data.length > 1 ? i / (data.length - 1) : 0.5);
      const y = pad / 2 + (h - pad) * (1 - v / max);
      if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
      if (data.length === 1) ctx.fillRect(x - 3, y - 3, 6, 6);
    });
    ctx.stroke();
    points = Math.max(points, data.length);
  }
  canvas.dataset.points = String(points);
  document.getElementById(legendId).innerHTML = Object.entries(series).map(([name, data]) =>
    `<span><i style="background:${COLOURS[name]}"></i>${name} ${data.length ? data[data.length - 1] : 0}</span>`).join("");
}

async function renderOverview() {
  const o = await api("/overview");
  const q = o.queue_totals, t = o.object_totals, m = o.message_stats || {};
  document.getElementById("totals").innerHTML = ["connections", "channels", "exchanges", "queues", "consumers"]
    .map(k => `<span>${k}: <b>${t[k]}</b></span>`).join("") + `<span>messages: <b>${q.messages}</b></span>`;
  history.at.push(Date.now());
  history.depth.ready.push(q.messages_ready); history.depth.unacked.push(q.messages_unacknowledged);
  history.rates.publish.push(rate(m, "publish"));
  history.rates.deliver.push(rate(m, "deliver_get"));
  history.rates.ack.push(rate(m, "ack"));
  for (const group of [history.depth, history.rates]) for (const k in group) group[k].splice(0, group[k].length - HISTORY);
  drawChart("chart-depth", "legend-depth", history.depth);
  drawChart("chart-rates", "legend-rates", history.rates);
}

async function renderQueues() {
  table("queues-table", [
    ["vhost", r => r.vhost], ["name", r => r.name], ["type", r => r.type],
    ["state", r => r.state, stateClass], ["leader", r => r.leader || ""],
    ["members", r => (r.members || []).join(", ")], ["ready", r => r.messages_ready],
    ["unacked", r => r.messages_unacknowledged], ["total", r => r.messages], ["consumers", r => r.consumers],
    ["incoming /s", r => rate(r.message_stats, "publish")], ["deliver /s", r => rate(r.message_stats, "deliver_get")],
  ], await api("/queues"));
}

async function renderConnections() {
  table("connections-table", [
    ["name", r => r.name], ["user", r => r.user], ["vhost", r => r.vhost], ["state", r => r.state, stateClass],
    ["channels", r => r.channels], ["peer", r => r.peer_host + ":" + r.peer_port],
  ], await api("/connections"));
}

async function renderChannels() {
  table("channels-table", [
    ["name", r => r.name], ["user", r => r.user], ["state", r => r.state, stateClass],
    ["flow share", r => Number(r.flow_share || 0).toFixed(2)], ["consumers", r => r.consumer_count],
    ["unacked", r => r.messages_unacknowledged], ["unconfirmed", r => r.messages_unconfirmed],
    ["prefetch", r => r.prefetch_count], ["publish /s", r => rate(r.message_stats, "publish")],
  ], await api("/channels"));
}

async function renderFlow() {
  const f = await api("/warren/flow");
  document.getElementById("bottleneck").textContent = f.bottleneck ? f.bottleneck.line : "bottleneck: none";
  table("flow-table", [
    ["kind", r => r.kind], ["name", r => r.name], ["state", r => r.state, stateClass],
    ["flow share", r => Number(r.flow_share || 0).toFixed(2)], ["blocked on", r => (r.blocked_on || []).join(", ")],
  ], f.links);
}

async function renderExchanges() {
  table("exchanges-table", [
    ["vhost", r => r.vhost], ["name", r => r.name || "(AMQP default)"], ["type", r => r.type],
    ["durable", r => String(r.durable)], ["internal", r => String(r.internal)], ["policy", r => r.policy || ""],
  ], await api("/exchanges"));
}

function deleteButton(path) {
  return `<button data-delete="${esc(path)}">delete</button>`;
}

async function renderAdmin() {
  const [users, vhosts, policies] = await Promise.all([api("/users"), api("/vhosts"), api("/policies")]);
  table("users-table", [["name", r => r.name], ["tags", r => r.tags.join(", ")],
    ["", r => deleteButton("/users/" + encodeURIComponent(r.name)), null, true]], users);
  table("vhosts-table", [["name", r => r.name], ["messages", r => r.messages],
    ["", r => deleteButton("/vhosts/" + encodeURIComponent(r.name)), null, true]], vhosts);
  table("policies-table", [["vhost", r => r.vhost], ["name", r => r.name], ["pattern", r => r.pattern],
    ["apply to", r => r["apply-to"]], ["definition", r => r.definition], ["priority", r => r.priority],
    ["", r => deleteButton(`/policies/${encodeURIComponent(r.vhost)}/${encodeURIComponent(r.name)}`), null, true]],
    policies);
}

const RENDER = { overview: renderOverview, queues: renderQueues, connections: renderConnections,
                 channels: renderChannels, flow: renderFlow, exchanges: renderExchanges, admin: renderAdmin };

function current() { return (location.hash || "#overview").slice(1); }

async function refresh() {
  const tab = current();
  document.querySelectorAll("main > section").forEach(s => s.hidden = s.id !== tab);
  document.querySelectorAll("#tabs a").forEach(a => a.classList.toggle("active", a.hash === "#" + tab));
  try {
    if (tab !== "overview") await renderOverview();  // the charts keep their history on every tab
    if (RENDER[tab]) await RENDER[tab]();
    document.body.dataset.rendered = tab;
  } catch (e) {
    const err = document.getElementById("admin-error");
    if (err && tab === "admin") err.textContent = e.message;
  }
}

async function adminChange(method, path, body) {
  try {
    await api(path, { method, body: body === undefined ? undefined : JSON.stringify(body) });
    document.getElementById("admin-error").textContent = "";
  } catch (e) { document.getElementById("admin-error").textContent = e.message; }
  await refresh();
}

let timer = null;
async function start() {
  if (!auth()) { showLogin(); return; }
  const me = await api("/whoami");
  document.getElementById("who").textContent = me.name + " (" + me.tags.join(", ") + ")";
  await refresh();
  if (timer === null) timer = setInterval(refresh, POLL_MS);
}

document.getElementById("login-form").addEventListener("submit", ev => {
  ev.preventDefault();
  const f = ev.target;
  login(f.user.value, f.password.value);
});
document.getElementById("add-user").addEventListener("submit", ev => {
  ev.preventDefault();
  const f = ev.target;
  adminChange("PUT", "/users/" + encodeURIComponent(f.name.value), { password: f.password.value, tags: f.tags.value });
});
document.getElementById("add-vhost").addEventListener("submit", ev => {
  ev.preventDefault();
  adminChange("PUT", "/vhosts/" + encodeURIComponent(ev.target.name.value), {});
});
document.getElementById("add-policy").addEventListener("submit", ev => {
  ev.preventDefault();
  const f = ev.target;
  let definition;
  try { definition = JSON.parse(f.definition.value || "{}"); } catch (e) {
    document.getElementById("admin-error").textContent = "definition is not JSON"; return; }
  adminChange("PUT", `/policies/${encodeURIComponent(f.vhost.value)}/${encodeURIComponent(f.name.value)}`,
              { pattern: f.pattern.value, definition, "apply-to": f["apply-to"].value });
});
document.getElementById("admin").addEventListener("click", ev => {
  const path = ev.target.dataset && ev.target.dataset.delete;
  if (path) adminChange("DELETE", path);
});
window.addEventListener("hashchange", refresh);
start();
