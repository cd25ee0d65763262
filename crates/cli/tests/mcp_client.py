"""A real MCP client (the official Python SDK, `mcp` 2.x) driving `rewind mcp` over stdio: its
tools and its resources.

Run by tests/mcp.rs: python mcp_client.py REWIND_BINARY WORKSPACE MODE SESSION, with
REWIND_HOME set. MODE is `legacy` (the `initialize` handshake) or `modern` (2026-07-28,
`server/discover`). Checks the files on disk after every step; prints OK at the end. Any
failed check raises, so the process exits non-zero with the reason.
"""

import asyncio
import os
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client

EXPECTED_TOOLS = {
    "read_file", "write_file", "edit_file", "apply_patch", "run", "checkpoint", "log",
    "diff", "restore", "undo", "status",
    "worktree_create", "worktree_list", "worktree_merge", "worktree_discard",
}


def disk(root, rel):
    path = os.path.join(root, rel)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return f.read()


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def text_of(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def main(binary, root, mode, session):
    params = StdioServerParameters(
        command=binary, args=["-C", root, "-s", session, "mcp"], env=dict(os.environ)
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            if mode == "legacy":
                init = await s.initialize()
                check(init.server_info.name == "rewind", f"server info {init}")
            else:
                found = await s.discover()
                check("2026-07-28" in [str(v) for v in found.supported_versions], f"{found}")

            async def call(name, args, error=False):
                r = await s.call_tool(name, args)
                check(bool(r.is_error) == error,
                      f"{name} {args}: is_error={r.is_error}: {text_of(r)}")
                check(r.structured_content is not None, f"{name}: no structured content")
                return r

            tools = (await s.list_tools()).tools
            check({t.name for t in tools} == EXPECTED_TOOLS, f"tools {[t.name for t in tools]}")
            for t in tools:
                check(t.description and t.input_schema.get("type") == "object", t.name)
                check(t.output_schema is not None, f"{t.name}: no output schema")

            # The guard: a file this session never read cannot be overwritten.
            r = await call("write_file", {"path": "a.txt", "content": "clobbered\n"}, error=True)
            check("read" in text_of(r), text_of(r))
            check(r.structured_content["error"]["kind"] == "guard", r.structured_content)
            check(disk(root, "a.txt") == "hello\n", "the refused write wrote")

            start = (await call("checkpoint", {"label": "start"})).structured_content["id"]

            r = await call("read_file", {"path": "a.txt"})
            check(text_of(r) == "hello\n", text_of(r))
            check(r.structured_content["files"][0]["lines"] == 1, r.structured_content)

            r = await call("edit_file", {"path": "a.txt", "old_string": "hello",
                                         "new_string": "goodbye"})
            check(r.structured_content["replacements"] == 1, r.structured_content)
            check(disk(root, "a.txt") == "goodbye\n", disk(root, "a.txt"))

            r = await call("run", {"command": "echo made > b.txt && cat a.txt"})
            out = r.structured_content
            check(out["exit_code"] == 0 and out["stdout"] == "goodbye\n", out)
            check([c["path"] for c in out["changes"]] == ["b.txt"], out)
            check(disk(root, "b.txt") == "made\n", "run did not write b.txt")

            r = await call("run", {"command": "echo oops >&2; exit 3"})
            check(r.structured_content["exit_code"] == 3, r.structured_content)
            check(r.structured_content["stderr"] == "oops\n", r.structured_content)

            # A call that takes a while reports progress to a client that asks for it.
            heard = []

            async def progress(value, total, message):
                heard.append((value, message))

            r = await s.call_tool("run", {"command": "sleep 2.5"}, progress_callback=progress)
            check(not r.is_error and r.structured_content["exit_code"] == 0, text_of(r))
            check(len(heard) >= 1 and "still running" in (heard[0][1] or ""), heard)
            check([v for v, _ in heard] == sorted(set(v for v, _ in heard)), heard)

            await call("checkpoint", {"label": "after"})

            # A restore previews by default and writes nothing.
            r = await call("restore", {"target": start})
            plan = r.structured_content
            check(plan["dry_run"] is True, plan)
            check(disk(root, "a.txt") == "goodbye\n" and disk(root, "b.txt") == "made\n",
                  "the dry run wrote")

            r = await call("restore", {"target": start, "dry_run": False})
            check(r.structured_content["dry_run"] is False, r.structured_content)
            check(disk(root, "a.txt") == "hello\n", disk(root, "a.txt"))
            check(disk(root, "b.txt") is None, "b.txt was not removed")

            # Undoing the restore is redo.
            await call("undo", {})
            check(disk(root, "a.txt") == "goodbye\n", disk(root, "a.txt"))
            check(disk(root, "b.txt") == "made\n", disk(root, "b.txt"))

            # Someone else changes b.txt: the restore is refused as a result the model reads.
            with open(os.path.join(root, "b.txt"), "w") as f:
                f.write("the user's\n")
            r = await call("restore", {"target": start}, error=True)
            check(r.structured_content["conflicts"], r.structured_content)
            check("changed" in text_of(r), text_of(r))
            check(disk(root, "b.txt") == "the user's\n", "a refused restore wrote")

            # The guard again: a.txt was read, but the run... no: the user changes it now.
            with open(os.path.join(root, "a.txt"), "w") as f:
                f.write("edited by the user\n")
            r = await call("edit_file", {"path": "a.txt", "old_string": "edited",
                                         "new_string": "x"}, error=True)
            check("read it again" in text_of(r) or "re-read" in text_of(r) or
                  "read_file" in text_of(r), text_of(r))
            check(disk(root, "a.txt") == "edited by the user\n", "a refused edit wrote")

            # Resources: the history, and what a restore to each checkpoint would undo.
            listed = {str(r.uri) for r in (await s.list_resources()).resources}
            check("rewind://log" in listed, listed)
            uri = f"rewind://checkpoint/{start}/diff"
            check(uri in listed, listed)
            contents = (await s.read_resource(uri)).contents
            check("+++ b/b.txt" in contents[0].text, contents[0].text)
            history = (await s.read_resource("rewind://log")).contents[0].text
            check(start in history, history)
            templates = (await s.list_resource_templates()).resource_templates
            check([t.uri_template for t in templates] == ["rewind://checkpoint/{id}/diff"],
                  templates)
            try:
                await s.read_resource("rewind://checkpoint/ffffffffffffffff/diff")
                raise AssertionError("an unknown checkpoint was read")
            except AssertionError:
                raise
            except Exception as e:
                check("ffffffffffffffff" in str(e) or "no" in str(e).lower(), str(e))

            # Re-read, then a patch: checked (dry run, nothing written), then applied.
            await call("read_file", {"path": "a.txt"})
            patch = ("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-edited by the user\n"
                     "+patched\n")
            r = await call("apply_patch", {"patch": patch, "dry_run": True})
            check(r.structured_content["dry_run"] is True, r.structured_content)
            check(disk(root, "a.txt") == "edited by the user\n", "the dry run wrote")
            r = await call("apply_patch", {"patch": patch})
            check([c["path"] for c in r.structured_content["changes"]] == ["a.txt"],
                  r.structured_content)
            check(disk(root, "a.txt") == "patched\n", disk(root, "a.txt"))
            await call("undo", {})
            check(disk(root, "a.txt") == "edited by the user\n", disk(root, "a.txt"))

            r = await call("log", {"limit": 50})
            check(len(r.structured_content["items"]) >= 5, r.structured_content)
            r = await call("diff", {"target": start})
            check("files" in r.structured_content, r.structured_content)
            await call("status", {})

            # A worktree: another agent's copy, its work merged back after a preview.
            r = await call("worktree_create", {"name": "side"})
            wt = r.structured_content["path"]
            check(not wt.startswith(root + os.sep) and disk(wt, "a.txt") == disk(root, "a.txt"),
                  f"worktree {wt}")
            with open(os.path.join(wt, "side.txt"), "w") as f:
                f.write("from the worktree\n")
            r = await call("worktree_list", {})
            listed = {w["name"]: w for w in r.structured_content["worktrees"]}
            check(listed["side"]["worktree_changes"] == 1, listed)
            r = await call("worktree_merge", {"name": "side"})
            check([st["path"] for st in r.structured_content["steps"]] == ["side.txt"],
                  r.structured_content)
            check(disk(root, "side.txt") is None, "the merge preview wrote")
            await call("worktree_merge", {"name": "side", "dry_run": False})
            check(disk(root, "side.txt") == "from the worktree\n", disk(root, "side.txt"))
            await call("undo", {})
            check(disk(root, "side.txt") is None, "undo left the merged file")
            # More work in the worktree, not merged: discarding it asks for force.
            with open(os.path.join(wt, "later.txt"), "w") as f:
                f.write("not merged\n")
            r = await call("worktree_discard", {"name": "side"}, error=True)
            check("force" in text_of(r), text_of(r))
            check(os.path.isdir(wt), "a refused discard removed the worktree")
            # Both sides change the same file's only line: a conflict, refused with the plan.
            with open(os.path.join(wt, "side.txt"), "w") as f:
                f.write("the worktree's line\n")
            with open(os.path.join(root, "side.txt"), "w") as f:
                f.write("this side's line\n")
            r = await call("worktree_merge", {"name": "side", "dry_run": False}, error=True)
            check(r.structured_content["conflicts"], r.structured_content)
            check(disk(root, "side.txt") == "this side's line\n", "a refused merge wrote")
            os.remove(os.path.join(root, "side.txt"))
            await call("worktree_discard", {"name": "side", "force": True})
            check(not os.path.exists(wt), "the worktree is still there")
            r = await call("worktree_list", {})
            check(r.structured_content["worktrees"] == [], r.structured_content)

            r = await call("read_file", {"path": 7}, error=True)
            check("invalid arguments" in text_of(r), text_of(r))
    print("OK")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
