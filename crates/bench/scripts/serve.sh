#!/usr/bin/env bash
# `rewind serve` against git's no-op `track` and the command line without a server, in one run
# on one tree (docs/benchmarks.md, "The server"). Prints a Markdown table of medians and ratios.
#
# usage: crates/bench/scripts/serve.sh [REWIND_BINARY] [FILES_PER_DIR]
#   REWIND_BINARY  default: target/<host>/release/rewind (build it with cargo build --release)
#   FILES_PER_DIR  default 100, over 1,000 directories: 100,000 files
#
# Measured: a no-op opaque epoch (`exec true`) through the server's socket; `rewind exec --
# true` as a process, with no server and with one running; git's no-op `track` (add --all + write-tree) on the same
# tree; an exact epoch around a 4 KiB write (`write`, durable) over the socket against one
# `rewind write` process; an opaque epoch whose command rewrites 1,000 files through the
# server, less the command's own time, against hashing those files once (b2sum); and agent
# hook pairs (`rewind hook claude-code`, PreToolUse + PostToolUse) of an Edit and of a Bash
# call (sandboxed, the default: the PreToolUse answer rewrites it to `rewind exec --sandbox`,
# which is not part of the pair; and unsandboxed, danger-full-access: the hooks open and
# settle an opaque epoch), each through the running server and alone (REWIND_NO_SERVER=1) in
# one hyperfine run while the server runs. The load average is printed before and after.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
host=$(rustc -vV | sed -n 's/^host: //p')
rw=${1:-$repo/target/$host/release/rewind}
per_dir=${2:-100}
work=$(mktemp -d) server=
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
unset CLAUDE_PROJECT_DIR REWIND_SESSION
export REWIND_HOME=$work/home GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 HOME=$work
ws=$work/ws gd=$work/shadow.git
python3 "$here/mktree.py" "$ws" --dirs 1000 --files-per-dir "$per_dir" --min 100 --max 4000 \
    --kind text --seed 7 >/dev/null
files=$(find "$ws" -type f | wc -l)
"$here/git-shadow-baseline.sh" init "$ws" "$gd"
"$here/git-shadow-baseline.sh" track "$ws" "$gd" >/dev/null
"$rw" -C "$ws" init >/dev/null

median() { # hyperfine's median of a command, in ms
    hyperfine -N --warmup 3 --runs "$1" --export-json "$work/h.json" "$2" >/dev/null 2>&1
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results'][0]['median']*1000)" "$work/h.json"
}
git_track=$(median 20 "$here/git-shadow-baseline.sh track $ws $gd")
cli_exec=$(median 20 "$rw -C $ws exec -- true")
head -c 4096 /dev/zero | tr '\0' x > "$work/4k"
first=$(cd "$ws" && find . -type f -print -quit | cut -c3-)
"$rw" -C "$ws" -s B read "$first" >/dev/null
cli_write=$(median 50 "sh -c '$rw -C $ws -s B write $first < $work/4k'")

# Agent hook pairs (rewind hook claude-code): PreToolUse + PostToolUse of an Edit and of a Bash
# call, two processes each, as Claude Code runs them (measured once the server runs, below).
ev() { # NAME TOOL INPUT_JSON
    printf '{"session_id":"H","cwd":"%s","hook_event_name":"%s","tool_name":"%s","tool_use_id":"t1","tool_input":%s}' "$ws" "$1" "$2" "$3"
}
ev PostToolUse Read "{\"file_path\":\"$ws/$first\"}" > "$work/read.json"
ev PreToolUse Edit "{\"file_path\":\"$ws/$first\",\"old_string\":\"a\",\"new_string\":\"b\"}" > "$work/pre-edit.json"
ev PostToolUse Edit "{\"file_path\":\"$ws/$first\",\"old_string\":\"a\",\"new_string\":\"b\"}" > "$work/post-edit.json"
ev PreToolUse Bash '{"command":"true"}' > "$work/pre-bash.json"
ev PostToolUse Bash '{"command":"true"}' > "$work/post-bash.json"
"$rw" hook claude-code < "$work/read.json"
pair() { # KIND [ENV]: one pair of hook processes, as hyperfine runs it
    local e=${2:-}
    echo "sh -c '$e $rw hook claude-code < $work/pre-$1.json && $e $rw hook claude-code < $work/post-$1.json'"
}
pairs() { # RUNS KIND: the medians of the pair alone and through the server, one hyperfine run
    hyperfine -N --warmup 3 --runs "$1" --export-json "$work/h.json" \
        "$(pair "$2" REWIND_NO_SERVER=1)" "$(pair "$2")" >/dev/null 2>&1
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['results']; print(r[0]['median']*1000, r[1]['median']*1000)" "$work/h.json"
}

"$rw" -C "$ws" serve --socket "$work/s.sock" > "$work/serve.out" 2>/dev/null &
server=$!
for _ in $(seq 600); do [ -s "$work/serve.out" ] && break; sleep 0.1; done
cli_exec_srv=$(median 20 "$rw -C $ws exec -- true")
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
read -r hook_edit hook_edit_srv <<< "$(pairs 30 edit)"
read -r hook_bash hook_bash_srv <<< "$(pairs 30 bash)"
"$rw" -C "$ws" -s H sandbox mode danger-full-access --yes >/dev/null
read -r hook_full hook_full_srv <<< "$(pairs 10 bash)"
"$rw" -C "$ws" -s H sandbox mode workspace-write --yes >/dev/null
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$work/s.sock" "$ws" "$first" > "$work/socket.txt" <<'PY'
import json, os, socket, statistics, subprocess, sys, time
sock_path, ws, first = sys.argv[1], sys.argv[2], sys.argv[3]
s = socket.socket(socket.AF_UNIX); s.connect(sock_path)
f = s.makefile("rwb")
n = 0
def call(method, **params):
    global n
    n += 1
    f.write(json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}).encode() + b"\n")
    f.flush()
    while True:
        r = json.loads(f.readline())
        if r.get("id") == n:
            if "error" in r:
                raise SystemExit(f"{method}: {r['error']}")
            return r["result"]
def timed(runs, fn):
    for _ in range(3): fn()
    out = []
    for _ in range(runs):
        t = time.perf_counter(); fn(); out.append((time.perf_counter() - t) * 1000)
    return statistics.median(out)
noop = timed(200, lambda: call("exec", command=["true"]))
call("read", session="W", paths=[first])
body = "y" * 4096
write = timed(200, lambda: call("write", session="W", path=first, content=body))
dirs = sorted(d for d in os.listdir(ws) if not d.startswith("."))[:10]
targets = []
for d in dirs:
    names = sorted(os.listdir(os.path.join(ws, d)))[:100]
    targets += [os.path.join(d, x) for x in names]
script = "for f in \"$@\"; do echo changed >> \"$f\"; done"
def rewrite(targets, times):
    runs, bare, hashed = [], [], []
    for i in range(times):
        t = time.perf_counter(); subprocess.run(["sh", "-c", script, "sh"] + targets, cwd=ws, check=True); bare.append((time.perf_counter() - t) * 1000)
        # The bare run's changes are recorded now, untimed, as an external epoch: otherwise
        # the timed epoch would begin by recording them (two captures of them, not one).
        call("exec", command=["true"])
        t = time.perf_counter()
        r = call("exec", command=["sh", "-c", script, "sh"] + targets)
        runs.append((time.perf_counter() - t) * 1000)
        assert len(r["changes"]) == len(targets), len(r["changes"])
        t = time.perf_counter(); subprocess.run(["b2sum"] + targets, cwd=ws, check=True, stdout=subprocess.DEVNULL); hashed.append((time.perf_counter() - t) * 1000)
    return statistics.median(runs), statistics.median(bare), statistics.median(hashed)
one = rewrite(targets[:1], 21)
# 15 epochs: with 7, the median moved by 10-20% between runs of one build.
many = rewrite(targets, 15)
print(noop, write, *many, *one)
PY
read -r srv_noop srv_write srv_1000 bare_1000 hash_1000 srv_1 bare_1 hash_1 < "$work/socket.txt"
python3 - "$files" "$load_before" "$load_after" "$git_track" "$cli_exec" "$srv_noop" "$cli_write" "$srv_write" "$srv_1000" "$bare_1000" "$hash_1000" "$cli_exec_srv" "$hook_edit" "$hook_bash" "$hook_edit_srv" "$hook_bash_srv" "$hook_full" "$hook_full_srv" "$srv_1" "$bare_1" <<'PY'
import sys
files, load0, load1 = sys.argv[1:4]
git, cli, noop, cliw, srvw, s1000, bare, hashed, clisrv, he, hb, hes, hbs, hf, hfs, s1, bare1 = map(float, sys.argv[4:])
print(f"{files} files; medians in ms; load average {load0} before the hook pairs, {load1} after\n")
print("| measure | ms | ratio |")
print("|---|---|---|")
print(f"| git no-op `track` | {git:.1f} | 1 |")
print(f"| `rewind exec -- true`, no server | {cli:.1f} | git / this = {git/cli:.1f}x |")
print(f"| `rewind exec -- true`, server running | {clisrv:.1f} | git / this = {git/clisrv:.1f}x |")
print(f"| no-op opaque epoch through the server's socket | {noop:.2f} | git / this = {git/noop:.0f}x; CLI / this = {cli/noop:.0f}x |")
print(f"| `rewind write` of 4 KiB, one process | {cliw:.2f} | 1 |")
print(f"| the same write over the socket | {srvw:.2f} | process / this = {cliw/srvw:.1f}x |")
print(f"| hook pair (PreToolUse+PostToolUse) of an Edit, alone (REWIND_NO_SERVER=1) | {he:.1f} | |")
print(f"| the same through the server (same hyperfine run) | {hes:.1f} | alone / this = {he/hes:.1f}x |")
print(f"| hook pair of a Bash call (sandboxed: rewritten), alone | {hb:.1f} | |")
print(f"| the same through the server (same hyperfine run) | {hbs:.1f} | alone / this = {hb/hbs:.1f}x |")
print(f"| hook pair of an unsandboxed Bash call (an opaque epoch), alone | {hf:.1f} | |")
print(f"| the same through the server (same hyperfine run) | {hfs:.1f} | alone / this = {hf/hfs:.1f}x |")
print(f"| opaque epoch rewriting 1 file, less the command's {bare1:.1f} ms | {s1-bare1:.1f} | no-op / this = {noop/(s1-bare1):.2f} |")
print(f"| opaque epoch rewriting 1,000 files, less the command's {bare:.1f} ms | {s1000-bare:.1f} | / hashing them once ({hashed:.1f} ms) = {(s1000-bare)/hashed:.2f} |")
PY
