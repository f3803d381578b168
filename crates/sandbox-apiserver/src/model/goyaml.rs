//! YAML the way the API server writes it (`Accept: application/yaml`): sigs.k8s.io/yaml's
//! `JSONToYAML`, which is go-yaml v2 on the decoded JSON — mapping keys in go-yaml's order,
//! sequences inside mappings not indented, strings plain when they read back as strings,
//! single- or double-quoted otherwise, `|`/`|-` blocks for several lines, and long lines
//! folded at a space past column 80.

use serde_json::Value;

const BEST_WIDTH: usize = 80;

/// A JSON document as YAML (ends with a newline).
pub fn encode(v: &Value) -> String {
    let mut e = Emitter::default();
    e.node(v, 0, Ctx::Top);
    if !e.out.ends_with('\n') {
        e.out.push('\n');
    }
    e.out
}

#[derive(Default)]
struct Emitter {
    out: String,
    column: usize,
}

/// Where a node is written.
#[derive(Clone, Copy, PartialEq)]
enum Ctx {
    Top,
    /// After `key:` (a space and a scalar, or a newline and a block).
    MapValue,
    /// After `- `.
    SeqItem,
}

impl Emitter {
    fn write(&mut self, s: &str) {
        for c in s.chars() {
            if c == '\n' {
                self.column = 0;
            } else {
                self.column += 1;
            }
        }
        self.out.push_str(s);
    }

    fn newline_indent(&mut self, indent: usize) {
        self.write("\n");
        self.write(&" ".repeat(indent));
    }

    /// `v` whose first line continues the current one (after `key:` or `- `); `indent` is the
    /// indentation of its block lines.
    fn node(&mut self, v: &Value, indent: usize, ctx: Ctx) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort_by(|a, b| key_cmp(a, b));
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 || ctx == Ctx::MapValue {
                        self.newline_indent(indent);
                    }
                    self.scalar(k, indent, true);
                    self.write(":");
                    let child = &m[k.as_str()];
                    match child {
                        Value::Object(cm) if !cm.is_empty() => {
                            self.node(child, indent + 2, Ctx::MapValue);
                        }
                        Value::Array(a) if !a.is_empty() => {
                            // go-yaml does not indent a sequence inside a mapping.
                            self.node(child, indent, Ctx::MapValue);
                        }
                        _ => {
                            self.write(" ");
                            self.node(child, indent + 2, Ctx::MapValue);
                        }
                    }
                }
            }
            Value::Array(a) if !a.is_empty() => {
                for (i, item) in a.iter().enumerate() {
                    if i > 0 || ctx == Ctx::MapValue {
                        self.newline_indent(indent);
                    }
                    self.write("- ");
                    self.node(item, indent + 2, Ctx::SeqItem);
                }
            }
            Value::Object(_) => self.write("{}"),
            Value::Array(_) => self.write("[]"),
            Value::Null => self.write("null"),
            Value::Bool(b) => self.write(if *b { "true" } else { "false" }),
            Value::Number(n) => {
                let text = match (n.as_i64(), n.as_u64(), n.as_f64()) {
                    (Some(i), _, _) => i.to_string(),
                    (_, Some(u), _) => u.to_string(),
                    (_, _, Some(f)) => go_float(f),
                    _ => n.to_string(),
                };
                self.write(&text);
            }
            Value::String(s) => self.scalar(s, indent, false),
        }
    }

    /// A string in the style go-yaml picks, folded at spaces past column 80.
    fn scalar(&mut self, s: &str, indent: usize, key: bool) {
        let a = analyze(s);
        let needs_quotes = !resolves_to_string(s);
        if !key && s.contains('\n') && a.block_allowed && !needs_quotes {
            self.literal(s, indent);
        } else if !needs_quotes && a.plain_allowed && !s.contains('\n') {
            self.plain(s, indent, !key);
        } else if !needs_quotes && a.single_allowed && !s.contains('\n') {
            self.single_quoted(s, indent, !key);
        } else {
            self.double_quoted(s, indent, !key);
        }
    }

    fn plain(&mut self, s: &str, indent: usize, allow_breaks: bool) {
        let chars: Vec<char> = s.chars().collect();
        let mut spaces = false;
        for (i, &c) in chars.iter().enumerate() {
            if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && chars.get(i + 1) != Some(&' ')
                {
                    self.newline_indent(indent);
                } else {
                    self.write(" ");
                }
                spaces = true;
            } else {
                self.write(&c.to_string());
                spaces = false;
            }
        }
    }

    fn single_quoted(&mut self, s: &str, indent: usize, allow_breaks: bool) {
        self.write("'");
        let chars: Vec<char> = s.chars().collect();
        let mut spaces = false;
        for (i, &c) in chars.iter().enumerate() {
            if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i != 0
                    && i != chars.len() - 1
                    && chars.get(i + 1) != Some(&' ')
                {
                    self.newline_indent(indent);
                } else {
                    self.write(" ");
                }
                spaces = true;
            } else {
                if c == '\'' {
                    self.write("'");
                }
                self.write(&c.to_string());
                spaces = false;
            }
        }
        self.write("'");
    }

    fn double_quoted(&mut self, s: &str, indent: usize, allow_breaks: bool) {
        self.write("\"");
        let chars: Vec<char> = s.chars().collect();
        let mut spaces = false;
        for (i, &c) in chars.iter().enumerate() {
            let escaped = match c {
                '\0' => Some("\\0".to_string()),
                '\x07' => Some("\\a".into()),
                '\x08' => Some("\\b".into()),
                '\t' => Some("\\t".into()),
                '\n' => Some("\\n".into()),
                '\x0b' => Some("\\v".into()),
                '\x0c' => Some("\\f".into()),
                '\r' => Some("\\r".into()),
                '\x1b' => Some("\\e".into()),
                '"' => Some("\\\"".into()),
                '\\' => Some("\\\\".into()),
                '\u{85}' => Some("\\N".into()),
                '\u{a0}' => Some("\\_".into()),
                '\u{2028}' => Some("\\L".into()),
                '\u{2029}' => Some("\\P".into()),
                c if !is_printable(c) => Some(if (c as u32) <= 0xFF {
                    format!("\\x{:02X}", c as u32)
                } else if (c as u32) <= 0xFFFF {
                    format!("\\u{:04X}", c as u32)
                } else {
                    format!("\\U{:08X}", c as u32)
                }),
                _ => None,
            };
            if let Some(e) = escaped {
                self.write(&e);
                spaces = false;
            } else if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i != 0
                    && i != chars.len() - 1
                {
                    self.newline_indent(indent);
                    if chars.get(i + 1) == Some(&' ') {
                        self.write("\\");
                    }
                } else {
                    self.write(" ");
                }
                spaces = true;
            } else {
                self.write(&c.to_string());
                spaces = false;
            }
        }
        self.write("\"");
    }

    fn literal(&mut self, s: &str, indent: usize) {
        let chomp = if !s.ends_with('\n') {
            "-"
        } else if s.ends_with("\n\n") {
            "+"
        } else {
            ""
        };
        let hint = if s.starts_with(' ') || s.starts_with('\n') {
            "2"
        } else {
            ""
        };
        self.write(&format!("|{hint}{chomp}"));
        let body = s.strip_suffix('\n').unwrap_or(s);
        for line in body.split('\n') {
            self.write("\n");
            if !line.is_empty() {
                self.write(&" ".repeat(indent));
                self.write(line);
            }
        }
    }
}

/// go-yaml's `is_printable`.
fn is_printable(c: char) -> bool {
    matches!(c as u32, 0x0A | 0x20..=0x7E | 0x85 | 0xA0..=0xD7FF | 0xE000..=0xFFFD | 0x10000..=0x10FFFF)
        && c != '\u{FEFF}'
}

/// What `yaml_emitter_analyze_scalar` allows for a string.
struct Analysis {
    plain_allowed: bool,
    single_allowed: bool,
    block_allowed: bool,
}

fn analyze(s: &str) -> Analysis {
    if s.is_empty() {
        return Analysis {
            plain_allowed: false,
            single_allowed: true,
            block_allowed: false,
        };
    }
    let chars: Vec<char> = s.chars().collect();
    let mut block_indicators = s.starts_with("---") || s.starts_with("...");
    let mut special = false;
    let mut line_breaks = false;
    let mut leading_space = false;
    let mut leading_break = false;
    let mut trailing_space = false;
    let mut trailing_break = false;
    let mut break_space = false;
    let mut space_break = false;
    let mut previous_space = false;
    let mut previous_break = false;
    let mut preceded_by_whitespace = true;
    for (i, &c) in chars.iter().enumerate() {
        let followed_by_whitespace = chars
            .get(i + 1)
            .is_none_or(|n| matches!(n, ' ' | '\t' | '\n' | '\r'));
        if i == 0 {
            match c {
                '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\'' | '"'
                | '%' | '@' | '`' => block_indicators = true,
                '?' | ':' if followed_by_whitespace => block_indicators = true,
                '-' if followed_by_whitespace => block_indicators = true,
                _ => {}
            }
        } else {
            match c {
                ':' if followed_by_whitespace => block_indicators = true,
                '#' if preceded_by_whitespace => block_indicators = true,
                _ => {}
            }
        }
        if !is_printable(c) {
            special = true;
        }
        if c == '\n' {
            line_breaks = true;
        }
        if c == ' ' {
            if i == 0 {
                leading_space = true;
            }
            if i == chars.len() - 1 {
                trailing_space = true;
            }
            if previous_break {
                break_space = true;
            }
            previous_space = true;
            previous_break = false;
        } else if c == '\n' {
            if i == 0 {
                leading_break = true;
            }
            if i == chars.len() - 1 {
                trailing_break = true;
            }
            if previous_space {
                space_break = true;
            }
            previous_space = false;
            previous_break = true;
        } else {
            previous_space = false;
            previous_break = false;
        }
        preceded_by_whitespace = matches!(c, ' ' | '\t' | '\n' | '\r');
    }
    let mut plain = true;
    let mut single = true;
    let mut block = true;
    if leading_space || leading_break || trailing_space || trailing_break {
        plain = false;
    }
    if trailing_space {
        block = false;
    }
    if break_space {
        plain = false;
        single = false;
    }
    if space_break || special {
        plain = false;
        single = false;
        block = false;
    }
    if line_breaks {
        plain = false;
    }
    if block_indicators {
        plain = false;
    }
    Analysis {
        plain_allowed: plain,
        single_allowed: single,
        block_allowed: block,
    }
}

/// Does go-yaml read `s`, written plain, back as the same string (not a null, bool, number or
/// timestamp)?
fn resolves_to_string(s: &str) -> bool {
    const SPECIAL: &[&str] = &[
        "", "~", "null", "Null", "NULL", "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
        "true", "True", "TRUE", "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF",
        ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan",
        ".NaN", ".NAN", "<<",
    ];
    if SPECIAL.contains(&s) {
        return false;
    }
    let first = s.chars().next().unwrap_or(' ');
    if !(first.is_ascii_digit() || matches!(first, '+' | '-' | '.')) {
        return true;
    }
    let plain: String = s.chars().filter(|c| *c != '_').collect();
    let unsigned = plain.trim_start_matches(['+', '-']);
    let is_int = !unsigned.is_empty()
        && (unsigned.chars().all(|c| c.is_ascii_digit())
            || unsigned
                .strip_prefix("0x")
                .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
            || unsigned
                .strip_prefix("0b")
                .is_some_and(|b| !b.is_empty() && b.chars().all(|c| c == '0' || c == '1')));
    if is_int
        || plain
            .parse::<f64>()
            .is_ok_and(|_| !plain.contains(['i', 'I', 'n', 'N']))
    {
        return false;
    }
    // Base 60 (`1:20`) and timestamps.
    let base60 = unsigned.contains(':')
        && unsigned
            .split(':')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit() || c == '.'));
    if base60 || looks_like_timestamp(s) {
        return false;
    }
    true
}

/// go-yaml's timestamps: `2001-12-14`, `2001-12-14T21:59:43.10-05:00`, `2001-12-14 21:59:43`
/// (one- or two-digit month, day, hour, minute and second).
fn looks_like_timestamp(s: &str) -> bool {
    fn num(s: &str, max: usize) -> Option<&str> {
        let n = s.chars().take_while(char::is_ascii_digit).count();
        ((1..=max).contains(&n)).then(|| &s[n..])
    }
    let Some(rest) = s
        .get(..4)
        .filter(|y| y.chars().all(|c| c.is_ascii_digit()))
        .map(|_| &s[4..])
    else {
        return false;
    };
    let Some(rest) = rest.strip_prefix('-').and_then(|r| num(r, 2)) else {
        return false;
    };
    let Some(rest) = rest.strip_prefix('-').and_then(|r| num(r, 2)) else {
        return false;
    };
    if rest.is_empty() {
        return true;
    }
    let (sep, rest) = rest.split_at(1);
    let time = |r: &str| -> Option<String> {
        let r = num(r, 2)?;
        let r = num(r.strip_prefix(':')?, 2)?;
        let r = num(r.strip_prefix(':')?, 2)?;
        let r = match r.strip_prefix('.') {
            Some(f) => &f[f.chars().take_while(char::is_ascii_digit).count()..],
            None => r,
        };
        Some(r.to_string())
    };
    match (sep, time(rest)) {
        (" ", Some(zone)) => zone.is_empty(),
        ("T" | "t", Some(zone)) => {
            zone == "Z"
                || zone.len() == 6
                    && zone.starts_with(['+', '-'])
                    && zone[1..3].chars().all(|c| c.is_ascii_digit())
                    && &zone[3..4] == ":"
                    && zone[4..].chars().all(|c| c.is_ascii_digit())
        }
        _ => false,
    }
}

/// `strconv.FormatFloat(f, 'g', -1, 64)`, as go-yaml writes a float.
fn go_float(f: f64) -> String {
    if f.is_infinite() {
        return if f > 0.0 {
            ".inf".into()
        } else {
            "-.inf".into()
        };
    }
    if f.is_nan() {
        return ".nan".into();
    }
    let exp = if f == 0.0 {
        0
    } else {
        f.abs().log10().floor() as i32
    };
    if (-4..6).contains(&exp) {
        format!("{f}")
    } else {
        let s = format!("{f:e}");
        // Rust: 1e21, 1.5e-7; Go: 1e+21, 1.5e-07.
        match s.split_once('e') {
            Some((m, e)) => {
                let (sign, digits) = match e.strip_prefix('-') {
                    Some(d) => ('-', d),
                    None => ('+', e),
                };
                format!("{m}e{sign}{digits:0>2}")
            }
            None => s,
        }
    }
}

/// go-yaml's mapping key order: numbers before strings, runs of digits compared as numbers,
/// letters after other characters.
fn key_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    if key_less(a, b) {
        Ordering::Less
    } else if key_less(b, a) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

fn key_less(a: &str, b: &str) -> bool {
    let ar: Vec<char> = a.chars().collect();
    let br: Vec<char> = b.chars().collect();
    let mut i = 0;
    while i < ar.len() && i < br.len() {
        if ar[i] == br[i] {
            i += 1;
            continue;
        }
        let al = ar[i].is_alphabetic();
        let bl = br[i].is_alphabetic();
        if al && bl {
            return ar[i] < br[i];
        }
        if al || bl {
            return bl;
        }
        let (mut an, mut bn): (i64, i64) = (0, 0);
        if ar[i] == '0' || br[i] == '0' {
            let mut j = i;
            while j > 0 && ar[j - 1].is_ascii_digit() {
                j -= 1;
                if ar[j] != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let mut ai = i;
        while ai < ar.len() && ar[ai].is_ascii_digit() {
            an = an
                .saturating_mul(10)
                .saturating_add(i64::from(ar[ai] as u8 - b'0'));
            ai += 1;
        }
        let mut bi = i;
        while bi < br.len() && br[bi].is_ascii_digit() {
            bn = bn
                .saturating_mul(10)
                .saturating_add(i64::from(br[bi] as u8 - b'0'));
            bi += 1;
        }
        if an != bn {
            return an < bn;
        }
        if ai != bi {
            return ai < bi;
        }
        return ar[i] < br[i];
    }
    ar.len() < br.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn writes_like_the_api_server() {
        let v = json!({
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "metadata": {"name": "y", "annotations": {
                "colon": "a: b", "dot": ".5", "empty": "", "float": "1e3", "hash": "a #b",
                "lead": "- x", "multi": "line1\nline2\n", "multi2": "l1\nl2", "num": "0123",
                "quote": "it's", "sp": " lead", "star": "*x", "tab": "a\tb", "tilde": "~",
                "uni": "héllo", "yes": "yes",
                "long": (0..40).map(|i| format!("word{i}")).collect::<Vec<_>>().join(" ")},
                "creationTimestamp": "2026-12-01T07:33:53Z",
                "managedFields": [{"manager": "curl", "fieldsV1": {"f:data": {".": {}, "f:k": {}}}}],
                "resourceVersion": "6837"},
            "data": {"k": "v"}
        });
        assert_eq!(
            encode(&v),
            r#"apiVersion: v1
data:
  k: v
kind: ConfigMap
metadata:
  annotations:
    colon: 'a: b'
    dot: ".5"
    empty: ""
    float: "1e3"
    hash: 'a #b'
    lead: '- x'
    long: word0 word1 word2 word3 word4 word5 word6 word7 word8 word9 word10 word11
      word12 word13 word14 word15 word16 word17 word18 word19 word20 word21 word22
      word23 word24 word25 word26 word27 word28 word29 word30 word31 word32 word33
      word34 word35 word36 word37 word38 word39
    multi: |
      line1
      line2
    multi2: |-
      l1
      l2
    num: "0123"
    quote: it's
    sp: ' lead'
    star: '*x'
    tab: "a\tb"
    tilde: "~"
    uni: héllo
    "yes": "yes"
  creationTimestamp: "2026-12-01T07:33:53Z"
  managedFields:
  - fieldsV1:
      f:data:
        .: {}
        f:k: {}
    manager: curl
  name: "y"
  resourceVersion: "6837"
"#
        );
    }

    #[test]
    fn numbers_and_empty_collections() {
        assert_eq!(
            encode(&json!({"a": 1, "b": 1.5, "c": [], "d": {}, "e": null, "f": [1, "x"]})),
            "a: 1\nb: 1.5\nc: []\nd: {}\ne: null\nf:\n- 1\n- x\n"
        );
    }
}
