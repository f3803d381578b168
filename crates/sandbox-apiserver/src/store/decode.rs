//! Request bodies into objects of a kind, with the texts of the real decoders
//! (`transformDecodeError`, strict field validation, the scheme's version checks).

use serde_json::Value;

use super::patch::{self, SmpError};
use crate::kinds::{self, Encoding, Kind};
use crate::model::gojson;
use crate::model::registered;
use crate::model::status::{self, FieldError, StatusBody, go_quote};

/// `?fieldValidation=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

/// The internal API package of a group, as conversion errors name it (`core`, `networking`).
pub fn internal_package(group: &str) -> &str {
    match group {
        "" => "core",
        other => other.split('.').next().unwrap_or(other),
    }
}

/// Decode a request body into the kind's canonical form (`transformDecodeError` texts).
pub fn decode_body(
    k: &dyn Kind,
    body: &[u8],
    fv: FieldValidation,
) -> Result<(Value, Vec<String>), StatusBody> {
    let unrecognized = |err: &str| {
        status::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): {err} ({})",
            k.api().kind,
            summarize(body)
        ))
    };
    let (value, duplicates) = gojson::parse_with_duplicates(body)
        .map_err(|e| unrecognized(&format!("couldn't get version/kind; json parse error: {e}")))?;
    let Value::Object(m) = &value else {
        let what = match &value {
            Value::Array(_) => "array",
            Value::String(_) => "string",
            Value::Number(_) => "number",
            Value::Bool(_) => "bool",
            _ => "null",
        };
        if value.is_null() {
            return Err(status::bad_request(format!(
                "Object 'Kind' is missing in '{}'",
                String::from_utf8_lossy(body).trim_end()
            )));
        }
        return Err(unrecognized(&format!(
            "couldn't get version/kind; json parse error: json: cannot unmarshal {what} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}"
        )));
    };
    for f in ["apiVersion", "kind"] {
        if let Some(v) = m.get(f)
            && !v.is_string()
            && !v.is_null()
        {
            let what = match v {
                Value::Array(_) => "array",
                Value::Object(_) => "object",
                Value::Number(_) => "number",
                _ => "bool",
            };
            return Err(unrecognized(&format!(
                "couldn't get version/kind; json parse error: json: cannot unmarshal {what} into Go struct field .{f} of type string"
            )));
        }
    }
    if k.encoding() == Encoding::Unstructured {
        return decode_custom(k, body, &value, fv, &duplicates, unrecognized);
    }
    let body_kind = m
        .get("kind")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(k.api().kind);
    let body_av = m
        .get("apiVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(k.api().api_version);
    let version = body_av.rsplit('/').next().unwrap_or(body_av);
    let prefix = format!(
        "{body_kind} in version \"{version}\" cannot be handled as a {}",
        k.api().kind
    );
    let registered = registered::is_registered(body_av, body_kind)
        || kinds::by_kind(body_kind).is_some_and(|other| other.api().api_version == body_av);
    if body_kind != k.api().kind {
        let msg = if registered {
            format!(
                "{prefix}: converting ({version}.{body_kind}) to ({}.{}): unknown conversion",
                internal_package(k.api().group),
                k.api().kind
            )
        } else {
            format!(
                "{prefix}: no kind \"{body_kind}\" is registered for version \"{body_av}\" in scheme \"pkg/runtime/scheme.go:100\""
            )
        };
        return Err(status::bad_request(msg));
    }
    if body_av != k.api().api_version {
        if registered || k.other_versions().contains(&body_av) {
            return Err(status::bad_request(format!(
                "the API version in the data ({body_av}) does not match the expected API version ({})",
                k.api().api_version
            )));
        }
        return Err(status::bad_request(format!(
            "{prefix}: no kind \"{body_kind}\" is registered for version \"{body_av}\" in scheme \"pkg/runtime/scheme.go:100\""
        )));
    }
    let decoded = k
        .decode(&value)
        .map_err(|e| status::bad_request(format!("{prefix}: {e}")))?;
    let warnings = strict_errors(&prefix, &decoded.unknown, &duplicates, fv)?;
    Ok((decoded.value, warnings))
}

/// A custom resource's body, as the apiextensions server decodes it: `kind` required, the
/// `apiVersion` exactly the endpoint's, a `kind` of another type refused by validation (422).
fn decode_custom(
    k: &dyn Kind,
    body: &[u8],
    value: &Value,
    fv: FieldValidation,
    duplicates: &[String],
    unrecognized: impl Fn(&str) -> StatusBody,
) -> Result<(Value, Vec<String>), StatusBody> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or("");
    if text("kind").is_empty() {
        return Err(unrecognized(&format!(
            "Object 'Kind' is missing in '{}'",
            String::from_utf8_lossy(body)
        )));
    }
    if text("apiVersion") != k.api().api_version {
        return Err(status::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version ({})",
            text("apiVersion"),
            k.api().api_version
        )));
    }
    let prefix = format!(
        "{} in version \"{}\" cannot be handled as a {}",
        k.api().kind,
        k.api().version,
        k.api().kind
    );
    let decoded = k
        .decode(value)
        .map_err(|e| status::bad_request(format!("{prefix}: {e}")))?;
    let warnings = strict_errors(&prefix, &decoded.unknown, duplicates, fv)?;
    if text("kind") != k.api().kind {
        let name = value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        return Err(status::invalid_kind(
            k.api().group,
            text("kind"),
            name,
            &[FieldError::invalid(
                "kind",
                &go_quote(text("kind")),
                &format!("must be {}", k.api().kind),
            )],
        ));
    }
    Ok((decoded.value, warnings))
}

/// The JSON kind encoding/json names in its errors.
fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Null => "null",
    }
}

/// The 422 the patch handlers answer when the patched object does not decode: the patched
/// document (or, for a strategic merge patch, the patch as a Go map) and the error.
fn invalid_patch(shown: &str, err: &str) -> StatusBody {
    status::invalid_kind(
        "",
        "",
        "",
        &[FieldError::invalid("patch", &status::go_quote(shown), err)],
    )
}

/// A PATCH body (`content_type` without parameters) applied to `current` (the object as the
/// server writes it) and decoded through the kind's Go type, with the real patch handlers'
/// checks and texts: the patch itself decoded strictly unless `fieldValidation=Ignore`
/// (`error decoding patch: …`, duplicate fields), then applied, then the result decoded
/// (422 `patch: Invalid value: <the patched document>: <error>`), unknown and duplicate
/// fields warned about or refused as `fv` says. Returns the decoded object and the warnings.
pub fn decode_patch(
    k: &dyn Kind,
    current: &Value,
    content_type: &str,
    body: &[u8],
    fv: FieldValidation,
) -> Result<(Value, Vec<String>), StatusBody> {
    let strict = fv != FieldValidation::Ignore;
    let mut strict_errs: Vec<String> = Vec::new();
    // (patched object, how an error shows it, whether it went through a Go map)
    let (patched, shown, unstructured) = match content_type {
        "application/json-patch+json" => {
            let ops = if strict {
                let (v, dups) = gojson::parse_with_duplicates(body)
                    .map_err(|e| status::bad_request(format!("error decoding patch: {e}")))?;
                let decode_err = |what: String| {
                    status::bad_request(format!(
                        "error decoding patch: json: cannot unmarshal {what}"
                    ))
                };
                let ops = match v {
                    Value::Array(ops) => ops,
                    Value::Null => Vec::new(),
                    other => {
                        return Err(decode_err(format!(
                            "{} into Go value of type []handlers.jsonPatchOp",
                            json_kind(&other)
                        )));
                    }
                };
                for (i, op) in ops.iter().enumerate() {
                    match op {
                        Value::Object(m) => {
                            for f in ["op", "path", "from"] {
                                if let Some(x) = m.get(f)
                                    && !x.is_string()
                                    && !x.is_null()
                                {
                                    return Err(decode_err(format!(
                                        "{} into Go struct field jsonPatchOp.{f} of type string",
                                        json_kind(x)
                                    )));
                                }
                            }
                            for key in m.keys() {
                                if !["op", "path", "from", "value"].contains(&key.as_str()) {
                                    strict_errs
                                        .push(format!("json patch unknown field \"[{i}].{key}\""));
                                }
                            }
                        }
                        Value::Null => {}
                        other => {
                            return Err(decode_err(format!(
                                "{} into Go value of type handlers.jsonPatchOp",
                                json_kind(other)
                            )));
                        }
                    }
                }
                strict_errs.extend(
                    dups.iter()
                        .map(|d| format!("json patch duplicate field \"{d}\"")),
                );
                ops
            } else {
                match gojson::parse(body).map_err(status::bad_request)? {
                    Value::Array(ops) => ops,
                    other => {
                        return Err(status::bad_request(format!(
                            "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
                            json_kind(&other)
                        )));
                    }
                }
            };
            // The real server loses the cause: a generic 422.
            let patched = patch::json_patch(current, &ops).map_err(|_| status::generic(422, ""))?;
            let shown = gojson::json_patch_text(&patched, &ops);
            (patched, shown, false)
        }
        "application/merge-patch+json" => {
            if strict {
                let (v, dups) = gojson::parse_with_duplicates(body)
                    .map_err(|e| status::bad_request(format!("error decoding patch: {e}")))?;
                if !v.is_object() && !v.is_null() {
                    return Err(status::bad_request(format!(
                        "error decoding patch: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                        json_kind(&v)
                    )));
                }
                strict_errs.extend(dups.iter().map(|d| format!("duplicate field \"{d}\"")));
            }
            let p = gojson::parse(body).map_err(|_| status::bad_request("Invalid JSON Patch"))?;
            match &p {
                Value::Object(pm) => {
                    let shown = gojson::merge_patch_text(current, pm);
                    (patch::merge_patch(current, &p), shown, false)
                }
                // evanphx/json-patch returns an array itself, which then fails to decode.
                Value::Array(_) => {
                    let shown = gojson::compact(&p);
                    (p, shown, false)
                }
                _ => return Err(status::bad_request("Invalid JSON Patch")),
            }
        }
        "application/strategic-merge-patch+json" => {
            let (p, dups) = gojson::parse_with_duplicates(body).map_err(status::bad_request)?;
            if !p.is_object() && !p.is_null() {
                return Err(status::bad_request(format!(
                    "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                    json_kind(&p)
                )));
            }
            if strict {
                strict_errs.extend(dups.iter().map(|d| format!("duplicate field \"{d}\"")));
            }
            let p = if p.is_null() {
                Value::Object(Default::default())
            } else {
                p
            };
            let merged = match patch::strategic_merge(current, &p, k.schema()) {
                Ok(v) => v,
                Err(SmpError::BadRequest(m)) => return Err(status::bad_request(m)),
                Err(SmpError::Internal(m)) => return Err(status::unknown_error(&m)),
            };
            (merged, patch::go_fmt(&p), true)
        }
        _ => return Err(status::generic(415, "415: Unsupported Media Type")),
    };
    let decoded = if unstructured {
        crate::model::schema::from_unstructured(k.schema(), &patched)
    } else {
        k.decode(&patched)
    }
    .map_err(|e| invalid_patch(&shown, &e.to_string()))?;
    if strict {
        strict_errs.extend(
            decoded
                .unknown
                .iter()
                .map(|f| format!("unknown field \"{f}\"")),
        );
    }
    let mut warnings = Vec::new();
    if !strict_errs.is_empty() {
        match fv {
            FieldValidation::Strict => {
                return Err(invalid_patch(
                    &shown,
                    &format!("strict decoding error: {}", strict_errs.join(", ")),
                ));
            }
            FieldValidation::Warn => warnings = strict_errs,
            FieldValidation::Ignore => {}
        }
    }
    Ok((decoded.value, warnings))
}

/// Strict decoding errors: unknown fields, then fields given twice (the real decoder reports
/// them interleaved, in document order); refused, warned about or ignored as `fv` says.
fn strict_errors(
    prefix: &str,
    unknown: &[String],
    duplicates: &[String],
    fv: FieldValidation,
) -> Result<Vec<String>, StatusBody> {
    let texts: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .chain(
            duplicates
                .iter()
                .map(|f| format!("duplicate field \"{f}\"")),
        )
        .collect();
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    match fv {
        FieldValidation::Strict => Err(status::bad_request(format!(
            "{prefix}: strict decoding error: {}",
            texts.join(", ")
        ))),
        FieldValidation::Warn => Ok(texts),
        FieldValidation::Ignore => Ok(Vec::new()),
    }
}

/// `summarizeData(body, 30)`.
pub fn summarize(body: &[u8]) -> String {
    if body.is_empty() {
        return "<empty>".into();
    }
    if body[0] == b'{' {
        if body.len() > 30 {
            return format!("{} ...", String::from_utf8_lossy(&body[..30]));
        }
        return String::from_utf8_lossy(body).into_owned();
    }
    let hex: String = body.iter().take(30).map(|b| format!("{b:02x}")).collect();
    if body.len() > 30 {
        format!("{hex} ...")
    } else {
        hex
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_match_go() {
        assert_eq!(
            summarize(br#"{"apiVersion":"apps/v1","kind":"Deployment"}"#),
            r#"{"apiVersion":"apps/v1","kind" ..."#
        );
        assert_eq!(summarize(b""), "<empty>");
        assert_eq!(summarize(b"[1]"), "5b315d");
    }
}
