//! Text helpers for the messages: everything the user reads is one line.

/// Collapses whitespace so every message stays on one line.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The messages of an error and all its sources, outermost first.
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut chain = Vec::new();
    let mut cur = Some(err);
    while let Some(e) = cur {
        chain.push(e.to_string());
        cur = e.source();
    }
    chain
}
