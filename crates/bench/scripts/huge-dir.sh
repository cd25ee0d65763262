#!/usr/bin/env bash
# One-file epochs in a huge directory: what each costs in time and in store growth
# (docs/benchmarks.md, "A huge directory's tree in parts"; issue 26).
#
# One tree of FILES files in one directory (mktree.py, 100 B to 4 KiB, seed 5; by default
# 100,000), copied once per binary given (a Rewind workspace each, with its own $REWIND_HOME).
# Alternating, RUNS times: `exec -- sh -c 'echo … >> d0000/fN.bin'` (an opaque epoch whose
# command appends to one existing file). Prints, per epoch, the binary, its wall time in ms and
# how many bytes its workspace's state grew (packs and databases; the stat cache, rewritten
# whole every time, left out), then the medians.
#
# usage: [RUNS=N] [FILES=N] crates/bench/scripts/huge-dir.sh [REWIND_BINARY...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
host=$(rustc -vV | sed -n 's/^host: //p')
[ $# -gt 0 ] || set -- "$repo/target/$host/release/rewind"
runs=${RUNS:-10}
files=${FILES:-100000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export REWIND_QUIET=1
unset REWIND_SESSION
python3 "$here/mktree.py" "$work/tree" --dirs 1 --files-per-dir "$files" --min 100 --max 4000 \
  --seed 5 > /dev/null
for i in $(seq 1 $#); do
  cp -a "$work/tree" "$work/ws$i"
  REWIND_HOME=$work/home$i "${!i}" -C "$work/ws$i" init > /dev/null
done
# The stat cache vouches for the listing once its stamp is a second old.
sleep 1.1
for i in $(seq 1 $#); do
  REWIND_HOME=$work/home$i "${!i}" -C "$work/ws$i" exec -- true > /dev/null
done
state_bytes() { du -sb --exclude=state.bin "$work/home$1/workspaces" | cut -f1; }
out=$work/times
for r in $(seq 1 "$runs"); do
  for i in $(seq 1 $#); do
    n=$(( (r * 7919 + i) % files ))
    f=$(printf 'd0000/f%03d.bin' "$n")
    [ -f "$work/ws$i/$f" ] || { echo "no $f in the tree" >&2; exit 1; }
    s0=$(state_bytes "$i")
    t0=$(date +%s%N)
    REWIND_HOME=$work/home$i "${!i}" -C "$work/ws$i" exec -- sh -c "echo r$r >> $f" > /dev/null
    t1=$(date +%s%N)
    s1=$(state_bytes "$i")
    echo "$i ${!i} $(( (t1 - t0) / 1000000 )) $((s1 - s0))" | tee -a "$out"
  done
done
echo "medians (binary, ms, bytes the state grew; total growth over $runs epochs):"
for i in $(seq 1 $#); do
  ms=$(awk -v i="$i" '$1 == i {print $3}' "$out" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  b=$(awk -v i="$i" '$1 == i {print $4}' "$out" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  total=$(awk -v i="$i" '$1 == i {s += $4} END {print s}' "$out")
  echo "${!i} $ms ms $b B (total $total B)"
done
