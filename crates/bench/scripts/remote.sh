#!/usr/bin/env bash
# Remote benchmark (issue 20): Rewind's push and clone against restic's backup and restore, the
# same tree, the same real S3 server on loopback, the same run.
#
# One tree of DIRS x 100 files (mktree.py, KIND text by default: source-like) is copied twice:
#   restic: `init`, the first `backup`; a 20-file turn (20 files get a line appended), then an
#           incremental `backup`; `restore` of the latest snapshot into an empty directory.
#   Rewind: `init` (the local capture, timed once, not compared), the first `push`; a 20-file
#           turn (an `exec` that appends a line to 20 files, then a checkpoint) then `push`;
#           `clone` of the remote's newest checkpoint into an empty directory with a fresh
#           REWIND_HOME.
# Each step is repeated with hyperfine (medians): a first backup or push goes to a fresh
# repository or prefix each time, each incremental run follows a new turn, each restore or
# clone gets a new directory (and a clone a new REWIND_HOME); none is deleted before the end. "Stored" is the growth of the server's data directory over
# the runs, per run: what the step uploaded, for s3s-fs (objects kept as sent); Garage
# compresses and deduplicates blocks, so there it is less than what was sent.
# A restore and a clone are checked against their source tree before timing.
#
# usage: crates/bench/scripts/remote.sh [--only restic|rewind] [REWIND_BINARY]
#   REWIND_BINARY defaults to target/<host tuple>/release/rewind (not built here)
# environment:
#   DIRS=1000 KIND=text     the tree (DIRS x 100 files of 1-8 KiB; KIND binary: random bytes)
#   RUNS_FIRST=3 RUNS=5     repetitions of the first backup/push, and of every other step
#   REWIND_S3_SERVER        s3s-fs (default; REWIND_S3_BIN, else scripts/install-s3s-fs builds
#                           it) or garage (REWIND_GARAGE_BIN, else `garage` in PATH)
#   TMPDIR                  where the work directory is made (default /tmp)
# Needs python3, curl; installs hyperfine and restic (Debian packages) when missing (as root).
# Prints a Markdown report on stdout, progress on stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)

only=
while [[ ${1:-} == --* ]]; do
  case $1 in
    --only) only=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -z $only || $only == restic || $only == rewind ]] || { echo "--only restic|rewind" >&2; exit 2; }
run_restic=1 run_rewind=1
[[ $only == rewind ]] && run_restic=0
[[ $only == restic ]] && run_rewind=0
if ((run_rewind)); then
  host=$(rustc -vV | sed -n 's/^host: //p')
  rw=${1:-$repo/target/$host/release/rewind}
  rw=$(cd "$(dirname "$rw")" && pwd)/$(basename "$rw")
  [[ -x $rw ]] || { echo "no rewind binary at $rw (cargo build --release -p rewind-cli)" >&2; exit 2; }
fi
dirs=${DIRS:-1000}
kind=${KIND:-text}
runs_first=${RUNS_FIRST:-3}
runs=${RUNS:-5}
server=${REWIND_S3_SERVER:-s3s-fs}
bucket=rewind-bench

need=()
command -v hyperfine >/dev/null 2>&1 || need+=(hyperfine)
((run_restic)) && { command -v restic >/dev/null 2>&1 || need+=(restic); }
if ((${#need[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/rewind-remote-bench.XXXXXX")
srv_pid=
cleanup() {
  if [[ -n $srv_pid ]]; then
    kill "$srv_pid" 2>/dev/null || true
    wait "$srv_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
log() { echo "remote.sh: $*" >&2; }
hex() { od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
bytes() { du -sb "$1" | cut -f1; }
median() { python3 -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["results"][0]["median"])' "$1"; }
mib() { python3 -c "print(f'{$1 / 1048576:.2f}')"; }
ratio() { python3 -c "print(f'{$1 / $2:.1f}x')"; }

# --- the server ------------------------------------------------------------------------------
srv=$work/s3
data=$srv/data
mkdir -p "$data"
port=$(free_port)
endpoint=http://127.0.0.1:$port
case $server in
  s3s-fs)
    bin=${REWIND_S3_BIN:-$("$repo/scripts/install-s3s-fs")}
    region=us-east-1 ak=RW$(hex 9) sk=$(hex 20)
    mkdir -p "$data/$bucket"
    "$bin" --host 127.0.0.1 --port "$port" --access-key "$ak" --secret-key "$sk" "$data" \
      >"$srv/log" 2>&1 &
    srv_pid=$!
    ;;
  garage)
    bin=${REWIND_GARAGE_BIN:-$(command -v garage || true)}
    [[ -x $bin ]] || { echo "REWIND_S3_SERVER=garage: set REWIND_GARAGE_BIN" >&2; exit 2; }
    region=garage ak=GK$(hex 12) sk=$(hex 32) rpc=$(free_port)
    cat >"$srv/garage.toml" <<EOF
metadata_dir = "$srv/meta"
data_dir = "$data"
db_engine = "sqlite"
replication_factor = 1
rpc_bind_addr = "127.0.0.1:$rpc"
rpc_public_addr = "127.0.0.1:$rpc"
rpc_secret = "$(hex 32)"
[s3_api]
s3_region = "garage"
api_bind_addr = "127.0.0.1:$port"
root_domain = ".s3.garage.localhost"
EOF
    g() { "$bin" -c "$srv/garage.toml" "$@"; }
    RUST_LOG=garage=warn "$bin" -c "$srv/garage.toml" server >"$srv/log" 2>&1 &
    srv_pid=$!
    for _ in $(seq 100); do node=$(g node id -q 2>/dev/null) && break; sleep 0.2; done
    g layout assign -z dc1 -c 10G "${node%%@*}" >/dev/null
    g layout apply --version 1 >/dev/null
    g key import --yes -n bench "$ak" "$sk" >/dev/null
    g bucket create "$bucket" >/dev/null
    g bucket allow --read --write --owner "$bucket" --key "$ak" >/dev/null
    ;;
  *) echo "REWIND_S3_SERVER=$server: expected s3s-fs or garage" >&2; exit 2 ;;
esac
# Up once an unsigned request to the bucket is refused (403).
for i in $(seq 300); do
  [[ $(curl -s -o /dev/null -w '%{http_code}' "$endpoint/$bucket") == 403 ]] && break
  kill -0 "$srv_pid" 2>/dev/null || { cat "$srv/log" >&2; exit 1; }
  ((i < 300)) || { echo "the S3 server does not answer" >&2; cat "$srv/log" >&2; exit 1; }
  sleep 0.1
done
export AWS_ACCESS_KEY_ID=$ak AWS_SECRET_ACCESS_KEY=$sk AWS_REGION=$region \
  AWS_DEFAULT_REGION=$region AWS_ENDPOINT_URL=$endpoint AWS_ENDPOINT=$endpoint AWS_ALLOW_HTTP=true \
  AWS_EC2_METADATA_DISABLED=true
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL_S3
log "$server on $endpoint, bucket $bucket"

# --- the tree and the turn ---------------------------------------------------------------------
log "making the tree ($dirs x 100 files, $kind)"
python3 "$here/mktree.py" "$work/tree" --dirs "$dirs" --kind "$kind" >/dev/null
files=$(find "$work/tree" -type f | wc -l)
tree_mib=$(mib "$(bytes "$work/tree")")
# A turn: 20 files (chosen by the seed) get a line appended.
cat >"$work/turn.py" <<'EOF'
import os, random, sys
root, seed = sys.argv[1], int(sys.argv[2])
paths = sorted(os.path.join(d, f) for d in os.listdir(root) if d.startswith("d")
               for f in os.listdir(os.path.join(root, d)))
for p in random.Random(seed).sample(paths, 20):
    with open(os.path.join(root, p), "ab") as fh:
        fh.write(b"\n// turn %d\n" % seed)
EOF
# The run counter: each first backup or push goes to repository or prefix number N.
echo 0 >"$work/n"
bump='n=$(($(cat "'$work'/n") + 1)); echo "$n" >"'$work'/n"'

hf() { # NAME RUNS PREPARE COMMAND: hyperfine, JSON to $work/NAME.json; data growth per run
  local before after
  before=$(bytes "$data")
  hyperfine --shell bash --style basic --runs "$2" --prepare "$3" --export-json "$work/$1.json" "$4" >&2
  after=$(bytes "$data")
  echo $(((after - before) / $2)) >"$work/$1.stored"
}

# --- restic ------------------------------------------------------------------------------------
if ((run_restic)); then
  cp -a "$work/tree" "$work/ws-restic"
  export RESTIC_PASSWORD=bench RESTIC_CACHE_DIR=$work/restic-cache
  restic_repo="s3:$endpoint/$bucket/restic"
  cat >"$work/restic-fresh.sh" <<EOF
set -e
$bump
restic -r "$restic_repo-\$n" init >/dev/null
EOF
  cat >"$work/restic-backup.sh" <<EOF
set -e
cd "$work/ws-restic"
restic -r "$restic_repo-\$(cat "$work/n")" backup -q .
EOF
  log "restic $(restic version | cut -d' ' -f2): first backup"
  hf restic-first "$runs_first" "bash $work/restic-fresh.sh" "bash $work/restic-backup.sh"
  log "restic: 20-file turn, incremental backup"
  hf restic-incr "$runs" "python3 $work/turn.py $work/ws-restic \$RANDOM" "bash $work/restic-backup.sh"
  repo_now="$restic_repo-$(cat "$work/n")"
  restic -r "$repo_now" restore latest --target "$work/restore" -q
  diff -r -q "$work/ws-restic" "$work/restore" >&2 || { echo "restic restore differs" >&2; exit 1; }
  log "restic: restore"
  # Each run into a new directory, none deleted until the end: ext4 skips inodes deleted in
  # the last minute when it allocates (recently_deleted), which made runs that follow an
  # `rm -rf` of 100k files CPU-bound in the kernel (measured: 40 s of system time).
  echo 0 >"$work/r"
  hf restic-restore "$runs" "echo \$((\$(cat $work/r) + 1)) >$work/r" \
    "restic -r $repo_now restore latest --target $work/restore-\$(cat $work/r) -q"
  restic_version=$(restic version | cut -d' ' -f2)
fi

# --- Rewind ------------------------------------------------------------------------------------
if ((run_rewind)); then
  cp -a "$work/tree" "$work/ws-rewind"
  export REWIND_HOME=$work/home REWIND_QUIET=1
  unset REWIND_SESSION
  ws=$work/ws-rewind
  t0=$(date +%s.%N)
  "$rw" -C "$ws" init >/dev/null
  t1=$(date +%s.%N)
  rewind_init=$(python3 -c "print(f'{$t1 - $t0:.2f}')")
  # The first push of each run to its own prefix, through a remote of its own.
  cat >"$work/rewind-fresh.sh" <<EOF
set -e
$bump
"$rw" -C "$ws" remote add "bench\$n" "s3://$bucket/rewind-\$n" --endpoint "$endpoint" \
  --region "$region" >/dev/null
EOF
  cat >"$work/rewind-push.sh" <<EOF
set -e
"$rw" -C "$ws" push "bench\$(cat "$work/n")" >/dev/null
EOF
  log "rewind: first push"
  hf rewind-first "$runs_first" "bash $work/rewind-fresh.sh" "bash $work/rewind-push.sh"
  log "rewind: 20-file turn, push"
  # The turn's exec, then a checkpoint holding its tree (what the clone below writes).
  hf rewind-incr "$runs" \
    "$rw -C $ws -s bench exec -- python3 $work/turn.py $ws \$RANDOM >/dev/null && $rw -C $ws -s bench checkpoint --message turn-\$RANDOM >/dev/null" \
    "bash $work/rewind-push.sh"
  url="s3://$bucket/rewind-$(cat "$work/n")"
  clone_flags=()
  if "$rw" clone --help 2>/dev/null | grep -q -- --endpoint; then
    clone_flags=(--endpoint "$endpoint" --region "$region")
  fi # else: AWS_ENDPOINT_URL and AWS_REGION, exported above
  REWIND_HOME=$work/clone-home "$rw" clone "$url" "$work/clone" "${clone_flags[@]}" >/dev/null
  diff -r -q "$ws" "$work/clone" >&2 || { echo "rewind clone differs" >&2; exit 1; }
  log "rewind: clone"
  echo 0 >"$work/r"
  hf rewind-clone "$runs" "echo \$((\$(cat $work/r) + 1)) >$work/r" \
    "REWIND_HOME=$work/clone-home-\$(cat $work/r) $rw clone $url $work/clone-\$(cat $work/r) ${clone_flags[*]} >/dev/null"
fi

# --- report ------------------------------------------------------------------------------------
rev=$(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
cell() { [[ -f $work/$1.json ]] && echo "$(median "$work/$1.json") s" || echo "–"; }
stored() { [[ -f $work/$1.stored ]] && echo "$(mib "$(cat "$work/$1.stored")") MiB" || echo "–"; }
cmp() { [[ -f $work/$1.json && -f $work/$2.json ]] && ratio "$(median "$work/$1.json")" "$(median "$work/$2.json")" || echo "–"; }
cat <<EOF
Remote benchmark at \`$rev\`: $files files ($kind, $tree_mib MiB), $server on loopback,
$(nproc) cores; medians of $runs_first first backups/pushes and $runs of every other step${restic_version:+, restic $restic_version}.

| | restic | Rewind | restic ÷ Rewind |
|---|---|---|---|
| first backup / first push | $(cell restic-first) | $(cell rewind-first) | $(cmp restic-first rewind-first) |
| stored by it | $(stored restic-first) | $(stored rewind-first) | |
| after a 20-file turn: backup / push | $(cell restic-incr) | $(cell rewind-incr) | $(cmp restic-incr rewind-incr) |
| stored by it | $(stored restic-incr) | $(stored rewind-incr) | |
| restore / clone into an empty directory | $(cell restic-restore) | $(cell rewind-clone) | $(cmp restic-restore rewind-clone) |
EOF
if ((run_rewind)); then
  echo
  echo "Rewind's \`init\` (the local capture before the first push, not compared): $rewind_init s."
fi
