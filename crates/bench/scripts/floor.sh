#!/usr/bin/env bash
# Rewind and git against the floor: the work no capture can skip, done by the plainest code
# (`rewind-bench floor`, see crates/bench/src/floor.rs), in the same run (docs/benchmarks.md,
# "Against the floor"; issue 26).
#
# One tree of DIRS directories of FILES_PER_DIR files (mktree.py, random bytes of 1-8 KiB, seed
# 11; by default 1,000 x 100), then, alternating ROUNDS times (`sync` before each command):
#   first capture: git's shadow `init` + `track` (a new GIT_DIR), `rewind init` (a new
#                  $REWIND_HOME), `rewind-bench floor capture` (read, hash, write, flush);
# then, alternating NOOPS times on the captured tree:
#   no-op:         git's `track`, `rewind exec -- true`, `rewind-bench floor walk` (list and
#                  `lstat` everything).
# Prints every time, then the medians and the ratios git / Rewind and git / floor: the floor's
# ratio is the most any tool that looks at every file could reach on this machine.
#
# usage: [ROUNDS=3] [NOOPS=15] [DIRS=1000] [FILES_PER_DIR=100] \
#        crates/bench/scripts/floor.sh [REWIND_BINARY [REWIND_BENCH_BINARY]]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
host=$(rustc -vV | sed -n 's/^host: //p')
rw=${1:-$repo/target/$host/release/rewind}
fl=${2:-$(dirname "$rw")/rewind-bench}
[ -x "$rw" ] || { echo "no rewind binary at $rw (cargo build --release -p rewind-cli)" >&2; exit 2; }
[ -x "$fl" ] || { echo "no rewind-bench binary at $fl (cargo build --release -p rewind-bench)" >&2; exit 2; }
rounds=${ROUNDS:-3} noops=${NOOPS:-15}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export REWIND_QUIET=1 GIT_CONFIG_NOSYSTEM=1 HOME=$work
unset REWIND_SESSION
ws=$work/ws
python3 "$here/mktree.py" "$ws" --dirs "${DIRS:-1000}" --files-per-dir "${FILES_PER_DIR:-100}" \
  --min 1024 --max 8192 --kind binary --seed 11 > /dev/null
git_sh=$here/git-shadow-baseline.sh
out=$work/times
# One timed command: label, then the command; prints and records "label ms".
timed() {
  local label=$1; shift
  sync
  local t0 t1
  t0=$(date +%s%N)
  "$@" > /dev/null
  t1=$(date +%s%N)
  echo "$label $(( (t1 - t0) / 1000000 ))" | tee -a "$out"
}
first_git() { rm -rf "$work/git"; bash "$git_sh" init "$ws" "$work/git" && bash "$git_sh" track "$ws" "$work/git"; }
first_rewind() { rm -rf "$work/home"; REWIND_HOME=$work/home "$rw" -C "$ws" init; }
first_floor() { rm -rf "$work/floor"; mkdir "$work/floor"; "$fl" floor capture "$ws" --out "$work/floor"; }
for r in $(seq 1 "$rounds"); do
  timed first-git first_git
  timed first-rewind first_rewind
  timed first-floor first_floor
  # Per round too: git's time grows round after round on one volume (each round frees the
  # inodes of its 100,000 loose objects, which ext4's allocator then skips).
  tail -3 "$out" | awk -v r="$r" '{t[NR] = $2} END {
    printf "round %d: git / rewind %.2fx, git / floor %.2fx\n", r, t[1] / t[2], t[1] / t[3] }'
done
rm -rf "$work/floor"
# Both tools have captured the tree; their caches vouch for it once a second has passed.
sleep 1.1
bash "$git_sh" track "$ws" "$work/git" > /dev/null
REWIND_HOME=$work/home "$rw" -C "$ws" exec -- true > /dev/null
for r in $(seq 1 "$noops"); do
  timed noop-git bash "$git_sh" track "$ws" "$work/git"
  timed noop-rewind env REWIND_HOME="$work/home" "$rw" -C "$ws" exec -- true
  timed noop-floor "$fl" floor walk "$ws"
done
median() { awk -v k="$1" '$1 == k {print $2}' "$out" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo
echo "medians (ms) and ratios (git's time / the other's):"
for phase in first noop; do
  g=$(median "$phase-git") r=$(median "$phase-rewind") f=$(median "$phase-floor")
  awk -v p="$phase" -v g="$g" -v r="$r" -v f="$f" 'BEGIN {
    printf "%-6s git %6d  rewind %6d (%.2fx)  floor %6d (%.2fx)\n", p, g, r, g / r, f, g / f }'
done
