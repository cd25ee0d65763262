#!/usr/bin/env bash
# A multi-GB data file on a reflink file system (docs/benchmarks.md, "Large files cloned, not
# copied"; issue 26). Needs root (it loop-mounts a btrfs image) and btrfs-progs.
#
# One workspace holds a data file of SIZE (default 4G, random: nothing compresses) and 100 small
# files, on a fresh btrfs volume that also holds the state directory. Measured, one after the
# other, each from the same starting point (caches dropped before each):
#   rewind init         capture.reflink = "auto" (the default): the file is cloned in;
#   rewind init         capture.reflink = "never": the file is read, hashed and packed
#                       (max_file_size raised so it is captured at all);
#   git add             the same tree into a fresh git repository (zlib, one loose object);
#   cp --reflink=never  a plain copy of the file (the cost of any tool that copies it);
#   cp --reflink=always a clone of it (the floor: one FICLONE);
# then, on the reflink workspace: an epoch that overwrites 1 MiB in the middle of the file
# (`rewind exec -- dd … conv=notrunc`), and a restore of the checkpoint before it. Reported:
# wall time, and the volume's used bytes after minus before (`statvfs`, after `sync -f`).
#
# usage: [SIZE=4G] crates/bench/scripts/reflink.sh [REWIND_BINARY]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
host=$(rustc -vV | sed -n 's/^host: //p')
rw=${1:-$repo/target/$host/release/rewind}
size=${SIZE:-4G}
work=$(mktemp -d /var/tmp/rewind-reflink-bench.XXXXXX)
mnt=$work/mnt
cleanup() { umount -l "$mnt" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
mkdir "$mnt"
truncate -s 24G "$work/volume.img"
mkfs.btrfs -q -f "$work/volume.img"
mount -o loop,discard "$work/volume.img" "$mnt"
export REWIND_QUIET=1
unset REWIND_SESSION

used() { sync -f "$mnt"; python3 -c "import os; s=os.statvfs('$mnt'); print((s.f_blocks-s.f_bfree)*s.f_frsize)"; }
cold() { sync; echo 3 > /proc/sys/vm/drop_caches; }
now() { date +%s.%N; }
# Runs "$@", prints "<seconds> <bytes the volume grew>".
measure() {
  local u0 t0 t1 u1
  cold; u0=$(used); t0=$(now)
  "$@" > /dev/null
  t1=$(now); u1=$(used)
  python3 -c "print(f'{$t1-$t0:.3f} s, {($u1-$u0)/1048576:.1f} MiB')"
}

ws=$mnt/ws
mkdir -p "$ws/src"
head -c "$size" /dev/urandom > "$ws/data.bin"
for i in $(seq 1 100); do echo "file $i" > "$ws/src/f$i.txt"; done
echo "data file: $(du -h --apparent-size "$ws/data.bin" | cut -f1)"
original=$(sha1sum < "$ws/data.bin")

echo "rewind init (reflink auto): $(REWIND_HOME=$mnt/home-auto measure "$rw" -C "$ws" init)"
c0=$(REWIND_HOME=$mnt/home-auto "$rw" -C "$ws" -s bench --json checkpoint --message before |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
REWIND_HOME=$mnt/home-auto "$rw" -C "$ws" status | grep -E "^(clones|uncovered)" || true

# The packing baseline: the same tree, the file packed (a copy of its own workspace, so the two
# histories do not share a state directory).
printf '[capture]\nreflink = "never"\nmax_file_size = "64G"\n' > "$ws/.rewind.toml"
echo "rewind init (reflink never): $(REWIND_HOME=$mnt/home-never measure "$rw" -C "$ws" init --force)"
rm -rf "$mnt/home-never" "$ws/.rewind.toml"

git_add() { git init -q "$mnt/git" && git --git-dir="$mnt/git/.git" --work-tree="$ws" -c core.hooksPath=/dev/null add -A; }
echo "git add: $(measure git_add)"
rm -rf "$mnt/git"
echo "cp --reflink=never: $(measure cp --reflink=never "$ws/data.bin" "$mnt/copy.bin")"
rm -f "$mnt/copy.bin"
echo "cp --reflink=always: $(measure cp --reflink=always "$ws/data.bin" "$mnt/copy.bin")"
rm -f "$mnt/copy.bin"

export REWIND_HOME=$mnt/home-auto
half=$(( $(stat -c %s "$ws/data.bin") / 2 / 1048576 ))
edit() { "$rw" -C "$ws" -s bench exec -- dd if=/dev/urandom of=data.bin bs=1M seek="$half" count=1 conv=notrunc status=none; }
echo "epoch overwriting 1 MiB of it: $(measure edit)"
after=$(sha1sum < "$ws/data.bin")
echo "restore to before it: $(measure "$rw" -C "$ws" -s bench restore "$c0")"
[ "$(sha1sum < "$ws/data.bin")" = "$original" ] || { echo "restore did not give the file back" >&2; exit 1; }
"$rw" -C "$ws" -s bench undo > /dev/null
[ "$(sha1sum < "$ws/data.bin")" = "$after" ] || { echo "undo did not give the edited file back" >&2; exit 1; }
"$rw" -C "$ws" fsck > /dev/null
"$rw" -C "$ws" status | grep -E "^clones" || true
