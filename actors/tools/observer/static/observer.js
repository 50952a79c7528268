// The observer page: pictures arrive by server-sent events; rows are kept by key
// and updated in place, so buttons stay put and a restarted child stays on its row.
"use strict";

const TOKEN = new URLSearchParams(location.search).get("token") || "";
const $ = (id) => document.getElementById(id);
const esc = (v) => String(v ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const fmtBytes = (n) => n == null ? "–" : n >= 1 << 30 ? (n / (1 << 30)).toFixed(1) + " GiB" : (n / (1 << 20)).toFixed(1) + " MiB";
const fmtNum = (n) => n == null ? "–" : n >= 10000 ? (n / 1000).toFixed(1) + "k" : String(Math.round(n * 10) / 10);
const clock = (t) => new Date(t * 1000).toTimeString().slice(0, 8);

// -- keyed rows --------------------------------------------------------------------

function syncRows(tbody, items, keyOf, make, update) {
  const existing = new Map();
  for (const tr of tbody.children) existing.set(tr.dataset.key, tr);
  let i = 0;
  for (const item of items) {
    const key = keyOf(item);
    let tr = existing.get(key);
    if (tr) existing.delete(key); else { tr = make(key); }
    update(tr, item);
    if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
    i++;
  }
  for (const tr of existing.values()) tr.remove();
}

function setCell(tr, cls, html) {
  const td = tr.querySelector("td." + cls);
  if (td._html !== html) { td.innerHTML = html; td._html = html; }
  return td;
}

function newRow(key, classes) {
  const tr = document.createElement("tr");
  tr.dataset.key = key;
  tr.innerHTML = classes.map((c) => `<td class="${c}"></td>`).join("");
  return tr;
}

// -- the tree ----------------------------------------------------------------------

const TREE_CELLS = ["c-name", "c-kind", "c-restart", "c-state", "c-restarts num", "c-exit", "c-int", "c-host", "c-mbox num", "c-rate num", "c-acts"];
const lastRestarts = new Map();

function meter(used, limit) {
  if (limit == null) return "";
  const frac = limit > 0 ? Math.min(1, used / limit) : (used > 0 ? 1 : 0);
  const level = frac >= 0.8 ? "high" : frac >= 0.4 ? "mid" : "";
  return `<span class="meter ${level}"><i style="width:${(frac * 100).toFixed(0)}%"></i></span>`;
}

function renderTree(rows) {
  syncRows($("tree-body"), rows, (r) => r.key, (key) => newRow(key, TREE_CELLS.map((c) => c.split(" ")[0])), (tr, r) => {
    tr.className = r.supervisor ? "sup" : "";
    tr.dataset.name = r.name ?? "";
    tr.dataset.actor = r.actor ?? "";
    const glyph = r.depth ? "│ ".repeat(Math.max(0, r.depth - 1)) + "└─ " : "";
    const cls = r.class && r.class !== r.name ? `<span class="cls">${esc(r.class)}</span>` : "";
    setCell(tr, "c-name", `<span class="glyph">${glyph}</span><span class="label">${esc(r.name)}</span>${cls}`);
    setCell(tr, "c-kind", r.supervisor ? `<span class="tag strategy">${esc(r.strategy ?? "supervisor")}</span>` : `<span class="tag">${esc(r.type ?? "actor")}</span>`);
    setCell(tr, "c-restart", `<span class="tag">${esc(r.restart ?? "")}</span>`);
    setCell(tr, "c-state", `<span class="pill ${esc(r.state)}">${esc(r.state)}</span>`);
    const restarts = r.restarts ?? "";
    const td = setCell(tr, "c-restarts", esc(restarts));
    td.classList.toggle("hot", restarts > 0);
    const before = lastRestarts.get(r.key);
    if (before != null && restarts > before) { tr.classList.remove("bump"); void tr.offsetWidth; tr.classList.add("bump"); }
    lastRestarts.set(r.key, restarts);
    const exitTd = setCell(tr, "c-exit", esc(r.last_exit ?? ""));
    exitTd.title = r.last_exit ?? "";
    setCell(tr, "c-int", r.supervisor && r.intensity != null
      ? `${meter(r.used, r.intensity)}<span class="txt">${r.used}/${r.intensity} in ${r.period}s</span>` : "");
    setCell(tr, "c-host", r.actor ? `${esc(r.host)} · ${esc(r.pid)}` : "");
    const bound = r.mailbox_limit ? `/${esc(r.mailbox_limit)} <span class="tag" title="${esc(r.overflow)}">${esc(r.overflow)}</span>${r.dropped ? ` <b title="dropped">-${esc(r.dropped)}</b>` : ""}` : "";
    setCell(tr, "c-mbox", `<span class="${r.mailbox >= 10 ? "mbox-hi" : ""}">${r.actor ? esc(r.mailbox) : ""}</span>${bound}`);
    setCell(tr, "c-rate", r.actor ? fmtNum(r.rate) : "");
    setCell(tr, "c-acts", r.actor ? `<div class="acts"><button class="act-kill" data-actor="${esc(r.actor)}" data-name="${esc(r.name)}" title="untrappable exit: killed">kill</button><button class="act-exit" data-actor="${esc(r.actor)}" data-name="${esc(r.name)}" title="send an exit signal with a reason">exit…</button></div>` : "");
  });
}

// -- processes ---------------------------------------------------------------------

const HOST_CELLS = ["c-proc", "c-pid num", "c-cpus", "c-cpu num", "c-rss num", "c-count num", "c-hmbox num", "c-hactors host-actors", "c-hacts"];

function renderHosts(hosts) {
  syncRows($("hosts-body"), hosts, (h) => h.proc, (key) => newRow(key, HOST_CELLS.map((c) => c.split(" ")[0])), (tr, h) => {
    tr.querySelectorAll("td").forEach((td, i) => { td.className = HOST_CELLS[i]; });
    setCell(tr, "c-proc", `<b>${esc(h.label)}</b>${h.label !== h.proc ? ` <span class="tag">${esc(h.proc)}</span>` : ""}`);
    setCell(tr, "c-pid", esc(h.pid));
    setCell(tr, "c-cpus", h.cpus ? esc(h.cpus.join(",")) : '<span class="tag">any</span>');
    const cpu = h.cpu == null ? 0 : h.cpu;
    setCell(tr, "c-cpu", `<span class="bar"><i style="width:${Math.min(100, cpu).toFixed(0)}%"></i></span>${h.cpu == null ? "–" : cpu.toFixed(0)}`);
    setCell(tr, "c-rss", fmtBytes(h.rss));
    setCell(tr, "c-count", esc(h.count));
    setCell(tr, "c-hmbox", esc(h.mailbox));
    setCell(tr, "c-hactors", h.actors.map((a) => `<span>${esc(a.name)}${a.mailbox ? ` <b>${a.mailbox}</b>` : ""}</span>`).join(" ") + (h.count > h.actors.length ? ` <span>+${h.count - h.actors.length} more</span>` : ""));
    setCell(tr, "c-hacts", h.node ? "" : `<button class="act-sigkill" data-proc="${esc(h.proc)}" data-pid="${esc(h.pid)}" title="SIGKILL this OS process">SIGKILL</button>`);
  });
}

// -- cluster -----------------------------------------------------------------------

const PEER_CELLS = ["c-peer", "c-paddr", "c-pinc", "c-psince"];

function renderPeers(peers, distributed) {
  $("peers-card").hidden = !distributed;
  $("peers-count").textContent = peers.length ? `${peers.length} connected` : "none connected";
  syncRows($("peers-body"), peers, (p) => p.name, (key) => newRow(key, PEER_CELLS), (tr, p) => {
    setCell(tr, "c-peer", `<b>${esc(p.name)}</b>`);
    setCell(tr, "c-paddr", esc(p.address ?? ""));
    setCell(tr, "c-pinc", `<span class="tag">${esc(p.incarnation)}</span>`);
    setCell(tr, "c-psince", `${clock(p.up_since)}`);
  });
}

// -- log, charts, panels -------------------------------------------------------------

function renderLog(log) {
  const html = log.length ? log.slice(0, 60).map((r) => {
    const action = r.action || "";
    const act = action.startsWith("restarting") ? "act-restarting" : action.startsWith("shutting") ? "act-shutting" : "";
    const what = r.report === "child_terminated" ? "" : `<span class="rep">${esc(r.report)}</span> `;
    const text = `<b>${esc(r.supervisor)}</b> ${what}${r.child ? esc(r.child) + " " : ""}<span class="reason">${esc(r.reason)}</span> <span class="${act}">→ ${esc(action)}</span>`;
    return `<li><time>${clock(r.time)}</time><span class="what" title="${esc(r.reason)}">${text}</span></li>`;
  }).join("") : '<li><span class="empty">no exits yet</span></li>';
  const ol = $("log");
  if (ol._html !== html) { ol.innerHTML = html; ol._html = html; }
}

function prepCanvas(canvas) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  if (canvas.width !== w * dpr || canvas.height !== h * dpr) { canvas.width = w * dpr; canvas.height = h * dpr; }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  return [ctx, w, h];
}

function axis(ctx, w, h, max, label) {
  ctx.strokeStyle = "#26313d"; ctx.lineWidth = 1;
  for (const f of [0.5, 1]) { ctx.beginPath(); ctx.moveTo(0, h - 14 - (h - 24) * f + 0.5); ctx.lineTo(w, h - 14 - (h - 24) * f + 0.5); ctx.stroke(); }
  ctx.fillStyle = "#5a6b7c"; ctx.font = "10px sans-serif";
  ctx.fillText(`${fmtNum(max)} ${label}`, 4, 10);
  ctx.fillText("-5 min", 4, h - 2); ctx.textAlign = "right"; ctx.fillText("now", w - 2, h - 2); ctx.textAlign = "left";
}

const WINDOW = 300, BIN = 10;

function drawRestarts(series, now) {
  const [ctx, w, h] = prepCanvas($("chart-restarts"));
  const bins = new Array(WINDOW / BIN).fill(0);
  series.t.forEach((t, i) => { const age = now - t; if (age >= 0 && age < WINDOW) bins[bins.length - 1 - Math.floor(age / BIN)] += series.restarts[i]; });
  const max = Math.max(1, ...bins);
  axis(ctx, w, h, max, "restarts");
  const bw = w / bins.length;
  bins.forEach((v, i) => {
    if (!v) return;
    const bh = (h - 24) * v / max;
    ctx.fillStyle = "#f0b429";
    ctx.fillRect(i * bw + 1, h - 14 - bh, Math.max(1, bw - 2), bh);
  });
}

function drawMessages(series, now) {
  const [ctx, w, h] = prepCanvas($("chart-messages"));
  const pts = series.t.map((t, i) => [t, series.messages[i]]).filter(([t]) => now - t < WINDOW);
  const max = Math.max(1, ...pts.map((p) => p[1]));
  axis(ctx, w, h, max, "msgs/s");
  if (pts.length < 2) return;
  const x = (t) => w - (now - t) / WINDOW * w, y = (v) => h - 14 - (h - 24) * v / max;
  ctx.beginPath(); ctx.moveTo(x(pts[0][0]), h - 14);
  pts.forEach(([t, v]) => ctx.lineTo(x(t), y(v)));
  ctx.lineTo(x(pts[pts.length - 1][0]), h - 14); ctx.closePath();
  ctx.fillStyle = "rgba(79, 179, 255, .18)"; ctx.fill();
  ctx.beginPath(); pts.forEach(([t, v], i) => i ? ctx.lineTo(x(t), y(v)) : ctx.moveTo(x(t), y(v)));
  ctx.strokeStyle = "#4fb3ff"; ctx.lineWidth = 1.5; ctx.stroke();
}

const chip = (label, value, cls = "") => `<span class="chip ${cls}">${esc(label)}<b>${esc(value)}</b></span>`;
const table = (head, rows) => `<table class="grid"><thead><tr>${head.map((h) => `<th class="${h[1] || ""}">${esc(h[0])}</th>`).join("")}</tr></thead><tbody>${rows.join("") || `<tr><td class="none" colspan="${head.length}">none</td></tr>`}</tbody></table>`;

const PANELS = {
  ioq: ["IOQ", (p) => table([["server"], ["compaction", "num"], ["replication", "num"], ["low", "num"], ["channels i/d/v"], ["mbox", "num"]],
    p.servers.map((s) => `<tr><td class="c-name">${esc(s.server)}</td><td class="num">${s.compaction}</td><td class="num">${s.replication}</td><td class="num">${s.low}</td><td class="host-actors">${Object.entries(s.channels).map(([u, c]) => `<span>${esc(u)} ${c.join("/")}</span>`).join("") || '<span class="tag">–</span>'}</td><td class="num">${s.mailbox}</td></tr>`))],
  smoosh: ["smoosh", (p) => '<div class="chips">' + chip("channels", p.channels.length) + chip("compacting", p.channels.reduce((a, c) => a + c.active, 0), "ok") + chip("queued", p.channels.reduce((a, c) => a + c.queued, 0)) + "</div>" +
    table([["channel"], ["queued", "num"], ["active", "num"], ["starting", "num"], ["priority", "num"]],
      p.channels.map((c) => `<tr><td class="c-name">${esc(c.channel)}</td><td class="num">${c.queued}</td><td class="num">${c.active ? `<b style="color:var(--ok)">${c.active}</b>` : 0}</td><td class="num">${c.starting}</td><td class="num">${c.min == null ? "–" : `${fmtNum(c.min)}…${fmtNum(c.max)}`}</td></tr>`))],
  replicator: ["replicator", (p) => '<div class="chips">' + chip("running", p.counts.running, "ok") + chip("pending", p.counts.pending) + chip("crashing", p.counts.crashing, p.counts.crashing ? "bad" : "") + chip("max_jobs", p.max_jobs) + "</div>" +
    table([["job"], ["state"], ["crashes", "num"], ["retry in / back-off", "num"], ["last error"]],
      p.jobs.slice(0, 12).map((j) => `<tr><td class="c-name" title="${esc(j.source)} → ${esc(j.target)}">${esc(j.id)}</td><td><span class="pill ${j.state === "running" ? "running" : j.state === "crashing" ? "stopped" : "restarting"}">${esc(j.state)}</span></td><td class="num">${j.crashes}</td><td class="num">${j.backoff ? `${j.wait.toFixed(1)} / ${j.backoff.toFixed(1)} s` : "–"}</td><td class="c-exit" title="${esc(j.last_error)}">${esc(j.last_error ?? "")}</td></tr>`))],
  couch_jobs: ["couch_jobs", (p) => table([["type"], ["pending", "num"], ["running", "num"]],
    p.types.map((t) => `<tr><td class="c-name">${esc(t.type)}</td><td class="num">${t.pending}</td><td class="num">${t.running}</td></tr>`))],
};

function renderPanels(panels) {
  const root = $("panels");
  const names = Object.keys(PANELS).filter((n) => panels[n]);
  for (const card of [...root.children]) if (!panels[card.dataset.panel]) card.remove();
  for (const name of names) {
    let card = root.querySelector(`[data-panel="${name}"]`);
    if (!card) {
      card = document.createElement("section");
      card.className = "card panel"; card.dataset.panel = name; card.id = "panel-" + name;
      root.appendChild(card);
    }
    const p = panels[name];
    const body = p.error ? `<div class="panel-error">${esc(p.error)}</div>` : PANELS[name][1](p);
    const html = `<h2>${PANELS[name][0]}</h2>${body}`;
    if (card._html !== html) { card.innerHTML = html; card._html = html; }
  }
}

// -- the picture -------------------------------------------------------------------

let latest = null;

function render(pic) {
  latest = pic;
  const n = pic.node;
  $("node-line").textContent = `node ${n.id} · pid ${n.pid} · ${clock(n.time)}`;
  $("kpi-actors").textContent = n.actors;
  $("kpi-hosts").textContent = n.hosts;
  $("kpi-restarts").textContent = n.restarts;
  $("kpi-dropped").textContent = n.dropped ?? 0;
  const m = pic.series.messages;
  $("kpi-rate").textContent = m.length ? fmtNum(m[m.length - 1]) : "–";
  renderTree(pic.tree);
  renderHosts(pic.hosts);
  renderPeers(pic.peers || [], pic.distributed);
  renderLog(pic.log);
  renderPanels(pic.panels);
  drawRestarts(pic.series, n.time);
  drawMessages(pic.series, n.time);
  document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
}

function connect() {
  const live = $("live");
  const events = new EventSource("api/events?token=" + encodeURIComponent(TOKEN));
  events.onopen = () => { live.className = "live on"; live.textContent = "live"; };
  events.onmessage = (e) => render(JSON.parse(e.data));
  events.onerror = () => { live.className = "live off"; live.textContent = "reconnecting"; };
}

// -- actions -----------------------------------------------------------------------

function toast(text, bad) {
  const t = $("toast");
  t.textContent = text; t.className = "toast show" + (bad ? " err" : "");
  clearTimeout(t._timer); t._timer = setTimeout(() => { t.className = "toast"; }, 3000);
}

function confirmAction(title, text, withReason) {
  return new Promise((resolve) => {
    const dlg = $("confirm");
    $("confirm-title").textContent = title;
    $("confirm-text").textContent = text;
    $("confirm-reason-row").style.display = withReason ? "" : "none";
    dlg.onclose = () => resolve(dlg.returnValue === "ok" ? { reason: $("confirm-reason").value } : null);
    dlg.returnValue = "";
    dlg.showModal();
  });
}

async function post(path, body) {
  const res = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json", "X-Observer-Token": TOKEN }, body: JSON.stringify(body) });
  const out = await res.json();
  toast(out.ok ? out.message : out.error, !out.ok);
}

document.addEventListener("click", async (e) => {
  const b = e.target.closest("button");
  if (!b) return;
  if (b.classList.contains("act-kill")) {
    if (await confirmAction("Kill actor", `kill ${b.dataset.name} (${b.dataset.actor}): untrappable, reason killed`, false))
      await post("api/actor/kill", { actor: b.dataset.actor });
  } else if (b.classList.contains("act-exit")) {
    const answer = await confirmAction("Send exit signal", `exit ${b.dataset.name} (${b.dataset.actor}) with reason:`, true);
    if (answer) await post("api/actor/exit", { actor: b.dataset.actor, reason: answer.reason });
  } else if (b.classList.contains("act-sigkill")) {
    if (await confirmAction("SIGKILL host process", `kill -9 pid ${b.dataset.pid} (${b.dataset.proc}) and every actor in it`, false))
      await post("api/host/sigkill", { proc: b.dataset.proc });
  }
});

window.addEventListener("resize", () => { if (latest) render(latest); });
connect();
