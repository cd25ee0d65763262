//! `rewind mcp`: Rewind's guarded file tools, recorded (and sandboxed) shell commands,
//! checkpoints and previewed rewinds as a Model Context Protocol server on standard input and
//! output (one JSON-RPC message per line), built on the official Rust SDK (`rmcp`).
//!
//! Resources show the session's log and, per checkpoint, what a restore to it would undo.
//!
//! Every tool is one operation of the service API ([`rewind_api::rpc::call`]); this crate
//! only shapes arguments for a model and results for a client. When `rewind serve` runs for
//! the workspace as the server starts, the operations go through it ([`rewind_api::Endpoint`]):
//! `run`'s epochs cost what changed, not walks of the tree. Both protocol eras are served:
//! the `initialize` handshake (2025-11-25 and earlier) and the stateless 2026-07-28 revision
//! (`server/discover`, version and capabilities in each request's `_meta`).
//!
//! What a model can act on is a tool result with `isError: true` and words saying what to do
//! (a guard refusal, a restore refused by conflicts, a sandbox that cannot run, an argument of
//! the wrong type); only an unknown tool or a malformed message is a protocol error.

mod config;
mod resources;
mod tools;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rewind_api::{ApiError, Context, Endpoint, ErrorKind, ExecRequest, SandboxMode, Service};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

pub use config::{print_config, Client};

/// How to run the server.
#[derive(Clone, Debug)]
pub struct Options {
    /// The directory the tools act from: the workspace is its nearest registered ancestor,
    /// else the directory itself; relative tool paths are taken from it.
    pub dir: PathBuf,
    /// The session every tool call is recorded for; `None`: a new session for this server
    /// process (`mcp-` and the process id and start time).
    pub session: Option<String>,
    /// The sandbox `run` uses. `None`: the workspace's mode at each call (`[sandbox] mode`, or
    /// what `rewind sandbox mode|toggle` set), when the sandbox works here, else none (said
    /// once on standard error, and in every `run` result).
    pub sandbox: Option<SandboxMode>,
    /// Called with the workspace's root after a tool call whose capture (in this process)
    /// ran out of `capture.time_budget`: the front starts the background baseline there
    /// (`rewind mcp` starts `rewind baseline --background`). `None`: nothing is started.
    pub start_baseline: Option<fn(&std::path::Path)>,
    /// Called with the workspace's root after a `checkpoint` (in this process) that leaves the
    /// state over its `[retention] max_bytes`: the front starts a gc there (`rewind mcp`
    /// starts `rewind gc --auto`; through a server, the server does). `None`: nothing is
    /// started.
    pub start_gc: Option<fn(&std::path::Path)>,
}

/// How `run` runs commands, as decided when the server starts.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RunMode {
    /// Under the sandbox in this mode, whatever the workspace's mode (`--sandbox`).
    Fixed(SandboxMode),
    /// Under the workspace's mode, read at each call (a toggle applies to the next call).
    Workspace,
    /// As plain child processes: `--sandbox danger-full-access`, the user's explicit choice.
    Plain,
}

/// The MCP server: the service for one session, behind a lock (operations run one at a time,
/// on blocking threads, so the protocol keeps being read while one runs). The operations go
/// through the workspace's `rewind serve` when one runs as this server starts (its file
/// watcher spares `run` the walks of the tree), else this process opens the workspace.
#[derive(Clone)]
pub struct Server {
    ep: Arc<Mutex<Endpoint>>,
    run_mode: RunMode,
    session: String,
    start_baseline: Option<fn(&std::path::Path)>,
    start_gc: Option<fn(&std::path::Path)>,
    /// Without a server: this process's own WAL checkpoint thread, nudged after each tool
    /// call, so that no call waits for a checkpoint its commit would otherwise run.
    wal: Option<Arc<rewind_api::WalCheckpointer>>,
}

impl Server {
    /// A server acting as `opts` says. Opens the workspace (registering it on first use) so
    /// that an unusable directory fails now, before a client connects.
    pub fn new(opts: &Options) -> Result<Server, ApiError> {
        let session = opts.session.clone().unwrap_or_else(default_session);
        // Kept for the process's life: its writers ask the index once per new object only
        // until they have loaded what is stored (see `KnownIds`).
        let local = Service::new(Context::new(&opts.dir, &session)?)
            .with_known_ids(Arc::new(rewind_api::KnownIds::new()));
        let ep = Endpoint::new(local);
        let mut wal = None;
        if !ep.via_server() {
            ep.service().open()?;
            // Best effort, as `rewind serve`'s: a store that checkpoints in its commits is
            // correct, only slower.
            wal = ep.service().start_wal_checkpointer().ok().and_then(|w| {
                ep.service().leave_checkpoints_to(&w).ok()?;
                Some(Arc::new(w))
            });
        }
        let run_mode = match opts.sandbox {
            Some(SandboxMode::DangerFullAccess) => RunMode::Plain,
            Some(m) => RunMode::Fixed(m),
            None => {
                // Fail closed: a sandbox that cannot run here refuses each `run` (a result the
                // model reads), never runs it open. Only the user's explicit
                // `danger-full-access` (the workspace's mode or --sandbox) runs unsandboxed.
                // (Commands run in this process, so the check is this process's.)
                if let Err(e) = ep.service().sandbox_check(&Default::default()) {
                    eprintln!(
                        "rewind mcp: warning: the sandbox does not work here ({}); `run` will \
                         refuse commands until it does, or until you choose full access for \
                         this workspace (rewind sandbox mode danger-full-access)",
                        e.message
                    );
                }
                RunMode::Workspace
            }
        };
        Ok(Server {
            ep: Arc::new(Mutex::new(ep)),
            run_mode,
            session,
            start_baseline: opts.start_baseline,
            start_gc: opts.start_gc,
            wal,
        })
    }

    /// The session the tools record for.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// Calls operation `method` of the service with `params` on a blocking thread. The call
    /// runs to its end even when the client goes away meanwhile (so no epoch is left open).
    pub(crate) async fn call(
        &self,
        method: &'static str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, ApiError> {
        let ep = self.ep.clone();
        let (start_baseline, start_gc) = (self.start_baseline, self.start_gc);
        let wal = self.wal.clone();
        tokio::task::spawn_blocking(move || {
            let ep = ep.lock().unwrap_or_else(|p| p.into_inner());
            // The WAL thread's fold and checkpoint wait until tool calls are over for a while.
            let under_way = wal.as_ref().map(|w| w.busy());
            let out = if method != "exec" {
                ep.call(method, params)
            } else {
                // A command runs in this process (its environment, its directory); its epoch
                // is recorded through the server when one runs.
                let mut req: ExecRequest = serde_json::from_value(params)
                    .map_err(|e| ApiError::usage(format!("invalid params: {e}")))?;
                req.collect_output = true;
                let out = ep.service().exec_with(&req, &*ep)?;
                serde_json::to_value(out)
                    .map_err(|e| ApiError::new(ErrorKind::Error, format!("encoding result: {e}")))
            };
            // A server's captures re-read only what changed; this process's walk the tree.
            let captured = matches!(method, "exec" | "checkpoint" | "restore" | "undo");
            if let (true, false, Some(start)) = (captured, ep.via_server(), start_baseline) {
                if ep.service().baseline_due().unwrap_or(false) {
                    start(&ep.context().root());
                }
            }
            let checkpointed = method == "checkpoint" && out.is_ok();
            if let (true, false, Some(start)) = (checkpointed, ep.via_server(), start_gc) {
                if ep.service().gc_due().unwrap_or(false) {
                    start(&ep.context().root());
                }
            }
            drop(under_way);
            if let Some(w) = &wal {
                w.nudge();
            }
            out
        })
        .await
        .unwrap_or_else(|e| {
            Err(ApiError::new(
                ErrorKind::Error,
                format!("operation failed: {e}"),
            ))
        })
    }

    /// Serves one client on this process's standard input and output until the input ends.
    /// Operations still running then are finished before this returns.
    pub fn serve_stdio(self) -> Result<(), ApiError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| ApiError::new(ErrorKind::Error, format!("starting the server: {e}")))?;
        let result = rt.block_on(async move {
            let running = match self.serve(rmcp::transport::stdio()).await {
                Ok(r) => r,
                // The client went away before its first request: nothing to serve.
                Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
                Err(e) => {
                    return Err(ApiError::new(
                        ErrorKind::Error,
                        format!("MCP handshake: {e}"),
                    ))
                }
            };
            running
                .waiting()
                .await
                .map_err(|e| ApiError::new(ErrorKind::Error, format!("MCP server: {e}")))?;
            Ok(())
        });
        // Dropping the runtime waits for blocking operations still running: an operation a
        // client gave up on still settles its epoch.
        drop(rt);
        result
    }
}

/// A session name for this server process.
fn default_session() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!("mcp-{secs}-{}", std::process::id())
}

/// Runs `rewind mcp` as `opts` says until the client closes standard input.
pub fn serve(opts: &Options) -> Result<(), ApiError> {
    Server::new(opts)?.serve_stdio()
}

const INSTRUCTIONS: &str = "Rewind records every change made through these tools and can put \
it back. Read a file (read_file) before you change it (write_file, edit_file, apply_patch): a \
write to a file you have not read, or that changed since you read it, is refused. Run shell \
commands with `run`: each is recorded, so `undo` or `restore` can revert what it changed. Call \
`checkpoint` at the start of each task step; `restore` to a checkpoint previews by default \
(dry_run) and applies with dry_run: false.";

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("rewind", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::list()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // A client that asked for progress hears every second that the call still runs (a
        // long command, or the whole-tree captures around it), until it returns.
        let ticker = context.meta.get_progress_token().map(|token| {
            let peer = context.peer.clone();
            let name = request.name.to_string();
            tokio::spawn(async move {
                for secs in 1u64.. {
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    let p = ProgressNotificationParam::new(token.clone(), secs as f64)
                        .with_message(format!("{name}: still running after {secs} s"));
                    if peer.notify_progress(p).await.is_err() {
                        break;
                    }
                }
            })
        });
        let result = tools::call(self, request).await;
        if let Some(t) = ticker {
            t.abort();
        }
        result.map(CallToolResponse::from)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(
            resources::list(self).await?,
        ))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        resources::read(self, &request.uri)
            .await
            .map(ReadResourceResponse::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a server, `rewind mcp` commits in its own process: its WAL checkpoints run on
    /// its own thread after each tool call, never inside a call's commit. Tool calls that take
    /// the WAL past the automatic checkpoint's bound are followed by the thread's checkpoint,
    /// and the WAL starts over instead of growing.
    #[test]
    fn tool_calls_leave_wal_checkpoints_to_the_servers_thread() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        // SAFETY: the only test of this crate that reads the environment.
        unsafe { std::env::set_var("REWIND_HOME", tmp.path().join("home")) };
        let server = Server::new(&Options {
            dir: root.clone(),
            session: Some("S".into()),
            sandbox: Some(SandboxMode::DangerFullAccess),
            start_baseline: None,
            start_gc: None,
        })
        .unwrap();
        let wal = server
            .wal
            .clone()
            .expect("a checkpoint thread without a server");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        // Hex of a pseudo-random stream: about half of it stays after compression, so each
        // write stores some 40 KiB inline in the database, about ten pages of WAL.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut text = |n: usize| -> String {
            (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    char::from_digit((x & 15) as u32, 16).unwrap()
                })
                .collect()
        };
        let wal_file = std::fs::read_dir(tmp.path().join("home/workspaces"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.is_dir())
            .expect("the workspace's state")
            .join("meta.sqlite-wal");
        let mut largest = 0;
        for i in 0..200 {
            let r = rt
                .block_on(server.call(
                    "write",
                    serde_json::json!({"path": format!("f{i}.txt"), "content": text(80 << 10)}),
                ))
                .unwrap();
            assert!(r.is_object(), "{r}");
            largest = largest.max(std::fs::metadata(&wal_file).map_or(0, |m| m.len()));
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while wal.completed() == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the thread never checkpointed (WAL reached {largest} bytes)"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // Started over, not grown by every call: the 200 writes put about 27 MB through it.
        assert!(largest < 8 << 20, "WAL reached {largest} bytes");
    }
}
