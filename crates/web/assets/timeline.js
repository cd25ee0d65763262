// The timeline of one session: its checkpoints as a conversation tree (a rewind followed by a
// new turn starts a branch), each with the epochs recorded while it was the head, and the
// external edits between them. Newest first; only the rows on screen are in the page, so a
// history of tens of thousands of epochs scrolls as fast as a short one.
"use strict";

(function () {
  const esc = (s) => window.RewindDiff.esc(s ?? "");
  const ROW = 44;          // px, as --row in app.css
  const OVERSCAN = 12;     // rows drawn beyond each edge of the screen
  const LANE = 14, PAD = 10, MID = ROW / 2;
  const COLORS = ["var(--lane0)", "var(--lane1)", "var(--lane2)", "var(--lane3)", "var(--lane4)"];

  /**
   * The rows of `session` from a log (`log --all-sessions` items, any order), laid out:
   * each row's branch, each branch's column and the span of positions it covers.
   */
  function build(entries, session, head) {
    const mine = entries
      .filter((e) => e.session === session || (e.type === "epoch" && e.kind === "external"))
      .sort((a, b) => a.pos - b.pos);
    const branches = [];
    const byMessage = new Map(); // message (or checkpoint id) -> {branch, pos}
    const tip = [];              // branch -> message of its newest checkpoint
    const turns = new Map();     // message -> epochs recorded under it
    const newBranch = (start, from) => {
      branches.push({ start, end: start, from, col: 0 });
      tip.push(null);
      return branches.length - 1;
    };
    for (const e of mine) {
      if (e.type === "checkpoint") {
        const p = e.parent != null ? byMessage.get(e.parent) : undefined;
        let b;
        if (p && tip[p.branch] === e.parent) b = p.branch;
        else if (p) b = newBranch(e.pos, { pos: p.pos, branch: p.branch });
        else if (!branches.length) b = newBranch(e.pos, null);
        else b = newBranch(e.pos, null);
        branches[b].end = e.pos;
        tip[b] = e.message ?? e.id;
        byMessage.set(e.message ?? e.id, { branch: b, pos: e.pos });
        e._branch = b;
      } else if (e.kind === "external") {
        e._branch = -1;
      } else {
        const node = e.message != null ? byMessage.get(e.message) : undefined;
        const b = node ? node.branch : branches.length ? 0 : newBranch(e.pos, null);
        e._branch = b;
        branches[b].end = Math.max(branches[b].end, e.pos);
        if (e.message != null) turns.set(e.message, (turns.get(e.message) || 0) + 1);
      }
    }
    // Columns: a branch takes the leftmost column free since before it starts.
    const colEnd = [];
    const order = branches.map((b, i) => i).sort((a, b) => top(branches[a]) - top(branches[b]));
    for (const i of order) {
      const b = branches[i];
      let c = colEnd.findIndex((end) => end < top(b));
      if (c < 0) { c = colEnd.length; colEnd.push(0); }
      colEnd[c] = b.end;
      b.col = c;
    }
    return { rows: mine.reverse(), branches, cols: Math.max(colEnd.length, 1), head, turns };
  }
  /** Where a branch's line starts: its parent's row when it forks. */
  const top = (b) => (b.from ? b.from.pos : b.start);

  function graph(model, e) {
    const { branches, cols } = model;
    const w = PAD * 2 + (cols - 1) * LANE + LANE; // the last lane is the external edits'
    const x = (c) => PAD + c * LANE;
    let s = `<svg width="${w}" height="${ROW}" aria-hidden="true">`;
    branches.forEach((b, i) => {
      const p = e.pos, X = x(b.col), color = COLORS[b.col % COLORS.length];
      if (p < top(b) || p > b.end) return;
      if (b.from && p === b.from.pos) {
        // The fork: from the parent's dot up into the branch's column.
        const xp = x(branches[b.from.branch].col);
        s += `<path d="M${xp} ${MID} Q${X} ${MID} ${X} 0" stroke="${color}" stroke-width="2" fill="none"/>`;
        return;
      }
      if (b.end > p) s += `<line x1="${X}" y1="0" x2="${X}" y2="${MID}" stroke="${color}" stroke-width="2"/>`;
      if (p > b.start || (b.from && p > b.from.pos)) s += `<line x1="${X}" y1="${MID}" x2="${X}" y2="${ROW}" stroke="${color}" stroke-width="2"/>`;
      void i;
    });
    if (e._branch < 0) {
      const X = x(cols);
      s += `<rect x="${X - 4}" y="${MID - 4}" width="8" height="8" rx="1.5" fill="var(--panel)" stroke="var(--ext)" stroke-width="2"/>`;
    } else {
      const b = branches[e._branch];
      const X = x(b.col), color = COLORS[b.col % COLORS.length];
      if (e.type === "checkpoint") {
        if (isHead(model, e)) {
          s += `<circle cx="${X}" cy="${MID}" r="7" fill="var(--panel)" stroke="${color}" stroke-width="2.5"/><circle cx="${X}" cy="${MID}" r="3" fill="${color}"/>`;
        } else {
          s += `<circle cx="${X}" cy="${MID}" r="5.5" fill="${color}"/>`;
        }
      } else if (e.kind === "restore") {
        s += `<rect x="${X - 4}" y="${MID - 4}" width="8" height="8" fill="var(--rst)" transform="rotate(45 ${X} ${MID})"/>`;
      } else {
        s += `<circle cx="${X}" cy="${MID}" r="3.5" fill="var(--panel)" stroke="${color}" stroke-width="2"/>`;
      }
    }
    return s + "</svg>";
  }

  const isHead = (model, e) => model.head != null && e.type === "checkpoint" && e.message === model.head;

  function clock(e) {
    const d = new Date(e.created_ns / 1e6);
    return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  }

  function who(e) {
    if (e.kind === "external") return "outside any session (an editor, another program)";
    const o = e.owner || {};
    const by = o.type === "process" ? `process ${o.pid}` : `session ${e.session}`;
    return e.recovered ? `${by}, settled by recovery` : by;
  }

  function pathsText(e, paths) {
    const p = paths.get(e.id);
    if (!p) return `${e.changes} path${e.changes === 1 ? "" : "s"}`;
    if (!p.length) return "no changes";
    const shown = p.slice(0, 3).join(", ");
    return p.length > 3 ? `${shown} +${p.length - 3} more` : shown;
  }

  function row(model, e, paths, selected) {
    const sel = e.id === selected ? " selected" : "";
    if (e.type === "checkpoint") {
      const head = isHead(model, e) ? '<span class="badge head">HEAD</span>' : "";
      const badges = (e.pinned ? '<span class="badge pinned">pinned</span>' : "") +
        (e.collected_ns ? '<span class="badge collected">collected</span>' : "");
      const n = model.turns.get(e.message) || 0;
      const title = e.label ? `${esc(e.message ?? e.id.slice(0, 10))} — ${esc(e.label)}` : esc(e.message ?? e.id.slice(0, 10));
      return `<div class="row checkpoint${sel}" data-id="${esc(e.id)}" role="listitem">${graph(model, e)}` +
        `<div class="main"><div class="line1">${head}${title}${badges}</div>` +
        `<div class="line2">checkpoint ${esc(e.id.slice(0, 10))}${e.parent ? " · after " + esc(e.parent) : ""} · ${n} tool call${n === 1 ? "" : "s"}</div></div>` +
        `<span class="time" title="${esc(e.time)}">${clock(e)}</span>` +
        `<span class="actions"><button class="small" data-act="rewind" ${e.collected_ns ? "disabled" : ""}>Rewind to here…</button></span></div>`;
    }
    const kind = e.kind === "external" ? '<span class="badge external">external</span>'
      : e.kind === "restore" ? '<span class="badge restore">restore</span>'
      : `<span class="badge">${esc(e.kind)}</span>`;
    const state = e.state !== "settled" ? `<span class="badge ${esc(e.state)}">${esc(e.state)}</span>` : "";
    const what = e.kind === "external" ? "Edited outside the agent"
      : esc(e.tool || e.kind) + (e.note ? ` <span class="mono">${esc(e.note)}</span>` : "");
    const call = e.tool_call ? ` <span class="muted mono">${esc(e.tool_call)}</span>` : "";
    return `<div class="row epoch ${e.kind === "external" ? "external" : ""}${sel}" data-id="${esc(e.id)}" role="listitem">${graph(model, e)}` +
      `<div class="main"><div class="line1">${kind}${state}${what}${call}</div>` +
      `<div class="line2"><span class="mono">${esc(pathsText(e, paths))}</span> · ${esc(who(e))}</div></div>` +
      `<span class="time" title="${esc(e.time)}">${clock(e)}</span></div>`;
  }

  class Timeline {
    /** `hooks`: onSelect(entry), onRewind(entry), needPaths([epoch ids]). */
    constructor(el, hooks) {
      this.el = el;
      this.hooks = hooks;
      this.model = { rows: [], branches: [], cols: 1, head: null, turns: new Map() };
      this.visible = [];
      this.paths = new Map();
      this.selected = null;
      this.fresh = new Set();
      this.spacer = document.createElement("div");
      this.spacer.className = "spacer";
      this.layer = document.createElement("div");
      this.layer.className = "rows";
      this.spacer.appendChild(this.layer);
      el.replaceChildren(this.spacer);
      let queued = false;
      el.addEventListener("scroll", () => {
        if (queued) return;
        queued = true;
        requestAnimationFrame(() => { queued = false; this.render(); });
      });
      window.addEventListener("resize", () => this.render());
      el.addEventListener("click", (ev) => {
        const r = ev.target.closest(".row");
        if (!r) return;
        const e = this.byId(r.dataset.id);
        if (!e) return;
        if (ev.target.closest('[data-act="rewind"]')) this.hooks.onRewind(e);
        else this.select(e.id);
      });
      el.addEventListener("keydown", (ev) => {
        if (ev.key !== "ArrowDown" && ev.key !== "ArrowUp") return;
        ev.preventDefault();
        const rows = this.visible;
        let i = rows.findIndex((e) => e.id === this.selected);
        i = Math.max(0, Math.min(rows.length - 1, i + (ev.key === "ArrowDown" ? 1 : -1)));
        if (rows[i]) { this.select(rows[i].id); this.reveal(i); }
      });
    }

    byId(id) { return this.visible.find((e) => e.id === id) || this.model.rows.find((e) => e.id === id); }

    /** Shows `entries` (a log), keeping the scroll position and selection. */
    set(entries, session, head, filter) {
      this.model = build(entries, session, head);
      const f = (filter || "").trim().toLowerCase();
      this.visible = !f ? this.model.rows : this.model.rows.filter((e) =>
        [e.message, e.label, e.tool, e.tool_call, e.note, e.id, e.kind, ...(this.paths.get(e.id) || [])]
          .some((v) => v != null && String(v).toLowerCase().includes(f)));
      this.render();
    }

    select(id) {
      this.selected = id;
      this.render();
      const e = this.byId(id);
      if (e) this.hooks.onSelect(e);
    }

    reveal(i) {
      const y = i * ROW;
      if (y < this.el.scrollTop) this.el.scrollTop = y;
      else if (y + ROW > this.el.scrollTop + this.el.clientHeight) this.el.scrollTop = y + ROW - this.el.clientHeight;
    }

    markFresh(id) {
      this.fresh.add(id);
      setTimeout(() => this.fresh.delete(id), 2000);
    }

    render() {
      const rows = this.visible;
      this.spacer.style.height = `${rows.length * ROW}px`;
      const first = Math.max(0, Math.floor(this.el.scrollTop / ROW) - OVERSCAN);
      const last = Math.min(rows.length, Math.ceil((this.el.scrollTop + this.el.clientHeight) / ROW) + OVERSCAN);
      this.layer.style.transform = `translateY(${first * ROW}px)`;
      let h = "";
      const missing = [];
      for (let i = first; i < last; i++) {
        const e = rows[i];
        h += row(this.model, e, this.paths, this.selected);
        if (e.type === "epoch" && !this.paths.has(e.id) && e.changes > 0) missing.push(e.id);
      }
      this.layer.innerHTML = h;
      for (const id of this.fresh) {
        const r = this.layer.querySelector(`[data-id="${CSS.escape(id)}"]`);
        if (r) r.classList.add("fresh");
      }
      if (!rows.length) {
        this.layer.innerHTML = '<p class="more-rows muted">Nothing recorded for this session yet.</p>';
      }
      if (missing.length) this.hooks.needPaths(missing);
    }
  }

  window.RewindTimeline = { Timeline, build };
})();
