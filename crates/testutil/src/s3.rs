//! A real S3-protocol server on loopback for the remote tests: never a mock of the API.
//!
//! [`S3Server::start`] runs one server process per call, on a free port of 127.0.0.1, with its
//! data in a fresh temporary directory, one bucket ([`S3Server::bucket`]) and one access key
//! generated for this run. Requests must be signed (AWS Signature Version 4) with that key: an
//! unsigned or wrongly signed request is refused, as a real store refuses it.
//!
//! Which server (`REWIND_S3_SERVER`):
//! - `s3s-fs` (the default): the `s3s-fs` binary of the `s3s` project (crates.io), objects as
//!   files under the data directory. Found through `REWIND_S3_BIN`, else as `s3s-fs` in `PATH`.
//!   `scripts/test` builds it once into a cache outside the repository and sets `REWIND_S3_BIN`.
//! - `garage`: Garage, a single node on the sqlite metadata engine, found through
//!   `REWIND_GARAGE_BIN`, else as `garage` in `PATH` (not installed by `scripts/test`: its build
//!   takes too long for CI; for benchmarks and for checking against a distributed store).
//!
//! With no binary found, `start` panics saying how to get one: a test that needs the server
//! fails rather than passes silently.
//!
//! ```no_run
//! let s3 = rewind_testutil::s3::S3Server::start();
//! let mut cmd = std::process::Command::new("rewind");
//! s3.set_env(&mut cmd); // AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ... for object_store
//! cmd.args(["remote", "add", "origin", &s3.url("ws1")]); // s3://BUCKET/ws1
//! assert!(cmd.status().unwrap().success());
//! ```
//!
//! What the servers differ in (see [`S3Server::conditional_create`]): s3s-fs honours
//! `If-None-Match: *` on PUT (412 when the key exists; checked before writing, not atomic
//! against a concurrent PUT of the same key); Garage ignores it and overwrites. s3s-fs stores a
//! key as a path: one key cannot be both an object and a prefix of others (`a` and `a/b`), and
//! keys are limited by file-name length: its metadata file names hold the key in base64, which
//! leaves about 155 bytes for a key (about 120 for one uploaded in parts).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Which server program runs behind an [`S3Server`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `s3s-fs` from crates.io (the default, what CI runs).
    S3sFs,
    /// Garage, one node (`REWIND_S3_SERVER=garage`, binary from `REWIND_GARAGE_BIN`).
    Garage,
}

impl Kind {
    /// The kind `REWIND_S3_SERVER` names (`s3s-fs` when unset). Panics on another value.
    pub fn from_env() -> Kind {
        match std::env::var("REWIND_S3_SERVER").as_deref() {
            Err(_) | Ok("") | Ok("s3s-fs") => Kind::S3sFs,
            Ok("garage") => Kind::Garage,
            Ok(other) => panic!("REWIND_S3_SERVER={other:?}: expected s3s-fs or garage"),
        }
    }

    /// The server's name as `REWIND_S3_SERVER` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::S3sFs => "s3s-fs",
            Kind::Garage => "garage",
        }
    }
}

/// The name of the bucket every [`S3Server`] creates.
pub const BUCKET: &str = "rewind-test";

/// How long a start (or restart) may take before the harness gives up.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a stop waits after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A running S3-protocol server on 127.0.0.1 (see the module documentation). Dropping it kills
/// the server and removes its data.
pub struct S3Server {
    kind: Kind,
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    /// Garage's RPC port (its command-line tool talks to the node through it); 0 for s3s-fs.
    rpc_port: u16,
    region: String,
    access_key_id: String,
    secret_access_key: String,
    child: Option<Child>,
}

impl S3Server {
    /// Starts the server `REWIND_S3_SERVER` names (s3s-fs by default) on a free loopback port,
    /// with its data in a new temporary directory, creates the bucket [`BUCKET`] and an access
    /// key (generated for this run) that may read and write it, and returns once the server
    /// answers HTTP requests. Panics if the binary is missing or the server does not come up
    /// (with the end of its log).
    pub fn start() -> S3Server {
        S3Server::start_kind(Kind::from_env())
    }

    /// [`S3Server::start`] with the server kind given, not read from `REWIND_S3_SERVER`.
    pub fn start_kind(kind: Kind) -> S3Server {
        let bin = find_binary(kind);
        let dir = tempfile::Builder::new()
            .prefix("rewind-s3-")
            .tempdir()
            .expect("temporary directory for the S3 server");
        let (region, access_key_id, secret_access_key) = match kind {
            // s3s-fs takes any key; it checks the signature against the one it was given.
            Kind::S3sFs => (
                "us-east-1".to_string(),
                format!("RW{}", random_hex(9)),
                random_hex(20),
            ),
            // Garage's own format (it accepts imported keys of this shape).
            Kind::Garage => (
                "garage".to_string(),
                format!("GK{}", random_hex(12)),
                random_hex(32),
            ),
        };
        let mut server = S3Server {
            kind,
            bin,
            dir,
            port: 0,
            rpc_port: 0,
            region,
            access_key_id,
            secret_access_key,
            child: None,
        };
        std::fs::create_dir_all(server.data_dir()).unwrap();
        // A port found free can be taken again before the server binds it: a few tries.
        let mut last_err = String::new();
        for _ in 0..5 {
            server.port = free_port();
            if kind == Kind::Garage {
                server.rpc_port = free_port();
                server.write_garage_config();
            }
            match server.spawn_and_wait() {
                Ok(()) => {
                    server.setup();
                    return server;
                }
                Err(e) => last_err = e,
            }
        }
        panic!("{} did not start: {last_err}", kind.name());
    }

    /// The server program behind this one.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The endpoint URL clients are given: `http://127.0.0.1:PORT` (path-style requests).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The port the S3 API listens on (the same across [`S3Server::restart`]).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The region requests are signed for (`us-east-1` for s3s-fs, `garage` for Garage).
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The bucket created at start ([`BUCKET`]).
    pub fn bucket(&self) -> &str {
        BUCKET
    }

    /// The access key id (generated for this run).
    pub fn access_key_id(&self) -> &str {
        &self.access_key_id
    }

    /// The secret access key (generated for this run).
    pub fn secret_access_key(&self) -> &str {
        &self.secret_access_key
    }

    /// `s3://BUCKET/PREFIX` (`s3://BUCKET` for an empty prefix): a remote URL in this bucket.
    pub fn url(&self, prefix: &str) -> String {
        let prefix = prefix.trim_matches('/');
        if prefix.is_empty() {
            format!("s3://{BUCKET}")
        } else {
            format!("s3://{BUCKET}/{prefix}")
        }
    }

    /// Whether the server refuses a PUT with `If-None-Match: *` of an existing key (412), as
    /// AWS S3 does: s3s-fs yes, Garage no (it overwrites). object_store's `PutMode::Create`
    /// relies on it.
    pub fn conditional_create(&self) -> bool {
        self.kind == Kind::S3sFs
    }

    /// The environment variables an S3 client needs to reach this server, as `(name, value)`:
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION` and `AWS_DEFAULT_REGION`,
    /// `AWS_ENDPOINT_URL` and `AWS_ENDPOINT` (object_store's `AmazonS3Builder::from_env` reads
    /// either; other clients read the first), `AWS_ALLOW_HTTP=true` (plain HTTP on loopback),
    /// `AWS_VIRTUAL_HOSTED_STYLE_REQUEST=false` (path-style: no per-bucket host names on
    /// loopback) and `AWS_EC2_METADATA_DISABLED=true` (no instance-metadata lookups).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", self.access_key_id.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.secret_access_key.clone()),
            ("AWS_REGION", self.region.clone()),
            ("AWS_DEFAULT_REGION", self.region.clone()),
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ENDPOINT", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".to_string()),
            ("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "false".to_string()),
            ("AWS_EC2_METADATA_DISABLED", "true".to_string()),
        ]
    }

    /// Variables of the caller's environment that would override or add to [`S3Server::env`]
    /// in object_store or other AWS clients (a session token, a profile, an S3-specific
    /// endpoint, which object_store prefers to `AWS_ENDPOINT_URL`): [`S3Server::set_env`]
    /// removes them.
    pub const CONFLICTING_ENV: &'static [&'static str] = &[
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_PROFILE",
        "AWS_ENDPOINT_URL_S3",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_SKIP_SIGNATURE",
        "AWS_BUCKET",
        "AWS_BUCKET_NAME",
    ];

    /// Gives `cmd` the environment of [`S3Server::env`] and removes
    /// [`S3Server::CONFLICTING_ENV`] from it.
    pub fn set_env<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        for name in Self::CONFLICTING_ENV {
            cmd.env_remove(name);
        }
        cmd.envs(self.env())
    }

    /// The directory the server keeps the objects in (s3s-fs: one file per object under
    /// `BUCKET/`, metadata beside it; Garage: its data blocks). [`S3Server::stored_bytes`]
    /// sums it.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The bytes of every file under [`S3Server::data_dir`]: its growth over an operation is
    /// what that operation stored (uploaded, for a store that keeps objects as they come).
    pub fn stored_bytes(&self) -> u64 {
        fn walk(p: &Path) -> u64 {
            let Ok(entries) = std::fs::read_dir(p) else {
                return 0;
            };
            entries
                .flatten()
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => walk(&e.path()),
                    Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
                    _ => 0,
                })
                .sum()
        }
        walk(&self.data_dir())
    }

    /// The server's log (its stdout and stderr, every start appended), for a failing test's
    /// message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Whether the server process is running (started and not exited).
    pub fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Stops the server: SIGTERM, then SIGKILL if it has not exited within 10 seconds. Its
    /// data stays; [`S3Server::resume`] starts it again. Nothing happens if it is stopped.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            terminate(&mut child, STOP_GRACE);
        }
    }

    /// Kills the server at once (SIGKILL), as a crash would. Its data stays, in whatever state
    /// the kill left it; [`S3Server::resume`] starts it again.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a stopped server again, on the same port with the same data, key and bucket, and
    /// returns once it answers. Panics if it is running or does not come up.
    pub fn resume(&mut self) {
        assert!(
            self.child.is_none(),
            "the S3 server is running: stop() it first"
        );
        // The port was ours a moment ago; another process may not take it, but a socket of the
        // old server can linger: retry binding for a while.
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match self.spawn_and_wait() {
                Ok(()) => return,
                Err(e) if Instant::now() < deadline && e.contains("in use") => {
                    std::thread::sleep(Duration::from_millis(200))
                }
                Err(e) => panic!("{} did not start again: {e}", self.kind.name()),
            }
        }
    }

    /// [`S3Server::stop`] then [`S3Server::resume`]: the same port, data, key and bucket.
    pub fn restart(&mut self) {
        self.stop();
        self.resume();
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    fn garage_config_path(&self) -> PathBuf {
        self.dir.path().join("garage.toml")
    }

    fn write_garage_config(&self) {
        let d = self.dir.path();
        let config = format!(
            "metadata_dir = \"{meta}\"\n\
             data_dir = \"{data}\"\n\
             db_engine = \"sqlite\"\n\
             replication_factor = 1\n\
             rpc_bind_addr = \"127.0.0.1:{rpc}\"\n\
             rpc_public_addr = \"127.0.0.1:{rpc}\"\n\
             rpc_secret = \"{secret}\"\n\
             \n\
             [s3_api]\n\
             s3_region = \"{region}\"\n\
             api_bind_addr = \"127.0.0.1:{port}\"\n\
             root_domain = \".s3.garage.localhost\"\n",
            meta = d.join("meta").display(),
            data = self.data_dir().display(),
            rpc = self.rpc_port,
            secret = random_hex(32),
            region = self.region,
            port = self.port,
        );
        std::fs::write(self.garage_config_path(), config).unwrap();
    }

    /// Spawns the server process and waits until its S3 port answers HTTP (any status below
    /// 500: Garage answers 500 or 503 until its layout is applied and the bucket exists, which
    /// `setup` does). Err with the log's end if it exits or does not answer in time.
    fn spawn_and_wait(&mut self) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap();
        let mut cmd = Command::new(&self.bin);
        match self.kind {
            Kind::S3sFs => {
                let bucket_dir = self.data_dir().join(BUCKET);
                std::fs::create_dir_all(&bucket_dir).unwrap();
                cmd.args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
                    .args(["--access-key", &self.access_key_id])
                    .args(["--secret-key", &self.secret_access_key])
                    .arg(self.data_dir())
                    .env("RUST_LOG", "warn");
            }
            Kind::Garage => {
                cmd.arg("-c")
                    .arg(self.garage_config_path())
                    .arg("server")
                    .env("RUST_LOG", "garage=warn");
            }
        }
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.bin.display()));
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        // Garage answers 500 until set up: only wait for the port to answer at all then.
        let first_start = self.kind == Kind::Garage && !self.dir.path().join("ready").exists();
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                return Err(format!("exited ({status}); log:\n{}", tail(&self.log())));
            }
            match http_status(self.port, &format!("/{BUCKET}")) {
                Some(s) if s < 500 || (first_start && s > 0) => return Ok(()),
                _ => {}
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(format!(
                    "no answer on port {} within {START_TIMEOUT:?}; log:\n{}",
                    self.port,
                    tail(&self.log())
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// After the first start: the bucket and the key (s3s-fs was given both on its command
    /// line and has the bucket's directory), then waits until the bucket answers.
    fn setup(&mut self) {
        if self.kind == Kind::Garage {
            let node = self.garage_retry(&["node", "id", "-q"]);
            let node = node.trim().split('@').next().unwrap().to_string();
            self.garage(&["layout", "assign", "-z", "dc1", "-c", "1G", &node]);
            self.garage(&["layout", "apply", "--version", "1"]);
            let (key, secret) = (self.access_key_id.clone(), self.secret_access_key.clone());
            self.garage_retry(&["key", "import", "--yes", "-n", "rewind-test", &key, &secret]);
            self.garage_retry(&["bucket", "create", BUCKET]);
            self.garage(&[
                "bucket", "allow", "--read", "--write", "--owner", BUCKET, "--key", &key,
            ]);
            std::fs::write(self.dir.path().join("ready"), "").unwrap();
        }
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            // Unsigned: refused (403, or another 4xx) once the server is set up; 5xx before.
            match http_status(self.port, &format!("/{BUCKET}")) {
                Some(s) if (400..500).contains(&s) && s != 404 => return,
                s if Instant::now() > deadline => panic!(
                    "{}: the bucket does not answer (last status {s:?}); log:\n{}",
                    self.kind.name(),
                    tail(&self.log())
                ),
                _ => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// Runs Garage's command-line tool against this node; panics with its output on failure.
    fn garage(&self, args: &[&str]) -> String {
        self.garage_try(args)
            .unwrap_or_else(|e| panic!("garage {}: {e}", args.join(" ")))
    }

    /// [`Self::garage`], retried for a while (the node may not be up or settled yet).
    fn garage_retry(&self, args: &[&str]) -> String {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match self.garage_try(args) {
                Ok(out) => return out,
                Err(e) if Instant::now() > deadline => panic!("garage {}: {e}", args.join(" ")),
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    fn garage_try(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(&self.bin)
            .arg("-c")
            .arg(self.garage_config_path())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "{}\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            terminate(&mut child, Duration::from_secs(2));
        }
    }
}

impl std::fmt::Debug for S3Server {
    /// Everything but the secret key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Server")
            .field("kind", &self.kind)
            .field("endpoint", &self.endpoint())
            .field("region", &self.region)
            .field("bucket", &BUCKET)
            .field("access_key_id", &self.access_key_id)
            .field("data_dir", &self.data_dir())
            .finish_non_exhaustive()
    }
}

/// SIGTERM, up to `grace` for the process to exit, then SIGKILL; reaps it.
fn terminate(child: &mut Child, grace: Duration) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    // SAFETY: a plain kill(2) of our own child, which has not been reaped (no pid reuse).
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The server binary for `kind`, or a panic saying how to get one.
fn find_binary(kind: Kind) -> PathBuf {
    let (var, name) = match kind {
        Kind::S3sFs => ("REWIND_S3_BIN", "s3s-fs"),
        Kind::Garage => ("REWIND_GARAGE_BIN", "garage"),
    };
    if let Some(p) = std::env::var_os(var).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "{var}={} is not a file", p.display());
        return p;
    }
    let in_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    match (in_path, kind) {
        (Some(p), _) => p,
        (None, Kind::S3sFs) => panic!(
            "no S3 server for the remote tests: REWIND_S3_BIN is unset and s3s-fs is not in PATH. \
             Run the tests through scripts/test (it builds s3s-fs once into a cache outside the \
             repository and sets REWIND_S3_BIN), or set REWIND_S3_BIN to an s3s-fs binary"
        ),
        (None, Kind::Garage) => panic!(
            "REWIND_S3_SERVER=garage but REWIND_GARAGE_BIN is unset and garage is not in PATH: \
             set REWIND_GARAGE_BIN to a garage binary (cargo install garage)"
        ),
    }
}

/// A port of 127.0.0.1 that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a loopback port")
        .port()
}

/// `n` random bytes as hex (from the kernel's generator).
fn random_hex(n: usize) -> String {
    let mut buf = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .expect("read /dev/urandom");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// The status of an unsigned `HEAD path` to 127.0.0.1:`port`, or None if nothing answers.
fn http_status(port: u16, path: &str) -> Option<u16> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let req =
        format!("HEAD {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut buf = [0u8; 64];
    let mut got = 0;
    while got < 12 {
        match s.read(&mut buf[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    let line = std::str::from_utf8(&buf[..got]).ok()?;
    line.strip_prefix("HTTP/1.1 ")
        .or_else(|| line.strip_prefix("HTTP/1.0 "))?
        .get(..3)?
        .parse()
        .ok()
}

/// The last 40 lines of a log.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
