//! The commands' standard output. `println!` panics when the reader has gone (`harness
//! status | head -1`); here the first broken pipe ends the output quietly and the command
//! goes on to its end (its files, its clean-up, its exit code). Any other failure (a full
//! disk: `harness k8s manifest > job.yaml`) ends the output too, and the command exits 1
//! saying so, so a cut-off file is never taken for a whole one.

use std::io::Write;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

static READER_GONE: AtomicBool = AtomicBool::new(false);
static FAILED: OnceLock<String> = OnceLock::new();

/// Why the output could not be written, other than its reader having gone.
pub fn failure() -> Option<&'static str> {
    FAILED.get().map(String::as_str)
}

/// Writes to stdout unless its reader has gone.
pub fn write(args: std::fmt::Arguments) {
    if READER_GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        // A full disk or a closed pipe alike: nothing more can reach the reader.
        READER_GONE.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            let _ = FAILED.set(e.to_string());
        }
    }
}

/// `print!` to stdout that never panics (see the module).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::app::stdout::write(format_args!($($arg)*))
    };
}

/// `println!` to stdout that never panics (see the module).
#[macro_export]
macro_rules! outln {
    () => {
        $crate::app::stdout::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::app::stdout::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}
