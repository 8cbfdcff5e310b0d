"""The timeline page: a Gantt chart of partitions per worker, as one self-contained HTML document.

The same page serves two uses. The daemon serves it live at /timeline: it polls /timeline.json
(see `cuzk.engine.status.timeline`) and redraws every second; the operator page at /status.html
(cuzk.server.status_page) draws the same chart below the status. `cuzk bench --timeline
FILE.html` writes it with a run's spans embedded, so the file opens anywhere without a server.

Data: `{"now_ms", "window_s", "synth_workers", "device_workers", "spans": [{"job_id", "partition",
"proof_kind", "priority", "state", "synth_worker", "device_worker", "synth": [start_ms, end_ms|null],
"device": [start_ms, end_ms|null] | null}]}` with unix-ms times. Each drawn span is an SVG element
of class `partition` (plus `synth` or `device`) carrying data-job and data-partition; gaps between
device spans on a device (no worker of it computing) are drawn as class `idle` on its workers' rows.
"""

from __future__ import annotations

import html
import json
from typing import Any

#: The chart's own rules (the operator page, cuzk.server.status_page, embeds them too).
TIMELINE_STYLE = """
svg text { font: 11px system-ui, sans-serif; }
rect.synth { fill: #4e79a7; }
rect.device { fill: #f28e2b; }
rect.running { opacity: 0.6; }
rect.idle { fill: url(#hatch); stroke: #c0392b; stroke-width: 0.5; }
.legend span { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px; vertical-align: middle; }
"""

_STYLE = ("""
body { font: 13px system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; margin: 0 0 4px; }
#meta { color: #555; margin-bottom: 8px; }""" + TIMELINE_STYLE.rstrip("\n") + """
table { border-collapse: collapse; margin-top: 10px; }
td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
th { background: #f4f4f4; }
""")

#: `render(data, live)`: draws into #chart, #summary and #meta (the operator page calls it with its
#: own polling loop).
TIMELINE_SCRIPT = r"""
const SVG_NS = "http://www.w3.org/2000/svg";
function el(name, attrs, text) {
  const e = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function rowsOf(data) {
  const rows = [];
  const seen = new Set();
  const add = (name, kind) => {
    if (name && !seen.has(kind + name)) { seen.add(kind + name); rows.push({name, kind}); }
  };
  (data.synth_workers || []).forEach(w => add(w, "synth"));
  data.spans.forEach(s => add(s.synth_worker, "synth"));
  (data.device_workers || []).forEach(w => add(w, "device"));
  data.spans.forEach(s => { if (s.device) add(s.device_worker, "device"); });
  return rows;
}
function render(data, live) {
  const spans = data.spans || [];
  const now = data.now_ms;
  let t0, t1;
  if (live) { t1 = now; t0 = now - data.window_s * 1000; }
  else {
    const starts = [], ends = [];
    spans.forEach(s => [s.synth, s.device].forEach(iv => {
      if (iv && iv[0] !== null) { starts.push(iv[0]); ends.push(iv[1] === null ? now : iv[1]); }
    }));
    t0 = starts.length ? Math.min(...starts) : now; t1 = ends.length ? Math.max(...ends) : now + 1;
  }
  if (t1 <= t0) t1 = t0 + 1;
  const rows = rowsOf(data);
  const left = 170, width = 1000, rowH = 22, top = 24;
  const height = top + rows.length * rowH + 30;
  const x = t => left + Math.max(0, Math.min(1, (t - t0) / (t1 - t0))) * width;
  const svg = el("svg", {width: left + width + 20, height: height, id: "gantt"});
  const defs = el("defs");
  const pat = el("pattern", {id: "hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse",
                             patternTransform: "rotate(45)"});
  pat.appendChild(el("rect", {width: 6, height: 6, fill: "#fdecea"}));
  pat.appendChild(el("line", {x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#c0392b", "stroke-width": 1.5}));
  defs.appendChild(pat); svg.appendChild(defs);
  const rowIndex = {};
  rows.forEach((r, i) => {
    rowIndex[r.kind + r.name] = i;
    const y = top + i * rowH;
    svg.appendChild(el("rect", {x: left, y: y, width: width, height: rowH - 2, fill: i % 2 ? "#fafafa" : "#f0f0f0"}));
    svg.appendChild(el("text", {x: 4, y: y + 15}, (r.kind === "synth" ? "synth  " : "device ") + r.name));
  });
  const byDevice = {};
  let drawn = 0;
  spans.forEach(s => {
    [["synth", s.synth, s.synth_worker], ["device", s.device, s.device_worker]].forEach(([kind, iv, worker]) => {
      if (!iv || iv[0] === null || rowIndex[kind + worker] === undefined) return;
      const end = iv[1] === null ? now : iv[1];
      const y = top + rowIndex[kind + worker] * rowH;
      const r = el("rect", {x: x(iv[0]), y: y + 2, width: Math.max(1, x(end) - x(iv[0])), height: rowH - 6,
                            "class": "partition " + kind + (iv[1] === null ? " running" : ""),
                            "data-job": s.job_id, "data-partition": s.partition});
      r.appendChild(el("title", {}, `${s.proof_kind} ${s.job_id} partition ${s.partition}: ${kind} ` +
                                     `${((end - iv[0]) / 1000).toFixed(3)} s (${s.state})`));
      svg.appendChild(r); drawn++;
      if (kind === "device") (byDevice[worker] = byDevice[worker] || []).push([iv[0], end]);
    });
  });
  // Workers of one device take turns under its lock: the device is idle only when none computes.
  const deviceOf = w => w.split("/")[0];
  const byDev = {};
  Object.entries(byDevice).forEach(([w, ivs]) => (byDev[deviceOf(w)] = byDev[deviceOf(w)] || []).push(...ivs));
  let idleMs = 0, busyMs = 0;
  Object.entries(byDev).forEach(([dev, ivs]) => {
    ivs.sort((a, b) => a[0] - b[0]);
    const workerRows = rows.filter(r => r.kind === "device" && deviceOf(r.name) === dev);
    let last = null;
    ivs.forEach(([a, b]) => {
      if (last !== null && a > last) {
        idleMs += a - last;
        workerRows.forEach(r => {
          const y = top + rowIndex["device" + r.name] * rowH;
          const g = el("rect", {x: x(last), y: y + 6, width: Math.max(1, x(a) - x(last)), height: rowH - 14,
                                "class": "idle"});
          g.appendChild(el("title", {}, `device idle ${((a - last) / 1000).toFixed(3)} s`));
          svg.appendChild(g);
        });
      }
      if (last === null || b > last) { busyMs += b - Math.max(a, last === null ? a : last); last = b; }
    });
  });
  const ticks = 10;
  for (let k = 0; k <= ticks; k++) {
    const t = t0 + (t1 - t0) * k / ticks, xx = x(t);
    svg.appendChild(el("line", {x1: xx, y1: top - 4, x2: xx, y2: height - 24, stroke: "#ccc"}));
    const label = live ? `-${((t1 - t) / 1000).toFixed(1)} s` : `${((t - t0) / 1000).toFixed(2)} s`;
    svg.appendChild(el("text", {x: xx - 14, y: height - 10}, label));
  }
  const holder = document.getElementById("chart");
  holder.replaceChildren(svg);
  const jobs = new Set(spans.map(s => s.job_id));
  const busyPct = busyMs + idleMs > 0 ? (100 * busyMs / (busyMs + idleMs)).toFixed(1) : "-";
  document.getElementById("summary").innerHTML =
    `<tr><th>jobs</th><th>partitions</th><th>spans drawn</th><th>device idle between partitions</th>` +
    `<th>device busy</th></tr>` +
    `<tr><td>${jobs.size}</td><td>${spans.length}</td><td id="drawn">${drawn}</td>` +
    `<td>${(idleMs / 1000).toFixed(3)} s</td><td>${busyPct} %</td></tr>`;
  document.getElementById("meta").textContent = live
    ? `instance ${data.instance_id}, last ${data.window_s} s, updated ${new Date(now).toISOString()}`
    : `${spans.length} partitions, ${((t1 - t0) / 1000).toFixed(3)} s`;
}
"""

_BOOT = r"""const embedded = document.getElementById("timeline-data");
if (embedded) {
  render(JSON.parse(embedded.textContent), false);
} else {
  const url = document.body.dataset.source;
  const poll = () => fetch(url, {cache: "no-store"})
    .then(r => { if (!r.ok) throw new Error(r.status + " " + r.statusText); return r.json(); })
    .then(d => render(d, true))
    .catch(e => { document.getElementById("meta").textContent = "cannot read " + url + ": " + e; });
  poll();
  setInterval(poll, 1000);
}
"""

_SCRIPT = TIMELINE_SCRIPT + _BOOT

#: The colour key above the chart.
TIMELINE_LEGEND = ('<div class="legend"><span style="background:#4e79a7"></span>synthesis'
                   '<span style="background:#f28e2b"></span>device compute'
                   '<span style="background:#fdecea;border:1px solid #c0392b"></span>device idle</div>')


def _embed_json(data: Any) -> str:
    """JSON safe inside a <script> element (no "</script>" can end it early)."""
    return json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_page(title: str, *, data: dict[str, Any] | None = None, source: str = "/timeline.json") -> str:
    """The page with `data` embedded (a static file), or polling `source` (the live daemon page)."""
    embedded = ""
    if data is not None:
        embedded = f'<script type="application/json" id="timeline-data">{_embed_json(data)}</script>\n'
    legend = TIMELINE_LEGEND
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head>\n<body data-source=\"{html.escape(source)}\">"
            f"<h1>{html.escape(title)}</h1><div id=\"meta\">loading</div>{legend}<div id=\"chart\"></div>"
            f"<table id=\"summary\"></table>\n{embedded}<script>{_SCRIPT}</script></body></html>\n")
