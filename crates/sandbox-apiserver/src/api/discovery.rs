//! Discovery documents: the ones recorded from kube-apiserver v1.28.0 (`/version`, `/api`,
//! `/apis`, `/api/v1`, `/apis/apps/v1`, `/apis/autoscaling/v2`, `/apis/networking.k8s.io/v1`
//! and the aggregated `APIGroupDiscoveryList` forms), and for the other group/versions the real
//! server advertises, resource lists derived from the aggregated documents.

use std::sync::OnceLock;

use serde_json::{Map, Value, json};

const VERSION: &str = include_str!("discovery/version.json");
const API: &str = include_str!("discovery/api.json");
const APIS: &str = include_str!("discovery/apis.json");
const API_V1: &str = include_str!("discovery/api_v1.json");
const APPS_V1: &str = include_str!("discovery/apps_v1.json");
const AUTOSCALING_V2: &str = include_str!("discovery/autoscaling_v2.json");
const NETWORKING_V1: &str = include_str!("discovery/networking_v1.json");
const AGGREGATED_API: &str = include_str!("discovery/aggregated_api.json");
const AGGREGATED_APIS: &str = include_str!("discovery/aggregated_apis.json");

pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
pub const AGGREGATED_API_ETAG: &str = "\"7E2E4FBD8CDC884130EBFEF64757F6BC507A8EA6A2EA8F94E05F1B6F207B4E183C63D6D6EA5513FDDC10FC16233248F933DC787C288493D52745A3FAFD68CCD8\"";
pub const AGGREGATED_APIS_ETAG: &str = "\"5172B85F8DABA9FC11C704705D1B5997E835E3891DBC93AC29102A0990F94E9FA8CC0C21A07BB8A1142F3922A8AE10609472B0C1D9EE2C352BEF851D11B45420\"";

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
            generic,
        }
    })
}

/// A resource the real server advertises that the emulator does not store: it lists empty.
#[derive(Debug, Clone)]
pub struct GenericResource {
    pub group: String,
    pub version: String,
    pub resource: String,
    pub kind: String,
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
                if crate::kinds::lookup(&group, &version, &resource).is_some() {
                    continue;
                }
                out.push(GenericResource {
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

pub fn apis() -> Value {
    docs().apis.clone()
}

pub fn aggregated_api() -> Value {
    docs().aggregated_api.clone()
}

pub fn aggregated_apis() -> Value {
    docs().aggregated_apis.clone()
}

/// Is `group` served at all (a known group answers JSON 404s; an unknown one plain text)?
pub fn group_served(group: &str) -> bool {
    docs()
        .apis
        .get("groups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|g| g.get("name").and_then(Value::as_str) == Some(group))
}

/// `/apis/<group>/<version>` served?
pub fn group_version_served(group: &str, version: &str) -> bool {
    if group.is_empty() {
        return version == "v1";
    }
    docs()
        .apis
        .get("groups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|g| g.get("name").and_then(Value::as_str) == Some(group))
        .flat_map(|g| {
            g.get("versions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .any(|v| v.get("version").and_then(Value::as_str) == Some(version))
}

/// `/apis/<group>`: an APIGroup.
pub fn api_group(group: &str) -> Option<Value> {
    let g = docs()
        .apis
        .get("groups")?
        .as_array()?
        .iter()
        .find(|g| g.get("name").and_then(Value::as_str) == Some(group))?;
    let mut m = Map::new();
    m.insert("kind".into(), json!("APIGroup"));
    m.insert("apiVersion".into(), json!("v1"));
    if let Value::Object(o) = g {
        for (k, v) in o {
            m.insert(k.clone(), v.clone());
        }
    }
    Some(Value::Object(m))
}

/// `/api/v1` or `/apis/<group>/<version>`: an APIResourceList.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let d = docs();
    match (group, version) {
        ("", "v1") => return Some(d.api_v1.clone()),
        ("apps", "v1") => return Some(d.apps_v1.clone()),
        ("autoscaling", "v2") => return Some(d.autoscaling_v2.clone()),
        ("networking.k8s.io", "v1") => return Some(d.networking_v1.clone()),
        _ => {}
    }
    if !group_version_served(group, version) {
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

    #[test]
    fn documents_load() {
        assert_eq!(version()["gitVersion"], json!("v1.28.0"));
        assert!(group_served("apps"));
        assert!(!group_served("example.com"));
        assert!(resource_list("batch", "v1").is_some());
        assert!(resource_list("apps", "v9").is_none());
        assert!(generic_resource("", "v1", "pods").is_some());
        assert!(generic_resource("apps", "v1", "deployments").is_none());
        assert_eq!(
            api("127.0.0.1:1")["serverAddressByClientCIDRs"][0]["serverAddress"],
            json!("127.0.0.1:1")
        );
    }
}
