//! Request sequences as data: one YAML file per sequence, each step one HTTP request.
//!
//! ```yaml
//! description: what the sequence shows
//! cleanup: [/apis/networking.k8s.io/v1/ingressclasses/parity-${run}]  # cluster-scoped objects
//! steps:
//!   - name: create-web              # the fixture file is NN-create-web.json
//!     description: …                # optional
//!     as: admin                     # admin | readonly | noperm | invalid | anonymous
//!     method: POST
//!     path: /apis/apps/v1/namespaces/${ns}/deployments
//!     query: {fieldManager: parity} # appended in this order, form-encoded
//!     headers: {Impersonate-User: readonly}
//!     patch: strategic              # PATCH Content-Type: merge | strategic | json | apply
//!     body: {…}                     # JSON (written as YAML), or
//!     body_raw: '{"kind":'          # bytes as they are
//!     set: {/spec/replicas: 3}      # edits of `body` by JSON pointer
//!     remove: [/metadata/resourceVersion]
//!     save: web                     # remember the response body as `web`
//!     expect: 201                   # the status the author expects from the real server
//!     sleep_ms: 1100                # wait before sending
//!     watch: {max_ms: 3000, during: [{after_ms: 500, …step…}]}
//! ```
//!
//! Strings may use `${ns}` (the sequence's namespace), `${run}` (this run's suffix),
//! `${name}` / `${name/json/pointer}` (a saved response or a value in it) and
//! `${repeat:N:text}` (text N times). A string that is exactly one `${…}` becomes the value
//! itself (an object, a number…).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sequence {
    #[serde(skip)]
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub cleanup: Vec<String>,
    pub steps: Vec<Step>,
}

pub use crate::client::Who;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PatchKind {
    Merge,
    Strategic,
    Json,
    Apply,
}

impl PatchKind {
    pub fn content_type(self) -> &'static str {
        match self {
            PatchKind::Merge => "application/merge-patch+json",
            PatchKind::Strategic => "application/strategic-merge-patch+json",
            PatchKind::Json => "application/json-patch+json",
            PatchKind::Apply => "application/apply-patch+yaml",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default, rename = "as")]
    pub who: Who,
    pub method: String,
    pub path: String,
    #[serde(default)]
    pub query: Map<String, Value>,
    #[serde(default)]
    pub headers: Map<String, Value>,
    #[serde(default)]
    pub patch: Option<PatchKind>,
    #[serde(default)]
    pub body: Option<Value>,
    #[serde(default)]
    pub body_raw: Option<String>,
    #[serde(default)]
    pub set: Map<String, Value>,
    #[serde(default)]
    pub remove: Vec<String>,
    #[serde(default)]
    pub save: Option<String>,
    #[serde(default)]
    pub expect: Option<u16>,
    #[serde(default)]
    pub watch: Option<Watch>,
    /// Only for steps inside `watch.during`: when to send, after the watch opened.
    #[serde(default)]
    pub after_ms: u64,
    /// Wait this long before sending (creation timestamps have a resolution of a second).
    #[serde(default)]
    pub sleep_ms: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Watch {
    /// Stop reading after this long if the server has not ended the stream.
    pub max_ms: u64,
    #[serde(default)]
    pub during: Vec<Step>,
}

/// Loads every `*.yaml` of `dir`, sorted by file name (the sequence name is the file stem).
pub fn load_dir(dir: &Path) -> Result<Vec<Sequence>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read the sequences in {}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    files.iter().map(|f| load_file(f)).collect()
}

pub fn load_file(path: &Path) -> Result<Sequence, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut seq: Sequence =
        serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    seq.name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    check(&seq).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(seq)
}

fn check(seq: &Sequence) -> Result<(), String> {
    let mut names = std::collections::HashSet::new();
    for step in &seq.steps {
        if !names.insert(step.name.as_str()) {
            return Err(format!("step name {:?} is used twice", step.name));
        }
        if step
            .name
            .chars()
            .any(|c| !(c.is_ascii_alphanumeric() || c == '-'))
        {
            return Err(format!(
                "step name {:?}: use lower-case letters, digits and '-'",
                step.name
            ));
        }
        if step.body.is_some() && step.body_raw.is_some() {
            return Err(format!("step {}: both body and body_raw", step.name));
        }
        if step.method == "PATCH"
            && step.patch.is_none()
            && !step
                .headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("content-type"))
        {
            return Err(format!(
                "step {}: a PATCH needs `patch:` (merge, strategic, json, apply) or a Content-Type header",
                step.name
            ));
        }
    }
    for path in &seq.cleanup {
        if !path.contains("parity-") {
            return Err(format!(
                "cleanup path {path:?}: only objects named parity-… may be deleted"
            ));
        }
    }
    Ok(())
}

/// The values `${…}` refers to.
#[derive(Debug, Clone, Default)]
pub struct Vars {
    pub fixed: BTreeMap<String, String>,
    pub saved: BTreeMap<String, Value>,
}

impl Vars {
    fn lookup(&self, expr: &str) -> Result<Value, String> {
        // `${repeat:N:text}`: text N times (large bodies without large files).
        if let Some(rest) = expr.strip_prefix("repeat:") {
            let (n, text) = rest
                .split_once(':')
                .ok_or_else(|| format!("${{{expr}}}: expected repeat:N:text"))?;
            let n: usize = n
                .parse()
                .map_err(|_| format!("${{{expr}}}: {n:?} is not a count"))?;
            return Ok(Value::String(text.repeat(n)));
        }
        if let Some(v) = self.fixed.get(expr) {
            return Ok(Value::String(v.clone()));
        }
        let (name, pointer) = match expr.find('/') {
            Some(i) => (&expr[..i], &expr[i..]),
            None => (expr, ""),
        };
        let saved = self
            .saved
            .get(name)
            .ok_or_else(|| format!("${{{expr}}}: nothing was saved as {name:?}"))?;
        saved
            .pointer(pointer)
            .cloned()
            .ok_or_else(|| format!("${{{expr}}}: the saved response has no {pointer}"))
    }

    /// Substitutes in one string; a string that is exactly one reference becomes its value.
    pub fn value_of(&self, s: &str) -> Result<Value, String> {
        if let Some(inner) = s.strip_prefix("${").and_then(|r| r.strip_suffix('}'))
            && !inner.contains("${")
            && !inner.contains('}')
        {
            return self.lookup(inner);
        }
        self.string(s).map(Value::String)
    }

    pub fn string(&self, s: &str) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = s;
        while let Some(i) = rest.find("${") {
            out.push_str(&rest[..i]);
            let after = &rest[i + 2..];
            let end = after
                .find('}')
                .ok_or_else(|| format!("unterminated ${{ in {s:?}"))?;
            let v = self.lookup(&after[..end])?;
            match v {
                Value::String(x) => out.push_str(&x),
                other => out.push_str(&other.to_string()),
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    pub fn json(&self, v: &Value) -> Result<Value, String> {
        Ok(match v {
            Value::String(s) => self.value_of(s)?,
            Value::Array(a) => {
                Value::Array(a.iter().map(|x| self.json(x)).collect::<Result<_, _>>()?)
            }
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, x) in m {
                    out.insert(self.string(k)?, self.json(x)?);
                }
                Value::Object(out)
            }
            other => other.clone(),
        })
    }
}

/// Sets `value` at a JSON pointer, creating objects on the way (`-` appends to an array).
pub fn set_pointer(target: &mut Value, pointer: &str, value: Value) -> Result<(), String> {
    let tokens: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect();
    let Some((last, parents)) = tokens.split_last() else {
        *target = value;
        return Ok(());
    };
    let mut cur = target;
    for t in parents {
        cur = match cur {
            Value::Object(m) => m
                .entry(t.clone())
                .or_insert_with(|| Value::Object(Map::new())),
            Value::Array(a) => {
                let i: usize = t
                    .parse()
                    .map_err(|_| format!("{pointer}: {t:?} is not an index"))?;
                a.get_mut(i)
                    .ok_or_else(|| format!("{pointer}: no element {i}"))?
            }
            _ => return Err(format!("{pointer}: {t:?} is inside a scalar")),
        };
    }
    match cur {
        Value::Object(m) => {
            m.insert(last.clone(), value);
        }
        Value::Array(a) if last == "-" => a.push(value),
        Value::Array(a) => {
            let i: usize = last
                .parse()
                .map_err(|_| format!("{pointer}: {last:?} is not an index"))?;
            *a.get_mut(i)
                .ok_or_else(|| format!("{pointer}: no element {i}"))? = value;
        }
        _ => return Err(format!("{pointer}: the parent is a scalar")),
    }
    Ok(())
}

pub fn remove_pointer(target: &mut Value, pointer: &str) -> Result<(), String> {
    let (parent, last) = pointer
        .rsplit_once('/')
        .ok_or_else(|| format!("{pointer}: not a JSON pointer"))?;
    let last = last.replace("~1", "/").replace("~0", "~");
    match target.pointer_mut(parent) {
        Some(Value::Object(m)) => {
            m.shift_remove(&last);
            Ok(())
        }
        Some(Value::Array(a)) => {
            let i: usize = last
                .parse()
                .map_err(|_| format!("{pointer}: {last:?} is not an index"))?;
            if i < a.len() {
                a.remove(i);
            }
            Ok(())
        }
        _ => Err(format!("{pointer}: no such place")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn references_are_substituted_in_strings_and_as_whole_values() {
        let mut v = Vars::default();
        v.fixed.insert("ns".into(), "parity-x".into());
        v.saved.insert(
            "web".into(),
            json!({"metadata": {"resourceVersion": "12", "uid": "u"}, "spec": {"replicas": 2}}),
        );
        assert_eq!(
            v.string("/api/v1/namespaces/${ns}/x?rv=${web/metadata/resourceVersion}")
                .unwrap(),
            "/api/v1/namespaces/parity-x/x?rv=12"
        );
        assert_eq!(v.value_of("${web/spec/replicas}").unwrap(), json!(2));
        assert_eq!(
            v.json(&json!({"p": {"uid": "${web/metadata/uid}"}}))
                .unwrap(),
            json!({"p": {"uid": "u"}})
        );
        assert!(
            v.string("${nope}")
                .unwrap_err()
                .contains("nothing was saved")
        );
    }

    #[test]
    fn pointers_set_and_remove() {
        let mut b = json!({"spec": {"containers": [{"name": "a"}]}});
        set_pointer(&mut b, "/spec/containers/0/image", json!("x")).unwrap();
        set_pointer(&mut b, "/spec/containers/-", json!({"name": "b"})).unwrap();
        set_pointer(&mut b, "/metadata/labels/a~1b", json!("c")).unwrap();
        remove_pointer(&mut b, "/spec/containers/0/name").unwrap();
        assert_eq!(
            b,
            json!({"spec": {"containers": [{"image": "x"}, {"name": "b"}]}, "metadata": {"labels": {"a/b": "c"}}})
        );
    }

    #[test]
    fn every_sequence_in_the_crate_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sequences");
        let seqs = load_dir(&dir).unwrap();
        assert!(!seqs.is_empty());
    }
}
