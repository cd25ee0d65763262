// Diffs: the `diff` operation's structured sections drawn unified or side by side. Binary
// files and files the engine would not diff line by line are summarised; long diffs are cut
// and grow on request, so a diff of a large file renders at once.
"use strict";

(function () {
  /** Lines drawn at first over all files of a diff; each "show more" adds another step. */
  const FIRST = 1500;
  const STEP = 5000;

  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({
    "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;",
  })[c]);

  /** A file's lines, numbered: hunk headers and tagged lines. */
  function flatten(file) {
    const out = [];
    for (const section of file.sections || []) {
      for (const hunk of section.hunks || []) {
        const m = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(hunk.header) || [0, 1, 1];
        let oldNo = +m[1], newNo = +m[2];
        out.push({ tag: "hunk", text: hunk.header });
        for (const l of hunk.lines) {
          const row = { tag: l.tag, text: l.text, noNewline: !!l.no_newline };
          if (l.tag !== "add") row.oldNo = oldNo++;
          if (l.tag !== "del") row.newNo = newNo++;
          out.push(row);
        }
      }
    }
    return out;
  }

  function sections_note(file) {
    return (file.sections || []).map((s) => s.note).filter(Boolean).join("; ");
  }

  const SIGN = { add: "+", del: "-", context: " " };
  const eol = (l) => (l.noNewline ? ' <span class="muted">⏎̸ no newline at end</span>' : "");

  function unified(lines) {
    let h = '<table class="dlines"><colgroup><col class="c-no"><col class="c-no"><col class="c-sign"><col></colgroup>';
    for (const l of lines) {
      if (l.tag === "hunk") {
        h += `<tr class="hunk"><td colspan="4">${esc(l.text)}</td></tr>`;
      } else {
        h += `<tr class="${l.tag}"><td class="no">${l.oldNo ?? ""}</td><td class="no">${l.newNo ?? ""}</td>` +
          `<td class="sign">${SIGN[l.tag]}</td><td class="t">${esc(l.text)}${eol(l)}</td></tr>`;
      }
    }
    return h + "</table>";
  }

  /** Side by side: context on both sides, a run of deletions beside the additions after it. */
  function split(lines) {
    let h = '<table class="dlines split"><colgroup><col class="c-no"><col><col class="c-no"><col></colgroup>';
    const cell = (l, side) => l
      ? `<td class="no">${side === "old" ? l.oldNo : l.newNo}</td><td class="t ${l.tag === "context" ? "" : l.tag}">${esc(l.text)}${eol(l)}</td>`
      : '<td class="no"></td><td class="t empty"></td>';
    let i = 0;
    while (i < lines.length) {
      const l = lines[i];
      if (l.tag === "hunk") {
        h += `<tr class="hunk"><td colspan="4">${esc(l.text)}</td></tr>`;
        i++;
      } else if (l.tag === "context") {
        h += `<tr>${cell(l, "old")}${cell(l, "new")}</tr>`;
        i++;
      } else {
        const dels = [], adds = [];
        while (i < lines.length && lines[i].tag === "del") dels.push(lines[i++]);
        while (i < lines.length && lines[i].tag === "add") adds.push(lines[i++]);
        for (let k = 0; k < Math.max(dels.length, adds.length); k++) {
          h += `<tr>${cell(dels[k], "old")}${cell(adds[k], "new")}</tr>`;
        }
      }
    }
    return h + "</table>";
  }

  function action_badge(action) {
    return `<span class="badge ${esc(action)}">${esc(action)}</span>`;
  }

  /**
   * Draws `diff` into `el`. `opts.view`: "unified" or "split"; `opts.empty`: what to say when
   * nothing differs.
   */
  function render(el, diff, opts = {}) {
    let view = opts.view || localStorage.getItem("rewind.diffView") || "unified";
    const files = diff.files.map((f) => ({ f, lines: null, shown: 0 }));
    let budget = FIRST;
    for (const x of files) {
      if (x.f.binary || !(x.f.sections || []).length) continue;
      x.lines = flatten(x.f);
      x.shown = Math.min(x.lines.length, Math.max(budget, 0));
      budget -= x.shown;
    }
    const bar = document.createElement("div");
    bar.className = "diff-bar";
    bar.innerHTML =
      `<span class="seg"><button data-view="unified">Unified</button><button data-view="split">Side by side</button></span>` +
      `<span class="muted">${diff.files.length} file${diff.files.length === 1 ? "" : "s"}, ` +
      `<span class="good">+${diff.added}</span> <span class="bad">−${diff.removed}</span></span>`;
    const body = document.createElement("div");
    el.replaceChildren(bar, body);

    function draw_file(x, box) {
      const f = x.f;
      let h = `<header>${action_badge(f.action)}<span class="path">${esc(f.path)}</span>` +
        `<span class="stat"><span class="a">+${f.added}</span> <span class="r">−${f.removed}</span></span></header>`;
      if (f.conflict) h += `<div class="note">Changed since by ${esc(f.conflict)}</div>`;
      if (f.binary) {
        h += `<div class="note">Binary file${f.note ? ": " + esc(f.note) : ""} — not shown line by line.</div>`;
      } else if (!x.lines || !x.lines.length) {
        const why = f.note || sections_note(f) || (f.kind === "dir" ? "a directory" : "no line changes (mode or kind only)");
        h += `<div class="note">${esc(why)}</div>`;
      } else {
        const lines = x.lines.slice(0, x.shown);
        h += view === "split" ? split(lines) : unified(lines);
        const left = x.lines.length - x.shown;
        if (left > 0) {
          h += `<div class="cut"><span>${left.toLocaleString()} more line${left === 1 ? "" : "s"} not shown.</span>` +
            `<button class="small" data-more="${STEP}">Show ${Math.min(STEP, left).toLocaleString()} more</button>` +
            `<button class="small" data-more="all">Show all</button></div>`;
        }
      }
      box.innerHTML = h;
      box.querySelectorAll("[data-more]").forEach((b) => b.addEventListener("click", () => {
        x.shown = b.dataset.more === "all" ? x.lines.length : Math.min(x.lines.length, x.shown + STEP);
        draw_file(x, box);
      }));
    }

    function draw() {
      bar.querySelectorAll("[data-view]").forEach((b) => b.classList.toggle("on", b.dataset.view === view));
      body.replaceChildren();
      if (!files.length) {
        body.innerHTML = `<p class="muted">${esc(opts.empty || "No changes.")}</p>`;
      }
      for (const x of files) {
        const box = document.createElement("section");
        box.className = "dfile";
        box.dataset.path = x.f.path;
        draw_file(x, box);
        body.appendChild(box);
      }
      for (const u of diff.uncovered || []) {
        const p = document.createElement("p");
        p.className = "muted";
        p.textContent = `${u.path}: not captured (${u.reason}), so not shown`;
        body.appendChild(p);
      }
    }
    bar.querySelectorAll("[data-view]").forEach((b) => b.addEventListener("click", () => {
      view = b.dataset.view;
      localStorage.setItem("rewind.diffView", view);
      draw();
    }));
    draw();
  }

  window.RewindDiff = { render, esc };
})();
