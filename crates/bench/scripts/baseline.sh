#!/usr/bin/env bash
# A time budget that never blocks and still finishes (docs/benchmarks.md, "Background
# baseline"; issue 26).
#
# One tree (mktree.py: DIRS directories of 100 files, 100 B to 4 KiB; 3,000 gives 300,000
# files), registered RUNS times each way into a fresh $REWIND_HOME, alternating:
#   unbudgeted: `rewind init` (the whole first capture in the foreground), its wall time and
#               peak memory (GNU time's maximum resident set size);
#   budgeted:   `capture.time_budget = "1s"`: the wall time of `rewind init`, and the time from
#               its start until the background `rewind baseline` it started is done (no
#               `baseline.due`, `baseline.lock` free; polled every 50 ms), after which `status
#               --json` must list no uncovered path.
# The page cache is warm for both (the tree is read again before each timed command).
#
# usage: [RUNS=N] crates/bench/scripts/baseline.sh [REWIND_BINARY] [DIRS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
host=$(rustc -vV | sed -n 's/^host: //p')
rw=${1:-$repo/target/$host/release/rewind}
dirs=${2:-3000}
runs=${RUNS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export REWIND_QUIET=1
unset REWIND_SESSION
ws=$work/ws
python3 "$here/mktree.py" "$ws" --dirs "$dirs" --files-per-dir 100 --min 100 --max 4000 \
  --seed 11 > /dev/null
# Read the whole tree, so that every timed command finds it in the page cache: before each,
# not once, since a VM may reclaim cold pages between runs (a foreground baseline then took
# 1.5-2x as long).
warm() { find "$ws" -type f -exec cat {} + > /dev/null; }
now() { date +%s.%N; }
# Done: no `baseline.due` marker and nobody holds `baseline.lock` (cheap to poll: `status`
# would load the stat cache and list every uncovered path, competing with what it measures).
baseline_done() {
  local d
  d=$(echo "$REWIND_HOME"/workspaces/*/)
  [ ! -e "$d/baseline.due" ] && flock -n "$d/baseline.lock" true
}
all_covered() {
  "$rw" -C "$ws" --json status | python3 -c '
import json, sys
s = json.load(sys.stdin)
sys.exit(0 if s.get("baseline") is None and not s["uncovered"] else 1)'
}

declare -a plain plain_rss budget_init budget_done
for i in $(seq 1 "$runs"); do
  rm -f "$ws/.rewind.toml"
  export REWIND_HOME=$work/home-plain-$i
  warm
  t0=$(now)
  /usr/bin/time -f '%M' -o "$work/rss" "$rw" -C "$ws" init > /dev/null
  t1=$(now)
  plain+=("$(python3 -c "print($t1 - $t0)")")
  plain_rss+=("$(cat "$work/rss")")
  rm -rf "$REWIND_HOME"

  printf '[capture]\ntime_budget = "1s"\n' > "$ws/.rewind.toml"
  export REWIND_HOME=$work/home-budget-$i
  warm
  t0=$(now)
  "$rw" -C "$ws" init > /dev/null
  t1=$(now)
  until baseline_done; do sleep 0.05; done
  t2=$(now)
  all_covered || { echo "the background baseline left files uncovered" >&2; exit 1; }
  budget_init+=("$(python3 -c "print($t1 - $t0)")")
  budget_done+=("$(python3 -c "print($t2 - $t0)")")
  rm -rf "$REWIND_HOME"
done
rm -f "$ws/.rewind.toml"

python3 - "$runs" "$((dirs * 100))" "${plain[*]}" "${plain_rss[*]}" "${budget_init[*]}" \
  "${budget_done[*]}" "$(git -C "$repo" rev-parse --short=12 HEAD)" <<'PY'
import statistics, sys
runs, files = int(sys.argv[1]), int(sys.argv[2])
plain, rss, binit, bdone = ([float(x) for x in a.split()] for a in sys.argv[3:7])
med = statistics.median
print(f"\nFirst capture of {files:,} files at `{sys.argv[7]}`, medians of {runs}:\n")
print("| what | time | ratio |")
print("|---|---|---|")
print(f"| `init`, no budget | {med(plain):.2f} s | 1.00x |")
print(f"| `init` with `time_budget = \"1s\"`: until it returns | {med(binit):.2f} s | {med(binit)/med(plain):.2f}x |")
print(f"| the same: until the background baseline is done | {med(bdone):.2f} s | {med(bdone)/med(plain):.2f}x |")
print(f"\nPeak memory of `init` without a budget (max RSS): {med(rss)/1024:.0f} MiB")
print(f"runs: plain {plain}, budgeted init {binit}, budgeted done {bdone}, rss KiB {rss}")
PY
