//! IngressClass (`networking.k8s.io/v1`, cluster-scoped): no status, generation on spec
//! changes, `parameters.scope` defaulted to `Cluster`, `ValidateIngressClass` (a domain-prefixed
//! controller, immutable once set; the parameters reference), and the printer's columns. The
//! class annotated [`IS_DEFAULT_CLASS`] is what DefaultIngressClass admission gives a new
//! Ingress that names none ([`default_class`]).

use serde_json::{Value, json};

use super::table::{age, age_column, column, name_column, st};
use super::validate::s;
use super::{Generation, Kind, Subresource, map_mut, map_mut_in, set_default};
use crate::model::ApiResource;
use crate::model::names::{
    HTTP_PATH_FMT, is_dns1123_label, is_dns1123_subdomain, is_valid_path_segment_name,
    matches_http_path, regex_error,
};
use crate::model::schema;
use crate::model::status::{FieldError, go_quote};
use crate::model::time;

pub struct IngressClass;

pub static INGRESS_CLASS: IngressClass = IngressClass;

static API: ApiResource = ApiResource {
    group: "networking.k8s.io",
    version: "v1",
    api_version: "networking.k8s.io/v1",
    resource: "ingressclasses",
    kind: "IngressClass",
    list_kind: "IngressClassList",
    namespaced: false,
};

/// The annotation that makes an IngressClass the cluster's default.
pub const IS_DEFAULT_CLASS: &str = "ingressclass.kubernetes.io/is-default-class";

/// `maxLenIngressClassController`.
const MAX_CONTROLLER_LEN: usize = 250;

impl Kind for IngressClass {
    fn api(&self) -> &'static ApiResource {
        &API
    }

    fn schema(&self) -> usize {
        schema::INGRESS_CLASS
    }

    fn generation(&self) -> Generation {
        Generation::Spec
    }

    fn subresources(&self) -> &'static [Subresource] {
        &[]
    }

    fn default(&self, obj: &mut Value) {
        // SetDefaults_IngressClass: a parameters reference without a scope is cluster-scoped.
        if obj
            .pointer("/spec/parameters")
            .is_some_and(Value::is_object)
            && let Some(spec) = map_mut(obj, "spec")
            && let Some(params) = map_mut_in(spec, "parameters")
        {
            set_default(params, "scope", json!("Cluster"));
        }
    }

    fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        let mut errs = Vec::new();
        if let Some(old) = old {
            let was = old.pointer("/spec/controller").and_then(Value::as_str);
            let now = spec.get("controller").and_then(Value::as_str);
            if was != now {
                errs.push(FieldError::invalid(
                    "spec.controller",
                    &go_quote(now.unwrap_or("")),
                    "field is immutable",
                ));
            }
        }
        errs.extend(validate_spec(spec));
        errs
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "Controller",
                "string",
                "",
                "Controller that is responsible for handling this class",
                0,
            ),
            column(
                "Parameters",
                "string",
                "",
                "A reference to a resource with additional parameters",
                0,
            ),
            age_column(),
        ]
    }

    fn table_cells(&self, obj: &Value, now: i64) -> Vec<Value> {
        let parameters = match obj.pointer("/spec/parameters") {
            Some(p) if p.is_object() => {
                let mut text = s(p, "kind").to_string();
                if let Some(group) = p.get("apiGroup").and_then(Value::as_str) {
                    text = format!("{text}.{group}");
                }
                format!("{text}/{}", s(p, "name"))
            }
            _ => "<none>".to_string(),
        };
        vec![
            json!(st(obj, "/metadata/name")),
            json!(st(obj, "/spec/controller")),
            json!(parameters),
            json!(age(obj, now)),
        ]
    }
}

/// `validateIngressClassSpec`.
fn validate_spec(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let controller = s(spec, "controller");
    if controller.len() > MAX_CONTROLLER_LEN {
        errs.push(FieldError::too_long("spec.controller", MAX_CONTROLLER_LEN));
    }
    errs.extend(domain_prefixed_path("spec.controller", controller));
    if let Some(params) = spec.get("parameters").filter(|p| p.is_object()) {
        errs.extend(validate_parameters(params, "spec.parameters"));
    }
    errs
}

/// `validation.IsDomainPrefixedPath`.
fn domain_prefixed_path(field: &str, value: &str) -> Vec<FieldError> {
    if value.is_empty() {
        return vec![FieldError::required(field, "")];
    }
    let Some((host, path)) = value
        .split_once('/')
        .filter(|(h, p)| !h.is_empty() && !p.is_empty())
    else {
        return vec![FieldError::invalid(
            field,
            &go_quote(value),
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        )];
    };
    let mut errs: Vec<FieldError> = is_dns1123_subdomain(host)
        .iter()
        .map(|m| FieldError::invalid(field, &go_quote(host), m))
        .collect();
    if !matches_http_path(path) {
        errs.push(FieldError::invalid(
            field,
            &go_quote(path),
            &regex_error("Invalid path", HTTP_PATH_FMT, &[]),
        ));
    }
    errs
}

/// `validateIngressClassParametersReference`.
fn validate_parameters(params: &Value, p: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(group) = params.get("apiGroup").and_then(Value::as_str) {
        for m in is_dns1123_subdomain(group) {
            errs.push(FieldError::invalid(
                format!("{p}.apiGroup"),
                &go_quote(group),
                &m,
            ));
        }
    }
    for (field, what) in [("kind", "kind is required"), ("name", "name is required")] {
        let value = s(params, field);
        if value.is_empty() {
            errs.push(FieldError::required(format!("{p}.{field}"), what));
        } else {
            for m in is_valid_path_segment_name(value) {
                errs.push(FieldError::invalid(
                    format!("{p}.{field}"),
                    &go_quote(value),
                    &m,
                ));
            }
        }
    }
    let Some(scope) = params.get("scope").and_then(Value::as_str) else {
        errs.push(FieldError::required(format!("{p}.scope"), ""));
        return errs;
    };
    let namespace = params.get("namespace").and_then(Value::as_str);
    match scope {
        "Namespace" => match namespace {
            None => errs.push(FieldError::required(
                format!("{p}.namespace"),
                "`parameters.scope` is set to 'Namespace'",
            )),
            Some(ns) => {
                for m in is_dns1123_label(ns) {
                    errs.push(FieldError::invalid(
                        format!("{p}.namespace"),
                        &go_quote(ns),
                        &m,
                    ));
                }
            }
        },
        "Cluster" => {
            if namespace.is_some() {
                errs.push(FieldError::forbidden(
                    format!("{p}.namespace"),
                    "`parameters.scope` is set to 'Cluster'",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            format!("{p}.scope"),
            &go_quote(other),
            &["Cluster", "Namespace"],
        )),
    }
    errs
}

/// DefaultIngressClass admission's choice among `classes`: those annotated
/// `is-default-class: "true"`, the newest by creationTimestamp (seconds), ties by name — what
/// v1.28 does when there are several (it no longer refuses them).
pub fn default_class<'a>(classes: impl IntoIterator<Item = &'a Value>) -> Option<&'a Value> {
    let mut defaults: Vec<&Value> = classes
        .into_iter()
        .filter(|c| {
            c.pointer("/metadata/annotations")
                .and_then(|a| a.get(IS_DEFAULT_CLASS))
                .and_then(Value::as_str)
                == Some("true")
        })
        .collect();
    let created = |c: &Value| {
        c.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .and_then(time::parse_rfc3339)
            .unwrap_or(0)
    };
    defaults.sort_by(|a, b| {
        created(b)
            .cmp(&created(a))
            .then_with(|| st(a, "/metadata/name").cmp(st(b, "/metadata/name")))
    });
    defaults.first().copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::status::aggregate;

    fn texts(spec: Value) -> String {
        aggregate(&validate_spec(&spec))
    }

    #[test]
    fn the_controller_is_a_domain_prefixed_path() {
        assert!(validate_spec(&json!({"controller": "k8s.io/ingress-nginx"})).is_empty());
        assert_eq!(texts(json!({})), "spec.controller: Required value");
        assert_eq!(
            texts(json!({"controller": "nginx"})),
            "spec.controller: Invalid value: \"nginx\": must be a domain-prefixed path (such as \"acme.io/foo\")"
        );
        assert_eq!(
            texts(json!({"controller": "Foo_/a b"})),
            "[spec.controller: Invalid value: \"Foo_\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), spec.controller: Invalid value: \"a b\": Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')]"
        );
    }

    #[test]
    fn parameters_follow_their_scope() {
        assert_eq!(
            texts(
                json!({"controller": "a.io/x", "parameters": {"kind": "a/b", "name": "", "scope": "Namespace", "apiGroup": "A_B"}})
            ),
            "[spec.parameters.apiGroup: Invalid value: \"A_B\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), spec.parameters.kind: Invalid value: \"a/b\": may not contain '/', spec.parameters.name: Required value: name is required, spec.parameters.namespace: Required value: `parameters.scope` is set to 'Namespace']"
        );
        assert_eq!(
            texts(
                json!({"controller": "a.io/x", "parameters": {"kind": "..", "name": "a%b", "scope": "Cluster", "namespace": "x"}})
            ),
            "[spec.parameters.kind: Invalid value: \"..\": may not be '..', spec.parameters.name: Invalid value: \"a%b\": may not contain '%', spec.parameters.namespace: Forbidden: `parameters.scope` is set to 'Cluster']"
        );
        assert_eq!(
            texts(
                json!({"controller": "a.io/x", "parameters": {"kind": "K", "name": "n", "scope": "Other"}})
            ),
            "spec.parameters.scope: Unsupported value: \"Other\": supported values: \"Cluster\", \"Namespace\""
        );
    }

    #[test]
    fn a_parameters_reference_without_scope_is_cluster_scoped() {
        let mut obj =
            json!({"spec": {"controller": "a.io/x", "parameters": {"kind": "K", "name": "n"}}});
        INGRESS_CLASS.default(&mut obj);
        assert_eq!(
            obj.pointer("/spec/parameters/scope"),
            Some(&json!("Cluster"))
        );
        let mut without = json!({"spec": {"controller": "a.io/x"}});
        INGRESS_CLASS.default(&mut without);
        assert_eq!(without, json!({"spec": {"controller": "a.io/x"}}));
    }

    #[test]
    fn the_controller_cannot_change() {
        let old = json!({"spec": {"controller": "k8s.io/ingress-nginx"}});
        let new = json!({"spec": {"controller": "k8s.io/other"}});
        assert_eq!(
            aggregate(&INGRESS_CLASS.validate(&new, Some(&old))),
            "spec.controller: Invalid value: \"k8s.io/other\": field is immutable"
        );
    }

    #[test]
    fn the_newest_default_class_wins_and_ties_go_to_the_first_name() {
        let class = |name: &str, created: &str, default: &str| json!({"metadata": {"name": name, "creationTimestamp": created, "annotations": {IS_DEFAULT_CLASS: default}}});
        let classes = [
            class("old", "2026-01-01T00:00:00Z", "true"),
            class("d", "2026-01-02T00:00:00Z", "true"),
            class("c", "2026-01-02T00:00:00Z", "true"),
            class("newest-but-not-default", "2026-01-03T00:00:00Z", "false"),
        ];
        let chosen = default_class(&classes).map(|c| st(c, "/metadata/name"));
        assert_eq!(chosen, Some("c"));
        assert_eq!(default_class(&classes[3..]), None);
    }
}
