// diskfrontier serve: the dashboard's own code. It polls /api/stats, keeps the history it was
// sent, and draws the charts as SVG itself (no library, nothing loaded from elsewhere).
"use strict";

(function () {
  const SERIES = {
    pending: { color: "#6366f1", label: "pending" },
    in_flight: { color: "#f59e0b", label: "in flight" },
    done: { color: "#10b981", label: "done" },
    failed: { color: "#ef4444", label: "failed" },
    rate: { color: "#0ea5e9", label: "done/s" },
    retried: { color: "#f97316", label: "retried" },
    disk: { color: "#8b5cf6", label: "on disk", format: (v) => size(v) },
    bytes_rate: { color: "#14b8a6", label: "received", format: (v) => `${size(v)}/s` },
    latency: { color: "#ec4899", label: "average fetch", format: (v) => (v === 0 ? "0" : delay(v)) },
  };
  const TOKEN_KEY = "diskfrontier-token";
  const NS = "http://www.w3.org/2000/svg";
  const integer = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
  const decimal = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });
  const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 1 });

  const state = {
    history: [],
    data: null,
    receivedAt: 0,
    keep: 3600,
    interval: 2,
    lastFull: 0,
    token: null,
    allHosts: null, // every host, once "Show all" is clicked: {total, hosts, at}
  };

  const $ = (id) => document.getElementById(id);

  // ------------------------------------------------------------ formats
  function count(value) {
    return typeof value === "number" ? integer.format(value) : "–";
  }

  function size(value) {
    if (typeof value !== "number") return "–";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let unit = 0;
    while (value >= 1024 && unit < units.length - 1) {
      value /= 1024;
      unit += 1;
    }
    return `${unit ? decimal.format(value) : integer.format(value)} ${units[unit]}`;
  }

  function rate(value) {
    if (typeof value !== "number") return "–";
    return value >= 100 ? integer.format(value) : decimal.format(value);
  }

  function pad(n) {
    return String(n).padStart(2, "0");
  }

  function clock(t) {
    const d = new Date(t * 1000);
    return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }

  function span(seconds) {
    seconds = Math.abs(seconds);
    if (seconds < 1) return "less than a second";
    if (seconds < 90) return `${Math.round(seconds)} s`;
    if (seconds < 90 * 60) return `${Math.round(seconds / 60)} min`;
    if (seconds < 36 * 3600) return `${decimal.format(seconds / 3600)} h`;
    return `${decimal.format(seconds / 86400)} days`;
  }

  function serverNow() {
    if (!state.data) return Date.now() / 1000;
    return state.data.now + (Date.now() - state.receivedAt) / 1000;
  }

  function moment(t) {
    if (t === "forever") return "until unblocked";
    if (typeof t !== "number") return "–";
    const ahead = t - serverNow();
    if (Math.abs(ahead) < 1) return "now";
    return ahead > 0 ? `${clock(t)} (in ${span(ahead)})` : `${clock(t)} (${span(ahead)} ago)`;
  }

  // Every delay and duration of the page: milliseconds below a second, seconds above.
  function delay(value) {
    if (typeof value !== "number") return "–";
    if (value === 0) return "none";
    if (value < 1) return `${Number((value * 1000).toPrecision(3))} ms`;
    return `${Number(value.toPrecision(3))} s`;
  }

  // A host's delay: its own, or the crawl's (one source: the crawl's figure, marked as such).
  function hostDelay(h, stats) {
    if (h.delay !== null && h.delay !== undefined) return [delay(h.delay), ""];
    if (typeof stats.delay === "number") return [delay(stats.delay), "the crawl's delay"];
    return ["crawl's", "the crawl's own delay (not kept in the job directory's files)"];
  }

  // ------------------------------------------------------------ charts
  function el(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    if (parent) parent.appendChild(node);
    return node;
  }

  function niceStep(span, ticks) {
    const raw = span / Math.max(1, ticks);
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    const unit = raw / power;
    const nice = unit <= 1 ? 1 : unit <= 2 ? 2 : unit <= 2.5 ? 2.5 : unit <= 5 ? 5 : 10;
    return nice * power;
  }

  // A step for bytes: a nice number of the unit (KiB, MiB...) the span is counted in.
  function byteStep(span, ticks) {
    const unit = Math.pow(1024, Math.max(0, Math.floor(Math.log(span) / Math.log(1024))));
    return niceStep(span / unit, ticks) * unit;
  }

  function timeStep(span) {
    const steps = [5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
    for (const step of steps) if (span / step <= 5) return step;
    return 86400;
  }

  function drawChart(svg, key) {
    const points = state.history;
    const width = Math.max(200, svg.clientWidth || 400);
    const height = Math.max(100, svg.clientHeight || 170);
    const m = { left: 52, right: 14, top: 10, bottom: 24 };
    const w = width - m.left - m.right;
    const h = height - m.top - m.bottom;
    const color = SERIES[key].color;
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    while (svg.firstChild) svg.removeChild(svg.firstChild);

    const values = points.filter((p) => typeof p[key] === "number");
    // The time axis: the history kept, at least a minute (a young history fills it from the left).
    const newest = points.length ? points[points.length - 1].t : serverNow();
    const x0 = Math.max(points.length ? points[0].t : newest - 60, newest - state.keep);
    const last = Math.max(newest, x0 + 60);
    const xSpan = last - x0;
    let top = values.reduce((acc, p) => Math.max(acc, p[key]), 0);
    const bytes = key === "disk" || key === "bytes_rate";
    const nice = bytes ? byteStep : niceStep;
    const step = top > 0 ? nice(top, 4) : 1;
    top = top > 0 ? Math.ceil(top / step) * step : 4;
    const X = (t) => m.left + ((t - x0) / xSpan) * w;
    const Y = (v) => m.top + h - (v / top) * h;

    const grid = el("g", { class: "grid" }, svg);
    const axis = el("g", { class: "axis" }, svg);
    const yStep = top > 0 ? nice(top, 4) : 1;
    for (let v = 0; v <= top + yStep / 1000; v += yStep) {
      el("line", { x1: m.left, x2: m.left + w, y1: Y(v), y2: Y(v) }, grid);
      const label = el("text", { x: m.left - 8, y: Y(v) + 4, "text-anchor": "end" }, axis);
      label.textContent = SERIES[key].format ? SERIES[key].format(v)
        : key === "rate" && top < 10 ? decimal.format(v) : compact.format(v);
    }
    const tStep = timeStep(xSpan);
    for (let t = Math.ceil(x0 / tStep) * tStep; t <= last; t += tStep) {
      const label = el("text", { x: X(t), y: height - 6, "text-anchor": "middle" }, axis);
      label.textContent = tStep >= 60 ? clock(t).slice(0, 5) : clock(t);
    }

    if (!values.length) {
      const text = el("text", { class: "nodata", x: m.left + w / 2, y: m.top + h / 2, "text-anchor": "middle" }, svg);
      text.textContent = points.length ? "not known for this crawl" : "waiting for data…";
      svg.dataset.points = "0";
      return;
    }

    const gradient = `g-${key}`;
    const defs = el("defs", {}, svg);
    const lg = el("linearGradient", { id: gradient, x1: 0, x2: 0, y1: 0, y2: 1 }, defs);
    el("stop", { offset: "0%", "stop-color": color, "stop-opacity": 0.28 }, lg);
    el("stop", { offset: "100%", "stop-color": color, "stop-opacity": 0.02 }, lg);

    // One path, broken where a figure is missing; its area closed down to zero under each run.
    let line = "";
    let area = "";
    let run = [];
    const flush = () => {
      if (!run.length) return;
      line += run.map((p, i) => `${i ? "L" : "M"}${X(p.t).toFixed(1)},${Y(p[key]).toFixed(1)}`).join("");
      const a = run[0];
      const z = run[run.length - 1];
      area += `M${X(a.t).toFixed(1)},${Y(0).toFixed(1)}` +
        run.map((p) => `L${X(p.t).toFixed(1)},${Y(p[key]).toFixed(1)}`).join("") +
        `L${X(z.t).toFixed(1)},${Y(0).toFixed(1)}Z`;
      run = [];
    };
    for (const p of points) {
      if (p.t < x0) continue;
      if (typeof p[key] === "number") run.push(p);
      else flush();
    }
    flush();
    el("path", { class: "area", d: area, fill: `url(#${gradient})` }, svg);
    el("path", { class: "line", d: line, stroke: color }, svg);
    const end = values[values.length - 1];
    el("circle", { class: "end", cx: X(end.t), cy: Y(end[key]), r: 3.5, fill: color }, svg);
    svg.dataset.points = String(values.length);
    svg.dataset.last = String(end[key]);

    // Hover: the nearest point's time and value.
    const hover = el("g", { class: "hover hidden" }, svg);
    const rule = el("line", { y1: m.top, y2: m.top + h }, hover);
    const dot = el("circle", { r: 4, fill: color }, hover);
    const tip = el("g", { class: "tip" }, hover);
    const box = el("rect", { rx: 5, ry: 5, height: 20 }, tip);
    const text = el("text", {}, tip);
    const overlay = el("rect", { x: m.left, y: m.top, width: w, height: h, fill: "transparent" }, svg);
    overlay.addEventListener("mousemove", (event) => {
      const r = svg.getBoundingClientRect();
      const px = ((event.clientX - r.left) / r.width) * width;
      const t = x0 + ((px - m.left) / w) * xSpan;
      let best = values[0];
      for (const p of values) if (Math.abs(p.t - t) < Math.abs(best.t - t)) best = p;
      const x = X(best.t);
      const y = Y(best[key]);
      rule.setAttribute("x1", x);
      rule.setAttribute("x2", x);
      dot.setAttribute("cx", x);
      dot.setAttribute("cy", y);
      const shown = SERIES[key].format ? SERIES[key].format(best[key]) : key === "rate" ? rate(best[key]) : count(best[key]);
      text.textContent = `${clock(best.t)}  ${shown} ${SERIES[key].label}`;
      const tw = text.getComputedTextLength() + 14;
      const tx = Math.min(Math.max(m.left, x - tw / 2), m.left + w - tw);
      const ty = Math.max(0, y - 30);
      box.setAttribute("x", tx);
      box.setAttribute("y", ty);
      box.setAttribute("width", tw);
      text.setAttribute("x", tx + 7);
      text.setAttribute("y", ty + 14);
      hover.classList.remove("hidden");
    });
    overlay.addEventListener("mouseleave", () => hover.classList.add("hidden"));
  }

  function drawCharts() {
    for (const svg of document.querySelectorAll("svg.chart")) drawChart(svg, svg.dataset.series);
  }

  // ------------------------------------------------------------ the page's figures
  function text(id, value) {
    const node = $(id);
    if (node.textContent !== value) node.textContent = value;
  }

  function cell(row, value, cls, title) {
    const td = document.createElement("td");
    td.textContent = value;
    if (cls) td.className = cls;
    if (title) td.title = title;
    row.appendChild(td);
    return td;
  }

  function renderHeader(data) {
    text("source", data.name || "");
    const badge = $("badge");
    badge.className = `badge badge-${data.state}`;
    badge.dataset.state = data.state;
    text("badge-text", data.state_label);
    document.title = `${data.state_label} · diskfrontier`;
    const error = $("error");
    error.classList.toggle("hidden", !data.error);
    if (data.error) error.textContent = `Could not read the crawl: ${data.error}`;
    const note = $("note");
    note.classList.toggle("hidden", !data.note);
    if (data.note) note.textContent = data.note;
    const paused = data.state === "paused";
    const actions = data.actions || [];
    $("pause").classList.toggle("hidden", paused || !actions.includes("pause"));
    $("resume").classList.toggle("hidden", !paused || !actions.includes("resume"));
    const runnable = actions.includes("pause") || actions.includes("resume");
    $("run-controls").classList.toggle("hidden", !data.control || !runnable);
  }

  function renderAge() {
    const data = state.data;
    if (!data || typeof data.age !== "number") return;
    const age = data.age + (Date.now() - state.receivedAt) / 1000;
    const node = $("age");
    node.textContent = age < 1.5 ? "updated just now" : `updated ${span(age)} ago`;
    node.classList.toggle("stale", age > Math.max(5, 3 * state.interval) + 2);
    node.title = data.snapshot ? `figures read at ${new Date(data.snapshot.taken * 1000).toLocaleString()}` : "";
  }

  function renderCards(data) {
    const shot = data.snapshot || {};
    const stats = shot.stats || {};
    text("v-pending", count(stats.pending));
    text("v-in_flight", stats.in_flight === null && data.origin === "files" && data.holder !== null ? "n/a" : count(stats.in_flight));
    text("v-done", count(stats.done));
    text("v-failed", count(stats.failed));
    renderRate(data);
    text("s-pending", typeof stats.delayed === "number" && stats.delayed ? `${count(stats.delayed)} waiting for a time` : "");
    text("s-in_flight", typeof stats.in_flight !== "number" && data.origin === "files" && data.holder !== null
      ? "counted in pending" : "");
    text("s-done", typeof stats.seen === "number" ? `${count(stats.seen)} seen` : "");
    text("s-failed", typeof stats.retried === "number" ? `${count(stats.retried)} retries` : "");
    const next = shot.next_ready;
    if (shot.paused_since) {
      text("v-next", "paused");
      text("s-next", typeof shot.paused_since === "number" ? `since ${clock(shot.paused_since)}` : "");
    } else if (next === null || next === undefined) {
      text("v-next", stats.pending ? "blocked" : "–");
      text("s-next", stats.pending ? "held by blocks or limits" : "nothing pending");
    } else {
      const ahead = next - serverNow();
      text("v-next", ahead <= 0.5 ? "now" : `in ${span(ahead)}`);
      text("s-next", ahead <= 0.5 ? "a host is ready" : `at ${clock(next)}`);
    }
    const failed = $("v-failed");
    failed.classList.toggle("bad", (stats.failed || 0) > 0);
    const revisits = typeof stats.revisits === "number" ? stats.revisits : 0;
    $("card-revisits").classList.toggle("hidden", revisits === 0);
    if (revisits) {
      text("v-revisits", count(revisits));
      text("s-revisits", `${count(stats.revisit_changes || 0)} changed, ${count(stats.revisit_not_modified || 0)} not modified (304)`);
    }
  }

  function renderRate(data) {
    const windowText = data.rate_seconds > 0
      ? `done/s over the last ${span(Math.min(data.rate_seconds, data.rate_window || data.rate_seconds))}` : "done per second";
    if (data.idle) {
      text("v-rate", "idle");
      text("s-rate", `nothing done lately · ${rate(data.rate)} ${windowText}`);
    } else {
      text("v-rate", rate(data.rate));
      text("s-rate", windowText);
    }
    $("v-rate").dataset.rate = typeof data.rate === "number" ? String(data.rate) : "";
  }

  function renderEta(data) {
    const stats = (data.snapshot || {}).stats || {};
    const left = (typeof stats.pending === "number" ? stats.pending : 0) + (typeof stats.in_flight === "number" ? stats.in_flight : 0);
    const oldest = typeof stats.oldest_pending_age === "number" ? ` · oldest pending ${span(stats.oldest_pending_age)}` : "";
    if (!left) {
      text("v-eta", typeof stats.pending === "number" ? "nothing left" : "–");
      text("s-eta", "");
    } else if (typeof data.rate !== "number" || data.rate <= 0 || data.idle) {
      text("v-eta", "–");
      text("s-eta", `${count(left)} left; no rate to go by${oldest}`);
    } else {
      const seconds = left / data.rate;
      text("v-eta", span(seconds));
      text("s-eta", `${count(left)} left at ${rate(data.rate)}/s${oldest}`);
      $("v-eta").dataset.seconds = String(seconds);
    }
  }

  function renderDisk(data) {
    const shot = data.snapshot || {};
    const stats = shot.stats || {};
    const bytes = typeof data.disk_bytes === "number" ? data.disk_bytes : null;
    const journal = typeof stats.journal_bytes === "number" ? stats.journal_bytes : null;
    $("card-disk").classList.toggle("hidden", bytes === null && journal === null);
    text("v-disk", size(bytes !== null ? bytes : journal));
    const growth = diskGrowth();
    const parts = [];
    if (bytes !== null && journal !== null) parts.push(`journal ${size(journal)}`);
    if (growth) parts.push(`${growth.bytes >= 0 ? "+" : "−"}${size(Math.abs(growth.bytes))} in ${span(growth.seconds)}`);
    text("s-disk", parts.join(" · "));
    text("disk-caption", bytes !== null ? "job directory bytes" : "journal bytes");
  }

  // How much the job directory (else the journal) grew over the history this page holds.
  function diskGrowth() {
    const key = state.history.some((p) => typeof p.disk_bytes === "number") ? "disk_bytes" : "journal_bytes";
    const points = state.history.filter((p) => typeof p[key] === "number");
    if (points.length < 2) return null;
    const first = points[0];
    const last = points[points.length - 1];
    return { bytes: last[key] - first[key], seconds: last.t - first.t, key };
  }

  function renderKinds(data) {
    const kinds = data.error_kinds;
    const entries = kinds && typeof kinds === "object" ? Object.entries(kinds) : [];
    const total = entries.reduce((acc, [, n]) => acc + n, 0);
    bars($("error-kinds"), entries.map(([kind, n]) => [kind, n]), kinds === null || kinds === undefined
      ? "Not known for this crawl." : "No failures.");
    const failed = ((data.snapshot || {}).stats || {}).failed;
    text("kinds-summary", typeof failed === "number" && failed > total && total
      ? `latest ${count(total)} of ${count(failed)}` : total ? `${count(total)} failed` : "");
  }

  const STATUS_CLASSES = ["2xx", "3xx", "4xx", "5xx", "other"];

  // The outcome counters a runner reports (status classes, bytes, fetch time): shown when the crawl has them.
  function renderResponses(data) {
    const stats = (data.snapshot || {}).stats || {};
    // Every crawl of this version keeps the counters, at 0 until its runner reports: shown once one counted.
    const present = STATUS_CLASSES.filter((c) => typeof stats[`responses_${c}`] === "number");
    const responses = present.reduce((acc, c) => acc + stats[`responses_${c}`], 0);
    const hasBytes = typeof stats.received_bytes === "number" && stats.received_bytes > 0;
    const hasTime = typeof stats.fetch_seconds_count === "number" && typeof stats.fetch_seconds_sum === "number" &&
      stats.fetch_seconds_count > 0;
    if (!responses) present.length = 0;
    $("responses-panel").classList.toggle("hidden", !present.length && !hasBytes && !hasTime);
    $("figure-bytes_rate").classList.toggle("hidden", !hasBytes);
    $("figure-latency").classList.toggle("hidden", !hasTime);
    if (!present.length && !hasBytes && !hasTime) return;
    const rows = present.map((c) => [c === "other" ? "other status" : c, stats[`responses_${c}`]]);
    bars($("responses"), rows, "No responses counted yet.");
    const total = rows.reduce((acc, [, n]) => acc + n, 0);
    text("responses-summary", total ? `${count(total)} responses` : "");
    const facts = [];
    if (hasBytes) {
      facts.push(["Received", size(stats.received_bytes)]);
      const last = state.history.length ? state.history[state.history.length - 1] : null;
      if (last && typeof last.bytes_rate === "number") facts.push(["Receiving", `${size(last.bytes_rate)}/s`]);
    }
    if (hasTime && stats.fetch_seconds_count > 0) {
      facts.push(["Fetch time", `${delay(stats.fetch_seconds_sum / stats.fetch_seconds_count)} average`]);
    }
    if (typeof stats.retries === "number") facts.push(["Retries", count(stats.retries)]);
    factList($("response-facts"), facts);
  }

  // Rows of [label, n] as bars scaled to the largest; ``empty`` when there is none.
  function bars(box, entries, empty) {
    const rows = document.createDocumentFragment();
    const most = entries.reduce((acc, [, n]) => Math.max(acc, n), 0);
    for (const [label, n] of entries) {
      const row = document.createElement("div");
      row.className = "bar-row";
      const p = document.createElement("span");
      p.className = "p";
      p.textContent = label;
      p.title = label;
      const track = document.createElement("div");
      track.className = "track";
      const fill = document.createElement("div");
      fill.className = "fill";
      fill.style.width = `${most ? Math.max(2, (100 * n) / most) : 0}%`;
      track.appendChild(fill);
      const value = document.createElement("span");
      value.className = "n";
      value.textContent = count(n);
      row.append(p, track, value);
      rows.appendChild(row);
    }
    if (!entries.length) {
      const none = document.createElement("div");
      none.className = "empty";
      none.textContent = empty;
      rows.appendChild(none);
    }
    box.replaceChildren(rows);
  }

  function factList(box, facts) {
    const list = document.createDocumentFragment();
    for (const [key, value] of facts) {
      const dt = document.createElement("dt");
      dt.textContent = key;
      const dd = document.createElement("dd");
      dd.textContent = value;
      list.append(dt, dd);
    }
    box.replaceChildren(list);
  }

  function hostAction(host, action) {
    let seconds = "";
    if (action === "block") {
      const answer = window.prompt(`Block ${host} for how many seconds? (empty: until unblocked)`, "600");
      if (answer === null) return;
      seconds = answer.trim();
    } else if (action === "delay") {
      const answer = window.prompt(`Seconds between requests to ${host}? (empty: the crawl's own delay)`, "1");
      if (answer === null) return;
      seconds = answer.trim();
    }
    control("host", { host, action, seconds });
  }

  function renderHosts(data) {
    const shot = data.snapshot || {};
    const stats = shot.stats || {};
    const all = state.allHosts;
    const hosts = all ? all.hosts : shot.hosts || [];
    const body = $("hosts").querySelector("tbody");
    const rows = document.createDocumentFragment();
    for (const h of hosts) {
      const tr = document.createElement("tr");
      cell(tr, h.host, "host", h.host);
      cell(tr, count(h.pending), "num");
      cell(tr, data.origin === "files" && data.holder !== null ? "–" : count(h.in_flight), "num");
      cell(tr, count(h.done), "num");
      const [shownDelay, delayTitle] = hostDelay(h, stats);
      cell(tr, shownDelay, "num", delayTitle);
      const blocked = cell(tr, "", "when");
      if (h.blocked_until && (h.blocked_until === "forever" || h.blocked_until > serverNow())) {
        const pill = document.createElement("span");
        pill.className = "pill";
        pill.textContent = moment(h.blocked_until);
        blocked.appendChild(pill);
      } else {
        blocked.textContent = "–";
      }
      cell(tr, h.failures ? `${count(h.failures)} in a row` : "–", h.failures ? "num bad" : "num");
      if (data.control) {
        const td = document.createElement("td");
        const box = document.createElement("div");
        box.className = "actions";
        const isBlocked = h.blocked_until && (h.blocked_until === "forever" || h.blocked_until > serverNow());
        for (const [action, label] of [[isBlocked ? "unblock" : "block", isBlocked ? "Unblock" : "Block"], ["delay", "Delay"]]) {
          const button = document.createElement("button");
          button.type = "button";
          button.className = "btn small";
          button.textContent = label;
          button.addEventListener("click", () => hostAction(h.host, action));
          box.appendChild(button);
        }
        td.appendChild(box);
        tr.appendChild(td);
      }
      rows.appendChild(tr);
    }
    body.replaceChildren(rows);
    $("hosts").querySelector(".actions-col").classList.toggle("hidden", !data.control);
    $("hosts-empty").classList.toggle("hidden", hosts.length > 0);
    const total = all ? all.total : shot.hosts_total || 0;
    const parts = [];
    if (total) parts.push(hosts.length < total ? `busiest ${count(hosts.length)} of ${count(total)}` : `${count(total)} hosts`);
    const button = $("hosts-all");
    button.classList.toggle("hidden", !all && (shot.hosts || []).length >= total);
    button.textContent = all ? "Busiest only" : `Show all ${count(total)}`;
    if (typeof shot.hosts_ready === "number") parts.push(`${count(shot.hosts_ready)} ready`);
    if (typeof shot.hosts_waiting === "number") parts.push(`${count(shot.hosts_waiting)} waiting`);
    text("hosts-summary", parts.join(" · "));
  }

  function renderFailures(data) {
    const shot = data.snapshot || {};
    const failures = (shot.failures || []).slice().reverse();
    const body = $("failures").querySelector("tbody");
    const rows = document.createDocumentFragment();
    for (const f of failures) {
      const tr = document.createElement("tr");
      cell(tr, typeof f.failed_at === "number" ? `${span(serverNow() - f.failed_at)} ago` : "–", "when",
        typeof f.failed_at === "number" ? new Date(f.failed_at * 1000).toLocaleString() : "");
      cell(tr, f.url, "url", f.url);
      cell(tr, count(f.attempts), "num");
      cell(tr, f.error, "error", f.error);
      rows.appendChild(tr);
    }
    body.replaceChildren(rows);
    $("failures-empty").classList.toggle("hidden", failures.length > 0);
    const total = (shot.stats || {}).failed;
    text("failures-summary", typeof total === "number" && total > failures.length
      ? `latest ${count(failures.length)} of ${count(total)}` : "");
  }

  function renderPriorities(data) {
    const stats = (data.snapshot || {}).stats || {};
    const by = stats.pending_by_priority;
    const entries = by && typeof by === "object" ? Object.entries(by).sort((a, b) => Number(b[0]) - Number(a[0])) : [];
    bars($("priorities"), entries.map(([priority, n]) => [`priority ${priority}`, n]),
         by ? "Nothing pending." : "Not kept by this crawl.");
  }

  function renderFacts(data) {
    const shot = data.snapshot || {};
    const stats = shot.stats || {};
    const facts = [];
    const origin = { "status.json": "status.json published by the crawl", files: "the job directory's files", redis: "Redis",
                     postgres: "PostgreSQL" };
    facts.push(["Read from", origin[data.origin] || "–"]);
    if (data.holder) facts.push(["Held by", `pid ${data.holder}`]);
    else if (data.origin === "files") facts.push(["Held by", data.holder === 0 ? "another process" : "no process"]);
    if (shot.pid && data.origin === "status.json") facts.push(["Machine", `${shot.machine || "?"} (pid ${shot.pid})`]);
    if (stats.order) facts.push(["Order", stats.order]);
    if (typeof stats.seen === "number") facts.push(["Seen", count(stats.seen)]);
    if (typeof stats.pushed === "number") facts.push(["Pushed", count(stats.pushed)]);
    if (typeof stats.duplicates === "number") facts.push(["Duplicates", count(stats.duplicates)]);
    if (typeof stats.delay === "number") {
      facts.push(["Delay", stats.delay > 0 ? `${delay(stats.delay)} between a host's requests` : "none"]);
    }
    if (typeof stats.journal_bytes === "number") {
      const live = typeof stats.live_bytes === "number" && stats.journal_bytes > 0
        ? `, ${Math.min(100, Math.round(100 * stats.live_bytes / stats.journal_bytes))}% live` : "";
      facts.push(["Journal", `${size(stats.journal_bytes)}${live}`]);
    }
    if (typeof stats.checkpoints === "number") {
      const last = typeof stats.last_checkpoint === "number"
        ? `${span(Math.max(0, serverNow() - stats.last_checkpoint))} ago` : "none yet";
      facts.push(["Checkpoint", last]);
    }
    if (typeof stats.compactions_total === "number") {
      facts.push(["Compactions", `${count(stats.compactions_total)} (${count(stats.compactions || 0)} this run)`]);
    }
    if (shot.paused_since) facts.push(["Paused since", moment(shot.paused_since)]);
    factList($("facts"), facts);
  }

  function renderFoot(data) {
    const parts = [`refresh every ${decimal.format(data.interval)} s`, `charts keep ${span(data.keep)}`];
    if (typeof data.read_seconds === "number") {
      const ms = data.read_seconds * 1000;
      parts.push(`last read took ${ms < 1 ? "under 1" : decimal.format(ms)} ms`);
    }
    parts.push("JSON: /api/stats", "Prometheus: /metrics");
    text("foot", parts.join(" · "));
  }

  function renderControl(data) {
    $("control-panel").classList.toggle("hidden", !data.control);
    if (!data.control) return;
    $("token-form").classList.toggle("hidden", Boolean(state.token));
    text("token-state", state.token ? "token in use" : "enter the token to use these");
  }

  function render() {
    const data = state.data;
    if (!data) return;
    renderHeader(data);
    renderAge();
    renderCards(data);
    renderHosts(data);
    renderEta(data);
    renderDisk(data);
    renderFailures(data);
    renderKinds(data);
    renderResponses(data);
    renderPriorities(data);
    renderFacts(data);
    renderFoot(data);
    renderControl(data);
    drawCharts();
  }

  // ------------------------------------------------------------ polling
  function merge(points, full) {
    if (full) {
      state.history = points;
    } else {
      const last = state.history.length ? state.history[state.history.length - 1].t : -Infinity;
      for (const p of points) if (p.t > last) state.history.push(p);
    }
    const newest = state.history.length ? state.history[state.history.length - 1].t : 0;
    while (state.history.length && state.history[0].t < newest - state.keep) state.history.shift();
    derive(state.history);
  }

  // The series drawn from two successive points: bytes received a second, the average fetch time between
  // them; and the bytes on disk (the job directory's, else the journal's).
  function derive(points) {
    for (let i = 0; i < points.length; i += 1) {
      const p = points[i];
      p.disk = typeof p.disk_bytes === "number" ? p.disk_bytes : p.journal_bytes;
      const q = i ? points[i - 1] : null;
      const dt = q ? p.t - q.t : 0;
      p.bytes_rate = q && dt > 0 && typeof p.received_bytes === "number" && typeof q.received_bytes === "number" &&
        p.received_bytes >= q.received_bytes ? (p.received_bytes - q.received_bytes) / dt : null;
      const fetched = q && typeof p.fetch_seconds_count === "number" && typeof q.fetch_seconds_count === "number"
        ? p.fetch_seconds_count - q.fetch_seconds_count : 0;
      p.latency = fetched > 0 && p.fetch_seconds_sum >= q.fetch_seconds_sum
        ? (p.fetch_seconds_sum - q.fetch_seconds_sum) / fetched : null;
    }
  }

  // The last lines of the crawl's log (serve --log), read again with each poll; text only, never markup.
  async function loadLog() {
    const box = $("log-tail");
    try {
      const response = await fetch("/api/log", { cache: "no-store" });
      const answer = await response.json();
      if (!response.ok) throw new Error(answer.error || `HTTP ${response.status}`);
      const atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
      const shown = answer.lines.join("\n");
      if (box.textContent !== shown) box.textContent = shown;
      if (atEnd) box.scrollTop = box.scrollHeight;
      text("log-summary", `${answer.path} · last ${count(answer.lines.length)} lines of ${size(answer.size)}`);
      box.dataset.lines = String(answer.lines.length);
    } catch (error) {
      text("log-summary", error.message);
    }
  }

  async function loadAllHosts() {
    try {
      const response = await fetch("/api/hosts", { cache: "no-store" });
      const answer = await response.json();
      if (!response.ok) throw new Error(answer.error || `HTTP ${response.status}`);
      state.allHosts = { total: answer.total, hosts: answer.hosts, at: Date.now() };
    } catch (error) {
      toast(`Could not read every host (${error.message}).`, true);
    }
    if (state.data) renderHosts(state.data);
  }

  async function poll(refresh) {
    const full = !state.history.length || Date.now() - state.lastFull > 60000;
    const params = new URLSearchParams();
    if (!full) params.set("since", String(state.history[state.history.length - 1].t));
    if (refresh) params.set("refresh", "1");
    try {
      const response = await fetch(`/api/stats?${params}`, { cache: "no-store" });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const data = await response.json();
      state.data = data;
      state.receivedAt = Date.now();
      state.keep = data.keep || state.keep;
      state.interval = data.interval || state.interval;
      if (full) state.lastFull = Date.now();
      merge(data.history || [], full);
      $("log-panel").classList.toggle("hidden", !data.log);
      if (data.log) loadLog();
      if (state.allHosts && Date.now() - state.allHosts.at > Math.max(10000, 5 * state.interval * 1000)) loadAllHosts();
      render();
    } catch (error) {
      const banner = $("error");
      banner.classList.remove("hidden");
      banner.textContent = `The server does not answer (${error.message}); trying again.`;
    }
  }

  function loop() {
    poll(false).finally(() => setTimeout(loop, Math.max(500, state.interval * 1000)));
  }

  // ------------------------------------------------------------ control
  function toast(message, bad) {
    const node = $("toast");
    node.textContent = message;
    node.classList.toggle("bad", Boolean(bad));
    node.classList.remove("hidden");
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => node.classList.add("hidden"), 5000);
  }

  async function control(verb, args) {
    if (!state.token) {
      toast("Enter the control token first.", true);
      return;
    }
    try {
      const response = await fetch(`/api/${verb}`, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Diskfrontier-Token": state.token },
        body: JSON.stringify(args || {}),
      });
      const answer = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
      if (!response.ok) {
        if (response.status === 403) {
          state.token = null;
          sessionStorage.removeItem(TOKEN_KEY);
          if (state.data) renderControl(state.data);
        }
        toast(answer.error || `HTTP ${response.status}`, true);
        return;
      }
      if (verb === "push") toast(`Queued ${count(answer.queued)}, ${count(answer.duplicates)} seen before.`);
      else if (verb === "host") toast(`${args.host}: ${args.action} done.`);
      else toast(`${verb} done.`);
      await poll(true);
    } catch (error) {
      toast(`The server does not answer (${error.message}).`, true);
    }
  }

  function setup() {
    const match = /(?:^#|&)token=([^&]+)/.exec(window.location.hash);
    if (match) {
      sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
      history.replaceState(null, "", window.location.pathname + window.location.search);
    }
    state.token = sessionStorage.getItem(TOKEN_KEY);
    $("pause").addEventListener("click", () => control("pause"));
    $("hosts-all").addEventListener("click", () => {
      if (state.allHosts) {
        state.allHosts = null;
        renderHosts(state.data);
      } else {
        loadAllHosts();
      }
    });
    $("resume").addEventListener("click", () => control("resume"));
    $("token-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const value = $("token-input").value.trim();
      if (!value) return;
      state.token = value;
      sessionStorage.setItem(TOKEN_KEY, value);
      $("token-input").value = "";
      if (state.data) renderControl(state.data);
    });
    $("push-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const urls = $("push-urls").value;
      control("push", { urls, priority: $("push-priority").value || "0" }).then(() => {
        $("push-urls").value = "";
      });
    });
    let resizing = null;
    window.addEventListener("resize", () => {
      clearTimeout(resizing);
      resizing = setTimeout(drawCharts, 120);
    });
    setInterval(renderAge, 1000);
    loop();
  }

  document.addEventListener("DOMContentLoaded", setup);
})();
