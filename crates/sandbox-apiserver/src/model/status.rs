//! `metav1.Status` error bodies with the exact reason/message/details formats of
//! k8s.io/apimachinery/pkg/api/errors.

use serde_json::{Map, Value, json};

use super::ApiResource;

/// An API error (or the Status body of a successful DELETE), as the server would send it.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusBody {
    /// HTTP status code.
    pub code: u16,
    /// `reason` (`NotFound`, `Conflict`, …); empty for success.
    pub reason: String,
    pub message: String,
    /// `details`, when the real server sends the key.
    pub details: Option<Value>,
    /// Extra response headers (`X-Content-Type-Options`, `Retry-After`).
    pub headers: Vec<(String, String)>,
}

impl std::fmt::Display for StatusBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for StatusBody {}

impl StatusBody {
    pub fn new(
        code: u16,
        reason: &str,
        message: impl Into<String>,
        details: Option<Value>,
    ) -> Self {
        StatusBody {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details,
            headers: Vec::new(),
        }
    }

    /// The JSON body, key order as Go serialises `metav1.Status`.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("kind".into(), json!("Status"));
        m.insert("apiVersion".into(), json!("v1"));
        m.insert("metadata".into(), json!({}));
        m.insert("status".into(), json!("Failure"));
        if !self.message.is_empty() {
            m.insert("message".into(), json!(self.message));
        }
        if !self.reason.is_empty() {
            m.insert("reason".into(), json!(self.reason));
        }
        if let Some(d) = &self.details {
            m.insert("details".into(), d.clone());
        }
        m.insert("code".into(), json!(self.code));
        Value::Object(m)
    }
}

/// `details` as Go orders `StatusDetails`: name, group, kind, uid, causes, retryAfterSeconds;
/// empty strings are omitted.
pub fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut m = Map::new();
    if !name.is_empty() {
        m.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        m.insert("group".into(), json!(group));
    }
    if !kind.is_empty() {
        m.insert("kind".into(), json!(kind));
    }
    Value::Object(m)
}

/// `<resource>.<group>` (`deployments.apps`, `services`).
pub fn group_resource(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

pub fn not_found(k: &ApiResource, name: &str) -> StatusBody {
    StatusBody::new(
        404,
        "NotFound",
        format!(
            "{} \"{name}\" not found",
            group_resource(k.group, k.resource)
        ),
        Some(details(name, k.group, k.resource)),
    )
}

/// The 404 of a subresource with its own REST storage (`deployments/scale`).
pub fn subresource_not_found(k: &ApiResource, sub: &str, name: &str) -> StatusBody {
    let resource = format!("{}/{sub}", k.resource);
    StatusBody::new(
        404,
        "NotFound",
        format!(
            "{} \"{name}\" not found",
            group_resource(k.group, &resource)
        ),
        Some(details(name, k.group, &resource)),
    )
}

pub fn namespace_not_found(ns: &str) -> StatusBody {
    StatusBody::new(
        404,
        "NotFound",
        format!("namespaces \"{ns}\" not found"),
        Some(details(ns, "", "namespaces")),
    )
}

/// The NamespaceLifecycle admission's 403 for new content in a namespace being deleted.
pub fn namespace_terminating(k: &ApiResource, name: &str, ns: &str) -> StatusBody {
    let mut d = details(name, k.group, k.resource);
    if let Value::Object(m) = &mut d {
        m.insert(
            "causes".into(),
            json!([{"reason": "NamespaceTerminating", "message": format!("namespace {ns} is being terminated"), "field": "metadata.namespace"}]),
        );
    }
    StatusBody::new(
        403,
        "Forbidden",
        format!(
            "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
            group_resource(k.group, k.resource)
        ),
        Some(d),
    )
}

pub fn already_exists(k: &ApiResource, name: &str) -> StatusBody {
    StatusBody::new(
        409,
        "AlreadyExists",
        format!(
            "{} \"{name}\" already exists",
            group_resource(k.group, k.resource)
        ),
        Some(details(name, k.group, k.resource)),
    )
}

/// `NewConflict(qualifiedResource, name, err)`.
pub fn conflict(group: &str, resource: &str, name: &str, err: &str) -> StatusBody {
    StatusBody::new(
        409,
        "Conflict",
        format!(
            "Operation cannot be fulfilled on {} \"{name}\": {err}",
            group_resource(group, resource)
        ),
        Some(details(name, group, resource)),
    )
}

pub const MODIFIED: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

pub fn conflict_modified(k: &ApiResource, name: &str) -> StatusBody {
    conflict(k.group, k.resource, name, MODIFIED)
}

pub fn bad_request(message: impl Into<String>) -> StatusBody {
    StatusBody::new(400, "BadRequest", message, None)
}

pub fn unauthorized() -> StatusBody {
    StatusBody::new(401, "Unauthorized", "Unauthorized", None)
}

/// `responsewriters.Forbidden` for a resource request.
pub fn forbidden(
    user: &str,
    verb: &str,
    group: &str,
    resource: &str,
    sub: &str,
    namespace: &str,
    name: &str,
) -> StatusBody {
    let res = if sub.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}/{sub}")
    };
    let scope = if namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace \"{namespace}\"")
    };
    let reason = format!(
        "User \"{user}\" cannot {verb} resource \"{res}\" in API group \"{group}\" {scope}"
    );
    let qualified = group_resource(group, resource);
    let message = if name.is_empty() {
        format!("{qualified} is forbidden: {reason}")
    } else {
        format!("{qualified} \"{name}\" is forbidden: {reason}")
    };
    let mut s = StatusBody::new(
        403,
        "Forbidden",
        message,
        Some(details(name, group, resource)),
    );
    s.headers
        .push(("X-Content-Type-Options".into(), "nosniff".into()));
    s
}

/// `responsewriters.Forbidden` for a non-resource URL.
pub fn forbidden_path(user: &str, verb: &str, path: &str) -> StatusBody {
    let mut s = StatusBody::new(
        403,
        "Forbidden",
        format!("forbidden: User \"{user}\" cannot {verb} path \"{path}\""),
        Some(json!({})),
    );
    s.headers
        .push(("X-Content-Type-Options".into(), "nosniff".into()));
    s
}

/// One `field.Error`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// `FieldValueInvalid`, `FieldValueRequired`, …
    pub cause: &'static str,
    pub field: String,
    /// `ErrorBody()`: `Invalid value: 5: must be …`.
    pub body: String,
}

impl FieldError {
    pub fn invalid(field: impl Into<String>, value: &str, detail: &str) -> Self {
        FieldError {
            cause: "FieldValueInvalid",
            field: field.into(),
            body: with_detail(format!("Invalid value: {value}"), detail),
        }
    }
    pub fn required(field: impl Into<String>, detail: &str) -> Self {
        FieldError {
            cause: "FieldValueRequired",
            field: field.into(),
            body: with_detail("Required value".into(), detail),
        }
    }
    pub fn forbidden(field: impl Into<String>, detail: &str) -> Self {
        FieldError {
            cause: "FieldValueForbidden",
            field: field.into(),
            body: with_detail("Forbidden".into(), detail),
        }
    }
    pub fn duplicate(field: impl Into<String>, value: &str) -> Self {
        FieldError {
            cause: "FieldValueDuplicate",
            field: field.into(),
            body: format!("Duplicate value: {value}"),
        }
    }
    pub fn not_supported(field: impl Into<String>, value: &str, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| format!("\"{s}\"")).collect();
        FieldError {
            cause: "FieldValueNotSupported",
            field: field.into(),
            body: format!(
                "Unsupported value: {value}: supported values: {}",
                list.join(", ")
            ),
        }
    }
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        FieldError {
            cause: "FieldValueTooLong",
            field: field.into(),
            body: format!("Too long: must have at most {max} bytes"),
        }
    }
    /// `field.TypeInvalid`: the value is of the wrong JSON type (custom resources).
    pub fn type_invalid(field: impl Into<String>, value: &str, detail: &str) -> Self {
        FieldError {
            cause: "FieldValueTypeInvalid",
            field: field.into(),
            body: with_detail(format!("Invalid value: {value}"), detail),
        }
    }
    /// A string longer than a schema's `maxLength` (custom resources).
    pub fn too_long_chars(field: impl Into<String>, max: u64) -> Self {
        FieldError {
            cause: "FieldValueTooLong",
            field: field.into(),
            body: format!("Too long: may not be longer than {max}"),
        }
    }
    /// `field.TooMany`: more items than `maxItems` (or properties than `maxProperties`).
    pub fn too_many(field: impl Into<String>, actual: u64, max: u64) -> Self {
        FieldError {
            cause: "FieldValueTooMany",
            field: field.into(),
            body: format!("Too many: {actual}: must have at most {max} items"),
        }
    }
    /// `field.Error.Error()`.
    pub fn text(&self) -> String {
        format!("{}: {}", self.field, self.body)
    }
}

fn with_detail(s: String, detail: &str) -> String {
    if detail.is_empty() {
        s
    } else {
        format!("{s}: {detail}")
    }
}

/// Go's `%q` for a string.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `errs.ToAggregate()` formatting: one error as is, several as `[a, b]` (duplicates removed).
pub fn aggregate(errs: &[FieldError]) -> String {
    let mut texts: Vec<String> = Vec::new();
    for e in errs {
        let t = e.text();
        if !texts.contains(&t) {
            texts.push(t);
        }
    }
    if texts.len() == 1 {
        texts.remove(0)
    } else {
        format!("[{}]", texts.join(", "))
    }
}

/// `NewInvalid(<Kind>.<group>, name, errs)`.
pub fn invalid_kind(group: &str, kind: &str, name: &str, errs: &[FieldError]) -> StatusBody {
    let qualified = group_resource(group, kind);
    let message = if errs.is_empty() {
        format!("{qualified} \"{name}\" is invalid")
    } else {
        format!("{qualified} \"{name}\" is invalid: {}", aggregate(errs))
    };
    let mut d = details(name, group, kind);
    let causes: Vec<Value> = errs
        .iter()
        .map(|e| json!({"reason": e.cause, "message": e.body, "field": e.field}))
        .collect();
    if let Value::Object(m) = &mut d {
        m.insert("causes".into(), Value::Array(causes));
    }
    StatusBody::new(422, "Invalid", message, Some(d))
}

pub fn invalid(k: &ApiResource, name: &str, errs: &[FieldError]) -> StatusBody {
    invalid_kind(k.group, k.kind, name, errs)
}

/// `NewGenericServerResponse(code, "", {}, "", serverMessage, 0, false)`: the Status kube builds
/// for a bare HTTP code.
pub fn generic(code: u16, server_message: &str) -> StatusBody {
    let (reason, message) = match code {
        400 => ("BadRequest", "the server rejected our request for an unknown reason".to_string()),
        401 => ("Unauthorized", "the server has asked for the client to provide credentials".to_string()),
        403 => ("Forbidden", server_message.to_string()),
        404 => ("NotFound", "the server could not find the requested resource".to_string()),
        405 => ("MethodNotAllowed", "the server does not allow this method on the requested resource".to_string()),
        406 => ("NotAcceptable", "the server was unable to respond with a content type that the client supports".to_string()),
        409 => ("Conflict", "the server reported a conflict".to_string()),
        415 => ("UnsupportedMediaType", server_message.to_string()),
        422 => ("Invalid", "the server rejected our request due to an error in our request".to_string()),
        429 => ("TooManyRequests", "the server has received too many requests and has asked us to try again later".to_string()),
        503 => ("ServiceUnavailable", "the server is currently unable to handle the request".to_string()),
        504 => (
            "Timeout",
            "the server was unable to return a response in the time allotted, but may still be processing the request".to_string(),
        ),
        c if c >= 500 => (
            "InternalError",
            format!("an error on the server ({}) has prevented the request from succeeding", go_quote(server_message)),
        ),
        _ => ("", format!("the server responded with the status code {code} but did not return more information")),
    };
    StatusBody::new(code, reason, message, Some(json!({})))
}

/// `NewInternalError(err)`.
pub fn internal(err: &str) -> StatusBody {
    StatusBody::new(
        500,
        "InternalError",
        format!("Internal error occurred: {err}"),
        Some(json!({"causes": [{"message": err}]})),
    )
}

/// A plain Go error the handler passes on (`ErrorToAPIStatus`'s default): 500, no reason, the
/// error's text, no details.
pub fn unknown_error(err: &str) -> StatusBody {
    StatusBody::new(500, "", err, None)
}

/// The 200 body of a DELETE that removed (or, under dryRun, would remove) the object.
pub fn delete_success(k: &ApiResource, name: &str, uid: &str) -> Value {
    let mut d = details(name, k.group, k.resource);
    if let Value::Object(m) = &mut d {
        m.insert("uid".into(), json!(uid));
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": d})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregate_formats_like_go() {
        let a = FieldError::invalid(
            "spec.minReplicas",
            "0",
            "must be greater than or equal to 1",
        );
        let b = FieldError::forbidden(
            "spec.metrics",
            "must specify at least one Object or External metric to support scaling to zero replicas",
        );
        assert_eq!(
            aggregate(std::slice::from_ref(&a)),
            "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1"
        );
        assert_eq!(
            aggregate(&[a, b]),
            "[spec.minReplicas: Invalid value: 0: must be greater than or equal to 1, spec.metrics: Forbidden: must specify at least one Object or External metric to support scaling to zero replicas]"
        );
    }
}
