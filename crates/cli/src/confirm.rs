//! Asking the person at the terminal before a command does something they might not expect
//! (forgetting a history, giving commands full access). Scripts pass `--yes`; without a
//! terminal and without `--yes` the command is refused, never done silently.

use std::io::{BufRead, IsTerminal, Write};

use rewind_api::ApiError;

/// `Ok(true)`: go on (`yes`, or the person answered y). `Ok(false)`: they said no. An error
/// (usage, exit 2) when there is no terminal to ask on: `refusal` says what was not done.
pub fn confirm(yes: bool, question: &str, refusal: String) -> Result<bool, ApiError> {
    if yes {
        return Ok(true);
    }
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Err(ApiError::usage(refusal).hint("pass --yes to do it without asking"));
    }
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| ApiError::usage(format!("reading the answer: {e}")))?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}
