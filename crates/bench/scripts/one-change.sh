#!/usr/bin/env bash
# An epoch that changes one file, and a no-op epoch, against git's shadow-repository `track`
# (docs/benchmarks.md, "One change, no server"; issue 26).
#
# One tree of FILES files in DIRS directories (mktree.py, 100 B to 4 KiB, seed 5; by default
# 100,000 files in one directory),
# copied once per binary given (a Rewind workspace each, with its own $REWIND_HOME) and once
# for git (a shadow repository, git-shadow-baseline.sh: a separate GIT_DIR, `add --all` +
# `write-tree`), so that no side's change is an external change for another. Timed,
# alternating, RUNS times each, wall time of each process:
#   Rewind: `exec -- sh -c 'echo … >> d0000/fN.bin'` (an opaque epoch whose command appends to
#           one existing file), and `exec -- true` (a no-op epoch);
#   git:    the same append, then `track`; and `track` with nothing changed.
# Appending changes no directory's mtime, as an agent editing a file in place does not.
#
# usage: [RUNS=N] [FILES=N] [DIRS=N] crates/bench/scripts/one-change.sh [REWIND_BINARY...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
host=$(rustc -vV | sed -n 's/^host: //p')
[ $# -gt 0 ] || set -- "$repo/target/$host/release/rewind"
runs=${RUNS:-10}
files=${FILES:-100000}
dirs=${DIRS:-1}
per=$((files / dirs))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export REWIND_QUIET=1
unset REWIND_SESSION
ws=$work/git
python3 "$here/mktree.py" "$ws" --dirs "$dirs" --files-per-dir "$per" --min 100 --max 4000 \
  --seed 5 > /dev/null
git_track() { bash "$here/git-shadow-baseline.sh" track "$ws" "$work/shadow.git" > /dev/null; }
bash "$here/git-shadow-baseline.sh" init "$ws" "$work/shadow.git"
git_track
for i in $(seq 1 $#); do
  cp -a "$ws" "$work/ws$i"
  REWIND_HOME=$work/home$i "${!i}" -C "$work/ws$i" init > /dev/null
done
# The stat cache vouches for a directory's listing once its stamp is a second old: one
# epoch per binary after that, as an agent's second command would find it.
sleep 1.1
for i in $(seq 1 $#); do
  REWIND_HOME=$work/home$i "${!i}" -C "$work/ws$i" exec -- true > /dev/null
done
git_track

now() { date +%s.%N; }
out=$work/times
: > "$out"
for r in $(seq 1 "$runs"); do
  for i in $(seq 1 $#); do
    n=$(( (r * 7919 + i * 104729) % files ))
    f=$(printf 'd%04d/f%03d.bin' $((n / per)) $((n % per)))
    t0=$(now); REWIND_HOME=$work/home$i "${!i}" -C "$work/ws$i" exec -- sh -c "echo r$r >> $f" > /dev/null; t1=$(now)
    echo "rewind$i change $t0 $t1" >> "$out"
    t0=$(now); REWIND_HOME=$work/home$i "${!i}" -C "$work/ws$i" exec -- true > /dev/null; t1=$(now)
    echo "rewind$i noop $t0 $t1" >> "$out"
  done
  n=$(( (r * 15485863) % files ))
  f=$(printf 'd%04d/f%03d.bin' $((n / per)) $((n % per)))
  echo "g$r" >> "$ws/$f"
  t0=$(now); git_track; t1=$(now)
  echo "git change $t0 $t1" >> "$out"
  t0=$(now); git_track; t1=$(now)
  echo "git noop $t0 $t1" >> "$out"
done
# Every epoch above recorded its one append (and the no-ops nothing).
for i in $(seq 1 $#); do
  REWIND_HOME=$work/home$i "${!i}" -C "$work/ws$i" --json log --limit 100000 | python3 -c '
import json, sys
runs = int(sys.argv[1])
eps = [e for e in json.load(sys.stdin)["items"] if e["type"] == "epoch" and e["tool"] == "exec"]
change = [e["changes"] for e in eps if e["note"].startswith("sh ")]
noop = [e["changes"] for e in eps if e["note"] == "true"]
assert len(change) == runs and set(change) == {1}, ("an append was not recorded as one change", change)
assert set(noop) == {0}, ("a no-op epoch recorded changes", noop)
' "$runs" || { echo "binary $i did not record the appends exactly" >&2; exit 1; }
done

python3 - "$out" "$files" "$dirs" "$runs" "$@" <<'PY'
import statistics, sys, collections
path, files, dirs, runs, bins = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:]
t = collections.defaultdict(list)
for line in open(path):
    who, what, a, b = line.split()
    t[(who, what)].append((float(b) - float(a)) * 1000)
med = lambda k: statistics.median(t[k])
print(f"\n{files:,} files in {dirs:,} director{'y' if dirs == 1 else 'ies'}, medians of {runs} (ms):\n")
print("| binary | one file changed | git ÷ Rewind | no-op | git ÷ Rewind |")
print("|---|---|---|---|---|")
for i, b in enumerate(bins, 1):
    c, n = med((f"rewind{i}", "change")), med((f"rewind{i}", "noop"))
    print(f"| {b.rsplit('/', 1)[-1]} | {c:.0f} | {med(('git','change'))/c:.2f}x | {n:.0f} | {med(('git','noop'))/n:.2f}x |")
print(f"| git `track` | {med(('git','change')):.0f} | | {med(('git','noop')):.0f} | |")
PY
