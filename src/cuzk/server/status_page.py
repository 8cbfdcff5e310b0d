"""The operator's page (/status.html): the daemon's status as one self-contained HTML document.

It polls /status (`cuzk.engine.status.snapshot`) and /timeline.json every `refresh_ms` and redraws:
devices (busy or idle, current job, memory, the GPU memory plan, restarts and the last failure),
key copies per device when the status has them (`devices[].keys`), queues per priority with the
oldest job's wait, jobs in progress, the recent finished jobs with their phases and errors, the SRS
tiers, and the timeline chart of `cuzk.server.timeline_page` below. Inline CSS and script, system
fonts: nothing is fetched but the two JSON documents, so the page works on a host without internet
access. When /status cannot be read the page says so at the top, keeps the last data it had
(dimmed), and keeps retrying.

DOM hooks (for tests and scrapers): each table row carries `data-row` ("device:cpu0",
"plan:cuda0:0", "key:cuda0:0", "queue:HIGH", "kind:porep-c2", "active:JOB", "job:JOB",
"srs:CIRCUIT"), each cell `data-cell` (a field name) and, where the text is formatted, `data-value`
with the raw number; #conn has `data-state` "loading", "live" or "unreachable".
"""

from __future__ import annotations

import html

from cuzk.server.timeline_page import TIMELINE_LEGEND, TIMELINE_SCRIPT, TIMELINE_STYLE

_STYLE = """
:root { color-scheme: light; }
body { font: 13px system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d2430; background: #f3f5f8; }
header { background: #1d2430; color: #f3f5f8; padding: 10px 16px; position: sticky; top: 0; z-index: 2; }
header h1 { font-size: 17px; margin: 0 0 4px; font-weight: 600; }
#facts { display: flex; flex-wrap: wrap; gap: 4px 18px; color: #c8d0dc; }
#facts b { color: #fff; font-weight: 600; }
#conn { margin-top: 6px; padding: 3px 8px; border-radius: 3px; display: inline-block; font-weight: 600; }
#conn[data-state="live"] { background: #1e6b3a; color: #fff; }
#conn[data-state="loading"] { background: #55606f; color: #fff; }
#conn[data-state="unreachable"] { background: #b3261e; color: #fff; font-size: 14px; padding: 6px 10px; }
#draining { display: none; margin-left: 8px; background: #b26a00; color: #fff; padding: 3px 8px; border-radius: 3px; }
#unable { display: none; margin-left: 8px; background: #b3261e; color: #fff; padding: 3px 8px; border-radius: 3px; }
main { padding: 10px 16px 24px; }
body.stale main { opacity: 0.5; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr)); gap: 12px; }
section { background: #fff; border: 1px solid #d6dbe3; border-radius: 4px; padding: 8px 12px 10px;
  margin-bottom: 12px; }
.grid > section { margin-bottom: 0; }
.grid { margin-bottom: 12px; }
h2 { font-size: 14px; margin: 0 0 6px; font-weight: 600; }
h3 { font-size: 13px; margin: 10px 0 4px; font-weight: 600; }
.note { color: #55606f; margin: 4px 0; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th { text-align: left; font-weight: 600; color: #3b4555; border-bottom: 2px solid #d6dbe3; padding: 3px 8px 3px 0;
  white-space: nowrap; }
td { border-bottom: 1px solid #eceff3; padding: 3px 8px 3px 0; vertical-align: top; }
td.num, th.num { text-align: right; }
td.empty { color: #8a93a0; font-style: italic; }
td.err { color: #b3261e; max-width: 460px; overflow-wrap: anywhere; }
tr.job-failed td { background: #fdf0ef; }
tr.job-cancelled td { color: #6b7480; }
.badge { display: inline-block; padding: 0 6px; border-radius: 3px; font-size: 12px; font-weight: 600; }
.busy { background: #1e6b3a; color: #fff; }
.idle { background: #e3e7ed; color: #3b4555; }
.down { background: #b3261e; color: #fff; }
.HOT { background: #c0392b; color: #fff; }
.WARM { background: #e6a117; color: #1d2430; }
.COLD { background: #5b7fa6; color: #fff; }
.st-completed { color: #1e6b3a; font-weight: 600; }
.st-failed { color: #b3261e; font-weight: 600; }
.wait-long { color: #b3261e; font-weight: 600; }
.plan-head { margin: 8px 0 2px; }
#timeline-section { overflow-x: auto; }
#timeline-section table { width: auto; margin-top: 8px; }
#timeline-section td, #timeline-section th { border: 1px solid #d6dbe3; padding: 2px 8px; text-align: right; }
#meta { color: #55606f; margin-bottom: 4px; }
"""

_SCRIPT = r"""
const BODY = document.body.dataset;
const STATUS_URL = BODY.status, TIMELINE_URL = BODY.timeline, REFRESH_MS = Number(BODY.refresh);
let lastOk = null;

function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined) continue;
    e.append(kid instanceof Node ? kid : String(kid));
  }
  return e;
}
function bytes(n) {
  if (n === null || n === undefined) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = Number(n), i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i ? v.toFixed(Math.abs(v) < 10 ? 2 : 1) : String(v)) + " " + units[i];
}
function secs(s) {
  if (s === null || s === undefined) return "-";
  s = Number(s);
  if (s < 1) return (s * 1000).toFixed(0) + " ms";
  if (s < 120) return s.toFixed(s < 10 ? 2 : 1) + " s";
  if (s < 7200) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(1) + " h";
}
function clock(ms) { return ms ? new Date(ms).toLocaleTimeString([], {hour12: false}) : "-"; }
// A cell: its field name, the text shown, and the raw value when the text is formatted.
function td(cell, text, opts) {
  const o = opts || {};
  return h("td", {"data-cell": cell, "data-value": o.value, "class": o.cls, title: o.title}, text);
}
function numTd(cell, text, value, cls) { return td(cell, text, {value: value, cls: "num" + (cls ? " " + cls : "")}); }
function table(headers, rows, empty) {
  const head = h("tr", {}, headers.map(x => h("th", {"class": x.startsWith("#") ? "num" : null}, x.replace(/^#/, ""))));
  const body = rows.length ? rows
    : [h("tr", {"data-row": "none"}, h("td", {"class": "empty", colspan: headers.length}, empty || "none"))];
  return h("table", {}, h("thead", {}, head), h("tbody", {}, body));
}
function fill(id, ...kids) { document.getElementById(id).replaceChildren(...kids.flat(Infinity)); }
const devLabel = d => d.label || `${d.kind}${d.ordinal}`;  // logical devices on one GPU differ by label

function renderHeader(s) {
  document.getElementById("title").textContent = `cuzk daemon ${s.instance_id}`;
  document.title = `cuzk ${s.instance_id}`;
  const c = s.counters || {}, m = s.memory || {}, syn = s.synthesis || {};
  const fact = (k, v, id) => h("span", {id: id}, k + " ", h("b", {}, v));
  fill("facts",
       fact("version", s.version), fact("backend", s.backend), fact("pid", s.pid),
       fact("uptime", secs(s.uptime_secs)),
       fact("jobs", `${c.total_completed} completed · ${c.total_failed} failed · ${c.total_cancelled} cancelled`,
            "fact-jobs"),
       fact("queue depth", c.queue_depth, "fact-queue"), fact("active", `${c.active_jobs} / ${c.window}`),
       fact("synthesis", `${syn.active} / ${syn.max_concurrent} busy`),
       fact("host memory", `${bytes(m.used_bytes)} of ${bytes(m.total_bytes)} reserved (peak ${bytes(m.peak_bytes)})`),
       fact("RSS", bytes(m.process_rss_bytes)));
  document.getElementById("draining").style.display = s.accepting === false ? "inline-block" : "none";
  const unable = document.getElementById("unable");
  unable.textContent = s.unable_to_prove ? `not serving: ${s.unable_to_prove}` : "";
  unable.style.display = s.unable_to_prove ? "inline-block" : "none";
}

function failureText(f) {
  if (!f) return "-";
  if (typeof f === "string") return f;
  const at = f.at_unix_ms ? `${new Date(f.at_unix_ms).toLocaleString([], {hour12: false})} ` +
    `(${secs(Math.max(0, Date.now() - f.at_unix_ms) / 1000)} ago): ` : "";
  return at + (f.reason || f.error || JSON.stringify(f));
}

function renderDevices(s) {
  const devices = s.devices || [], workers = s.gpu_workers || [];
  const rows = devices.map(d => {
    const mine = workers.filter(w => w.device ? w.device === d.label
                                              : w.gpu_ordinal === d.ordinal && w.device_kind === d.kind);
    const busy = mine.filter(w => w.state !== "idle");
    const state = busy.length ? `busy ${busy.length}/${mine.length}`
      : `idle (${mine.length} worker${mine.length === 1 ? "" : "s"})`;
    const jobs = busy.map(w => `${w.current_job} p${w.current_partition} (${w.current_proof_kind})`);
    const lanes = mine.filter(w => w.reserved_for).map(w => `${w.worker_id}: ${w.reserved_for} only`);
    // A device on another host (the Ray executor) says where it is and whether it is up there.
    // A local device dead whose restart failed takes no work until a retry succeeds.
    const away = d.state && d.state !== "ready" ? d.state : d.restart_error ? "cannot restart" : null;
    const failure = d.restart_error ? {reason: "cannot restart: " + d.restart_error}
      : d.last_failure || (d.lost_reason ? {reason: d.lost_reason} : null);
    return h("tr", {"data-row": "device:" + devLabel(d)},
             td("device", devLabel(d)),
             td("name", d.name + (d.node_address ? ` · node ${d.node_address}` : "")),
             away ? td("state", h("span", {"class": "badge down"}, away), {value: away})
               : td("state", h("span", {"class": "badge " + (busy.length ? "busy" : "idle")}, state),
                    {value: busy.length ? "busy" : "idle", title: lanes.join("; ") || null}),
             td("current_job", jobs.length ? jobs.join(", ") : "-"),
             numTd("memory_total", d.memory_total ? bytes(d.memory_total) : "-", d.memory_total),
             numTd("memory_free", d.memory_free ? bytes(d.memory_free) : "-", d.memory_free),
             numTd("pid", d.pid ?? "-"), numTd("restarts", d.restarts ?? 0, null, d.restarts ? "wait-long" : null),
             td("last_failure", failureText(failure), {cls: failure ? "err" : null}));
  });
  fill("devices", table(["device", "name", "state", "current job", "#memory total", "#memory free", "#pid",
                         "#restarts", "last failure"], rows, "no devices"));
  const plans = devices.filter(d => d.memory_plan);
  if (!plans.length) {
    fill("plans", h("p", {"class": "note", id: "no-plan"},
                    "No device reports a memory plan (GPUs do: [gpus] memory_limit; docs/memory.md)."));
    return;
  }
  fill("plans", plans.map(d => {
    const p = d.memory_plan, dev = devLabel(d);
    const head = h("div", {"class": "plan-head", "data-row": "plan:" + dev},
      h("b", {}, dev + " memory plan: "),
      h("span", {"data-cell": "memory_limit", "data-value": p.memory_limit},
        "limit " + (p.memory_limit === null || p.memory_limit === undefined ? "none (free memory)"
                    : bytes(p.memory_limit))),
      " · ", h("span", {"data-cell": "budget", "data-value": p.budget}, "budget " + bytes(p.budget)),
      " · ", h("span", {"data-cell": "peak_pool_bytes", "data-value": p.peak_pool_bytes},
               "pool peak " + bytes(p.peak_pool_bytes)),
      " · ", h("span", {"data-cell": "oom_retries", "data-value": p.oom_retries,
                        "class": p.oom_retries ? "wait-long" : null}, "OOM retries " + p.oom_retries),
      " · ", h("span", {"data-cell": "preemptions", "data-value": p.preemptions},
               "let through mid-phase " + p.preemptions + ", refused for memory " + p.preemptions_refused));
    const keys = (p.keys || []).map((k, i) => h("tr", {"data-row": `plan:${dev}:${i}`},
      td("key", k.circuit_id || k.circuit || `key ${i + 1}`), td("mode", k.mode),
      numTd("domain", k.domain ? "2^" + Math.round(Math.log2(k.domain)) : "-", k.domain),
      numTd("resident_bytes", bytes(k.resident_bytes), k.resident_bytes),
      numTd("streamed_bytes", bytes(k.streamed_bytes), k.streamed_bytes),
      numTd("host_pinned_bytes", bytes(k.host_pinned_bytes), k.host_pinned_bytes),
      numTd("working_reserve", bytes(k.working_reserve), k.working_reserve),
      numTd("msm_batch", k.msm_batch ? Number(k.msm_batch).toLocaleString("en-US") : "-", k.msm_batch),
      td("vectors", `resident ${(k.resident || []).join(", ") || "-"}; ` +
                    `streamed ${(k.streamed || []).join(", ") || "-"}`)));
    return [head, table(["key", "mode", "#domain", "#resident", "#streamed", "#host pinned", "#working reserve",
                         "#MSM batch", "vectors"], keys, "no key loaded")];
  }));
}

function keyText(k) {
  if (typeof k !== "object" || k === null) return [String(k), ""];
  const name = k.circuit_id || k.circuit || k.name || k.key || "?";
  const rest = Object.entries(k).filter(([f]) => !["circuit_id", "circuit", "name", "key"].includes(f))
    .map(([f, v]) => `${f} ${typeof v === "number" && /bytes/.test(f) ? bytes(v)
                                : (typeof v === "object" ? JSON.stringify(v) : v)}`);
  return [name, rest.join(" · ")];
}

function renderKeys(s) {
  const devices = (s.devices || []).filter(d => d.keys !== undefined && d.keys !== null);
  if (!devices.length) {
    fill("keys", h("p", {"class": "note", id: "no-keys"},
      "This daemon's status has no per-device key copies (devices[].keys). Parameter sets in the HOT " +
      "tier (SRS tiers) are the keys resident for proving."));
    return;
  }
  const rows = [];
  devices.forEach(d => {
    const keys = Array.isArray(d.keys) ? d.keys : Object.entries(d.keys).map(([name, v]) =>
      (typeof v === "object" && v !== null ? {circuit_id: name, ...v} : {circuit_id: name, state: v}));
    if (!keys.length) rows.push(h("tr", {"data-row": `key:${devLabel(d)}:none`}, td("device", devLabel(d)),
                                  td("key", "no key copies", {cls: "empty"}), td("details", "")));
    keys.forEach((k, i) => {
      const [name, rest] = keyText(k);
      rows.push(h("tr", {"data-row": `key:${devLabel(d)}:${i}`}, td("device", devLabel(d)), td("key", name),
                  td("details", rest)));
    });
  });
  fill("keys", table(["device", "key", "details"], rows));
}

function renderQueues(s) {
  const prio = s.queues_by_priority;
  if (!prio) {
    fill("queues", h("p", {"class": "note"}, "This daemon's status has no queues per priority (queues_by_priority)."));
  } else {
    fill("queues", table(["priority", "#queued", "#oldest wait", "oldest queued job", "#planning", "#running"],
      prio.map(q => h("tr", {"data-row": "queue:" + q.priority},
        td("priority", q.priority), numTd("queued", q.queued, q.queued),
        numTd("oldest_wait_secs", secs(q.oldest_wait_secs), q.oldest_wait_secs,
              q.oldest_wait_secs > 60 ? "wait-long" : null),
        td("oldest_queued_job", q.oldest_queued_job || "-"),
        numTd("planning", q.planning, q.planning), numTd("running", q.running, q.running)))));
  }
  const b = s.buffers || {};
  fill("kinds", table(["proof kind", "#pending", "#planning", "#synthesizing", "#proving"],
    (s.queues || []).map(q => h("tr", {"data-row": "kind:" + q.proof_kind},
      td("proof_kind", q.proof_kind), numTd("pending", q.pending, q.pending), numTd("planning", q.planning, q.planning),
      numTd("synthesizing", q.synthesizing, q.synthesizing), numTd("proving", q.proving, q.proving)))),
    h("p", {"class": "note", id: "buffers"},
      `partitions: ${b.queued_for_synthesis ?? "-"} queued for synthesis, ${b.synth_in_flight ?? "-"} synthesizing, ` +
      `${b.waiting_for_device ?? "-"} waiting for a device; shared memory ${b.shared_segments ?? "-"} segments, ` +
      `${bytes(b.shared_bytes)}`));
}

function renderActive(s) {
  const active = (s.pipelines || []).filter(p => !["completed", "failed", "cancelled"].includes(p.state));
  fill("active", table(["job", "kind", "priority", "phase", "#partitions done", "#queued", "#started"],
    active.map(p => h("tr", {"data-row": "active:" + p.job_id},
      td("job_id", p.job_id), td("proof_kind", p.proof_kind), td("priority", p.priority), td("phase", p.phase),
      numTd("partitions", `${p.partitions_done} / ${p.total_partitions}`, p.partitions_done),
      numTd("queued_secs", secs(p.queued_secs), p.queued_secs),
      numTd("started_secs_ago", p.started_secs_ago === null ? "-" : secs(p.started_secs_ago) + " ago",
            p.started_secs_ago))), "no job in progress"));
}

function renderRecent(s) {
  const jobs = s.recent_jobs;
  if (!jobs) {
    fill("recent", h("p", {"class": "note"}, "This daemon's status has no recent_jobs list."));
    return;
  }
  const phase = (j, k) => numTd("phase_" + k, secs(j.phases_secs[k]), j.phases_secs[k]);
  fill("recent", table(["finished", "job", "kind", "priority", "state", "#partitions", "#total", "#queue",
                        "#SRS load", "#synthesis", "#device", "#verify", "error"],
    jobs.map(j => h("tr", {"data-row": "job:" + j.job_id, "data-job-id": j.job_id, "class": "job-" + j.state},
      td("finished", clock(j.finished_at_unix_ms), {value: j.finished_at_unix_ms}),
      td("job_id", j.job_id + (j.restored ? " (earlier instance)" : "")), td("proof_kind", j.proof_kind),
      td("priority", j.priority),
      td("state", j.state, {cls: {completed: "st-completed", failed: "st-failed"}[j.state]}),
      numTd("partitions", j.partitions, j.partitions), numTd("total_secs", secs(j.total_secs), j.total_secs),
      phase(j, "queue"), phase(j, "srs_load"), phase(j, "synthesis"), phase(j, "device"), phase(j, "verify"),
      td("error", j.error || "", {cls: j.error ? "err" : null}))), "no finished job yet"),
    h("p", {"class": "note"},
      "Synthesis, device and verify are summed over a job's partitions; queue and SRS load once."));
}

function renderSrs(s) {
  const entries = (s.allocations || {}).srs || [];
  const tiers = {HOT: 0, WARM: 0, COLD: 0};
  entries.forEach(e => { tiers[e.tier] = (tiers[e.tier] || 0) + 1; });
  fill("srs",
    h("p", {"class": "note", id: "tier-counts"}, Object.entries(tiers).map(([t, n]) => `${t} ${n}`).join(" · ")),
    table(["circuit", "tier", "#file", "#file held", "#resident", "#pinned", "#refs", "#idle", "#load time", "flags"],
      entries.map(e => h("tr", {"data-row": "srs:" + e.circuit_id},
        td("circuit_id", e.circuit_id), td("tier", h("span", {"class": "badge " + e.tier}, e.tier), {value: e.tier}),
        numTd("size_bytes", bytes(e.size_bytes), e.size_bytes),
        numTd("mapped_bytes", bytes(e.mapped_bytes || 0), e.mapped_bytes || 0),
        numTd("resident_bytes", bytes(e.resident_bytes), e.resident_bytes),
        numTd("pinned_bytes", bytes(e.pinned_bytes || 0), e.pinned_bytes || 0),
        numTd("ref_count", e.ref_count, e.ref_count),
        numTd("idle_ms", e.ref_count ? "in use" : secs(e.idle_ms / 1000), e.idle_ms),
        numTd("load_time_ms", secs(e.load_time_ms / 1000), e.load_time_ms),
        td("flags", [e.evictable ? "evictable" : null, e.insecure ? "insecure (test)" : null]
                      .filter(x => x).join(", ")))),
      "no parameters known yet"));
}

function renderStatus(s) {
  renderHeader(s); renderDevices(s); renderKeys(s); renderQueues(s); renderActive(s); renderRecent(s); renderSrs(s);
}

function setConn(ok, message) {
  const conn = document.getElementById("conn");
  const every = `refreshing every ${(REFRESH_MS / 1000).toFixed(1)} s`;
  if (ok) {
    conn.dataset.state = "live";
    conn.textContent = `live · updated ${lastOk.toLocaleTimeString([], {hour12: false})} · ${every}`;
  } else {
    conn.dataset.state = "unreachable";
    conn.textContent = `Daemon unreachable: ${message}. ` +
      (lastOk ? `Showing the status of ${lastOk.toLocaleTimeString([], {hour12: false})}; `
              : "No status received yet; ") + every + ".";
  }
  document.body.classList.toggle("stale", !ok && lastOk !== null);
}

async function getJSON(url) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), 10000);
  try {
    const r = await fetch(url, {cache: "no-store", signal: ctl.signal});
    if (!r.ok) throw new Error(`HTTP ${r.status} ${r.statusText}`);
    return await r.json();
  } finally {
    clearTimeout(timer);
  }
}

async function tick() {
  const [st, tl] = await Promise.allSettled([getJSON(STATUS_URL), getJSON(TIMELINE_URL)]);
  if (st.status === "fulfilled") {
    try {
      renderStatus(st.value);
      lastOk = new Date();
      setConn(true);
    } catch (err) {
      setConn(false, `the status from ${STATUS_URL} could not be drawn (${err})`);
    }
  } else {
    const why = st.reason && st.reason.name === "AbortError" ? "no answer in 10 s" : st.reason;
    setConn(false, `cannot read ${STATUS_URL} (${why})`);
  }
  if (tl.status === "fulfilled") {
    try {
      render(tl.value, true);
    } catch (err) {
      document.getElementById("meta").textContent = "cannot draw the timeline: " + err;
    }
  } else {
    document.getElementById("meta").textContent = `cannot read ${TIMELINE_URL}: ${tl.reason}`;
  }
  setTimeout(tick, REFRESH_MS);
}
tick();
"""

_BODY = """<header><h1 id="title">{title}</h1><div id="facts"></div>
<span id="conn" data-state="loading">loading {status}</span><span id="draining">draining: not accepting new jobs</span>
<span id="unable"></span>
</header>
<main>
<section id="devices-section"><h2>Devices</h2><div id="devices">{wait}</div><div id="plans"></div></section>
<div class="grid">
<section id="queues-section"><h2>Queues per priority</h2><div id="queues">{wait}</div></section>
<section id="kinds-section"><h2>Queues per proof kind</h2><div id="kinds">{wait}</div></section>
</div>
<section id="active-section"><h2>Jobs in progress</h2><div id="active">{wait}</div></section>
<section id="recent-section"><h2>Recent jobs</h2><div id="recent">{wait}</div></section>
<div class="grid">
<section id="srs-section"><h2>SRS tiers (parameter sets)</h2><div id="srs">{wait}</div></section>
<section id="keys-section"><h2>Key copies per device</h2><div id="keys">{wait}</div></section>
</div>
<section id="timeline-section"><h2>Timeline: partitions per worker</h2><div id="meta">loading</div>{legend}
<div id="chart"></div><table id="summary"></table></section>
</main>"""


def render_status_page(title: str, *, status_source: str = "/status", timeline_source: str = "/timeline.json",
                       refresh_ms: int = 1500) -> str:
    """The page, reading `status_source` and `timeline_source` (URLs) every `refresh_ms`."""
    body = _BODY.format(title=html.escape(title), status=html.escape(status_source), legend=TIMELINE_LEGEND,
                        wait='<p class="note">waiting for the first status</p>')
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(title)}</title>"
            f"<style>{_STYLE}{TIMELINE_STYLE}</style></head>\n"
            f"<body data-status=\"{html.escape(status_source)}\" data-timeline=\"{html.escape(timeline_source)}\" "
            f"data-refresh=\"{int(refresh_ms)}\">\n{body}\n"
            f"<script>{TIMELINE_SCRIPT}{_SCRIPT}</script></body></html>\n")
