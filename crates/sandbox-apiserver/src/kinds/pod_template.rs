//! The pod template inside workload kinds (Deployment today; DaemonSets, StatefulSets and Jobs
//! would share it): `SetDefaults_PodSpec` and the defaulters of everything in it, and
//! `ValidatePodTemplateSpec`'s checks that clients can trip.

use serde_json::{Map, Value, json};

use super::set_default;
use super::validate::{arr, obj, s, validate_nonnegative};
use crate::model::names::{is_dns1123_label, is_valid_port_name, port_range_msg, regex_error};
use crate::model::quantity;
use crate::model::status::{FieldError, go_quote};

/// SetDefaults_PodSpec and the defaulters of everything inside a pod template.
pub(super) fn default_pod_spec(pod: &mut Map<String, Value>) {
    // The v1 conversion: serviceAccountName from the deprecated serviceAccount when empty, and
    // the deprecated field mirrors it back.
    let sa_name = pod
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .or_else(|| {
            pod.get("serviceAccount")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        })
        .map(str::to_string);
    if let Some(sa) = sa_name {
        pod.insert("serviceAccountName".into(), json!(sa));
        pod.insert("serviceAccount".into(), json!(sa));
    }
    set_default(pod, "restartPolicy", json!("Always"));
    set_default(pod, "terminationGracePeriodSeconds", json!(30));
    set_default(pod, "dnsPolicy", json!("ClusterFirst"));
    set_default(pod, "securityContext", json!({}));
    set_default(pod, "schedulerName", json!("default-scheduler"));
    // hostNetwork → hostPort defaulting is Pod-only in v1.28 (the
    // DefaultHostNetworkHostPortsInPodTemplates gate is off), so templates keep hostPort unset.
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(cs)) = pod.get_mut(list) {
            for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                default_container(c);
            }
        }
    }
    if let Some(Value::Array(vols)) = pod.get_mut("volumes") {
        for v in vols.iter_mut().filter_map(Value::as_object_mut) {
            default_volume(v);
        }
    }
}

fn image_pull_policy(image: &str) -> &'static str {
    // parsers.ParseImageName: no tag and no digest means "latest".
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    let tag = last.split_once(':').map(|(_, t)| t);
    match (tag, digest) {
        (Some("latest"), _) => "Always",
        (None, None) => "Always",
        _ => "IfNotPresent",
    }
}

fn default_probe(p: &mut Map<String, Value>) {
    set_default(p, "timeoutSeconds", json!(1));
    set_default(p, "periodSeconds", json!(10));
    set_default(p, "successThreshold", json!(1));
    set_default(p, "failureThreshold", json!(3));
    default_handler(p);
}

fn default_handler(h: &mut Map<String, Value>) {
    if let Some(Value::Object(g)) = h.get_mut("httpGet") {
        set_default(g, "path", json!("/"));
        set_default(g, "scheme", json!("HTTP"));
    }
}

fn default_container(c: &mut Map<String, Value>) {
    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(c, "terminationMessagePolicy", json!("File"));
    let image = c
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    set_default(c, "imagePullPolicy", json!(image_pull_policy(&image)));
    if let Some(Value::Array(ports)) = c.get_mut("ports") {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            set_default(p, "protocol", json!("TCP"));
        }
    }
    if let Some(Value::Array(env)) = c.get_mut("env") {
        for e in env.iter_mut() {
            if let Some(Value::Object(fr)) = e.pointer_mut("/valueFrom/fieldRef") {
                set_default(fr, "apiVersion", json!("v1"));
            }
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(Value::Object(p)) = c.get_mut(probe) {
            default_probe(p);
        }
    }
    if let Some(Value::Object(lc)) = c.get_mut("lifecycle") {
        for h in ["postStart", "preStop"] {
            if let Some(Value::Object(hm)) = lc.get_mut(h) {
                default_handler(hm);
            }
        }
    }
}

const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

fn default_volume(v: &mut Map<String, Value>) {
    if !VOLUME_SOURCES.iter().any(|s| v.contains_key(*s)) {
        v.insert("emptyDir".into(), json!({}));
    }
    for src in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(Value::Object(m)) = v.get_mut(src) {
            set_default(m, "defaultMode", json!(420));
        }
    }
    if let Some(Value::Object(m)) = v.get_mut("hostPath")
        && !m.contains_key("type")
    {
        m.insert("type".into(), json!(""));
    }
    if let Some(items) = v.get_mut("downwardAPI").and_then(|d| d.get_mut("items")) {
        default_downward_items(items);
    }
    if let Some(Value::Array(sources)) = v.get_mut("projected").and_then(|p| p.get_mut("sources")) {
        for src in sources.iter_mut() {
            if let Some(items) = src.get_mut("downwardAPI").and_then(|d| d.get_mut("items")) {
                default_downward_items(items);
            }
            if let Some(Value::Object(t)) = src.get_mut("serviceAccountToken") {
                set_default(t, "expirationSeconds", json!(3600));
            }
        }
    }
}

/// SetDefaults_ObjectFieldSelector inside downward API volume items.
fn default_downward_items(items: &mut Value) {
    for it in items.as_array_mut().into_iter().flatten() {
        if let Some(Value::Object(fr)) = it.get_mut("fieldRef") {
            set_default(fr, "apiVersion", json!("v1"));
        }
    }
}

/// `<p>.name` of a volume or container: required, a DNS-1123 label, unique among its siblings
/// (`seen`, to which it is added).
fn unique_label_name<'a>(
    name: &'a str,
    p: &str,
    seen: &mut Vec<&'a str>,
    errs: &mut Vec<FieldError>,
) {
    if name.is_empty() {
        errs.push(FieldError::required(format!("{p}.name"), ""));
        return;
    }
    for m in is_dns1123_label(name) {
        errs.push(FieldError::invalid(
            format!("{p}.name"),
            &go_quote(name),
            &m,
        ));
    }
    if seen.contains(&name) {
        errs.push(FieldError::duplicate(format!("{p}.name"), &go_quote(name)));
    }
    seen.push(name);
}

pub(super) fn validate_pod_spec(pod: &Value, path: &str, template: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut volume_names: Vec<&str> = Vec::new();
    for (i, v) in arr(pod, "volumes").iter().enumerate() {
        let p = format!("{path}.volumes[{i}]");
        unique_label_name(s(v, "name"), &p, &mut volume_names, &mut errs);
    }
    let containers = arr(pod, "containers");
    if containers.is_empty() {
        errs.push(FieldError::required(format!("{path}.containers"), ""));
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, c) in arr(pod, "initContainers").iter().enumerate() {
        errs.extend(validate_container(
            c,
            &format!("{path}.initContainers[{i}]"),
            &mut names,
            &volume_names,
        ));
    }
    for (i, c) in containers.iter().enumerate() {
        errs.extend(validate_container(
            c,
            &format!("{path}.containers[{i}]"),
            &mut names,
            &volume_names,
        ));
    }
    let rp = s(pod, "restartPolicy");
    if template && rp != "Always" {
        errs.push(FieldError::not_supported(
            format!("{path}.restartPolicy"),
            &go_quote(rp),
            &["Always"],
        ));
    }
    let dns = s(pod, "dnsPolicy");
    if !["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"].contains(&dns) {
        errs.push(FieldError::not_supported(
            format!("{path}.dnsPolicy"),
            &go_quote(dns),
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        ));
    }
    validate_nonnegative(
        pod.get("terminationGracePeriodSeconds"),
        &format!("{path}.terminationGracePeriodSeconds"),
        &mut errs,
    );
    errs
}

/// `validateProbe` (and the liveness and startup probes' success threshold of 1): exactly one
/// handler, non-negative timings.
fn validate_probe(pr: &Value, p: &str, threshold_one: bool, errs: &mut Vec<FieldError>) {
    let mut handlers = 0;
    for h in ["exec", "httpGet", "tcpSocket", "grpc"] {
        let Some(hv) = pr.get(h).filter(|v| !v.is_null()) else {
            continue;
        };
        let hp = format!("{p}.{h}");
        if handlers > 0 {
            errs.push(FieldError::forbidden(
                &hp,
                "may not specify more than 1 handler type",
            ));
            continue;
        }
        handlers += 1;
        match h {
            "exec" if arr(hv, "command").is_empty() => {
                errs.push(FieldError::required(format!("{hp}.command"), ""));
            }
            "httpGet" => {
                if s(hv, "path").is_empty() {
                    errs.push(FieldError::required(format!("{hp}.path"), ""));
                }
                port_num_or_name(hv.get("port"), &format!("{hp}.port"), errs);
                let scheme = s(hv, "scheme");
                if !["HTTP", "HTTPS"].contains(&scheme) {
                    errs.push(FieldError::not_supported(
                        format!("{hp}.scheme"),
                        &go_quote(scheme),
                        &["HTTP", "HTTPS"],
                    ));
                }
            }
            "tcpSocket" => port_num_or_name(hv.get("port"), &format!("{hp}.port"), errs),
            _ => {}
        }
    }
    if handlers == 0 {
        errs.push(FieldError::required(p, "must specify a handler type"));
    }
    for f in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        validate_nonnegative(pr.get(f), &format!("{p}.{f}"), errs);
    }
    if let Some(t) = pr
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64)
        && t <= 0
    {
        errs.push(FieldError::invalid(
            format!("{p}.terminationGracePeriodSeconds"),
            &t.to_string(),
            "must be greater than 0",
        ));
    }
    if threshold_one
        && let Some(st) = pr.get("successThreshold").and_then(Value::as_i64)
        && st != 1
    {
        errs.push(FieldError::invalid(
            format!("{p}.successThreshold"),
            &st.to_string(),
            "must be 1",
        ));
    }
}

/// `ValidatePortNumOrName`.
fn port_num_or_name(port: Option<&Value>, p: &str, errs: &mut Vec<FieldError>) {
    match port {
        Some(Value::Number(n)) => {
            let n = n.as_i64().unwrap_or(0);
            if !(1..=65535).contains(&n) {
                errs.push(FieldError::invalid(p, &n.to_string(), port_range_msg()));
            }
        }
        Some(Value::String(name)) => {
            for m in is_valid_port_name(name) {
                errs.push(FieldError::invalid(p, &go_quote(name), &m));
            }
        }
        _ => errs.push(FieldError::invalid(p, "0", port_range_msg())),
    }
}

fn validate_container<'a>(
    c: &'a Value,
    p: &str,
    names: &mut Vec<&'a str>,
    volumes: &[&str],
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    unique_label_name(s(c, "name"), p, names, &mut errs);
    let image = s(c, "image");
    if image.is_empty() {
        errs.push(FieldError::required(format!("{p}.image"), ""));
    } else if image.trim() != image {
        errs.push(FieldError::invalid(
            format!("{p}.image"),
            &go_quote(image),
            "must not have leading or trailing whitespace",
        ));
    }
    validate_ports(c, p, &mut errs);
    validate_env(c, p, &mut errs);
    for (j, m) in arr(c, "volumeMounts").iter().enumerate() {
        let n = s(m, "name");
        if !volumes.contains(&n) {
            errs.push(FieldError {
                cause: "FieldValueNotFound",
                field: format!("{p}.volumeMounts[{j}].name"),
                body: format!("Not found: {}", go_quote(n)),
            });
        }
        if s(m, "mountPath").is_empty() {
            errs.push(FieldError::required(
                format!("{p}.volumeMounts[{j}].mountPath"),
                "",
            ));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(pr) = c.get(probe).filter(|v| v.is_object()) {
            validate_probe(
                pr,
                &format!("{p}.{probe}"),
                probe != "readinessProbe",
                &mut errs,
            );
        }
    }
    let ipp = s(c, "imagePullPolicy");
    if !["Always", "IfNotPresent", "Never"].contains(&ipp) {
        errs.push(FieldError::not_supported(
            format!("{p}.imagePullPolicy"),
            &go_quote(ipp),
            &["Always", "IfNotPresent", "Never"],
        ));
    }
    let tmp = s(c, "terminationMessagePolicy");
    if !["File", "FallbackToLogsOnError"].contains(&tmp) {
        errs.push(FieldError::not_supported(
            format!("{p}.terminationMessagePolicy"),
            &go_quote(tmp),
            &["File", "FallbackToLogsOnError"],
        ));
    }
    validate_resources(c, p, &mut errs);
    errs
}

/// `<p>.ports`: names (unique, IANA service names), container and host ports, protocols.
fn validate_ports(c: &Value, p: &str, errs: &mut Vec<FieldError>) {
    let mut port_names: Vec<&str> = Vec::new();
    for (j, port) in arr(c, "ports").iter().enumerate() {
        let pp = format!("{p}.ports[{j}]");
        let pname = s(port, "name");
        if !pname.is_empty() {
            for m in is_valid_port_name(pname) {
                errs.push(FieldError::invalid(
                    format!("{pp}.name"),
                    &go_quote(pname),
                    &m,
                ));
            }
            if port_names.contains(&pname) {
                errs.push(FieldError::duplicate(
                    format!("{pp}.name"),
                    &go_quote(pname),
                ));
            }
            port_names.push(pname);
        }
        let cp = port
            .get("containerPort")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if cp == 0 {
            errs.push(FieldError::required(format!("{pp}.containerPort"), ""));
        } else if !(1..=65535).contains(&cp) {
            errs.push(FieldError::invalid(
                format!("{pp}.containerPort"),
                &cp.to_string(),
                port_range_msg(),
            ));
        }
        if let Some(hp) = port.get("hostPort").and_then(Value::as_i64)
            && hp != 0
            && !(1..=65535).contains(&hp)
        {
            errs.push(FieldError::invalid(
                format!("{pp}.hostPort"),
                &hp.to_string(),
                port_range_msg(),
            ));
        }
        let proto = s(port, "protocol");
        if !["SCTP", "TCP", "UDP"].contains(&proto) {
            errs.push(FieldError::not_supported(
                format!("{pp}.protocol"),
                &go_quote(proto),
                &["SCTP", "TCP", "UDP"],
            ));
        }
    }
}

/// `<p>.env`: names, and `value` and `valueFrom` not both.
fn validate_env(c: &Value, p: &str, errs: &mut Vec<FieldError>) {
    for (j, e) in arr(c, "env").iter().enumerate() {
        let ep = format!("{p}.env[{j}]");
        let n = s(e, "name");
        if n.is_empty() {
            errs.push(FieldError::required(format!("{ep}.name"), ""));
        } else {
            let b = n.as_bytes();
            let ok = !b[0].is_ascii_digit()
                && b.iter().all(|&ch| {
                    ch.is_ascii_alphanumeric() || ch == b'_' || ch == b'-' || ch == b'.'
                });
            if !ok {
                errs.push(FieldError::invalid(
                    format!("{ep}.name"),
                    &go_quote(n),
                    &regex_error(
                        "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit",
                        "[-._a-zA-Z][-._a-zA-Z0-9]*",
                        &["my.env-name", "MY_ENV.NAME", "MyEnvName1"],
                    ),
                ));
            }
        }
        if e.get("value")
            .is_some_and(|v| v.as_str().is_some_and(|s| !s.is_empty()))
            && e.get("valueFrom").is_some()
        {
            errs.push(FieldError::invalid(
                format!("{ep}.valueFrom"),
                "\"\"",
                "may not be specified when `value` is not empty",
            ));
        }
    }
}

/// `<p>.resources`: no negative quantity, requests at most the limits.
fn validate_resources(c: &Value, p: &str, errs: &mut Vec<FieldError>) {
    for (res_kind, res) in ["limits", "requests"]
        .iter()
        .filter_map(|k| c.get("resources").and_then(|r| obj(r, k)).map(|m| (*k, m)))
    {
        for (name, q) in res {
            if let Some(q) = q.as_str()
                && q.starts_with('-')
            {
                errs.push(FieldError::invalid(
                    format!("{p}.resources.{res_kind}[{name}]"),
                    &go_quote(q),
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
    if let (Some(limits), Some(requests)) = (
        c.get("resources").and_then(|r| obj(r, "limits")),
        c.get("resources").and_then(|r| obj(r, "requests")),
    ) {
        for (name, req) in requests {
            let (Some(req_s), Some(lim)) = (req.as_str(), limits.get(name).and_then(Value::as_str))
            else {
                continue;
            };
            if let (Some(a), Some(b)) = (quantity::to_f64(req_s), quantity::to_f64(lim))
                && a > b
            {
                errs.push(FieldError::invalid(
                    format!("{p}.resources.requests"),
                    &go_quote(req_s),
                    &format!("must be less than or equal to {name} limit of {lim}"),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_follows_the_tag() {
        assert_eq!(image_pull_policy("nginx:1.25"), "IfNotPresent");
        assert_eq!(image_pull_policy("nginx"), "Always");
        assert_eq!(image_pull_policy("nginx:latest"), "Always");
        assert_eq!(image_pull_policy("localhost:5000/nginx"), "Always");
        assert_eq!(
            image_pull_policy("registry.example.com/web:1.0"),
            "IfNotPresent"
        );
        assert_eq!(image_pull_policy("nginx@sha256:abc"), "IfNotPresent");
    }

    #[test]
    fn pod_template_defaults_match_v1_28() {
        let mut pod: Map<String, Value> = serde_json::from_value(json!({
            "hostNetwork": true,
            "containers": [{"name": "a", "image": "x", "ports": [{"containerPort": 80}],
                "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "readinessProbe": {"tcpSocket": {"port": 80}}}],
            "volumes": [{"name": "tmp"}, {"name": "cfg", "configMap": {"name": "c"}},
                {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
                {"name": "info", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}}]
        }))
        .unwrap_or_default();
        default_pod_spec(&mut pod);
        let c = &pod["containers"][0];
        assert_eq!(
            c["ports"][0],
            json!({"containerPort": 80, "protocol": "TCP"}),
            "no hostPort in templates"
        );
        assert_eq!(c["imagePullPolicy"], json!("Always"));
        assert_eq!(
            c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"],
            json!("v1")
        );
        assert_eq!(c["readinessProbe"]["periodSeconds"], json!(10));
        assert_eq!(pod["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(pod["volumes"][1]["configMap"]["defaultMode"], json!(420));
        assert_eq!(
            pod["volumes"][2]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
            json!(3600)
        );
        assert_eq!(
            pod["volumes"][3]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"],
            json!("v1")
        );
        assert_eq!(pod["volumes"][3]["downwardAPI"]["defaultMode"], json!(420));
    }
}
