//! Discovery documents: the ones recorded from kube-apiserver v1.28.0 (`/version`, `/api`,
//! `/apis`, `/api/v1`, `/apis/apps/v1`, `/apis/autoscaling/v2`, `/apis/networking.k8s.io/v1`
//! and the aggregated `APIGroupDiscoveryList` forms), and for the other group/versions the real
//! server advertises, resource lists derived from the aggregated documents. Installed custom
//! resources (kinds whose [`kinds::Discovery`] is `CustomResource`) add their groups, as the real
//! server does once a CRD is created: for the bundled Gateway API CRDs and Envoy Gateway's
//! SecurityPolicy the documents recorded from a server with them installed
//! (`discovery/gateway_api.json` from v1.28.0, `discovery/envoy_gateway.json` from v1.33.3 —
//! the CRD needs CEL that v1.28 lacks; its group's documents have the same shape in both — by
//! `tools/record_discovery.py`: the order of resources there is the server's own), for other
//! custom resources documents built from their names.

use std::sync::OnceLock;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha512};

use crate::kinds::{
    self, CustomResourceNames, GatewayApiChannel, GatewayApiVersion, Kind, Registry, Subresource,
};
use crate::model::gojson;

const VERSION: &str = include_str!("discovery/version.json");
const API: &str = include_str!("discovery/api.json");
const APIS: &str = include_str!("discovery/apis.json");
const API_V1: &str = include_str!("discovery/api_v1.json");
const APPS_V1: &str = include_str!("discovery/apps_v1.json");
const AUTOSCALING_V2: &str = include_str!("discovery/autoscaling_v2.json");
const NETWORKING_V1: &str = include_str!("discovery/networking_v1.json");
const AGGREGATED_API: &str = include_str!("discovery/aggregated_api.json");
const AGGREGATED_APIS: &str = include_str!("discovery/aggregated_apis.json");
const GATEWAY_API: &str = include_str!("discovery/gateway_api.json");
const GATEWAY_API_STANDARD: &str = include_str!("discovery/gateway_api_standard.json");
const GATEWAY_API_V1_6_1: &str = include_str!("discovery/gateway_api_v1_6_1.json");
const GATEWAY_API_V1_6_1_STANDARD: &str =
    include_str!("discovery/gateway_api_v1_6_1_standard.json");
const ENVOY_GATEWAY: &str = include_str!("discovery/envoy_gateway.json");

pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
pub const AGGREGATED_API_ETAG: &str = "\"7E2E4FBD8CDC884130EBFEF64757F6BC507A8EA6A2EA8F94E05F1B6F207B4E183C63D6D6EA5513FDDC10FC16233248F933DC787C288493D52745A3FAFD68CCD8\"";
#[cfg(test)]
const AGGREGATED_APIS_ETAG: &str = "\"5172B85F8DABA9FC11C704705D1B5997E835E3891DBC93AC29102A0990F94E9FA8CC0C21A07BB8A1142F3922A8AE10609472B0C1D9EE2C352BEF851D11B45420\"";

fn parse(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or(Value::Null)
}

struct Docs {
    version: Value,
    api: Value,
    apis: Value,
    api_v1: Value,
    apps_v1: Value,
    autoscaling_v2: Value,
    networking_v1: Value,
    aggregated_api: Value,
    aggregated_apis: Value,
    /// Recorded documents of custom resource groups: `groups`, `aggregated`, `resourceLists`
    /// (the Gateway API's experimental channel).
    custom: Value,
    /// The same, with the Gateway API's standard channel installed.
    custom_standard: Value,
    /// The same two for the Gateway API v1.6.1 (recorded from kube-apiserver v1.33.3).
    custom_v1_6_1: Value,
    custom_v1_6_1_standard: Value,
    generic: Vec<GenericResource>,
}

fn docs() -> &'static Docs {
    static DOCS: OnceLock<Docs> = OnceLock::new();
    DOCS.get_or_init(|| {
        let aggregated_api = parse(AGGREGATED_API);
        let aggregated_apis = parse(AGGREGATED_APIS);
        let mut generic = Vec::new();
        for doc in [&aggregated_api, &aggregated_apis] {
            collect_generic(doc, &mut generic);
        }
        Docs {
            version: parse(VERSION),
            api: parse(API),
            apis: parse(APIS),
            api_v1: parse(API_V1),
            apps_v1: parse(APPS_V1),
            autoscaling_v2: parse(AUTOSCALING_V2),
            networking_v1: parse(NETWORKING_V1),
            aggregated_api,
            aggregated_apis,
            custom: merged(&[parse(GATEWAY_API), parse(ENVOY_GATEWAY)]),
            custom_standard: merged(&[parse(GATEWAY_API_STANDARD), parse(ENVOY_GATEWAY)]),
            custom_v1_6_1: merged(&[parse(GATEWAY_API_V1_6_1), parse(ENVOY_GATEWAY)]),
            custom_v1_6_1_standard: merged(&[
                parse(GATEWAY_API_V1_6_1_STANDARD),
                parse(ENVOY_GATEWAY),
            ]),
            generic,
        }
    })
}

/// Recorded documents of custom resource groups, from several recordings: their `groups` and
/// `aggregated` lists joined, their `resourceLists` maps merged.
fn merged(recordings: &[Value]) -> Value {
    let mut groups = Vec::new();
    let mut aggregated = Vec::new();
    let mut lists = Map::new();
    for r in recordings {
        for (list, out) in [("groups", &mut groups), ("aggregated", &mut aggregated)] {
            out.extend(
                r.get(list)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .cloned(),
            );
        }
        if let Some(Value::Object(m)) = r.get("resourceLists") {
            lists.extend(m.clone());
        }
    }
    json!({"groups": groups, "aggregated": aggregated, "resourceLists": lists})
}

/// A resource the real server advertises that the emulator does not store: it lists empty.
#[derive(Debug, Clone)]
pub struct GenericResource {
    pub group: String,
    pub version: String,
    pub resource: String,
    pub kind: String,
    /// `scope: Namespaced` in the aggregated document.
    pub namespaced: bool,
}

fn collect_generic(doc: &Value, out: &mut Vec<GenericResource>) {
    for item in doc
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let group = item
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        for v in item
            .get("versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let version = v
                .get("version")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            for r in v
                .get("resources")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let resource = r
                    .get("resource")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                if kinds::lookup(&group, &version, &resource).is_some() {
                    continue;
                }
                out.push(GenericResource {
                    namespaced: r.get("scope").and_then(Value::as_str) == Some("Namespaced"),
                    group: group.clone(),
                    version: version.clone(),
                    resource,
                    kind: r
                        .pointer("/responseKind/kind")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                });
            }
        }
    }
}

pub fn generic_resource(
    group: &str,
    version: &str,
    resource: &str,
) -> Option<&'static GenericResource> {
    docs()
        .generic
        .iter()
        .find(|g| g.group == group && g.version == version && g.resource == resource)
}

pub fn version() -> Value {
    docs().version.clone()
}

/// `/api` with the server's own address.
pub fn api(server_address: &str) -> Value {
    let mut v = docs().api.clone();
    if let Some(Value::Array(list)) = v.get_mut("serverAddressByClientCIDRs") {
        for entry in list.iter_mut().filter_map(Value::as_object_mut) {
            entry.insert("serverAddress".into(), json!(server_address));
        }
    }
    v
}

/// `/apis`: the recorded group list, then the groups of installed custom resources.
pub fn apis(reg: &Registry) -> Value {
    let mut doc = docs().apis.clone();
    if let Some(Value::Array(groups)) = doc.get_mut("groups") {
        groups.extend(
            custom_groups(reg).iter().map(|g| {
                recorded(reg, "groups", "/name", g.name).unwrap_or_else(|| group_entry(g))
            }),
        );
    }
    doc
}

pub fn aggregated_api() -> Value {
    docs().aggregated_api.clone()
}

/// `/apis` as an `APIGroupDiscoveryList`, and its Etag: the recorded document, then the groups
/// of installed custom resources; the Etag is the SHA-512 of the list without its type (what the
/// real server hashes).
pub fn aggregated_apis(reg: &Registry) -> (Value, String) {
    let groups = custom_groups(reg);
    let mut doc = docs().aggregated_apis.clone();
    if let Some(Value::Array(items)) = doc.get_mut("items") {
        items.extend(groups.iter().map(|g| {
            recorded(reg, "aggregated", "/metadata/name", g.name)
                .unwrap_or_else(|| aggregated_group(reg, g))
        }));
    }
    let hashed = json!({"metadata": {}, "items": doc.get("items").cloned().unwrap_or(json!([]))});
    let mut bytes = gojson::encode(&hashed, false);
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    }
    let hash = Sha512::digest(&bytes);
    let hex: String = hash.iter().map(|b| format!("{b:02X}")).collect();
    (doc, format!("\"{hex}\""))
}

/// The recorded documents of the custom resources `reg` serves.
fn custom_docs(reg: &Registry) -> &'static Value {
    match reg.gateway_api() {
        (GatewayApiVersion::V1_4_1, GatewayApiChannel::Experimental) => &docs().custom,
        (GatewayApiVersion::V1_4_1, GatewayApiChannel::Standard) => &docs().custom_standard,
        (GatewayApiVersion::V1_6_1, GatewayApiChannel::Experimental) => &docs().custom_v1_6_1,
        (GatewayApiVersion::V1_6_1, GatewayApiChannel::Standard) => &docs().custom_v1_6_1_standard,
    }
}

/// The recorded entry of the list `list` of custom resource documents whose `pointer` is
/// `name`.
fn recorded(reg: &Registry, list: &str, pointer: &str, name: &str) -> Option<Value> {
    custom_docs(reg)
        .get(list)?
        .as_array()?
        .iter()
        .find(|e| e.pointer(pointer).and_then(Value::as_str) == Some(name))
        .cloned()
}

/// Is `group` served at all (a known group answers JSON 404s; an unknown one plain text)?
pub fn group_served(reg: &Registry, group: &str) -> bool {
    api_group(reg, group).is_some()
}

/// `/apis/<group>/<version>` served?
fn group_version_served(reg: &Registry, group: &str, version: &str) -> bool {
    if group.is_empty() {
        return version == "v1";
    }
    api_group(reg, group)
        .and_then(|g| g.get("versions").cloned())
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .any(|v| v.get("version").and_then(Value::as_str) == Some(version))
}

/// `/apis/<group>`: an APIGroup.
pub fn api_group(reg: &Registry, group: &str) -> Option<Value> {
    let g = apis(reg)
        .get("groups")?
        .as_array()?
        .iter()
        .find(|g| g.get("name").and_then(Value::as_str) == Some(group))?
        .clone();
    let mut m = Map::new();
    m.insert("kind".into(), json!("APIGroup"));
    m.insert("apiVersion".into(), json!("v1"));
    if let Value::Object(o) = g {
        for (k, v) in o {
            m.insert(k, v);
        }
    }
    Some(Value::Object(m))
}

// ---------------------------------------------------------------------------------------------
// Custom resources: discovery as the real server builds it from the installed CRDs.

/// A group of installed custom resources and its versions, in registration order (the first
/// is the preferred version).
struct CustomGroup {
    name: &'static str,
    versions: Vec<&'static str>,
}

fn custom_groups(reg: &Registry) -> Vec<CustomGroup> {
    let mut groups: Vec<CustomGroup> = Vec::new();
    for (k, _) in reg.custom_resources() {
        let a = k.api();
        match groups.iter_mut().find(|g| g.name == a.group) {
            Some(g) if !g.versions.contains(&a.version) => g.versions.push(a.version),
            Some(_) => {}
            None => groups.push(CustomGroup {
                name: a.group,
                versions: vec![a.version],
            }),
        }
    }
    groups
}

/// A group's entry in `/apis`.
fn group_entry(g: &CustomGroup) -> Value {
    let gv = |v: &str| json!({"groupVersion": format!("{}/{v}", g.name), "version": v});
    json!({
        "name": g.name,
        "versions": g.versions.iter().map(|v| gv(v)).collect::<Vec<_>>(),
        "preferredVersion": gv(g.versions[0]),
    })
}

/// The verbs a CRD's resource serves, in the order the real server lists them.
const CUSTOM_RESOURCE_VERBS: &[&str] = &[
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];

/// The verbs of a status or scale subresource.
const SUBRESOURCE_VERBS: &[&str] = &["get", "patch", "update"];

/// An `APIResourceList` of the installed custom resources of `group`/`version`.
fn custom_resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let installed = reg
        .custom_resources()
        .any(|(k, _)| k.api().group == group && k.api().version == version);
    if installed
        && let Some(doc) = custom_docs(reg).pointer(&format!(
            "/resourceLists/{}",
            format!("{group}/{version}").replace('/', "~1")
        ))
    {
        return Some(doc.clone());
    }
    let mut resources = Vec::new();
    for (k, names) in reg.custom_resources() {
        let a = k.api();
        if a.group != group || a.version != version {
            continue;
        }
        let mut e = Map::new();
        e.insert("name".into(), json!(a.resource));
        e.insert("singularName".into(), json!(names.singular));
        e.insert("namespaced".into(), json!(a.namespaced));
        e.insert("kind".into(), json!(a.kind));
        e.insert("verbs".into(), json!(CUSTOM_RESOURCE_VERBS));
        if !names.short_names.is_empty() {
            e.insert("shortNames".into(), json!(names.short_names));
        }
        if !names.categories.is_empty() {
            e.insert("categories".into(), json!(names.categories));
        }
        if let Some(h) = names.storage_version_hash {
            e.insert("storageVersionHash".into(), json!(h));
        }
        resources.push(Value::Object(e));
        for sub in k.subresources() {
            let kind = match sub {
                Subresource::Status | Subresource::Finalize => json!({"kind": a.kind}),
                Subresource::Scale => {
                    json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
                }
            };
            let mut e = Map::new();
            e.insert(
                "name".into(),
                json!(format!("{}/{}", a.resource, sub.path())),
            );
            e.insert("singularName".into(), json!(""));
            e.insert("namespaced".into(), json!(a.namespaced));
            if let Value::Object(kind) = kind {
                e.extend(kind);
            }
            e.insert("verbs".into(), json!(SUBRESOURCE_VERBS));
            resources.push(Value::Object(e));
        }
    }
    (!resources.is_empty()).then(|| {
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{group}/{version}"), "resources": resources})
    })
}

/// A group's `APIGroupDiscovery` in the aggregated `/apis`.
fn aggregated_group(reg: &Registry, g: &CustomGroup) -> Value {
    let versions: Vec<Value> = g
        .versions
        .iter()
        .map(|v| {
            let resources: Vec<Value> = reg
                .custom_resources()
                .filter(|(k, _)| k.api().group == g.name && k.api().version == *v)
                .map(|(k, names)| aggregated_resource(k, names))
                .collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    json!({"metadata": {"name": g.name, "creationTimestamp": null}, "versions": versions})
}

/// One resource's `APIResourceDiscovery`.
fn aggregated_resource(k: &dyn Kind, names: &CustomResourceNames) -> Value {
    let a = k.api();
    let response_kind = |kind: &str| json!({"group": "", "version": "", "kind": kind});
    let mut e = Map::new();
    e.insert("resource".into(), json!(a.resource));
    e.insert("responseKind".into(), response_kind(a.kind));
    e.insert(
        "scope".into(),
        json!(if a.namespaced {
            "Namespaced"
        } else {
            "Cluster"
        }),
    );
    e.insert("singularResource".into(), json!(names.singular));
    e.insert("verbs".into(), json!(CUSTOM_RESOURCE_VERBS));
    if !names.short_names.is_empty() {
        e.insert("shortNames".into(), json!(names.short_names));
    }
    if !names.categories.is_empty() {
        e.insert("categories".into(), json!(names.categories));
    }
    let subs: Vec<Value> = k
        .subresources()
        .iter()
        .map(|sub| {
            let kind = match sub {
                Subresource::Status | Subresource::Finalize => response_kind(a.kind),
                Subresource::Scale => {
                    json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
                }
            };
            json!({"subresource": sub.path(), "responseKind": kind, "verbs": SUBRESOURCE_VERBS})
        })
        .collect();
    if !subs.is_empty() {
        e.insert("subresources".into(), Value::Array(subs));
    }
    Value::Object(e)
}

/// `/api/v1` or `/apis/<group>/<version>`: an APIResourceList.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    if let Some(list) = custom_resource_list(reg, group, version) {
        return Some(list);
    }
    let d = docs();
    match (group, version) {
        ("", "v1") => return Some(d.api_v1.clone()),
        ("apps", "v1") => return Some(d.apps_v1.clone()),
        ("autoscaling", "v2") => return Some(d.autoscaling_v2.clone()),
        ("networking.k8s.io", "v1") => return Some(d.networking_v1.clone()),
        _ => {}
    }
    if !group_version_served(reg, group, version) {
        return None;
    }
    let item = d
        .aggregated_apis
        .get("items")?
        .as_array()?
        .iter()
        .find(|i| i.pointer("/metadata/name").and_then(Value::as_str) == Some(group))?;
    let ver = item
        .get("versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("version").and_then(Value::as_str) == Some(version))?;
    let mut resources = Vec::new();
    for r in ver
        .get("resources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = r.get("resource").and_then(Value::as_str).unwrap_or("");
        let namespaced = r.get("scope").and_then(Value::as_str) == Some("Namespaced");
        let mut e = Map::new();
        e.insert("name".into(), json!(name));
        e.insert(
            "singularName".into(),
            r.get("singularResource").cloned().unwrap_or(json!("")),
        );
        e.insert("namespaced".into(), json!(namespaced));
        e.insert(
            "kind".into(),
            r.pointer("/responseKind/kind")
                .cloned()
                .unwrap_or(json!("")),
        );
        e.insert("verbs".into(), r.get("verbs").cloned().unwrap_or(json!([])));
        for opt in ["shortNames", "categories"] {
            if let Some(v) = r.get(opt) {
                e.insert(opt.into(), v.clone());
            }
        }
        resources.push(Value::Object(e));
        for s in r
            .get("subresources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let mut e = Map::new();
            e.insert(
                "name".into(),
                json!(format!(
                    "{name}/{}",
                    s.get("subresource").and_then(Value::as_str).unwrap_or("")
                )),
            );
            e.insert("singularName".into(), json!(""));
            e.insert("namespaced".into(), json!(namespaced));
            let rk = s.get("responseKind").cloned().unwrap_or(json!({}));
            if let Some(g) = rk
                .get("group")
                .and_then(Value::as_str)
                .filter(|g| !g.is_empty())
            {
                e.insert("group".into(), json!(g));
            }
            if let Some(v) = rk
                .get("version")
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
            {
                e.insert("version".into(), json!(v));
            }
            e.insert("kind".into(), rk.get("kind").cloned().unwrap_or(json!("")));
            e.insert("verbs".into(), s.get("verbs").cloned().unwrap_or(json!([])));
            resources.push(Value::Object(e));
        }
    }
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{group}/{version}"), "resources": resources}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::testing::WITH_WIDGET;

    #[test]
    fn the_standard_channel_is_discovered_as_one_group_of_two_versions() {
        let reg = Registry::with_channel(true, GatewayApiChannel::Standard);
        let gateway_groups: Vec<Value> = apis(&reg)["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|g| {
                g["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("gateway."))
            })
            .cloned()
            .collect();
        assert_eq!(gateway_groups.len(), 1, "{gateway_groups:?}");
        assert_eq!(
            gateway_groups[0]["versions"],
            json!([
                {"groupVersion": "gateway.networking.k8s.io/v1", "version": "v1"},
                {"groupVersion": "gateway.networking.k8s.io/v1beta1", "version": "v1beta1"},
            ])
        );
        assert!(resource_list(&reg, "gateway.networking.k8s.io", "v1").is_some());
        assert!(resource_list(&reg, "gateway.networking.k8s.io", "v1alpha2").is_none());
        let index = crate::api::openapi::v3_root(&reg);
        let paths: Vec<&String> = index["paths"]
            .as_object()
            .into_iter()
            .flat_map(|m| m.keys())
            .filter(|p| p.contains("gateway."))
            .collect();
        assert_eq!(
            paths,
            [
                "apis/gateway.networking.k8s.io/v1",
                "apis/gateway.networking.k8s.io/v1beta1"
            ]
        );
    }

    #[test]
    fn documents_load() {
        assert_eq!(version()["gitVersion"], json!("v1.28.0"));
        let reg = Registry::new(false);
        assert!(group_served(&reg, "apps"));
        assert!(!group_served(&reg, "example.com"));
        assert!(resource_list(&reg, "batch", "v1").is_some());
        assert!(resource_list(&reg, "apps", "v9").is_none());
        assert_eq!(apis(&reg), docs().apis, "no CRD is installed");
        assert_eq!(aggregated_apis(&reg).1, AGGREGATED_APIS_ETAG);
        assert!(generic_resource("", "v1", "secrets").is_some());
        assert!(generic_resource("apps", "v1", "statefulsets").is_some());
        assert!(generic_resource("apps", "v1", "deployments").is_none());
        assert!(
            generic_resource("", "v1", "pods").is_none(),
            "pods are stored"
        );
        assert_eq!(
            api("127.0.0.1:1")["serverAddressByClientCIDRs"][0]["serverAddress"],
            json!("127.0.0.1:1")
        );
    }

    #[test]
    fn the_gateway_api_groups_are_discovered_as_on_a_server_with_the_crds() {
        let reg = Registry::new(true);
        let names: Vec<Value> = apis(&reg)["groups"]
            .as_array()
            .map(|g| g.iter().map(|g| g["name"].clone()).collect())
            .unwrap_or_default();
        assert_eq!(
            names[names.len() - 2..],
            [
                json!("gateway.networking.k8s.io"),
                json!("gateway.networking.x-k8s.io")
            ]
        );
        assert_eq!(
            aggregated_apis(&reg).1,
            "\"1B82DBBCE85600E1AFEEF036DC64DFF23834C459949FA87B57497B3A53BD2C85A535C9A8A1E5BC851E925338A8EEBA8E1EF88113EA1F1E6603B6A883A2889491\"",
            "the real server's Etag with the CRDs installed"
        );
        let v1beta1 =
            resource_list(&reg, "gateway.networking.k8s.io", "v1beta1").unwrap_or_default();
        let mut names: Vec<&str> = v1beta1["resources"]
            .as_array()
            .map(|r| r.iter().filter_map(|r| r["name"].as_str()).collect())
            .unwrap_or_default();
        names.sort();
        assert_eq!(
            names,
            [
                "gatewayclasses",
                "gatewayclasses/status",
                "gateways",
                "gateways/status",
                "httproutes",
                "httproutes/status",
                "referencegrants"
            ]
        );
        let without = Registry::new(false);
        assert!(!group_served(&without, "gateway.networking.k8s.io"));
        assert!(resource_list(&without, "gateway.networking.x-k8s.io", "v1alpha1").is_none());
    }

    #[test]
    fn envoy_gateway_is_discovered_only_when_installed_after_the_gateway_api() {
        let reg = Registry::new(true).with_envoy_gateway(true);
        let names: Vec<Value> = apis(&reg)["groups"]
            .as_array()
            .map(|g| g.iter().map(|g| g["name"].clone()).collect())
            .unwrap_or_default();
        // As on the real server, where the CRD was installed after the Gateway API's.
        assert_eq!(
            names[names.len() - 3..],
            [
                json!("gateway.networking.k8s.io"),
                json!("gateway.networking.x-k8s.io"),
                json!("gateway.envoyproxy.io")
            ]
        );
        let list = resource_list(&reg, "gateway.envoyproxy.io", "v1alpha1").unwrap_or_default();
        assert_eq!(
            list["resources"][0]["storageVersionHash"],
            docs().custom["resourceLists"]["gateway.envoyproxy.io/v1alpha1"]["resources"][0]["storageVersionHash"]
        );
        assert_eq!(list["resources"][0]["shortNames"], json!(["sp"]));
        let (doc, _) = aggregated_apis(&reg);
        let last = doc["items"].as_array().and_then(|i| i.last()).cloned();
        assert_eq!(
            last.map(|g| g["metadata"]["name"].clone()),
            Some(json!("gateway.envoyproxy.io"))
        );
        for without in [Registry::new(true), Registry::new(false)] {
            assert!(!group_served(&without, "gateway.envoyproxy.io"));
            assert!(resource_list(&without, "gateway.envoyproxy.io", "v1alpha1").is_none());
        }
        // The Gateway API alone is discovered as before.
        assert_eq!(
            aggregated_apis(&Registry::new(true)).1,
            "\"1B82DBBCE85600E1AFEEF036DC64DFF23834C459949FA87B57497B3A53BD2C85A535C9A8A1E5BC851E925338A8EEBA8E1EF88113EA1F1E6603B6A883A2889491\""
        );
    }

    #[test]
    fn installed_custom_resources_appear_in_discovery_and_uninstalled_ones_answer_404() {
        let reg = Registry::of(WITH_WIDGET, true);
        let groups = apis(&reg)["groups"].as_array().cloned().unwrap_or_default();
        assert_eq!(
            groups.last(),
            Some(&json!({"name": "widgets.example.com",
                "versions": [{"groupVersion": "widgets.example.com/v1", "version": "v1"}],
                "preferredVersion": {"groupVersion": "widgets.example.com/v1", "version": "v1"}}))
        );
        assert_eq!(
            api_group(&reg, "widgets.example.com").map(|g| g["kind"].clone()),
            Some(json!("APIGroup"))
        );
        assert_eq!(
            resource_list(&reg, "widgets.example.com", "v1"),
            Some(
                json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "widgets.example.com/v1",
                "resources": [
                    {"name": "widgets", "singularName": "widget", "namespaced": true, "kind": "Widget",
                        "verbs": ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"],
                        "shortNames": ["wd"], "categories": ["all"]},
                    {"name": "widgets/status", "singularName": "", "namespaced": true, "kind": "Widget",
                        "verbs": ["get", "patch", "update"]}]})
            )
        );
        let (doc, etag) = aggregated_apis(&reg);
        assert_ne!(
            etag, AGGREGATED_APIS_ETAG,
            "a changed document gets a new Etag"
        );
        assert_eq!(
            doc["items"]
                .as_array()
                .and_then(|i| i.last())
                .map(|g| g["versions"][0]["resources"][0]["scope"].clone()),
            Some(json!("Namespaced"))
        );

        let without = Registry::of(WITH_WIDGET, false);
        assert!(!group_served(&without, "widgets.example.com"));
        assert!(resource_list(&without, "widgets.example.com", "v1").is_none());
        assert_eq!(apis(&without), docs().apis);
    }
}
