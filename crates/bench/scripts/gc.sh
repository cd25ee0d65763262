#!/usr/bin/env bash
# Retention benchmark (issue 13): the same history in Rewind and in the git "shadow repository"
# baseline, then drop the oldest 80 % of it in both and time it.
#
#   Rewind: `rewind gc --keep K --max-age 0s` (K = the newest fifth of the checkpoints).
#   (with `--max-age 0s`: every older checkpoint may go)
#   git:    the commit at the same point made the shallow boundary (`.git/shallow`, as
#           `git fetch --depth` does), reflogs expired, then `git gc --prune=now`.
#
# Then a gc with nothing to collect, and the cost of an exact epoch (`rewind write`) alone and
# while gc runs in a loop beside it.
#
# usage: crates/bench/scripts/gc.sh [FILES] [CHECKPOINTS] [CHANGED_PER_TURN]
#   defaults 20000 files (4 KiB each, 200 directories), 100 checkpoints, 200 files per turn.
# Builds the release binary; prints a Markdown table. Needs git and python3.
# With GC_BENCH_SAVE=DIR, the built history (workspace, Rewind's home, git's repository) is
# copied to DIR before anything is dropped; GC_BENCH_FROM=DIR then times gc again on a copy of
# it (give the same FILES CHECKPOINTS CHANGED_PER_TURN) instead of building it anew: building
# the issue's full size, 100,000 files and 500 checkpoints, takes most of an hour.
set -euo pipefail
cd "$(dirname "$0")/../../.."
files=${1:-20000}
ckpts=${2:-100}
churn=${3:-200}
keep=$((ckpts / 5))
target=${CARGO_TARGET_DIR:-target}
bin=$target/$(rustc -vV | sed -n 's/^host: //p')/release/rewind
cargo build --release -p rewind-cli >&2
rev=$(git rev-parse --short=12 HEAD)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rewind-gc-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
ws=$tmp/ws
shadow=$tmp/shadow.git
export REWIND_HOME=$tmp/home REWIND_QUIET=1
mkdir -p "$ws"
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.2f}')"; }
bytes() { du -sb "$1" | cut -f1; }
mib() { python3 -c "print(f'{$1 / 1048576:.1f}')"; }
git_s() { git --git-dir="$shadow" --work-tree="$ws" -c user.name=b -c user.email=b@b -c gc.auto=0 "$@"; }

build_history() {
# The tree: FILES files of 4 KiB of random bytes (incompressible: sizes are what is stored).
python3 - "$ws" "$files" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, f"d{i % 200:03}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i}.bin"), "wb") as f:
        f.write(os.urandom(4096))
EOF
"$bin" -C "$ws" init >/dev/null
git init -q --bare "$shadow"
git_s add -A && git_s commit -qm init

# CHECKPOINTS turns: a checkpoint, then an exec that rewrites CHANGED_PER_TURN files.
commits=()
started=$(now)
for t in $(seq 1 "$ckpts"); do
  if ((t % 25 == 0)); then echo "turn $t of $ckpts, $(secs "$started" "$(now)") s" >&2; fi
  "$bin" -C "$ws" -s agent checkpoint --message "m$t" >/dev/null
  git_s add -A && git_s commit -q --allow-empty -m "m$t"
  commits+=("$(git_s rev-parse HEAD)")
  "$bin" -C "$ws" -s agent exec -- python3 -c "
import os, random
r = random.Random($t)
for i in r.sample(range($files), $churn):
    with open(f'd{i % 200:03}/f{i}.bin', 'wb') as f: f.write(os.urandom(4096))
"
done
"$bin" -C "$ws" -s agent checkpoint --message end >/dev/null
git_s add -A && git_s commit -q --allow-empty -m end
git_s gc -q # the baseline as a maintained repository keeps it: packed, before the drop
}

if [[ -n ${GC_BENCH_FROM:-} ]]; then
  cp -a "$GC_BENCH_FROM"/ws "$GC_BENCH_FROM"/home "$GC_BENCH_FROM"/shadow.git "$tmp"/
  mapfile -t commits <"$GC_BENCH_FROM"/commits
  sync # the copy's writeback would run beside the timed gc
  # The copy is another directory than the one the history was registered for: move it here.
  "$bin" workspace move "$(basename "$(echo "$REWIND_HOME"/workspaces/*)")" "$ws" >/dev/null
else
  build_history
fi

state=$(echo "$REWIND_HOME"/workspaces/*)
if [[ -n ${GC_BENCH_SAVE:-} ]]; then
  mkdir -p "$GC_BENCH_SAVE"
  cp -a "$ws" "$REWIND_HOME" "$shadow" "$GC_BENCH_SAVE"/
  printf '%s\n' "${commits[@]}" >"$GC_BENCH_SAVE/commits"
fi
r_before=$(bytes "$state")
g_before=$(bytes "$shadow")
sync

t0=$(now)
"$bin" -C "$ws" gc --keep "$keep" --max-age 0s >/dev/null
t1=$(now)
r_after=$(bytes "$state")
r_gc=$(secs "$t0" "$t1")

# git: the commit of the first kept checkpoint becomes the history's start.
boundary=${commits[$((ckpts - keep + 1))]}
echo "$boundary" >"$shadow/shallow"
git_s reflog expire --expire=now --all
sync
t0=$(now)
git_s gc -q --prune=now
t1=$(now)
g_after=$(bytes "$shadow")
g_gc=$(secs "$t0" "$t1")

# A gc with nothing to collect (median of 5).
noop=()
for _ in 1 2 3 4 5; do
  t0=$(now)
  "$bin" -C "$ws" gc --keep "$keep" --max-age 0s >/dev/null
  t1=$(now)
  noop+=("$(secs "$t0" "$t1")")
done
noop_med=$(printf '%s\n' "${noop[@]}" | sort -n | sed -n 3p)

# An exact epoch (a guarded write of one file), 30 times alone, then 30 times beside a gc loop.
"$bin" -C "$ws" -s w read d000/f0.bin >/dev/null
write_loop() {
  local t0 t1
  t0=$(now)
  for i in $(seq 1 30); do
    head -c 4096 /dev/urandom | "$bin" -C "$ws" -s w write d000/f0.bin >/dev/null
  done
  t1=$(now)
  python3 -c "print(f'{($t1 - $t0) / 30 * 1000:.1f}')"
}
alone=$(write_loop)
(
  end=$(($(date +%s) + 600))
  while [[ -e $tmp/gc-loop && $(date +%s) -lt $end ]]; do
    "$bin" -C "$ws" gc --keep "$keep" --max-age 0s >/dev/null || true
  done
) &
touch "$tmp/gc-loop"
sleep 0.2
beside=$(write_loop)
rm -f "$tmp/gc-loop"
wait

cat <<EOF
Retention benchmark at \`$rev\`: $files files of 4 KiB, $ckpts checkpoints of $churn changed files
each, the newest $keep kept.

| | Rewind | git shadow baseline |
|---|---|---|
| state before | $(mib "$r_before") MiB | $(mib "$g_before") MiB |
| state after dropping the oldest 80 % | $(mib "$r_after") MiB | $(mib "$g_after") MiB |
| freed | $(python3 -c "print(f'{100 * (1 - $r_after / $r_before):.0f}')") % | $(python3 -c "print(f'{100 * (1 - $g_after / $g_before):.0f}')") % |
| time of the gc | $r_gc s | $g_gc s |
| gc with nothing to collect (median of 5) | $noop_med s | |
| exact epoch (\`rewind write\`), alone / beside a gc loop | $alone ms / $beside ms | |
EOF
