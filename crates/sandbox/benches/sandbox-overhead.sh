#!/usr/bin/env bash
# Whole-process overhead of the sandbox: `true` vs `rewind sandbox exec -- true`, median.
#
#   crates/sandbox/benches/sandbox-overhead.sh [RUNS]
#   REWIND_BEFORE=/path/to/older/rewind crates/sandbox/benches/sandbox-overhead.sh [RUNS]
#
# With REWIND_BEFORE (a binary built from an earlier commit, e.g. in a `git worktree`), that
# binary is measured in the same run too, so a change's cost is a ratio, not two noisy numbers.
#
# Needs bubblewrap; uses hyperfine when installed (apt-get install hyperfine), otherwise a
# plain loop. Builds the release binary first. Prints medians in milliseconds.
set -euo pipefail
runs=${1:-300}
root=$(cd "$(dirname "$0")/../../.." && pwd)
cargo build --release -q -p rewind-cli --manifest-path "$root/Cargo.toml"
triple=$(rustc -vV | sed -n 's/^host: //p')
rewind="${CARGO_TARGET_DIR:-$root/target}/$triple/release/rewind"
truebin=$(command -v true)

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/ws/.git/hooks" "$scratch/state" "$scratch/home"
cd "$scratch/ws"
export REWIND_HOME="$scratch/state" HOME="$scratch/home"
"$rewind" sandbox check >/dev/null

if command -v hyperfine >/dev/null; then
    before=()
    [[ -n "${REWIND_BEFORE:-}" ]] && before=("$REWIND_BEFORE sandbox exec -- $truebin")
    hyperfine -N --warmup 20 --runs "$runs" --export-json "$scratch/h.json" \
        "$truebin" "$rewind sandbox exec -- $truebin" "${before[@]}" >&2
    python3 - "$scratch/h.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
m = [x["median"] * 1000 for x in r]
a, b = m[0], m[1]
print(f"true: {a:.2f} ms  sandbox exec -- true: {b:.2f} ms  overhead: {b - a:.2f} ms (median of {len(r[0]['times'])} runs)")
if len(m) > 2:
    print(f"before: {m[2]:.2f} ms, overhead {m[2] - a:.2f} ms; now/before {b / m[2]:.3f}")
PY
else
    median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)/1e6}'; }
    time_cmd() {
        for _ in $(seq "$runs"); do
            s=$(date +%s%N); "$@" >/dev/null; e=$(date +%s%N); echo $((e - s))
        done | median
    }
    a=$(time_cmd "$truebin"); b=$(time_cmd "$rewind" sandbox exec -- "$truebin")
    echo "true: $a ms  sandbox exec -- true: $b ms (median of $runs runs, date-based loop)"
fi
