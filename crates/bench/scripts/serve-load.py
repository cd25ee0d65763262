"""CLIENTS clients of a `rewind serve` socket for SECONDS, each its own session and file
cN/f.txt: a guarded write, a command, a checkpoint, a restore to the last checkpoint, in
turn (the load test's mix). A busy answer is skipped; any other error stops the run.

usage: serve-load.py SOCKET SECONDS CLIENTS"""
import json
import socket
import sys
import threading
import time


def client(path, deadline, i, answered):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    f = s.makefile("rwb")
    next_id = 0

    def call(method, params):
        nonlocal next_id
        next_id += 1
        msg = {"jsonrpc": "2.0", "id": next_id, "method": method, "params": params}
        f.write((json.dumps(msg) + "\n").encode())
        f.flush()
        return json.loads(f.readline())

    session, file, checkpoint, n = f"L{i}", f"c{i}/f.txt", None, 0
    call("read", {"session": session, "paths": [file]})
    while time.time() < deadline:
        n += 1
        kind = n % 4
        if kind == 0:
            method, params = "write", {"session": session, "path": file, "content": f"{n}\n"}
        elif kind == 1:
            command = ["sh", "-c", f"echo {n} >> {file}"]
            method, params = "exec", {"session": session, "command": command}
        elif kind == 2:
            method, params = "checkpoint", {"session": session, "message": f"{session}-m{n}"}
        elif checkpoint is None:
            continue
        else:
            method, params = "restore", {"session": session, "target": checkpoint}
        v = call(method, params)
        if "error" in v:
            assert v["error"]["data"]["kind"] == "busy", v
            continue
        answered[i] += 1
        if method == "checkpoint":
            checkpoint = v["result"]["message"]
        elif method == "restore":
            # A restore may leave the file other than the session last read it.
            call("read", {"session": session, "paths": [file]})


def main():
    path, secs, clients = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    deadline = time.time() + secs
    answered = [0] * clients
    threads = [
        threading.Thread(target=client, args=(path, deadline, i, answered))
        for i in range(clients)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"{sum(answered)} requests answered")


main()
