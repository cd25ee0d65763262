#!/usr/bin/env python3
"""The web UI in headless Chromium: how long a 10,000-epoch timeline and a 1 MiB diff take.

usage: web-ui.py WORKDIR [--epochs 10000] [--runs 5] [--rewind PATH]

WORKDIR/ws is a new workspace, WORKDIR/home its state directory (REWIND_HOME); both are
removed first. `rewind serve --http` runs for it; through its socket (JSON-RPC, batches of
100) a session `bench` gets --epochs guarded writes (one exact epoch each, cycling over 50
files) with a checkpoint every 100, then one epoch that creates a 1 MiB text file (16,384
lines). Then, --runs times in a fresh Chromium profile: open the address with its token and
wait for the first screen of the timeline (the newest 300 entries drawn, a frame later), then
for the whole history loaded; click the 1 MiB epoch and wait for its diff to be drawn. Times
are the page's own `performance.now()` (from the start of navigation, the token's redirect
included) recorded a frame after each step; the `log` of the whole history over POST /rpc
is timed from here too. Prints min/median per measure.

Needs Chromium, chromedriver and Selenium (as the tests do: apt-get install chromium
chromium-driver; pip install selenium).
"""
import argparse, json, os, shutil, socket, statistics, subprocess, sys, tempfile, time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

p = argparse.ArgumentParser()
p.add_argument("workdir")
p.add_argument("--epochs", type=int, default=10000)
p.add_argument("--runs", type=int, default=5)
def default_rewind():
    host = [l.split()[1] for l in subprocess.run(["rustc", "-vV"], capture_output=True,
                                                 text=True).stdout.splitlines()
            if l.startswith("host:")][0]
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "../../../target")
    return os.path.join(target, host, "release/rewind")
p.add_argument("--rewind", default=None)
a = p.parse_args()
rewind = a.rewind or default_rewind()

ws, home = os.path.join(a.workdir, "ws"), os.path.join(a.workdir, "home")
for d in (ws, home):
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
env = {**os.environ, "REWIND_HOME": home, "REWIND_QUIET": "1"}
env.pop("REWIND_SESSION", None)
subprocess.run([rewind, "-C", ws, "init"], env=env, check=True, capture_output=True)
server = subprocess.Popen([rewind, "-C", ws, "-s", "bench", "serve", "--http"], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
url = server.stdout.readline().strip()
token = url.split("token=")[1]
status = json.loads(subprocess.run([rewind, "-C", ws, "--json", "status"], env=env, check=True,
                                   capture_output=True, text=True).stdout)
sock = socket.socket(socket.AF_UNIX)
sock.connect(status["server"]["socket"])
reader = sock.makefile("r")
next_id = [1]

def batch(calls):
    msgs = []
    for method, params in calls:
        msgs.append({"jsonrpc": "2.0", "id": next_id[0], "method": method,
                     "params": {"session": "bench", **params}})
        next_id[0] += 1
    sock.sendall((json.dumps(msgs) + "\n").encode())
    answers = json.loads(reader.readline())
    for x in answers:
        if "error" in x:
            sys.exit(f"rewind: {x['error']}")

t0 = time.time()
calls = []
for i in range(a.epochs):
    if i % 100 == 0:
        calls.append(("checkpoint", {"message": f"turn-{i // 100}"}))
    calls.append(("write", {"path": f"src/f{i % 50}.txt", "content": f"version {i}\n"}))
    if len(calls) >= 100:
        batch(calls)
        calls = []
batch(calls)
big = "".join(f"line {n:06d} " + "x" * 51 + "\n" for n in range(16384))
assert len(big) == 1 << 20
batch([("write", {"path": "big.txt", "content": big, "tool": "big-write"})])
print(f"made {a.epochs} epochs and the 1 MiB file in {time.time() - t0:.0f} s", flush=True)

def rpc_log():
    req = urllib.request.Request(url.split("?")[0] + "rpc", method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Bearer {token}"},
                                 data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "log",
                                                  "params": {"all_sessions": True, "limit": 0}}).encode())
    t = time.time()
    body = urllib.request.urlopen(req).read()
    return (time.time() - t) * 1000, len(body), len(json.loads(body)["result"]["items"])

results = {"first screen": [], "whole history": [], "1 MiB diff": [], "  of which fetch": [],
           "log over /rpc": []}
for run in range(a.runs):
    ms, size, n = rpc_log()
    results["log over /rpc"].append(ms)
    with tempfile.TemporaryDirectory() as profile:
        o = webdriver.ChromeOptions()
        o.binary_location = "/usr/bin/chromium"
        for arg in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1400,860"]:
            o.add_argument(arg)
        o.page_load_strategy = "eager"  # the event stream never "finishes loading"
        d = webdriver.Chrome(options=o, service=Service(executable_path="/usr/bin/chromedriver"))
        try:
            w = WebDriverWait(d, 60, poll_frequency=0.02)
            d.get(url)
            w.until(lambda d: d.execute_script("return window.__rewindTimes && window.__rewindTimes.complete"))
            t = d.execute_script("return window.__rewindTimes")
            results["first screen"].append(t["firstScreen"])
            results["whole history"].append(t["complete"])
            row = d.find_element(By.XPATH, "//div[contains(concat(' ', @class, ' '), ' row ') and contains(., 'big-write')]")
            start = d.execute_script("return performance.now()")
            row.click()
            w.until(lambda d: d.execute_script("return (window.__rewindTimes.diff || 0) > arguments[0]", start))
            t = d.execute_script("return window.__rewindTimes")
            results["1 MiB diff"].append(t["diff"] - start)
            results["  of which fetch"].append(t["diffFetched"] - start)
        finally:
            d.quit()
    print(f"run {run + 1}: " + ", ".join(f"{k} {v[-1]:.0f} ms" for k, v in results.items()), flush=True)

print(f"\n{n} log entries ({size / 1e6:.1f} MB of JSON)")
for k, v in results.items():
    print(f"{k:>15}: min {min(v):6.0f} ms, median {statistics.median(v):6.0f} ms")
server.terminate()
server.wait()
