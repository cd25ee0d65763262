#!/usr/bin/env bash
# Worktrees against git worktrees, same tree, same run (docs/benchmarks.md, "Worktrees").
#
# One 100,000-file text tree (mktree.py --kind text) is both a git repository (one commit) and
# a Rewind workspace. Timed:
#   create: `rewind worktree create` against `git worktree add --detach` of the same tree;
#   merge:  20 files changed in the worktree (a line appended to each) and 20 other files
#           changed and committed in the parent; `rewind worktree merge` against `git merge`
#           (merge-ort) of a branch with the same 20 changes, made in a git worktree.
# Before timing, the script checks that the merge plan has exactly the 20 paths and that a
# merge writes exactly those 20 files (nothing else in the tree gets a newer mtime). It says
# whether the file system gave reflinks.
#
# usage: [RUNS=N] crates/bench/scripts/worktree.sh [REWIND_BINARY] [DIRS]   (DIRS x 100 files; 1000)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
host=$(rustc -vV | sed -n 's/^host: //p')
rw=${1:-$repo/target/$host/release/rewind}
dirs=${2:-1000}
work=$(mktemp -d)
trap 'git -C "$work/src" worktree prune >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
export REWIND_HOME=$work/home
unset REWIND_SESSION
export REWIND_QUIET=1 GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b
src=$work/src
python3 "$here/mktree.py" "$src" --kind text --dirs "$dirs" > /dev/null
git -C "$src" init -q -b main
git -C "$src" -c core.hooksPath=/dev/null add -A
git -C "$src" -c core.hooksPath=/dev/null commit -qm base
"$rw" -C "$src" init > /dev/null
echo "tree: $(find "$src" -path "$src/.git" -prune -o -type f -print | wc -l) files"

# --- create ----------------------------------------------------------------------------------
"$rw" -C "$src" --json worktree create probe > "$work/probe.json"
python3 - "$work/probe.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"worktree create: {d['files']} files, reflinks: {d['reflinks']} ({d['reflinked']} cloned)")
PY
"$rw" -C "$src" worktree discard probe > /dev/null
hyperfine --warmup 1 --runs "${RUNS:-5}" --export-markdown "$work/create.md" \
    --prepare "$rw -C $src worktree discard bench --force >/dev/null 2>&1 || true; sync" \
    -n "rewind worktree create" "$rw -C $src worktree create bench" \
    --prepare "git -C $src worktree remove --force $work/gwt >/dev/null 2>&1 || true; rm -rf $work/gwt; git -C $src worktree prune; sync" \
    -n "git worktree add" "git -C $src -c core.hooksPath=/dev/null worktree add -q --detach $work/gwt" \
    > /dev/null
cat "$work/create.md"
"$rw" -C "$src" worktree discard bench --force > /dev/null 2>&1 || true
git -C "$src" worktree remove --force "$work/gwt" > /dev/null 2>&1 || true

# --- merge -----------------------------------------------------------------------------------
theirs=$(cd "$src" && find d0001 -name '*' -type f | sort | head -20)
ours=$(cd "$src" && find d0002 -name '*' -type f | sort | head -20)
wt=$("$rw" -C "$src" worktree create m | tail -1)
git -C "$src" -c core.hooksPath=/dev/null worktree add -q -b theirs "$work/gm"
for f in $theirs; do
    echo "appended in the worktree" >> "$wt/$f"
    echo "appended in the worktree" >> "$work/gm/$f"
done
git -C "$work/gm" -c core.hooksPath=/dev/null commit -qam theirs
for f in $ours; do echo "appended in the parent" >> "$src/$f"; done
git -C "$src" -c core.hooksPath=/dev/null commit -qam ours
pre=$(git -C "$src" rev-parse HEAD)
n=$("$rw" -C "$src" -s bench --json worktree merge m --dry-run | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["steps"]))')
[ "$n" = 20 ] || { echo "the merge plan has $n paths, not 20" >&2; exit 1; }
touch "$work/marker"; sleep 0.05
"$rw" -C "$src" -s bench worktree merge m > /dev/null
written=$(find "$src" -path "$src/.git" -prune -o -newer "$work/marker" -type f -print | wc -l)
[ "$written" = 20 ] || { echo "the merge wrote $written files, not 20" >&2; exit 1; }
echo "worktree merge: plan of 20 paths, 20 files written, nothing else touched"
# Each timed merge starts from the merge before it undone (the first: the checked one).
hyperfine --warmup 1 --runs "${RUNS:-10}" --export-markdown "$work/merge.md" \
    --prepare "$rw -C $src -s bench undo >/dev/null 2>&1 || true" \
    -n "rewind worktree merge" "$rw -C $src -s bench worktree merge m" \
    --prepare "git -C $src reset -q --hard $pre" \
    -n "git merge (ort)" "git -C $src -c core.hooksPath=/dev/null merge -q --no-edit -s ort theirs" \
    > /dev/null
cat "$work/merge.md"
