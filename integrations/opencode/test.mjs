// Exercises the plugin's handlers as OpenCode calls them, against the real `rewind` binary
// (`REWIND`) in a real workspace (`WS`, with a.txt holding "a\n"), through a running
// `rewind serve` when SERVE=1, else through the `serve --stdio` the plugin starts. Exits 1 on
// the first failed check.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { RewindPlugin } from "./rewind.js";

const ws = process.env.WS;
const bin = process.env.REWIND;
// The JSON document of a command (exit 0, or 3 for a refused restore).
const rewind = (...args) => {
  const r = spawnSync(bin, ["-C", ws, "--json", ...args], { encoding: "utf8" });
  assert.ok(r.status === 0 || r.status === 3, `${args.join(" ")}: ${r.status} ${r.stderr}`);
  return JSON.parse(r.stdout);
};
const a = path.join(ws, "a.txt");

const hooks = await RewindPlugin({ directory: ws });
const S = "ses_1";
await hooks["chat.message"]({ sessionID: S, messageID: "msg_1" });
// read, then edit
await hooks["tool.execute.after"]({ tool: "read", sessionID: S, callID: "c1", args: { filePath: a } });
await hooks["tool.execute.before"]({ tool: "edit", sessionID: S, callID: "c2" }, { args: { filePath: a } });
fs.writeFileSync(a, "A\n");
await hooks["tool.execute.after"]({ tool: "edit", sessionID: S, callID: "c2", args: { filePath: a } });
// a shell command
await hooks["tool.execute.before"]({ tool: "bash", sessionID: S, callID: "c3" }, { args: { command: "touch b.txt" } });
fs.writeFileSync(path.join(ws, "b.txt"), "");
await hooks["tool.execute.after"]({ tool: "bash", sessionID: S, callID: "c3", args: { command: "touch b.txt" } });
// the user edits a.txt: the next edit is refused (the plugin throws, OpenCode blocks the call)
fs.writeFileSync(a, "the user's\n");
await assert.rejects(
  hooks["tool.execute.before"]({ tool: "write", sessionID: S, callID: "c4" }, { args: { filePath: a } }),
  /Rewind refused this write: .*a\.txt/,
);
assert.equal(fs.readFileSync(a, "utf8"), "the user's\n");

const log = rewind("-s", S, "log");
const calls = log.items.filter((e) => e.type === "epoch").map((e) => `${e.tool} ${e.tool_call}`);
assert.ok(calls.includes("edit c2"), JSON.stringify(calls));
assert.ok(calls.includes("bash c3"), JSON.stringify(calls));
assert.ok(log.items.some((e) => e.type === "checkpoint" && e.message === "msg_1"));
// Back to the message: the agent's file undone; a.txt, which the user changed since, a
// conflict (refused, nothing changed).
const r = rewind("-s", S, "restore", "msg_1", "--dry-run");
assert.ok(r.steps.some((s) => s.path === "b.txt" && s.action === "delete"), JSON.stringify(r));
assert.ok(r.conflicts.some((c) => c.path === "a.txt"), JSON.stringify(r));
console.log("ok");
process.exit(0);
