//! Requests: the checks of [`crate::guard`] first, then the pages, `POST /rpc`,
//! `GET /overview.json` and `GET /events`.

use std::io::{Read, Write};
use std::time::Duration;

use serde_json::{json, Value};
use tiny_http::{Header, Method, Request, Response};

use crate::assets;
use crate::guard::{Credential, Rules};

/// The largest `/rpc` body read, as the socket's largest line.
const MAX_BODY: u64 = 16 << 20;

/// How often an idle event stream sends a comment, so that a closed one is noticed.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// Every response's security headers: only this server's own scripts, styles and requests,
/// never in a frame, no referrer (an address may carry the token), nothing cached.
const SECURITY_HEADERS: &[(&str, &str)] = &[
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
];

pub struct App {
    handle: rewind_server::Handle,
    rules: Rules,
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("a valid header")
}

fn respond(request: Request, status: u16, content_type: &str, body: Vec<u8>) {
    let mut r = Response::from_data(body)
        .with_status_code(status)
        .with_header(header("Content-Type", content_type));
    for (k, v) in SECURITY_HEADERS {
        r.add_header(header(k, v));
    }
    let _ = request.respond(r);
}

fn text(request: Request, status: u16, body: &str) {
    respond(
        request,
        status,
        "text/plain; charset=utf-8",
        format!("{body}\n").into_bytes(),
    );
}

fn json_response(request: Request, status: u16, v: &Value) {
    respond(
        request,
        status,
        "application/json",
        serde_json::to_vec(v).unwrap_or_default(),
    );
}

/// A header's value, if it was sent once as text.
fn get<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request
        .headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

/// The path and the query's parameters (only `token` and `session` matter here).
fn split_url(url: &str) -> (&str, Vec<(&str, &str)>) {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let params = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    (path, params)
}

impl App {
    pub fn new(handle: rewind_server::Handle, rules: Rules) -> App {
        App { handle, rules }
    }

    /// Refuses `request` with `status`, saying why on stderr without the address's query
    /// (which may hold a token).
    fn refuse(&self, request: Request, status: u16, why: &str) {
        let path = request.url().split('?').next().unwrap_or_default();
        eprintln!(
            "rewind: web UI: refused {} {}: {why}",
            request.method(),
            path.escape_debug()
        );
        text(request, status, &format!("refused: {why}"));
    }

    pub fn handle(&self, request: Request) {
        if let Err(why) = self.rules.check_host(get(&request, "Host")) {
            return self.refuse(request, 403, why);
        }
        let url = request.url().to_string();
        let (path, params) = split_url(&url);
        let query_token = params.iter().find(|(k, _)| *k == "token").map(|(_, v)| *v);
        let credential = self.rules.credential(
            get(&request, "Cookie"),
            get(&request, "Authorization"),
            query_token,
        );
        let Some(credential) = credential else {
            return self.refuse(
                request,
                401,
                "no valid token: open the address `rewind ui` prints (it carries the token)",
            );
        };
        if credential == Credential::Query {
            // Exchanged for the cookie, and the address without it in the address bar (and so
            // in no history, bookmark or referrer).
            let rest: Vec<String> = params
                .iter()
                .filter(|(k, _)| *k != "token")
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let to = if rest.is_empty() {
                path.to_string()
            } else {
                format!("{path}?{}", rest.join("&"))
            };
            let mut r = Response::empty(303)
                .with_header(header("Location", &to))
                .with_header(header("Set-Cookie", &self.rules.set_cookie()));
            for (k, v) in SECURITY_HEADERS {
                r.add_header(header(k, v));
            }
            let _ = request.respond(r);
            return;
        }
        let method = request.method().clone();
        match (&method, path) {
            (Method::Get | Method::Head, _) => self.get(request, path),
            (Method::Post, "/rpc") => {
                let host = get(&request, "Host").unwrap_or_default().to_string();
                if let Err(why) =
                    self.rules
                        .check_origin(get(&request, "Origin"), &host, &credential)
                {
                    return self.refuse(request, 403, why);
                }
                self.rpc(request)
            }
            (Method::Post, _) => text(request, 404, "no such address"),
            _ => {
                let mut r = Response::from_string("only GET and POST\n").with_status_code(405);
                r.add_header(header("Allow", "GET, POST"));
                let _ = request.respond(r);
            }
        }
    }

    fn get(&self, request: Request, path: &str) {
        match path {
            "/events" => self.events(request),
            "/overview.json" => {
                let v = self.overview();
                json_response(request, 200, &v)
            }
            "/rpc" => text(request, 405, "POST a JSON-RPC request to /rpc"),
            _ => match assets::find(path) {
                Some((content_type, body)) => respond(request, 200, content_type, body.to_vec()),
                None => text(request, 404, "no such page"),
            },
        }
    }

    /// `POST /rpc`: a JSON-RPC message (a request or a batch), answered as the socket would.
    fn rpc(&self, mut request: Request) {
        let json_body =
            get(&request, "Content-Type").is_some_and(|t| t.trim().starts_with("application/json"));
        if !json_body {
            return text(request, 415, "send JSON (Content-Type: application/json)");
        }
        let mut body = Vec::new();
        if request
            .as_reader()
            .take(MAX_BODY + 1)
            .read_to_end(&mut body)
            .is_err()
        {
            return text(request, 400, "the request body could not be read");
        }
        if body.len() as u64 > MAX_BODY {
            return text(request, 413, "the request is larger than 16 MiB");
        }
        match self.handle.answer(&body) {
            Some(answer) => respond(
                request,
                200,
                "application/json",
                answer.get().as_bytes().to_vec(),
            ),
            None => respond(request, 204, "text/plain", Vec::new()),
        }
    }

    /// What the status panel shows besides `status`: the workspace, the state's size on disk
    /// and its budget (`[retention]`).
    fn overview(&self) -> Value {
        let session = self.handle.session().to_string();
        let out = self.handle.with_service(&session, |svc| {
            let config = svc.config().ok();
            let state = svc.context().state_dir();
            let retention = config.map(|c| c.retention);
            json!({
                "root": self.handle.root(),
                "session": session,
                "version": env!("CARGO_PKG_VERSION"),
                "state_bytes": state.as_deref().map(dir_size),
                "budget": retention.as_ref().and_then(|r| r.max_bytes).map(|s| s.0),
                "max_age_s": retention.as_ref().and_then(|r| r.max_age).map(|s| s.0.as_secs()),
                "keep": retention.as_ref().and_then(|r| r.keep),
            })
        });
        out.unwrap_or_else(|e| json!({"error": e}))
    }

    /// `GET /events`: the server's events as server-sent events, until the page goes away.
    fn events(&self, request: Request) {
        let events = self.handle.events();
        let mut head = String::from(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n",
        );
        for (k, v) in SECURITY_HEADERS {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n: events of this workspace\n\n");
        let mut out = request.into_writer();
        if out
            .write_all(head.as_bytes())
            .and_then(|_| out.flush())
            .is_err()
        {
            return;
        }
        while !self.handle.stopping() {
            let chunk = match events.next(KEEPALIVE) {
                Some(e) => format!(
                    "data: {}\n\n",
                    serde_json::to_string(&e).unwrap_or_default()
                ),
                None => ": still here\n\n".to_string(),
            };
            if out
                .write_all(chunk.as_bytes())
                .and_then(|_| out.flush())
                .is_err()
            {
                return;
            }
        }
    }
}

/// Bytes of the files under `dir`.
fn dir_size(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}
