//! Putting the terminal back after an interrupted prompt.
//!
//! While dialoguer waits for a key the terminal is in raw mode (console switches it with
//! termios and switches it back when the key arrives). A SIGINT or SIGTERM sent to the process
//! then ends the run from the signal handler with `std::process::exit`, so console never
//! restores the mode and the user's shell is left without echo or line editing. [`save`]
//! records the terminal's modes before the prompt, [`restore`] (called by the signal handler
//! before it exits) writes them back, and [`forget`] drops them once the prompt returned.

use std::fs::File;
use std::io::IsTerminal;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Mutex;

use rustix::termios::{OptionalActions, Termios, tcgetattr, tcsetattr};

/// Where the prompt reads keys: stdin when it is a terminal, else `/dev/tty` (as console does).
enum Tty {
    Stdin,
    Dev(File),
}

impl Tty {
    fn open() -> Option<Tty> {
        if std::io::stdin().is_terminal() {
            return Some(Tty::Stdin);
        }
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .ok()
            .map(Tty::Dev)
    }

    fn with_fd<T>(&self, f: impl FnOnce(BorrowedFd<'_>) -> T) -> T {
        match self {
            Tty::Stdin => f(std::io::stdin().as_fd()),
            Tty::Dev(file) => f(file.as_fd()),
        }
    }
}

static SAVED: Mutex<Option<(Tty, Termios)>> = Mutex::new(None);

/// Records the terminal's current modes (before the prompt makes it raw).
pub fn save() {
    let Some(tty) = Tty::open() else { return };
    if let Ok(modes) = tty.with_fd(|fd| tcgetattr(fd))
        && let Ok(mut saved) = SAVED.lock()
    {
        *saved = Some((tty, modes));
    }
}

/// Forgets the recorded modes: the prompt returned and console restored them itself.
pub fn forget() {
    if let Ok(mut saved) = SAVED.lock() {
        *saved = None;
    }
}

/// Writes the recorded modes back, if a prompt is in progress. Safe to call at any time.
pub fn restore() {
    let Ok(saved) = SAVED.lock() else { return };
    if let Some((tty, modes)) = saved.as_ref() {
        let _ = tty.with_fd(|fd| tcsetattr(fd, OptionalActions::Now, modes));
    }
}
