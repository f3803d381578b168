//! The five served kinds and what their v1.28 registry strategies do: defaulting (at decode
//! time, so it shows in managedFields), PrepareForCreate/PrepareForUpdate (status reset,
//! generation rules), field selectors and `kubectl get` table columns.

use serde_json::{Map, Value, json};

use crate::schema;
use crate::validation::NameRule;

/// A served resource.
#[derive(Debug)]
pub struct Kind {
    pub resource: &'static str,
    pub kind: &'static str,
    pub list_kind: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub api_version: &'static str,
    pub namespaced: bool,
    pub type_idx: usize,
    /// Deployment and Ingress track `metadata.generation`.
    pub has_generation: bool,
    /// `AllowCreateOnUpdate()` of the strategy.
    pub create_on_update: bool,
    pub name_rule: NameRule,
    /// Field selector labels besides metadata.name / metadata.namespace.
    pub extra_field_labels: &'static [&'static str],
}

pub static KINDS: [Kind; 5] = [
    Kind {
        resource: "namespaces",
        kind: "Namespace",
        list_kind: "NamespaceList",
        group: "",
        version: "v1",
        api_version: "v1",
        namespaced: false,
        type_idx: schema::NAMESPACE,
        has_generation: false,
        create_on_update: false,
        name_rule: NameRule::Dns1123Label,
        extra_field_labels: &["status.phase"],
    },
    Kind {
        resource: "services",
        kind: "Service",
        list_kind: "ServiceList",
        group: "",
        version: "v1",
        api_version: "v1",
        namespaced: true,
        type_idx: schema::SERVICE,
        has_generation: false,
        create_on_update: true,
        name_rule: NameRule::Dns1035Label,
        extra_field_labels: &[],
    },
    Kind {
        resource: "deployments",
        kind: "Deployment",
        list_kind: "DeploymentList",
        group: "apps",
        version: "v1",
        api_version: "apps/v1",
        namespaced: true,
        type_idx: schema::DEPLOYMENT,
        has_generation: true,
        create_on_update: false,
        name_rule: NameRule::Dns1123Subdomain,
        extra_field_labels: &[],
    },
    Kind {
        resource: "horizontalpodautoscalers",
        kind: "HorizontalPodAutoscaler",
        list_kind: "HorizontalPodAutoscalerList",
        group: "autoscaling",
        version: "v2",
        api_version: "autoscaling/v2",
        namespaced: true,
        type_idx: schema::HORIZONTAL_POD_AUTOSCALER,
        has_generation: false,
        create_on_update: false,
        name_rule: NameRule::Dns1123Subdomain,
        extra_field_labels: &[],
    },
    Kind {
        resource: "ingresses",
        kind: "Ingress",
        list_kind: "IngressList",
        group: "networking.k8s.io",
        version: "v1",
        api_version: "networking.k8s.io/v1",
        namespaced: true,
        type_idx: schema::INGRESS,
        has_generation: true,
        create_on_update: false,
        name_rule: NameRule::Dns1123Subdomain,
        extra_field_labels: &[],
    },
];

pub fn lookup(group: &str, version: &str, resource: &str) -> Option<&'static Kind> {
    KINDS
        .iter()
        .find(|k| k.group == group && k.version == version && k.resource == resource)
}

pub fn by_kind(kind: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.kind == kind)
}

/// `kind` + `apiVersion` first, then the rest: how the server writes an object.
pub fn with_type_meta(k: &Kind, obj: &Value) -> Value {
    let mut m = Map::new();
    m.insert("kind".into(), json!(k.kind));
    m.insert("apiVersion".into(), json!(k.api_version));
    if let Value::Object(o) = obj {
        for (key, v) in o {
            if key != "kind" && key != "apiVersion" {
                m.insert(key.clone(), v.clone());
            }
        }
    }
    Value::Object(m)
}

fn map_mut<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let m = v.as_object_mut()?;
    if !m.get(key).is_some_and(Value::is_object) {
        m.insert(key.to_string(), json!({}));
    }
    m.get_mut(key).and_then(Value::as_object_mut)
}

fn set_default(m: &mut Map<String, Value>, key: &str, v: Value) {
    let missing = match m.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        _ => false,
    };
    if missing {
        m.insert(key.to_string(), v);
    }
}

/// The defaulting functions registered for the external versions (SetDefaults_*).
pub fn apply_defaults(k: &Kind, obj: &mut Value) {
    match k.kind {
        "Deployment" => default_deployment(obj),
        "Service" => default_service(obj),
        "HorizontalPodAutoscaler" => default_hpa(obj),
        "Namespace" => {
            let name = obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if !name.is_empty()
                && let Some(meta) = map_mut(obj, "metadata")
                && let Some(labels) = map_mut_in(meta, "labels")
            {
                labels.insert("kubernetes.io/metadata.name".into(), json!(name));
            }
            if let Some(status) = map_mut(obj, "status") {
                set_default(status, "phase", json!("Active"));
            }
        }
        _ => {}
    }
}

fn map_mut_in<'a>(m: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    if !m.get(key).is_some_and(Value::is_object) {
        m.insert(key.to_string(), json!({}));
    }
    m.get_mut(key).and_then(Value::as_object_mut)
}

fn default_deployment(obj: &mut Value) {
    let Some(spec) = map_mut(obj, "spec") else {
        return;
    };
    set_default(spec, "replicas", json!(1));
    if let Some(strategy) = map_mut_in(spec, "strategy") {
        set_default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(ru) = map_mut_in(strategy, "rollingUpdate")
        {
            set_default(ru, "maxUnavailable", json!("25%"));
            set_default(ru, "maxSurge", json!("25%"));
        }
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
    if let Some(template) = map_mut_in(spec, "template")
        && let Some(pod) = map_mut_in(template, "spec")
    {
        default_pod_spec(pod);
    }
}

/// SetDefaults_PodSpec and the defaulters of everything inside a pod template.
pub fn default_pod_spec(pod: &mut Map<String, Value>) {
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

fn default_hpa(obj: &mut Value) {
    let Some(spec) = map_mut(obj, "spec") else {
        return;
    };
    set_default(spec, "minReplicas", json!(1));
    if spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
    if let Some(Value::Object(b)) = spec.get_mut("behavior") {
        let up = b.entry("scaleUp").or_insert_with(|| json!({}));
        if let Some(up) = up.as_object_mut() {
            set_default(up, "stabilizationWindowSeconds", json!(0));
            set_default(up, "selectPolicy", json!("Max"));
            if up
                .get("policies")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
            {
                up.insert(
                    "policies".into(),
                    json!([{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]),
                );
            }
        }
        let down = b.entry("scaleDown").or_insert_with(|| json!({}));
        if let Some(down) = down.as_object_mut() {
            set_default(down, "stabilizationWindowSeconds", json!(300));
            set_default(down, "selectPolicy", json!("Max"));
            if down
                .get("policies")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
            {
                down.insert(
                    "policies".into(),
                    json!([{"type": "Percent", "value": 100, "periodSeconds": 15}]),
                );
            }
        }
    }
}

/// PrepareForCreate: status reset, generation 1, namespace finalizer.
pub fn prepare_create(k: &Kind, obj: &mut Value) {
    let zero_status = schema::zero_struct(schema::type_def(k.type_idx))
        .get("status")
        .cloned()
        .unwrap_or(json!({}));
    if let Some(m) = obj.as_object_mut() {
        m.insert("status".into(), zero_status);
    }
    if k.has_generation
        && let Some(meta) = map_mut(obj, "metadata")
    {
        meta.insert("generation".into(), json!(1));
    }
    if k.kind == "Namespace" {
        if let Some(status) = map_mut(obj, "status") {
            status.insert("phase".into(), json!("Active"));
        }
        if let Some(spec) = map_mut(obj, "spec") {
            let has = spec
                .get("finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| f.iter().any(|x| x == "kubernetes"));
            if !has {
                let mut list = spec
                    .get("finalizers")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                list.push(json!("kubernetes"));
                spec.insert("finalizers".into(), Value::Array(list));
            }
        }
    }
}

/// BeforeUpdate + PrepareForUpdate: generation and status come from the stored object; the
/// generation moves on a spec change (Deployments: also on an annotation change).
pub fn prepare_update(k: &Kind, new: &mut Value, old: &Value) {
    let old_gen = old.pointer("/metadata/generation").cloned();
    let spec_changed = new.get("spec") != old.get("spec");
    let ann = |v: &Value| {
        v.pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .filter(|m| !m.is_empty())
            .cloned()
    };
    let annotations_changed = ann(new) != ann(old);
    if let Some(m) = new.as_object_mut() {
        match old.get("status") {
            Some(s) => m.insert("status".into(), s.clone()),
            None => m.remove("status"),
        };
    }
    if k.kind == "Namespace" {
        let old_fin = old.pointer("/spec/finalizers").cloned();
        if let Some(spec) = map_mut(new, "spec") {
            match old_fin {
                Some(f) => spec.insert("finalizers".into(), f),
                None => spec.remove("finalizers"),
            };
        }
    }
    if let Some(meta) = map_mut(new, "metadata") {
        match &old_gen {
            Some(g) => meta.insert("generation".into(), g.clone()),
            None => meta.remove("generation"),
        };
        for f in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            let keep = old.pointer(&format!("/metadata/{f}")).cloned();
            let client = meta.get(f).cloned();
            match (f, keep, client) {
                // An empty uid means "the existing one"; a different one fails validation.
                ("uid", Some(k), None) => {
                    meta.insert(f.into(), k);
                }
                ("uid", _, _) => {}
                (_, Some(k), _) => {
                    meta.insert(f.into(), k);
                }
                (_, None, _) => {
                    meta.remove(f);
                }
            }
        }
    }
    if k.has_generation && (spec_changed || (k.kind == "Deployment" && annotations_changed)) {
        let g = old_gen.and_then(|g| g.as_i64()).unwrap_or(0) + 1;
        if let Some(meta) = map_mut(new, "metadata") {
            meta.insert("generation".into(), json!(g));
        }
    }
}

/// The value of a field-selector label for an object.
pub fn field_value(k: &Kind, obj: &Value, field: &str) -> Option<String> {
    match field {
        "metadata.name" => obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(str::to_string),
        "metadata.namespace" => Some(
            obj.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        ),
        "status.phase" if k.kind == "Namespace" => obj
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .map(str::to_string),
        _ => None,
    }
}

pub fn field_label_supported(k: &Kind, field: &str) -> bool {
    matches!(field, "metadata.name" | "metadata.namespace") || k.extra_field_labels.contains(&field)
}

// ---------------------------------------------------------------------------------------------
// `kubectl get` tables (meta.k8s.io/v1 Table), with the columns of the real printers.

fn column(name: &str, ty: &str, format: &str, description: &str, priority: i64) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

fn age(obj: &Value, now: i64) -> String {
    let Some(t) = obj
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(crate::timefmt::parse_rfc3339)
    else {
        return "<unknown>".into();
    };
    human_duration(now - t)
}

/// `duration.HumanDuration`.
pub fn human_duration(secs: i64) -> String {
    let s = secs.max(0);
    if s < 60 * 2 {
        return format!("{s}s");
    }
    let m = s / 60;
    if m < 10 {
        let rs = s % 60;
        return if rs == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{rs}s")
        };
    }
    if m < 60 * 3 {
        return format!("{m}m");
    }
    let h = s / 3600;
    if h < 8 {
        let rm = m % 60;
        return if rm == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{rm}m")
        };
    }
    if h < 48 {
        return format!("{h}h");
    }
    if h < 24 * 8 {
        let d = h / 24;
        let rh = h % 24;
        return if rh == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{rh}h")
        };
    }
    if h < 24 * 365 * 2 {
        return format!("{}d", h / 24);
    }
    if h < 24 * 365 * 8 {
        let y = h / 24 / 365;
        let dy = (h / 24) % 365;
        return if dy == 0 {
            format!("{y}y")
        } else {
            format!("{y}y{dy}d")
        };
    }
    format!("{}y", h / 24 / 365)
}

fn i(obj: &Value, ptr: &str) -> i64 {
    obj.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

fn st<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn selector_text(sel: Option<&Map<String, Value>>) -> String {
    match sel {
        None => "<none>".into(),
        Some(m) if m.is_empty() => "<none>".into(),
        Some(m) => {
            let mut items: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect();
            items.sort();
            items.join(",")
        }
    }
}

/// Column definitions and one row's cells for `k`.
pub fn table_columns(k: &Kind) -> Vec<Value> {
    let name = column(
        "Name",
        "string",
        "name",
        "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
        0,
    );
    let age = column(
        "Age",
        "string",
        "",
        "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
        0,
    );
    match k.kind {
        "Deployment" => vec![
            name,
            column(
                "Ready",
                "string",
                "",
                "Number of the pod with ready state",
                0,
            ),
            column(
                "Up-to-date",
                "integer",
                "",
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
                0,
            ),
            column(
                "Available",
                "integer",
                "",
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
                0,
            ),
            age,
            column(
                "Containers",
                "string",
                "",
                "Names of each container in the template.",
                1,
            ),
            column(
                "Images",
                "string",
                "",
                "Images referenced by each container in the template.",
                1,
            ),
            column(
                "Selector",
                "string",
                "",
                "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
                1,
            ),
        ],
        "Service" => vec![
            name,
            column(
                "Type",
                "string",
                "",
                "type determines how the Service is exposed.",
                0,
            ),
            column(
                "Cluster-IP",
                "string",
                "",
                "clusterIP is the IP address of the service and is usually assigned randomly.",
                0,
            ),
            column(
                "External-IP",
                "string",
                "",
                "List of IP addresses for which nodes in the cluster will also accept traffic for this service.",
                0,
            ),
            column(
                "Port(s)",
                "string",
                "",
                "The list of ports that are exposed by this service.",
                0,
            ),
            age,
            column(
                "Selector",
                "string",
                "",
                "Route service traffic to pods with label keys and values matching this selector.",
                1,
            ),
        ],
        "HorizontalPodAutoscaler" => vec![
            name,
            column(
                "Reference",
                "string",
                "",
                "reference to the target object",
                0,
            ),
            column("Targets", "string", "", "the current and target metrics", 0),
            column(
                "MinPods",
                "string",
                "",
                "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.",
                0,
            ),
            column(
                "MaxPods",
                "integer",
                "",
                "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up.",
                0,
            ),
            column(
                "Replicas",
                "integer",
                "",
                "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
                0,
            ),
            age,
        ],
        "Ingress" => vec![
            name,
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
            age,
        ],
        _ => vec![
            name,
            column("Status", "string", "", "The status of the namespace", 0),
            age,
        ],
    }
}

pub fn table_cells(k: &Kind, obj: &Value, now: i64) -> Vec<Value> {
    let name = json!(st(obj, "/metadata/name"));
    let a = json!(age(obj, now));
    match k.kind {
        "Deployment" => {
            let containers: Vec<&Value> = obj
                .pointer("/spec/template/spec/containers")
                .and_then(Value::as_array)
                .map(|a| a.iter().collect())
                .unwrap_or_default();
            let names: Vec<&str> = containers
                .iter()
                .map(|c| c.get("name").and_then(Value::as_str).unwrap_or(""))
                .collect();
            let images: Vec<&str> = containers
                .iter()
                .map(|c| c.get("image").and_then(Value::as_str).unwrap_or(""))
                .collect();
            vec![
                name,
                json!(format!(
                    "{}/{}",
                    i(obj, "/status/readyReplicas"),
                    i(obj, "/spec/replicas")
                )),
                json!(i(obj, "/status/updatedReplicas")),
                json!(i(obj, "/status/availableReplicas")),
                a,
                json!(names.join(",")),
                json!(images.join(",")),
                json!(selector_text(
                    obj.pointer("/spec/selector/matchLabels")
                        .and_then(Value::as_object)
                )),
            ]
        }
        "Service" => {
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
        "HorizontalPodAutoscaler" => {
            let reference = format!(
                "{}/{}",
                st(obj, "/spec/scaleTargetRef/kind"),
                st(obj, "/spec/scaleTargetRef/name")
            );
            let targets: Vec<String> = obj
                .pointer("/spec/metrics")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|m| {
                            let res = m.get("resource").or_else(|| m.get("containerResource"));
                            match res
                                .and_then(|r| r.pointer("/target/averageUtilization"))
                                .and_then(Value::as_i64)
                            {
                                Some(u) => format!("<unknown>/{u}%"),
                                None => "<unknown>/<unknown>".to_string(),
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            vec![
                name,
                json!(reference),
                json!(if targets.is_empty() {
                    "<none>".to_string()
                } else {
                    targets.join(", ")
                }),
                json!(
                    obj.pointer("/spec/minReplicas")
                        .and_then(Value::as_i64)
                        .map(|m| m.to_string())
                        .unwrap_or_else(|| "<unset>".into())
                ),
                json!(i(obj, "/spec/maxReplicas")),
                json!(i(obj, "/status/currentReplicas")),
                a,
            ]
        }
        "Ingress" => {
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
        _ => vec![name, json!(st(obj, "/status/phase")), a],
    }
}

/// `PartialObjectMetadata` for a table row (includeObject=Metadata, the default).
pub fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    })
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

    #[test]
    fn human_durations() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(30 * 3600), "30h");
    }
}
