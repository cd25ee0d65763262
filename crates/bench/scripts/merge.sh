#!/usr/bin/env bash
# A merged restore against a plain one, same files, same run (docs/benchmarks.md, "Merged
# restore"): 20 files of 2,000 lines; the agent's session rewrites lines 1,500-1,510 of each.
# Plain: the user changed nothing, `restore m1` puts the files back. Merged: the user then
# edited line 2 of each file, `restore m1 --merge` undoes only the agent's lines. Each timed run
# is undone (a restore to m2, not timed) before the next; both are checked to change 20 files.
#
# usage: crates/bench/scripts/merge.sh [REWIND_BINARY]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
host=$(rustc -vV | sed -n 's/^host: //p')
rw=${1:-$repo/target/$host/release/rewind}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export REWIND_HOME=$work/home
unset REWIND_SESSION
setup() { # DIR USER_EDITS
    mkdir -p "$1"
    for f in $(seq -w 1 20); do
        seq 1 2000 | sed 's/^/line /' > "$1/f$f.txt"
    done
    "$rw" -C "$1" init > /dev/null
    "$rw" -C "$1" -s A checkpoint --message m1 > /dev/null
    REWIND_QUIET=1 "$rw" -C "$1" -s A exec -- sh -c "sed -i '1500,1510s/^/AGENT /' f*.txt"
    if [ "$2" = yes ]; then sed -i '2s/^/USER /' "$1"/f*.txt; fi
    # m2: the state each timed restore starts from (restoring to it undoes the timed one).
    "$rw" -C "$1" -s A checkpoint --message m2 > /dev/null
}
setup "$work/plain" no
setup "$work/merged" yes
for v in plain merged; do
    flag=; [ $v = merged ] && flag=--merge
    n=$("$rw" -C "$work/$v" -s A --json restore m1 $flag --dry-run | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["steps"]))')
    [ "$n" = 20 ] || { echo "$v restores $n files, not 20" >&2; exit 1; }
done
hyperfine -N --warmup 2 --runs 15 --export-markdown "$work/out.md" \
    --prepare "$rw -C $work/plain -s A restore m2" \
    -n plain "$rw -C $work/plain -s A restore m1" \
    --prepare "$rw -C $work/merged -s A restore m2" \
    -n merged "$rw -C $work/merged -s A restore m1 --merge" >/dev/null 2>&1 || {
        echo "hyperfine failed" >&2; exit 1; }
cat "$work/out.md"
