#!/bin/sh
# Before/after: two `rewind` binaries on the same tree, in one run (hyperfine measures each
# command's samples back to back, the two commands one after the other), for a change that
# must not move the figures (a refactor).
#
#   crates/bench/scripts/before-after.sh OLD_REWIND NEW_REWIND TREE [OUT_DIR]
#
# TREE: a workspace to capture (for example `mktree.py --dirs 400 --files-per-dir 100
# --kind text TREE`, 40k files). Each binary gets its own state directory; the tree is only
# read (init and a no-op exec capture it; status reads the state). Writes init.md, exec.md and
# status.md (hyperfine's Markdown tables) to OUT_DIR [default: the current directory].
set -eu
B=$1 A=$2 T=$3 OUT=${4:-.}
HB=$(mktemp -d) HA=$(mktemp -d)
trap 'rm -rf "$HB" "$HA"' EXIT
export REWIND_QUIET=1
hyperfine -N -w 1 -r 6 --export-markdown "$OUT/init.md" \
  --prepare "rm -rf $HB/s" -n before "env REWIND_HOME=$HB/s $B -C $T init" \
  --prepare "rm -rf $HA/s" -n after "env REWIND_HOME=$HA/s $A -C $T init"
REWIND_HOME=$HB/s "$B" -C "$T" init >/dev/null
REWIND_HOME=$HA/s "$A" -C "$T" init >/dev/null
hyperfine -N -w 2 -r 15 --export-markdown "$OUT/exec.md" \
  -n before "env REWIND_HOME=$HB/s $B -C $T exec -- true" \
  -n after "env REWIND_HOME=$HA/s $A -C $T exec -- true"
hyperfine -N -w 2 -r 20 --export-markdown "$OUT/status.md" \
  -n before "env REWIND_HOME=$HB/s $B -C $T status" \
  -n after "env REWIND_HOME=$HA/s $A -C $T status"
