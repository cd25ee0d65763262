//! The web UI of `rewind serve --http` and `rewind ui`: pages that show a workspace's sessions
//! as conversation trees of checkpoints and epochs, their diffs, a previewed "rewind to here"
//! with undo, and the workspace's status, updated live.
//!
//! It is a front like the others: every page talks to `POST /rpc`, which is the server's
//! JSON-RPC (the same operations, sessions and errors as the socket, through a
//! [`rewind_server::Handle`]), and `GET /events` streams the server's events (server-sent
//! events; every process's epochs and checkpoints). The pages are plain HTML, CSS and
//! JavaScript embedded in the binary: no build step, nothing fetched from elsewhere.
//!
//! Security (see [`guard`]): a random token on every request, exchanged for an `HttpOnly`,
//! `SameSite=Strict` cookie; the `Host` must be this server by a loopback name or address;
//! POST only from this server's own pages (`Origin`); a strict Content-Security-Policy; no
//! CORS. Binding a non-loopback address takes an explicit choice ([`Listener::bind`]).

mod assets;
pub mod guard;
mod http;

use std::net::{SocketAddr, TcpListener};

use rewind_api::{ApiError, ErrorKind};

/// A bound address with its token, not serving yet: bound before the server starts, so that
/// serve.json can record the address and a port in use fails before anything else.
pub struct Listener {
    listener: TcpListener,
    addr: SocketAddr,
    rules: guard::Rules,
}

impl Listener {
    /// Binds `addr` (port 0: a free one) with a new token. A non-loopback address is refused
    /// unless `allow_remote`: anyone who can reach it and learns the token (sent in clear
    /// over plain HTTP) can do whatever this user can.
    pub fn bind(addr: SocketAddr, allow_remote: bool) -> Result<Listener, ApiError> {
        if !addr.ip().is_loopback() && !allow_remote {
            return Err(ApiError::new(
                ErrorKind::Usage,
                format!(
                    "{} is not a loopback address: other machines could reach the web UI",
                    addr.ip()
                ),
            )
            .hint("add --allow-remote if that is what you want (the token travels unencrypted)")
            .hint("or listen on 127.0.0.1 (the default) and reach it through an SSH tunnel"));
        }
        let listener = TcpListener::bind(addr).map_err(|e| {
            ApiError::new(ErrorKind::Error, format!("cannot listen on {addr}: {e}"))
                .hint("give another address or port with --http ADDR, or none for a free port")
        })?;
        let addr = listener
            .local_addr()
            .map_err(|e| ApiError::new(ErrorKind::Error, format!("cannot listen: {e}")))?;
        let token = guard::new_token().map_err(|e| {
            ApiError::new(ErrorKind::Error, format!("cannot make a random token: {e}"))
        })?;
        Ok(Listener {
            listener,
            addr,
            rules: guard::Rules {
                port: addr.port(),
                remote: !addr.ip().is_loopback(),
                token,
            },
        })
    }

    /// Whether other machines may reach it.
    pub fn is_remote(&self) -> bool {
        self.rules.remote
    }

    /// The address to open, without the token: the bound one, or 127.0.0.1 when it listens
    /// on every address.
    pub fn url(&self) -> String {
        let ip = match self.addr.ip() {
            ip if ip.is_unspecified() => "127.0.0.1".parse().expect("an address"),
            ip => ip,
        };
        format!("http://{}/", SocketAddr::new(ip, self.addr.port()))
    }

    /// What the server records of it (address and token).
    pub fn front(&self) -> rewind_server::WebFront {
        rewind_server::WebFront {
            url: self.url(),
            token: self.rules.token.clone(),
        }
    }

    /// Serves the UI on threads of its own, for as long as the process runs, through `handle`.
    /// Call it after the server started (threads started before would take stop signals).
    pub fn serve(self, handle: rewind_server::Handle) -> Result<(), ApiError> {
        let server = tiny_http::Server::from_listener(self.listener, None).map_err(|e| {
            ApiError::new(ErrorKind::Error, format!("cannot serve the web UI: {e}"))
        })?;
        let app = std::sync::Arc::new(http::App::new(handle, self.rules));
        std::thread::spawn(move || {
            for request in server.incoming_requests() {
                let app = app.clone();
                // A thread per request: an event stream stays open, a restore may take a while.
                std::thread::spawn(move || app.handle(request));
            }
        });
        Ok(())
    }
}

/// The address with its token, as printed for a person to open.
pub fn url_with_token(url: &str, token: &str) -> String {
    format!("{url}?token={token}")
}
