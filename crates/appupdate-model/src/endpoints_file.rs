//! The endpoints file: YAML text → [`EndpointsFile`], or one error line naming file, line and
//! value.
//!
//! First pure step of the endpoints pipeline (`--endpoints FILE`, `-` for stdin); the
//! `routes` turns the result into Ingresses or HTTPRoutes. Nothing here reads files or prints: the
//! caller passes the text and the name to show in errors (`-` is shown as `<stdin>`).
//!
//! # Format
//!
//! ```yaml
//! endpoints:
//!   - path: /unprotected
//!   - path: /protected/user
//!     scopes: [user]
//!   - path: /protected/admin
//!     scopes: [user, admin]
//! ```
//!
//! The only top-level key is `endpoints`, a list; each entry has `path` (required) and `scopes`
//! (optional list; absent or `[]` means public). Scope order and repeated scopes do not matter.
//! `endpoints: []` parses (the caller demands `--allow-empty-endpoints` for it); a file that is
//! empty or only comments is an error, and so is `endpoints:` or `scopes:` with nothing after it
//! (a generator that lost its list must not silently remove every route or make a path public).
//!
//! The YAML is read as YAML 1.2: only `true`/`false` are booleans, so `scopes: [yes]` is the
//! scope `yes`. A scope or path that YAML reads as a number or boolean (`scopes: [1]`) is an
//! error asking for quotes rather than a silent conversion.
//!
//! # What is accepted
//!
//! The endpoints end up in Ingress paths (`/<app><path>`), which the nginx ingress controller
//! turns into `location` blocks — regular expressions as soon as any Ingress on the same host
//! uses `use-regex` — and the scopes end up inside the generated `configuration-snippet`
//! (`set $scopes "<scopes>";`). The API server accepts spaces and `;` in paths, so these rules
//! are the only guard against a path or scope that rewrites the nginx configuration.
//!
//! * **Paths**: start with `/`; consist only of ASCII letters, digits, `/` and `- . _ ~ : @ ! , = &`
//!   (the RFC 3986 path characters without `$ ' ; ( ) * +`, which mean something to nginx or to
//!   a regular expression, and without `%`: nginx matches decoded paths, so percent-encoding
//!   could never match and `%2F` is rejected by the API server anyway). So whitespace, control
//!   characters, quotes, `` ` ``, `{ }`, `$`, `#`, `\`, `;` and every non-ASCII character are
//!   refused. No empty segment (`//`) and no `.` or `..` segment — the API server rejects those
//!   for `Prefix` paths; we reject them first, with the file and line. Paths that differ only by
//!   a trailing `/` (`/a` and `/a/`) are duplicates: a `Prefix` match treats them the same.
//! * **Scopes**: the OAuth 2.0 scope-token grammar (RFC 6749 §3.3, `%x21 / %x23-5B / %x5D-7E`)
//!   narrowed to `[A-Za-z0-9._:/-]+` — enough for `read`, `orders:write`, `api.read`,
//!   `https://example.com/auth/x`, with nothing that nginx or a shell-like parser treats
//!   specially.
//!
//! # Errors
//!
//! Every error is one line, `FILE:LINE: what is wrong with "value"; what to do`, the value
//! escaped (control characters as `\n`, `\u{..}`) and shortened when very long. The first
//! problem in document order is reported. Parsing never panics, whatever the input.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;

use crate::text::Untrusted;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::{DuplicateKeyPolicy, MessageFormatter, NonFiniteFloatPolicy, Spanned};

/// The parsed endpoints file, entries in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointsFile {
    pub endpoints: Vec<Endpoint>,
}

/// One endpoint: a path below the application's prefix and the scopes it requires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// As written, starting with `/` (without the `/<app>` prefix).
    pub path: String,
    /// As written (order and repetitions kept); empty means public.
    pub scopes: Vec<String>,
    /// 1-based line of the entry in the file.
    pub line: usize,
}

/// What kind of problem an [`EndpointsError`] is, for callers and tests; the text is in the
/// error's message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Not valid YAML (the parser's message and line).
    Syntax,
    /// No content at all, or only comments.
    Empty,
    /// Valid YAML of the wrong shape: wrong type, missing or repeated key.
    Structure,
    /// A key this format does not have.
    UnknownKey,
    /// A path that is relative, unsafe or not normalised.
    InvalidPath,
    /// The same path listed twice.
    DuplicatePath,
    /// A scope outside the scope grammar.
    InvalidScope,
}

/// An error in the endpoints file. Displays as one line: `FILE:LINE: message`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct EndpointsError {
    /// The file name as shown (`<stdin>` for `-`).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    pub kind: ErrorKind,
    /// What is wrong, with the offending value, and what to do.
    pub message: String,
}

/// Characters allowed in a path besides ASCII letters and digits.
pub const PATH_PUNCTUATION: &str = "/-._~:@!,=&";
/// Characters allowed in a scope besides ASCII letters and digits.
pub const SCOPE_PUNCTUATION: &str = "._:/-";

const PATH_CHARS_HELP: &str = "use only letters, digits, \"/\" and - . _ ~ : @ ! , = &";
const SCOPE_CHARS_HELP: &str = "scope names use only letters, digits and . _ : / -";
const EMPTY_HELP: &str = "write \"endpoints:\" followed by a list of \"- path: /...\" entries, or \"endpoints: []\" to remove every endpoint";

/// Parses an endpoints file. `source` is the file name shown in errors (`-` → `<stdin>`).
pub fn parse(text: &str, source: &str) -> Result<EndpointsFile, EndpointsError> {
    match plain::parse(text) {
        Some(parsed) => Ok(parsed),
        None => parse_yaml(text, source),
    }
}

/// [`parse`] through the YAML parser, for every file the fast path ([`plain`]) does not take.
fn parse_yaml(text: &str, source: &str) -> Result<EndpointsFile, EndpointsError> {
    let file = if source == "-" { "<stdin>" } else { source };
    let parser = Parser { text, file };
    let options = serde_saphyr::options! {
        with_snippet: false,
        duplicate_keys: DuplicateKeyPolicy::PassThrough,
        strict_booleans: true,
        non_finite_float_policy: NonFiniteFloatPolicy::PassThrough,
    };
    let root: Spanned<Node> =
        serde_saphyr::from_str_with_options(text, options).map_err(|e| parser.syntax_error(&e))?;
    parser.file(&root)
}

/// The fast path for files in the layout this documentation shows and generators write: a
/// line `endpoints:`, then one entry per `- path: /…` line with an optional `scopes: [a, b]`
/// line under it, plain scalars only, every one of a character set that YAML can read in only
/// one way (a string), and full-line comments or blank lines between them. For such a file
/// the YAML parser's result is known without running it; anything else — other layouts,
/// quotes, flow mappings, tabs, `\r`, a value YAML could read as something other than a
/// string, and every file that has an error — returns `None`, and the YAML parser reads the
/// file (and words the error) as before. `tests::the_fast_path_agrees_with_the_yaml_parser`
/// checks that both give the same result.
///
/// The guard is not repeated here: every path and scope the fast path accepts has passed
/// [`path_error`] and [`scope_error`], and every path [`duplicate_error`], the same functions
/// the YAML parser's path calls. What this module adds is only the narrowing to values YAML
/// can read in one way.
///
/// Why it exists (measured 2026-12-04, `cargo bench -p kubectl-appupdate --bench plan --
/// plan_10k`, both in the same run, 2 shared cores, criterion medians): parsing the
/// 10 000-endpoint file took 1.86 ms here and 43.6 ms through the YAML parser alone
/// (`parse_yaml`, 23× as long), and parse + plan + render 25.7 ms against 75.1 ms — over the
/// 60 ms budget for the core at 10 000 endpoints by 15 ms (25%) on a quiet machine, so not
/// noise. With the guard shared (this module calling [`path_error`] and [`scope_error`]),
/// another run on a busier machine (load ~3.5): 2.26 ms against 44.4 ms, and the core 30.7 ms
/// against 73.8 ms. The YAML parser builds a span-carrying node tree for every scalar; the
/// fast path reads the lines.
mod plain {
    use super::{Endpoint, EndpointsFile, duplicate_error, path_error, scope_error};
    use std::collections::HashMap;

    /// Characters of a plain scalar that YAML reads as a string in both block and flow
    /// context: letters, digits and `/ . _ -`, and `~` in paths (a subset of what the guard
    /// accepts; the guard is still called).
    fn scope_char(b: u8) -> bool {
        b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-')
    }

    fn path_char(b: u8) -> bool {
        scope_char(b) || b == b'~'
    }

    /// A path that YAML reads as this string and that the guard accepts.
    fn path(s: &str) -> bool {
        s.bytes().all(path_char) && path_error(s).is_none()
    }

    /// A scope that YAML reads as a string in a flow sequence: starts with a letter (so not a
    /// number, `.inf` or `~`), and is none of the words that a YAML 1.1 or 1.2 reader, or a
    /// number parser, could read as a boolean, null or a float; and that the guard accepts.
    fn scope(s: &str) -> bool {
        const WORDS: [&str; 12] = [
            "true", "false", "null", "yes", "no", "on", "off", "y", "n", "inf", "infinity", "nan",
        ];
        s.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
            && s.bytes().all(scope_char)
            && !WORDS.iter().any(|w| s.eq_ignore_ascii_case(w))
            && scope_error(s).is_none()
    }

    fn scopes(s: &str) -> Option<Vec<String>> {
        let inner = s.strip_prefix('[')?.strip_suffix(']')?;
        if inner.is_empty() {
            return Some(Vec::new());
        }
        inner
            .split(", ")
            .map(|x| scope(x).then(|| x.to_owned()))
            .collect()
    }

    fn skippable(line: &str) -> bool {
        let t = line.trim_start_matches(' ');
        t.is_empty() || t.starts_with('#')
    }

    pub(super) fn parse(text: &str) -> Option<EndpointsFile> {
        if text
            .bytes()
            .any(|b| b == b'\r' || b == b'\t' || !b.is_ascii())
        {
            return None;
        }
        let mut lines = text.split('\n').enumerate().peekable();
        // The top-level key, at column 0, after blank lines and comments.
        loop {
            let (_, line) = lines.next()?;
            if skippable(line) {
                continue;
            }
            if line != "endpoints:" {
                return None;
            }
            break;
        }
        let mut endpoints: Vec<Endpoint> = Vec::new();
        let mut first: HashMap<&str, usize> = HashMap::new();
        let mut indent: Option<usize> = None;
        // The last `scopes:` text and the endpoint that read it: endpoints of a group usually
        // follow each other with the same line, which is then not checked again.
        let mut last_scopes: Option<(&str, usize)> = None;
        while let Some((i, line)) = lines.next() {
            if skippable(line) {
                continue;
            }
            let body = line.trim_start_matches(' ');
            let at = line.len() - body.len();
            if *indent.get_or_insert(at) != at {
                return None;
            }
            let p = body.strip_prefix("- path: ")?;
            if !path(p) {
                return None;
            }
            // A duplicate is an error: the YAML parser's path reports it with the file name.
            if duplicate_error(&mut first, &endpoints, p).is_some() {
                return None;
            }
            let mut list = Vec::new();
            if let Some((_, next)) = lines.peek() {
                let under = next.strip_prefix(' ').and_then(|n| n.strip_prefix(' '));
                if let Some(rest) = under.and_then(|n| n.get(at..))
                    && next.len() - next.trim_start_matches(' ').len() == at + 2
                {
                    let text = rest.strip_prefix("scopes: ")?;
                    let known = last_scopes
                        .filter(|(last, _)| *last == text)
                        .and_then(|(_, from)| endpoints.get(from));
                    list = match known {
                        Some(e) => e.scopes.clone(),
                        None => scopes(text)?,
                    };
                    last_scopes = Some((text, endpoints.len()));
                    lines.next();
                }
            }
            endpoints.push(Endpoint {
                path: p.to_owned(),
                scopes: list,
                line: i + 1,
            });
        }
        // `endpoints:` with nothing after it is an error the YAML parser's path words.
        (!endpoints.is_empty()).then_some(EndpointsFile { endpoints })
    }
}

/// A YAML node as the parser saw it; children keep their locations.
#[derive(Debug)]
enum Node {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Bytes,
    Seq(Vec<Spanned<Node>>),
    Map(Vec<(Spanned<Node>, Spanned<Node>)>),
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Int(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Int(v.into()))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Node, E> {
        Ok(Node::Int(v))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Node, E> {
        Ok(Node::Int(i128::try_from(v).unwrap_or(i128::MAX)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }
    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Node, E> {
        Ok(Node::Bytes)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = map.next_entry()? {
            entries.push(entry);
        }
        Ok(Node::Map(entries))
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct Parser<'a> {
    text: &'a str,
    file: &'a str,
}

fn line_of(node: &Spanned<Node>) -> usize {
    usize::try_from(node.referenced.line()).unwrap_or(0).max(1)
}

/// `"value"` with escapes, shortened to 80 characters.
fn quoted(s: &str) -> String {
    const MAX: usize = 80;
    if s.chars().count() > MAX {
        let head: String = s.chars().take(MAX).collect();
        format!("{:?}… ({} characters)", Untrusted(head), s.chars().count())
    } else {
        format!("{:?}", Untrusted(s))
    }
}

/// Names a character for a message: `';'`, `a space`, `the control character U+0007`.
fn describe_char(c: char) -> String {
    match c {
        ' ' => "a space".to_owned(),
        '\t' => "a tab".to_owned(),
        '\n' | '\r' => "a line break".to_owned(),
        c if c.is_control() => format!("the control character U+{:04X}", u32::from(c)),
        c if c.is_whitespace() => format!("the whitespace character U+{:04X}", u32::from(c)),
        c if !c.is_ascii() => format!(
            "the non-ASCII character {} (U+{:04X})",
            format!("{c:?}").replace('\'', "\""),
            u32::from(c)
        ),
        c => format!("'{c}'"),
    }
}

/// The first character of `s` that is neither an ASCII letter or digit nor in `punctuation`
/// (ASCII). Byte by byte: it runs for every path and scope of every file.
fn first_outside(s: &str, punctuation: &str) -> Option<char> {
    let ok = |b: u8| b.is_ascii_alphanumeric() || punctuation.as_bytes().contains(&b);
    let at = s.bytes().position(|b| !ok(b))?;
    s.get(at..)?.chars().next()
}

/// The injection guard for paths (see "What is accepted"): what is wrong with `path`, or
/// `None`. Both readers ([`plain`] and the YAML parser's path) call it for every path.
fn path_error(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        let fix = if path.is_empty() {
            "write a path starting with \"/\", e.g. \"/orders\"".to_owned()
        } else {
            format!("write \"/{}\"", path.escape_debug())
        };
        return Some(format!(
            "path {} does not start with \"/\"; {fix}",
            quoted(path)
        ));
    }
    if let Some(c) = first_outside(path, PATH_PUNCTUATION) {
        let why = if c == '%' {
            " (percent-encoding is not supported: nginx matches decoded paths)"
        } else {
            ""
        };
        return Some(format!(
            "path {} contains {}, which is not allowed in paths{why}; {PATH_CHARS_HELP}",
            quoted(path),
            describe_char(c)
        ));
    }
    if path.contains("//") {
        return Some(format!(
            "path {} contains an empty segment (\"//\"); remove the extra \"/\"",
            quoted(path)
        ));
    }
    if let Some(seg) = path.split('/').find(|s| *s == "." || *s == "..") {
        return Some(format!(
            "path {} contains the segment \"{seg}\"; write the path without \".\" or \"..\" segments",
            quoted(path)
        ));
    }
    None
}

/// The injection guard for scopes: what is wrong with `scope`, or `None`. Both readers call it
/// for every scope.
fn scope_error(scope: &str) -> Option<String> {
    if scope.is_empty() {
        return Some("scope \"\" is empty; write the scope's name or remove it".to_owned());
    }
    let c = first_outside(scope, SCOPE_PUNCTUATION)?;
    Some(format!(
        "scope {} contains {}, which is not allowed in scope names; {SCOPE_CHARS_HELP}",
        quoted(scope),
        describe_char(c)
    ))
}

/// The duplicate check, for both readers: `path` against the `endpoints` read so far, where
/// `first` maps a path without its trailing `/` to the index in `endpoints` of the first
/// endpoint with it. Records `path` (as the next endpoint) and returns `None`, or returns what
/// is wrong. Paths that differ only by a trailing `/` are the same `Prefix` path.
fn duplicate_error<'a>(
    first: &mut HashMap<&'a str, usize>,
    endpoints: &[Endpoint],
    path: &'a str,
) -> Option<String> {
    let key = match path.strip_suffix('/') {
        Some(k) if !k.is_empty() => k,
        _ => path,
    };
    let earlier = match first.entry(key) {
        Entry::Vacant(slot) => {
            slot.insert(endpoints.len());
            return None;
        }
        Entry::Occupied(slot) => endpoints.get(*slot.get())?,
    };
    Some(if earlier.path == path {
        format!(
            "path {} is listed twice (first at line {}); remove one of them, or merge their scopes into one entry",
            quoted(path),
            earlier.line
        )
    } else {
        format!(
            "path {} duplicates {} (line {}): Prefix paths that differ only by a trailing \"/\" match the same requests; keep one of them",
            quoted(path),
            quoted(&earlier.path),
            earlier.line
        )
    })
}

impl Parser<'_> {
    fn error(&self, line: usize, kind: ErrorKind, message: String) -> EndpointsError {
        EndpointsError {
            file: self.file.to_owned(),
            line,
            kind,
            message,
        }
    }

    fn syntax_error(&self, e: &serde_saphyr::Error) -> EndpointsError {
        let line = e
            .location()
            .and_then(|l| usize::try_from(l.line()).ok())
            .unwrap_or(1)
            .max(1);
        let column = e.location().map(|l| l.column()).unwrap_or(0);
        let raw = serde_saphyr::UserMessageFormatter.format_message(e);
        // One line, whatever the parser says.
        let msg: String = raw
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let at = if column > 0 {
            format!(" (column {column})")
        } else {
            String::new()
        };
        self.error(
            line,
            ErrorKind::Syntax,
            format!("invalid YAML{at}: {msg}; fix the YAML syntax"),
        )
    }

    /// The source text of a node, for values YAML did not read as strings.
    fn raw(&self, node: &Spanned<Node>) -> Option<&str> {
        let span = node.referenced.span();
        let start = usize::try_from(span.byte_offset()?).ok()?;
        let len = usize::try_from(span.byte_len()?).ok()?;
        let raw = self.text.get(start..start.checked_add(len)?)?;
        (!raw.is_empty()).then_some(raw)
    }

    /// "the string \"x\"", "the number 5", "a list", … for type errors.
    fn describe(&self, node: &Spanned<Node>) -> String {
        let raw = || self.raw(node).map(quoted_raw);
        match &node.value {
            Node::Null => "nothing (null)".to_owned(),
            Node::Bool(b) => format!("the boolean {}", raw().unwrap_or_else(|| b.to_string())),
            Node::Int(i) => format!("the number {}", raw().unwrap_or_else(|| i.to_string())),
            Node::Float(f) => format!("the number {}", raw().unwrap_or_else(|| f.to_string())),
            Node::Str(s) => format!("the string {}", quoted(s)),
            Node::Bytes => "binary data".to_owned(),
            Node::Seq(_) => "a list".to_owned(),
            Node::Map(_) => "a mapping".to_owned(),
        }
    }

    /// How a mapping key is shown: its string, else its source text.
    fn key_text(&self, key: &Spanned<Node>) -> String {
        match &key.value {
            Node::Str(s) => quoted(s),
            _ => self
                .raw(key)
                .map(quoted_raw)
                .unwrap_or_else(|| self.describe(key)),
        }
    }

    fn is_blank(&self) -> bool {
        self.text.lines().all(|l| {
            let t = l.trim_matches(|c: char| c.is_whitespace() || c == '\u{FEFF}');
            t.is_empty() || t.starts_with('#') || t == "---" || t == "..."
        })
    }

    /// Checks a mapping's keys against `valid`, reporting unknown and repeated keys.
    fn keys<'n>(
        &self,
        entries: &'n [(Spanned<Node>, Spanned<Node>)],
        valid: &[&str],
        place: &str,
    ) -> Result<HashMap<&'n str, &'n Spanned<Node>>, EndpointsError> {
        let mut seen: HashMap<&str, (&Spanned<Node>, usize)> = HashMap::new();
        for (key, value) in entries {
            let name = match &key.value {
                Node::Str(s) if valid.contains(&s.as_str()) => s.as_str(),
                _ => {
                    let list = valid
                        .iter()
                        .map(|v| format!("\"{v}\""))
                        .collect::<Vec<_>>()
                        .join(" and ");
                    let valid_text = if valid.len() == 1 {
                        format!("the only valid key {place} is {list}")
                    } else {
                        format!("the valid keys {place} are {list}")
                    };
                    return Err(self.error(
                        line_of(key),
                        ErrorKind::UnknownKey,
                        format!("unknown key {} {place}; {valid_text}", self.key_text(key)),
                    ));
                }
            };
            if let Some((_, first)) = seen.get(name) {
                return Err(self.error(
                    line_of(key),
                    ErrorKind::Structure,
                    format!(
                        "key \"{name}\" is repeated {place} (first at line {first}); keep only one"
                    ),
                ));
            }
            seen.insert(name, (value, line_of(key)));
        }
        Ok(seen.into_iter().map(|(k, (v, _))| (k, v)).collect())
    }

    fn file(&self, root: &Spanned<Node>) -> Result<EndpointsFile, EndpointsError> {
        let entries = match &root.value {
            Node::Map(entries) => entries,
            Node::Null if self.is_blank() => {
                return Err(self.error(
                    1,
                    ErrorKind::Empty,
                    format!("the endpoints file is empty (no YAML content, at most comments); {EMPTY_HELP}"),
                ));
            }
            _ => {
                return Err(self.error(
                    line_of(root),
                    ErrorKind::Structure,
                    format!(
                        "the file must be a mapping with the key \"endpoints\", found {}; {EMPTY_HELP}",
                        self.describe(root)
                    ),
                ));
            }
        };
        let keys = self.keys(entries, &["endpoints"], "at the top level")?;
        let list = keys.get("endpoints").ok_or_else(|| {
            self.error(
                line_of(root),
                ErrorKind::Structure,
                format!("the key \"endpoints\" is missing; {EMPTY_HELP}"),
            )
        })?;
        let items = match &list.value {
            Node::Seq(items) => items,
            Node::Null => {
                return Err(self.error(
                    line_of(list),
                    ErrorKind::Structure,
                    "\"endpoints\" has no value; list the endpoints under it, or write \"endpoints: []\" to remove every endpoint".to_owned(),
                ));
            }
            _ => {
                return Err(self.error(
                    line_of(list),
                    ErrorKind::Structure,
                    format!(
                        "\"endpoints\" must be a list, found {}; write each endpoint as \"- path: /...\" under \"endpoints:\"",
                        self.describe(list)
                    ),
                ));
            }
        };

        let mut endpoints: Vec<Endpoint> = Vec::with_capacity(items.len());
        let mut first: HashMap<&str, usize> = HashMap::new();
        for item in items {
            let (endpoint, path) = self.endpoint(item)?;
            if let Some(message) = duplicate_error(&mut first, &endpoints, path) {
                return Err(self.error(endpoint.line, ErrorKind::DuplicatePath, message));
            }
            endpoints.push(endpoint);
        }
        Ok(EndpointsFile { endpoints })
    }

    /// One endpoint, and its path as it is in the node tree (for the duplicate check).
    fn endpoint<'n>(&self, item: &'n Spanned<Node>) -> Result<(Endpoint, &'n str), EndpointsError> {
        let line = line_of(item);
        let entries = match &item.value {
            Node::Map(entries) => entries,
            Node::Str(s) if s.starts_with('/') => {
                return Err(self.error(
                    line,
                    ErrorKind::Structure,
                    format!(
                        "each endpoint must be a mapping with \"path\" (and optional \"scopes\"), found the string {}; write \"- path: {}\"",
                        quoted(s),
                        s.escape_debug()
                    ),
                ));
            }
            _ => {
                return Err(self.error(
                    line,
                    ErrorKind::Structure,
                    format!(
                        "each endpoint must be a mapping with \"path\" (and optional \"scopes\"), found {}; write \"- path: /...\"",
                        self.describe(item)
                    ),
                ));
            }
        };
        let keys = self.keys(entries, &["path", "scopes"], "in an endpoint")?;
        let path_node = keys.get("path").ok_or_else(|| {
            self.error(
                line,
                ErrorKind::Structure,
                "the endpoint has no \"path\"; add \"path: /...\"".to_owned(),
            )
        })?;
        let path_ref = match &path_node.value {
            Node::Str(s) => s.as_str(),
            _ => {
                return Err(self.error(
                    line_of(path_node),
                    ErrorKind::InvalidPath,
                    format!(
                        "\"path\" must be a string starting with \"/\", found {}; write the path, e.g. \"path: /orders\"",
                        self.describe(path_node)
                    ),
                ));
            }
        };
        self.check_path(path_ref, line_of(path_node))?;
        let path = path_ref.to_owned();

        let mut scopes = Vec::new();
        if let Some(scopes_node) = keys.get("scopes") {
            let items = match &scopes_node.value {
                Node::Seq(items) => items,
                Node::Null => {
                    return Err(self.error(
                        line_of(scopes_node),
                        ErrorKind::Structure,
                        format!(
                            "\"scopes\" of path {} has no value; list the required scopes, e.g. \"scopes: [user]\", or write \"scopes: []\" to make the path public",
                            quoted(&path)
                        ),
                    ));
                }
                Node::Str(s) => {
                    return Err(self.error(
                        line_of(scopes_node),
                        ErrorKind::Structure,
                        format!(
                            "\"scopes\" must be a list, found the string {}; write \"scopes: [{}]\"",
                            quoted(s),
                            s.escape_debug()
                        ),
                    ));
                }
                _ => {
                    return Err(self.error(
                        line_of(scopes_node),
                        ErrorKind::Structure,
                        format!(
                            "\"scopes\" must be a list of scope names, found {}; write e.g. \"scopes: [user, admin]\"",
                            self.describe(scopes_node)
                        ),
                    ));
                }
            };
            for scope_node in items {
                let scope = match &scope_node.value {
                    Node::Str(s) => s.clone(),
                    Node::Bool(_) | Node::Int(_) | Node::Float(_) => {
                        let raw = self.raw(scope_node).unwrap_or_default();
                        return Err(self.error(
                            line_of(scope_node),
                            ErrorKind::InvalidScope,
                            format!(
                                "scope {raw} is read by YAML as {}, not a name; if it is a scope name, quote it: {}",
                                self.describe(scope_node),
                                quoted(raw)
                            ),
                        ));
                    }
                    _ => {
                        return Err(self.error(
                            line_of(scope_node),
                            ErrorKind::InvalidScope,
                            format!(
                                "each scope must be a name, found {}; write the scopes as a list of names, e.g. \"scopes: [user, admin]\"",
                                self.describe(scope_node)
                            ),
                        ));
                    }
                };
                self.check_scope(&scope, line_of(scope_node))?;
                scopes.push(scope);
            }
        }
        Ok((Endpoint { path, scopes, line }, path_ref))
    }

    fn check_path(&self, path: &str, line: usize) -> Result<(), EndpointsError> {
        match path_error(path) {
            Some(message) => Err(self.error(line, ErrorKind::InvalidPath, message)),
            None => Ok(()),
        }
    }

    fn check_scope(&self, scope: &str, line: usize) -> Result<(), EndpointsError> {
        match scope_error(scope) {
            Some(message) => Err(self.error(line, ErrorKind::InvalidScope, message)),
            None => Ok(()),
        }
    }
}

/// Source text shown as written (it is a plain scalar or an alias), escaped and shortened.
fn quoted_raw(raw: &str) -> String {
    let q = quoted(raw);
    // `quoted` adds Rust string quotes; a plain scalar reads better without them.
    q.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .map(str::to_owned)
        .unwrap_or(q)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn err(text: &str) -> String {
        parse(text, "endpoints.yaml").unwrap_err().to_string()
    }

    fn kind(text: &str) -> ErrorKind {
        parse(text, "endpoints.yaml").unwrap_err().kind
    }

    fn ep(path: &str, scopes: &[&str], line: usize) -> Endpoint {
        Endpoint {
            path: path.into(),
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
            line,
        }
    }

    /// Every file the fast path takes, the YAML parser reads the same way (and the fast path
    /// leaves every file with an error to it).
    fn agrees(text: &str) -> Result<(), String> {
        let yaml = parse_yaml(text, "e.yaml");
        match plain::parse(text) {
            Some(fast) if yaml.as_ref() != Ok(&fast) => {
                Err(format!("{text:?}: fast {fast:?}, YAML {yaml:?}"))
            }
            _ => Ok(()),
        }
    }

    #[test]
    fn the_fast_path_takes_the_usual_layout() {
        let text = "# generated\nendpoints:\n  - path: /a\n    scopes: [read, team-1]\n\n  # c\n  - path: /b/\n  - path: /c~d\n    scopes: []\n";
        assert_eq!(
            plain::parse(text),
            Some(EndpointsFile {
                endpoints: vec![
                    ep("/a", &["read", "team-1"], 3),
                    ep("/b/", &[], 7),
                    ep("/c~d", &[], 8),
                ]
            })
        );
        agrees(text).unwrap();
        for other in [
            "endpoints:\n  - path: /a\n  - path: /a/\n",
            "endpoints:\n  - path: /a\n    scopes: [yes]\n",
            "endpoints:\n  - path: /a\n    scopes: [1]\n",
            "endpoints:\n  - path: /a//b\n",
            "endpoints:\n  - path: \"/a\"\n",
            "endpoints:\n  - path: /a # c\n",
            "endpoints:\n",
            "endpoints:\n  - path: /a\n   scopes: [x]\n",
            "endpoints:\n  - path: /a\n    scopes: [x]\n    scopes: [y]\n",
            "endpoints:\n  - path: /a\n      scopes: [x]\n",
            "endpoints:\r\n  - path: /a\r\n",
        ] {
            assert_eq!(plain::parse(other), None, "{other:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn the_fast_path_agrees_with_the_yaml_parser(
            head in proptest::sample::select(vec!["", "# c\n", "\n", "---\n", "endpoints: []\n#\n"]),
            indent in 0usize..4,
            entries in proptest::collection::vec(
                (
                    "/[a-z0-9~._/-]{0,6}|[a-z]{1,3}|/[:@!,=&;% ]{1,2}",
                    proptest::option::of(proptest::collection::vec(
                        "[a-zA-Z][a-z0-9._/-]{0,4}|yes|No|TRUE|null|nan|Inf|1|0x1|~|.inf|a:b|a~b",
                        0..3,
                    )),
                    0usize..5,
                    proptest::sample::select(vec!["", "\n", "  # c\n", "x: 1\n", "    # d\n"]),
                ),
                0..6,
            ),
        ) {
            let mut text = format!("{head}endpoints:\n");
            for (path, scopes, scope_indent, after) in &entries {
                text.push_str(&" ".repeat(indent));
                text.push_str(&format!("- path: {path}\n"));
                if let Some(scopes) = scopes {
                    text.push_str(&" ".repeat(indent + *scope_indent));
                    text.push_str(&format!("scopes: [{}]\n", scopes.join(", ")));
                }
                text.push_str(after);
            }
            proptest::prop_assert_eq!(agrees(&text), Ok(()));
        }
    }

    #[test]
    fn the_spec_example_parses_with_lines() {
        let text = "endpoints:\n  - path: /unprotected\n  - path: /protected/user\n    scopes: [user]\n  - path: /protected/admin\n    scopes: [user, admin]\n";
        assert_eq!(
            parse(text, "e.yaml").unwrap(),
            EndpointsFile {
                endpoints: vec![
                    ep("/unprotected", &[], 2),
                    ep("/protected/user", &["user"], 3),
                    ep("/protected/admin", &["user", "admin"], 5),
                ]
            }
        );
    }

    #[test]
    fn block_lists_comments_quotes_and_empty_scopes_are_fine() {
        let text = "# routes\nendpoints:\n- path: \"/a\"\n  scopes:\n  - read:orders\n  - 'https://example.com/auth/x'\n- path: /b\n  scopes: []\n- {path: /c.json, scopes: [yes, a.b_c-d]}\n";
        assert_eq!(
            parse(text, "e.yaml").unwrap().endpoints,
            vec![
                ep("/a", &["read:orders", "https://example.com/auth/x"], 3),
                ep("/b", &[], 7),
                ep("/c.json", &["yes", "a.b_c-d"], 9),
            ]
        );
    }

    #[test]
    fn an_empty_list_parses() {
        assert_eq!(
            parse("endpoints: []\n", "e.yaml").unwrap(),
            EndpointsFile::default()
        );
    }

    #[test]
    fn stdin_is_named_stdin() {
        assert_eq!(
            parse("", "-").unwrap_err().to_string(),
            "<stdin>:1: the endpoints file is empty (no YAML content, at most comments); write \"endpoints:\" followed by a list of \"- path: /...\" entries, or \"endpoints: []\" to remove every endpoint"
        );
    }

    #[test]
    fn empty_and_comment_only_files_say_so() {
        let expected = "endpoints.yaml:1: the endpoints file is empty (no YAML content, at most comments); write \"endpoints:\" followed by a list of \"- path: /...\" entries, or \"endpoints: []\" to remove every endpoint";
        assert_eq!(err(""), expected);
        assert_eq!(err("\n  \n"), expected);
        assert_eq!(err("# nothing yet\n# really\n"), expected);
        assert_eq!(err("---\n"), expected);
        assert_eq!(kind(""), ErrorKind::Empty);
    }

    #[test]
    fn syntax_errors_carry_the_parser_line() {
        assert_eq!(
            err("endpoints:\n  - path: /a\n    scopes: [user\n  - path: /b\n"),
            "endpoints.yaml:4: invalid YAML (column 9): illegal placement of ':' indicator; fix the YAML syntax"
        );
        assert_eq!(
            err("endpoints:\n  - path: \"/a\n"),
            "endpoints.yaml:2: invalid YAML (column 11): unclosed quote; fix the YAML syntax"
        );
        assert_eq!(
            err("endpoints: []\n---\nendpoints: []\n"),
            "endpoints.yaml:3: invalid YAML (column 1): only single YAML document expected but multiple found; fix the YAML syntax"
        );
        assert_eq!(kind("endpoints: [\n"), ErrorKind::Syntax);
    }

    #[test]
    fn the_top_level_must_be_a_mapping() {
        assert_eq!(
            err("- path: /a\n"),
            "endpoints.yaml:1: the file must be a mapping with the key \"endpoints\", found a list; write \"endpoints:\" followed by a list of \"- path: /...\" entries, or \"endpoints: []\" to remove every endpoint"
        );
        assert_eq!(
            err("~\n"),
            "endpoints.yaml:1: the file must be a mapping with the key \"endpoints\", found nothing (null); write \"endpoints:\" followed by a list of \"- path: /...\" entries, or \"endpoints: []\" to remove every endpoint"
        );
    }

    #[test]
    fn unknown_top_level_keys_list_the_valid_one() {
        assert_eq!(
            err("endpoint:\n  - path: /a\n"),
            "endpoints.yaml:1: unknown key \"endpoint\" at the top level; the only valid key at the top level is \"endpoints\""
        );
        assert_eq!(
            err("endpoints: []\n1.5: x\n"),
            "endpoints.yaml:2: unknown key 1.5 at the top level; the only valid key at the top level is \"endpoints\""
        );
        assert_eq!(kind("x: 1\n"), ErrorKind::UnknownKey);
    }

    #[test]
    fn missing_endpoints_key() {
        assert_eq!(
            err("{}\n"),
            "endpoints.yaml:1: the key \"endpoints\" is missing; write \"endpoints:\" followed by a list of \"- path: /...\" entries, or \"endpoints: []\" to remove every endpoint"
        );
    }

    #[test]
    fn repeated_keys_name_the_first_line() {
        assert_eq!(
            err("endpoints: []\nendpoints: []\n"),
            "endpoints.yaml:2: key \"endpoints\" is repeated at the top level (first at line 1); keep only one"
        );
        assert_eq!(
            err("endpoints:\n  - path: /a\n    path: /b\n"),
            "endpoints.yaml:3: key \"path\" is repeated in an endpoint (first at line 2); keep only one"
        );
    }

    #[test]
    fn endpoints_must_be_a_non_null_list() {
        assert_eq!(
            err("endpoints:\n"),
            "endpoints.yaml:1: \"endpoints\" has no value; list the endpoints under it, or write \"endpoints: []\" to remove every endpoint"
        );
        assert_eq!(
            err("endpoints: /a\n"),
            "endpoints.yaml:1: \"endpoints\" must be a list, found the string \"/a\"; write each endpoint as \"- path: /...\" under \"endpoints:\""
        );
        assert_eq!(
            err("endpoints:\n  path: /a\n"),
            "endpoints.yaml:2: \"endpoints\" must be a list, found a mapping; write each endpoint as \"- path: /...\" under \"endpoints:\""
        );
    }

    #[test]
    fn entries_must_be_mappings() {
        assert_eq!(
            err("endpoints:\n  - /a\n"),
            "endpoints.yaml:2: each endpoint must be a mapping with \"path\" (and optional \"scopes\"), found the string \"/a\"; write \"- path: /a\""
        );
        assert_eq!(
            err("endpoints:\n  - 42\n"),
            "endpoints.yaml:2: each endpoint must be a mapping with \"path\" (and optional \"scopes\"), found the number 42; write \"- path: /...\""
        );
    }

    #[test]
    fn unknown_endpoint_keys_list_the_valid_ones() {
        assert_eq!(
            err("endpoints:\n  - path: /a\n    scope: [user]\n"),
            "endpoints.yaml:3: unknown key \"scope\" in an endpoint; the valid keys in an endpoint are \"path\" and \"scopes\""
        );
        assert_eq!(
            err("endpoints:\n  - path: /a\n    true: 1\n"),
            "endpoints.yaml:3: unknown key true in an endpoint; the valid keys in an endpoint are \"path\" and \"scopes\""
        );
    }

    #[test]
    fn a_path_is_required_and_must_be_a_string() {
        assert_eq!(
            err("endpoints:\n  - scopes: [user]\n"),
            "endpoints.yaml:2: the endpoint has no \"path\"; add \"path: /...\""
        );
        assert_eq!(
            err("endpoints:\n  - path:\n"),
            "endpoints.yaml:2: \"path\" must be a string starting with \"/\", found nothing (null); write the path, e.g. \"path: /orders\""
        );
        assert_eq!(
            err("endpoints:\n  - path: 0x10\n"),
            "endpoints.yaml:2: \"path\" must be a string starting with \"/\", found the number 0x10; write the path, e.g. \"path: /orders\""
        );
        assert_eq!(
            err("endpoints:\n  - path: [/a]\n"),
            "endpoints.yaml:2: \"path\" must be a string starting with \"/\", found a list; write the path, e.g. \"path: /orders\""
        );
    }

    #[test]
    fn paths_must_be_absolute() {
        assert_eq!(
            err("endpoints:\n  - path: orders\n"),
            "endpoints.yaml:2: path \"orders\" does not start with \"/\"; write \"/orders\""
        );
        assert_eq!(
            err("endpoints:\n  - path: ''\n"),
            "endpoints.yaml:2: path \"\" does not start with \"/\"; write a path starting with \"/\", e.g. \"/orders\""
        );
        assert_eq!(kind("endpoints:\n  - path: a\n"), ErrorKind::InvalidPath);
    }

    #[test]
    fn unsafe_path_characters_are_named() {
        let cases = [
            ("\"/a b\"", "\"/a b\" contains a space"),
            ("\"/a\\tb\"", "\"/a\\tb\" contains a tab"),
            ("\"/a\\nb\"", "\"/a\\nb\" contains a line break"),
            (
                "\"/a\\x07\"",
                "\"/a\\x07\" contains the control character U+0007",
            ),
            ("/a;b", "\"/a;b\" contains ';'"),
            ("\"/a\\\"b\"", "\"/a\\\"b\" contains '\"'"),
            ("/a'b", "\"/a'b\" contains '''"),
            ("/a`b", "\"/a`b\" contains '`'"),
            ("/a{b", "\"/a{b\" contains '{'"),
            ("/a}b", "\"/a}b\" contains '}'"),
            ("/a$b", "\"/a$b\" contains '$'"),
            ("/a#b", "\"/a#b\" contains '#'"),
            ("/a\\b", "\"/a\\\\b\" contains '\\'"),
            ("/a(b", "\"/a(b\" contains '('"),
            ("/a*", "\"/a*\" contains '*'"),
            ("/a+", "\"/a+\" contains '+'"),
            ("/a?b", "\"/a?b\" contains '?'"),
            (
                "/caf\u{e9}",
                "\"/café\" contains the non-ASCII character \"é\" (U+00E9)",
            ),
            (
                "\"/a\\u00a0\"",
                "\"/a\\u{a0}\" contains the whitespace character U+00A0",
            ),
        ];
        for (yaml, what) in cases {
            assert_eq!(
                err(&format!("endpoints:\n  - path: {yaml}\n")),
                format!(
                    "endpoints.yaml:2: path {what}, which is not allowed in paths; use only letters, digits, \"/\" and - . _ ~ : @ ! , = &"
                ),
                "{yaml}"
            );
        }
        assert_eq!(
            err("endpoints:\n  - path: /a%2Fb\n"),
            "endpoints.yaml:2: path \"/a%2Fb\" contains '%', which is not allowed in paths (percent-encoding is not supported: nginx matches decoded paths); use only letters, digits, \"/\" and - . _ ~ : @ ! , = &"
        );
    }

    #[test]
    fn paths_the_api_server_would_reject_are_caught_first() {
        assert_eq!(
            err("endpoints:\n  - path: /a//b\n"),
            "endpoints.yaml:2: path \"/a//b\" contains an empty segment (\"//\"); remove the extra \"/\""
        );
        assert_eq!(
            err("endpoints:\n  - path: /a/../admin\n"),
            "endpoints.yaml:2: path \"/a/../admin\" contains the segment \"..\"; write the path without \".\" or \"..\" segments"
        );
        assert_eq!(
            err("endpoints:\n  - path: /a/.\n"),
            "endpoints.yaml:2: path \"/a/.\" contains the segment \".\"; write the path without \".\" or \"..\" segments"
        );
        // Dots inside a segment are fine.
        assert!(parse("endpoints:\n  - path: /v1.2/..x/.well-known\n", "e").is_ok());
    }

    #[test]
    fn duplicate_paths_name_both_lines() {
        assert_eq!(
            err("endpoints:\n  - path: /a\n  - path: /b\n  - path: /a\n    scopes: [x]\n"),
            "endpoints.yaml:4: path \"/a\" is listed twice (first at line 2); remove one of them, or merge their scopes into one entry"
        );
        assert_eq!(
            err("endpoints:\n  - path: /a/\n  - path: /a\n"),
            "endpoints.yaml:3: path \"/a\" duplicates \"/a/\" (line 2): Prefix paths that differ only by a trailing \"/\" match the same requests; keep one of them"
        );
        assert_eq!(
            kind("endpoints:\n  - path: /\n  - path: /\n"),
            ErrorKind::DuplicatePath
        );
    }

    #[test]
    fn scopes_must_be_a_list_of_names() {
        assert_eq!(
            err("endpoints:\n  - path: /a\n    scopes:\n"),
            "endpoints.yaml:3: \"scopes\" of path \"/a\" has no value; list the required scopes, e.g. \"scopes: [user]\", or write \"scopes: []\" to make the path public"
        );
        assert_eq!(
            err("endpoints:\n  - path: /a\n    scopes: user\n"),
            "endpoints.yaml:3: \"scopes\" must be a list, found the string \"user\"; write \"scopes: [user]\""
        );
        assert_eq!(
            err("endpoints:\n  - path: /a\n    scopes: {user: 1}\n"),
            "endpoints.yaml:3: \"scopes\" must be a list of scope names, found a mapping; write e.g. \"scopes: [user, admin]\""
        );
        assert_eq!(
            err("endpoints:\n  - path: /a\n    scopes: [[user]]\n"),
            "endpoints.yaml:3: each scope must be a name, found a list; write the scopes as a list of names, e.g. \"scopes: [user, admin]\""
        );
    }

    #[test]
    fn scopes_yaml_reads_as_numbers_or_booleans_need_quotes() {
        assert_eq!(
            err("endpoints:\n  - path: /a\n    scopes: [user, 10]\n"),
            "endpoints.yaml:3: scope 10 is read by YAML as the number 10, not a name; if it is a scope name, quote it: \"10\""
        );
        assert_eq!(
            err("endpoints:\n  - path: /a\n    scopes:\n      - true\n"),
            "endpoints.yaml:4: scope true is read by YAML as the boolean true, not a name; if it is a scope name, quote it: \"true\""
        );
        assert!(
            parse(
                "endpoints:\n  - path: /a\n    scopes: ['10', \"true\"]\n",
                "e"
            )
            .is_ok()
        );
    }

    #[test]
    fn scopes_follow_the_strict_grammar() {
        assert_eq!(
            err("endpoints:\n  - path: /a\n    scopes: ['']\n"),
            "endpoints.yaml:3: scope \"\" is empty; write the scope's name or remove it"
        );
        for (yaml, what) in [
            ("\"a b\"", "\"a b\" contains a space"),
            ("'a;b'", "\"a;b\" contains ';'"),
            ("'a\"b'", "\"a\\\"b\" contains '\"'"),
            ("\"a'b\"", "\"a'b\" contains '''"),
            ("'$scopes'", "\"$scopes\" contains '$'"),
            ("'a{'", "\"a{\" contains '{'"),
            ("'a}'", "\"a}\" contains '}'"),
            ("'#x'", "\"#x\" contains '#'"),
            ("'a\\b'", "\"a\\\\b\" contains '\\'"),
            ("\"a\\nb\"", "\"a\\nb\" contains a line break"),
            ("'a*'", "\"a*\" contains '*'"),
            ("'a@b'", "\"a@b\" contains '@'"),
            (
                "'\u{e9}'",
                "\"é\" contains the non-ASCII character \"é\" (U+00E9)",
            ),
        ] {
            assert_eq!(
                err(&format!("endpoints:\n  - path: /a\n    scopes: [{yaml}]\n")),
                format!(
                    "endpoints.yaml:3: scope {what}, which is not allowed in scope names; scope names use only letters, digits and . _ : / -"
                ),
                "{yaml}"
            );
        }
        assert_eq!(
            kind("endpoints:\n  - path: /a\n    scopes: ['a b']\n"),
            ErrorKind::InvalidScope
        );
    }

    #[test]
    fn long_values_are_shortened_in_messages() {
        let long = format!("/{}", "a ".repeat(100));
        let e = err(&format!("endpoints:\n  - path: \"{long}\"\n"));
        assert_eq!(
            e,
            format!(
                "endpoints.yaml:2: path \"/{}a\"… (201 characters) contains a space, which is not allowed in paths; use only letters, digits, \"/\" and - . _ ~ : @ ! , = &",
                "a ".repeat(39)
            )
        );
    }

    #[test]
    fn anchors_and_merge_keys_resolve() {
        let text = "base: &b {path: /a}\n";
        assert_eq!(
            err(text),
            "endpoints.yaml:1: unknown key \"base\" at the top level; the only valid key at the top level is \"endpoints\""
        );
        let text = "endpoints:\n  - &e {path: /a, scopes: [x]}\n  - {<<: *e, path: /b}\n";
        assert_eq!(
            parse(text, "e").unwrap().endpoints,
            vec![ep("/a", &["x"], 2), ep("/b", &["x"], 3)]
        );
    }

    #[test]
    fn hostile_inputs_are_errors_not_panics() {
        for text in [
            "\0",
            "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]",
            "a: &a [*a]",
            "x: !!binary AAEC\n",
            "endpoints: [{path: !!binary /w==}]\n",
            "endpoints: .inf\n",
            "endpoints:\n  - path: /a\n    scopes: [.nan]\n",
            "\u{feff}",
            "endpoints: [{path: 99999999999999999999999999999999999999999999}]",
        ] {
            let e = parse(text, "x").unwrap_err();
            assert!(!e.to_string().contains('\n'), "{e}");
        }
    }
}
