//! The invariants keeperd asserts while it serves, as TigerBeetle asserts its own: a server
//! that finds its state impossible stops at once rather than answer from it. Each invariant has
//! a name; a failed one is logged as `invariant violated: <name>: <what was seen>` and ends the
//! process with [`EXIT_CODE`], whichever thread or task found it (a panic would end only
//! that task, and the server would serve on).
//!
//! A failpoint that breaks an invariant on purpose (see [`crate::failpoint`]) is named where
//! the invariant is checked, which then holds the server to everything else.

/// The exit status of a server stopped by a failed invariant (`EX_SOFTWARE`).
pub const EXIT_CODE: i32 = 70;

/// Stops the server unless `holds`: logs the invariant `name` and `seen()` (what broke it),
/// then exits with [`EXIT_CODE`]. In keeperd's own unit tests it panics with the same line,
/// so a test can show the check fires.
#[track_caller]
pub fn check(holds: bool, name: &str, seen: impl FnOnce() -> String) {
    if holds {
        return;
    }
    let line = format!(
        "invariant violated: {name}: {} (at {})",
        seen(),
        std::panic::Location::caller()
    );
    if cfg!(test) {
        panic!("{line}");
    }
    tracing::error!("{line}");
    eprintln!("keeperd: {line}");
    std::process::exit(EXIT_CODE);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holding_invariant_does_nothing() {
        check(true, "never", || {
            unreachable!("not formatted when it holds")
        });
    }

    #[test]
    #[should_panic(expected = "invariant violated: the sky stays up: it fell (at ")]
    fn a_failed_invariant_names_itself_and_what_was_seen() {
        check(false, "the sky stays up", || "it fell".into());
    }
}
