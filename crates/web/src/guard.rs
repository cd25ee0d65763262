//! Who may talk to the web UI, checked on every request before anything else is read:
//!
//! - the `Host` header must name this server by a loopback name or address (`localhost`,
//!   `127.0.0.1`, `[::1]`; any IP address when it was bound to a non-loopback one) with its
//!   port, so a page whose name was re-pointed at 127.0.0.1 (DNS rebinding) is refused;
//! - the token must come with it: the session cookie, an `Authorization: Bearer` header (for
//!   scripts), or once in the address (`?token=`), which is exchanged for the cookie;
//! - a request that may change something (POST) must come from this server's own pages: its
//!   `Origin` must be this server (a script with the bearer header has none to send).
//!
//! Tokens are compared in constant time. Nothing here logs a token.

use std::net::{IpAddr, SocketAddr};

/// 128 random bits, as 32 hex digits.
pub fn new_token() -> std::io::Result<String> {
    let mut buf = [0u8; 16];
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: writes at most the given length into the buffer.
        let n =
            unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), buf.len() - filled, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
            continue;
        }
        filled += n as usize;
    }
    Ok(hex::encode(buf))
}

/// Whether `given` is `token`, in time that does not depend on where they differ.
pub fn same_token(given: &str, token: &str) -> bool {
    let (a, b) = (given.as_bytes(), token.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What the server checks requests against.
pub struct Rules {
    /// The port it listens on: a `Host` must name it.
    pub port: u16,
    /// Bound to a non-loopback address (`--allow-remote`): IP addresses are accepted as hosts.
    pub remote: bool,
    /// The token.
    pub token: String,
}

/// How a request proved it may come in.
#[derive(Debug, PartialEq, Eq)]
pub enum Credential {
    /// The session cookie (a browser).
    Cookie,
    /// `Authorization: Bearer` (a script).
    Bearer,
    /// `?token=` in the address: answered by setting the cookie and sending the browser to
    /// the same address without it.
    Query,
}

impl Rules {
    /// The cookie that carries the token: named after the port, because browsers share
    /// cookies between the ports of one host.
    pub fn cookie_name(&self) -> String {
        format!("rewind-{}", self.port)
    }

    /// `Set-Cookie`'s value for the token.
    pub fn set_cookie(&self) -> String {
        format!(
            "{}={}; Path=/; HttpOnly; SameSite=Strict",
            self.cookie_name(),
            self.token
        )
    }

    /// Whether `host` (the `Host` header) names this server; why not otherwise.
    pub fn check_host(&self, host: Option<&str>) -> Result<(), &'static str> {
        let host = host.ok_or("no Host header")?;
        let (name, port) = split_host(host).ok_or("a Host header that does not parse")?;
        if port != Some(self.port) {
            return Err("a Host header with another port");
        }
        if name.eq_ignore_ascii_case("localhost") {
            return Ok(());
        }
        match name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            Ok(ip) if ip.is_loopback() || self.remote => Ok(()),
            _ => Err("a Host header that is not a loopback name or address"),
        }
    }

    /// The credential a request carries, if it is the token: cookie, bearer header or query.
    pub fn credential(
        &self,
        cookie: Option<&str>,
        authorization: Option<&str>,
        query_token: Option<&str>,
    ) -> Option<Credential> {
        let name = self.cookie_name();
        let from_cookie = cookie.into_iter().flat_map(|c| c.split(';')).any(|pair| {
            pair.trim()
                .split_once('=')
                .is_some_and(|(k, v)| k == name && same_token(v, &self.token))
        });
        if from_cookie {
            return Some(Credential::Cookie);
        }
        if let Some(t) = authorization.and_then(|a| a.strip_prefix("Bearer ")) {
            if same_token(t.trim(), &self.token) {
                return Some(Credential::Bearer);
            }
        }
        query_token
            .filter(|t| same_token(t, &self.token))
            .map(|_| Credential::Query)
    }

    /// Whether a request that may change something comes from this server's pages: its
    /// `Origin` is `http://` and the `Host` it was sent to (checked already). A bearer
    /// request (a script) may send none; one it sends must match too.
    pub fn check_origin(
        &self,
        origin: Option<&str>,
        host: &str,
        credential: &Credential,
    ) -> Result<(), &'static str> {
        match origin {
            None if *credential == Credential::Bearer => Ok(()),
            None => Err("no Origin header"),
            Some(o) if o.eq_ignore_ascii_case(&format!("http://{host}")) => Ok(()),
            Some(_) => Err("an Origin that is not this server"),
        }
    }
}

/// `name:port` or `[v6]:port` or a name alone.
fn split_host(host: &str) -> Option<(&str, Option<u16>)> {
    if host.starts_with('[') {
        let end = host.find(']')?;
        let (name, rest) = host.split_at(end + 1);
        return match rest.strip_prefix(':') {
            Some(p) => Some((name, Some(p.parse().ok()?))),
            None if rest.is_empty() => Some((name, None)),
            None => None,
        };
    }
    match host.rsplit_once(':') {
        Some((name, p)) => Some((name, Some(p.parse().ok()?))),
        None => Some((host, None)),
    }
}

/// The address `serve --http ADDR` means: an address with a port, an IP address (a free
/// port), a port alone (on 127.0.0.1), or `localhost[:PORT]`; empty: 127.0.0.1 on a free port.
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    let loopback = IpAddr::from([127, 0, 0, 1]);
    if s.is_empty() || s.eq_ignore_ascii_case("localhost") {
        return Ok(SocketAddr::new(loopback, 0));
    }
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Ok(ip) = s
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        return Ok(SocketAddr::new(ip, 0));
    }
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::new(loopback, port));
    }
    if let Some(port) = s.strip_prefix("localhost:").and_then(|p| p.parse().ok()) {
        return Ok(SocketAddr::new(loopback, port));
    }
    Err(format!(
        "{s:?} is not an address to listen on; write 127.0.0.1, 127.0.0.1:8080, [::1]:8080 or 8080"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(remote: bool) -> Rules {
        Rules {
            port: 4321,
            remote,
            token: "0123456789abcdef0123456789abcdef".into(),
        }
    }

    #[test]
    fn hosts() {
        let r = rules(false);
        for ok in [
            "127.0.0.1:4321",
            "localhost:4321",
            "LOCALHOST:4321",
            "[::1]:4321",
        ] {
            assert_eq!(r.check_host(Some(ok)), Ok(()), "{ok}");
        }
        for bad in [
            "evil.example:4321",
            "127.0.0.1:80",
            "127.0.0.1",
            "localhost",
            "10.0.0.1:4321",
            "localhost.evil.example:4321",
            "[::1]x:4321",
            "",
        ] {
            assert!(r.check_host(Some(bad)).is_err(), "{bad}");
        }
        assert!(r.check_host(None).is_err());
        assert_eq!(rules(true).check_host(Some("10.0.0.1:4321")), Ok(()));
        assert!(rules(true).check_host(Some("evil.example:4321")).is_err());
    }

    #[test]
    fn credentials() {
        let r = rules(false);
        let t = r.token.clone();
        let cookie = format!("other=1; rewind-4321={t}");
        assert_eq!(
            r.credential(Some(&cookie), None, None),
            Some(Credential::Cookie)
        );
        // Another port's cookie is another server's.
        assert_eq!(
            r.credential(Some(&format!("rewind-1={t}")), None, None),
            None
        );
        assert_eq!(
            r.credential(None, Some(&format!("Bearer {t}")), None),
            Some(Credential::Bearer)
        );
        assert_eq!(r.credential(None, None, Some(&t)), Some(Credential::Query));
        assert_eq!(r.credential(None, None, Some("0123")), None);
        assert_eq!(r.credential(None, Some("Bearer nope"), None), None);
        assert!(!same_token(&t[..31], &t));
    }

    #[test]
    fn origins() {
        let r = rules(false);
        let h = "127.0.0.1:4321";
        assert!(r
            .check_origin(Some("http://127.0.0.1:4321"), h, &Credential::Cookie)
            .is_ok());
        assert!(r.check_origin(None, h, &Credential::Cookie).is_err());
        assert!(r
            .check_origin(Some("http://evil.example"), h, &Credential::Cookie)
            .is_err());
        assert!(r
            .check_origin(Some("null"), h, &Credential::Bearer)
            .is_err());
        assert!(r.check_origin(None, h, &Credential::Bearer).is_ok());
    }

    #[test]
    fn addresses() {
        assert_eq!(parse_addr("").unwrap().to_string(), "127.0.0.1:0");
        assert_eq!(parse_addr("8080").unwrap().to_string(), "127.0.0.1:8080");
        assert_eq!(parse_addr("::1").unwrap().to_string(), "[::1]:0");
        assert_eq!(parse_addr("[::1]:9").unwrap().to_string(), "[::1]:9");
        assert_eq!(parse_addr("0.0.0.0").unwrap().to_string(), "0.0.0.0:0");
        assert!(parse_addr("example.com").is_err());
    }

    #[test]
    fn tokens_are_random_and_128_bits() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
