// Rewind's web UI: sessions, the timeline of the one chosen, details and diffs, a previewed
// rewind with undo, and the status panel; kept current by the server's event stream. Every
// call goes to POST /rpc: the same operations and documents as `rewind serve`'s JSON-RPC.
"use strict";

(function () {
  const esc = (s) => window.RewindDiff.esc(s ?? "");
  const $ = (id) => document.getElementById(id);

  /** The first screen shows this many newest entries; the rest of the log follows. */
  const FIRST_PAGE = 300;

  /** When things were on screen (ms since the page started loading), for benchmarks. */
  const times = (window.__rewindTimes = {});
  const mark = (name) => requestAnimationFrame(() => setTimeout(() => (times[name] = performance.now())));

  const state = {
    overview: null,
    status: null,
    session: null,
    log: [],            // every session's entries (newest first), external edits included
    complete: false,    // whether `log` holds the whole history
    timeline: null,
  };

  // ---- the API ------------------------------------------------------------------------

  let nextId = 1;
  class RpcError extends Error {
    constructor(e) {
      super(e.message);
      this.data = e.data || {};
    }
  }

  async function post(body) {
    const r = await fetch("/rpc", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      credentials: "same-origin",
      body: JSON.stringify(body),
    });
    if (!r.ok) throw new Error(`${r.status} ${(await r.text()).trim()}`);
    return r.json();
  }

  /** Calls `method` for the chosen session; the result, or throws an RpcError. */
  async function rpc(method, params = {}) {
    const answer = await post({ jsonrpc: "2.0", id: nextId++, method, params: { session: state.session, ...params } });
    if (answer.error) throw new RpcError(answer.error);
    return answer.result;
  }

  /** Several calls in one request; each result or `{error}`. */
  async function batch(calls) {
    if (!calls.length) return [];
    const first = nextId;
    const answers = await post(calls.map(([method, params], i) => ({
      jsonrpc: "2.0", id: first + i, method, params: { session: state.session, ...params },
    })));
    nextId += calls.length;
    const byId = new Map(answers.map((a) => [a.id, a]));
    return calls.map((_, i) => {
      const a = byId.get(first + i) || {};
      return a.error ? { error: a.error } : a.result;
    });
  }

  function toast(text) {
    const t = $("toast");
    t.textContent = text;
    t.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => (t.hidden = true), 4000);
  }

  const bytes = (n) => {
    if (n == null) return "—";
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return i ? `${n.toFixed(1)} ${u[i]}` : `${n} B`;
  };

  // ---- sessions and the timeline -------------------------------------------------------

  function sessionsList() {
    const names = new Map();
    for (const s of state.status?.sessions || []) names.set(s.session, 0);
    for (const e of state.log) if (e.session) names.set(e.session, (names.get(e.session) || 0) + 1);
    return [...names.keys()].sort();
  }

  function headOf(session) {
    return (state.status?.sessions || []).find((s) => s.session === session)?.head ?? null;
  }

  function drawSessions() {
    const ul = $("sessions");
    const names = sessionsList();
    const counts = new Map();
    for (const e of state.log) if (e.session) counts.set(e.session, (counts.get(e.session) || 0) + 1);
    ul.innerHTML = names.map((n) =>
      `<li class="${n === state.session ? "current" : ""}" data-session="${esc(n)}"><span class="name">${esc(n)}</span>` +
      `<span class="n">${counts.get(n) || 0}${state.complete ? "" : "+"}</span></li>`).join("") ||
      '<li class="muted">No sessions yet</li>';
  }

  function drawTimeline() {
    $("session-title").textContent = state.session ? `Session ${state.session}` : "Timeline";
    state.timeline.set(state.log, state.session, headOf(state.session), $("filter").value);
    const n = state.timeline.model.rows.length;
    $("counts").textContent = `${n.toLocaleString()} entr${n === 1 ? "y" : "ies"}${state.complete ? "" : " (loading older…)"}`;
  }

  function chooseSession(name) {
    state.session = name;
    const url = new URL(location.href);
    url.searchParams.set("session", name);
    history.replaceState(null, "", url);
    drawSessions();
    drawTimeline();
    $("detail").innerHTML = '<div class="empty muted">Select a checkpoint or an epoch to see its changes.</div>';
  }

  // Epochs and checkpoints; the log's setting changes (the sandbox mode) are the workspace's,
  // shown in the status panel.
  const isEntry = (e) => e.type !== "setting" && e.id;

  async function loadLog() {
    const first = await rpc("log", { all_sessions: true, limit: FIRST_PAGE });
    state.log = first.items.filter(isEntry);
    state.complete = !first.more;
    afterLog();
    mark("firstScreen");
    if (!state.complete) {
      // The first screen is up; the rest of the history follows without blocking it.
      setTimeout(async () => {
        const all = await rpc("log", { all_sessions: true, limit: 0 });
        const items = all.items.filter(isEntry);
        const known = new Set(items.map((e) => e.id));
        // Keep what events added meanwhile.
        state.log = state.log.filter((e) => !known.has(e.id)).concat(items);
        state.complete = true;
        afterLog();
        mark("complete");
      }, 0);
    }
  }

  function afterLog() {
    const names = sessionsList();
    if (!state.session || !names.includes(state.session)) {
      const wanted = new URL(location.href).searchParams.get("session");
      state.session = names.includes(wanted) ? wanted
        : names.includes(state.overview?.session) ? state.overview.session
        : names[0] || state.overview?.session || "default";
    }
    drawSessions();
    drawTimeline();
  }

  let pathsQueue = new Set(), pathsTimer = null;
  function needPaths(ids) {
    for (const id of ids) pathsQueue.add(id);
    clearTimeout(pathsTimer);
    pathsTimer = setTimeout(async () => {
      const ids = [...pathsQueue].filter((id) => !state.timeline.paths.has(id)).slice(0, 80);
      pathsQueue = new Set();
      if (!ids.length) return;
      for (const id of ids) state.timeline.paths.set(id, null); // asked once
      const shown = await batch(ids.map((id) => ["show", { id }]));
      shown.forEach((s, i) => state.timeline.paths.set(ids[i], s && !s.error ? s.changes.map((c) => c.path) : []));
      state.timeline.render();
    }, 60);
  }

  // ---- details and diffs ---------------------------------------------------------------

  function facts(pairs) {
    return '<dl class="facts">' + pairs.filter(([, v]) => v != null && v !== "")
      .map(([k, v]) => `<dt>${esc(k)}</dt><dd>${v}</dd>`).join("") + "</dl>";
  }
  const code = (s) => `<code>${esc(s)}</code>`;

  async function showDetail(e) {
    const pane = $("detail");
    const diffBox = document.createElement("div");
    diffBox.className = "diff";
    diffBox.innerHTML = '<p class="muted">Loading the diff…</p>';
    if (e.type === "checkpoint") {
      const head = headOf(state.session) === e.message;
      pane.innerHTML = `<div class="detail-head"><h1>Turn ${esc(e.message ?? e.id)}${head ? ' <span class="badge head">HEAD</span>' : ""}</h1>` +
        `<button class="primary" data-act="rewind" ${e.collected_ns ? "disabled" : ""}>Rewind to here…</button></div>` +
        facts([["checkpoint", code(e.id)], ["message", e.message && code(e.message)], ["after", e.parent && code(e.parent)],
          ["label", e.label && esc(e.label)], ["session", esc(e.session)], ["time", esc(e.time)],
          ["pinned", e.pinned ? "yes: gc keeps it" : null], ["collected", e.collected_ns ? "yes: it can no longer be restored" : null]]) +
        "<h3>What rewinding to here would undo</h3>";
      pane.querySelector('[data-act="rewind"]').addEventListener("click", () => openRewind(e));
    } else {
      pane.innerHTML = `<div class="detail-head"><h1>${e.kind === "external" ? "External edit" : esc(e.tool || e.kind)}</h1></div>` +
        facts([["epoch", code(e.id)], ["kind", esc(e.kind) + (e.kind === "external" ? " — changes found on disk that no session made" : "")],
          ["state", esc(e.state) + (e.recovered ? " (settled by recovery)" : "")], ["tool", e.tool && esc(e.tool)],
          ["tool call", e.tool_call && code(e.tool_call)], ["command", e.note && code(e.note)],
          ["session", e.session ? esc(e.session) : null], ["turn", e.message && code(e.message)],
          ["who", esc(e.kind === "external" ? "outside any session" : e.owner?.type === "process" ? `process ${e.owner.pid}` : `session ${e.session}`)],
          ["time", esc(e.time)], ["paths", `${e.changes}`]]) +
        "<h3>Its changes</h3>";
    }
    pane.appendChild(diffBox);
    pane.scrollTop = 0;
    try {
      const diff = await rpc("diff", { id: e.id });
      times.diffFetched = performance.now();
      if (state.timeline.selected !== e.id) return;
      window.RewindDiff.render(diffBox, diff, {
        empty: e.type === "checkpoint" ? "Nothing to undo: the session changed nothing since." : "It changed nothing.",
      });
      mark("diff");
    } catch (err) {
      diffBox.innerHTML = `<p class="error">${esc(err.message)}</p>`;
    }
  }

  // ---- rewind, with a preview ----------------------------------------------------------

  const MODES = [
    ["both", "Files and conversation", "Undo the session's changes since this turn and move the conversation back to it."],
    ["files", "Files only", "Undo the changes; the conversation stays where it is."],
    ["head", "Conversation only", "Move the conversation back to this turn; keep the files as they are."],
  ];
  const modeParams = (mode) => ({ files_only: mode === "files", head_only: mode === "head" });

  function dialog(html) {
    $("dialog-body").innerHTML = html;
    $("dialog").hidden = false;
    return $("dialog-body");
  }
  function closeDialog() { $("dialog").hidden = true; }

  function planTable(plan) {
    let h = "";
    if (plan.steps.length) {
      h += `<h3>${plan.steps.length} path${plan.steps.length === 1 ? "" : "s"} will be written</h3><table><tr><th>change</th><th>path</th></tr>` +
        plan.steps.map((s) => `<tr><td><span class="badge ${esc(s.action)}">${esc(s.action)}</span></td><td class="mono">${esc(s.path)}</td></tr>`).join("") + "</table>";
    }
    if (plan.conflicts.length) {
      h += `<h3>${plan.conflicts.length} conflict${plan.conflicts.length === 1 ? "" : "s"}: changed by someone else since</h3><table><tr><th>path</th><th>changed by</th><th></th></tr>` +
        plan.conflicts.map((c) => `<tr><td class="mono">${esc(c.path)}</td><td>${esc(c.changed_by)}</td><td class="muted">${esc(c.unmerged || "")}</td></tr>`).join("") + "</table>";
    }
    if (plan.skipped.length) {
      h += `<h3>Cannot be restored (left as they are)</h3><table><tr><th>path</th><th>why</th></tr>` +
        plan.skipped.map((s) => `<tr><td class="mono">${esc(s.path)}</td><td>${esc(s.reason)}</td></tr>`).join("") + "</table>";
    }
    if (plan.kept?.length) {
      h += `<h3>Directories kept</h3><table>` +
        plan.kept.map((s) => `<tr><td class="mono">${esc(s.path)}</td><td>${esc(s.reason)}</td></tr>`).join("") + "</table>";
    }
    if (plan.merged?.length) {
      h += `<h3>Merged (others' lines kept)</h3><table>` +
        plan.merged.map((m) => `<tr><td class="mono">${esc(m.path)}</td></tr>`).join("") + "</table>";
    }
    return h;
  }

  async function openRewind(cp, mode = "both") {
    const title = `Rewind session ${esc(cp.session)} to turn ${esc(cp.message ?? cp.id)}`;
    const head = headOf(cp.session);
    const body = dialog(`<h1 id="dialog-title">${title}</h1>` +
      `<div class="modes">${MODES.map(([m, name, what]) =>
        `<label><input type="radio" name="mode" value="${m}" ${m === mode ? "checked" : ""}><span><b>${name}</b><small>${what}</small></span></label>`).join("")}</div>` +
      '<div class="plan" id="plan"><p class="muted">Computing what would change (nothing is written)…</p></div>' +
      '<div class="dialog-actions" id="actions"><button data-act="cancel">Cancel</button></div>');
    body.querySelectorAll('input[name="mode"]').forEach((r) => r.addEventListener("change", () => openRewind(cp, r.value)));
    body.querySelector('[data-act="cancel"]').addEventListener("click", closeDialog);
    let plan;
    try {
      plan = await rpc("restore", { target: cp.id, dry_run: true, ...modeParams(mode) });
    } catch (err) {
      if (err.data?.kind !== "conflict" || !err.data?.data) {
        $("plan").innerHTML = `<p class="error">${esc(err.message)}</p>`;
        return;
      }
      plan = err.data.data;
    }
    const conflicts = plan.conflicts.length;
    const nothing = !plan.steps.length && !conflicts;
    let h = "";
    if (mode === "head") {
      h += `<div class="callout">The conversation head moves to <code>${esc(cp.message ?? cp.id)}</code>${head ? ` (now <code>${esc(head)}</code>)` : ""}. No file is written.</div>`;
    } else if (nothing) {
      h += '<div class="callout ok">No file changes: the session changed nothing since this turn (or it is all undone already).</div>';
    } else if (conflicts) {
      h += `<div class="callout danger"><b>Refused as it stands:</b> ${conflicts} file${conflicts === 1 ? " was" : "s were"} changed by someone else after this session wrote ${conflicts === 1 ? "it" : "them"}. Nothing will be written unless you choose to overwrite below.</div>`;
    }
    h += planTable(plan);
    $("plan").innerHTML = h;
    const actions = $("actions");
    const go = document.createElement("button");
    go.className = "primary";
    go.dataset.act = "confirm";
    go.textContent = mode === "head" ? "Move the conversation back" : "Rewind";
    go.disabled = conflicts > 0 || (nothing && mode === "files");
    go.addEventListener("click", () => applyRewind(cp, mode, false, head));
    actions.appendChild(go);
    if (conflicts) {
      const force = document.createElement("div");
      force.className = "force";
      force.innerHTML = `<label><input type="checkbox" id="force-ok"><span>Overwrite the other changes to ${conflicts === 1 ? "this file" : `these ${conflicts} files`}. ` +
        "What is overwritten is kept: Undo brings it back.</span></label>" +
        '<div class="dialog-actions"><button class="danger" data-act="force" disabled>Rewind and overwrite their changes</button></div>';
      $("plan").appendChild(force);
      const box = force.querySelector("#force-ok"), btn = force.querySelector('[data-act="force"]');
      box.addEventListener("change", () => (btn.disabled = !box.checked));
      btn.addEventListener("click", () => applyRewind(cp, mode, true, head));
    }
    go.focus();
  }

  async function applyRewind(cp, mode, force, headBefore) {
    $("actions").querySelectorAll("button").forEach((b) => (b.disabled = true));
    let result;
    try {
      result = await rpc("restore", { target: cp.id, force, ...modeParams(mode) });
    } catch (err) {
      $("plan").insertAdjacentHTML("afterbegin", `<p class="error">${esc(err.message)}</p>`);
      return;
    }
    if (result.refused) {
      toast("Files changed meanwhile: here is the plan as it stands now.");
      return openRewind(cp, mode);
    }
    const n = result.steps.length;
    const body = dialog(`<h1 id="dialog-title">Rewound</h1><div class="callout ok">` +
      (mode === "head" ? "The conversation head moved back." : `${n} path${n === 1 ? "" : "s"} written.`) +
      (result.head ? ` The session's head is now <code>${esc(result.head)}</code>.` : "") + "</div>" +
      (n ? planTable({ steps: result.steps, conflicts: [], skipped: result.skipped, kept: result.kept, merged: result.merged }) : "") +
      '<div class="dialog-actions"><button data-act="undo">Undo</button><button class="primary" data-act="close">Done</button></div>');
    body.querySelector('[data-act="close"]').addEventListener("click", closeDialog);
    const undo = body.querySelector('[data-act="undo"]');
    if (!result.epoch && !(mode === "head" && headBefore)) undo.disabled = true;
    undo.addEventListener("click", () => undoRewind(result, mode, headBefore));
    refreshSoon();
  }

  async function undoRewind(result, mode, headBefore) {
    let out;
    try {
      out = result.epoch
        ? await rpc("undo", { epoch: result.epoch })
        : await rpc("restore", { target: headBefore, head_only: true });
      if (out.refused) throw Object.assign(new Error("Refused: files changed since the rewind."), { data: { data: out } });
    } catch (err) {
      const c = err.data?.data?.conflicts;
      dialog(`<h1 id="dialog-title">Undo refused</h1><p class="error">${esc(err.message)}</p>` +
        (c ? planTable({ steps: [], conflicts: c, skipped: [] }) : "") +
        '<div class="dialog-actions"><button data-act="close">Close</button></div>')
        .querySelector('[data-act="close"]').addEventListener("click", closeDialog);
      return;
    }
    const n = out.steps.length;
    dialog(`<h1 id="dialog-title">Undone</h1><div class="callout ok">${mode === "head" ? "The conversation head is back." : `${n} path${n === 1 ? "" : "s"} put back as they were before the rewind.`}</div>` +
      '<div class="dialog-actions"><button class="primary" data-act="close">Done</button></div>')
      .querySelector('[data-act="close"]').addEventListener("click", closeDialog);
    refreshSoon();
  }

  // ---- status --------------------------------------------------------------------------

  async function loadStatus() {
    const [status, overview] = await Promise.all([rpc("status"), fetch("/overview.json").then((r) => r.json())]);
    state.status = status;
    state.overview = overview;
    $("workspace").textContent = status.root;
    drawStatus();
  }

  async function loadSandbox() {
    const [check, mode] = await batch([["sandbox.check", {}], ["sandbox.mode", {}]]);
    state.sandbox = check.error
      ? { ok: false, error: check.error.data?.message || check.error.message, mode: check.error.data?.data?.mode }
      : check;
    state.sandboxMode = mode.error ? null : mode;
    drawStatus();
  }

  /** The workspace's sandbox mode, offering the toggle; each change is asked for first. */
  function sandboxLine() {
    const m = state.sandboxMode;
    if (!m) return '<span class="muted">mode unknown</span>';
    const off = m.mode === "danger-full-access";
    const from = { setting: "set for this workspace", config: "from config.toml" }[m.source] || "the default";
    const sb = state.sandbox;
    const works = off ? "" : !sb ? ' · <span class="muted">checking…</span>'
      : sb.ok ? ` · <span class="good">works</span>${sb.network ? " · network on" : ""}`
      : ` · <span class="bad">unavailable</span> <span class="muted">${esc(sb.error?.message || sb.error || "")}</span>`;
    return `<span id="sandbox-mode" class="${off ? "bad" : ""}">${off ? "off (danger-full-access)" : esc(m.mode)}</span>${works}` +
      `<div class="muted">${m.tightened_by ? `${esc(m.workspace_mode)} is ${from}; ${esc(m.tightened_by)} tightens it` : from}</div>` +
      `<button class="small" data-act="sandbox-toggle">${m.toggle_loosens ? "Turn off…" : "Turn back on…"}</button>`;
  }

  function openSandboxToggle() {
    const m = state.sandboxMode;
    if (!m) return;
    const off = m.toggle_loosens;
    const body = dialog(`<h1 id="dialog-title">${off ? "Turn the sandbox off?" : "Turn the sandbox back on?"}</h1>` +
      `<p>Sandbox mode <code>${esc(m.workspace_mode)}</code> &rarr; <code>${esc(m.toggle_to)}</code></p>` +
      `<div class="callout ${off ? "danger" : ""}" id="sandbox-consequence">${esc(m.toggle_consequence.charAt(0).toUpperCase() + m.toggle_consequence.slice(1))}.</div>` +
      "<p>For every session of this workspace, from its next command on. The change is recorded in the op log (<code>rewind log</code>).</p>" +
      `<div class="dialog-actions" id="actions"><button data-act="cancel">Cancel</button><button class="${off ? "danger" : "primary"}" data-act="confirm-sandbox">${off ? "Turn the sandbox off" : "Turn the sandbox on"}</button></div>`);
    body.querySelector('[data-act="cancel"]').addEventListener("click", closeDialog);
    body.querySelector('[data-act="confirm-sandbox"]').addEventListener("click", async () => {
      body.querySelectorAll("button").forEach((b) => (b.disabled = true));
      let now;
      try {
        now = await rpc("sandbox.mode", { toggle: true, expect: m.workspace_mode, via: "web" });
      } catch (err) {
        // Changed meanwhile (or refused): nothing was written; show the mode as it is now.
        dialog(`<h1 id="dialog-title">Not changed</h1><p class="error">${esc(err.message)}</p>` +
          '<div class="dialog-actions"><button data-act="close">Close</button></div>')
          .querySelector('[data-act="close"]').addEventListener("click", closeDialog);
        loadSandbox().catch(() => {});
        return;
      }
      state.sandboxMode = now;
      drawStatus();
      dialog(`<h1 id="dialog-title">Sandbox mode: ${esc(now.mode)}</h1>` +
        `<div class="callout ok">Changed from <code>${esc(m.workspace_mode)}</code>; recorded in the op log.</div>` +
        '<div class="dialog-actions"><button class="primary" data-act="close">Done</button></div>')
        .querySelector('[data-act="close"]').addEventListener("click", closeDialog);
      loadSandbox().catch(() => {});
    });
    body.querySelector('[data-act="cancel"]').focus();
  }

  function drawStatus() {
    const s = state.status, o = state.overview || {};
    if (!s) return;
    const used = o.state_bytes, budget = o.budget;
    const meter = budget
      ? `<div class="meter ${used > budget ? "over" : ""}"><span data-width="${Math.min(100, (100 * used) / budget).toFixed(1)}%"></span></div>`
      : "";
    const sandbox = sandboxLine();
    const open = s.open_epochs.length
      ? s.open_epochs.map((e) => `<div><span class="badge open">open</span>${esc(e.tool || e.kind)} <span class="muted">${esc(e.session)}</span></div>`).join("")
      : '<span class="muted">none</span>';
    const unfinished = s.unfinished_restores.length
      ? `<span class="bad">${s.unfinished_restores.length}</span> <span class="muted">(the next command finishes them)</span>`
      : '<span class="muted">none</span>';
    $("status").innerHTML = '<dl>' +
      `<dt>store</dt><dd>${bytes(s.store.pack_bytes)} <span class="muted">(${bytes(s.store.raw_bytes)} raw)</span></dd>` +
      `<dt>on disk</dt><dd>${bytes(used)}${budget ? ` of ${bytes(budget)} budget` : ' <span class="muted">(no budget set)</span>'}${meter}</dd>` +
      `<dt>sandbox</dt><dd>${sandbox}</dd>` +
      `<dt>open epochs</dt><dd>${open}</dd>` +
      `<dt>unfinished restores</dt><dd>${unfinished}</dd>` +
      `<dt>uncovered</dt><dd>${s.uncovered.length ? `<span class="warn">${s.uncovered.length} path${s.uncovered.length === 1 ? "" : "s"}</span>` : '<span class="muted">none</span>'}</dd>` +
      (s.server ? `<dt>server</dt><dd>pid ${s.server.pid}${s.server.watcher ? " · watcher on" : ""}</dd>` : "") +
      "</dl>";
    // Set through the CSSOM: the Content-Security-Policy allows no inline style attributes.
    $("status").querySelectorAll("[data-width]").forEach((el) => (el.style.width = el.dataset.width));
  }

  // ---- live updates --------------------------------------------------------------------

  let refreshTimer = null;
  function refreshSoon() {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(async () => {
      await loadStatus().catch(() => {});
      drawSessions();
      drawTimeline();
    }, 150);
  }

  async function catchUp() {
    if (!state.log) return;
    const recent = await rpc("log", { all_sessions: true, limit: FIRST_PAGE });
    const byId = new Map(state.log.map((e) => [e.id, e]));
    let changed = false;
    for (const e of recent.items.filter(isEntry)) {
      if (!byId.has(e.id)) {
        state.timeline.markFresh(e.id);
        changed = true;
      }
      byId.set(e.id, e);
    }
    if (!changed) return;
    state.log = [...byId.values()].sort((a, b) => b.pos - a.pos);
    refreshSoon();
  }

  function listen() {
    const live = $("live");
    const source = new EventSource("/events");
    source.onopen = () => {
      live.className = "live on";
      live.textContent = "live";
      // What was recorded while the stream was not connected (before it first opened, or
      // while it reconnected) came as no event: read the newest entries again.
      catchUp().catch(() => {});
    };
    source.onerror = () => { live.className = "live off"; live.textContent = "reconnecting…"; };
    source.onmessage = (m) => {
      const ev = JSON.parse(m.data);
      const e = ev.detail;
      if (ev.kind === "setting") return void loadSandbox().catch(() => {});
      if (ev.kind === "guard" || !e || !e.id) return;
      const i = state.log.findIndex((x) => x.id === e.id);
      if (i >= 0) state.log[i] = e;
      else state.log.unshift(e);
      state.timeline.markFresh(e.id);
      refreshSoon();
    };
  }

  // ---- start ---------------------------------------------------------------------------

  async function start() {
    state.timeline = new window.RewindTimeline.Timeline($("timeline"), {
      onSelect: showDetail,
      onRewind: openRewind,
      needPaths,
    });
    $("sessions").addEventListener("click", (ev) => {
      const li = ev.target.closest("[data-session]");
      if (li) chooseSession(li.dataset.session);
    });
    $("filter").addEventListener("input", () => drawTimeline());
    $("status").addEventListener("click", (ev) => {
      if (ev.target.closest('[data-act="sandbox-toggle"]')) openSandboxToggle();
    });
    document.addEventListener("keydown", (ev) => { if (ev.key === "Escape" && !$("dialog").hidden) closeDialog(); });
    $("dialog").addEventListener("click", (ev) => { if (ev.target === $("dialog")) closeDialog(); });
    // After the load event: a stream opened before it would keep the page "loading" forever.
    // But never later than a moment after the first screen: on a busy machine the load event
    // was seen to wait for long, and live updates with it.
    let listening = false;
    const listenOnce = () => {
      if (!listening) {
        listening = true;
        listen();
      }
    };
    if (document.readyState === "complete") listenOnce();
    else window.addEventListener("load", listenOnce, { once: true });
    try {
      await loadStatus();
      await loadLog();
      document.body.dataset.ready = "1";
    } catch (err) {
      $("detail").innerHTML = `<p class="error">${esc(err.message)}</p>`;
    }
    setTimeout(listenOnce, 1000);
    loadSandbox();
  }

  start();
})();
