//! Request bodies into objects of a kind, with the texts of the real decoders
//! (`transformDecodeError`, strict field validation, the scheme's version checks).

use serde_json::Value;

use crate::kinds::{self, Encoding, Kind};
use crate::model::gojson;
use crate::model::status::{self, FieldError, StatusBody, go_quote};

/// `?fieldValidation=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

/// The internal API package of a group, as conversion errors name it (`core`, `networking`).
fn internal_package(group: &str) -> &str {
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
    let value = gojson::parse(body)
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
        return decode_custom(k, body, &value, fv, unrecognized);
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
    if body_kind != k.api().kind {
        let msg = match kinds::by_kind(body_kind) {
            Some(other) if other.api().api_version == body_av => format!(
                "{prefix}: converting ({version}.{body_kind}) to ({}.{}): unknown conversion",
                internal_package(k.api().group),
                k.api().kind
            ),
            _ => format!(
                "{prefix}: no kind \"{body_kind}\" is registered for version \"{body_av}\" in scheme \"pkg/api/legacyscheme/scheme.go:30\""
            ),
        };
        return Err(status::bad_request(msg));
    }
    if body_av != k.api().api_version {
        if k.other_versions().contains(&body_av) {
            return Err(status::bad_request(format!(
                "the API version in the data ({body_av}) does not match the expected API version ({})",
                k.api().api_version
            )));
        }
        return Err(status::bad_request(format!(
            "{prefix}: no kind \"{body_kind}\" is registered for version \"{body_av}\" in scheme \"pkg/api/legacyscheme/scheme.go:30\""
        )));
    }
    let decoded = k
        .decode(&value)
        .map_err(|e| status::bad_request(format!("{prefix}: {e}")))?;
    let warnings = unknown_fields(&prefix, &decoded.unknown, fv)?;
    Ok((decoded.value, warnings))
}

/// A custom resource's body, as the apiextensions server decodes it: `kind` required, the
/// `apiVersion` exactly the endpoint's, a `kind` of another type refused by validation (422).
fn decode_custom(
    k: &dyn Kind,
    body: &[u8],
    value: &Value,
    fv: FieldValidation,
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
    let warnings = unknown_fields(&prefix, &decoded.unknown, fv)?;
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

/// What unknown fields become under `fv`: warnings, or (Strict) the 400.
fn unknown_fields(
    prefix: &str,
    unknown: &[String],
    fv: FieldValidation,
) -> Result<Vec<String>, StatusBody> {
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    let texts: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
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
fn summarize(body: &[u8]) -> String {
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
