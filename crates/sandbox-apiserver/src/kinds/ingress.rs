//! Ingress (`networking.k8s.io/v1`): generation on spec changes, `ValidateIngressSpec`'s
//! paths, backends and hosts, and the printer's columns.

use serde_json::{Value, json};

use super::table::{age, age_column, column, name_column, st};
use super::validate::{arr, s};
use super::{Generation, Kind};
use crate::model::ApiResource;
use crate::model::names::{
    is_dns1035_label, is_dns1123_subdomain, is_valid_port_name, is_wildcard_dns1123_subdomain,
    matches_dns1123_subdomain, port_range_msg, regex_error,
};
use crate::model::schema;
use crate::model::status::{FieldError, go_quote};

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

    fn validate(&self, obj: &Value, _old: Option<&Value>) -> Vec<FieldError> {
        validate_ingress_spec(obj.get("spec").unwrap_or(&Value::Null))
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "Class",
                "string",
                "",
                "The name of the IngressClass resource.",
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

fn validate_ingress_backend(b: &Value, p: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let svc = b.get("service");
    let res = b.get("resource");
    match (svc, res) {
        (Some(_), Some(_)) => errs.push(FieldError::invalid(
            p,
            "\"\"",
            "cannot set both service and resource backends",
        )),
        (None, None) => errs.push(FieldError::invalid(
            p,
            "\"\"",
            "one backend (service or resource) must be specified",
        )),
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
                    format!("{p}.service.port"),
                    &go_quote(pname),
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
                errs.push(FieldError::required(
                    format!("{p}.service.port"),
                    "port name or number is required",
                ));
            }
        }
        (None, Some(r)) => {
            if s(r, "kind").is_empty() {
                errs.push(FieldError::required(format!("{p}.resource.kind"), ""));
            }
            if s(r, "name").is_empty() {
                errs.push(FieldError::required(format!("{p}.resource.name"), ""));
            }
        }
    }
    errs
}

fn validate_ingress_spec(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let rules = arr(spec, "rules");
    if let Some(db) = spec.get("defaultBackend") {
        errs.extend(validate_ingress_backend(db, "spec.defaultBackend"));
    } else if rules.is_empty() {
        errs.push(FieldError::invalid(
            "spec.rules",
            "[]networking.IngressRule(nil)",
            "either `defaultBackend` or `rules` must be specified",
        ));
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
    for (i, tls) in arr(spec, "tls").iter().enumerate() {
        for (j, h) in arr(tls, "hosts").iter().enumerate() {
            let h = h.as_str().unwrap_or("");
            if !matches_dns1123_subdomain(h) && !is_wildcard_dns1123_subdomain(h) {
                for m in is_dns1123_subdomain(h) {
                    errs.push(FieldError::invalid(
                        format!("spec.tls[{i}].hosts[{j}]"),
                        &go_quote(h),
                        &m,
                    ));
                }
            }
        }
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
            } else if host.contains('*') {
                if !is_wildcard_dns1123_subdomain(host) {
                    errs.push(FieldError::invalid(
                        format!("{rp}.host"),
                        &go_quote(host),
                        &regex_error(
                            "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character",
                            "\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
                            &["*.example.com"],
                        ),
                    ));
                }
            } else {
                for m in is_dns1123_subdomain(host) {
                    errs.push(FieldError::invalid(
                        format!("{rp}.host"),
                        &go_quote(host),
                        &m,
                    ));
                }
            }
        }
        let Some(http) = rule.get("http") else {
            continue;
        };
        let paths = arr(http, "paths");
        if paths.is_empty() {
            errs.push(FieldError::required(format!("{rp}.http.paths"), ""));
        }
        for (j, path) in paths.iter().enumerate() {
            let pp = format!("{rp}.http.paths[{j}]");
            let p = s(path, "path");
            let Some(pt) = path.get("pathType").and_then(Value::as_str) else {
                errs.push(FieldError::required(
                    format!("{pp}.pathType"),
                    "pathType must be specified",
                ));
                continue;
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
        }
    }
    errs
}
