//! The part of CEL (the Common Expression Language) that CustomResourceDefinitions'
//! `x-kubernetes-validations` rules use, evaluated over JSON as the API server does: literals,
//! `self` and `oldSelf`, field selection with Kubernetes' escaping of reserved words
//! (`__namespace__`), indexing, `has()`, the `all`/`exists`/`exists_one`/`filter`/`map`
//! macros, `size`, `in`, the string functions `startsWith`, `endsWith`, `contains`, `matches`,
//! `split`, `substring`, `lowerAscii` and `upperAscii`, `duration()`, Kubernetes' `isIP()` and
//! `format.dns1123Label().validate()` (the Gateway API v1.6.1's rules), arithmetic, comparisons,
//! `!`, `&&`, `||` (with CEL's commutative treatment of errors) and `? :`.
//!
//! A rule the parser does not understand fails when the CRDs are loaded (a unit test parses
//! every rule of the bundled CRDs), never at request time.

use std::fmt;

use serde_json::Value;

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Lit(Val),
    Ident(String),
    Select(Box<Expr>, String),
    Has(Box<Expr>, String),
    Index(Box<Expr>, Box<Expr>),
    List(Vec<Expr>),
    Call(Option<Box<Expr>>, String, Vec<Expr>),
    Macro(Box<Expr>, MacroKind, String, Box<Expr>),
    Unary(char, Box<Expr>),
    Binary(Box<Expr>, BinOp, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacroKind {
    All,
    Exists,
    ExistsOne,
    Filter,
    Map,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

/// A CEL value.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    Str(String),
    List(Vec<Val>),
    /// Keys and values, in the object's order.
    Map(Vec<(Val, Val)>),
    /// Nanoseconds.
    Duration(i128),
    /// A named format of Kubernetes' CEL format library (`format.dns1123Label()`), whose
    /// `validate(string)` answers `null` or the list of what is wrong.
    Format(String),
}

impl Val {
    /// A JSON value as CEL sees it.
    pub fn from_json(v: &Value) -> Val {
        match v {
            Value::Null => Val::Null,
            Value::Bool(b) => Val::Bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Val::Int(i),
                (None, Some(u)) => Val::Uint(u),
                _ => Val::Double(n.as_f64().unwrap_or(0.0)),
            },
            Value::String(s) => Val::Str(s.clone()),
            Value::Array(a) => Val::List(a.iter().map(Val::from_json).collect()),
            Value::Object(m) => Val::Map(
                m.iter()
                    .map(|(k, v)| (Val::Str(k.clone()), Val::from_json(v)))
                    .collect(),
            ),
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Val::Null => "null_type",
            Val::Bool(_) => "bool",
            Val::Int(_) => "int",
            Val::Uint(_) => "uint",
            Val::Double(_) => "double",
            Val::Str(_) => "string",
            Val::List(_) => "list",
            Val::Map(_) => "map",
            Val::Duration(_) => "google.protobuf.Duration",
            Val::Format(_) => "kubernetes.NamedFormat",
        }
    }
}

/// An evaluation error, with cel-go's text.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalError(pub String);

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T, EvalError> {
    Err(EvalError(msg.into()))
}

fn no_overload<T>(op: &str, args: &[&Val]) -> Result<T, EvalError> {
    let types: Vec<&str> = args.iter().map(|a| a.type_name()).collect();
    err(format!("no such overload: {op}({})", types.join(", ")))
}

// ---------------------------------------------------------------------------------------------
// Lexer

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Int(i64),
    Uint(u64),
    Double(f64),
    Str(String),
    Punct(&'static str),
}

const PUNCTS: &[&str] = &[
    "==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "?", ":", ".", ",", "(", ")", "[", "]", "{",
    "}", "+", "-", "*", "/", "%",
];

fn lex(src: &str) -> Result<Vec<Tok>, String> {
    let s: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < s.len() {
        let c = s[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        // String literals, raw (r"…") or not, single or triple quoted.
        let raw =
            (c == 'r' || c == 'R') && i + 1 < s.len() && (s[i + 1] == '"' || s[i + 1] == '\'');
        if c == '"' || c == '\'' || raw {
            if raw {
                i += 1;
            }
            let q = s[i];
            let triple = i + 2 < s.len() && s[i + 1] == q && s[i + 2] == q;
            i += if triple { 3 } else { 1 };
            let mut text = String::new();
            loop {
                if i >= s.len() {
                    return Err(format!("unterminated string in {src}"));
                }
                if triple {
                    if i + 2 < s.len() && s[i] == q && s[i + 1] == q && s[i + 2] == q {
                        i += 3;
                        break;
                    }
                } else if s[i] == q {
                    i += 1;
                    break;
                }
                if s[i] == '\\' && !raw {
                    i += 1;
                    let e = *s.get(i).ok_or("dangling escape")?;
                    i += 1;
                    match e {
                        'n' => text.push('\n'),
                        't' => text.push('\t'),
                        'r' => text.push('\r'),
                        'a' => text.push('\u{7}'),
                        'b' => text.push('\u{8}'),
                        'f' => text.push('\u{c}'),
                        'v' => text.push('\u{b}'),
                        'x' | 'u' | 'U' => {
                            let n = match e {
                                'x' => 2,
                                'u' => 4,
                                _ => 8,
                            };
                            let hex: String =
                                s.get(i..i + n).ok_or("short escape")?.iter().collect();
                            i += n;
                            let code = u32::from_str_radix(&hex, 16).map_err(|e| e.to_string())?;
                            text.push(char::from_u32(code).ok_or("bad escape")?);
                        }
                        other => text.push(other),
                    }
                    continue;
                }
                text.push(s[i]);
                i += 1;
            }
            out.push(Tok::Str(text));
            continue;
        }
        if c.is_ascii_digit() {
            let start = i;
            while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == '.') {
                // A '.' followed by a non-digit is a member access (`1.size()` is not used).
                if s[i] == '.' && !s.get(i + 1).is_some_and(char::is_ascii_digit) {
                    break;
                }
                i += 1;
            }
            let text: String = s[start..i].iter().collect();
            if let Some(u) = text.strip_suffix(['u', 'U']) {
                out.push(Tok::Uint(
                    u.parse().map_err(|_| format!("bad number {text}"))?,
                ));
            } else if text.contains('.') || text.contains('e') {
                out.push(Tok::Double(
                    text.parse().map_err(|_| format!("bad number {text}"))?,
                ));
            } else if let Some(h) = text.strip_prefix("0x") {
                out.push(Tok::Int(
                    i64::from_str_radix(h, 16).map_err(|e| e.to_string())?,
                ));
            } else {
                out.push(Tok::Int(
                    text.parse().map_err(|_| format!("bad number {text}"))?,
                ));
            }
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < s.len() && (s[i].is_alphanumeric() || s[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].iter().collect()));
            continue;
        }
        let rest: String = s[i..s.len().min(i + 2)].iter().collect();
        match PUNCTS.iter().find(|p| rest.starts_with(**p)) {
            Some(p) => {
                out.push(Tok::Punct(p));
                i += p.chars().count();
            }
            None => return Err(format!("unexpected character {c:?} in {src}")),
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Parser

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

/// Parse a CEL expression.
pub fn parse(src: &str) -> Result<Expr, String> {
    let mut p = Parser {
        toks: lex(src)?,
        pos: 0,
    };
    let e = p.expr()?;
    if p.pos != p.toks.len() {
        return Err(format!("unexpected {:?} in {src}", p.toks[p.pos]));
    }
    Ok(e)
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn eat(&mut self, p: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Punct(q)) if *q == p) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, p: &str) -> Result<(), String> {
        if self.eat(p) {
            Ok(())
        } else {
            Err(format!("expected {p}, found {:?}", self.peek()))
        }
    }

    fn expr(&mut self) -> Result<Expr, String> {
        let c = self.or()?;
        if self.eat("?") {
            let a = self.or()?;
            self.expect(":")?;
            let b = self.expr()?;
            return Ok(Expr::Cond(Box::new(c), Box::new(a), Box::new(b)));
        }
        Ok(c)
    }

    fn or(&mut self) -> Result<Expr, String> {
        let mut e = self.and()?;
        while self.eat("||") {
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut e = self.relation()?;
        while self.eat("&&") {
            e = Expr::And(Box::new(e), Box::new(self.relation()?));
        }
        Ok(e)
    }

    fn relation(&mut self) -> Result<Expr, String> {
        let mut e = self.addition()?;
        loop {
            let op = match self.peek() {
                Some(Tok::Punct("==")) => BinOp::Eq,
                Some(Tok::Punct("!=")) => BinOp::Ne,
                Some(Tok::Punct("<")) => BinOp::Lt,
                Some(Tok::Punct("<=")) => BinOp::Le,
                Some(Tok::Punct(">")) => BinOp::Gt,
                Some(Tok::Punct(">=")) => BinOp::Ge,
                Some(Tok::Ident(w)) if w == "in" => BinOp::In,
                _ => return Ok(e),
            };
            self.pos += 1;
            e = Expr::Binary(Box::new(e), op, Box::new(self.addition()?));
        }
    }

    fn addition(&mut self) -> Result<Expr, String> {
        let mut e = self.multiplication()?;
        loop {
            let op = if self.eat("+") {
                BinOp::Add
            } else if self.eat("-") {
                BinOp::Sub
            } else {
                return Ok(e);
            };
            e = Expr::Binary(Box::new(e), op, Box::new(self.multiplication()?));
        }
    }

    fn multiplication(&mut self) -> Result<Expr, String> {
        let mut e = self.unary()?;
        loop {
            let op = if self.eat("*") {
                BinOp::Mul
            } else if self.eat("/") {
                BinOp::Div
            } else if self.eat("%") {
                BinOp::Rem
            } else {
                return Ok(e);
            };
            e = Expr::Binary(Box::new(e), op, Box::new(self.unary()?));
        }
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat("!") {
            return Ok(Expr::Unary('!', Box::new(self.unary()?)));
        }
        if self.eat("-") {
            return Ok(Expr::Unary('-', Box::new(self.unary()?)));
        }
        self.member()
    }

    fn args(&mut self) -> Result<Vec<Expr>, String> {
        let mut args = Vec::new();
        if self.eat(")") {
            return Ok(args);
        }
        loop {
            args.push(self.expr()?);
            if self.eat(")") {
                return Ok(args);
            }
            self.expect(",")?;
        }
    }

    fn member(&mut self) -> Result<Expr, String> {
        let mut e = self.primary()?;
        loop {
            if self.eat(".") {
                let Some(Tok::Ident(name)) = self.peek().cloned() else {
                    return Err("expected a field name after '.'".into());
                };
                self.pos += 1;
                if self.eat("(") {
                    let args = self.args()?;
                    e = method(e, &name, args)?;
                } else {
                    e = Expr::Select(Box::new(e), name);
                }
            } else if self.eat("[") {
                let i = self.expr()?;
                self.expect("]")?;
                e = Expr::Index(Box::new(e), Box::new(i));
            } else {
                return Ok(e);
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, String> {
        let Some(t) = self.peek().cloned() else {
            return Err("unexpected end of expression".into());
        };
        self.pos += 1;
        match t {
            Tok::Int(i) => Ok(Expr::Lit(Val::Int(i))),
            Tok::Uint(u) => Ok(Expr::Lit(Val::Uint(u))),
            Tok::Double(d) => Ok(Expr::Lit(Val::Double(d))),
            Tok::Str(s) => Ok(Expr::Lit(Val::Str(s))),
            Tok::Punct("(") => {
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Punct("[") => {
                let mut items = Vec::new();
                if !self.eat("]") {
                    loop {
                        items.push(self.expr()?);
                        if self.eat("]") {
                            break;
                        }
                        self.expect(",")?;
                        if self.eat("]") {
                            break;
                        }
                    }
                }
                Ok(Expr::List(items))
            }
            Tok::Ident(name) => match name.as_str() {
                "true" => Ok(Expr::Lit(Val::Bool(true))),
                "false" => Ok(Expr::Lit(Val::Bool(false))),
                "null" => Ok(Expr::Lit(Val::Null)),
                _ if self.eat("(") => {
                    let args = self.args()?;
                    if name == "has" {
                        return match args.as_slice() {
                            [Expr::Select(target, field)] => {
                                Ok(Expr::Has(target.clone(), field.clone()))
                            }
                            _ => Err("has() takes one field selection".into()),
                        };
                    }
                    Ok(Expr::Call(None, name, args))
                }
                _ => Ok(Expr::Ident(name)),
            },
            other => Err(format!("unexpected {other:?}")),
        }
    }
}

/// `target.name(args)`: a macro or a method call.
fn method(target: Expr, name: &str, mut args: Vec<Expr>) -> Result<Expr, String> {
    let kind = match name {
        "all" => Some(MacroKind::All),
        "exists" => Some(MacroKind::Exists),
        "exists_one" | "existsOne" => Some(MacroKind::ExistsOne),
        "filter" => Some(MacroKind::Filter),
        "map" => Some(MacroKind::Map),
        _ => None,
    };
    match kind {
        Some(k) if args.len() == 2 => {
            let body = args.pop().ok_or("macro body")?;
            let Some(Expr::Ident(var)) = args.pop() else {
                return Err(format!("{name}() needs a variable name"));
            };
            Ok(Expr::Macro(Box::new(target), k, var, Box::new(body)))
        }
        _ => Ok(Expr::Call(Some(Box::new(target)), name.to_string(), args)),
    }
}

// ---------------------------------------------------------------------------------------------
// Evaluation

/// Variables in scope.
pub struct Env<'a> {
    vars: Vec<(String, Val)>,
    regex: &'a dyn Fn(&str) -> Option<regex::Regex>,
}

impl<'a> Env<'a> {
    /// `self` (and `oldSelf` on update), with a regex compiler (cached by the caller).
    pub fn new(
        self_val: Val,
        old_self: Option<Val>,
        regex: &'a dyn Fn(&str) -> Option<regex::Regex>,
    ) -> Self {
        let mut vars = vec![("self".to_string(), self_val)];
        if let Some(o) = old_self {
            vars.push(("oldSelf".to_string(), o));
        }
        Env { vars, regex }
    }

    fn lookup(&self, name: &str) -> Option<&Val> {
        self.vars
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }
}

/// CEL's reserved words, which Kubernetes exposes as `__word__`.
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The property a field name in an expression stands for (Kubernetes' escaping).
fn unescape(name: &str) -> String {
    if let Some(inner) = name.strip_prefix("__").and_then(|n| n.strip_suffix("__"))
        && RESERVED.contains(&inner)
    {
        return inner.to_string();
    }
    name.replace("__underscores__", "__")
        .replace("__dot__", ".")
        .replace("__dash__", "-")
        .replace("__slash__", "/")
}

fn field<'v>(m: &'v [(Val, Val)], key: &str) -> Option<&'v Val> {
    m.iter()
        .find(|(k, _)| matches!(k, Val::Str(s) if s == key))
        .map(|(_, v)| v)
}

fn truth(v: &Val) -> Result<bool, EvalError> {
    match v {
        Val::Bool(b) => Ok(*b),
        other => no_overload("_&&_", &[other]),
    }
}

fn equal(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::Int(x), Val::Uint(y)) | (Val::Uint(y), Val::Int(x)) => {
            u64::try_from(*x).is_ok_and(|x| x == *y)
        }
        (Val::Int(x), Val::Double(y)) | (Val::Double(y), Val::Int(x)) => (*x as f64) == *y,
        (Val::Uint(x), Val::Double(y)) | (Val::Double(y), Val::Uint(x)) => (*x as f64) == *y,
        (Val::List(x), Val::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| equal(p, q))
        }
        (Val::Map(x), Val::Map(y)) => {
            x.len() == y.len()
                && x.iter().all(|(k, v)| {
                    y.iter()
                        .find(|(k2, _)| equal(k, k2))
                        .is_some_and(|(_, v2)| equal(v, v2))
                })
        }
        _ => a == b,
    }
}

fn compare(a: &Val, b: &Val) -> Result<std::cmp::Ordering, EvalError> {
    let num = |v: &Val| match v {
        Val::Int(i) => Some(*i as f64),
        Val::Uint(u) => Some(*u as f64),
        Val::Double(d) => Some(*d),
        _ => None,
    };
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => Ok(x.cmp(y)),
        (Val::Str(x), Val::Str(y)) => Ok(x.cmp(y)),
        (Val::Bool(x), Val::Bool(y)) => Ok(x.cmp(y)),
        (Val::Duration(x), Val::Duration(y)) => Ok(x.cmp(y)),
        _ => match (num(a), num(b)) {
            (Some(x), Some(y)) => x.partial_cmp(&y).ok_or_else(|| EvalError("NaN".into())),
            _ => no_overload("_<_", &[a, b]),
        },
    }
}

/// Go's `time.ParseDuration`.
pub fn parse_duration(s: &str) -> Option<i128> {
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += n * scale;
    }
    let ns = total as i128;
    Some(if neg { -ns } else { ns })
}

/// Evaluate `e`.
pub fn eval(e: &Expr, env: &mut Env<'_>) -> Result<Val, EvalError> {
    match e {
        Expr::Lit(v) => Ok(v.clone()),
        Expr::Ident(name) => env
            .lookup(name)
            .cloned()
            .ok_or_else(|| EvalError(format!("no such attribute: {name}"))),
        Expr::Select(target, name) => {
            let t = eval(target, env)?;
            let key = unescape(name);
            match &t {
                Val::Map(m) => field(m, &key)
                    .cloned()
                    .ok_or_else(|| EvalError(format!("no such key: {key}"))),
                other => no_overload(&format!(".{key}"), &[other]),
            }
        }
        Expr::Has(target, name) => {
            let t = eval(target, env)?;
            match &t {
                Val::Map(m) => Ok(Val::Bool(field(m, &unescape(name)).is_some())),
                other => no_overload("has", &[other]),
            }
        }
        Expr::Index(target, index) => {
            let t = eval(target, env)?;
            let i = eval(index, env)?;
            match (&t, &i) {
                (Val::List(l), Val::Int(n)) => usize::try_from(*n)
                    .ok()
                    .and_then(|n| l.get(n))
                    .cloned()
                    .ok_or_else(|| {
                        EvalError(format!(
                            "index '{n}' out of range in list size '{}'",
                            l.len()
                        ))
                    }),
                (Val::Map(m), key) => m
                    .iter()
                    .find(|(k, _)| equal(k, key))
                    .map(|(_, v)| v.clone())
                    .ok_or_else(|| EvalError("no such key".into())),
                _ => no_overload("_[_]", &[&t, &i]),
            }
        }
        Expr::List(items) => Ok(Val::List(
            items
                .iter()
                .map(|x| eval(x, env))
                .collect::<Result<_, _>>()?,
        )),
        Expr::Unary('!', x) => Ok(Val::Bool(!truth(&eval(x, env)?)?)),
        Expr::Unary(_, x) => match eval(x, env)? {
            Val::Int(i) => i
                .checked_neg()
                .map(Val::Int)
                .ok_or_else(|| EvalError("int overflow".into())),
            Val::Double(d) => Ok(Val::Double(-d)),
            other => no_overload("-_", &[&other]),
        },
        Expr::And(a, b) => {
            let l = eval(a, env).and_then(|v| truth(&v));
            if l == Ok(false) {
                return Ok(Val::Bool(false));
            }
            let r = eval(b, env).and_then(|v| truth(&v));
            match (l, r) {
                (_, Ok(false)) => Ok(Val::Bool(false)),
                (Ok(true), Ok(true)) => Ok(Val::Bool(true)),
                (Err(e), _) | (_, Err(e)) => Err(e),
                _ => Ok(Val::Bool(false)),
            }
        }
        Expr::Or(a, b) => {
            let l = eval(a, env).and_then(|v| truth(&v));
            if l == Ok(true) {
                return Ok(Val::Bool(true));
            }
            let r = eval(b, env).and_then(|v| truth(&v));
            match (l, r) {
                (_, Ok(true)) => Ok(Val::Bool(true)),
                (Ok(false), Ok(false)) => Ok(Val::Bool(false)),
                (Err(e), _) | (_, Err(e)) => Err(e),
                _ => Ok(Val::Bool(true)),
            }
        }
        Expr::Cond(c, a, b) => {
            if truth(&eval(c, env)?)? {
                eval(a, env)
            } else {
                eval(b, env)
            }
        }
        Expr::Binary(a, op, b) => {
            let l = eval(a, env)?;
            let r = eval(b, env)?;
            binary(&l, *op, &r)
        }
        Expr::Macro(target, kind, var, body) => {
            let t = eval(target, env)?;
            let items: Vec<Val> = match t {
                Val::List(l) => l,
                Val::Map(m) => m.into_iter().map(|(k, _)| k).collect(),
                other => return no_overload("all", &[&other]),
            };
            run_macro(items, *kind, var, body, env)
        }
        Expr::Call(target, name, args) => {
            let t = match target.as_deref() {
                // Kubernetes' format library: `format.<name>()` names a format.
                Some(Expr::Ident(f))
                    if f == "format" && args.is_empty() && env.lookup(f).is_none() =>
                {
                    return Ok(Val::Format(name.clone()));
                }
                Some(t) => Some(eval(t, env)?),
                None => None,
            };
            let args: Vec<Val> = args
                .iter()
                .map(|x| eval(x, env))
                .collect::<Result<_, _>>()?;
            call(t, name, &args, env)
        }
    }
}

fn run_macro(
    items: Vec<Val>,
    kind: MacroKind,
    var: &str,
    body: &Expr,
    env: &mut Env<'_>,
) -> Result<Val, EvalError> {
    let mut kept = Vec::new();
    let mut count = 0;
    let mut first_err: Option<EvalError> = None;
    for item in items {
        env.vars.push((var.to_string(), item.clone()));
        let r = eval(body, env);
        env.vars.pop();
        if kind == MacroKind::Map {
            kept.push(r?);
            continue;
        }
        match r.and_then(|v| truth(&v)) {
            Ok(b) => match kind {
                MacroKind::All if !b => return Ok(Val::Bool(false)),
                MacroKind::Exists if b => return Ok(Val::Bool(true)),
                MacroKind::ExistsOne if b => count += 1,
                MacroKind::Filter if b => kept.push(item),
                _ => {}
            },
            Err(e) => {
                if matches!(kind, MacroKind::ExistsOne | MacroKind::Filter) {
                    return Err(e);
                }
                first_err.get_or_insert(e);
            }
        }
    }
    match kind {
        MacroKind::All => first_err.map_or(Ok(Val::Bool(true)), Err),
        MacroKind::Exists => first_err.map_or(Ok(Val::Bool(false)), Err),
        MacroKind::ExistsOne => Ok(Val::Bool(count == 1)),
        MacroKind::Filter | MacroKind::Map => Ok(Val::List(kept)),
    }
}

fn binary(l: &Val, op: BinOp, r: &Val) -> Result<Val, EvalError> {
    use std::cmp::Ordering::*;
    Ok(match op {
        BinOp::Eq => Val::Bool(equal(l, r)),
        BinOp::Ne => Val::Bool(!equal(l, r)),
        BinOp::Lt => Val::Bool(compare(l, r)? == Less),
        BinOp::Le => Val::Bool(compare(l, r)? != Greater),
        BinOp::Gt => Val::Bool(compare(l, r)? == Greater),
        BinOp::Ge => Val::Bool(compare(l, r)? != Less),
        BinOp::In => match r {
            Val::List(items) => Val::Bool(items.iter().any(|x| equal(x, l))),
            Val::Map(m) => Val::Bool(m.iter().any(|(k, _)| equal(k, l))),
            other => return no_overload("@in", &[l, other]),
        },
        BinOp::Add => match (l, r) {
            (Val::Int(a), Val::Int(b)) => Val::Int(
                a.checked_add(*b)
                    .ok_or_else(|| EvalError("int overflow".into()))?,
            ),
            (Val::Uint(a), Val::Uint(b)) => Val::Uint(
                a.checked_add(*b)
                    .ok_or_else(|| EvalError("uint overflow".into()))?,
            ),
            (Val::Double(a), Val::Double(b)) => Val::Double(a + b),
            (Val::Str(a), Val::Str(b)) => Val::Str(format!("{a}{b}")),
            (Val::List(a), Val::List(b)) => Val::List(a.iter().chain(b).cloned().collect()),
            (Val::Duration(a), Val::Duration(b)) => Val::Duration(a + b),
            _ => return no_overload("_+_", &[l, r]),
        },
        BinOp::Sub => match (l, r) {
            (Val::Int(a), Val::Int(b)) => Val::Int(
                a.checked_sub(*b)
                    .ok_or_else(|| EvalError("int overflow".into()))?,
            ),
            (Val::Double(a), Val::Double(b)) => Val::Double(a - b),
            (Val::Duration(a), Val::Duration(b)) => Val::Duration(a - b),
            _ => return no_overload("_-_", &[l, r]),
        },
        BinOp::Mul => match (l, r) {
            (Val::Int(a), Val::Int(b)) => Val::Int(
                a.checked_mul(*b)
                    .ok_or_else(|| EvalError("int overflow".into()))?,
            ),
            (Val::Double(a), Val::Double(b)) => Val::Double(a * b),
            _ => return no_overload("_*_", &[l, r]),
        },
        BinOp::Div | BinOp::Rem => match (l, r) {
            (Val::Int(_), Val::Int(0)) => {
                return err(if op == BinOp::Div {
                    "division by zero"
                } else {
                    "modulus by zero"
                });
            }
            (Val::Int(a), Val::Int(b)) => Val::Int(if op == BinOp::Div { a / b } else { a % b }),
            (Val::Double(a), Val::Double(b)) if op == BinOp::Div => Val::Double(a / b),
            _ => return no_overload("_/_", &[l, r]),
        },
    })
}

fn call(target: Option<Val>, name: &str, args: &[Val], env: &Env<'_>) -> Result<Val, EvalError> {
    let str_arg = |i: usize| match args.get(i) {
        Some(Val::Str(s)) => Ok(s.as_str()),
        Some(other) => no_overload(name, &[other]),
        None => err(format!("no such overload: {name}")),
    };
    if name == "size" {
        let of = match (&target, args) {
            (Some(t), []) => t,
            (None, [x]) => x,
            _ => return err("no such overload: size"),
        };
        return match of {
            Val::Str(s) => Ok(Val::Int(s.chars().count() as i64)),
            Val::List(l) => Ok(Val::Int(l.len() as i64)),
            Val::Map(m) => Ok(Val::Int(m.len() as i64)),
            other => no_overload("size", &[other]),
        };
    }
    match (target, name) {
        (Some(Val::Str(s)), "startsWith") => Ok(Val::Bool(s.starts_with(str_arg(0)?))),
        (Some(Val::Str(s)), "endsWith") => Ok(Val::Bool(s.ends_with(str_arg(0)?))),
        (Some(Val::Str(s)), "contains") => Ok(Val::Bool(s.contains(str_arg(0)?))),
        (Some(Val::Str(s)), "matches") => {
            let re = (env.regex)(str_arg(0)?)
                .ok_or_else(|| EvalError("invalid regular expression".into()))?;
            Ok(Val::Bool(re.is_match(&s)))
        }
        (Some(Val::Str(s)), "lowerAscii") if args.is_empty() => {
            Ok(Val::Str(s.to_ascii_lowercase()))
        }
        (Some(Val::Str(s)), "upperAscii") if args.is_empty() => {
            Ok(Val::Str(s.to_ascii_uppercase()))
        }
        (Some(Val::Str(s)), "substring") => {
            let chars: Vec<char> = s.chars().collect();
            let index = |i: usize| match args.get(i) {
                Some(Val::Int(n)) => Ok(*n),
                Some(other) => no_overload("substring", &[other]),
                None => Ok(chars.len() as i64),
            };
            let (start, end) = (index(0)?, index(1)?);
            if start < 0 || start as usize > chars.len() {
                return err(format!("index out of range: {start}"));
            }
            if end < start || end as usize > chars.len() {
                return err(format!("index out of range: {end}"));
            }
            Ok(Val::Str(
                chars[start as usize..end as usize].iter().collect(),
            ))
        }
        (None, "isIP") => Ok(Val::Bool(str_arg(0)?.parse::<std::net::IpAddr>().is_ok())),
        (Some(Val::Format(f)), "validate") => {
            let v = str_arg(0)?;
            match f.as_str() {
                "dns1123Label" => {
                    let errs = dns1123_label(v);
                    Ok(if errs.is_empty() {
                        Val::Null
                    } else {
                        Val::List(errs.into_iter().map(Val::Str).collect())
                    })
                }
                other => err(format!("undeclared reference to 'format.{other}'")),
            }
        }
        (Some(Val::Str(s)), "split") => Ok(Val::List(
            s.split(str_arg(0)?)
                .map(|p| Val::Str(p.to_string()))
                .collect(),
        )),
        (None, "duration") => parse_duration(str_arg(0)?)
            .map(Val::Duration)
            .ok_or_else(|| EvalError(format!("invalid duration {:?}", str_arg(0).unwrap_or("")))),
        (Some(t), other) => no_overload(other, &[&t]),
        (None, other) => err(format!("undeclared reference to '{other}'")),
    }
}

/// `validation.IsDNS1123Label`'s messages for `v` (none when it is one).
fn dns1123_label(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let b = v.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let ok = !b.is_empty()
        && b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter().all(|c| alnum(c) || *c == b'-');
    if !ok {
        errs.push("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string());
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(rule: &str, self_val: Value) -> Result<Val, EvalError> {
        let expr = parse(rule).unwrap_or_else(|e| panic!("{rule}: {e}"));
        let regex = |p: &str| regex::Regex::new(p).ok();
        let mut env = Env::new(Val::from_json(&self_val), None, &regex);
        eval(&expr, &mut env)
    }

    #[test]
    fn path_match_rules_evaluate_as_on_the_api_server() {
        let ok = json!({"type": "PathPrefix", "value": "/web/health"});
        let bad = json!({"type": "PathPrefix", "value": "web//a"});
        let starts = "(self.type in ['Exact','PathPrefix']) ? self.value.startsWith('/') : true";
        assert_eq!(run(starts, ok.clone()), Ok(Val::Bool(true)));
        assert_eq!(run(starts, bad), Ok(Val::Bool(false)));
        let chars = r#"(self.type in ['Exact','PathPrefix']) ? self.value.matches(r"""^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$""") : true"#;
        assert_eq!(run(chars, ok), Ok(Val::Bool(true)));
        assert_eq!(
            run(chars, json!({"type": "Exact", "value": "/a b"})),
            Ok(Val::Bool(false))
        );
    }

    #[test]
    fn reserved_words_are_reached_through_their_escapes() {
        let refs = json!([{"name": "gw", "namespace": "infra"}, {"name": "gw"}]);
        assert_eq!(
            run(
                "self.exists_one(p, has(p.__namespace__) && p.__namespace__ == 'infra')",
                refs.clone()
            ),
            Ok(Val::Bool(true))
        );
        assert_eq!(
            run("self.all(p, p.name == 'gw')", refs.clone()),
            Ok(Val::Bool(true))
        );
        assert_eq!(
            run("self.filter(p, has(p.__namespace__)).size() <= 1", refs),
            Ok(Val::Bool(true))
        );
    }

    #[test]
    fn errors_are_absorbed_by_a_decisive_side_as_cel_does() {
        let obj = json!({"type": "Service"});
        assert_eq!(
            run("self.missing == 1 || true", obj.clone()),
            Ok(Val::Bool(true))
        );
        assert_eq!(
            run("false && self.missing == 1", obj.clone()),
            Ok(Val::Bool(false))
        );
        assert_eq!(
            run("self.missing == 1", obj),
            Err(EvalError("no such key: missing".into()))
        );
    }

    #[test]
    fn ascii_case_functions_map_only_ascii_letters() {
        let oidc =
            json!({"forwardAccessToken": true, "forwardIDToken": {"header": "AuthoriZation"}});
        let rule = "!(has(self.forwardAccessToken) && self.forwardAccessToken && has(self.forwardIDToken) && self.forwardIDToken.header.lowerAscii() == 'authorization')";
        assert_eq!(run(rule, oidc), Ok(Val::Bool(false)));
        assert_eq!(
            run("self.lowerAscii() != 'host'", json!("X-Host")),
            Ok(Val::Bool(true))
        );
        assert_eq!(
            run("self.upperAscii()", json!("ÄbC")),
            Ok(Val::Str("ÄBC".into()))
        );
    }

    #[test]
    fn the_functions_v1_6_1_rules_use_evaluate() {
        assert_eq!(
            run("self.all(h, !isIP(h))", json!(["a.example.com"])),
            Ok(Val::Bool(true))
        );
        assert_eq!(
            run("self.all(h, !isIP(h))", json!(["10.0.0.1"])),
            Ok(Val::Bool(false))
        );
        assert_eq!(
            run("self.all(h, !isIP(h))", json!(["::1"])),
            Ok(Val::Bool(false))
        );
        assert_eq!(
            run("self.substring(2)", json!("*.example.com")),
            Ok(Val::Str("example.com".into()))
        );
        assert_eq!(
            run("self.substring(1, 3)", json!("abcd")),
            Ok(Val::Str("bc".into()))
        );
        assert!(run("self.substring(5)", json!("abcd")).is_err());
        let label = "size(self) == 0 || format.dns1123Label().validate(self) == null";
        assert_eq!(run(label, json!("backend-1")), Ok(Val::Bool(true)));
        assert_eq!(run(label, json!("")), Ok(Val::Bool(true)));
        assert_eq!(run(label, json!("Backend_1")), Ok(Val::Bool(false)));
        assert_eq!(run(label, json!("-a")), Ok(Val::Bool(false)));
    }

    #[test]
    fn durations_compare() {
        let t = json!({"request": "10s", "backendRequest": "1m"});
        assert_eq!(
            run(
                "!(has(self.request) && has(self.backendRequest) && duration(self.request) != duration('0s') && duration(self.backendRequest) > duration(self.request))",
                t
            ),
            Ok(Val::Bool(false))
        );
        assert_eq!(parse_duration("1h30m"), Some(5_400_000_000_000));
        assert_eq!(parse_duration("500ms"), Some(500_000_000));
        assert_eq!(parse_duration("x"), None);
    }
}
