//! Ingress (`networking.k8s.io/v1`): generation on spec changes, `ValidateIngressSpec`'s
//! paths, backends and hosts, the printer's columns; DefaultIngressClass admission on create,
//! and the validating webhook of ingress-nginx v1.12 when the sandbox runs it.

use serde_json::{Value, json};

use super::ingress_class::{INGRESS_CLASS, default_class};
use super::table::{age, age_column, column, name_column, st};
use super::validate::{arr, s};
use super::{Admission, Generation, Kind, UpdateValidation, map_mut};
use crate::model::ApiResource;
use crate::model::names::{
    is_dns1035_label, is_dns1123_subdomain, is_valid_path_segment_name, is_valid_port_name,
    is_wildcard_dns1123_subdomain, port_range_msg, regex_error,
};
use crate::model::schema;
use crate::model::status::{FieldError, StatusBody, go_quote};

pub struct Ingress;

pub static INGRESS: Ingress = Ingress;

static API: ApiResource = ApiResource {
    group: "networking.k8s.io",
    version: "v1",
    api_version: "networking.k8s.io/v1",
    resource: "ingresses",
    kind: "Ingress",
    list_kind: "IngressList",
    namespaced: true,
};

impl Kind for Ingress {
    fn api(&self) -> &'static ApiResource {
        &API
    }

    fn schema(&self) -> usize {
        schema::INGRESS
    }

    fn generation(&self) -> Generation {
        Generation::Spec
    }

    fn storage_prefix(&self) -> &'static str {
        "ingress"
    }

    fn update_validation(&self) -> UpdateValidation {
        UpdateValidation::MetaUpdateThenObject
    }

    fn validate(&self, obj: &Value, _old: Option<&Value>) -> Vec<FieldError> {
        validate_ingress_spec(obj.get("spec").unwrap_or(&Value::Null))
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        // Only when the annotation is the sole naming of the class.
        let named = obj
            .pointer("/spec/ingressClassName")
            .is_some_and(|c| !c.is_null());
        match annotation(obj, LEGACY_CLASS_ANNOTATION) {
            Some(_) if !named => vec![format!(
                "annotation \"{LEGACY_CLASS_ANNOTATION}\" is deprecated, please use 'spec.ingressClassName' instead"
            )],
            _ => Vec::new(),
        }
    }

    fn admit_create(&self, obj: &mut Value, admission: &Admission<'_>) {
        // DefaultIngressClass: an Ingress that names no class, by field or by the legacy
        // annotation, gets the default IngressClass.
        if obj
            .pointer("/spec/ingressClassName")
            .is_some_and(|c| !c.is_null())
            || annotation(obj, LEGACY_CLASS_ANNOTATION).is_some()
        {
            return;
        }
        let classes = admission.objects.all(&INGRESS_CLASS);
        let Some(name) = default_class(classes).map(|c| st(c, "/metadata/name").to_string()) else {
            return;
        };
        if let Some(spec) = map_mut(obj, "spec") {
            spec.insert("ingressClassName".into(), json!(name));
        }
    }

    fn validate_admission(
        &self,
        obj: &Value,
        _old: Option<&Value>,
        admission: &Admission<'_>,
    ) -> Result<(), StatusBody> {
        match admission.webhooks.ingress_nginx {
            Some(mode) if ingress_nginx_class(obj, admission) => mode.check(obj),
            _ => Ok(()),
        }
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "Class",
                "string",
                "",
                "The name of the IngressClass resource that should be used for additional configuration",
                0,
            ),
            column(
                "Hosts",
                "string",
                "",
                "Hosts that incoming requests are matched against before the ingress rule",
                0,
            ),
            column(
                "Address",
                "string",
                "",
                "Address is a list containing ingress points for the load-balancer",
                0,
            ),
            column(
                "Ports",
                "string",
                "",
                "Ports of TLS configurations that open",
                0,
            ),
            age_column(),
        ]
    }

    fn table_cells(&self, obj: &Value, now: i64) -> Vec<Value> {
        let name = json!(st(obj, "/metadata/name"));
        let a = json!(age(obj, now));
        let class = obj
            .pointer("/spec/ingressClassName")
            .and_then(Value::as_str)
            .unwrap_or("<none>");
        let mut hosts: Vec<String> = obj
            .pointer("/spec/rules")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|r| {
                        r.get("host")
                            .and_then(Value::as_str)
                            .unwrap_or("*")
                            .to_string()
                    })
                    .collect()
            })
            .unwrap_or_default();
        hosts.dedup();
        let hosts = if hosts.is_empty() {
            "*".to_string()
        } else {
            hosts.join(",")
        };
        let tls = obj
            .pointer("/spec/tls")
            .and_then(Value::as_array)
            .is_some_and(|t| !t.is_empty());
        vec![
            name,
            json!(class),
            json!(hosts),
            json!(""),
            json!(if tls { "80, 443" } else { "80" }),
            a,
        ]
    }
}

/// `validateIngressBackend`.
fn validate_ingress_backend(b: &Value, p: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let svc = b.get("service").filter(|v| !v.is_null());
    let res = b.get("resource").filter(|v| !v.is_null());
    match (svc, res) {
        (Some(_), Some(_)) => errs.push(FieldError::invalid(
            p,
            "\"\"",
            "cannot set both resource and service backends",
        )),
        (None, Some(r)) => {
            let rp = format!("{p}.resource");
            if let Some(g) = r.get("apiGroup").and_then(Value::as_str) {
                for m in is_dns1123_subdomain(g) {
                    errs.push(FieldError::invalid(
                        format!("{rp}.apiGroup"),
                        &go_quote(g),
                        &m,
                    ));
                }
            }
            for field in ["kind", "name"] {
                let v = s(r, field);
                if v.is_empty() {
                    errs.push(FieldError::required(
                        format!("{rp}.{field}"),
                        &format!("{field} is required"),
                    ));
                } else {
                    for m in is_valid_path_segment_name(v) {
                        errs.push(FieldError::invalid(
                            format!("{rp}.{field}"),
                            &go_quote(v),
                            &m,
                        ));
                    }
                }
            }
        }
        (Some(svc), None) => {
            let name = s(svc, "name");
            if name.is_empty() {
                errs.push(FieldError::required(format!("{p}.service.name"), ""));
            } else {
                for m in is_dns1035_label(name) {
                    errs.push(FieldError::invalid(
                        format!("{p}.service.name"),
                        &go_quote(name),
                        &m,
                    ));
                }
            }
            let port = svc.get("port").unwrap_or(&Value::Null);
            let pname = s(port, "name");
            let pnum = port.get("number").and_then(Value::as_i64).unwrap_or(0);
            if !pname.is_empty() && pnum != 0 {
                errs.push(FieldError::invalid(
                    p,
                    "\"\"",
                    "cannot set both port name & port number",
                ));
            } else if !pname.is_empty() {
                for m in is_valid_port_name(pname) {
                    errs.push(FieldError::invalid(
                        format!("{p}.service.port.name"),
                        &go_quote(pname),
                        &m,
                    ));
                }
            } else if pnum != 0 {
                if !(1..=65535).contains(&pnum) {
                    errs.push(FieldError::invalid(
                        format!("{p}.service.port.number"),
                        &pnum.to_string(),
                        port_range_msg(),
                    ));
                }
            } else {
                errs.push(FieldError::required(p, "port name or number is required"));
            }
        }
        (None, None) => errs.push(FieldError::invalid(
            p,
            "\"\"",
            "resource or service backend is required",
        )),
    }
    errs
}

/// `IsWildcardDNS1123Subdomain`'s messages.
fn wildcard_errors(host: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if host.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if !is_wildcard_dns1123_subdomain(host) {
        errs.push(regex_error(
            "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character",
            "\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
            &["*.example.com"],
        ));
    }
    errs
}

/// A host of a rule or a TLS entry: a wildcard or a DNS subdomain.
fn host_errors(host: &str) -> Vec<String> {
    if host.contains('*') {
        wildcard_errors(host)
    } else {
        is_dns1123_subdomain(host)
    }
}

/// `ValidateIngressSpec`: rules or a default backend, the default backend, the rules, TLS,
/// then the class name.
fn validate_ingress_spec(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let rules = arr(spec, "rules");
    let default_backend = spec.get("defaultBackend").filter(|v| !v.is_null());
    if rules.is_empty() && default_backend.is_none() {
        errs.push(FieldError::invalid(
            "spec",
            if spec.get("rules").is_some_and(Value::is_array) {
                "[]networking.IngressRule{}"
            } else {
                "[]networking.IngressRule(nil)"
            },
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if let Some(db) = default_backend {
        errs.extend(validate_ingress_backend(db, "spec.defaultBackend"));
    }
    for (i, rule) in rules.iter().enumerate() {
        let rp = format!("spec.rules[{i}]");
        let host = s(rule, "host");
        if !host.is_empty() {
            if host.parse::<std::net::IpAddr>().is_ok() {
                errs.push(FieldError::invalid(
                    format!("{rp}.host"),
                    &go_quote(host),
                    "must be a DNS name, not an IP address",
                ));
            }
            for m in host_errors(host) {
                errs.push(FieldError::invalid(
                    format!("{rp}.host"),
                    &go_quote(host),
                    &m,
                ));
            }
        }
        let Some(http) = rule.get("http").filter(|v| !v.is_null()) else {
            continue;
        };
        let paths = arr(http, "paths");
        if paths.is_empty() {
            errs.push(FieldError::required(format!("{rp}.http.paths"), ""));
        }
        for (j, path) in paths.iter().enumerate() {
            errs.extend(validate_http_path(path, &format!("{rp}.http.paths[{j}]")));
        }
    }
    for (i, tls) in arr(spec, "tls").iter().enumerate() {
        for (j, h) in arr(tls, "hosts").iter().enumerate() {
            let h = h.as_str().unwrap_or("");
            for m in host_errors(h) {
                errs.push(FieldError::invalid(
                    format!("spec.tls[{i}].hosts[{j}]"),
                    &go_quote(h),
                    &m,
                ));
            }
        }
        let secret = s(tls, "secretName");
        if !secret.is_empty() {
            for m in is_dns1123_subdomain(secret) {
                errs.push(FieldError::invalid(
                    format!("spec.tls[{i}].secretName"),
                    &go_quote(secret),
                    &m,
                ));
            }
        }
    }
    if let Some(class) = spec.get("ingressClassName").and_then(Value::as_str) {
        for m in is_dns1123_subdomain(class) {
            errs.push(FieldError::invalid(
                "spec.ingressClassName",
                &go_quote(class),
                &m,
            ));
        }
    }
    errs
}

/// `validateHTTPIngressPath`: a path type, the path it allows, the backend.
fn validate_http_path(path: &Value, pp: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let p = s(path, "path");
    let Some(pt) = path.get("pathType").and_then(Value::as_str) else {
        errs.push(FieldError::required(
            format!("{pp}.pathType"),
            "pathType must be specified",
        ));
        return errs;
    };
    match pt {
        "Exact" | "Prefix" => {
            if !p.starts_with('/') {
                errs.push(FieldError::invalid(
                    format!("{pp}.path"),
                    &go_quote(p),
                    "must be an absolute path",
                ));
            }
            if !p.is_empty() {
                for seq in ["//", "/./", "/../", "%2f", "%2F"] {
                    if p.contains(seq) {
                        errs.push(FieldError::invalid(
                            format!("{pp}.path"),
                            &go_quote(p),
                            &format!("must not contain '{seq}'"),
                        ));
                    }
                }
                for suf in ["/..", "/."] {
                    if p.ends_with(suf) {
                        errs.push(FieldError::invalid(
                            format!("{pp}.path"),
                            &go_quote(p),
                            &format!("cannot end with '{suf}'"),
                        ));
                    }
                }
            }
        }
        "ImplementationSpecific" => {
            if !p.is_empty() && !p.starts_with('/') {
                errs.push(FieldError::invalid(
                    format!("{pp}.path"),
                    &go_quote(p),
                    "must be an absolute path",
                ));
            }
        }
        other => {
            errs.push(FieldError::not_supported(
                format!("{pp}.pathType"),
                &go_quote(other),
                &["Exact", "ImplementationSpecific", "Prefix"],
            ));
        }
    }
    errs.extend(validate_ingress_backend(
        path.get("backend").unwrap_or(&Value::Null),
        &format!("{pp}.backend"),
    ));
    errs
}

/// The annotation that named an Ingress's class before `spec.ingressClassName`.
const LEGACY_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

/// The controller name ingress-nginx's IngressClass carries.
pub const INGRESS_NGINX_CONTROLLER: &str = "k8s.io/ingress-nginx";

/// The name of the IngressClass ingress-nginx installs, and the legacy annotation value it
/// answers to.
pub const INGRESS_NGINX_CLASS: &str = "nginx";

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// ingress-nginx's `GetIngressClass`: does the controller handle this Ingress? Its
/// `ingressClassName` names an IngressClass of controller `k8s.io/ingress-nginx`, or (without
/// one) the legacy annotation says `nginx`. Ingresses of other classes, or of none, are let
/// through unchecked.
fn ingress_nginx_class(obj: &Value, admission: &Admission<'_>) -> bool {
    match obj
        .pointer("/spec/ingressClassName")
        .and_then(Value::as_str)
    {
        Some(name) => admission.objects.all(&INGRESS_CLASS).iter().any(|c| {
            st(c, "/metadata/name") == name && st(c, "/spec/controller") == INGRESS_NGINX_CONTROLLER
        }),
        None => annotation(obj, LEGACY_CLASS_ANNOTATION) == Some(INGRESS_NGINX_CLASS),
    }
}

/// How the emulated ingress-nginx v1.12 is configured, as far as its admission webhook
/// `validate.nginx.ingress.kubernetes.io` refuses snippets. It checks CREATE and UPDATE of the
/// Ingresses its controller handles (dry runs included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IngressNginxWebhook {
    /// `allow-snippet-annotations: "false"` (the default since v1.9): any annotation whose key
    /// ends in `-snippet` is refused with "… annotation cannot be used. Snippet directives are
    /// disabled by the Ingress administrator".
    SnippetsDisabled,
    /// Snippets allowed, `annotations-risk-level: High` (the v1.12 default): the snippet
    /// annotations, which are `Critical`, are refused with "annotation group … contains risky
    /// annotation based on ingress configuration".
    RiskyAnnotations,
}

/// The snippet annotations ingress-nginx v1.12 rates `Critical`, with the annotation group
/// (parser) that reads each.
const CRITICAL_SNIPPETS: &[(&str, &str)] = &[
    ("nginx.ingress.kubernetes.io/auth-snippet", "ExternalAuth"),
    (
        "nginx.ingress.kubernetes.io/configuration-snippet",
        "ConfigurationSnippet",
    ),
    (
        "nginx.ingress.kubernetes.io/modsecurity-snippet",
        "ModSecurity",
    ),
    (
        "nginx.ingress.kubernetes.io/server-snippet",
        "ServerSnippet",
    ),
    (
        "nginx.ingress.kubernetes.io/stream-snippet",
        "StreamSnippet",
    ),
];

impl IngressNginxWebhook {
    /// The name the webhook is registered under.
    pub const NAME: &'static str = "validate.nginx.ingress.kubernetes.io";

    /// `CheckIngress`, as far as snippets go. Annotations are looked at in key order (the
    /// controller walks a Go map, in no fixed order, and reports the first it refuses).
    fn check(self, obj: &Value) -> Result<(), StatusBody> {
        let Some(annotations) = obj
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
        else {
            return Ok(());
        };
        let mut keys: Vec<&String> = annotations.keys().collect();
        keys.sort();
        let refusal = match self {
            IngressNginxWebhook::SnippetsDisabled => keys.iter().find(|k| k.ends_with("-snippet")).map(|k| {
                format!(
                    "{k} annotation cannot be used. Snippet directives are disabled by the Ingress administrator"
                )
            }),
            IngressNginxWebhook::RiskyAnnotations => CRITICAL_SNIPPETS
                .iter()
                .filter(|(key, _)| annotations.contains_key(*key))
                .map(|(_, group)| *group)
                .min()
                .map(|group| {
                    format!(
                        "annotation group {group} contains risky annotation based on ingress configuration"
                    )
                }),
        };
        match refusal {
            None => Ok(()),
            Some(reason) => Err(webhook_denial(Self::NAME, &reason)),
        }
    }

    /// The names the sandbox's options and control surface use.
    pub fn parse(s: &str) -> Option<Option<IngressNginxWebhook>> {
        match s {
            "off" => Some(None),
            "snippets-disabled" => Some(Some(IngressNginxWebhook::SnippetsDisabled)),
            "risky-annotations" => Some(Some(IngressNginxWebhook::RiskyAnnotations)),
            _ => None,
        }
    }

    /// The name [`IngressNginxWebhook::parse`] reads.
    pub fn as_str(self) -> &'static str {
        match self {
            IngressNginxWebhook::SnippetsDisabled => "snippets-disabled",
            IngressNginxWebhook::RiskyAnnotations => "risky-annotations",
        }
    }
}

/// The Status the API server answers when a validating webhook denies a request
/// (`webhookerrors.ToStatusErr`): the webhook's own code and reason (400 `BadRequest` for
/// ingress-nginx) and its message behind `admission webhook "<name>" denied the request: `.
fn webhook_denial(webhook: &str, message: &str) -> StatusBody {
    StatusBody::new(
        400,
        "BadRequest",
        format!("admission webhook \"{webhook}\" denied the request: {message}"),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::{Objects, Webhooks};

    struct Cluster(Vec<Value>);

    impl Objects for Cluster {
        fn all(&self, k: &'static dyn Kind) -> Vec<&Value> {
            if k.api().resource == "ingressclasses" {
                self.0.iter().collect()
            } else {
                Vec::new()
            }
        }
    }

    fn nginx_class(default: bool) -> Value {
        json!({"metadata": {"name": "nginx", "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {"ingressclass.kubernetes.io/is-default-class": if default { "true" } else { "false" }}},
            "spec": {"controller": INGRESS_NGINX_CONTROLLER}})
    }

    fn ingress(class: Option<&str>, annotations: Value) -> Value {
        let mut obj = json!({"metadata": {"name": "web", "annotations": annotations}, "spec": {}});
        if let Some(c) = class {
            obj["spec"]["ingressClassName"] = json!(c);
        }
        obj
    }

    #[test]
    fn an_ingress_without_a_class_gets_the_default_one() {
        let cluster = Cluster(vec![nginx_class(true)]);
        let admission = Admission {
            objects: &cluster,
            webhooks: &Webhooks::default(),
        };
        let mut obj = ingress(None, json!({}));
        INGRESS.admit_create(&mut obj, &admission);
        assert_eq!(obj["spec"]["ingressClassName"], json!("nginx"));
        let mut legacy = ingress(None, json!({LEGACY_CLASS_ANNOTATION: "other"}));
        INGRESS.admit_create(&mut legacy, &admission);
        assert!(
            legacy["spec"].get("ingressClassName").is_none(),
            "the legacy annotation names a class"
        );
        let mut named = ingress(Some("other"), json!({}));
        INGRESS.admit_create(&mut named, &admission);
        assert_eq!(named["spec"]["ingressClassName"], json!("other"));
        let none = Cluster(vec![nginx_class(false)]);
        let mut obj = ingress(None, json!({}));
        INGRESS.admit_create(
            &mut obj,
            &Admission {
                objects: &none,
                webhooks: &Webhooks::default(),
            },
        );
        assert!(obj["spec"].get("ingressClassName").is_none());
    }

    #[test]
    fn the_webhook_refuses_snippets_on_its_own_ingresses_only() {
        let cluster = Cluster(vec![nginx_class(false)]);
        let webhooks = Webhooks {
            ingress_nginx: Some(IngressNginxWebhook::SnippetsDisabled),
        };
        let admission = Admission {
            objects: &cluster,
            webhooks: &webhooks,
        };
        let snippet = json!({"nginx.ingress.kubernetes.io/server-snippet": "x", "nginx.ingress.kubernetes.io/configuration-snippet": "y"});
        let refused = INGRESS
            .validate_admission(&ingress(Some("nginx"), snippet.clone()), None, &admission)
            .unwrap_err();
        assert_eq!((refused.code, refused.reason.as_str()), (400, "BadRequest"));
        assert_eq!(
            refused.message,
            "admission webhook \"validate.nginx.ingress.kubernetes.io\" denied the request: nginx.ingress.kubernetes.io/configuration-snippet annotation cannot be used. Snippet directives are disabled by the Ingress administrator"
        );
        let legacy = json!({"kubernetes.io/ingress.class": "nginx", "example.com/x-snippet": "z"});
        assert!(
            INGRESS
                .validate_admission(&ingress(None, legacy), None, &admission)
                .is_err()
        );
        assert!(
            INGRESS
                .validate_admission(&ingress(Some("other"), snippet.clone()), None, &admission)
                .is_ok()
        );
        assert!(
            INGRESS
                .validate_admission(&ingress(None, snippet.clone()), None, &admission)
                .is_ok()
        );
        let plain = json!({"nginx.ingress.kubernetes.io/auth-url": "http://auth"});
        assert!(
            INGRESS
                .validate_admission(&ingress(Some("nginx"), plain), None, &admission)
                .is_ok()
        );
        let risky = Webhooks {
            ingress_nginx: Some(IngressNginxWebhook::RiskyAnnotations),
        };
        let refused = INGRESS
            .validate_admission(
                &ingress(Some("nginx"), snippet),
                None,
                &Admission {
                    objects: &cluster,
                    webhooks: &risky,
                },
            )
            .unwrap_err();
        assert_eq!(
            refused.message,
            "admission webhook \"validate.nginx.ingress.kubernetes.io\" denied the request: annotation group ConfigurationSnippet contains risky annotation based on ingress configuration"
        );
    }
}
