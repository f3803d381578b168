//! A focused view as YAML, quickly, for the views the plugin shows all the time.
//!
//! [`saphyr`] writes a view with serde-saphyr and its YAML 1.1 quoting
//! rules. A large plan shows thousands of views, and serde-saphyr spent most of the time of
//! rendering one: every scalar goes through a generic serializer and a dozen quoting checks.
//! The views are almost always the same shapes — maps of maps and compact sequences of maps,
//! plain names, paths, integers, one multi-line snippet — so [`write()`] writes those shapes
//! itself and answers `None` for anything else (a float, a null, a string a reader could
//! misread or that needs quotes, a sequence in a sequence, non-ASCII text, …), where the caller
//! falls back to serde-saphyr for the whole view. Every answer it does give is serde-saphyr's
//! text byte for byte: a property test compares both over random views built to hit every
//! branch, and the rules below are a strict subset of serde-saphyr's (`ser/quoting.rs`).

use serde_json::{Map, Value};

/// The YAML serde-saphyr writes for `view` with the diff's options (two-space indentation,
/// compact sequences, literal blocks for multi-line strings, no folding, YAML 1.1 quoting),
/// or `None` when the view has something this writer leaves to serde-saphyr.
pub fn write(view: &Value) -> Option<String> {
    let Value::Object(map) = view else {
        return None;
    };
    if map.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(1024);
    write_map(&mut out, map, 0, false)?;
    Some(out)
}

/// The entries of a non-empty map whose keys sit at column `col`. With `first_inline`, the
/// first key goes on the current line (after a sequence item's `- `), the others are indented.
fn write_map(
    out: &mut String,
    map: &Map<String, Value>,
    col: usize,
    first_inline: bool,
) -> Option<()> {
    let mut first = first_inline;
    for (key, value) in map {
        if !std::mem::take(&mut first) {
            indent(out, col);
        }
        if !plain_key(key) {
            return None;
        }
        out.push_str(key);
        out.push(':');
        write_entry_value(out, value, col)?;
    }
    Some(())
}

/// What follows `key:` of an entry at column `col`.
fn write_entry_value(out: &mut String, value: &Value, col: usize) -> Option<()> {
    match value {
        Value::Object(map) if map.is_empty() => out.push_str(" {}\n"),
        Value::Array(items) if items.is_empty() => out.push_str(" []\n"),
        Value::Object(map) => {
            out.push('\n');
            write_map(out, map, col + 2, false)?;
        }
        Value::Array(items) => {
            out.push('\n');
            write_seq(out, items, col)?;
        }
        Value::String(s) if s.contains('\n') => {
            out.push(' ');
            write_block(out, s, col + 2)?;
        }
        Value::String(s) => {
            out.push(' ');
            write_str(out, s)?;
            out.push('\n');
        }
        scalar => {
            out.push(' ');
            write_scalar(out, scalar)?;
            out.push('\n');
        }
    }
    Some(())
}

/// The items of a non-empty sequence, compact: each `- ` at column `col`.
fn write_seq(out: &mut String, items: &[Value], col: usize) -> Option<()> {
    for item in items {
        indent(out, col);
        out.push_str("- ");
        match item {
            Value::Object(map) if !map.is_empty() => write_map(out, map, col + 2, true)?,
            Value::Object(_) | Value::Array(_) => return None,
            Value::String(s) if s.contains('\n') => return None,
            Value::String(s) => {
                write_str(out, s)?;
                out.push('\n');
            }
            scalar => {
                write_scalar(out, scalar)?;
                out.push('\n');
            }
        }
    }
    Some(())
}

/// A single-line scalar other than a string, in value position.
fn write_scalar(out: &mut String, value: &Value) -> Option<()> {
    match value {
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) if n.is_i64() || n.is_u64() => out.push_str(&n.to_string()),
        _ => return None,
    }
    Some(())
}

/// A single-line string in value position.
fn write_str(out: &mut String, s: &str) -> Option<()> {
    if plain_value(s) {
        out.push_str(s);
    } else if reserved_word(s) || (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())) {
        // What YAML 1.1 reads as a boolean, null or number, quoted (nothing to escape in it).
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        return None;
    }
    Some(())
}

/// A multi-line string as a literal block (`|` keeping one final line break, `|-` for none)
/// whose lines are indented to column `body`; `None` for what needs an indentation or keep
/// indicator or a character that is not printable ASCII.
fn write_block(out: &mut String, s: &str, body: usize) -> Option<()> {
    let content = s.strip_suffix('\n').unwrap_or(s);
    if content.ends_with('\n')
        || content.is_empty()
        || content.starts_with([' ', '\n'])
        || !s.bytes().all(|b| b == b'\n' || (b' '..=b'~').contains(&b))
    {
        return None;
    }
    out.push_str(if content.len() == s.len() {
        "|-\n"
    } else {
        "|\n"
    });
    for line in content.split('\n') {
        if !line.is_empty() {
            indent(out, body);
            out.push_str(line);
        }
        out.push('\n');
    }
    Some(())
}

fn indent(out: &mut String, col: usize) {
    const SPACES: &str = "                                                                ";
    let mut col = col;
    while col > 0 {
        let n = col.min(SPACES.len());
        out.push_str(&SPACES[..n]);
        col -= n;
    }
}

/// A string serde-saphyr writes plain as a value: printable ASCII that starts with a letter
/// or `/` (so never a number, a timestamp, an indicator or a document marker) or is one of
/// [`digits_and_words`], ends with no
/// space, holds no `: ` or ` #`, does not end in `:`, and is not a word YAML 1.1 reads as a
/// boolean, null or special float.
fn plain_value(s: &str) -> bool {
    let bytes = s.as_bytes();
    match bytes.first() {
        Some(b'a'..=b'z' | b'A'..=b'Z' | b'/') => {}
        Some(b'0'..=b'9') => return digits_and_words(bytes),
        _ => return false,
    }
    // Printable ASCII with no `:` or `#` (one pass without an early exit, which the compiler
    // vectorises), or else no `: ` and no ` #` (a space after a colon, before a hash).
    let (printable, marks) = bytes.iter().fold((true, false), |(p, m), &b| {
        (
            p & (b' '..=b'~').contains(&b),
            m | (b == b':') | (b == b'#'),
        )
    });
    printable
        && !(marks && (s.contains(": ") || s.contains(" #")))
        && !s.ends_with([' ', ':'])
        && !reserved_word(s)
}

/// A string that starts with a digit and that no YAML 1.1 reader takes for a number or a
/// date (an identifier such as `4f515e078b8f8861`): lower-case letters, digits and `-` only,
/// with a letter other than `e` (so not an exponent), and no `0x`, `0o` or `0b` prefix.
fn digits_and_words(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.iter().any(|b| b.is_ascii_lowercase() && *b != b'e')
        && !matches!(bytes, [b'0', b'x' | b'o' | b'b', ..])
}

/// A key serde-saphyr writes plain: as [`plain_value`], and none of `:` `,` `[` `]` `{` `}`
/// (it writes keys so that they read the same in a flow mapping).
fn plain_key(s: &str) -> bool {
    plain_value(s) && !s.contains([':', ',', '[', ']', '{', '}'])
}

fn reserved_word(s: &str) -> bool {
    s.len() <= 5
        && [
            "y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf",
        ]
        .iter()
        .any(|w| s.eq_ignore_ascii_case(w))
}

/// A view as YAML by serde-saphyr with the diff's options: what the diff writes for a view
/// [`write()`] declines (`diff_render::yaml_of`), and the reference the tests hold [`write()`] to.
pub fn saphyr(view: &Value) -> String {
    let options = serde_saphyr::ser_options! {
        indent_step: 2,
        compact_list_indent: true,
        prefer_block_scalars: true,
        // Folding (`>`) would break a long single-line value at spaces: a diff of it would
        // then show lines that do not exist in the object.
        folded_wrap_chars: usize::MAX,
        yaml_12: false,
    };
    match serde_saphyr::to_string_with_options(view, options) {
        Ok(yaml) => yaml,
        // JSON is YAML too: a view the serializer refuses still renders, and escapes controls.
        Err(_) => serde_json::to_string_pretty(view).unwrap_or_default() + "\n",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn an_ingress_view_is_written_here_as_serde_saphyr_writes_it() {
        let view = json!({
            "metadata": {
                "name": "web-team-0001",
                "labels": {"app": "web", "app.kubernetes.io/managed-by": "kubectl-appupdate"},
                "annotations": {
                    "nginx.ingress.kubernetes.io/configuration-snippet":
                        "if ($http_x_scopes !~ \"team\") {\n  return 403;\n}\n",
                    "other": "a,b c=d",
                },
            },
            "spec": {
                "ingressClassName": "nginx",
                "rules": [{"http": {"paths": [
                    {"path": "/t/e0", "pathType": "Prefix",
                     "backend": {"service": {"name": "web", "port": {"number": 80}}}},
                    {"path": "/t/e1", "pathType": "Exact", "backend": {}},
                ]}}],
                "tls": [],
                "flags": [true, false, 3, "on", "80", "True"],
                "note": "one\ntwo",
            },
        });
        let text = write(&view).expect("the usual shapes are written here");
        assert_eq!(text, saphyr(&view));
    }

    #[test]
    fn a_deep_view_is_indented_past_one_run_of_spaces() {
        let mut view = json!({"leaf": "x\ny\n", "list": [{"a": 1, "b": "c"}]});
        for k in 0..45 {
            view = json!({ format!("k{k}"): view });
        }
        assert_eq!(write(&view).as_deref(), Some(saphyr(&view).as_str()));
    }

    #[test]
    fn what_needs_quotes_or_indicators_is_left_to_serde_saphyr() {
        for odd in [
            json!({"a": "a: b"}),
            json!({"a": "-x"}),
            json!({"a": ""}),
            json!({"a": "ünï"}),
            json!({"a": 1.5}),
            json!({"a": null}),
            json!({"a": "  indented\nblock"}),
            json!({"a": "kept\n\n"}),
            json!({"a:b": 1}),
            json!({"a": [[1]]}),
            json!({"a": ["x\ny"]}),
            json!([1]),
            json!({}),
        ] {
            assert_eq!(write(&odd), None, "{odd}");
        }
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z/][a-z0-9./_-]{0,8}",
            "[ -~]{0,6}",
            "[a-zA-Z0-9:# ,.-]{0,6}",
            "[0-9][0-9a-z_.:-]{0,6}",
            prop::sample::select(vec![
                "on",
                "Yes",
                "NULL",
                "0x1f",
                "0o17",
                "0b1",
                "1e5",
                "12-3",
                "4f51",
                "1-e",
                "nan",
                "y",
                "~",
                "0x1f",
                "1_0",
                "2024-01-01",
                "<<",
                "=",
                "---",
                "-",
                "a #b",
                "a#b",
                "x:",
                "é",
                "a\tb",
            ])
            .prop_map(str::to_owned),
            "[a-z ]{0,5}(\n[a-z ]{0,5}){1,3}\n{0,3}",
        ]
    }

    /// Random views built to hit every branch of the writer.
    fn view() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            text().prop_map(Value::String),
            any::<i64>().prop_map(Value::from),
            any::<bool>().prop_map(Value::Bool),
            Just(Value::Null),
            Just(json!(0.5)),
        ];
        leaf.prop_recursive(4, 40, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((text(), inner), 0..4)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Whatever this writer writes is serde-saphyr's text byte for byte.
        #[test]
        fn written_here_means_written_as_serde_saphyr_writes_it(v in view()) {
            if let Some(text) = write(&v) {
                prop_assert_eq!(text, saphyr(&v));
            }
        }

        /// ... and it writes the usual shapes with plain names and blocks, at any depth.
        #[test]
        fn the_usual_shapes_are_written_here(
            names in prop::collection::vec(
                "[a-z][a-z0-9./-]{0,10}".prop_filter("a reserved word", |n| !reserved_word(n)),
                1..6,
            ),
            depth in 0usize..4,
        ) {
            let mut v = Value::Object(
                names.iter().map(|n| (n.clone(), json!(n))).collect(),
            );
            v["snippet"] = json!("line one\n  line two\n");
            v["port"] = json!(42);
            for name in &names[..depth.min(names.len())] {
                v = json!({ name: [v.clone(), v] });
            }
            let text = write(&v);
            prop_assert!(text.is_some(), "{}", v);
            prop_assert_eq!(text.unwrap(), saphyr(&v));
        }
    }
}
