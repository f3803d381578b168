//! Writes one server's exchanges as fixtures, in the format of the shared recording: one JSON
//! file per request (`NN-<step>.json`), one folder per sequence, and an index.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Map, Value, json};

use crate::client::Prepared;
use crate::normalize::{body_value, header_map};
use crate::run::Exchange;
use crate::sequence::Sequence;

/// The request body as recorded: JSON when the bytes are exactly the compact form of a JSON
/// value (so a replay re-serialises the same bytes), else the text as it was sent.
fn request_body(bytes: &[u8]) -> Value {
    if let Ok(v) = serde_json::from_slice::<Value>(bytes)
        && serde_json::to_vec(&v).is_ok_and(|again| again == bytes)
    {
        return v;
    }
    Value::String(String::from_utf8_lossy(bytes).into_owned())
}

fn request(p: &Prepared) -> Value {
    let mut m = Map::new();
    m.insert("method".into(), json!(p.method));
    m.insert("path".into(), json!(p.target));
    if let Some((_, q)) = p.target.split_once('?') {
        let query: Map<String, Value> = form_urlencoded::parse(q.as_bytes())
            .map(|(k, v)| (k.into_owned(), json!(v)))
            .collect();
        m.insert("query".into(), Value::Object(query));
    }
    m.insert("user".into(), json!(p.who.fixture_user()));
    let headers: Map<String, Value> = p
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    m.insert("headers".into(), Value::Object(headers));
    if let Some(b) = &p.body {
        m.insert("body".into(), request_body(b));
    }
    Value::Object(m)
}

fn response(ex: &Exchange) -> Value {
    let mut m = Map::new();
    m.insert("status".into(), json!(ex.got.status));
    m.insert("headers".into(), Value::Object(header_map(&ex.got.headers)));
    match &ex.events {
        Some(events) => {
            m.insert(
                "body".into(),
                json!(String::from_utf8_lossy(&ex.got.body).into_owned()),
            );
            m.insert("events".into(), Value::Array(events.clone()));
        }
        None => {
            m.insert("body".into(), body_value(&ex.got.body));
        }
    }
    Value::Object(m)
}

pub fn fixture(ex: &Exchange) -> Option<Value> {
    let sent = ex.sent.as_ref()?;
    let mut m = Map::new();
    m.insert("description".into(), json!(ex.description));
    m.insert("request".into(), request(sent));
    if let Some(ms) = ex.stream_ms {
        m.insert("stream_ms".into(), json!(ms));
    }
    if !ex.during.is_empty() {
        let during: Vec<Value> = ex
            .during
            .iter()
            .filter_map(|d| {
                let mut f = fixture(d)?;
                if let Some(o) = f.as_object_mut() {
                    o.insert("after_ms".into(), json!(d.after_ms));
                }
                Some(f)
            })
            .collect();
        m.insert("concurrent_requests".into(), Value::Array(during));
    }
    m.insert("response".into(), response(ex));
    Some(Value::Object(m))
}

pub fn file_name(index: usize, ex: &Exchange) -> String {
    format!("{index:02}-{}.json", ex.step)
}

/// Replaces `dir/<sequence>/` with this run's exchanges.
pub fn write_sequence(dir: &Path, seq: &Sequence, exchanges: &[Exchange]) -> Result<usize, String> {
    let folder = dir.join(&seq.name);
    if folder.exists() {
        std::fs::remove_dir_all(&folder)
            .map_err(|e| format!("cannot replace {}: {e}", folder.display()))?;
    }
    std::fs::create_dir_all(&folder)
        .map_err(|e| format!("cannot create {}: {e}", folder.display()))?;
    let mut written = 0;
    for (i, ex) in exchanges.iter().enumerate() {
        let Some(f) = fixture(ex) else { continue };
        let path = folder.join(file_name(i, ex));
        let text = serde_json::to_string_pretty(&f).map_err(|e| e.to_string())? + "\n";
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        written += 1;
    }
    Ok(written)
}

/// `dir/README.md`: every fixture folder with its sequence's description and one line per
/// exchange, rebuilt from the files.
pub fn write_index(dir: &Path, sequences: &[Sequence], header: &str) -> Result<(), String> {
    let mut out = String::from(header);
    let mut folders: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    folders.sort();
    for folder in folders {
        let name = folder
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let description = sequences
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.description.trim().replace('\n', " "))
            .unwrap_or_default();
        let _ = write!(out, "\n### `{name}`\n\n{description}\n\n");
        let mut files: Vec<_> = std::fs::read_dir(&folder)
            .map_err(|e| format!("cannot read {}: {e}", folder.display()))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).map_err(|e| e.to_string())?;
            let v: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            let user = v["request"]["user"].as_str().unwrap_or("admin");
            let _ = writeln!(
                out,
                "- `{}` `{} {}`{} → **{}** — {}",
                f.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                v["request"]["method"].as_str().unwrap_or(""),
                v["request"]["path"].as_str().unwrap_or(""),
                if user == "admin" {
                    String::new()
                } else {
                    format!(" as {user}")
                },
                v["response"]["status"],
                v["description"].as_str().unwrap_or("")
            );
        }
    }
    let path = dir.join("README.md");
    std::fs::write(&path, out).map_err(|e| format!("cannot write {}: {e}", path.display()))
}
