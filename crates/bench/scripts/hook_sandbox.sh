#!/usr/bin/env bash
# The whole-process cost of one Claude Code Bash call through Rewind's hooks, sandboxed against
# unsandboxed, same tree, same run (docs/benchmarks.md, "Sandboxed Bash calls through the hook").
#
#   sandboxed:   PreToolUse (the hook answers with the call rewritten to `rewind exec --sandbox
#                workspace-write --tool Bash --tool-call ID -- /bin/bash -c CMD`), the rewritten
#                command, PostToolUse: three processes plus bwrap, one opaque epoch.
#   unsandboxed: the workspace's mode set to danger-full-access (`rewind sandbox mode`): PreToolUse
#                (opens the epoch), `/bin/bash -c CMD`, PostToolUse (settles it).
# CMD is `true` and then a command that writes one file. Both with no server and with
# `rewind serve` running. Needs hyperfine, python3, bwrap.
#
# usage: crates/bench/scripts/hook_sandbox.sh [REWIND_BINARY] [FILES_PER_DIR]
#   default binary target/<host>/release/rewind; 100 files per dir over 100 dirs (10,000 files)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
host=$(rustc -vV | sed -n 's/^host: //p')
rw=${1:-$repo/target/$host/release/rewind}
per_dir=${2:-100}
# Not under /tmp: the sandbox gives commands a private one.
work=$(mktemp -d "${BENCH_DIR:-/var/tmp}/rewind-hook-sandbox.XXXXXX") server=
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
unset CLAUDE_PROJECT_DIR REWIND_SESSION
export REWIND_HOME=$work/home HOME=$work
ws=$work/ws
python3 "$here/mktree.py" "$ws" --dirs 100 --files-per-dir "$per_dir" --min 100 --max 4000 \
    --kind text --seed 7 >/dev/null
"$rw" -C "$ws" init >/dev/null

ev() { # NAME CMD
    python3 -c 'import json,sys; print(json.dumps({"session_id":"H","cwd":sys.argv[1],"hook_event_name":sys.argv[2],"tool_name":"Bash","tool_use_id":"toolu_1","tool_input":{"command":sys.argv[3]}}))' "$ws" "$1" "$2"
}
rewritten() { # PRE_EVENT_FILE: the command the hook rewrites the call to
    "$rw" hook claude-code < "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["hookSpecificOutput"]["updatedInput"]["command"])'
}
for c in true write; do
    cmd=true; [ $c = write ] && cmd='echo x > out.txt'
    ev PreToolUse "$cmd" > "$work/pre-$c.json"
    ev PostToolUse "$cmd" > "$work/post-$c.json"
    printf '%s\n' "$cmd" > "$work/cmd-$c"
done

run() { # LABEL: hyperfine both kinds of call for both commands, JSON to $work/LABEL-*.json
    for c in true write; do
        "$rw" -C "$ws" sandbox mode workspace-write >/dev/null
        local sb
        sb=$(rewritten "$work/pre-$c.json")
        printf '%s\n' "$sb" > "$work/sb-$c.sh"
        hyperfine -N --warmup 3 --runs 30 --export-json "$work/$1-sb-$c.json" \
            "sh -c '$rw hook claude-code < $work/pre-$c.json >/dev/null && cd $ws && sh $work/sb-$c.sh && $rw hook claude-code < $work/post-$c.json'" >/dev/null
        "$rw" -C "$ws" sandbox mode danger-full-access --yes >/dev/null
        hyperfine -N --warmup 3 --runs 30 --export-json "$work/$1-plain-$c.json" \
            "sh -c '$rw hook claude-code < $work/pre-$c.json >/dev/null && cd $ws && /bin/bash $work/cmd-$c && $rw hook claude-code < $work/post-$c.json'" >/dev/null
    done
}
run noserver
"$rw" -C "$ws" sandbox mode workspace-write >/dev/null
"$rw" -C "$ws" serve --socket "$work/s.sock" > "$work/serve.out" 2>/dev/null &
server=$!
for _ in $(seq 600); do [ -s "$work/serve.out" ] && break; sleep 0.1; done
run server

python3 - "$work" "$(find "$ws" -type f | wc -l)" <<'PY'
import json, sys
work, files = sys.argv[1], sys.argv[2]
def med(name):
    return json.load(open(f"{work}/{name}.json"))["results"][0]["median"] * 1000
print(f"{files} files; medians of 30 runs, ms (hook processes + the command)\n")
print("| call | server | unsandboxed | sandboxed | sandboxed / unsandboxed |")
print("|---|---|---|---|---|")
for label, srv in (("noserver", "no"), ("server", "running")):
    for c, what in (("true", "`true`"), ("write", "writes one file")):
        p, s = med(f"{label}-plain-{c}"), med(f"{label}-sb-{c}")
        print(f"| Bash {what} | {srv} | {p:.1f} | {s:.1f} | {s/p:.2f} |")
PY
