#!/usr/bin/env bash
# Restoring a big turn against git's stat-aware whole-tree restore (docs/benchmarks.md,
# "Restoring a big turn"; issue 26).
#
# One 100,000-file tree (mktree.py: 1,000 directories of 100 files, 100 B to 4 KiB) is both a
# Rewind workspace and a git shadow repository (../shared-style baseline: a separate GIT_DIR
# over the tree, `read-tree -u --reset` as `git-shadow-baseline.sh restore-fast` runs it). One
# turn rewrites 10 files in every directory: 10,000 files. Timed, alternating, RUNS times each:
#   Rewind: `rewind restore C0` (the tree before the turn) and `rewind undo` (back after it);
#   git:    `read-tree -u --reset A` and `read-tree -u --reset B` (the trees before and after).
# Each one rewrites the same 10,000 files. Before timing, the script checks that a restore
# gives the tree before the turn (a digest of every file) and that undo gives the one after.
#
# usage: [RUNS=N] crates/bench/scripts/restore.sh [REWIND_BINARY] [DIRS]   (DIRS x 100 files)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
host=$(rustc -vV | sed -n 's/^host: //p')
rw=${1:-$repo/target/$host/release/rewind}
dirs=${2:-1000}
runs=${RUNS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export REWIND_HOME=$work/home REWIND_QUIET=1
unset REWIND_SESSION
ws=$work/ws
shadow=$work/shadow.git
python3 "$here/mktree.py" "$ws" --dirs "$dirs" --files-per-dir 100 --min 100 --max 4000 \
  --seed 7 > /dev/null
git_s() { git --git-dir="$shadow" --work-tree="$ws" -c core.hooksPath=/dev/null "$@"; }
digest() { (cd "$ws" && find . -type f -print0 | sort -z | xargs -0 sha1sum | sha1sum | cut -c1-16); }
now() { date +%s.%N; }

"$rw" -C "$ws" init > /dev/null
git init -q --bare "$shadow"
git_s add -A
tree_a=$(git_s write-tree)
before=$(digest)
c0=$("$rw" -C "$ws" -s bench --json checkpoint --message before |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
"$rw" -C "$ws" -s bench exec -- python3 -c "
import os
for d in sorted(os.listdir('.')):
    for n in sorted(os.listdir(d))[:10]:
        with open(os.path.join(d, n), 'ab') as f: f.write(b'turn\n')
"
git_s add -A
tree_b=$(git_s write-tree)
after=$(digest)
"$rw" -C "$ws" -s bench checkpoint --message after > /dev/null

# Correctness first: restore gives the tree before the turn, undo the tree after it.
"$rw" -C "$ws" -s bench restore "$c0" > /dev/null
[ "$(digest)" = "$before" ] || { echo "restore did not give the tree before the turn" >&2; exit 1; }
"$rw" -C "$ws" -s bench undo > /dev/null
[ "$(digest)" = "$after" ] || { echo "undo did not give the tree after the turn" >&2; exit 1; }
changed=$("$rw" -C "$ws" -s bench --json restore --dry-run "$c0" |
  python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d.get("steps", d.get("plan", []))))')
echo "tree: $((dirs * 100)) files; the turn changed $changed of them"

declare -a r_restore r_undo g_back g_fwd
git_s read-tree "$tree_b"
git_s update-index -q --refresh > /dev/null || true
for i in $(seq 1 "$runs"); do
  sync
  t0=$(now); "$rw" -C "$ws" -s bench restore "$c0" > /dev/null; t1=$(now)
  r_restore+=("$(python3 -c "print($t1 - $t0)")")
  sync
  t0=$(now); "$rw" -C "$ws" -s bench undo > /dev/null; t1=$(now)
  r_undo+=("$(python3 -c "print($t1 - $t0)")")
  sync
  t0=$(now); git_s read-tree -u --reset "$tree_a"; t1=$(now)
  g_back+=("$(python3 -c "print($t1 - $t0)")")
  sync
  t0=$(now); git_s read-tree -u --reset "$tree_b"; t1=$(now)
  g_fwd+=("$(python3 -c "print($t1 - $t0)")")
done
[ "$(digest)" = "$after" ] || { echo "the timed runs did not end at the tree after the turn" >&2; exit 1; }

python3 - "$runs" "${r_restore[*]}" "${r_undo[*]}" "${g_back[*]}" "${g_fwd[*]}" "$(git -C "$repo" rev-parse --short=12 HEAD)" <<'PY'
import statistics, sys
runs = int(sys.argv[1])
rr, ru, gb, gf = ([float(x) for x in a.split()] for a in sys.argv[2:6])
med = lambda v: statistics.median(v) * 1000
print(f"\nRestoring a 10,000-file turn at `{sys.argv[6]}`, medians of {runs} (ms):\n")
print("| what | Rewind | git `read-tree -u --reset` | git / Rewind |")
print("|---|---|---|---|")
print(f"| back to before the turn (`restore C0`) | {med(rr):.0f} | {med(gb):.0f} | {med(gb)/med(rr):.2f}x |")
print(f"| forward again (`undo`) | {med(ru):.0f} | {med(gf):.0f} | {med(gf)/med(ru):.2f}x |")
PY
