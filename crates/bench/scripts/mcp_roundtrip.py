"""`rewind mcp` round trips from the official Python MCP SDK (`mcp` 2.x), against the same work
done by plain Python: a `write_file` of a small file against `open().write()`, and a `run` of
`true` against starting `rewind exec -- true` as a process.

    python crates/bench/scripts/mcp_roundtrip.py REWIND_BINARY [FILES] [RUNS]

Makes a temporary workspace of FILES small files (default 100000, 100 per directory) and a
temporary REWIND_HOME, starts the server once (`rewind mcp`, sandbox off so that `run` and
`rewind exec` do the same work), then times RUNS (default 200) calls of each and prints the
median and p99 in milliseconds as a Markdown table. Needs the `mcp` package (scripts/test puts it
in a venv under the target directory).
"""

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time

from mcp import ClientSession, StdioServerParameters, stdio_client


def pct(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def row(name, samples):
    ms = [x * 1000 for x in samples]
    return f"| {name} | {statistics.median(ms):.2f} | {pct(ms, 99):.2f} |"


def make_tree(root, files):
    for i in range(files):
        d = os.path.join(root, f"d{i // 100:04}")
        if i % 100 == 0:
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i % 100:02}.txt"), "w") as f:
            f.write(f"file {i}\n" * 8)


async def bench(binary, files, runs):
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        root = os.path.join(tmp, "ws")
        home = os.path.join(tmp, "home")
        os.makedirs(root)
        make_tree(root, files)
        env = dict(os.environ, REWIND_HOME=home)
        env.pop("REWIND_SESSION", None)
        # Registered and captured once, as a workspace in use would be.
        subprocess.run([binary, "-C", root, "init"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        params = StdioServerParameters(
            command=binary,
            args=["-C", root, "-s", "bench", "mcp", "--sandbox", "danger-full-access"],
            env=env,
        )
        results = []
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                # write_file of a new file each time (no read needed), 1 KiB.
                body = "x" * 1023 + "\n"
                for i in range(5):
                    await s.call_tool("write_file", {"path": f"warm{i}.txt", "content": body})
                mcp_write = []
                for i in range(runs):
                    t = time.perf_counter()
                    r = await s.call_tool("write_file", {"path": f"new/m{i}.txt", "content": body})
                    mcp_write.append(time.perf_counter() - t)
                    assert not r.is_error, r
                plain_write = []
                os.makedirs(os.path.join(root, "plain"), exist_ok=True)
                for i in range(runs):
                    t = time.perf_counter()
                    with open(os.path.join(root, "plain", f"p{i}.txt"), "w") as f:
                        f.write(body)
                    plain_write.append(time.perf_counter() - t)
                mcp_run = []
                for i in range(max(runs // 10, 10)):
                    t = time.perf_counter()
                    r = await s.call_tool("run", {"command": "true"})
                    mcp_run.append(time.perf_counter() - t)
                    assert not r.is_error and r.structured_content["exit_code"] == 0, r
        exec_run = []
        for i in range(max(runs // 10, 10)):
            t = time.perf_counter()
            subprocess.run([binary, "-C", root, "-s", "bench", "exec", "--", "true"], env=env,
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            exec_run.append(time.perf_counter() - t)
        results += [
            row(f"`write_file` (1 KiB, new file) over MCP, {runs} calls", mcp_write),
            row(f"plain Python `open().write()` (1 KiB), {runs} writes", plain_write),
            row(f"`run` of `true` over MCP, {len(mcp_run)} calls", mcp_run),
            row(f"`rewind exec -- true` as a process, {len(exec_run)} runs", exec_run),
        ]
    print(f"{files} files in the workspace\n")
    print("| what | median ms | p99 ms |\n|---|---|---|")
    print("\n".join(results))


if __name__ == "__main__":
    binary = sys.argv[1]
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    asyncio.run(bench(binary, files, runs))
