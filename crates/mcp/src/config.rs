//! `--print-config`: the snippet that registers `rewind mcp` with a client, in that client's
//! config format.

use std::path::Path;

use serde_json::json;

/// An MCP client whose config format `--print-config` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    /// Claude Code: `.mcp.json` at the project root (project scope), or `claude mcp add`.
    ClaudeCode,
    /// OpenAI Codex CLI: `~/.codex/config.toml`, table `[mcp_servers.NAME]`.
    Codex,
    /// Gemini CLI: `.gemini/settings.json` (project) or `~/.gemini/settings.json`, key
    /// `mcpServers`.
    Gemini,
    /// Cursor: `.cursor/mcp.json` (project) or `~/.cursor/mcp.json`, key `mcpServers`.
    Cursor,
}

impl Client {
    /// Every client, in the order help texts list them.
    pub const ALL: [Client; 4] = [
        Client::ClaudeCode,
        Client::Codex,
        Client::Gemini,
        Client::Cursor,
    ];

    /// The name `--print-config` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude-code",
            Client::Codex => "codex",
            Client::Gemini => "gemini",
            Client::Cursor => "cursor",
        }
    }

    /// The client a name of [`Client::as_str`] names.
    pub fn parse(name: &str) -> Option<Client> {
        Client::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// The snippet for `client` that starts `exe mcp -C dir` (plus `extra` arguments), with the
/// file it goes in as comment lines or a first line to read: what `--print-config` prints.
pub fn print_config(client: Client, exe: &Path, dir: &Path, extra: &[String]) -> String {
    let exe = exe.to_string_lossy().into_owned();
    let mut args = vec![
        "mcp".to_string(),
        "-C".to_string(),
        dir.to_string_lossy().into_owned(),
    ];
    args.extend(extra.iter().cloned());
    let servers = |entry: serde_json::Value| {
        serde_json::to_string_pretty(&json!({"mcpServers": {"rewind": entry}})).unwrap_or_default()
    };
    match client {
        Client::ClaudeCode => format!(
            "// .mcp.json at the project root (or run: claude mcp add rewind -- {exe} {})\n{}\n",
            args.join(" "),
            servers(json!({"type": "stdio", "command": exe, "args": args, "env": {}}))
        ),
        Client::Codex => format!(
            "# ~/.codex/config.toml\n[mcp_servers.rewind]\ncommand = {}\nargs = [{}]\n",
            toml_str(&exe),
            args.iter()
                .map(|a| toml_str(a))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Client::Gemini => format!(
            "// .gemini/settings.json (project) or ~/.gemini/settings.json\n{}\n",
            servers(json!({"command": exe, "args": args}))
        ),
        Client::Cursor => format!(
            "// .cursor/mcp.json (project) or ~/.cursor/mcp.json\n{}\n",
            servers(json!({"command": exe, "args": args}))
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_parse_in_their_formats() {
        let exe = Path::new("/usr/bin/rewind");
        let dir = Path::new("/home/u/my \"project\"");
        for c in Client::ALL {
            assert_eq!(Client::parse(c.as_str()), Some(c));
            let s = print_config(c, exe, dir, &[]);
            let body: String = s
                .lines()
                .filter(|l| !l.starts_with("//") && !l.starts_with('#'))
                .collect::<Vec<_>>()
                .join("\n");
            let (command, args) = if c == Client::Codex {
                let t: toml::Table = body.parse().unwrap();
                let e = t["mcp_servers"]["rewind"].clone();
                let args: Vec<String> = e["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().to_string())
                    .collect();
                (e["command"].as_str().unwrap().to_string(), args)
            } else {
                let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                let e = &v["mcpServers"]["rewind"];
                let args = serde_json::from_value(e["args"].clone()).unwrap();
                (e["command"].as_str().unwrap().to_string(), args)
            };
            assert_eq!(command, "/usr/bin/rewind", "{c:?}");
            assert_eq!(args, ["mcp", "-C", "/home/u/my \"project\""], "{c:?}");
        }
    }
}
