//! Service (`v1`): defaults (session affinity, type, ports, traffic policies), create on update,
//! DNS-1035 names, the REST layer's cluster IP, IP family and node port allocation (one more
//! revision per create and delete, for the allocator's bitmap), `ValidateService`, and the
//! printer's columns.

use serde_json::{Value, json};

use super::table::{age, age_column, column, name_column, selector_text, st};
use super::validate::{arr, go_string_slice, obj, s, validate_labels};
use super::{Allocators, Kind, UpdateValidation, map_mut, map_mut_in, set_default};
use crate::model::ApiResource;
use crate::model::names::{NameRule, is_dns1123_label, is_valid_port_name, port_range_msg};
use crate::model::schema;
use crate::model::status::{FieldError, go_quote};

pub struct Service;

pub static SERVICE: Service = Service;

static API: ApiResource = ApiResource {
    group: "",
    version: "v1",
    api_version: "v1",
    resource: "services",
    kind: "Service",
    list_kind: "ServiceList",
    namespaced: true,
};

impl Kind for Service {
    fn api(&self) -> &'static ApiResource {
        &API
    }

    fn schema(&self) -> usize {
        schema::SERVICE
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Dns1035Label
    }

    fn create_on_update(&self) -> bool {
        true
    }

    fn storage_prefix(&self) -> &'static str {
        "services/specs"
    }

    fn default(&self, obj: &mut Value) {
        default_service(obj);
    }

    fn update_validation(&self) -> UpdateValidation {
        UpdateValidation::MetaUpdateThenObject
    }

    fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        validate_service_spec(
            obj.get("spec").unwrap_or(&Value::Null),
            old.and_then(|o| o.get("spec")),
        )
    }

    fn allocates(&self) -> bool {
        true
    }

    fn allocate(
        &self,
        obj: &mut Value,
        old: Option<&Value>,
        alloc: &mut Allocators,
        dry_run: bool,
    ) -> Result<(), Vec<FieldError>> {
        allocate_service(obj, old, alloc, dry_run)
    }

    fn release(&self, obj: &Value, alloc: &mut Allocators) {
        if let Some(ip) = obj.pointer("/spec/clusterIP").and_then(Value::as_str) {
            alloc.release_cluster_ip(ip);
        }
        for p in obj
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(np) = p.get("nodePort").and_then(Value::as_i64) {
                alloc.release_node_port(np);
            }
        }
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }

    fn allocator_revisions(&self) -> u64 {
        1
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "Type",
                "string",
                "",
                "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types",
                0,
            ),
            column(
                "Cluster-IP",
                "string",
                "",
                "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
                0,
            ),
            column(
                "External-IP",
                "string",
                "",
                "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system.",
                0,
            ),
            column(
                "Port(s)",
                "string",
                "",
                "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
                0,
            ),
            age_column(),
            column(
                "Selector",
                "string",
                "",
                "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/",
                1,
            ),
        ]
    }

    fn table_cells(&self, obj: &Value, now: i64) -> Vec<Value> {
        let name = json!(st(obj, "/metadata/name"));
        let a = json!(age(obj, now));
        let ty = st(obj, "/spec/type");
        let cluster_ip = match st(obj, "/spec/clusterIP") {
            "" => "<none>",
            ip => ip,
        };
        let external: Vec<&str> = obj
            .pointer("/spec/externalIPs")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let external = match ty {
            "ExternalName" => st(obj, "/spec/externalName").to_string(),
            "LoadBalancer" if external.is_empty() => "<pending>".to_string(),
            _ if external.is_empty() => "<none>".to_string(),
            _ => external.join(","),
        };
        let ports: Vec<String> = obj
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|p| {
                        let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
                        let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
                        match p.get("nodePort").and_then(Value::as_i64) {
                            Some(np) if np != 0 => format!("{port}:{np}/{proto}"),
                            _ => format!("{port}/{proto}"),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        vec![
            name,
            json!(ty),
            json!(cluster_ip),
            json!(external),
            json!(if ports.is_empty() {
                "<none>".to_string()
            } else {
                ports.join(",")
            }),
            a,
            json!(selector_text(
                obj.pointer("/spec/selector").and_then(Value::as_object)
            )),
        ]
    }
}

fn default_service(obj: &mut Value) {
    let Some(spec) = map_mut(obj, "spec") else {
        return;
    };
    set_default(spec, "sessionAffinity", json!("None"));
    if spec.get("sessionAffinity").and_then(Value::as_str) == Some("None") {
        spec.remove("sessionAffinityConfig");
    } else if spec.get("sessionAffinity").and_then(Value::as_str) == Some("ClientIP")
        && let Some(cfg) = map_mut_in(spec, "sessionAffinityConfig")
        && let Some(cip) = map_mut_in(cfg, "clientIP")
    {
        set_default(cip, "timeoutSeconds", json!(10800));
    }
    set_default(spec, "type", json!("ClusterIP"));
    if let Some(Value::Array(ports)) = spec.get_mut("ports") {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            set_default(p, "protocol", json!("TCP"));
            let port = p.get("port").cloned().unwrap_or(json!(0));
            let tp_unset = matches!(p.get("targetPort"), None | Some(Value::Null))
                || p.get("targetPort") == Some(&json!(0))
                || p.get("targetPort") == Some(&json!(""));
            if tp_unset {
                p.insert("targetPort".into(), port);
            }
        }
    }
    let ty = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let external_ips = spec
        .get("externalIPs")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    let externally_accessible =
        ty == "LoadBalancer" || ty == "NodePort" || (ty == "ClusterIP" && external_ips);
    if externally_accessible {
        set_default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if matches!(ty.as_str(), "NodePort" | "LoadBalancer" | "ClusterIP") {
        set_default(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if ty == "LoadBalancer" {
        set_default(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
}

fn validate_service_spec(spec: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ty = s(spec, "type");
    let headless = s(spec, "clusterIP") == "None";
    let ports = arr(spec, "ports");
    if !["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"].contains(&ty) {
        errs.push(FieldError::not_supported(
            "spec.type",
            &go_quote(ty),
            &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
        ));
    }
    if ports.is_empty() && !headless && ty != "ExternalName" {
        errs.push(FieldError::required("spec.ports", ""));
    }
    if ty == "ExternalName" {
        let en = s(spec, "externalName");
        if en.is_empty() {
            errs.push(FieldError::required("spec.externalName", ""));
        }
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let p = format!("spec.ports[{i}]");
        let name = s(port, "name");
        if ports.len() > 1 && name.is_empty() {
            errs.push(FieldError::required(format!("{p}.name"), ""));
        } else if !name.is_empty() {
            for m in is_dns1123_label(name) {
                errs.push(FieldError::invalid(
                    format!("{p}.name"),
                    &go_quote(name),
                    &m,
                ));
            }
            if names.contains(&name) {
                errs.push(FieldError::duplicate(format!("{p}.name"), &go_quote(name)));
            }
            names.push(name);
        }
        let n = port.get("port").and_then(Value::as_i64).unwrap_or(0);
        if !(1..=65535).contains(&n) {
            errs.push(FieldError::invalid(
                format!("{p}.port"),
                &n.to_string(),
                port_range_msg(),
            ));
        }
        let proto = s(port, "protocol");
        if !["SCTP", "TCP", "UDP"].contains(&proto) {
            errs.push(FieldError::not_supported(
                format!("{p}.protocol"),
                &go_quote(proto),
                &["SCTP", "TCP", "UDP"],
            ));
        }
        match port.get("targetPort") {
            Some(Value::Number(t)) => {
                let t = t.as_i64().unwrap_or(0);
                if !(1..=65535).contains(&t) {
                    errs.push(FieldError::invalid(
                        format!("{p}.targetPort"),
                        &t.to_string(),
                        port_range_msg(),
                    ));
                }
            }
            Some(Value::String(t)) => {
                for m in is_valid_port_name(t) {
                    errs.push(FieldError::invalid(
                        format!("{p}.targetPort"),
                        &go_quote(t),
                        &m,
                    ));
                }
            }
            _ => {}
        }
    }
    errs.extend(validate_labels(obj(spec, "selector"), "spec.selector"));
    if let Some(old) = old {
        let old_ip = s(old, "clusterIP");
        let new_ip = s(spec, "clusterIP");
        if !old_ip.is_empty() && old_ip != new_ip && ty != "ExternalName" {
            let shown = spec
                .get("clusterIPs")
                .map(go_string_slice)
                .unwrap_or_else(|| "[]string(nil)".into());
            errs.push(FieldError::invalid(
                "spec.clusterIPs[0]",
                &shown,
                "may not change once set",
            ));
        }
    }
    errs
}

/// The Service REST layer: cluster IPs, IP families, node ports (after the field manager,
/// so none of it shows in managedFields). `old` on update: keep what was allocated.
fn allocate_service(
    obj: &mut Value,
    old: Option<&Value>,
    alloc: &mut Allocators,
    dry_run: bool,
) -> Result<(), Vec<FieldError>> {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let ty = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_string();
    if ty == "ExternalName" {
        return Ok(());
    }
    let old_spec = old.and_then(|o| o.get("spec"));
    // A single-stack IPv4 cluster: dual-stack and IPv6 cannot be had.
    if old.is_none() {
        let mut errs = Vec::new();
        if spec.get("ipFamilyPolicy").and_then(Value::as_str) == Some("RequireDualStack") {
            errs.push(FieldError::invalid(
                "spec.ipFamilyPolicy",
                "\"RequireDualStack\"",
                "this cluster is not configured for dual-stack services",
            ));
        }
        if spec.get("clusterIP").and_then(Value::as_str) != Some("None") {
            for (i, fam) in spec
                .get("ipFamilies")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let fam = fam.as_str().unwrap_or("");
                if fam != "IPv4" {
                    errs.push(FieldError::invalid(
                        format!("spec.ipFamilies[{i}]"),
                        &go_quote(fam),
                        "not configured on this cluster",
                    ));
                }
            }
        }
        if !errs.is_empty() {
            return Err(errs);
        }
        if let Some(ip) = spec
            .get("clusterIP")
            .and_then(Value::as_str)
            .filter(|ip| !ip.is_empty() && *ip != "None")
            && let Err(e) = alloc.claim_cluster_ip(ip, dry_run)
        {
            let ips = spec
                .get("clusterIPs")
                .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
                .cloned()
                .unwrap_or_else(|| json!([ip]));
            return Err(vec![FieldError::invalid(
                "spec.clusterIPs",
                &go_string_slice(&ips),
                &format!("failed to allocate IP {ip}: {e}"),
            )]);
        }
    }
    for f in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        if spec
            .get(f)
            .is_none_or(|v| v.is_null() || v == "" || v.as_array().is_some_and(Vec::is_empty))
            && let Some(v) = old_spec.and_then(|s| s.get(f))
        {
            spec.insert(f.into(), v.clone());
        }
    }
    let ip = match spec.get("clusterIP").and_then(Value::as_str) {
        Some(ip) if !ip.is_empty() => ip.to_string(),
        _ => alloc.cluster_ip(dry_run),
    };
    spec.insert("clusterIP".into(), json!(ip));
    if spec
        .get("clusterIPs")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec.insert("clusterIPs".into(), json!([ip]));
    }
    if spec
        .get("ipFamilies")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec.insert("ipFamilies".into(), json!(["IPv4"]));
    }
    if spec.get("ipFamilyPolicy").is_none() {
        spec.insert("ipFamilyPolicy".into(), json!("SingleStack"));
    }
    if ty == "NodePort" || ty == "LoadBalancer" {
        let old_ports: Vec<Value> = old_spec
            .and_then(|s| s.get("ports"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        // initNodePorts: a requested port is claimed (the allocator's 422 before validation);
        // one the Service already had stays.
        let kept: Vec<i64> = old_ports
            .iter()
            .filter_map(|o| o.get("nodePort").and_then(Value::as_i64))
            .collect();
        let mut claimed: Vec<i64> = Vec::new();
        if let Some(Value::Array(ports)) = spec.get("ports") {
            for (i, p) in ports.iter().enumerate() {
                let Some(np) = p
                    .get("nodePort")
                    .and_then(Value::as_i64)
                    .filter(|n| *n != 0)
                else {
                    continue;
                };
                if kept.contains(&np) || claimed.contains(&np) {
                    continue;
                }
                if let Err(e) = alloc.claim_node_port(np, dry_run) {
                    // The transaction is reverted: what it took is given back.
                    if !dry_run {
                        for c in &claimed {
                            alloc.release_node_port(*c);
                        }
                        if old.is_none() {
                            alloc.release_cluster_ip(&ip);
                        }
                    }
                    return Err(vec![FieldError::invalid(
                        format!("spec.ports[{i}].nodePort"),
                        &np.to_string(),
                        &e,
                    )]);
                }
                claimed.push(np);
            }
        }
        let mut allocated = Vec::new();
        if let Some(Value::Array(ports)) = spec.get_mut("ports") {
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                if p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) == 0 {
                    let reuse = old_ports
                        .iter()
                        .find(|o| o.get("port") == p.get("port"))
                        .and_then(|o| o.get("nodePort"))
                        .cloned();
                    match reuse {
                        Some(np) => {
                            p.insert("nodePort".into(), np);
                        }
                        None => allocated.push(p),
                    }
                }
            }
        }
        for p in allocated {
            let np = alloc.node_port(dry_run);
            p.insert("nodePort".into(), json!(np));
        }
    }
    *obj = schema::normalize(schema::SERVICE, obj);
    Ok(())
}
