//! The platform's interrupt signals, as [`Interruption`]s: the only platform-specific part of
//! how a run reacts to being interrupted.
//!
//! | platform | [`Interruption::Sigint`] (exit 130) | [`Interruption::Sigterm`] (exit 143) |
//! | --- | --- | --- |
//! | Unix | SIGINT (Ctrl-C) | SIGTERM |
//! | Windows | Ctrl-C | Ctrl-Break, the console window closing, the system shutting down |
//!
//! Once [`Signals::listen`] has run, these no longer end the process: the run decides what to
//! do with each (see `run`).

use appupdate_model::report::Interruption;

/// The interrupt signals of this process, from [`Signals::listen`] on.
pub struct Signals {
    /// `None` when the platform would not let us listen: then no signal is ever reported, and
    /// the platform's default (ending the process) applies.
    source: Option<platform::Source>,
}

impl Signals {
    /// Starts listening. Needs a running tokio runtime.
    pub fn listen() -> Signals {
        Signals {
            source: platform::Source::new().ok(),
        }
    }

    /// The next signal.
    pub async fn recv(&mut self) -> Interruption {
        match &mut self.source {
            Some(source) => source.recv().await,
            None => std::future::pending().await,
        }
    }
}

#[cfg(unix)]
mod platform {
    use tokio::signal::unix::{Signal, SignalKind, signal};

    use appupdate_model::report::Interruption;

    pub struct Source {
        interrupt: Signal,
        terminate: Signal,
    }

    impl Source {
        pub fn new() -> std::io::Result<Source> {
            Ok(Source {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            })
        }

        pub async fn recv(&mut self) -> Interruption {
            tokio::select! {
                Some(()) = self.interrupt.recv() => Interruption::Sigint,
                Some(()) = self.terminate.recv() => Interruption::Sigterm,
                else => std::future::pending().await,
            }
        }
    }
}

#[cfg(windows)]
mod platform {
    use tokio::signal::windows::{CtrlBreak, CtrlC, CtrlClose, CtrlShutdown};

    use appupdate_model::report::Interruption;

    pub struct Source {
        ctrl_c: CtrlC,
        ctrl_break: CtrlBreak,
        close: CtrlClose,
        shutdown: CtrlShutdown,
    }

    impl Source {
        pub fn new() -> std::io::Result<Source> {
            use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close, ctrl_shutdown};
            Ok(Source {
                ctrl_c: ctrl_c()?,
                ctrl_break: ctrl_break()?,
                close: ctrl_close()?,
                shutdown: ctrl_shutdown()?,
            })
        }

        pub async fn recv(&mut self) -> Interruption {
            tokio::select! {
                Some(()) = self.ctrl_c.recv() => Interruption::Sigint,
                Some(()) = self.ctrl_break.recv() => Interruption::Sigterm,
                Some(()) = self.close.recv() => Interruption::Sigterm,
                Some(()) = self.shutdown.recv() => Interruption::Sigterm,
                else => std::future::pending().await,
            }
        }
    }
}

#[cfg(not(any(unix, windows)))]
mod platform {
    use appupdate_model::report::Interruption;

    pub struct Source;

    impl Source {
        pub fn new() -> std::io::Result<Source> {
            Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
        }

        pub async fn recv(&mut self) -> Interruption {
            std::future::pending().await
        }
    }
}
