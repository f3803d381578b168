//! Putting the terminal back after an interrupted prompt.
//!
//! While dialoguer waits for a key the terminal may be in a mode the shell does not expect
//! (on Unix console makes it raw with termios; on Windows it may turn off Ctrl-C processing in
//! the console's input mode). A signal (Ctrl-C, SIGTERM, Ctrl-Break) then ends the run from the
//! signal handler with `std::process::exit`, so console never switches the mode back and the
//! user's shell is left without echo or line editing. [`save`] records the terminal's modes
//! before the prompt, [`restore`] (called by the signal handler before it exits) writes them
//! back, and [`forget`] drops them once the prompt returned.
//!
//! The bookkeeping ([`Keeper`]) is the same everywhere; only reading and writing the modes
//! ([`Modes`]) differs: termios through rustix on Unix, the console input mode through
//! winapi-util on Windows (both safe wrappers: this crate forbids `unsafe`).

use std::sync::Mutex;

/// A terminal's modes, read from the terminal the prompt uses and written back to it.
pub trait Modes: Sized {
    /// Reads the current modes; `None` when there is no terminal to read them from.
    fn capture() -> Option<Self>;
    /// Writes these modes back to the terminal they were read from (errors are ignored: the
    /// process is about to exit and there is nothing better to do).
    fn put_back(&self);
}

/// The modes recorded before a prompt, if one is in progress.
pub struct Keeper<M> {
    saved: Mutex<Option<M>>,
}

impl<M: Modes> Keeper<M> {
    pub const fn new() -> Self {
        Keeper {
            saved: Mutex::new(None),
        }
    }

    /// Records the terminal's current modes (before the prompt changes them).
    pub fn save(&self) {
        let Some(modes) = M::capture() else { return };
        if let Ok(mut saved) = self.saved.lock() {
            *saved = Some(modes);
        }
    }

    /// Forgets the recorded modes: the prompt returned and put the modes back itself.
    pub fn forget(&self) {
        if let Ok(mut saved) = self.saved.lock() {
            *saved = None;
        }
    }

    /// Writes the recorded modes back, if a prompt is in progress. Safe to call at any time.
    pub fn restore(&self) {
        let Ok(saved) = self.saved.lock() else { return };
        if let Some(modes) = saved.as_ref() {
            modes.put_back();
        }
    }
}

impl<M: Modes> Default for Keeper<M> {
    fn default() -> Self {
        Self::new()
    }
}

static KEEPER: Keeper<platform::TerminalModes> = Keeper::new();

/// Records the terminal's current modes (before the prompt makes it raw).
pub fn save() {
    KEEPER.save();
}

/// Forgets the recorded modes: the prompt returned and console restored them itself.
pub fn forget() {
    KEEPER.forget();
}

/// Writes the recorded modes back, if a prompt is in progress. Safe to call at any time.
pub fn restore() {
    KEEPER.restore();
}

#[cfg(unix)]
mod platform {
    use std::fs::File;
    use std::io::IsTerminal;
    use std::os::fd::{AsFd, BorrowedFd};

    use rustix::termios::{OptionalActions, Termios, tcgetattr, tcsetattr};

    /// Where the prompt reads keys: stdin when it is a terminal, else `/dev/tty` (as console
    /// does).
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

    /// The termios settings of the prompt's terminal.
    pub struct TerminalModes {
        tty: Tty,
        termios: Termios,
    }

    impl super::Modes for TerminalModes {
        fn capture() -> Option<Self> {
            let tty = Tty::open()?;
            let termios = tty.with_fd(|fd| tcgetattr(fd)).ok()?;
            Some(TerminalModes { tty, termios })
        }

        fn put_back(&self) {
            let _ = self
                .tty
                .with_fd(|fd| tcsetattr(fd, OptionalActions::Now, &self.termios));
        }
    }
}

#[cfg(windows)]
mod platform {
    use std::fs::File;
    use std::io::IsTerminal;

    use winapi_util::console;

    /// The console input the prompt reads keys from: stdin when it is a console, else the
    /// process's console input buffer `CONIN$` (the Windows counterpart of `/dev/tty`).
    enum ConsoleInput {
        Stdin,
        Conin(File),
    }

    impl ConsoleInput {
        fn open() -> Option<ConsoleInput> {
            if std::io::stdin().is_terminal() {
                return Some(ConsoleInput::Stdin);
            }
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("CONIN$")
                .ok()
                .map(ConsoleInput::Conin)
        }

        fn mode(&self) -> std::io::Result<u32> {
            match self {
                ConsoleInput::Stdin => console::mode(std::io::stdin()),
                ConsoleInput::Conin(file) => console::mode(file),
            }
        }

        fn set_mode(&self, mode: u32) -> std::io::Result<()> {
            match self {
                ConsoleInput::Stdin => console::set_mode(std::io::stdin(), mode),
                ConsoleInput::Conin(file) => console::set_mode(file, mode),
            }
        }
    }

    /// The input mode (`GetConsoleMode`) of the prompt's console.
    pub struct TerminalModes {
        input: ConsoleInput,
        mode: u32,
    }

    impl super::Modes for TerminalModes {
        fn capture() -> Option<Self> {
            let input = ConsoleInput::open()?;
            let mode = input.mode().ok()?;
            Some(TerminalModes { input, mode })
        }

        fn put_back(&self) {
            let _ = self.input.set_mode(self.mode);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::{Keeper, Modes};

    // A terminal whose mode is a number: `MODE` is what the terminal has now, `capture` reads
    // it, `put_back` writes the captured value into it.
    static MODE: AtomicU32 = AtomicU32::new(0);

    struct Fake(u32);

    impl Modes for Fake {
        fn capture() -> Option<Self> {
            Some(Fake(MODE.load(Ordering::SeqCst)))
        }
        fn put_back(&self) {
            MODE.store(self.0, Ordering::SeqCst);
        }
    }

    // One test, because the fake terminal is process-wide state.
    #[test]
    fn restore_writes_back_the_modes_saved_before_the_prompt_and_only_while_it_runs() {
        let keeper: Keeper<Fake> = Keeper::new();

        // Nothing saved: restoring leaves the terminal alone.
        MODE.store(7, Ordering::SeqCst);
        keeper.restore();
        assert_eq!(MODE.load(Ordering::SeqCst), 7);

        // Saved, then the prompt changes the mode, then a signal restores it.
        keeper.save();
        MODE.store(99, Ordering::SeqCst);
        keeper.restore();
        assert_eq!(MODE.load(Ordering::SeqCst), 7, "the saved mode is back");

        // The prompt returned: later restores must not rewind what happened since.
        keeper.forget();
        MODE.store(42, Ordering::SeqCst);
        keeper.restore();
        assert_eq!(MODE.load(Ordering::SeqCst), 42);
    }
}
