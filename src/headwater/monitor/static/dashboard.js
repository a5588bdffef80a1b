// headwater dashboard: polls /api/state and redraws. Text goes in with textContent only.
"use strict";
const COLORS = ["#58a6ff", "#3fb950", "#d29922", "#f778ba", "#a371f7", "#56d4dd", "#ff7b72",
                "#e3b341"];
const SVG = "http://www.w3.org/2000/svg";

function el(tag, attrs, ...children) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4))
                                      : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined) node.setAttribute(k, v);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const fmt = (n) => n === null || n === undefined ? "-" : Number(n).toLocaleString("en-US");
const rate = (n) => n === null || n === undefined ? "-" :
  Number(n).toLocaleString("en-US", {maximumFractionDigits: 1});
const time = (iso) => iso ? iso.replace("T", " ").slice(0, 19) + " UTC" : "-";
const ago = (s) => s === null || s === undefined ? "-" :
  s < 90 ? `${Math.round(s)} s ago` : s < 5400 ? `${Math.round(s / 60)} min ago`
                                               : `${(s / 3600).toFixed(1)} h ago`;

function grid(headers, rows, empty) {
  if (!rows.length) return el("p", {class: "empty"}, empty);
  return el("table", {},
    el("thead", {}, el("tr", {}, headers.map(h => el("th", {class: h.n ? "n" : null}, h.t)))),
    el("tbody", {}, rows));
}

function cell(value, testid, cls) {
  return el("td", {"data-testid": testid, class: cls || "n"}, value);
}

function replace(id, node) {
  const target = document.getElementById(id);
  target.replaceChildren(node);
}

function drawGraph(graph, tables, flows) {
  const names = Object.keys(graph);
  if (!names.length) return el("p", {class: "empty"}, "No pipeline has run here yet.");
  const rowsOf = Object.fromEntries(tables.map(t => [t.name, t.rows]));
  const statusOf = Object.fromEntries(flows.map(f => [f.table, f.status]));
  const nodes = new Map();
  const depth = (name, seen = new Set()) => {
    if (nodes.has(name)) return nodes.get(name).depth;
    if (seen.has(name)) return 0;
    seen.add(name);
    const info = graph[name];
    const ups = info ? info.upstream : [];
    const d = ups.length ? 1 + Math.max(...ups.map(u => depth(u, seen))) :
      (info && info.reads_files ? 1 : 0);
    nodes.set(name, {name, depth: d, kind: info ? info.kind.replace("_", " ") : "source table"});
    return d;
  };
  names.forEach(n => depth(n));
  if (names.some(n => graph[n].reads_files)) nodes.set("(files)", {name: "(files)", depth: 0, kind: "landed files"});
  const columns = {};
  for (const node of nodes.values()) (columns[node.depth] ||= []).push(node);
  const W = 190, H = 50, GX = 60, GY = 16;
  const levels = Object.keys(columns).map(Number).sort((a, b) => a - b);
  // fewer crossings: order each column by where its inputs sit, then the first by its outputs
  const ups = name => name === "(files)" ? [] :
    (graph[name] ? graph[name].upstream.concat(graph[name].reads_files ? ["(files)"] : []) : []);
  const rank = {};
  const place = level => columns[level].forEach((node, j) => { rank[node.name] = j; });
  const mean = xs => xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
  levels.forEach(place);
  for (const level of levels.slice(1)) {
    columns[level].sort((a, b) => mean(ups(a.name).map(u => rank[u] ?? 0)) -
                                  mean(ups(b.name).map(u => rank[u] ?? 0)));
    place(level);
  }
  if (levels.length > 1) {
    const downs = name => [...nodes.keys()].filter(n => ups(n).includes(name));
    columns[levels[0]].sort((a, b) => mean(downs(a.name).map(d => rank[d] ?? 0)) -
                                      mean(downs(b.name).map(d => rank[d] ?? 0)));
  }
  const height = Math.max(...levels.map(l => columns[l].length)) * (H + GY) + GY;
  const svg = el("svg:svg", {width: levels.length * (W + GX), height, "data-testid": "graph"});
  const pos = {};
  levels.forEach((level, i) => columns[level].forEach((node, j) => {
    pos[node.name] = {x: i * (W + GX) + 4, y: GY + j * (H + GY)};
  }));
  const edge = (from, to) => {
    const a = pos[from], b = pos[to];
    if (!a || !b) return;
    svg.append(el("svg:path", {d: `M${a.x + W},${a.y + H / 2} C${a.x + W + GX / 2},${a.y + H / 2} ` +
      `${b.x - GX / 2},${b.y + H / 2} ${b.x},${b.y + H / 2}`, stroke: "#4b6075", fill: "none",
      "stroke-width": 1.5}));
  };
  for (const name of names) {
    graph[name].upstream.forEach(u => edge(u, name));
    if (graph[name].reads_files) edge("(files)", name);
  }
  for (const node of nodes.values()) {
    const p = pos[node.name];
    const status = statusOf[node.name];
    const stroke = status === "running" ? "#3fb950" : status === "failed" ? "#f85149" : "#4b6075";
    svg.append(el("svg:g", {"data-node": node.name},
      el("svg:rect", {x: p.x, y: p.y, width: W, height: H, rx: 6, fill: "#1e2b38", stroke,
                      "stroke-width": 1.5}),
      el("svg:text", {x: p.x + 10, y: p.y + 19, "font-weight": 600}, node.name),
      el("svg:text", {x: p.x + 10, y: p.y + 37, fill: "#8b9bab"},
         node.kind + (rowsOf[node.name] !== undefined ? ` · ${fmt(rowsOf[node.name])} rows` : ""))));
  }
  return svg;
}

function chart(series, metric, scale, colorOf) {
  const W = 420, H = 160, L = 48, B = 20;
  const lines = Object.entries(series).map(([flow, points]) => ({
    flow, points: points.filter(p => p[metric] !== null && p.t)
      .map(p => ({t: Date.parse(p.t), v: p[metric] * scale}))}))
    .filter(l => l.points.length);
  if (!lines.length) return el("p", {class: "empty"}, "No batches yet.");
  const all = lines.flatMap(l => l.points);
  const t0 = Math.min(...all.map(p => p.t)), t1 = Math.max(...all.map(p => p.t));
  const vmax = Math.max(...all.map(p => p.v), 1e-9);
  const x = t => L + (t1 === t0 ? (W - L) / 2 : (t - t0) / (t1 - t0) * (W - L - 8));
  const y = v => H - B - v / vmax * (H - B - 8);
  const svg = el("svg:svg", {width: W, height: H, "data-chart": metric});
  svg.append(el("svg:line", {x1: L, y1: H - B, x2: W, y2: H - B, stroke: "#2a3a4a"}));
  svg.append(el("svg:text", {x: 2, y: 14}, rate(vmax)));
  svg.append(el("svg:text", {x: 2, y: H - B}, "0"));
  svg.append(el("svg:text", {x: L, y: H - 4, fill: "#8b9bab"}, new Date(t0).toISOString().slice(11, 19)));
  svg.append(el("svg:text", {x: W - 60, y: H - 4, fill: "#8b9bab"}, new Date(t1).toISOString().slice(11, 19)));
  for (const line of lines) {
    const d = line.points.map((p, i) => `${i ? "L" : "M"}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(" ");
    svg.append(el("svg:path", {d, stroke: colorOf(line.flow), fill: "none", "stroke-width": 1.8}));
    for (const p of line.points.slice(-60)) {
      svg.append(el("svg:circle", {cx: x(p.t), cy: y(p.v), r: 2, fill: colorOf(line.flow)}));
    }
  }
  return svg;
}

function render(s) {
  document.getElementById("pipeline").textContent = s.pipeline || s.lakehouse;
  const badge = document.getElementById("run-badge");
  const run = s.running[0];
  const status = run ? "running" : (s.last_run ? s.last_run.status : "no runs yet");
  badge.textContent = status;
  badge.className = "badge " + status;
  document.getElementById("run-info").textContent = run ? `${run.mode} · run ${run.run_id} · since ${run.started}`
    : s.last_run ? `last run ${s.last_run.run_id} ended ${time(s.last_run.ended)}` : "";
  document.getElementById("updated").textContent = time(s.generated_at);

  replace("graph", drawGraph(s.graph, s.tables, s.flows));

  replace("flows", grid(
    [{t: "flow"}, {t: "status"}, {t: "batches", n: 1}, {t: "input rows", n: 1}, {t: "rows/s", n: 1},
     {t: "last batch", n: 1}, {t: "last batch at"}, {t: "watermark"}, {t: "state rows", n: 1}],
    s.flows.map(f => el("tr", {"data-flow": f.flow},
      el("td", {}, f.flow),
      cell(f.status || "-", `flow-status-${f.flow}`, `status-${f.status}`),
      cell(fmt(f.batches), `flow-batches-${f.flow}`),
      cell(fmt(f.input_rows), `flow-rows-${f.flow}`),
      cell(rate(f.rows_per_second), `flow-rate-${f.flow}`),
      cell(f.last_batch_ms === null ? "-" : (f.last_batch_ms / 1000).toFixed(2) + " s",
           `flow-duration-${f.flow}`),
      cell(time(f.last_batch_at), null, ""),
      cell(time(f.watermark), `flow-watermark-${f.flow}`, ""),
      cell(fmt(f.state_rows), null))),
    "No flow has run yet."));

  const flowsWithSeries = Object.keys(s.series).sort();
  const colorOf = flow => COLORS[flowsWithSeries.indexOf(flow) % COLORS.length];
  replace("legend", el("div", {}, flowsWithSeries.map(f =>
    el("span", {}, el("i", {style: `background:${colorOf(f)}`}), f))));
  replace("chart-input", chart(s.series, "input_rate", 1, colorOf));
  replace("chart-processing", chart(s.series, "processing_rate", 1, colorOf));
  replace("chart-duration", chart(s.series, "duration_ms", 0.001, colorOf));

  replace("tables", grid(
    [{t: "table"}, {t: "kind"}, {t: "rows", n: 1}, {t: "version", n: 1}, {t: "last commit"},
     {t: "freshness"}],
    s.tables.map(t => el("tr", {"data-table": t.name},
      el("td", {}, t.name), el("td", {class: "dim"}, t.kind),
      cell(fmt(t.rows), `table-rows-${t.name}`),
      cell(t.version, `table-version-${t.name}`),
      cell(time(t.last_commit), `table-commit-${t.name}`, ""),
      cell(ago(t.freshness_seconds), null, ""))),
    "No tables yet."));

  const expRows = [];
  for (const [table, rules] of Object.entries(s.expectations).sort()) {
    for (const [rule, c] of Object.entries(rules).sort()) {
      expRows.push(el("tr", {},
        el("td", {}, table), el("td", {}, rule),
        cell(fmt(c.passed), `exp-passed-${table}-${rule}`),
        cell(fmt(c.failed), `exp-failed-${table}-${rule}`, c.failed ? "n bad" : "n")));
    }
  }
  replace("expectations", el("div", {},
    grid([{t: "table"}, {t: "rule"}, {t: "passed", n: 1}, {t: "failed", n: 1}], expRows,
         "No expectations have been checked yet."),
    grid([{t: "quarantine of"}, {t: "rows", n: 1}],
         Object.entries(s.quarantined).sort().map(([table, n]) => el("tr", {},
           el("td", {}, table), cell(fmt(n), `quarantined-${table}`, n ? "n bad" : "n"))),
         "Nothing quarantined.")));

  const dropped = Object.entries(s.late.dropped_by_watermark).sort();
  const kept = Object.entries(s.late.kept).sort();
  replace("late", el("div", {},
    grid([{t: "flow"}, {t: "dropped by the watermark", n: 1}],
         dropped.map(([flow, n]) => el("tr", {}, el("td", {}, flow),
           cell(fmt(n), `late-dropped-${flow}`))), "No row was dropped by a watermark."),
    grid([{t: "late rows kept for"}, {t: "rows", n: 1}],
         kept.map(([table, n]) => el("tr", {}, el("td", {}, table),
           cell(fmt(n), `late-kept-${table}`))), "")));

  replace("cdc", grid(
    [{t: "flow"}, {t: "upserted", n: 1}, {t: "deleted", n: 1}, {t: "history rows", n: 1}],
    s.flows.filter(f => f.cdc).map(f => el("tr", {},
      el("td", {}, f.flow),
      cell(fmt(f.cdc.upserted), `cdc-upserted-${f.flow}`),
      cell(fmt(f.cdc.deleted), `cdc-deleted-${f.flow}`),
      cell(fmt(f.cdc.history_rows), `cdc-history-${f.flow}`))),
    "No AUTO CDC flow has applied changes yet."));

  replace("errors", s.errors.length ? el("ul", {class: "errors", "data-testid": "errors"},
    s.errors.map(e => el("li", {}, el("span", {class: "bad"}, `${time(e.at)} ${e.flow || "run"}: `),
                                     e.message || ""))) :
    el("p", {class: "empty", "data-testid": "errors"}, "No errors."));
  document.body.dataset.loaded = s.generated_at;
}

async function poll() {
  try {
    const response = await fetch("api/state", {cache: "no-store"});
    if (response.ok) render(await response.json());
  } catch (err) {
    document.getElementById("run-badge").textContent = "dashboard server unreachable";
  }
  setTimeout(poll, 2000);
}
poll();
