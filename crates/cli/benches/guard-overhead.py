#!/usr/bin/env python3
"""Whole-process overhead of a guarded `rewind write` versus `cp`.

usage: guard-overhead.py WORKDIR [--runs 50] [--rewind PATH] [--mktree PATH] [--size 4096]

WORKDIR/ws is the workspace (made with the project's shared bench/mktree.py, given by --mktree,
if it does not exist: 1000 dirs x 100 files, about 100,000 files), WORKDIR/home the state
directory (REWIND_HOME). The workspace is registered with `rewind init` once, the target file
is read once by the session, then each round writes a fresh random payload of --size bytes:
`cp payload ws/d0500/cp.bin` and `rewind -C ws write ws/d0500/guard.bin < payload` (so every
guarded write stores new content and settles a real change; the session's baseline is
refreshed by each write, so no re-read is needed). The two commands are interleaved so machine
load affects both alike; prints min/median/mean per command and the median difference.
"""
import argparse, os, shutil, statistics, subprocess, sys, time

p = argparse.ArgumentParser()
p.add_argument("workdir")
p.add_argument("--runs", type=int, default=50)
p.add_argument("--warmup", type=int, default=5)
def default_rewind():
    # Built for the host's own target tuple (see .cargo/config.toml).
    host = [l.split()[1] for l in subprocess.run(["rustc", "-vV"], capture_output=True,
                                                 text=True).stdout.splitlines()
            if l.startswith("host:")][0]
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "../../../target")
    return os.path.join(target, host, "release/rewind")


p.add_argument("--rewind", default=None)
p.add_argument("--mktree", default=None)
p.add_argument("--size", type=int, default=4096)
p.add_argument("--keep-state", action="store_true",
               help="reuse WORKDIR/home from an earlier run (default: register anew, so the "
                    "store holds only the baseline capture's packs)")
a = p.parse_args()

wd = os.path.abspath(a.workdir)
os.makedirs(wd, exist_ok=True)
os.chdir(wd)
env = dict(os.environ, REWIND_HOME=os.path.join(wd, "home"), REWIND_QUIET="1")
env.pop("REWIND_SESSION", None)
rewind = os.path.abspath(a.rewind or default_rewind())

if not os.path.isdir("ws"):
    if not a.mktree:
        sys.exit("WORKDIR/ws does not exist; pass --mktree path/to/mktree.py to create it")
    subprocess.run([sys.executable, a.mktree, "ws", "--kind", "text"], check=True)
if not a.keep_state and os.path.isdir(os.path.join(wd, "home")):
    shutil.rmtree(os.path.join(wd, "home"))
if not os.path.isdir(os.path.join(wd, "home")):
    subprocess.run([rewind, "-C", "ws", "init"], env=env, check=True, stdout=subprocess.DEVNULL)
    # Let the baseline's writeback finish: it would slow every fsync measured below.
    os.sync()
    time.sleep(2)

files = sum(len(f) for _, _, f in os.walk("ws"))

def packs():
    return sum(1 for _, _, fs in os.walk(os.path.join(wd, "home")) for f in fs if f.endswith(".pack"))

packs_before = packs()

def payload():
    with open("payload", "wb") as f:
        f.write(os.urandom(a.size))

def run(argv, stdin=None):
    with open("payload", "rb") if stdin else open(os.devnull, "rb") as inp:
        t = time.perf_counter()
        subprocess.run(argv, env=env, stdin=inp, stdout=subprocess.DEVNULL, check=True)
        return (time.perf_counter() - t) * 1000

cp = ["cp", "payload", "ws/d0500/cp.bin"]
guarded = [rewind, "-C", "ws", "write", "ws/d0500/guard.bin"]
payload()
if os.path.exists("ws/d0500/guard.bin"):
    subprocess.run([rewind, "-C", "ws", "read", "ws/d0500/guard.bin"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
run(guarded, stdin=True)
times = {"cp": [], "rewind write": []}
for i in range(a.warmup + a.runs):
    payload()
    t_cp = run(cp)
    payload()
    t_rw = run(guarded, stdin=True)
    if i >= a.warmup:
        times["cp"].append(t_cp)
        times["rewind write"].append(t_rw)

print(f"workspace: {files} files; payload {a.size} bytes; {a.runs} runs each, interleaved; "
      f"packs in the store: {packs_before} before, {packs()} after")
for k, v in times.items():
    print(f"  {k:<14} min {min(v):6.2f} ms  median {statistics.median(v):6.2f} ms  "
          f"mean {statistics.mean(v):6.2f} ms")
diff = [r - c for r, c in zip(times["rewind write"], times["cp"])]
print(f"  overhead       median {statistics.median(times['rewind write']) - statistics.median(times['cp']):6.2f} ms"
      f"  (median of per-round differences {statistics.median(diff):6.2f} ms)")
