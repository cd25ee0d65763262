#!/usr/bin/env python3
"""A scripted stand-in for the Anthropic Messages API on 127.0.0.1, so the real Claude Code
binary can be driven through a fixed sequence of tool calls (for testing hook adapters and MCP
servers against the real client). usage: fake_anthropic.py PORT SCRIPT.json LOG.jsonl
SCRIPT: a list of turns; each turn is a list of steps; a step is {"tool": NAME, "input": {...}},
{"parallel": [tool steps...]} (several tool calls in one answer), or {"text": "..."}. Each user prompt starts the next turn; within a turn, each request that
ends in tool results gets the next step. Requests that are not the main loop (no tools offered)
get a short text answer.

Origin: a copy of the project's shared real-client harness (outside this repository), kept here
so the tests that drive the real Claude Code CLI run from a fresh clone."""
import json, sys, threading, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, SCRIPT, LOG = int(sys.argv[1]), json.load(open(sys.argv[2])), sys.argv[3]
lock = threading.Lock()

def log(obj):
    with lock, open(LOG, "a") as f:
        f.write(json.dumps(obj) + "\n")

def user_turns(messages):
    """number of user messages that carry a plain prompt (not only tool results)"""
    n = 0
    for m in messages:
        if m.get("role") != "user":
            continue
        c = m.get("content")
        if isinstance(c, str):
            n += 1
        elif isinstance(c, list) and any(b.get("type") == "text" for b in c) and not all(
                b.get("type") == "tool_result" for b in c):
            if any(b.get("type") == "text" and not b.get("text", "").startswith("<system-reminder>") for b in c):
                n += 1
    return n

def steps_done(messages):
    """tool-use steps answered since the last plain prompt"""
    k = 0
    for m in reversed(messages):
        if m.get("role") == "assistant":
            k += 1
        elif m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, list) and c and all(b.get("type") == "tool_result" for b in c if isinstance(b, dict)):
                continue
            if isinstance(c, list) and any(b.get("type") == "tool_result" for b in c):
                continue
            break
    return k

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_GET(self):
        self.send_response(404); self.send_header("content-length", "0"); self.end_headers()
    def do_POST(self):
        n = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(n) or b"{}")
        path = self.path.split("?")[0]
        if path.endswith("/count_tokens"):
            return self.json({"input_tokens": 10})
        if not path.endswith("/v1/messages"):
            return self.json({})
        msgs = body.get("messages", [])
        tools = body.get("tools") or []
        step = None
        if tools and SCRIPT:
            t = user_turns(msgs) - 1
            k = steps_done(msgs)
            if 0 <= t < len(SCRIPT) and k < len(SCRIPT[t]):
                step = SCRIPT[t][k]
            log({"turn": t, "step": k, "chosen": step, "tools": len(tools)})
        if step is None:
            step = {"text": "done"}
        if body.get("stream"):
            return self.stream(body, step)
        return self.json(self.message(body, step))
    def message(self, body, step):
        calls = step.get("parallel") or ([step] if "tool" in step else [])
        if calls:
            content = [{"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:20], "name": c["tool"], "input": c["input"]}
                       for c in calls]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": step["text"]}]
            stop = "end_turn"
        return {"id": "msg_" + uuid.uuid4().hex[:20], "type": "message", "role": "assistant",
                "model": body.get("model", "claude"), "content": content, "stop_reason": stop,
                "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 10}}
    def json(self, obj):
        b = json.dumps(obj).encode()
        self.send_response(200); self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def stream(self, body, step):
        m = self.message(body, step)
        self.send_response(200); self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache"); self.send_header("connection", "close"); self.end_headers()
        def ev(name, data):
            self.wfile.write(("event: %s\ndata: %s\n\n" % (name, json.dumps(data))).encode()); self.wfile.flush()
        start = dict(m); start["content"] = []; start["stop_reason"] = None
        ev("message_start", {"type": "message_start", "message": start})
        for i, blk in enumerate(m["content"]):
            if blk["type"] == "tool_use":
                ev("content_block_start", {"type": "content_block_start", "index": i,
                   "content_block": {"type": "tool_use", "id": blk["id"], "name": blk["name"], "input": {}}})
                ev("content_block_delta", {"type": "content_block_delta", "index": i,
                   "delta": {"type": "input_json_delta", "partial_json": json.dumps(blk["input"])}})
            else:
                ev("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
                ev("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": blk["text"]}})
            ev("content_block_stop", {"type": "content_block_stop", "index": i})
        ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": m["stop_reason"], "stop_sequence": None},
           "usage": {"output_tokens": 10}})
        ev("message_stop", {"type": "message_stop"})
        self.close_connection = True

ThreadingHTTPServer(("127.0.0.1", PORT), H).serve_forever()
