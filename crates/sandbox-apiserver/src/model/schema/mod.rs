//! The Go types behind the five served kinds, as data: field names in Go struct order, Go
//! `omitempty`/pointer semantics, list and map merge strategies.
//!
//! Everything the real API server does "because the object went through a Go struct" is done here
//! against that table: unknown fields are dropped and reported (`unknown field "spec.x"`), a wrongly
//! typed value is rejected with encoding/json's message, absent value-typed fields appear as their
//! zero value (`"creationTimestamp": null`, `"resources": {}`), zero `omitempty` fields disappear,
//! keys come out in Go struct order, quantities are canonicalised.

mod generated;

use serde_json::{Map, Value};

use super::quantity;

pub use generated::{
    CONFIG_MAP, DEPLOYMENT, EVENT, HORIZONTAL_POD_AUTOSCALER, INGRESS, INGRESS_CLASS, NAMESPACE,
    OBJECT_META, POD, REPLICA_SET, RESOURCE_QUOTA, SELF_SUBJECT_ACCESS_REVIEW, SELF_SUBJECT_REVIEW,
    SERVICE,
};

/// A field's type.
#[derive(Debug)]
#[allow(dead_code)] // F64 exists in the Go types, not (yet) in the served kinds
pub enum T {
    Str,
    I32,
    I64,
    F64,
    Bool,
    Bytes,
    IntOrStr,
    Quantity,
    Time,
    /// `metav1.MicroTime`: RFC 3339 with microseconds.
    MicroTime,
    /// Free-form JSON (RawExtension, FieldsV1): kept as sent.
    Any,
    /// A struct: index into [`generated::TYPES`].
    Obj(usize),
    List(&'static T, L),
    /// `map[string]X`; `true` when the map is atomic (`+mapType=atomic`).
    Map(&'static T, bool),
}

/// How a list merges (strategic merge patch) and how server-side apply tracks it.
#[derive(Debug)]
pub enum L {
    /// Replaced as a whole.
    Atomic,
    /// Primitive values merged as a set.
    Set,
    /// Items identified by `merge_key` (strategic merge patch) and by `keys` (managed fields).
    Map {
        merge_key: &'static str,
        keys: &'static [&'static str],
    },
}

#[derive(Debug)]
pub struct FieldDef {
    pub name: &'static str,
    pub ty: T,
    /// `json:",omitempty"`: a zero value is not serialised (value types only; pointers see `ptr`).
    pub omitempty: bool,
    /// A Go pointer: present (even zero) or absent.
    pub ptr: bool,
    /// The Go type as encoding/json names it in errors.
    pub go_type: &'static str,
}

#[derive(Debug)]
pub struct TypeDef {
    pub name: &'static str,
    pub go_name: &'static str,
    /// `+structType=atomic`.
    pub atomic: bool,
    pub fields: &'static [FieldDef],
}

impl TypeDef {
    pub fn field(&self, name: &str) -> Option<&'static FieldDef> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// The type at index `i`: one of the generated Go types, or one installed at run time
/// ([`install_types`]).
pub fn type_def(i: usize) -> &'static TypeDef {
    if let Some(t) = generated::TYPES.get(i) {
        return t;
    }
    let first = INSTALLED.get().map_or(&[][..], Vec::as_slice);
    let i = i - generated::TYPES.len();
    match first.get(i) {
        Some(t) => t,
        None => INSTALLED_LATER
            .get()
            .and_then(|later| later.get(i - first.len()))
            .copied()
            .unwrap_or(&generated::TYPES[0]),
    }
}

/// Types built at run time (from CustomResourceDefinitions' schemas), after the generated ones.
static INSTALLED: std::sync::OnceLock<Vec<&'static TypeDef>> = std::sync::OnceLock::new();

/// Install the run-time types, once per process: `build` gets the index its first type will
/// have (so it can refer to its own types as `T::Obj(base + n)`). Returns that index.
pub fn install_types(build: impl FnOnce(usize) -> Vec<&'static TypeDef>) -> usize {
    let base = generated::TYPES.len();
    INSTALLED.get_or_init(|| build(base));
    base
}

/// Types installed later, after [`install_types`]'s (which must have run): a second group that
/// only some processes need (the CRDs of a Gateway API release a sandbox may not serve). Once
/// per process; returns the index of its first type.
static INSTALLED_LATER: std::sync::OnceLock<Vec<&'static TypeDef>> = std::sync::OnceLock::new();

pub fn install_types_later(build: impl FnOnce(usize) -> Vec<&'static TypeDef>) -> usize {
    let base = generated::TYPES.len() + INSTALLED.get().map_or(0, Vec::len);
    INSTALLED_LATER.get_or_init(|| build(base));
    base
}

/// An encoding/json decoding failure, formatted like Go's.
#[derive(Debug, Clone, PartialEq)]
pub enum DecodeError {
    /// `json: cannot unmarshal <value> into Go struct field <Struct>.<path> of type <type>`
    Type {
        value: String,
        struct_name: String,
        field: String,
        go_type: String,
    },
    /// A custom unmarshaller's own message (quantities, times).
    Other(String),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Type {
                value,
                struct_name,
                field,
                go_type,
            } => {
                if struct_name.is_empty() && field.is_empty() {
                    write!(
                        f,
                        "json: cannot unmarshal {value} into Go value of type {go_type}"
                    )
                } else {
                    write!(
                        f,
                        "json: cannot unmarshal {value} into Go struct field {struct_name}.{field} of type {go_type}"
                    )
                }
            }
            DecodeError::Other(m) => f.write_str(m),
        }
    }
}

/// The result of decoding a body into a typed object.
#[derive(Debug)]
pub struct Decoded {
    /// The object as the Go struct would serialise it (without kind/apiVersion).
    pub value: Value,
    /// Unknown fields, as sigs.k8s.io/json reports them (`spec.rules[0].http.x`), in document order.
    pub unknown: Vec<String>,
}

struct Walker {
    unknown: Vec<String>,
    /// encoding/json's field stack (names only, no indices) for error messages.
    stack: Vec<&'static str>,
    /// Decoding a map (`runtime.DefaultUnstructuredConverter`, what a strategic merge patch's
    /// result goes through) rather than JSON: other error texts.
    unstructured: bool,
}

/// Decode `v` as the struct `ty` and re-encode it the way Go would. `kind`/`apiVersion` are
/// left to the caller.
pub fn canonicalize(ty: usize, v: &Value) -> Result<Decoded, DecodeError> {
    decode_root(ty, v, false)
}

/// Like [`canonicalize`], for a value that is a Go map rather than JSON text: type errors have
/// the texts of `runtime.DefaultUnstructuredConverter` (`unrecognized type: int32`,
/// `cannot restore struct from: string`).
pub fn from_unstructured(ty: usize, v: &Value) -> Result<Decoded, DecodeError> {
    decode_root(ty, v, true)
}

/// The reflect kind of a decoded JSON value, as the unstructured converter names it.
fn go_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "invalid",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "slice",
        Value::Object(_) => "map",
    }
}

/// `fromUnstructured`'s error for a value of the wrong kind.
fn unstructured_err(ty: &T, v: &Value) -> DecodeError {
    let kind = go_kind(v);
    let msg = match ty {
        T::Obj(_) => format!("cannot restore struct from: {kind}"),
        T::List(..) | T::Bytes => format!("cannot restore slice from {kind}"),
        T::Map(..) => format!("cannot restore map from {kind}"),
        T::IntOrStr => format!(
            "json: cannot unmarshal {} into Go value of type int32",
            match v {
                Value::Number(n) => format!("number {n}"),
                other => json_kind(other),
            }
        ),
        T::Time | T::MicroTime => format!(
            "json: cannot unmarshal {} into Go value of type string",
            json_kind(v)
        ),
        other => {
            let target = match other {
                T::Str => "string",
                T::I32 => "int32",
                T::I64 => "int64",
                T::F64 => "float64",
                _ => "bool",
            };
            match (kind, other) {
                ("int64", T::Str) => "cannot convert int64 to string".to_string(),
                ("float64", T::I32 | T::I64) => format!("cannot convert float64 to {target}"),
                _ => format!("unrecognized type: {target}"),
            }
        }
    };
    DecodeError::Other(msg)
}

fn decode_root(ty: usize, v: &Value, unstructured: bool) -> Result<Decoded, DecodeError> {
    let mut w = Walker {
        unknown: Vec::new(),
        stack: Vec::new(),
        unstructured,
    };
    let td = type_def(ty);
    let value = match v {
        Value::Object(m) => {
            let mut filtered = m.clone();
            filtered.remove("kind");
            filtered.remove("apiVersion");
            w.decode_struct(td, &Value::Object(filtered), "")?
        }
        Value::Null => zero_struct(td),
        other => {
            return Err(DecodeError::Type {
                value: json_kind(other),
                struct_name: String::new(),
                field: String::new(),
                go_type: td.go_name.to_string(),
            });
        }
    };
    Ok(Decoded {
        value,
        unknown: w.unknown,
    })
}

/// Re-encode an object already known to be well typed (e.g. after a server-side change).
pub fn normalize(ty: usize, v: &Value) -> Value {
    match canonicalize(ty, v) {
        Ok(d) => d.value,
        Err(_) => v.clone(),
    }
}

fn json_kind(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "bool".into(),
        Value::Number(_) => "number".into(),
        Value::String(_) => "string".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
    }
}

impl Walker {
    fn type_err(&self, value: String, struct_name: &str, go_type: &str) -> DecodeError {
        if self.unstructured {
            return DecodeError::Other(value);
        }
        DecodeError::Type {
            value,
            struct_name: struct_name.to_string(),
            field: self.stack.join("."),
            go_type: go_type.to_string(),
        }
    }

    fn decode_struct(
        &mut self,
        td: &'static TypeDef,
        v: &Value,
        upath: &str,
    ) -> Result<Value, DecodeError> {
        let Value::Object(input) = v else {
            // Callers check the JSON kind before descending.
            return Ok(zero_struct(td));
        };
        for key in input.keys() {
            if td.field(key).is_none() {
                self.unknown.push(join_path(upath, key));
            }
        }
        let mut out = Map::new();
        for f in td.fields {
            let child_upath = join_path(upath, f.name);
            match input.get(f.name) {
                None => {
                    if !f.omitempty {
                        out.insert(
                            f.name.to_string(),
                            if f.ptr { Value::Null } else { zero(&f.ty) },
                        );
                    }
                }
                Some(raw) => {
                    self.stack.push(f.name);
                    let decoded = self.decode_value(&f.ty, raw, td.name, f.go_type, &child_upath);
                    self.stack.pop();
                    let decoded = decoded?;
                    match decoded {
                        None => {
                            if !f.omitempty {
                                out.insert(
                                    f.name.to_string(),
                                    if f.ptr { Value::Null } else { zero(&f.ty) },
                                );
                            }
                        }
                        Some(val) => {
                            if f.omitempty && !f.ptr && is_go_empty(&f.ty, &val) {
                                continue;
                            }
                            out.insert(f.name.to_string(), val);
                        }
                    }
                }
            }
        }
        Ok(Value::Object(out))
    }

    /// `None` = Go nil / no-op (JSON null).
    fn decode_value(
        &mut self,
        ty: &'static T,
        v: &Value,
        struct_name: &str,
        go_type: &str,
        upath: &str,
    ) -> Result<Option<Value>, DecodeError> {
        if v.is_null() {
            return Ok(match ty {
                // Custom unmarshallers turn null into their zero value.
                T::IntOrStr => Some(Value::from(0)),
                _ => None,
            });
        }
        if self.unstructured {
            let fits = match (ty, v) {
                (T::Str, Value::String(_)) | (T::Bool, Value::Bool(_)) => true,
                (T::I32 | T::I64, Value::Number(n)) => {
                    n.as_i64().is_some() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
                }
                (T::F64, Value::Number(_)) => true,
                (T::Bytes | T::Time | T::MicroTime, Value::String(_)) => true,
                (T::IntOrStr, Value::String(_)) => true,
                (T::IntOrStr, Value::Number(n)) => n.as_i64().is_some(),
                (T::Quantity | T::Any, _) => true,
                (T::Obj(_) | T::Map(..), Value::Object(_)) => true,
                (T::List(..), Value::Array(_)) => true,
                _ => false,
            };
            if !fits {
                return Err(unstructured_err(ty, v));
            }
            if let (T::I32 | T::I64, Value::Number(n)) = (ty, v)
                && n.as_i64().is_none()
            {
                return Ok(n.as_f64().map(|f| Value::from(f as i64)));
            }
        }
        match ty {
            T::Str => match v {
                Value::String(_) => Ok(Some(v.clone())),
                other => Err(self.type_err(json_kind(other), struct_name, go_type)),
            },
            T::Bool => match v {
                Value::Bool(_) => Ok(Some(v.clone())),
                other => Err(self.type_err(json_kind(other), struct_name, go_type)),
            },
            T::I32 | T::I64 => match v {
                Value::Number(n) => {
                    let (min, max) = if matches!(ty, T::I32) {
                        (i64::from(i32::MIN), i64::from(i32::MAX))
                    } else {
                        (i64::MIN, i64::MAX)
                    };
                    match n.as_i64() {
                        Some(i) if i >= min && i <= max => Ok(Some(Value::from(i))),
                        _ => Err(self.type_err(format!("number {n}"), struct_name, go_type)),
                    }
                }
                other => Err(self.type_err(json_kind(other), struct_name, go_type)),
            },
            T::F64 => match v {
                Value::Number(_) => Ok(Some(v.clone())),
                other => Err(self.type_err(json_kind(other), struct_name, go_type)),
            },
            T::Bytes => match v {
                Value::String(text) => match super::gojson::go_base64_canonical(text) {
                    Ok(canonical) => Ok(Some(Value::String(canonical))),
                    Err(at) => Err(DecodeError::Other(format!(
                        "illegal base64 data at input byte {at}"
                    ))),
                },
                other => Err(self.type_err(json_kind(other), struct_name, go_type)),
            },
            T::IntOrStr => match v {
                Value::String(_) => Ok(Some(v.clone())),
                Value::Number(n) => match n.as_i64() {
                    Some(i) if i >= i64::from(i32::MIN) && i <= i64::from(i32::MAX) => {
                        Ok(Some(Value::from(i)))
                    }
                    _ => Err(self.type_err(format!("number {n}"), struct_name, "int32")),
                },
                other => Err(self.type_err(json_kind(other), struct_name, "int32")),
            },
            T::Quantity => {
                let text = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    _ => return Err(DecodeError::Other(quantity::PARSE_ERROR.to_string())),
                };
                match quantity::canonical(&text) {
                    Some(c) => Ok(Some(Value::String(c))),
                    None => Err(DecodeError::Other(quantity::PARSE_ERROR.to_string())),
                }
            }
            T::Time => match v {
                Value::String(s) => match super::time::parse_rfc3339(s) {
                    Some(secs) => Ok(Some(Value::String(super::time::format_rfc3339(secs)))),
                    None => Err(DecodeError::Other(format!(
                        "parsing time {:?} as \"2006-01-02T15:04:05Z07:00\": cannot parse {:?} as \"2006\"",
                        format!("\"{s}\""),
                        format!("{s}\"")
                    ))),
                },
                other => Err(self.type_err(json_kind(other), struct_name, "string")),
            },
            T::MicroTime => match v {
                Value::String(s) => match super::time::parse_rfc3339_micro(s) {
                    Some((secs, us)) => Ok(Some(Value::String(super::time::format_rfc3339_micro(
                        secs, us,
                    )))),
                    None => Err(DecodeError::Other(format!(
                        "parsing time {:?} as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse {:?} as \"2006\"",
                        format!("\"{s}\""),
                        format!("{s}\"")
                    ))),
                },
                other => Err(self.type_err(json_kind(other), struct_name, "string")),
            },
            T::Any => Ok(Some(v.clone())),
            T::Obj(i) => {
                let td = type_def(*i);
                match v {
                    Value::Object(_) => Ok(Some(self.decode_struct(td, v, upath)?)),
                    other => Err(self.type_err(json_kind(other), struct_name, go_type)),
                }
            }
            T::List(item, _) => match v {
                Value::Array(items) => {
                    let item_go = go_type.strip_prefix("[]").unwrap_or(go_type);
                    let mut out = Vec::with_capacity(items.len());
                    for (i, it) in items.iter().enumerate() {
                        let p = format!("{upath}[{i}]");
                        let d = self.decode_value(item, it, struct_name, item_go, &p)?;
                        out.push(d.unwrap_or_else(|| zero_elem(item)));
                    }
                    Ok(Some(Value::Array(out)))
                }
                other => Err(self.type_err(json_kind(other), struct_name, go_type)),
            },
            T::Map(item, _) => match v {
                Value::Object(m) => {
                    let item_go = go_type.strip_prefix("map[string]").unwrap_or(go_type);
                    let mut out = Map::new();
                    // Go maps serialise with sorted keys.
                    let mut keys: Vec<&String> = m.keys().collect();
                    keys.sort();
                    for k in keys {
                        let Some(raw) = m.get(k) else { continue };
                        let p = format!("{upath}[{k}]");
                        let d = self.decode_value(item, raw, struct_name, item_go, &p)?;
                        out.insert(k.clone(), d.unwrap_or_else(|| zero_elem(item)));
                    }
                    Ok(Some(Value::Object(out)))
                }
                other => Err(self.type_err(json_kind(other), struct_name, go_type)),
            },
        }
    }
}

fn join_path(base: &str, key: &str) -> String {
    if base.is_empty() {
        key.to_string()
    } else {
        format!("{base}.{key}")
    }
}

/// The zero value of a slice or map element (a JSON null element).
fn zero_elem(ty: &T) -> Value {
    match ty {
        T::Obj(i) => zero_struct(type_def(*i)),
        T::List(..) | T::Map(..) | T::Any | T::Time | T::MicroTime | T::Bytes => Value::Null,
        other => zero(other),
    }
}

/// How Go serialises the zero value of a non-omitted field of this type.
pub fn zero(ty: &T) -> Value {
    match ty {
        T::Str => Value::String(String::new()),
        T::I32 | T::I64 | T::F64 | T::IntOrStr => Value::from(0),
        T::Bool => Value::Bool(false),
        T::Quantity => Value::String("0".into()),
        T::Time | T::MicroTime | T::Bytes | T::Any | T::List(..) | T::Map(..) => Value::Null,
        T::Obj(i) => zero_struct(type_def(*i)),
    }
}

/// The zero value of a struct, serialised.
pub fn zero_struct(td: &TypeDef) -> Value {
    let mut out = Map::new();
    for f in td.fields {
        if !f.omitempty {
            out.insert(
                f.name.to_string(),
                if f.ptr { Value::Null } else { zero(&f.ty) },
            );
        }
    }
    Value::Object(out)
}

fn is_go_empty(ty: &T, v: &Value) -> bool {
    match (ty, v) {
        (_, Value::Null) => true,
        (T::Str | T::Bytes, Value::String(s)) => s.is_empty(),
        (T::I32 | T::I64 | T::F64, Value::Number(n)) => n.as_f64() == Some(0.0),
        (T::Bool, Value::Bool(b)) => !b,
        (T::List(..), Value::Array(a)) => a.is_empty(),
        (T::Map(..), Value::Object(m)) => m.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn deployment_zero_values_and_order_match_go() {
        let d = canonicalize(
            DEPLOYMENT,
            &json!({"kind":"Deployment","spec":{"template":{"spec":{"containers":[{"image":"x","name":"web"}]}}}}),
        )
        .unwrap();
        assert_eq!(
            serde_json::to_string(&d.value).unwrap(),
            r#"{"metadata":{"creationTimestamp":null},"spec":{"selector":null,"template":{"metadata":{"creationTimestamp":null},"spec":{"containers":[{"name":"web","image":"x","resources":{}}]}},"strategy":{}},"status":{}}"#
        );
    }

    #[test]
    fn wrong_type_is_reported_like_encoding_json() {
        let e = canonicalize(DEPLOYMENT, &json!({"spec":{"replicas":"two"}})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
        );
        let e = canonicalize(DEPLOYMENT, &json!({"metadata":{"labels":{"a":1}}})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"
        );
        let e = canonicalize(
            DEPLOYMENT,
            &json!({"spec":{"template":{"spec":{"containers":["x"]}}}}),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "json: cannot unmarshal string into Go struct field PodSpec.spec.template.spec.containers of type v1.Container"
        );
    }

    #[test]
    fn unknown_fields_are_listed_with_indices() {
        let d = canonicalize(
            INGRESS,
            &json!({"metadata":{"name":"x","colour":"blue"},"spec":{"rules":[{"http":{"paths":[{"backend":{"service":{"name":"web","portName":"http"}}}]}}]}}),
        )
        .unwrap();
        assert_eq!(
            d.unknown,
            vec![
                "metadata.colour",
                "spec.rules[0].http.paths[0].backend.service.portName"
            ]
        );
    }

    #[test]
    fn omitempty_zero_values_are_dropped_but_pointers_kept() {
        let d = canonicalize(
            DEPLOYMENT,
            &json!({"metadata":{"labels":{}},"spec":{"replicas":0,"paused":false,"minReadySeconds":0}}),
        )
        .unwrap();
        let spec = &d.value["spec"];
        assert_eq!(spec["replicas"], json!(0));
        assert!(spec.get("paused").is_none());
        assert!(spec.get("minReadySeconds").is_none());
        assert!(d.value["metadata"].get("labels").is_none());
    }

    #[test]
    fn hpa_status_zero_matches_fixture() {
        let d = canonicalize(HORIZONTAL_POD_AUTOSCALER, &json!({})).unwrap();
        assert_eq!(
            d.value["status"],
            json!({"desiredReplicas":0,"currentMetrics":null})
        );
    }
}
