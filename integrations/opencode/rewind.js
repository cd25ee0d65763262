// Rewind for OpenCode (V1 plugin API): each tool call an epoch of the OpenCode session, edits of
// files the session has not read (or that changed since) refused, each chat message a
// checkpoint. Copy this file to `.opencode/plugins/` (or `~/.config/opencode/plugins/`).
//
// It talks JSON-RPC to `rewind serve` (see the README's "Server" section): over the
// workspace's socket when a server runs, else through a `rewind serve --stdio` it starts for
// its own lifetime. `REWIND` names the binary (default: `rewind` on PATH).

import { spawn, execFileSync } from "node:child_process";
import net from "node:net";
import readline from "node:readline";

/**
 * A JSON-RPC connection: `call(method, params)` resolves with the result or rejects.
 * `hold(true)` keeps the process alive while an answer is awaited, `hold(false)` lets it exit
 * once none is (so the connection never keeps OpenCode from exiting).
 */
function connection(write, lines, hold) {
  let next = 1;
  const waiting = new Map();
  lines.on("line", (line) => {
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      return;
    }
    const w = waiting.get(msg.id);
    if (!w) return; // a notification
    waiting.delete(msg.id);
    if (waiting.size === 0) hold(false);
    if (msg.error) {
      const e = new Error(msg.error.data?.message ?? msg.error.message);
      e.kind = msg.error.data?.kind;
      w.reject(e);
    } else w.resolve(msg.result);
  });
  return (method, params) =>
    new Promise((resolve, reject) => {
      const id = next++;
      waiting.set(id, { resolve, reject });
      hold(true);
      write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    });
}

/** Connects to the workspace's server, or starts one on standard input and output. */
function connect(bin, directory) {
  let socket;
  try {
    const status = JSON.parse(
      execFileSync(bin, ["-C", directory, "--json", "status"], { encoding: "utf8" }),
    );
    socket = status.server?.socket;
  } catch {
    socket = undefined;
  }
  if (socket) {
    const s = net.createConnection(socket);
    s.unref();
    const hold = (on) => (on ? s.ref() : s.unref());
    return connection((l) => s.write(l), readline.createInterface({ input: s }), hold);
  }
  const child = spawn(bin, ["-C", directory, "serve", "--stdio"], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const streams = [child, child.stdin, child.stdout];
  const hold = (on) => streams.forEach((x) => (on ? x.ref?.() : x.unref?.()));
  hold(false);
  return connection(
    (l) => child.stdin.write(l),
    readline.createInterface({ input: child.stdout }),
    hold,
  );
}

const FILE_TOOLS = new Set(["edit", "write", "patch", "multiedit"]);

export const RewindPlugin = async ({ directory }) => {
  const bin = process.env.REWIND || "rewind";
  const call = connect(bin, directory);
  const epochs = new Map(); // callID → epoch id
  return {
    "chat.message": async (input) => {
      if (!input?.sessionID) return;
      await call("checkpoint", {
        session: input.sessionID,
        message: input.messageID ?? null,
      }).catch(() => {});
    },
    "tool.execute.before": async (input, output) => {
      const session = input.sessionID;
      const file = output?.args?.filePath;
      if (FILE_TOOLS.has(input.tool) && file) {
        const verdicts = await call("check-write", { session, paths: [file] });
        const refused = verdicts.find((v) => !v.allowed);
        if (refused) throw new Error(`Rewind refused this ${input.tool}: ${refused.reason}`);
        const e = await call("epoch.begin", {
          session,
          tool: input.tool,
          tool_call: input.callID,
          paths: [file],
        });
        epochs.set(input.callID, e.id);
      } else if (input.tool === "bash") {
        const e = await call("epoch.begin", {
          session,
          tool: "bash",
          tool_call: input.callID,
          note: String(output?.args?.command ?? "").slice(0, 200),
        });
        epochs.set(input.callID, e.id);
      }
    },
    "tool.execute.after": async (input) => {
      const session = input.sessionID;
      const file = input.args?.filePath;
      const epoch = epochs.get(input.callID);
      if (epoch) {
        epochs.delete(input.callID);
        // Settled already when another call's epoch began meanwhile (parallel calls).
        await call("epoch.end", { session, epoch }).catch(() => {});
      }
      if (file && (input.tool === "read" || FILE_TOOLS.has(input.tool))) {
        // What the session has seen: what it read, or what it just wrote.
        await call("read", { session, paths: [file] }).catch(() => {});
      }
    },
  };
};

export default RewindPlugin;
