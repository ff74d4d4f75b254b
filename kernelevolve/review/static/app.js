// KernelEvolve review pages: one script for the static report (data in data/*.js files, loaded
// with <script> tags so the pages open from disk) and the live server (data from /api, reviews
// and exports posted back). No library, no network: everything is drawn as SVG from the data.
(function () {
  "use strict";
  var CFG = window.KE_CONFIG || {};
  var LIVE = CFG.mode === "live";
  // The server never writes its token into a page: it comes in the URL it printed, once.
  var params = new URLSearchParams(location.search);
  if (params.get("token")) sessionStorage.setItem("ke-token", params.get("token"));
  CFG.token = params.get("token") || sessionStorage.getItem("ke-token") || "";
  var state = { run: null, nodes: {}, byId: {}, view: null, pending: {} };
  var FAILURE_COLOURS = {
    no_code: "#6b6b6b", syntax: "#8c564b", "import": "#e377c2", compile: "#d62728", runtime: "#ff7f0e",
    timeout: "#bcbd22", crash: "#7f0000", incorrect: "#c44e52", not_a_kernel: "#9467bd",
    mutates_input: "#17becf", inconsistent: "#1f77b4", timing: "#393b79", tampering: "#000000",
    reference: "#aaaaaa"
  };
  var view = document.getElementById("view");

  // -- small helpers ------------------------------------------------------------------------
  function esc(s) {
    return String(s == null ? "" : s).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }
  function num(v, digits) { return v == null ? "–" : Number(v).toPrecision(digits || 4); }
  function x(v) { return v == null ? "–" : Number(v).toFixed(3) + "x"; }
  function when(t) { return t ? new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "–"; }
  function el(html) { view.innerHTML = html; }

  // -- data: files in the static report, /api on the server -----------------------------------
  window.KE = {
    receive: function (key, data) {
      var cb = state.pending[key];
      delete state.pending[key];
      if (cb) cb(data);
    }
  };
  function loadScript(key, path, cb) {
    state.pending[key] = cb;
    var s = document.createElement("script");
    s.src = path;
    s.onerror = function () { delete state.pending[key]; el('<p class="error">cannot read ' + esc(path) + "</p>"); };
    document.body.appendChild(s);
    s.onload = function () { s.remove(); };
  }
  function api(path, cb, onError) {
    fetch(path, { cache: "no-store" }).then(function (r) {
      return r.json().then(function (body) { if (!r.ok) throw new Error(body.error || r.statusText); return body; });
    }).then(cb).catch(function (e) { (onError || showError)(e.message); });
  }
  function showError(msg) { el('<p class="error">' + esc(msg) + "</p>"); }
  function loadRun(cb) {
    if (LIVE) api("/api/runs/" + encodeURIComponent(CFG.run), cb);
    else loadScript("run", "data/run.js", cb);
  }
  var NODES_PER_FILE = 50;  // report.py writes node details in files of 50
  function loadNode(id, cb) {
    if (state.nodes[id] && !LIVE) return cb(state.nodes[id]);
    if (LIVE) return api("/api/runs/" + encodeURIComponent(CFG.run) + "/nodes/" + id, function (d) { state.nodes[id] = d; cb(d); });
    var k = Math.floor(id / NODES_PER_FILE);
    loadScript("nodes/" + k, "data/nodes/" + k + ".js", function (chunk) {
      Object.keys(chunk).forEach(function (key) { state.nodes[key] = chunk[key]; });
      cb(state.nodes[id]);
    });
  }

  // -- colours ------------------------------------------------------------------------------
  function maxFitness() {
    var m = 1;
    state.run.nodes.forEach(function (n) { if (n.fitness != null && n.fitness > m) m = n.fitness; });
    return m;
  }
  function colour(n, top) {
    if (n.state === "pending") return "#c8c8c8";
    if (!n.correct) return FAILURE_COLOURS[n.failure] || "#d62728";
    if (n.held) return "#b07aa1";
    if (n.fitness == null) return "#2e9e5b";  // correct, untimed (interpreter)
    if (n.fitness < 1) return "hsl(35, 90%, " + (45 + 30 * (1 - Math.max(n.fitness, 0))) + "%)";
    var t = top > 1 ? (n.fitness - 1) / (top - 1) : 1;
    return "hsl(" + (100 + 40 * t) + ", 60%, " + (55 - 25 * t) + "%)";
  }

  // -- header and tabs ----------------------------------------------------------------------
  function header() {
    var r = state.run;
    document.getElementById("run-title").innerHTML = r
      ? "run <b>" + esc(r.id) + "</b> · " + esc(r.spec) + " · " + esc(r.policy) + " on " + esc(r.device) +
        " · " + esc(r.status) + (r.termination_reason ? " (" + esc(r.termination_reason) + ")" : "")
      : "";
    var tabs = [];
    if (LIVE) tabs.push('<a href="/">all runs</a>');
    if (r) {
      tabs.push('<a id="tab-overview" href="#overview">Overview</a>');
      tabs.push('<a id="tab-tree" href="#tree">Tree (' + r.nodes.length + ")</a>");
      tabs.push('<a id="tab-calls" href="#calls">Model calls (' + r.llm_calls + ")</a>");
    }
    document.getElementById("tabs").innerHTML = tabs.join("");
    var cur = document.getElementById("tab-" + (state.view || "").split("/")[0]);
    if (cur) cur.className = "current";
  }

  // -- the runs list (server only) ------------------------------------------------------------
  function showRuns() {
    api("/api/runs", function (runs) {
      document.getElementById("run-title").textContent = runs.length + " runs in " + (CFG.db || "the database");
      var rows = runs.map(function (r) {
        return "<tr><td><a href=\"/runs/" + encodeURIComponent(r.id) + '#overview">' + esc(r.id) + "</a></td><td>" +
          esc(r.spec) + "</td><td>" + esc(r.policy) + "</td><td>" + esc(r.device) + "</td><td>" + esc(r.model) +
          "</td><td>" + esc(r.status) + (r.termination_reason ? " (" + esc(r.termination_reason) + ")" : "") +
          "</td><td class=num>" + r.nodes + "</td><td class=num>" + (r.correct || 0) + "</td><td>" + when(r.created_at) + "</td></tr>";
      });
      el('<h2>Runs</h2><table id="runs"><tr><th>run</th><th>spec</th><th>policy</th><th>device</th><th>model</th>' +
         "<th>status</th><th>nodes</th><th>correct</th><th>started</th></tr>" + rows.join("") + "</table>");
    });
  }

  // -- overview: settings, fitness over evaluations, best nodes per shape ----------------------
  function showOverview() {
    var r = state.run;
    var counts = { correct: 0, failed: 0, pending: 0 };
    var failures = {};
    r.nodes.forEach(function (n) {
      if (n.state === "pending") counts.pending++;
      else if (n.correct) counts.correct++;
      else { counts.failed++; failures[n.failure] = (failures[n.failure] || 0) + 1; }
    });
    var failText = Object.keys(failures).map(function (k) { return esc(k) + " " + failures[k]; }).join(", ") || "none";
    var facts = [
      ["spec", esc(r.spec) + ' <span class="muted">' + esc(r.spec_path) + "</span>"],
      ["status", esc(r.status) + (r.termination_reason ? " — terminated by <b>" + esc(r.termination_reason) + "</b>" : "")],
      ["policy / device / model", esc(r.policy) + " / " + esc(r.device) + " / " + esc(r.model)],
      ["nodes", r.nodes.length + " (" + counts.correct + " correct, " + counts.failed + " failed, " + counts.pending + " pending)"],
      ["failures", failText],
      ["search time", Number(r.elapsed_s).toFixed(1) + " s"],
      ["model calls / tokens / cost", r.llm_calls + " / " + r.tokens + " / $" + Number(r.cost_usd).toFixed(4)],
      ["started / updated", when(r.created_at) + " / " + when(r.updated_at)]
    ];
    var html = '<section id="overview"><h2>Run</h2><table class="facts">' + facts.map(function (f) {
      return "<tr><th>" + f[0] + "</th><td>" + f[1] + "</td></tr>";
    }).join("") + "</table>";
    html += "<h2>Fitness over evaluations</h2>" + fitnessChart(r);
    html += "<h2>Best nodes</h2>" + bestTables(r);
    html += '<h2>Settings</h2><pre class="settings">' + esc(JSON.stringify(r.settings, null, 2)) + "</pre></section>";
    el(html);
  }

  function fitnessChart(r) {
    var evald = r.nodes.filter(function (n) { return n.state !== "pending"; });
    if (!evald.length) return '<p class="muted">nothing evaluated yet</p>';
    if (!r.timed) {
      return '<p class="muted" id="untimed">This run is untimed (device ' + esc(r.device) +
        "): correctness only, so there is no speedup to plot. Outcome per evaluation:</p>" + outcomeStrip(evald);
    }
    var W = 900, H = 280, L = 50, B = 30, T = 10, R = 10;
    var maxId = evald[evald.length - 1].id || 1, top = Math.max(1.2, maxFitness() * 1.05);
    var sx = function (i) { return L + (W - L - R) * i / Math.max(maxId, 1); };
    var sy = function (f) { return T + (H - T - B) * (1 - f / top); };
    var parts = [], best = 0, path = [];
    for (var g = 0; g <= 4; g++) {
      var v = top * g / 4;
      parts.push('<line class="grid" x1="' + L + '" x2="' + (W - R) + '" y1="' + sy(v) + '" y2="' + sy(v) + '"/>' +
        '<text class="axis" x="' + (L - 6) + '" y="' + (sy(v) + 4) + '" text-anchor="end">' + v.toFixed(2) + "</text>");
    }
    evald.forEach(function (n) {
      var f = n.correct ? (n.fitness == null ? 0 : n.fitness) : 0;
      if (n.correct && !n.held && n.fitness != null && n.fitness > best) best = n.fitness;
      path.push((path.length ? "L" : "M") + sx(n.id).toFixed(1) + "," + sy(best).toFixed(1));
      parts.push('<circle class="pt" data-id="' + n.id + '" cx="' + sx(n.id).toFixed(1) + '" cy="' + sy(f).toFixed(1) +
        '" r="3" fill="' + colour(n, top) + '"><title>#' + n.id + " " + esc(n.text) + "</title></circle>");
    });
    parts.push('<path class="best" d="' + path.join("") + '"/>');
    parts.push('<line class="baseline" x1="' + L + '" x2="' + (W - R) + '" y1="' + sy(1) + '" y2="' + sy(1) + '"/>' +
      '<text class="axis" x="' + (W - R - 4) + '" y="' + (sy(1) - 5) + '" text-anchor="end">baseline 1.0x</text>');
    parts.push('<text class="axis" x="' + ((L + W) / 2) + '" y="' + (H - 5) + '" text-anchor="middle">evaluation (node id)</text>');
    return '<svg id="fitness-chart" class="chart" viewBox="0 0 ' + W + " " + H + '">' + parts.join("") + "</svg>" +
      '<p class="legend"><span class="swatch line"></span> best so far · dots: each evaluation (failed at 0) · dashed: the baseline</p>';
  }

  function outcomeStrip(evald) {
    var W = 900, cell = Math.max(2, Math.min(14, Math.floor(W / evald.length)));
    var parts = evald.map(function (n, i) {
      return '<rect class="pt" data-id="' + n.id + '" x="' + (i * cell) + '" y="0" width="' + (cell - 1) + '" height="20" fill="' +
        colour(n, 1) + '"><title>#' + n.id + " " + esc(n.text) + "</title></rect>";
    });
    return '<svg class="chart strip" viewBox="0 0 ' + Math.max(W, evald.length * cell) + ' 22">' + parts.join("") + "</svg>";
  }

  function bestTables(r) {
    if (!r.best.length) return '<p class="muted">no correct node yet</p>';
    var html = '<table id="best"><tr><th>node</th><th>kind</th><th>result</th><th>change</th></tr>' +
      r.best.map(function (b) {
        return '<tr><td><a href="#node/' + b.id + '">#' + b.id + "</a></td><td>" + esc(b.kind) + "</td><td>" + esc(b.text) +
          "</td><td>" + esc(b.note) + "</td></tr>";
      }).join("") + "</table>";
    var labels = r.best[0].shapes.map(function (s) { return s.label; });
    html += '<h3>Per shape</h3><table id="per-shape"><tr><th>node</th><th>shape</th><th>latency ms</th><th>baseline ms</th>' +
      "<th>speedup</th><th>GB/s</th><th>max abs err</th></tr>";
    r.best.forEach(function (b) {
      b.shapes.forEach(function (s) {
        html += '<tr><td><a href="#node/' + b.id + '">#' + b.id + "</a></td><td>" + esc(s.label) + "</td><td class=num>" +
          num(s.latency_ms) + "</td><td class=num>" + num(s.baseline_ms) + "</td><td class=num>" + x(s.speedup) +
          "</td><td class=num>" + num(s.gbps) + "</td><td class=num>" + num(s.max_abs_err, 3) + "</td></tr>";
      });
    });
    html += "</table>";
    if (!r.timed) return html;
    // Grouped bars: one group per shape, one bar per best node; the baseline at 1.0x.
    var W = 900, H = 240, L = 50, B = 60, T = 10, top = 1.2;
    r.best.forEach(function (b) { b.shapes.forEach(function (s) { if (s.speedup > top) top = s.speedup * 1.05; }); });
    var gw = (W - L) / labels.length, bw = Math.max(3, (gw - 10) / r.best.length);
    var sy = function (v) { return T + (H - T - B) * (1 - v / top); };
    var parts = [];
    labels.forEach(function (label, gi) {
      r.best.forEach(function (b, bi) {
        var s = b.shapes[gi];
        if (!s || s.speedup == null) return;
        var x0 = L + gi * gw + 5 + bi * bw;
        parts.push('<rect class="bar bar' + bi + '" x="' + x0.toFixed(1) + '" y="' + sy(s.speedup).toFixed(1) + '" width="' +
          (bw - 1).toFixed(1) + '" height="' + (sy(0) - sy(s.speedup)).toFixed(1) + '"><title>#' + b.id + " " + esc(label) +
          ": " + x(s.speedup) + "</title></rect>");
      });
      parts.push('<text class="axis" x="' + (L + gi * gw + gw / 2) + '" y="' + (H - B + 16) + '" text-anchor="middle">' +
        esc(label) + "</text>");
    });
    parts.push('<line class="baseline" x1="' + L + '" x2="' + W + '" y1="' + sy(1) + '" y2="' + sy(1) + '"/>');
    for (var g = 0; g <= 4; g++) {
      parts.push('<text class="axis" x="' + (L - 6) + '" y="' + (sy(top * g / 4) + 4) + '" text-anchor="end">' +
        (top * g / 4).toFixed(2) + "</text>");
    }
    var legend = r.best.map(function (b, bi) { return '<span class="swatch bar' + bi + '"></span> #' + b.id; }).join(" ");
    return html + '<svg id="shape-bars" class="chart" viewBox="0 0 ' + W + " " + H + '">' + parts.join("") + "</svg>" +
      '<p class="legend">speedup per shape · ' + legend + " · dashed: the baseline</p>";
  }

  // -- the search tree ------------------------------------------------------------------------
  function showTree() {
    var t0 = performance.now();
    var r = state.run, top = maxFitness();
    var DX = 16, DY = 46, PAD = 20, cols = 1, rows = 1;
    r.nodes.forEach(function (n) { cols = Math.max(cols, n.x + 1); rows = Math.max(rows, n.depth + 1); });
    var W = cols * DX + 2 * PAD, H = rows * DY + 2 * PAD;
    var px = function (n) { return (PAD + n.x * DX + DX / 2).toFixed(1); };
    var py = function (n) { return (PAD + n.depth * DY + DY / 2).toFixed(1); };
    var edges = [], dots = [];
    r.nodes.forEach(function (n) {
      n.parents.forEach(function (p, i) {
        var q = state.byId[p];
        if (q) edges.push('<line class="edge' + (i ? " second" : "") + '" x1="' + px(q) + '" y1="' + py(q) + '" x2="' + px(n) + '" y2="' + py(n) + '"/>');
      });
      var ring = n.verdict === "approve" ? " approved" : n.verdict === "reject" ? " rejected" : n.held ? " held" : "";
      dots.push('<circle class="node' + ring + '" data-id="' + n.id + '" cx="' + px(n) + '" cy="' + py(n) + '" r="6" fill="' +
        colour(n, top) + '"><title>#' + n.id + " " + esc(n.kind) + ": " + esc(n.text) + (n.note ? " | " + esc(n.note) : "") +
        "</title></circle>");
    });
    var legend = ['<span class="swatch" style="background:#2e9e5b"></span> correct (untimed)',
      '<span class="swatch" style="background:hsl(140,60%,30%)"></span> fastest',
      '<span class="swatch" style="background:hsl(35,90%,55%)"></span> slower than baseline',
      '<span class="swatch" style="background:#c8c8c8"></span> pending',
      '<span class="swatch" style="background:#b07aa1"></span> held for review'];
    var seen = {};
    r.nodes.forEach(function (n) { if (n.failure && !seen[n.failure]) seen[n.failure] = 1; });
    Object.keys(seen).forEach(function (f) {
      legend.push('<span class="swatch" style="background:' + (FAILURE_COLOURS[f] || "#d62728") + '"></span> ' + esc(f));
    });
    el('<section id="tree-view"><p><b id="tree-count">' + r.nodes.length + "</b> nodes · click a node to open it · " +
       '<button id="zoom-in">+</button> <button id="zoom-out">−</button> <button id="zoom-fit">fit</button></p>' +
       '<p class="legend">' + legend.join(" · ") + ' · ring: approved (green) / rejected (red)</p>' +
       '<div id="tree-box"><svg id="tree" width="' + W + '" height="' + H + '" viewBox="0 0 ' + W + " " + H + '">' +
       edges.join("") + dots.join("") + "</svg></div></section>");
    var svg = document.getElementById("tree"), scale = 1;
    function zoom(s) { scale = s; svg.setAttribute("width", W * s); svg.setAttribute("height", H * s); }
    document.getElementById("zoom-in").onclick = function () { zoom(scale * 1.5); };
    document.getElementById("zoom-out").onclick = function () { zoom(scale / 1.5); };
    document.getElementById("zoom-fit").onclick = function () {
      zoom(Math.min(1, document.getElementById("tree-box").clientWidth / W));
    };
    if (W > document.getElementById("tree-box").clientWidth) zoom(Math.max(0.25, document.getElementById("tree-box").clientWidth / W));
    svg.addEventListener("click", function (e) {
      var id = e.target.getAttribute && e.target.getAttribute("data-id");
      if (id != null) location.hash = "#node/" + id;
    });
    window.KE.treeRenderMs = performance.now() - t0;
  }

  // -- one node -------------------------------------------------------------------------------
  function diffHtml(text) {
    if (!text) return '<p class="muted">identical sources</p>';
    return '<pre class="diff">' + text.split("\n").map(function (line) {
      var c = line.startsWith("+++") || line.startsWith("---") ? "file" : line[0] === "+" ? "add" : line[0] === "-" ? "del" :
        line[0] === "@" ? "hunk" : "";
      return '<span class="' + c + '">' + esc(line) + "</span>";
    }).join("\n") + "</pre>";
  }

  function showNode(id) {
    loadNode(id, function (d) {
      if (state.view !== "node/" + id) return;  // the reader moved on meanwhile
      var sum = state.byId[id] || {};
      var links = function (ids) {
        return ids.length ? ids.map(function (p) { return '<a href="#node/' + p + '">#' + p + "</a>"; }).join(" ") : "none";
      };
      var children = state.run.nodes.filter(function (n) { return n.parents.indexOf(d.id) >= 0; }).map(function (n) { return n.id; });
      var html = '<section id="node" data-id="' + d.id + '"><h2>Node #' + d.id + " · " + esc(d.kind) + " · " +
        '<span id="node-result">' + esc(sum.text || d.state) + "</span></h2>";
      html += '<table class="facts"><tr><th>change</th><td>' + esc(d.note) + "</td></tr>" +
        "<tr><th>parents</th><td>" + links(d.parents) + "</td></tr><tr><th>children</th><td>" + links(children) + "</td></tr>" +
        "<tr><th>tokens / cost</th><td>" + d.tokens + " / $" + Number(d.cost_usd).toFixed(4) + "</td></tr>";
      if (d.message) html += '<tr><th>message</th><td class="error">' + esc(d.message) + "</td></tr>";
      Object.keys(d.marks || {}).forEach(function (m) {
        html += "<tr><th>" + esc(m) + '</th><td class="warn">' + esc(d.marks[m]) + " (held for review)</td></tr>";
      });
      if (d.recheck) html += "<tr><th>re-evaluation</th><td>" + esc(JSON.stringify(d.recheck)) + "</td></tr>";
      html += "</table>";
      html += reviewHtml(d);
      if (d.shapes.length) {
        html += '<h3>Per shape</h3><table id="node-shapes"><tr><th>shape</th><th>outcome</th><th>max abs err</th>' +
          "<th>latency ms</th><th>baseline ms</th><th>speedup</th><th>message</th></tr>" + d.shapes.map(function (s) {
            var outcome = s.correct == null ? "not checked" : s.correct ? "correct" : "failed (" + esc(s.failure || "incorrect") + ")";
            return "<tr><td>" + esc(s.label) + "</td><td>" + outcome + "</td><td class=num>" + num(s.max_abs_err, 3) +
              "</td><td class=num>" + num(s.latency_ms) + "</td><td class=num>" + num(s.baseline_ms) + "</td><td class=num>" +
              x(s.speedup) + "</td><td>" + esc(s.message) + "</td></tr>";
          }).join("") + "</table>";
      }
      d.diffs.forEach(function (df) {
        html += '<h3 class="diff-title">Diff against parent <a href="#node/' + df.parent + '">#' + df.parent + "</a></h3>" + diffHtml(df.diff);
      });
      html += "<h3>Source</h3>" + (d.source == null ? '<p class="muted">the model\'s reply held no kernel</p>'
        : '<pre class="source">' + esc(d.source) + "</pre>");
      if (d.log_tail) html += '<h3>Log (last lines)</h3><pre class="log">' + esc(d.log_tail) + "</pre>";
      html += "<h3>Model calls (" + d.calls.length + ")</h3>";
      if (!d.calls.length) html += '<p class="muted">no model call recorded for this node (offline operator, or a draft from the knowledge base)</p>';
      d.calls.forEach(function (c, i) { html += callHtml(c, "call " + (i + 1)); });
      if (d.profile) {
        html += '<h3>Profile</h3><pre id="profile">' + esc(d.profile.text) + "</pre><details><summary>raw profile summaries (" +
          Number(d.profile.seconds).toFixed(1) + " s of profiling)</summary><pre>" + esc(JSON.stringify(d.profile.summaries, null, 2)) +
          "</pre></details>";
      }
      html += "<details><summary>Versions, scheduling, diagnostics and phases</summary><pre>" + esc(JSON.stringify({ versions: d.versions, scheduling: d.scheduling, diagnostics: d.diagnostics, phases_s: d.phases_s }, null, 2)) +
        "</pre></details></section>";
      el(html);
      wireReview(d);
      window.KE.nodeShownAt = performance.now();
    });
  }

  function callHtml(c, title) {
    return '<details class="call"><summary>' + title + ": " + esc(c.provider) + ":" + esc(c.model) + " · " +
      c.input_tokens + " in / " + c.output_tokens + " out tokens · $" + Number(c.cost_usd).toFixed(4) + " · " +
      Number(c.latency_s).toFixed(1) + " s" + (c.cached ? " · cached" : "") + (c.error ? ' · <span class="error">' + esc(c.error) + "</span>" : "") +
      "</summary><h4>Prompt</h4><pre>" + esc(c.prompt) + "</pre><h4>Reply</h4><pre>" + esc(c.reply) + "</pre></details>";
  }

  // -- every model call of the run: the audit trail ----------------------------------------------
  function showCalls() {
    var done = function (calls) {
      if (state.view !== "calls") return;
      var tokens = 0, cost = 0;
      calls.forEach(function (c) { tokens += c.input_tokens + c.output_tokens; cost += c.cost_usd; });
      el('<section id="calls"><h2>Model calls</h2><p>' + calls.length + " calls · " + tokens + " tokens · $" + cost.toFixed(4) +
        " · each names the node it produced (none: a run-level call, such as an insight)</p>" +
        (calls.length ? calls.map(function (c) {
          var where = c.node_id == null ? "run" : '<a href="#node/' + c.node_id + '">node #' + c.node_id + "</a>";
          return '<div class="call-row">' + where + callHtml(c, "call " + c.id) + "</div>";
        }).join("") : '<p class="muted">no model call recorded (the offline operator makes none)</p>') + "</section>");
    };
    if (LIVE) api("/api/runs/" + encodeURIComponent(CFG.run) + "/calls", done);
    else loadScript("calls", "data/calls.js", done);
  }

  function reviewHtml(d) {
    var past = d.reviews.length ? '<ul id="reviews">' + d.reviews.map(function (r) {
      return "<li><b>" + esc(r.verdict) + "</b> by " + esc(r.reviewer) + " · " + when(r.created_at) + (r.notes ? ": " + esc(r.notes) : "") + "</li>";
    }).join("") + "</ul>" : '<p class="muted" id="reviews">not reviewed</p>';
    var html = "<h3>Review</h3>" + past;
    if (!LIVE) return html + '<p class="muted">review with <code>kernelevolve review ' + esc(d.run_id) + " " + d.id +
      ' --approve</code>, or open this run in <code>kernelevolve serve</code></p>';
    if (d.source == null || d.correct == null) return html + '<p class="muted">nothing evaluated to review</p>';
    html += '<form id="review-form"><input id="review-note" placeholder="note: what you checked" size="60"> ' +
      '<input id="review-reviewer" placeholder="reviewer (default: the server\'s user)" size="24"> ' +
      (d.correct ? '<button type="button" id="approve">Approve</button> ' : "") +
      '<button type="button" id="reject">Reject</button> <span id="review-status"></span></form>';
    if (d.correct) {
      html += '<form id="export-form">export as a PyTorch op: <input id="export-name" value="kernelevolve::' +
        esc((state.run.spec || "kernel").replace(/[^A-Za-z0-9_]/g, "_")) + "_" + d.id + '" size="40"> ' +
        '<label><input type="checkbox" id="export-unreviewed"> even if not approved</label> ' +
        '<button type="button" id="export">Export</button> <span id="export-status"></span></form>';
    }
    return html;
  }

  function post(path, body) {
    return fetch(path, {
      method: "POST", headers: { "Content-Type": "application/json", "X-KernelEvolve-Token": CFG.token || "" },
      body: JSON.stringify(body)
    });
  }

  function wireReview(d) {
    if (!LIVE) return;
    var base = "/api/runs/" + encodeURIComponent(CFG.run) + "/nodes/" + d.id;
    ["approve", "reject"].forEach(function (verdict) {
      var b = document.getElementById(verdict);
      if (!b) return;
      b.onclick = function () {
        var status = document.getElementById("review-status");
        status.textContent = "saving…";
        post(base + "/review", { verdict: verdict, note: document.getElementById("review-note").value,
          reviewer: document.getElementById("review-reviewer").value || null }).then(function (r) {
          return r.json().then(function (body) {
            if (!r.ok) throw new Error(body.error || r.statusText);
            delete state.nodes[d.id];
            refresh(function () { route(); });
          });
        }).catch(function (e) { status.textContent = "refused: " + e.message; status.className = "error"; });
      };
    });
    var ex = document.getElementById("export");
    if (ex) ex.onclick = function () {
      var status = document.getElementById("export-status");
      status.textContent = "exporting…";
      post(base + "/export", { as_op: document.getElementById("export-name").value,
        unreviewed: document.getElementById("export-unreviewed").checked }).then(function (r) {
        if (!r.ok) return r.json().then(function (body) { throw new Error(body.error || r.statusText); });
        return r.blob().then(function (blob) {
          var a = document.createElement("a");
          a.href = URL.createObjectURL(blob);
          a.download = (r.headers.get("Content-Disposition") || "").split("filename=")[1] || "export.zip";
          document.body.appendChild(a); a.click(); a.remove();
          status.textContent = "downloaded " + a.download;
        });
      }).catch(function (e) { status.textContent = "refused: " + e.message; status.className = "error"; });
    };
  }

  // -- routing and live refresh ---------------------------------------------------------------
  function route() {
    var h = location.hash.replace(/^#/, "") || "overview";
    state.view = h;
    header();
    var m = /^node\/(\d+)$/.exec(h);
    if (m) showNode(parseInt(m[1], 10));
    else if (h === "tree") showTree();
    else if (h === "calls") showCalls();
    else { state.view = "overview"; header(); showOverview(); }
    window.scrollTo(0, 0);
  }
  function accept(run) {
    state.run = run;
    state.byId = {};
    run.nodes.forEach(function (n) { state.byId[n.id] = n; });
  }
  function refresh(cb) { loadRun(function (run) { accept(run); cb(); }); }

  // While a search runs its page follows it: a cheap stamp every few seconds, the whole summary
  // only when the stamp moved; the tree and curves redraw, and the open node when it changed.
  function follow(run) {
    var open = /^node\/(\d+)$/.exec(state.view || "");
    var old = open ? state.byId[parseInt(open[1], 10)] : null;
    accept(run);
    var now = open ? state.byId[parseInt(open[1], 10)] : null;
    var note = document.getElementById("review-note");
    if (state.view === "tree" || state.view === "overview") route();
    else if (open && now && (!old || old.text !== now.text || old.verdict !== now.verdict) && !(note && note.value)) {
      delete state.nodes[now.id];  // the open node was evaluated or reviewed meanwhile: show it anew
      route();
    } else header();
  }
  function poll() {
    api("/api/runs/" + encodeURIComponent(CFG.run) + "/stamp", function (stamp) {
      var r = state.run;
      document.getElementById("live-state").textContent = stamp.status === "running" ? "live: following the search" : "";
      if (stamp.updated_at !== r.updated_at || stamp.nodes !== r.nodes.length || stamp.review_count !== r.review_count ||
          stamp.status !== r.status) {
        api("/api/runs/" + encodeURIComponent(CFG.run), follow, function () {});
      }
    }, function () {});
  }

  if (LIVE && !CFG.run) { showRuns(); return; }
  refresh(function () {
    window.addEventListener("hashchange", route);
    route();
    window.KE.ready = true;
    if (LIVE) setInterval(poll, CFG.refresh_ms || 3000);
  });
})();
