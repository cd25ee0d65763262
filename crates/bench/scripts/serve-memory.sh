#!/usr/bin/env bash
# The private memory of `rewind serve` under a load like the load test's
# (crates/cli/tests/serve.rs, fifty_clients_for_a_minute): CLIENTS clients over its socket,
# each its own session and file, issuing guarded writes, commands, checkpoints and restores
# for SECONDS. Prints the answers and the server's RssAnon in MB every 5 s
# (docs/benchmarks.md, "The server under 50 clients: memory").
#
# usage: crates/bench/scripts/serve-memory.sh REWIND_BINARY [SECONDS] [CLIENTS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rw=$1 secs=${2:-60} n=${3:-50}
work=$(mktemp -d) server=
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
export REWIND_HOME=$work/home HOME=$work
for i in $(seq 0 $((n - 1))); do mkdir -p "$work/ws/c$i"; echo 0 > "$work/ws/c$i/f.txt"; done
"$rw" -C "$work/ws" init >/dev/null
sock=$work/serve.sock
"$rw" -C "$work/ws" serve --socket "$sock" >/dev/null 2>"$work/err" &
server=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
(while kill -0 "$server" 2>/dev/null; do
    awk '/^RssAnon:/ {printf "%d ", $2 / 1024}' "/proc/$server/status" 2>/dev/null || true
    sleep 5
done) > "$work/rss" &
python3 "$here/serve-load.py" "$sock" "$secs" "$n"
kill -TERM "$server"; wait "$server" || true; server=
echo "private memory (MB) every 5 s: $(cat "$work/rss")"
