//! How the binaries end, in one place: data on stdout (a closed pipe is not an
//! error), an error on one line on stderr, and an exit code that says whose fault it
//! was. Argument parsing (clap) stays in the binaries.

use std::error::Error as StdError;
use std::process::ExitCode;

/// The user's input is wrong (a config file, a flag's value); nothing was changed.
/// Anywhere in an error's chain, it makes the exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl StdError for UsageError {}

/// The exit code of a run: 0 on success; else the error is printed as one line
/// (`error: outer: cause: root cause`) and the code is 2 for a [`UsageError`], 1 for
/// any other failure.
pub fn finish<E: AsRef<dyn StdError + Send + Sync + 'static>>(result: Result<(), E>) -> ExitCode {
    let Err(e) = result else { return ExitCode::SUCCESS };
    let mut line = String::new();
    let mut usage = false;
    let mut next: Option<&(dyn StdError + 'static)> = Some(e.as_ref());
    while let Some(err) = next {
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&err.to_string());
        usage |= err.downcast_ref::<UsageError>().is_some();
        next = err.source();
    }
    eprintln!("error: {}", line.replace('\n', " "));
    if usage { ExitCode::from(2) } else { ExitCode::FAILURE }
}

/// Writes `s` to stdout and flushes it; a reader that went away (a closed pipe, as
/// with `| head`) is not an error.
pub fn print(s: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}
