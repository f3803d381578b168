//! JSON the way Go's encoding/json writes and rejects it: HTML-safe escaping (`<` → `\u003c`),
//! a trailing newline after each document, and the scanner's syntax error texts
//! (`unexpected end of JSON input`, `invalid character 'x' looking for beginning of value`).

use std::io;

use serde::Serialize;
use serde_json::Value;
use serde_json::ser::{CompactFormatter, Formatter, PrettyFormatter};

struct GoEscape<F>(F);

impl<F: Formatter> Formatter for GoEscape<F> {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            let esc = match c {
                '<' => "\\u003c",
                '>' => "\\u003e",
                '&' => "\\u0026",
                '\u{2028}' => "\\u2028",
                '\u{2029}' => "\\u2029",
                _ => continue,
            };
            writer.write_all(&fragment.as_bytes()[start..i])?;
            writer.write_all(esc.as_bytes())?;
            start = i + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// Encode like `json.NewEncoder(w).Encode(v)` (compact, newline-terminated) or, when `pretty`,
/// like the API server's indented output.
pub fn encode(v: &Value, pretty: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    let res = if pretty {
        let mut ser = serde_json::Serializer::with_formatter(
            &mut out,
            GoEscape(PrettyFormatter::with_indent(b"  ")),
        );
        v.serialize(&mut ser)
    } else {
        let mut ser = serde_json::Serializer::with_formatter(&mut out, GoEscape(CompactFormatter));
        v.serialize(&mut ser)
    };
    if res.is_err() {
        out.clear();
        out.extend_from_slice(b"{}");
    }
    out.push(b'\n');
    out
}

/// Parse a request body, reporting syntax errors with Go's scanner messages.
pub fn parse(body: &[u8]) -> Result<Value, String> {
    if let Some(msg) = syntax_error(body) {
        return Err(msg);
    }
    serde_json::from_slice(body).map_err(|e| e.to_string())
}

/// Parse like [`parse`], and also list the fields that occur twice in one object, as
/// sigs.k8s.io/json's strict decoding names them (`metadata.name`, `spec.ports[0].port`); the
/// last occurrence wins, as in Go.
pub fn parse_with_duplicates(body: &[u8]) -> Result<(Value, Vec<String>), String> {
    if let Some(msg) = syntax_error(body) {
        return Err(msg);
    }
    let dups = std::cell::RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_slice(body);
    let v = serde::de::DeserializeSeed::deserialize(
        Tracked {
            path: String::new(),
            dups: &dups,
        },
        &mut de,
    )
    .map_err(|e| e.to_string())?;
    Ok((v, dups.into_inner()))
}

struct Tracked<'a> {
    path: String,
    dups: &'a std::cell::RefCell<Vec<String>>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Tracked<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Tracked<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Tracked {
            path: format!("{}[{}]", self.path, out.len()),
            dups: self.dups,
        })? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if out.contains_key(&key) {
                self.dups.borrow_mut().push(path.clone());
            }
            let v = map.next_value_seed(Tracked {
                path,
                dups: self.dups,
            })?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// One value as encoding/json writes it, compact and without a newline.
pub fn compact(v: &Value) -> String {
    let mut b = encode(v, false);
    b.pop();
    String::from_utf8(b).unwrap_or_default()
}

/// A document as evanphx/json-patch re-encodes it: objects it had to open (`touched`) are Go
/// maps, written with sorted keys; everything else keeps the bytes it came with.
enum Node {
    Raw(Value),
    Doc(Vec<(String, Node)>),
    Ary(Vec<Node>),
}

impl Node {
    fn write(&self, out: &mut String) {
        match self {
            Node::Raw(v) => out.push_str(&compact(v)),
            Node::Doc(entries) => {
                let mut sorted: Vec<&(String, Node)> = entries.iter().collect();
                sorted.sort_by(|a, b| a.0.cmp(&b.0));
                out.push('{');
                for (i, (k, v)) in sorted.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&compact(&Value::String(k.clone())));
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
            Node::Ary(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write(out);
                }
                out.push(']');
            }
        }
    }

    fn into_doc(self) -> Result<Vec<(String, Node)>, Node> {
        match self {
            Node::Doc(d) => Ok(d),
            Node::Raw(Value::Object(m)) => {
                Ok(m.into_iter().map(|(k, v)| (k, Node::Raw(v))).collect())
            }
            other => Err(other),
        }
    }

    /// `pruneNulls`: objects (recursively) become maps without null members.
    fn pruned(v: &Value) -> Node {
        match v {
            Value::Object(m) => Node::Doc(
                m.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), Node::pruned(v)))
                    .collect(),
            ),
            Value::Array(a) => Node::Ary(
                a.iter()
                    .map(|v| {
                        if v.is_null() {
                            Node::Raw(Value::Null)
                        } else {
                            Node::pruned(v)
                        }
                    })
                    .collect(),
            ),
            other => Node::Raw(other.clone()),
        }
    }
}

fn merge_docs(doc: &mut Vec<(String, Node)>, patch: &serde_json::Map<String, Value>) {
    for (k, v) in patch {
        let pos = doc.iter().position(|(dk, _)| dk == k);
        if v.is_null() {
            if let Some(i) = pos {
                doc.remove(i);
            }
            continue;
        }
        match pos {
            Some(i) if !matches!(doc[i].1, Node::Raw(Value::Null)) => {
                let cur = std::mem::replace(&mut doc[i].1, Node::Raw(Value::Null));
                doc[i].1 = match cur.into_doc() {
                    Err(_) => Node::pruned(v),
                    Ok(mut cur_doc) => match v {
                        Value::Object(pm) => {
                            merge_docs(&mut cur_doc, pm);
                            Node::Doc(cur_doc)
                        }
                        other => Node::Raw(other.clone()),
                    },
                };
            }
            Some(i) => doc[i].1 = Node::pruned(v),
            None => doc.push((k.clone(), Node::pruned(v))),
        }
    }
}

/// The text of `jsonpatch.MergePatch(doc, patch)` for an object `doc` and an object `patch`.
pub fn merge_patch_text(doc: &Value, patch: &serde_json::Map<String, Value>) -> String {
    let mut d = Node::Raw(doc.clone()).into_doc().unwrap_or_default();
    merge_docs(&mut d, patch);
    let mut out = String::new();
    Node::Doc(d).write(&mut out);
    out
}

/// The text of a JSON patch's result `doc` as evanphx/json-patch writes it: the containers its
/// operations walked through (every proper prefix of a `path` or `from`, and the document
/// itself) are Go maps with sorted keys.
pub fn json_patch_text(doc: &Value, ops: &[Value]) -> String {
    let mut touched: Vec<Vec<String>> = vec![vec![]];
    for op in ops {
        for f in ["path", "from"] {
            if let Some(p) = op.get(f).and_then(Value::as_str) {
                let parts: Vec<String> = p
                    .split('/')
                    .skip(1)
                    .map(|s| s.replace("~1", "/").replace("~0", "~"))
                    .collect();
                for n in 1..parts.len() {
                    touched.push(parts[..n].to_vec());
                }
            }
        }
    }
    fn build(v: &Value, at: &mut Vec<String>, touched: &[Vec<String>]) -> Node {
        let open = touched.iter().any(|t| t == at);
        match v {
            Value::Object(m) if open => Node::Doc(
                m.iter()
                    .map(|(k, c)| {
                        at.push(k.clone());
                        let n = build(c, at, touched);
                        at.pop();
                        (k.clone(), n)
                    })
                    .collect(),
            ),
            Value::Array(a) if open => Node::Ary(
                a.iter()
                    .enumerate()
                    .map(|(i, c)| {
                        at.push(i.to_string());
                        let n = build(c, at, touched);
                        at.pop();
                        n
                    })
                    .collect(),
            ),
            other => Node::Raw(other.clone()),
        }
    }
    let mut out = String::new();
    build(doc, &mut vec![], &touched).write(&mut out);
    out
}

fn quote_char(c: u8) -> String {
    match c {
        b'\'' => "'\\''".into(),
        b'"' => "'\"'".into(),
        _ => {
            // strconv.Quote(string(rune(c))): control characters escaped, Latin-1 as is.
            let ch = char::from(c);
            let q = match ch {
                '\n' => "\\n".to_string(),
                '\r' => "\\r".to_string(),
                '\t' => "\\t".to_string(),
                c if (c as u32) < 0x20 || c == '\u{7f}' => format!("\\x{:02x}", c as u32),
                c if (0x80..=0xa0).contains(&(c as u32)) || c == '\u{ad}' => {
                    format!("\\u{:04x}", c as u32)
                }
                c => c.to_string(),
            };
            format!("'{q}'")
        }
    }
}

/// Go's `checkValid`: the first syntax error in `data`, if any.
pub fn syntax_error(data: &[u8]) -> Option<String> {
    let mut p = Scanner {
        data,
        i: 0,
        depth: 0,
    };
    p.run().err()
}

struct Scanner<'a> {
    data: &'a [u8],
    i: usize,
    depth: usize,
}

/// Nesting beyond this is refused (Go allows 10000; serde_json stops at 128 anyway), which keeps
/// the recursive scanner's stack use bounded.
const MAX_DEPTH: usize = 512;

const EOF: &str = "unexpected end of JSON input";

impl Scanner<'_> {
    fn skip_ws(&mut self) {
        while self.i < self.data.len() && matches!(self.data[self.i], b' ' | b'\t' | b'\r' | b'\n')
        {
            self.i += 1;
        }
    }
    fn peek(&self) -> Option<u8> {
        self.data.get(self.i).copied()
    }
    fn err(c: u8, ctx: &str) -> String {
        format!("invalid character {} {ctx}", quote_char(c))
    }

    fn run(&mut self) -> Result<(), String> {
        self.value()?;
        self.skip_ws();
        match self.peek() {
            None => Ok(()),
            Some(c) => Err(Self::err(c, "after top-level value")),
        }
    }

    fn value(&mut self) -> Result<(), String> {
        self.depth += 1;
        let r = self.value_inner();
        self.depth -= 1;
        r
    }

    fn value_inner(&mut self) -> Result<(), String> {
        if self.depth > MAX_DEPTH {
            return Err("exceeded max depth".into());
        }
        self.skip_ws();
        let Some(c) = self.peek() else {
            return Err(EOF.into());
        };
        match c {
            b'{' => {
                self.i += 1;
                self.skip_ws();
                match self.peek() {
                    None => return Err(EOF.into()),
                    Some(b'}') => {
                        self.i += 1;
                        return Ok(());
                    }
                    Some(b'"') => {}
                    Some(c) => {
                        return Err(Self::err(c, "looking for beginning of object key string"));
                    }
                }
                loop {
                    self.string()?;
                    self.skip_ws();
                    match self.peek() {
                        None => return Err(EOF.into()),
                        Some(b':') => self.i += 1,
                        Some(c) => return Err(Self::err(c, "after object key")),
                    }
                    self.value()?;
                    self.skip_ws();
                    match self.peek() {
                        None => return Err(EOF.into()),
                        Some(b',') => {
                            self.i += 1;
                            self.skip_ws();
                            match self.peek() {
                                None => return Err(EOF.into()),
                                Some(b'"') => {}
                                Some(c) => {
                                    return Err(Self::err(
                                        c,
                                        "looking for beginning of object key string",
                                    ));
                                }
                            }
                        }
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(());
                        }
                        Some(c) => return Err(Self::err(c, "after object key:value pair")),
                    }
                }
            }
            b'[' => {
                self.i += 1;
                self.skip_ws();
                match self.peek() {
                    None => return Err(EOF.into()),
                    Some(b']') => {
                        self.i += 1;
                        return Ok(());
                    }
                    _ => {}
                }
                loop {
                    self.value()?;
                    self.skip_ws();
                    match self.peek() {
                        None => return Err(EOF.into()),
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(());
                        }
                        Some(c) => return Err(Self::err(c, "after array element")),
                    }
                }
            }
            b'"' => self.string(),
            b'-' | b'0'..=b'9' => self.number(),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            c => Err(Self::err(c, "looking for beginning of value")),
        }
    }

    fn literal(&mut self, lit: &[u8]) -> Result<(), String> {
        let name = String::from_utf8_lossy(lit).to_string();
        self.i += 1;
        for &want in &lit[1..] {
            match self.peek() {
                None => return Err(EOF.into()),
                Some(c) if c == want => self.i += 1,
                Some(c) => {
                    return Err(Self::err(
                        c,
                        &format!("in literal {name} (expecting {})", quote_char(want)),
                    ));
                }
            }
        }
        Ok(())
    }

    fn string(&mut self) -> Result<(), String> {
        self.i += 1; // opening quote
        loop {
            let Some(c) = self.peek() else {
                return Err(EOF.into());
            };
            self.i += 1;
            match c {
                b'"' => return Ok(()),
                b'\\' => {
                    let Some(e) = self.peek() else {
                        return Err(EOF.into());
                    };
                    self.i += 1;
                    match e {
                        b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => {}
                        b'u' => {
                            for _ in 0..4 {
                                let Some(h) = self.peek() else {
                                    return Err(EOF.into());
                                };
                                if !h.is_ascii_hexdigit() {
                                    return Err(Self::err(
                                        h,
                                        "in \\u hexadecimal character escape",
                                    ));
                                }
                                self.i += 1;
                            }
                        }
                        other => return Err(Self::err(other, "in string escape code")),
                    }
                }
                c if c < 0x20 => return Err(Self::err(c, "in string literal")),
                _ => {}
            }
        }
    }

    fn number(&mut self) -> Result<(), String> {
        if self.peek() == Some(b'-') {
            self.i += 1;
            match self.peek() {
                None => return Err(EOF.into()),
                Some(b'0'..=b'9') => {}
                Some(c) => return Err(Self::err(c, "in numeric literal")),
            }
        }
        if self.peek() == Some(b'0') {
            self.i += 1;
        } else {
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.i += 1;
            }
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            match self.peek() {
                None => return Err(EOF.into()),
                Some(b'0'..=b'9') => {}
                Some(c) => return Err(Self::err(c, "after decimal point in numeric literal")),
            }
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.i += 1;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            match self.peek() {
                None => return Err(EOF.into()),
                Some(b'0'..=b'9') => {}
                Some(c) => return Err(Self::err(c, "in exponent of numeric literal")),
            }
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.i += 1;
            }
        }
        // A number directly followed by garbage is reported by the enclosing context.
        Ok(())
    }
}

/// encoding/json's `[]byte`: standard base64 decoded as Go's `base64.StdEncoding.Decode` does
/// (newlines skipped, padding required), then re-encoded. `Err` carries the offset Go's
/// `illegal base64 data at input byte N` names.
pub fn go_base64_canonical(s: &str) -> Result<String, usize> {
    use base64::Engine;
    fn sextet(c: u8) -> Option<u8> {
        match c {
            b'A'..=b'Z' => Some(c - b'A'),
            b'a'..=b'z' => Some(c - b'a' + 26),
            b'0'..=b'9' => Some(c - b'0' + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    }
    let src = s.as_bytes();
    let skip_newlines = |mut si: usize| {
        while si < src.len() && (src[si] == b'\n' || src[si] == b'\r') {
            si += 1;
        }
        si
    };
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut si = 0;
    while si < src.len() {
        // decodeQuantum
        let mut buf = [0u8; 4];
        let mut dlen = 4;
        let mut j = 0;
        let mut trailing: Option<usize> = None;
        while j < 4 {
            if si == src.len() {
                if j == 0 {
                    return Ok(base64::engine::general_purpose::STANDARD.encode(&out));
                }
                return Err(si - j);
            }
            let c = src[si];
            si += 1;
            if let Some(v) = sextet(c) {
                buf[j] = v;
                j += 1;
                continue;
            }
            if c == b'\n' || c == b'\r' {
                continue;
            }
            if c != b'=' {
                return Err(si - 1);
            }
            match j {
                0 | 1 => return Err(si - 1),
                2 => {
                    si = skip_newlines(si);
                    if si == src.len() {
                        return Err(src.len());
                    }
                    if src[si] != b'=' {
                        return Err(si - 1);
                    }
                    si += 1;
                }
                _ => {}
            }
            si = skip_newlines(si);
            if si < src.len() {
                trailing = Some(si);
            }
            dlen = j;
            break;
        }
        let val = u32::from(buf[0]) << 18
            | u32::from(buf[1]) << 12
            | u32::from(buf[2]) << 6
            | u32::from(buf[3]);
        let bytes = [(val >> 16) as u8, (val >> 8) as u8, val as u8];
        out.extend_from_slice(&bytes[..dlen - 1]);
        if let Some(at) = trailing {
            return Err(at);
        }
        if dlen < 4 {
            break;
        }
    }
    Ok(base64::engine::general_purpose::STANDARD.encode(&out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn encodes_html_safe_with_newline() {
        assert_eq!(
            encode(&json!({"a":"<b>&"}), false),
            b"{\"a\":\"\\u003cb\\u003e\\u0026\"}\n".to_vec()
        );
    }

    #[test]
    fn syntax_errors_read_like_go() {
        assert_eq!(
            syntax_error(br#"{"apiVersion":"apps/v1","#).as_deref(),
            Some("unexpected end of JSON input")
        );
        assert_eq!(
            syntax_error(b"").as_deref(),
            Some("unexpected end of JSON input")
        );
        assert_eq!(
            syntax_error(b"x").as_deref(),
            Some("invalid character 'x' looking for beginning of value")
        );
        assert_eq!(
            syntax_error(br#"{"a" 1}"#).as_deref(),
            Some("invalid character '1' after object key")
        );
        assert_eq!(
            syntax_error(br#"{"a":1 "b":2}"#).as_deref(),
            Some("invalid character '\"' after object key:value pair")
        );
        assert_eq!(
            syntax_error(b"{} x").as_deref(),
            Some("invalid character 'x' after top-level value")
        );
        assert_eq!(
            syntax_error(b"tru ").as_deref(),
            Some("invalid character ' ' in literal true (expecting 'e')")
        );
        assert_eq!(syntax_error(br#"{"a":[1,2]}"#), None);
    }

    #[test]
    fn base64_is_decoded_like_go() {
        assert_eq!(go_base64_canonical("AA=="), Ok("AA==".into()));
        assert_eq!(go_base64_canonical("AAA="), Ok("AAA=".into()));
        assert_eq!(go_base64_canonical("AA\nAA"), Ok("AAAA".into()));
        assert_eq!(go_base64_canonical("AB=="), Ok("AA==".into()));
        assert_eq!(go_base64_canonical(""), Ok("".into()));
        for (input, at) in [
            ("not base64!", 3),
            ("AAE", 0),
            ("AA=", 3),
            ("A", 0),
            ("AAAA====", 4),
            ("AA==AA==", 4),
            ("A=AA", 1),
        ] {
            assert_eq!(go_base64_canonical(input), Err(at), "{input}");
        }
    }
}
