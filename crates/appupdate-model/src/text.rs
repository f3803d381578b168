//! Text for the terminal: everything the user reads is printable text, and messages are one
//! line.
//!
//! Values that did not come from this program's own string literals — whatever the cluster
//! returns (names, images, annotations, paths, condition and Status messages, warnings), what
//! files say (the endpoints file, kubeconfig names), the environment and the command line — may
//! hold characters that a terminal obeys instead of showing: ESC starts sequences that set the
//! window title, write the clipboard (OSC 52) or clear the screen; C1 controls do the same on
//! some terminals; bidirectional overrides reorder the text around them and zero-width
//! characters hide differences. Every such value is written through [`escape`] (or its
//! newtype, [`Untrusted`]), which shows those characters as escapes, visibly and exactly:
//!
//! | character | shown as |
//! | --- | --- |
//! | ESC (U+1B) | `\e` |
//! | line feed, carriage return, tab | `\n`, `\r`, `\t` |
//! | any other C0 control (U+00–U+1F) and DEL (U+7F) | `\x07`, `\x00`, `\x7f` (two lowercase hex digits) |
//! | C1 controls (U+80–U+9F), format characters (general category Cf: bidi embeddings, overrides and isolates U+202A–U+202E and U+2066–U+2069, the marks U+200E/U+200F/U+061C, zero-width space, joiners U+200B–U+200D, word joiner, BOM, soft hyphen, tag characters…), the spaces other than U+20 (no-break space U+A0, en quad, ideographic space…: they look like a space and are not one), the line and paragraph separators (U+2028, U+2029), and the other default-ignorable code points (variation selectors, the Hangul fillers, the combining grapheme joiner…) | `\u{9b}`, `\u{202e}`, `\u{a0}` (Rust's notation: lowercase hex, no leading zeros) |
//!
//! Everything else, including every visible non-ASCII character, is written as it is. A
//! backslash is written as it is too: server messages often quote values with Go's escapes
//! (`"a\"b"`, `\x1b`), which read best unchanged, and escaping stays idempotent
//! (`escape(escape(s)) == escape(s)`), so a value escaped twice on its way out does not show
//! doubled backslashes. The price: a value that itself contains the text `\e` reads like one
//! that contains ESC. Where the exact bytes matter, `-o json` and `-o yaml` carry them. In the
//! quoted form (`{:?}` of [`Untrusted`], for names in messages: `namespace "shop"`) `"` and `\`
//! are escaped too, as in any quoted string, so a quoted name reads back exactly.
//!
//! Colour is applied to text that is already escaped, so with colour on the only escape
//! sequences on stdout and stderr are the SGR codes this program emits (and indicatif's cursor
//! control for the progress bar on a terminal); with colour off there are none. The last step,
//! [`for_terminal`], is the output layer's check in the plugin's `streams`: it lets through line
//! breaks and, when colour is on, SGR sequences, and escapes anything else that is left — in a
//! debug build (the tests) it fails loudly instead, so that a value printed without
//! [`escape`] is found by the tests rather than hidden by this last pass.

use std::borrow::Cow;
use std::fmt::{self, Write as _};

use unicode_general_category::{GeneralCategory, get_general_category};

/// `url` with its user information — which may hold a password or a token — replaced by `…`:
/// `https://admin:s3cret@k8s.example:6443` → `https://…@k8s.example:6443`. Everything up to the
/// last `@` after the scheme goes, wherever that `@` is (a password may hold `/`, `?` or `#`),
/// so a value that is not a URL with credentials at all (`https://host/a@b`) loses more than it
/// needs to; for what is printed or saved that is the safe side. The same URL always gives the
/// same text, so redacted URLs compare as their originals would (save for credentials).
pub fn without_credentials(url: &str) -> Cow<'_, str> {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    match rest.rfind('@') {
        None => Cow::Borrowed(url),
        Some(at) => Cow::Owned(match scheme {
            Some(scheme) => format!("{scheme}://…{}", &rest[at..]),
            None => format!("…{}", &rest[at..]),
        }),
    }
}

/// One printable line: whitespace (line breaks included) collapsed to single spaces, and every
/// character [`escape`] escapes escaped.
pub fn one_line(s: &str) -> String {
    let joined = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match escape(&joined) {
        Cow::Borrowed(_) => joined,
        Cow::Owned(escaped) => escaped,
    }
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

/// Default-ignorable code points (Unicode's `Default_Ignorable_Code_Point`, from
/// DerivedCoreProperties.txt) that are not format characters (Cf): rendered as nothing, so a
/// value can hide them. The Cf ones come from the general category itself.
const IGNORABLE_NOT_FORMAT: &[(char, char)] = &[
    ('\u{034F}', '\u{034F}'),   // combining grapheme joiner
    ('\u{115F}', '\u{1160}'),   // Hangul choseong and jungseong fillers
    ('\u{17B4}', '\u{17B5}'),   // Khmer inherent vowels
    ('\u{180B}', '\u{180D}'),   // Mongolian free variation selectors
    ('\u{180F}', '\u{180F}'),   // Mongolian free variation selector four
    ('\u{2065}', '\u{2065}'),   // reserved, among the invisible operators
    ('\u{3164}', '\u{3164}'),   // Hangul filler
    ('\u{FE00}', '\u{FE0F}'),   // variation selectors
    ('\u{FFA0}', '\u{FFA0}'),   // halfwidth Hangul filler
    ('\u{FFF0}', '\u{FFF8}'),   // reserved before the interlinear annotation characters
    ('\u{E0000}', '\u{E0FFF}'), // tags, variation selectors supplement, reserved
];

/// Whether `c` is shown as an escape: a control character (C0, DEL, C1), a format character
/// (Cf), a space other than the ASCII one (Zs: no-break, en, em, ideographic… spaces, which
/// look like a space but are not), a line or paragraph separator, or another default-ignorable
/// code point.
pub fn is_escaped(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    matches!(
        get_general_category(c),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::SpaceSeparator
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    ) || IGNORABLE_NOT_FORMAT
        .iter()
        .any(|&(from, to)| (from..=to).contains(&c))
}

/// A byte that is a whole character [`is_escaped`] leaves alone: printable ASCII. Scanning text
/// a byte at a time for the first one that is not, and deciding only there, is what keeps the
/// escape passes cheap on large output.
pub fn is_printable_ascii(b: u8) -> bool {
    (0x20..0x7f).contains(&b)
}

/// `bytes` as lower-case hexadecimal, two digits a byte (digests, identifiers), written digit
/// by digit: a large application names a thousand route groups this way.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 * bytes.len());
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

fn push_escaped(out: &mut String, c: char) {
    // Writing into a String cannot fail.
    let _ = match c {
        '\u{1b}' => out.write_str("\\e"),
        '\n' => out.write_str("\\n"),
        '\r' => out.write_str("\\r"),
        '\t' => out.write_str("\\t"),
        c if c.is_ascii() => write!(out, "\\x{:02x}", u32::from(c)),
        c => write!(out, "\\u{{{:x}}}", u32::from(c)),
    };
}

/// `s` with every character of [`is_escaped`] written as its escape (`\e`, `\x07`,
/// `\u{202e}`…; the table is in this module's documentation). Borrowed when nothing needed
/// escaping.
pub fn escape(s: &str) -> Cow<'_, str> {
    escape_where(s, false, false)
}

/// [`escape`], keeping line feeds: for multi-line values shown as blocks of lines (an nginx
/// snippet in the diff). Every other character is escaped as by [`escape`].
pub fn escape_lines(s: &str) -> Cow<'_, str> {
    escape_where(s, true, false)
}

/// The output layer's last pass over text about to be written to stdout or stderr: line feeds
/// stay, SGR sequences (`ESC [ 0-9;… m`, colour and emphasis) stay when `color` is on, and
/// anything else [`escape`] would escape is escaped. Text built from escaped values passes
/// unchanged (borrowed).
pub fn for_terminal(s: &str, color: bool) -> Cow<'_, str> {
    escape_where(s, true, color)
}

/// The length of the SGR sequence at the start of `s`, if one starts there.
fn sgr_len(s: &str) -> Option<usize> {
    let params = s.strip_prefix("\u{1b}[")?;
    let n = params
        .bytes()
        .take(64)
        .take_while(|b| b.is_ascii_digit() || *b == b';')
        .count();
    (params.as_bytes().get(n) == Some(&b'm')).then_some(2 + n + 1)
}

/// How many bytes at the start of `bytes` are printable ASCII (or line feeds, when kept): the
/// bytes an escape pass skips without decoding, which is most of any text. Tested 32 bytes at a
/// time without an early exit, which the compiler turns into vector instructions.
fn plain_prefix(bytes: &[u8], keep_newlines: bool) -> usize {
    let plain = |b: u8| is_printable_ascii(b) | (keep_newlines & (b == b'\n'));
    let mut at = 0;
    for chunk in bytes.chunks_exact(32) {
        if !chunk.iter().fold(true, |all, &b| all & plain(b)) {
            break;
        }
        at += 32;
    }
    at + bytes[at..]
        .iter()
        .position(|&b| !plain(b))
        .unwrap_or(bytes.len() - at)
}

fn escape_where(s: &str, keep_newlines: bool, keep_sgr: bool) -> Cow<'_, str> {
    let kept = |rest: &str, c: char| -> Option<usize> {
        if keep_newlines && c == '\n' {
            Some(1)
        } else if keep_sgr && c == '\u{1b}' {
            sgr_len(rest)
        } else if is_escaped(c) {
            None
        } else {
            Some(c.len_utf8())
        }
    };
    let mut at = 0;
    loop {
        at += plain_prefix(&s.as_bytes()[at..], keep_newlines);
        let Some(c) = s[at..].chars().next() else {
            break;
        };
        match kept(&s[at..], c) {
            Some(n) => at += n,
            None => break,
        }
    }
    if at == s.len() {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    out.push_str(&s[..at]);
    while let Some(c) = s[at..].chars().next() {
        match kept(&s[at..], c) {
            Some(n) => {
                out.push_str(&s[at..at + n]);
                at += n;
            }
            None => {
                push_escaped(&mut out, c);
                at += c.len_utf8();
            }
        }
    }
    Cow::Owned(out)
}

/// Text that did not come from this program's own string literals. `Display` writes it
/// through [`escape`]; `Debug` writes it as a quoted string, `"…"`, with the same escapes and
/// `"` and `\` also escaped as `\"` and `\\` (the form `{:?}` gives a `str`, in this
/// module's notation), which reads back exactly. Put every such value in one when it goes into
/// a message: `format!("{} in namespace {:?}", Untrusted(&reference), Untrusted(&namespace))`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Untrusted<S>(pub S);

impl<S: AsRef<str>> fmt::Display for Untrusted<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escape(self.0.as_ref()))
    }
}

impl<S: AsRef<str>> fmt::Debug for Untrusted<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::from("\"");
        for c in self.0.as_ref().chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if is_escaped(c) => push_escaped(&mut out, c),
                c => out.push(c),
            }
        }
        out.push('"');
        f.write_str(&out)
    }
}

/// The inverse of [`escape`] for text without backslashes of its own: each escape back to
/// its character. Used by the tests to show that every escape names exactly one character.
pub fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 1..];
        let (c, used) = match tail.as_bytes().first() {
            Some(b'e') => (Some('\u{1b}'), 1),
            Some(b'n') => (Some('\n'), 1),
            Some(b'r') => (Some('\r'), 1),
            Some(b't') => (Some('\t'), 1),
            Some(b'x') => (
                tail.get(1..3)
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .and_then(char::from_u32),
                3,
            ),
            Some(b'u') => match (tail.strip_prefix("u{"), tail.find('}')) {
                (Some(_), Some(end)) => (
                    u32::from_str_radix(&tail[2..end], 16)
                        .ok()
                        .and_then(char::from_u32),
                    end + 1,
                ),
                _ => (None, 0),
            },
            _ => (None, 0),
        };
        match c {
            Some(c) => {
                out.push(c);
                rest = &tail[used..];
            }
            None => {
                out.push('\\');
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_two_lower_case_digits_a_byte_as_format_writes_them() {
        let bytes: Vec<u8> = (0..=255).collect();
        let formatted: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex(&bytes), formatted);
        assert_eq!(hex(&[]), "");
        assert_eq!(hex(&[0x0f, 0xa0]), "0fa0");
    }

    #[test]
    fn printable_ascii_is_exactly_the_ascii_nothing_is_escaped_in() {
        for b in 0u8..0x80 {
            assert_eq!(is_printable_ascii(b), !is_escaped(char::from(b)), "{b:#x}");
        }
        assert!(!is_printable_ascii(0x80) && !is_printable_ascii(0xff));
    }

    #[test]
    fn the_plain_prefix_ends_at_the_first_byte_that_needs_a_look_wherever_it_is() {
        let naive = |b: &[u8], keep_newlines: bool| {
            b.iter()
                .position(|&c| !(is_printable_ascii(c) || (keep_newlines && c == b'\n')))
                .unwrap_or(b.len())
        };
        // Every position in and around the 32-byte blocks, for each kind of byte.
        for len in [0, 1, 31, 32, 33, 64, 65, 100] {
            for at in 0..=len {
                for odd in [b'\n', 0x1b, 0x7f, 0xc3, b'\t'] {
                    let mut bytes = vec![b'a'; len];
                    if at < len {
                        bytes[at] = odd;
                    }
                    for keep in [false, true] {
                        assert_eq!(
                            plain_prefix(&bytes, keep),
                            naive(&bytes, keep),
                            "len {len}, {odd:#x} at {at}, keep_newlines {keep}"
                        );
                    }
                }
            }
        }
    }
    use proptest::prelude::*;

    #[test]
    fn the_report_line_of_a_hostile_image_reads_as_escapes() {
        assert_eq!(
            escape("nginx:1.25\u{1b}]0;pwned\u{7}\u{1b}[2J"),
            "nginx:1.25\\e]0;pwned\\x07\\e[2J"
        );
        assert_eq!(escape("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(escape("a\u{202e}b\u{2066}c"), "a\\u{202e}b\\u{2066}c");
        assert_eq!(escape("\u{0}\u{7f}\t\r\n"), "\\x00\\x7f\\t\\r\\n");
    }

    #[test]
    fn visible_text_is_left_alone_and_borrowed() {
        for s in [
            "",
            "web",
            "日本語 🚀 é",
            "C:\\dir",
            "a b",
            "\u{fffd}",
            "\u{e000}",
        ] {
            assert!(matches!(escape(s), Cow::Borrowed(_)), "{s:?}");
        }
    }

    #[test]
    fn every_character_that_can_hide_or_reorder_text_is_escaped() {
        let hidden = [
            '\u{ad}',
            '\u{34f}',
            '\u{61c}',
            '\u{115f}',
            '\u{180e}',
            '\u{200b}',
            '\u{200c}',
            '\u{200d}',
            '\u{200e}',
            '\u{200f}',
            '\u{2028}',
            '\u{2029}',
            '\u{202a}',
            '\u{202b}',
            '\u{202c}',
            '\u{202d}',
            '\u{202e}',
            '\u{2060}',
            '\u{2066}',
            '\u{2067}',
            '\u{2068}',
            '\u{2069}',
            '\u{3164}',
            '\u{fe0f}',
            '\u{feff}',
            '\u{fff9}',
            '\u{e0001}',
            '\u{e0041}',
            '\u{e0100}',
            '\u{85}',
            '\u{a0}',
            '\u{2000}',
            '\u{3000}',
        ];
        for c in hidden {
            assert!(is_escaped(c), "{c:?}");
        }
        for c in ['a', ' ', 'é', '\u{301}', '🚀', '\u{fffd}', '\u{e000}'] {
            assert!(!is_escaped(c), "{c:?}");
        }
    }

    #[test]
    fn the_terminal_pass_keeps_line_feeds_and_only_with_colour_sgr() {
        let styled = "\u{1b}[32mweb\u{1b}[0m\n\u{1b}[1;38;5;208mx\u{1b}[0m\n";
        assert!(matches!(for_terminal(styled, true), Cow::Borrowed(_)));
        assert_eq!(
            for_terminal(styled, false),
            "\\e[32mweb\\e[0m\n\\e[1;38;5;208mx\\e[0m\n"
        );
        // Not SGR: a title, a screen clear, a cursor move, an unfinished sequence.
        assert_eq!(
            for_terminal("\u{1b}]0;t\u{7}\u{1b}[2J\u{1b}[H\u{1b}[31", true),
            "\\e]0;t\\x07\\e[2J\\e[H\\e[31"
        );
    }

    #[test]
    fn the_quoted_form_escapes_quotes_too() {
        assert_eq!(
            format!("{:?}", Untrusted("a\"b\\c\u{1b}")),
            "\"a\\\"b\\\\c\\e\""
        );
        assert_eq!(format!("{}", Untrusted(String::from("x\u{7}"))), "x\\x07");
    }

    #[test]
    fn one_line_collapses_whitespace_and_escapes_the_rest() {
        assert_eq!(
            one_line("denied:\n  bad\u{1b}[2J \u{2028} value"),
            "denied: bad\\e[2J value"
        );
    }

    proptest! {
        /// Whatever the text, nothing that a terminal obeys or hides is left.
        #[test]
        fn escaped_text_has_no_control_or_format_character(s in any::<String>()) {
            let out = escape(&s);
            prop_assert!(!out.chars().any(is_escaped), "{out:?}");
            let lines = escape_lines(&s);
            prop_assert!(!lines.chars().any(|c| c != '\n' && is_escaped(c)), "{lines:?}");
            let term = for_terminal(&s, false);
            prop_assert!(!term.chars().any(|c| c != '\n' && is_escaped(c)), "{term:?}");
        }

        /// Each escape names exactly one character: without backslashes of its own, the text
        /// comes back exactly; and escaping twice changes nothing more.
        #[test]
        fn escapes_read_back_to_the_original(s in any::<String>()) {
            let out = escape(&s);
            if !s.contains('\\') {
                prop_assert_eq!(unescape(&out), s.clone());
            }
            prop_assert_eq!(escape(&out), out.clone());
        }

        /// Mixed with the controls and format characters that matter most.
        #[test]
        fn hostile_mixtures_come_out_printable(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just("\u{1b}".to_owned()), Just("\u{1b}[".to_owned()), Just("\u{1b}]0;".to_owned()),
                    Just("\u{7}".to_owned()), Just("\u{9b}".to_owned()), Just("\u{9d}".to_owned()),
                    Just("\u{202e}".to_owned()), Just("\u{2066}".to_owned()), Just("\u{200b}".to_owned()),
                    Just("\u{feff}".to_owned()), Just("\r".to_owned()), Just("\n".to_owned()),
                    "[a-z0-9;\\[\\]m]{0,4}",
                ],
                0..12,
            ),
            color in any::<bool>(),
        ) {
            let s: String = parts.concat();
            prop_assert_eq!(unescape(&escape(&s)), s.clone());
            // Escaped, then coloured: the only sequences left are the colour's.
            let styled = console::style(escape(&s).into_owned()).red().force_styling(color).to_string();
            let term = for_terminal(&styled, color);
            prop_assert!(matches!(term, Cow::Borrowed(_)));
        }
    }

    #[test]
    fn credentials_in_a_url_are_never_kept() {
        for (url, shown) in [
            (
                "https://admin:s3cret@k8s.example:6443",
                "https://…@k8s.example:6443",
            ),
            ("https://TOKEN@k8s.example/", "https://…@k8s.example/"),
            ("https://u:p/a?b#c@host:1", "https://…@host:1"),
            ("https://u:p@x@host", "https://…@host"),
            ("u:p@host:6443", "…@host:6443"),
        ] {
            assert_eq!(without_credentials(url), shown);
            assert_eq!(without_credentials(shown), shown, "idempotent");
        }
        for url in ["https://k8s.example:6443/", "http://[::1]:8080", ""] {
            assert!(matches!(without_credentials(url), Cow::Borrowed(u) if u == url));
        }
    }
}
