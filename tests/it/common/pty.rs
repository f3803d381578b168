//! Driving the confirmation prompt in a pseudo-terminal by watching the terminal, not the
//! clock.
//!
//! The prompt (dialoguer on console) reads each key with the terminal in raw mode and puts the
//! modes back after each key. A key typed while the terminal is not raw goes through the line
//! discipline, which turns Enter into a newline the prompt does not take for Enter. So a test
//! types a key only once the terminal is raw — polled through the pty's master side, which on
//! Linux reports the modes of its terminal — and, between keys, once the prompt has redrawn its
//! line (it clears the line after taking a key, then reads the next one).

use std::time::{Duration, Instant};

use rexpect::session::PtySession;
use rustix::termios::{LocalModes, tcgetattr};

/// console's "clear the line", written when the prompt has taken a key and redraws itself.
const CLEAR_LINE: &str = "\r\u{1b}[2K";

/// Whether the terminal is raw (no canonical line editing): the prompt is reading a key.
fn is_raw(p: &PtySession) -> bool {
    let master = p
        .process()
        .get_file_handle()
        .expect("the pty's master side");
    let modes = tcgetattr(&master).expect("the terminal's modes");
    !modes.local_modes.contains(LocalModes::ICANON)
}

fn until_raw(p: &PtySession) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !is_raw(p) {
        assert!(
            Instant::now() < deadline,
            "the prompt never started reading keys"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits for `question`, then until the prompt reads keys.
pub fn wait_for_prompt(p: &mut PtySession, question: &str) {
    p.exp_string(question).expect("the question is asked");
    until_raw(p);
}

/// Types `keys` one after another, each once the prompt is ready for it.
pub fn answer(p: &mut PtySession, keys: &[&str]) {
    for (i, key) in keys.iter().enumerate() {
        if i > 0 {
            p.exp_string(CLEAR_LINE)
                .expect("the prompt took the previous key");
            until_raw(p);
        }
        p.send(key).expect("key sent");
        p.flush().expect("key flushed");
    }
}
