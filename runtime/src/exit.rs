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
    let usage = causes(e.as_ref()).any(|c| c.is::<UsageError>());
    eprintln!("error: {}", crate::utf8::terminal_safe(&one_line(e.as_ref()).replace('\n', " ")));
    if usage { ExitCode::from(2) } else { ExitCode::FAILURE }
}

/// An error and each of its causes, outermost first.
pub fn causes<'e>(e: &'e (dyn StdError + 'static)) -> impl Iterator<Item = &'e (dyn StdError + 'static)> {
    std::iter::successors(Some(e), |&c| c.source())
}

/// An error and its causes on one line (`outer: cause: root cause`), a cause whose
/// text an outer one already says left out: the one way errors are printed.
pub fn one_line(e: &(dyn StdError + 'static)) -> String {
    let mut line = String::new();
    for c in causes(e) {
        let text = c.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// Writes `s` to stdout, terminal-safe ([`crate::utf8::terminal_safe`]: corpus text,
/// a bundle's fields and an LLM's answer may hold escape sequences), and flushes it; a
/// reader that went away (a closed pipe, as with `| head`) is not an error.
pub fn print(s: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let s = crate::utf8::terminal_safe(s);
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

/// The longest panic message printed, in characters.
pub const MAX_PANIC_CHARS: usize = 300;

/// Makes a panic print one short line on stderr (`atlas: internal error at FILE:LINE:
/// MESSAGE`, the message cut to [`MAX_PANIC_CHARS`] and terminal-safe) instead of the
/// whole message and a backtrace: a panic's message may hold an agent's 300 KB
/// argument. `RUST_BACKTRACE=1` restores the default report.
pub fn short_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0") {
            return default(info);
        }
        let p = info.payload();
        let msg = p.downcast_ref::<&str>().copied().or_else(|| p.downcast_ref::<String>().map(String::as_str));
        let msg = crate::utf8::clip_chars(&msg.unwrap_or("no message").replace('\n', " "), MAX_PANIC_CHARS);
        let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        eprintln!("atlas: internal error{at}: {}", crate::utf8::terminal_safe(&msg));
    }));
}

/// Set by a launcher that runs this binary as its child (the npm package's): this
/// process ends when the launcher does, however it ended (`SIGKILL` included).
pub const LAUNCHER_ENV: &str = "ATLAS_EXIT_WITH_LAUNCHER";
/// How often the launcher is looked for.
pub const LAUNCHER_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// With [`LAUNCHER_ENV`] set, watches the parent process from a thread and exits
/// (status 1) once it is gone: the process is then re-parented, so its parent id
/// changes. No-op elsewhere, and on platforms without parent ids.
pub fn follow_launcher() {
    #[cfg(unix)]
    {
        if std::env::var_os(LAUNCHER_ENV).is_none() {
            return;
        }
        let parent = std::os::unix::process::parent_id();
        let _ = std::thread::Builder::new().name("launcher-watch".into()).spawn(move || {
            loop {
                std::thread::sleep(LAUNCHER_POLL);
                if std::os::unix::process::parent_id() != parent {
                    eprintln!("atlas: the launcher that started this process has ended; exiting");
                    std::process::exit(1);
                }
            }
        });
    }
}
