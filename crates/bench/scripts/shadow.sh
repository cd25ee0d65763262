#!/usr/bin/env bash
# Shadow history benchmark (issue 14): on a 100k-file tree,
#   1. a checkpoint after a 20-file turn, with the shadow history on (the repository exists,
#      `[shadow] eager = true`: the checkpoint writes its commit) and off (`eager = false`);
#   2. the first `rewind shadow-path` (the whole tree into a new shadow repository) against
#      `git add -A && git commit` of the same tree into a new bare repository.
# Each pair is one hyperfine run (the two commands' samples back to back), so its ratio is
# measured under the same load.
#
# usage: crates/bench/scripts/shadow.sh [DIRS] [FILES_PER_DIR] [OUT_DIR]
#   defaults 1000 x 100 files (mktree.py --kind text --min 512 --max 4096: 100,000 files),
#   hyperfine's Markdown tables written to OUT_DIR [default: a temporary directory, printed].
#   TREE=DIR: use (and change: the turns rewrite files) that tree instead of making one.
# Builds the release binary. Needs git, python3 and hyperfine.
set -euo pipefail
cd "$(dirname "$0")/../../.."
dirs=${1:-1000}
per=${2:-100}
target=${CARGO_TARGET_DIR:-target}
bin=$(realpath "$target/$(rustc -vV | sed -n 's/^host: //p')/release/rewind")
cargo build --release -p rewind-cli >&2

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rewind-shadow-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
out=${3:-$tmp/out}
mkdir -p "$out"
ws=${TREE:-$tmp/ws} on=$tmp/home-on off=$tmp/home-off
export REWIND_QUIET=1
[ -d "$ws" ] || python3 crates/bench/scripts/mktree.py "$ws" --dirs "$dirs" \
  --files-per-dir "$per" --kind text --min 512 --max 4096 >&2
mkdir -p "$on" "$off"
printf '[shadow]\neager = true\n' > "$on/config.toml"
printf '[shadow]\neager = false\n' > "$off/config.toml"
REWIND_HOME=$on "$bin" -C "$ws" init >/dev/null
REWIND_HOME=$off "$bin" -C "$ws" init >/dev/null
REWIND_HOME=$on "$bin" -C "$ws" -s agent checkpoint --message m0 >/dev/null
REWIND_HOME=$off "$bin" -C "$ws" -s agent checkpoint --message m0 >/dev/null
REWIND_HOME=$on "$bin" -C "$ws" shadow-path >/dev/null

# A turn: 20 files of 20 directories rewritten (new content each time).
cat > "$tmp/turn.py" <<'PY'
import os, random, sys
root = sys.argv[1]
r = random.Random()
for d in r.sample(sorted(os.listdir(root)), 20):
    names = sorted(os.listdir(os.path.join(root, d)))
    with open(os.path.join(root, d, r.choice(names)), "a") as f:
        f.write("turn %d\n" % r.getrandbits(64))
PY

# 1. Checkpoint after a 20-file turn. The turn is the prepare step (not timed), and each home
# sees the other's turns too (one tree): the same work for both.
hyperfine -N -w 2 -r ${RUNS:-20} --export-markdown "$out/checkpoint.md" \
  --prepare "python3 $tmp/turn.py $ws" \
  -n "shadow on" "env REWIND_HOME=$on $bin -C $ws -s agent checkpoint" \
  --prepare "python3 $tmp/turn.py $ws" \
  -n "shadow off" "env REWIND_HOME=$off $bin -C $ws -s agent checkpoint"
commits=$(git --git-dir "$(REWIND_HOME=$on "$bin" -C "$ws" shadow-path)" rev-list --count agent)
echo "commits on the agent branch after the run: $commits (1 + warm-up + runs: every checkpoint wrote its commit)" >&2

# 2. The first shadow commit of the whole tree against git's.
shadow_dir=$(REWIND_HOME=$on "$bin" -C "$ws" shadow-path)
g=$tmp/git.git
gitc="git --git-dir=$g --work-tree=$ws -c user.name=b -c user.email=b@b -c gc.auto=0 -c core.hooksPath=/dev/null"
hyperfine -N -w 0 -r ${FIRST_RUNS:-3} --export-markdown "$out/first.md" \
  --prepare "rm -rf $shadow_dir" \
  -n "rewind shadow-path (first)" "env REWIND_HOME=$on $bin -C $ws shadow-path" \
  --prepare "sh -c 'rm -rf $g && git init -q --bare $g'" \
  -n "git add -A && git commit" "sh -c '$gitc add -A && $gitc commit -qm x'"
git --git-dir "$shadow_dir" fsck --strict --no-dangling >&2 && echo "git fsck --strict: clean" >&2
echo "shadow repository: $(du -sb "$shadow_dir" | cut -f1) bytes; git's: $(du -sb "$g" | cut -f1) bytes" >&2
cat "$out/checkpoint.md" "$out/first.md"
