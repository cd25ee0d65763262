#!/usr/bin/env bash
# The git "shadow repository" snapshot sequence that git-based agent checkpointers run
# (OpenCode's snapshot service is the reference: a separate GIT_DIR over the user's work tree,
# `add` + `write-tree` to capture, per-file `checkout` to revert a turn, `read-tree` +
# `checkout-index -a -f` to restore a whole tree). Re-stated here as plain git commands so a
# benchmark can run the same work through git and through rewind, side by side.
#
# Origin: a copy of the project's shared benchmark script (shared/bench/git-shadow-baseline.sh,
# outside this repository), kept here so the benchmark runs from a fresh clone. One change:
# `revert` removes the paths the tree lacks with one `rm`, not one `rm` per path. The caller
# (rewind-bench) isolates git: GIT_CONFIG_GLOBAL=/dev/null, GIT_CONFIG_NOSYSTEM=1, a HOME of its
# own and core.hooksPath=/dev/null (through GIT_CONFIG_COUNT), so no user config or hook runs.
#
# usage:
#   git-shadow-baseline.sh init    WORKTREE SHADOW_GIT_DIR
#   git-shadow-baseline.sh track   WORKTREE SHADOW_GIT_DIR            -> prints the tree id
#   git-shadow-baseline.sh changed WORKTREE SHADOW_GIT_DIR TREE       -> paths changed since TREE
#   git-shadow-baseline.sh revert  WORKTREE SHADOW_GIT_DIR TREE PATH... (per-path undo of a turn)
#   git-shadow-baseline.sh restore WORKTREE SHADOW_GIT_DIR TREE       (whole-tree restore, as OpenCode)
#   git-shadow-baseline.sh restore-fast WORKTREE SHADOW_GIT_DIR TREE  (stat-aware read-tree -u --reset)
set -euo pipefail
cmd=$1 WT=$2 GD=$3; shift 3
CORE=(-c core.longpaths=true -c core.symlinks=true)
CFG=(-c core.autocrlf=false "${CORE[@]}")
A=(--git-dir "$GD" --work-tree "$WT")
cd "$WT"
case "$cmd" in
  init)
    mkdir -p "$GD"
    GIT_DIR="$GD" GIT_WORK_TREE="$WT" git init -q
    for kv in core.autocrlf=false core.longpaths=true core.symlinks=true core.fsmonitor=false \
              feature.manyFiles=true index.version=4 index.threads=true core.untrackedCache=true; do
      git --git-dir "$GD" config "${kv%%=*}" "${kv#*=}"
    done ;;
  track)
    # capture: stage everything (honouring .gitignore), then write the tree
    git "${CFG[@]}" "${A[@]}" add --all --sparse -- . >/dev/null
    git "${A[@]}" write-tree ;;
  changed)
    git "${CFG[@]}" "${A[@]}" add --all --sparse -- . >/dev/null
    git "${CFG[@]}" -c core.quotepath=false "${A[@]}" diff --cached --no-ext-diff --name-only "$1" -- . ;;
  revert)
    tree=$1; shift
    declare -A have=()
    while IFS= read -r -d '' f; do have["$f"]=1; done \
      < <(git "${CORE[@]}" "${A[@]}" ls-tree -z --name-only "$tree" -- "$@")
    keep=(); gone=()
    for f in "$@"; do if [[ -n "${have[$f]:-}" ]]; then keep+=("$f"); else gone+=("$f"); fi; done
    if ((${#keep[@]})); then git "${CORE[@]}" "${A[@]}" checkout "$tree" -- "${keep[@]}"; fi
    if ((${#gone[@]})); then rm -f -- "${gone[@]}"; fi ;;
  restore)
    # what OpenCode's snapshot restore runs: every file rewritten
    git "${CORE[@]}" "${A[@]}" read-tree "$1"
    git "${CORE[@]}" "${A[@]}" checkout-index -a -f ;;
  restore-fast)
    # the stat-aware whole-tree restore a git expert would pick: only changed paths rewritten
    # (the index must be fresh: run `track` first, as a restore right after a capture would)
    git "${CORE[@]}" "${A[@]}" read-tree -u --reset "$1" ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
