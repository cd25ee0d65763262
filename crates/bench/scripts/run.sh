#!/usr/bin/env bash
# Foundation benchmark (capture and restore): the same work through the git "shadow repository"
# baseline and through Rewind, in the same run. Builds release binaries, runs rewind-bench, prints
# a Markdown report and writes it to target/bench/foundation.md (the step log to
# target/bench/foundation.log). Everything it needs is in this repository: the baseline scripts
# are crates/bench/scripts/ (built into rewind-bench).
#
# usage: crates/bench/scripts/run.sh [--fresh-fs] [rewind-bench run options]
#   --fresh-fs        run on a freshly made ext4 loop volume (needs root): after mass deletes of
#                     100k files ext4 allocates inodes slowly for a while, which would skew runs
#                     made right after an earlier run's cleanup
#   --kinds K,K       many-files trees to run: binary, text (default both)
#   --dirs N          many-files tree size (default 400 dirs x 100 files)
#   --reps N          repetitions of each many-files scenario (default 4; git first in even ones)
#   --big-mib N       big-file scenario size, 0 skips (default 256)
#   --big-reps N      repetitions of the big-file scenario (default 2)
#   --huge-mib N      peak-memory scenario size, 0 skips (default 4096)
#   --with-git-4g     also run git on the huge file (slow)
# environment:
#   TMPDIR            where the work dir (or the loop image) is made (default /tmp)
#   FRESH_FS_SIZE     size of the sparse loop image (default 40G)
#
# The defaults keep a run under 15 minutes on a loaded 2-core machine.
# smoke test: crates/bench/scripts/run.sh --dirs 20 --reps 2 --big-mib 16 --huge-mib 64
set -euo pipefail
cd "$(dirname "$0")/../../.."
target=${CARGO_TARGET_DIR:-target}
# Binaries are built for the host's own target tuple (see .cargo/config.toml).
bin=$target/$(rustc -vV | sed -n 's/^host: //p')/release

fresh=0
args=()
for a in "$@"; do
  if [[ $a == --fresh-fs ]]; then fresh=1; else args+=("$a"); fi
done

cargo build --release -p rewind-cli -p rewind-bench

# The code measured, as the report names it: the commit, marked if tracked files differ from it.
rev=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [[ $rev != unknown && -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
  rev="$rev (with uncommitted changes)"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rewind-bench.XXXXXX")
cleanup() {
  if mountpoint -q "$tmp/fs" 2>/dev/null; then umount "$tmp/fs"; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
work=$tmp/work
if ((fresh)); then
  truncate -s "${FRESH_FS_SIZE:-40G}" "$tmp/fs.img"
  # Initialise the inode tables and the journal now: otherwise the kernel's ext4lazyinit
  # thread zeroes them in the background for the first minutes after the mount (hundreds of
  # MB at 40G), and every fsync of the first repetition competes with that I/O.
  mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$tmp/fs.img"
  mkdir "$tmp/fs"
  mount -o loop "$tmp/fs.img" "$tmp/fs"
  work=$tmp/fs/work
  args+=(--keep) # unmounting and removing the image is the cleanup
fi

mkdir -p "$target/bench"
"$bin/rewind-bench" run --work "$work" --code-rev "$rev" \
  --out "$target/bench/foundation.md" "${args[@]}" 2> >(tee "$target/bench/foundation.log" >&2)
