//! Asking once before writing. The question goes to stderr and the answer comes from the
//! terminal (stdin when it is one, else /dev/tty), never from piped stdin. Default: No.

use std::io;

use dialoguer::Confirm;
use dialoguer::theme::{ColorfulTheme, SimpleTheme, Theme};

/// Why the changes were not applied for want of a yes. Nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum NotConfirmed {
    #[error(
        "not applied: there is no terminal to ask for confirmation; pass --yes to apply without asking (nothing was changed)"
    )]
    NoTerminal,
    #[error("not applied: the changes were not confirmed (nothing was changed)")]
    Declined,
    #[error("cannot ask for confirmation: {0}")]
    Prompt(#[source] io::Error),
    #[error("the confirmation prompt failed: {0}")]
    PromptTask(#[source] tokio::task::JoinError),
}

/// The user's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Yes,
    No,
    /// Ctrl-C at the prompt.
    Interrupted,
}

/// The question, as short as the terminal needs: the longest of these that fits `columns`
/// with the theme's marks around it (`? … (y/n) › `), so that it never wraps.
pub fn question_for(columns: u16) -> &'static str {
    const QUESTIONS: [&str; 3] = ["Apply these changes?", "Apply?", "Apply"];
    const MARKS: usize = 12;
    QUESTIONS
        .iter()
        .copied()
        .find(|q| q.chars().count() + MARKS < usize::from(columns))
        .unwrap_or("Apply")
}

/// Asks whether to apply the changes just described, in a question that fits the terminal.
/// Blocking: run it on a blocking thread.
pub fn ask_to_apply(color: bool) -> io::Result<Answer> {
    let (_, columns) = console::Term::stderr().size();
    ask(question_for(columns), color)
}

/// Asks `question` on the terminal; the user types y or n and Enter (Enter alone is No).
/// Blocking: run it on a blocking thread.
pub fn ask(question: &str, color: bool) -> io::Result<Answer> {
    let term = console::Term::stderr();
    let colorful = ColorfulTheme::default();
    let theme: &dyn Theme = if color { &colorful } else { &SimpleTheme };
    // A signal during the prompt ends the run (see `run`), which restores these modes.
    crate::terminal::save();
    let result = Confirm::with_theme(theme)
        .with_prompt(question)
        .default(false)
        .wait_for_newline(true)
        .interact_on(&term);
    crate::terminal::forget();
    let _ = term.show_cursor();
    match result {
        Ok(true) => Ok(Answer::Yes),
        Ok(false) => Ok(Answer::No),
        Err(dialoguer::Error::IO(e)) if e.kind() == io::ErrorKind::Interrupted => {
            Ok(Answer::Interrupted)
        }
        Err(dialoguer::Error::IO(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_question_never_takes_more_than_the_terminals_width() {
        assert_eq!(question_for(80), "Apply these changes?");
        assert_eq!(question_for(60), "Apply these changes?");
        assert_eq!(question_for(30), "Apply?");
        for columns in 19..200 {
            assert!(question_for(columns).chars().count() + 12 < usize::from(columns));
        }
    }
}
