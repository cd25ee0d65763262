#!/usr/bin/env bash
# Drive the real Claude Code CLI against fake_anthropic.py.
# usage: run_claude.sh CLAUDE_BIN WORKSPACE SCRIPT.json PROMPT [--continue] [extra claude args...]
# Env: PORT (default 18765), FAKE_LOG (default WORKSPACE/../fake.log), CC_HOME (default WORKSPACE/../cchome)
# Origin: a copy of the project's shared real-client harness (outside this repository).
set -u
bin=$1 ws=$2 script=$3 prompt=$4; shift 4
port=${PORT:-18765}; here=$(cd "$(dirname "$0")" && pwd)
log=${FAKE_LOG:-$ws/../fake.log}; home=${CC_HOME:-$ws/../cchome}; mkdir -p "$home"
python3 "$here/fake_anthropic.py" "$port" "$script" "$log" & fp=$!
for i in $(seq 1 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
cd "$ws" && HOME="$home" ANTHROPIC_BASE_URL=http://127.0.0.1:$port ANTHROPIC_API_KEY=sk-ant-fake \
  DISABLE_TELEMETRY=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 IS_SANDBOX=1 \
  timeout 180 "$bin" -p "$prompt" --permission-mode bypassPermissions --output-format json "$@"
rc=$?
kill $fp 2>/dev/null; wait $fp 2>/dev/null
exit $rc
