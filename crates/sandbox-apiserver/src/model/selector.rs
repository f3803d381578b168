//! Label and field selectors: the grammar and error texts of k8s.io/apimachinery/pkg/labels and
//! pkg/fields.

use serde_json::{Map, Value};

use super::names::{is_qualified_name, is_valid_label_value};
use super::status::go_quote;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Error,
    Eos,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    In,
    NotIn,
    Equals,
    NotEquals,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub op: Op,
    pub values: Vec<String>,
}

/// A parsed label selector (requirements ANDed).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    pub requirements: Vec<Requirement>,
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

fn is_ws(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn lex(input: &str) -> Vec<(Tok, String)> {
    let chars: Vec<char> = input.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    loop {
        while i < chars.len() && is_ws(chars[i]) {
            i += 1;
        }
        if i >= chars.len() || chars[i] == '\0' {
            out.push((Tok::Eos, String::new()));
            return out;
        }
        if is_special(chars[i]) {
            let mut buf = String::new();
            let mut last: Option<(Tok, String)> = None;
            while i < chars.len() && is_special(chars[i]) {
                buf.push(chars[i]);
                let t = match buf.as_str() {
                    ")" => Some(Tok::ClosedPar),
                    "," => Some(Tok::Comma),
                    "!" => Some(Tok::DoesNotExist),
                    "==" => Some(Tok::DoubleEquals),
                    "=" => Some(Tok::Equals),
                    ">" => Some(Tok::GreaterThan),
                    "<" => Some(Tok::LessThan),
                    "!=" => Some(Tok::NotEquals),
                    "(" => Some(Tok::OpenPar),
                    _ => None,
                };
                match t {
                    Some(t) => {
                        last = Some((t, buf.clone()));
                        i += 1;
                    }
                    None => {
                        if last.is_some() {
                            break;
                        }
                        i += 1;
                    }
                }
            }
            match last {
                Some(l) => out.push(l),
                None => out.push((Tok::Error, format!("error expected: keyword found '{buf}'"))),
            }
            continue;
        }
        let start = i;
        while i < chars.len() && !is_ws(chars[i]) && !is_special(chars[i]) && chars[i] != '\0' {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        let t = match word.as_str() {
            "in" => Tok::In,
            "notin" => Tok::NotIn,
            _ => Tok::Identifier,
        };
        out.push((t, word));
    }
}

struct Parser {
    items: Vec<(Tok, String)>,
    pos: usize,
}

#[derive(PartialEq)]
enum Ctx {
    KeyAndOperator,
    Values,
}

impl Parser {
    fn lookahead(&self, ctx: Ctx) -> (Tok, String) {
        let (mut t, l) = self
            .items
            .get(self.pos)
            .cloned()
            .unwrap_or((Tok::Eos, String::new()));
        if ctx == Ctx::Values && (t == Tok::In || t == Tok::NotIn) {
            t = Tok::Identifier;
        }
        (t, l)
    }
    fn consume(&mut self, ctx: Ctx) -> (Tok, String) {
        let r = self.lookahead(ctx);
        if self.pos < self.items.len() {
            self.pos += 1;
        }
        r
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut reqs = Vec::new();
        loop {
            let (t, lit) = self.lookahead(Ctx::Values);
            match t {
                Tok::Identifier | Tok::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    reqs.push(r);
                    let (t, l) = self.consume(Ctx::Values);
                    match t {
                        Tok::Eos => return Ok(reqs),
                        Tok::Comma => {
                            let (t2, l2) = self.lookahead(Ctx::Values);
                            if t2 != Tok::Identifier && t2 != Tok::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Tok::Eos => return Ok(reqs),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, op) = self.parse_key_and_infer_operator()?;
        if let Some(op) = op {
            return new_requirement(key, op, Vec::new());
        }
        let op = self.parse_operator()?;
        let values = match op {
            Op::In | Op::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        new_requirement(key, op, values)
    }

    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Op>), String> {
        let mut op = None;
        let (mut t, mut lit) = self.consume(Ctx::Values);
        if t == Tok::DoesNotExist {
            op = Some(Op::DoesNotExist);
            (t, lit) = self.consume(Ctx::Values);
        }
        if t != Tok::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let errs = is_qualified_name(&lit);
        if !errs.is_empty() {
            return Err(format!(
                "<nil>: Invalid value: {}: {}",
                go_quote(&lit),
                errs.join("; ")
            ));
        }
        let (next, _) = self.lookahead(Ctx::Values);
        if (next == Tok::Eos || next == Tok::Comma) && op.is_none() {
            op = Some(Op::Exists);
        }
        Ok((lit, op))
    }

    fn parse_operator(&mut self) -> Result<Op, String> {
        let (t, lit) = self.consume(Ctx::KeyAndOperator);
        Ok(match t {
            Tok::In => Op::In,
            Tok::Equals | Tok::DoubleEquals => Op::Equals,
            Tok::GreaterThan => Op::GreaterThan,
            Tok::LessThan => Op::LessThan,
            Tok::NotIn => Op::NotIn,
            Tok::NotEquals => Op::NotEquals,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        })
    }

    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (t, lit) = self.consume(Ctx::Values);
        if t != Tok::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (t, lit) = self.lookahead(Ctx::Values);
        match t {
            Tok::Identifier | Tok::Comma => {
                let s = self.parse_identifiers_list()?;
                let (t2, _) = self.consume(Ctx::Values);
                if t2 != Tok::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(s)
            }
            Tok::ClosedPar => {
                self.consume(Ctx::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, String> {
        let mut s: Vec<String> = Vec::new();
        let insert = |s: &mut Vec<String>, v: String| {
            if !s.contains(&v) {
                s.push(v);
            }
        };
        loop {
            let (t, lit) = self.consume(Ctx::Values);
            match t {
                Tok::Identifier => {
                    insert(&mut s, lit);
                    let (t2, l2) = self.lookahead(Ctx::Values);
                    match t2 {
                        Tok::Comma => continue,
                        Tok::ClosedPar => return Ok(sorted(s)),
                        _ => return Err(format!("found '{l2}', expected: ',' or ')'")),
                    }
                }
                Tok::Comma => {
                    if s.is_empty() {
                        insert(&mut s, String::new());
                    }
                    let (t2, _) = self.lookahead(Ctx::Values);
                    if t2 == Tok::ClosedPar {
                        insert(&mut s, String::new());
                        return Ok(sorted(s));
                    }
                    if t2 == Tok::Comma {
                        self.consume(Ctx::Values);
                        insert(&mut s, String::new());
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (t, _) = self.lookahead(Ctx::Values);
        if t == Tok::Eos || t == Tok::Comma {
            return Ok(vec![String::new()]);
        }
        let (t, lit) = self.consume(Ctx::Values);
        if t == Tok::Identifier {
            return Ok(vec![lit]);
        }
        Err(format!("found '{lit}', expected: identifier"))
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn go_string_slice(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| go_quote(s)).collect();
    format!("[]string{{{}}}", items.join(", "))
}

/// `labels.NewRequirement` validation.
fn new_requirement(key: String, op: Op, values: Vec<String>) -> Result<Requirement, String> {
    let mut errs: Vec<String> = Vec::new();
    for m in is_qualified_name(&key) {
        errs.push(format!("key: Invalid value: {}: {m}", go_quote(&key)));
    }
    match op {
        Op::In | Op::NotIn => {
            if values.is_empty() {
                errs.push(format!(
                    "values: Invalid value: {}: for 'in', 'notin' operators, values set can't be empty",
                    go_string_slice(&values)
                ));
            }
        }
        Op::Equals | Op::NotEquals => {
            if values.len() != 1 {
                errs.push(format!(
                    "values: Invalid value: {}: exact-match compatibility requires one single value",
                    go_string_slice(&values)
                ));
            }
        }
        Op::Exists | Op::DoesNotExist => {
            if !values.is_empty() {
                errs.push(format!(
                    "values: Invalid value: {}: values set must be empty for exists and does not exist",
                    go_string_slice(&values)
                ));
            }
        }
        Op::GreaterThan | Op::LessThan => {
            if values.len() != 1 {
                errs.push(format!(
                    "values: Invalid value: {}: for 'Gt', 'Lt' operators, exactly one value is required",
                    go_string_slice(&values)
                ));
            }
            for (i, v) in values.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    errs.push(format!(
                        "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                        go_quote(v)
                    ));
                }
            }
        }
    }
    for (i, v) in values.iter().enumerate() {
        let msgs = is_valid_label_value(v);
        if !msgs.is_empty() {
            errs.push(format!(
                "values[{i}][{key}]: Invalid value: {}: {}",
                go_quote(v),
                msgs.join("; ")
            ));
        }
    }
    match errs.len() {
        0 => Ok(Requirement { key, op, values }),
        1 => Err(errs.remove(0)),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

impl LabelSelector {
    /// `labels.Parse`.
    pub fn parse(input: &str) -> Result<LabelSelector, String> {
        let mut p = Parser {
            items: lex(input),
            pos: 0,
        };
        let mut requirements = p.parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.requirements.iter().all(|r| {
            let v = get(&r.key);
            match r.op {
                Op::In | Op::Equals => v.is_some_and(|v| r.values.iter().any(|x| x == v)),
                Op::NotIn | Op::NotEquals => v.is_none_or(|v| !r.values.iter().any(|x| x == v)),
                Op::Exists => v.is_some(),
                Op::DoesNotExist => v.is_none(),
                Op::GreaterThan | Op::LessThan => {
                    let (Some(v), Some(want)) = (
                        v.and_then(|v| v.parse::<i64>().ok()),
                        r.values.first().and_then(|w| w.parse::<i64>().ok()),
                    ) else {
                        return false;
                    };
                    if r.op == Op::GreaterThan {
                        v > want
                    } else {
                        v < want
                    }
                }
            }
        })
    }
}

/// One `field=value` / `field!=value` term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldTerm {
    pub field: String,
    pub value: String,
    pub negate: bool,
}

/// A parsed field selector.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    pub terms: Vec<FieldTerm>,
}

fn unescape_field_value(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                Some(e) => {
                    return Err(format!(
                        "invalid field selector: invalid escape sequence: \\{e}"
                    ));
                }
                None => return Err("invalid field selector: unterminated escape sequence".into()),
            },
            ',' | '=' => return Err(format!("invalid field selector: unescaped {c} in value")),
            c => out.push(c),
        }
    }
    Ok(out)
}

impl FieldSelector {
    /// `fields.ParseSelector`.
    pub fn parse(input: &str) -> Result<FieldSelector, String> {
        let mut terms = Vec::new();
        if input.is_empty() {
            return Ok(FieldSelector { terms });
        }
        // Split on unescaped commas.
        let mut parts: Vec<String> = Vec::new();
        let mut cur = String::new();
        let mut escaped = false;
        for c in input.chars() {
            if escaped {
                cur.push(c);
                escaped = false;
            } else if c == '\\' {
                cur.push(c);
                escaped = true;
            } else if c == ',' {
                parts.push(std::mem::take(&mut cur));
            } else {
                cur.push(c);
            }
        }
        parts.push(cur);
        // fields.ParseSelector sorts the terms before parsing them: the first term it cannot
        // understand is the first in sorted order.
        parts.sort();
        for part in parts {
            if part.is_empty() {
                continue;
            }
            // splitTerm: the leftmost position where `!=`, `==` or `=` starts.
            let split = part.char_indices().find_map(|(i, _)| {
                let rest = &part[i..];
                if rest.starts_with("!=") {
                    Some((i, 2, true))
                } else if rest.starts_with("==") {
                    Some((i, 2, false))
                } else if rest.starts_with('=') {
                    Some((i, 1, false))
                } else {
                    None
                }
            });
            let Some((i, len, negate)) = split else {
                return Err(format!(
                    "invalid selector: '{input}'; can't understand '{part}'"
                ));
            };
            let (field, value) = (&part[..i], &part[i + len..]);
            terms.push(FieldTerm {
                field: field.to_string(),
                value: unescape_field_value(value)?,
                negate,
            });
        }
        Ok(FieldSelector { terms })
    }

    pub fn matches(&self, fields: &dyn Fn(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|t| {
            let v = fields(&t.field).unwrap_or_default();
            (v == t.value) != t.negate
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn parses_the_full_grammar() {
        let l = labels(json!({"app":"web","identifier":"3f9c2a7be41d0c58","tier":"front"}));
        for (sel, want) in [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("app=web,identifier", true),
            ("app=web,!identifier", false),
            ("identifier in (3f9c2a7be41d0c58,b7e14c0a9d2f6e31)", true),
            ("identifier notin (3f9c2a7be41d0c58)", false),
            ("tier in (front), app", true),
            ("", true),
            ("  app = web  ", true),
            ("missing!=x", true),
        ] {
            let s = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(s.matches(Some(&l)), want, "{sel}");
        }
    }

    #[test]
    fn errors_read_like_apimachinery() {
        assert_eq!(
            LabelSelector::parse("identifier=web:abc").unwrap_err(),
            "unable to parse requirement: values[0][identifier]: Invalid value: \"web:abc\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        );
        assert_eq!(
            LabelSelector::parse("app=web,").unwrap_err(),
            "found '', expected: identifier after ','"
        );
        assert_eq!(
            LabelSelector::parse("app in web").unwrap_err(),
            "unable to parse requirement: found 'web' expected: '('"
        );
        assert_eq!(
            LabelSelector::parse("app web").unwrap_err(),
            "unable to parse requirement: found 'web', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(
            LabelSelector::parse("=x").unwrap_err(),
            "found '=', expected: !, identifier, or 'end of string'"
        );
    }

    #[test]
    fn field_selectors() {
        let f = FieldSelector::parse("metadata.name=web-public").unwrap();
        assert!(f.matches(&|k| (k == "metadata.name").then(|| "web-public".to_string())));
        let f = FieldSelector::parse("metadata.name!=web").unwrap();
        assert!(!f.matches(&|_| Some("web".to_string())));
        assert!(FieldSelector::parse("nonsense").is_err());
    }
}
