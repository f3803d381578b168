//! Kinds a cluster gets from CustomResourceDefinitions: the Gateway API v1.4.1 experimental
//! channel (12 CRDs, `gateway.networking.k8s.io` and `gateway.networking.x-k8s.io`;
//! `gateway-api-v1.4.1.json`) or, as a cluster that installed the release's standard channel has
//! them, its 6 standard CRDs (`gateway-api-v1.4.1-standard.json`: no experimental kinds, and
//! HTTPRoute without the `ExternalAuth` and `CORS` filters) — see [`GatewayApiChannel`] —, or
//! the same two channels of v1.6.1 (`gateway-api-v1.6.1{,-standard}.json`, see
//! [`GatewayApiVersion`]), and
//! Envoy Gateway v1.9.0's `SecurityPolicy` (`gateway.envoyproxy.io`, installed only when asked:
//! [`CrdSet::EnvoyGateway`], `envoy-gateway-v1.9.0.json`). All are served from the CRDs' own
//! text (made by `tools/crd_bundle.py`) the way the apiextensions server serves custom
//! resources:
//!
//! * one [`CustomKind`] per served version, the versions of a CRD sharing one storage (no
//!   conversion webhook: an object reads the same in every version);
//! * bodies decoded as unstructured JSON: `metadata` through the Go ObjectMeta, everything else
//!   pruned to the structural schema (unknown fields reported as for built-in kinds), then the
//!   schema's defaults applied;
//! * validation by the schema (kube-openapi's messages), list-type uniqueness and the CEL
//!   rules ([`structural`], [`cel`]);
//! * generation on any change outside metadata and status, the `status` subresource where the
//!   CRD has it, no strategic merge patch, objects written with sorted keys, tables from the
//!   CRD's `additionalPrinterColumns`.
//!
//! The schema also becomes Go-type-like [`TypeDef`]s (installed at run time), so managedFields
//! and normalisation work as for built-in kinds.

pub mod cel;
pub mod structural;

use std::sync::OnceLock;

use serde_json::{Map, Value, json};

use super::table::{age, name_column};
use super::{CrdSet, CustomResourceNames, Discovery, Encoding, Generation, Kind, Subresource};
use crate::model::ApiResource;
use crate::model::schema::{self, DecodeError, Decoded, FieldDef, L, T, TypeDef};
use crate::model::status::FieldError;
use crate::model::time;
use structural::Node;

/// The bundled CRDs: the Gateway API v1.4.1 experimental channel.
const GATEWAY_API: &str = include_str!("gateway-api-v1.4.1.json");
/// The Gateway API v1.4.1 standard channel.
const GATEWAY_API_STANDARD: &str = include_str!("gateway-api-v1.4.1-standard.json");
/// The Gateway API v1.6.1 experimental channel.
const GATEWAY_API_V1_6_1: &str = include_str!("gateway-api-v1.6.1.json");
/// The Gateway API v1.6.1 standard channel.
const GATEWAY_API_V1_6_1_STANDARD: &str = include_str!("gateway-api-v1.6.1-standard.json");

/// Which release of the Gateway API's CRDs a sandbox serves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GatewayApiVersion {
    /// v1.4.1: the newest release whose experimental channel installs on Kubernetes 1.28 (the
    /// version the sandbox emulates).
    #[default]
    V1_4_1,
    /// v1.6.1: its CRDs carry CEL rules that need Kubernetes ≥ 1.30 (`isIP()`,
    /// `format.dns1123Label()`), evaluated here as v1.33 does. The standard channel also serves
    /// ListenerSet, ReferenceGrant, TCPRoute, TLSRoute and UDPRoute at `v1`; ExternalAuth is still
    /// experimental-only.
    V1_6_1,
}

impl GatewayApiVersion {
    /// `v1.4.1` or `v1.6.1` (the `v` optional); `None` for anything else.
    pub fn parse(s: &str) -> Option<GatewayApiVersion> {
        match s.strip_prefix('v').unwrap_or(s) {
            "1.4.1" => Some(GatewayApiVersion::V1_4_1),
            "1.6.1" => Some(GatewayApiVersion::V1_6_1),
            _ => None,
        }
    }
}

/// Which release channel of the Gateway API's CRDs a sandbox serves. One cluster has one of
/// them (the CRDs of both channels share their names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GatewayApiChannel {
    /// `experimental-install.yaml`: every kind and field of the release, HTTPRoute's
    /// `ExternalAuth` filter (GEP-1494) among them.
    #[default]
    Experimental,
    /// `standard-install.yaml`: the GA kinds and fields only — an HTTPRoute filter of type
    /// `ExternalAuth` is refused (`Unsupported value`), an `externalAuth` field pruned.
    Standard,
}

impl GatewayApiChannel {
    /// `experimental` or `standard`; `None` for anything else.
    pub fn parse(s: &str) -> Option<GatewayApiChannel> {
        match s {
            "experimental" => Some(GatewayApiChannel::Experimental),
            "standard" => Some(GatewayApiChannel::Standard),
            _ => None,
        }
    }
}
/// Envoy Gateway v1.9.0's `SecurityPolicy` CRD.
const ENVOY_GATEWAY: &str = include_str!("envoy-gateway-v1.9.0.json");

/// A column of `additionalPrinterColumns`.
#[derive(Debug)]
struct Column {
    name: String,
    ty: String,
    format: String,
    priority: i64,
    json_path: String,
}

/// One served version of a CRD.
#[derive(Debug)]
pub struct CustomKind {
    api: &'static ApiResource,
    names: &'static CustomResourceNames,
    type_index: usize,
    root: Node,
    subresources: &'static [Subresource],
    columns: Vec<Column>,
    storage_prefix: &'static str,
    judge: Judge,
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

fn leak_strs(v: &Value) -> &'static [&'static str] {
    let list: Vec<&'static str> = v
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).map(leak).collect())
        .unwrap_or_default();
    Box::leak(list.into_boxed_slice())
}

/// The custom resource kinds of the Gateway API bundle of `version` and `channel`, then Envoy
/// Gateway's (served only when its set is installed), built once per process.
pub fn kinds(
    version: GatewayApiVersion,
    channel: GatewayApiChannel,
) -> &'static [&'static dyn Kind] {
    type Cell = OnceLock<Vec<&'static dyn Kind>>;
    static CELLS: [Cell; 4] = [Cell::new(), Cell::new(), Cell::new(), Cell::new()];
    // The bundles are checked by a unit test; a broken one serves no custom resources.
    let Ok([experimental, standard, envoy]) = bundles() else {
        return &[];
    };
    let (i, gateway_api) = match (version, channel) {
        (GatewayApiVersion::V1_4_1, GatewayApiChannel::Experimental) => (0, experimental),
        (GatewayApiVersion::V1_4_1, GatewayApiChannel::Standard) => (1, standard),
        (GatewayApiVersion::V1_6_1, channel) => {
            let Ok([experimental, standard]) = bundles_v1_6_1() else {
                return &[];
            };
            match channel {
                GatewayApiChannel::Experimental => (2, experimental),
                GatewayApiChannel::Standard => (3, standard),
            }
        }
    };
    CELLS[i].get_or_init(|| gateway_api.iter().chain(envoy).copied().collect())
}

/// Every custom kind of every bundle loaded in this process (the kinds of a stored object,
/// whichever bundle a sandbox serves: a sandbox loads the bundle it serves before it stores).
pub fn every_kind() -> impl Iterator<Item = &'static dyn Kind> {
    let later = BUNDLES_V1_6_1.get().and_then(|b| b.as_ref().ok());
    bundles()
        .iter()
        .flatten()
        .chain(later.into_iter().flatten())
        .flatten()
        .copied()
}

/// The bundles every sandbox may serve (Gateway API v1.4.1 experimental and standard, Envoy
/// Gateway), loaded once per process: their types are installed in one go.
fn bundles() -> &'static Result<[Vec<&'static dyn Kind>; 3], String> {
    static BUNDLES: OnceLock<Result<[Vec<&'static dyn Kind>; 3], String>> = OnceLock::new();
    BUNDLES.get_or_init(|| {
        load(
            &[
                (GATEWAY_API, CrdSet::Default, Judge::V1_28),
                (GATEWAY_API_STANDARD, CrdSet::Default, Judge::V1_28),
                (ENVOY_GATEWAY, CrdSet::EnvoyGateway, Judge::V1_33),
            ],
            false,
        )?
        .try_into()
        .map_err(|_| "three bundles load as three lists of kinds".to_string())
    })
}

/// The Gateway API v1.6.1 bundles (experimental, standard), loaded only in a process whose
/// sandbox serves them: their schemas and CEL rules are the largest, and most processes (one
/// per test) never need them. Their types are installed after the others'.
static BUNDLES_V1_6_1: OnceLock<Result<[Vec<&'static dyn Kind>; 2], String>> = OnceLock::new();

fn bundles_v1_6_1() -> &'static Result<[Vec<&'static dyn Kind>; 2], String> {
    BUNDLES_V1_6_1.get_or_init(|| {
        // The first group's types are installed first: the later ones are numbered after them.
        if let Err(e) = bundles() {
            return Err(e.clone());
        }
        load(
            &[
                (GATEWAY_API_V1_6_1, CrdSet::Default, Judge::V1_33),
                (GATEWAY_API_V1_6_1_STANDARD, CrdSet::Default, Judge::V1_33),
            ],
            true,
        )?
        .try_into()
        .map_err(|_| "two bundles load as two lists of kinds".to_string())
    })
}

/// Which API server's apiextensions validation a bundle's custom resources get: the one the
/// sandbox emulates (v1.28) for the CRDs that install there, and the one their exchanges were
/// recorded on (v1.33.3) for the CRDs whose CEL rules need Kubernetes ≥ 1.30 — a cluster serving
/// those is never a v1.28 one. Two differences matter for the exchanges recorded:
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Judge {
    /// v1.28: an enum violation (`Unsupported value`) does not keep the CEL rules from running;
    /// the errors of a status write name fields relative to the status (`parents[0].…`).
    V1_28,
    /// v1.33: an enum violation blocks the CEL rules (`some validation rules were not
    /// checked …` is added); status errors name the whole path (`status.parents[0].…`), their
    /// messages still relative to the status.
    V1_33,
}

/// Parse bundles, each with the set that installs its CRDs and the server that judges them: the
/// kinds of every served version, per bundle.
fn load(
    bundles: &[(&str, CrdSet, Judge)],
    later: bool,
) -> Result<Vec<Vec<&'static dyn Kind>>, String> {
    struct Pending {
        bundle: usize,
        crd: usize,
        version: Value,
        root: Node,
    }
    let mut all_crds: Vec<Vec<Value>> = Vec::new();
    let mut pending = Vec::new();
    for (b, (text, _, _)) in bundles.iter().enumerate() {
        let crds: Vec<Value> = serde_json::from_str(text).map_err(|e| e.to_string())?;
        for (i, crd) in crds.iter().enumerate() {
            for v in crd
                .get("versions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if v.get("served") != Some(&Value::Bool(true)) {
                    continue;
                }
                let schema = v.get("openAPIV3Schema").unwrap_or(&Value::Null);
                pending.push(Pending {
                    bundle: b,
                    crd: i,
                    version: v.clone(),
                    root: Node::parse(schema)?,
                });
            }
        }
        all_crds.push(crds);
    }
    let mut roots = Vec::new();
    let install = |build: &mut dyn FnMut(usize) -> Vec<&'static TypeDef>| {
        if later {
            schema::install_types_later(build)
        } else {
            schema::install_types(build)
        }
    };
    install(&mut |base| {
        let mut types: Vec<TypeDef> = Vec::new();
        for p in &pending {
            let kind = all_crds[p.bundle][p.crd]
                .pointer("/names/kind")
                .and_then(Value::as_str)
                .unwrap_or("");
            roots.push(root_type(&p.root, kind, base, &mut types));
        }
        types
            .into_iter()
            .map(|t| &*Box::leak(Box::new(t)))
            .collect()
    });
    let mut out: Vec<Vec<&'static dyn Kind>> = bundles.iter().map(|_| Vec::new()).collect();
    for (p, type_index) in pending.into_iter().zip(roots) {
        let crd = &all_crds[p.bundle][p.crd];
        let group = crd.get("group").and_then(Value::as_str).unwrap_or("");
        let names = crd.get("names").unwrap_or(&Value::Null);
        let name = |k: &str| names.get(k).and_then(Value::as_str).unwrap_or("");
        let version = p.version.get("name").and_then(Value::as_str).unwrap_or("");
        let status = p.version.pointer("/subresources/status").is_some();
        let columns = p
            .version
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| Column {
                name: c
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                ty: c
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("string")
                    .to_string(),
                format: c
                    .get("format")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                json_path: c
                    .get("jsonPath")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            })
            .collect();
        let kind = CustomKind {
            api: Box::leak(Box::new(ApiResource {
                group: leak(group),
                version: leak(version),
                api_version: leak(&format!("{group}/{version}")),
                resource: leak(name("plural")),
                kind: leak(name("kind")),
                list_kind: leak(name("listKind")),
                namespaced: crd.get("scope").and_then(Value::as_str) == Some("Namespaced"),
            })),
            names: Box::leak(Box::new(CustomResourceNames {
                singular: leak(name("singular")),
                short_names: leak_strs(names.get("shortNames").unwrap_or(&Value::Null)),
                categories: leak_strs(names.get("categories").unwrap_or(&Value::Null)),
                storage_version_hash: None,
                set: bundles[p.bundle].1,
            })),
            type_index,
            root: p.root,
            subresources: if status { &[Subresource::Status] } else { &[] },
            columns,
            storage_prefix: leak(&format!("{group}/{}", name("plural"))),
            judge: bundles[p.bundle].2,
        };
        out[p.bundle].push(Box::leak(Box::new(kind)));
    }
    Ok(out)
}

/// The type of a resource's root: `metadata` is the Go ObjectMeta, every other property a
/// pointer (absent stays absent, as in an unstructured object).
fn root_type(root: &Node, kind: &str, base: usize, types: &mut Vec<TypeDef>) -> usize {
    let idx = types.len();
    types.push(TypeDef {
        name: leak(kind),
        go_name: "",
        atomic: false,
        fields: &[],
    });
    let mut fields = Vec::new();
    for (k, p) in &root.properties {
        if k == "apiVersion" || k == "kind" {
            continue;
        }
        let ty = if k == "metadata" {
            T::Obj(schema::OBJECT_META)
        } else {
            node_type(p, &format!("{kind}.{k}"), base, types)
        };
        fields.push(field_def(k, ty));
    }
    types[idx].fields = Box::leak(fields.into_boxed_slice());
    base + idx
}

fn field_def(name: &str, ty: T) -> FieldDef {
    FieldDef {
        name: leak(name),
        ty,
        omitempty: true,
        ptr: true,
        go_type: "",
    }
}

/// The [`T`] of a schema node.
fn node_type(n: &Node, name: &str, base: usize, types: &mut Vec<TypeDef>) -> T {
    if n.int_or_string {
        return T::IntOrStr;
    }
    match n.ty.as_deref() {
        Some("string") => T::Str,
        Some("integer") => T::I64,
        Some("number") => T::F64,
        Some("boolean") => T::Bool,
        Some("array") => {
            let item = match &n.items {
                Some(i) => node_type(i, name, base, types),
                None => T::Any,
            };
            let strategy = match n.list_type.as_deref() {
                Some("set") => L::Set,
                Some("map") => {
                    let keys: Vec<&'static str> = n.list_map_keys.iter().map(|k| leak(k)).collect();
                    L::Map {
                        merge_key: keys.first().copied().unwrap_or(""),
                        keys: Box::leak(keys.into_boxed_slice()),
                    }
                }
                _ => L::Atomic,
            };
            T::List(Box::leak(Box::new(item)), strategy)
        }
        Some("object") if !n.properties.is_empty() && !n.preserve_unknown => {
            let idx = types.len();
            types.push(TypeDef {
                name: leak(name),
                go_name: "",
                atomic: n.map_type.as_deref() == Some("atomic"),
                fields: &[],
            });
            let fields: Vec<FieldDef> = n
                .properties
                .iter()
                .map(|(k, p)| field_def(k, node_type(p, &format!("{name}.{k}"), base, types)))
                .collect();
            types[idx].fields = Box::leak(fields.into_boxed_slice());
            T::Obj(base + idx)
        }
        Some("object") if n.additional.is_some() => {
            let item = n
                .additional
                .as_deref()
                .map_or(T::Any, |a| node_type(a, name, base, types));
            T::Map(
                Box::leak(Box::new(item)),
                n.map_type.as_deref() == Some("atomic"),
            )
        }
        _ => T::Any,
    }
}

/// A simple JSONPath of `additionalPrinterColumns` (`.a.b`, `[*]`, `[n]`,
/// `[?(@.k=="v")]`): every value it selects.
fn json_path<'a>(v: &'a Value, path: &str) -> Vec<&'a Value> {
    let mut cur = vec![v];
    let mut rest = path.trim();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let key = &r[..end];
            cur = cur.into_iter().filter_map(|x| x.get(key)).collect();
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else {
                return Vec::new();
            };
            let sel = &r[..end];
            rest = &r[end + 1..];
            let items = cur
                .into_iter()
                .filter_map(Value::as_array)
                .flat_map(|a| a.iter());
            cur = if sel == "*" {
                items.collect()
            } else if let Ok(i) = sel.parse::<usize>() {
                items.skip(i).take(1).collect()
            } else if let Some(filter) = sel.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')'))
            {
                let Some((k, want)) = filter.split_once("==") else {
                    return Vec::new();
                };
                let want = want.trim_matches('"');
                items
                    .filter(|x| x.get(k).and_then(Value::as_str) == Some(want))
                    .collect()
            } else {
                return Vec::new();
            };
        } else {
            return Vec::new();
        }
    }
    cur
}

impl CustomKind {
    /// `metadata` as the Go ObjectMeta decodes it; the rest pruned to the schema. Unknown fields
    /// in document order.
    fn decode_unstructured(&self, v: &Value) -> Result<Decoded, DecodeError> {
        let Value::Object(input) = v else {
            return schema::canonicalize(self.type_index, v);
        };
        let mut out = Map::new();
        let mut unknown = Vec::new();
        for (k, x) in input {
            match k.as_str() {
                "apiVersion" | "kind" => {}
                "metadata" => {
                    let meta = schema::canonicalize(schema::OBJECT_META, x)?;
                    unknown.extend(meta.unknown.iter().map(|f| format!("metadata.{f}")));
                    out.insert(k.clone(), meta.value);
                }
                _ => match self.root.property(k) {
                    Some(n) => {
                        if x.is_null() && !n.nullable {
                            continue;
                        }
                        let mut x = x.clone();
                        structural::prune(&mut x, n, k, &mut unknown);
                        out.insert(k.clone(), x);
                    }
                    None => unknown.push(k.clone()),
                },
            }
        }
        Ok(Decoded {
            value: Value::Object(out),
            unknown,
        })
    }
}

impl Kind for CustomKind {
    fn api(&self) -> &'static ApiResource {
        self.api
    }

    fn schema(&self) -> usize {
        self.type_index
    }

    fn generation(&self) -> Generation {
        Generation::AllButMetadataAndStatus
    }

    fn subresources(&self) -> &'static [Subresource] {
        self.subresources
    }

    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn patch_types(&self) -> &'static [&'static str] {
        &[
            "application/json-patch+json",
            "application/merge-patch+json",
        ]
    }

    fn decode(&self, v: &Value) -> Result<Decoded, DecodeError> {
        self.decode_unstructured(v)
    }

    fn default(&self, obj: &mut Value) {
        if let Value::Object(m) = obj {
            for (k, x) in m.iter_mut() {
                if k != "metadata"
                    && let Some(n) = self.root.property(k)
                {
                    structural::default(x, n);
                }
            }
            for (k, n) in &self.root.properties {
                if k != "metadata"
                    && !m.contains_key(k)
                    && let Some(d) = &n.default
                {
                    m.insert(k.clone(), d.clone());
                }
            }
        }
    }

    fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut body = obj.clone();
        if let Some(m) = body.as_object_mut() {
            m.remove("metadata");
        }
        let mut errs = Vec::new();
        structural::validate(&body, &self.root, "", &mut errs);
        structural::validate_lists(&body, &self.root, "", &mut errs);
        if structural::blocks_rules(&errs, self.judge == Judge::V1_33) {
            errs.push(structural::rules_not_checked());
            return errs;
        }
        let old_body = old.map(|o| {
            let mut o = o.clone();
            if let Some(m) = o.as_object_mut() {
                m.remove("metadata");
            }
            o
        });
        structural::validate_rules(&body, old_body.as_ref(), &self.root, "", &mut errs);
        errs
    }

    /// The apiextensions status strategy's `ValidateUpdate`: the status against the status
    /// schema, its paths relative to the status (`parents[0].conditions[0].reason`; on v1.33 the
    /// fields prefixed with `status.`, see [`Judge`]); list-type
    /// uniqueness over the object unless the old one already broke it; the CEL rules, unless an
    /// error above makes the real server skip them.
    fn validate_status(&self, obj: &Value, old: &Value) -> Vec<FieldError> {
        let without_metadata = |v: &Value| {
            let mut v = v.clone();
            if let Some(m) = v.as_object_mut() {
                m.remove("metadata");
            }
            v
        };
        let (body, old_body) = (without_metadata(obj), without_metadata(old));
        let mut errs = Vec::new();
        if let (Some(status), Some(node)) = (body.get("status"), self.root.property("status")) {
            structural::validate(status, node, "", &mut errs);
            if self.judge == Judge::V1_33 {
                for e in &mut errs {
                    e.field = if e.field.is_empty() {
                        "status".to_string()
                    } else {
                        format!("status.{}", e.field)
                    };
                }
            }
        }
        let mut old_list_errs = Vec::new();
        structural::validate_lists(&old_body, &self.root, "", &mut old_list_errs);
        if old_list_errs.is_empty() {
            structural::validate_lists(&body, &self.root, "", &mut errs);
        }
        if structural::blocks_rules(&errs, self.judge == Judge::V1_33) {
            errs.push(structural::rules_not_checked());
            return errs;
        }
        structural::validate_rules(&body, Some(&old_body), &self.root, "", &mut errs);
        errs
    }

    fn table_columns(&self) -> Vec<Value> {
        let mut cols = vec![name_column()];
        for c in &self.columns {
            cols.push(json!({
                "name": c.name,
                "type": c.ty,
                "format": c.format,
                "description": format!("Custom resource definition column (in JSONPath format): {}", c.json_path),
                "priority": c.priority,
            }));
        }
        cols
    }

    fn table_cells(&self, obj: &Value, now: i64) -> Vec<Value> {
        let mut cells = vec![json!(
            obj.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
        )];
        for c in &self.columns {
            let found = json_path(obj, &c.json_path);
            let cell = match found.first() {
                None => Value::Null,
                Some(v) => match (c.ty.as_str(), v) {
                    ("date", Value::String(s)) if time::parse_rfc3339(s).is_some() => {
                        json!(age(&json!({"metadata": {"creationTimestamp": s}}), now))
                    }
                    ("string", Value::String(s)) => json!(s),
                    ("string", other) => json!(other.to_string()),
                    (_, other) => (*other).clone(),
                },
            };
            cells.push(cell);
        }
        cells
    }

    fn storage_prefix(&self) -> &'static str {
        self.storage_prefix
    }

    fn discovery(&self) -> Discovery {
        Discovery::CustomResource(self.names)
    }

    fn encoding(&self) -> Encoding {
        Encoding::Unstructured
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(kinds: &[&'static dyn Kind]) -> Vec<String> {
        kinds
            .iter()
            .map(|k| format!("{}/{}", k.api().api_version, k.api().resource))
            .collect()
    }

    #[test]
    fn every_served_version_of_the_bundled_crds_loads_with_its_rules() {
        let [experimental, standard, envoy] = bundles()
            .as_ref()
            .unwrap_or_else(|e| panic!("the bundles do not load: {e}"));
        let [experimental_161, standard_161] = bundles_v1_6_1()
            .as_ref()
            .unwrap_or_else(|e| panic!("the v1.6.1 bundles do not load: {e}"));
        let experimental = names(experimental);
        assert_eq!(experimental.len(), 17, "{experimental:?}");
        assert!(experimental.contains(&"gateway.networking.k8s.io/v1/httproutes".to_string()));
        assert!(experimental.contains(&"gateway.networking.k8s.io/v1beta1/httproutes".to_string()));
        assert_eq!(
            names(envoy),
            ["gateway.envoyproxy.io/v1alpha1/securitypolicies".to_string()]
        );
        let v1_4_1 = GatewayApiVersion::V1_4_1;
        assert_eq!(
            super::kinds(v1_4_1, GatewayApiChannel::Experimental).len(),
            18
        );
        assert_eq!(super::kinds(v1_4_1, GatewayApiChannel::Standard).len(), 10);
        // v1.6.1: every kind of the channel at v1, the experimental channel's older versions
        // and X-kinds too.
        let standard_161 = names(standard_161);
        assert_eq!(standard_161.len(), 14, "{standard_161:?}");
        for kind in [
            "listenersets",
            "referencegrants",
            "tcproutes",
            "tlsroutes",
            "udproutes",
        ] {
            assert!(
                standard_161.contains(&format!("gateway.networking.k8s.io/v1/{kind}")),
                "{standard_161:?}"
            );
        }
        assert_eq!(names(experimental_161).len(), 22);
        // The standard channel: GatewayClass, Gateway and HTTPRoute (v1, v1beta1), GRPCRoute,
        // BackendTLSPolicy (v1), ReferenceGrant (v1beta1).
        let standard = names(standard);
        assert_eq!(standard.len(), 9, "{standard:?}");
        assert!(
            standard
                .iter()
                .all(|n| n.starts_with("gateway.networking.k8s.io/"))
        );
        assert!(standard.contains(&"gateway.networking.k8s.io/v1/gatewayclasses".to_string()));
        assert!(!standard.iter().any(|n| n.contains("tcproutes")));
    }

    #[test]
    fn only_the_experimental_channel_has_the_external_auth_filter() {
        for version in [GatewayApiVersion::V1_4_1, GatewayApiVersion::V1_6_1] {
            only_the_experimental_channel_of_has_the_external_auth_filter(version);
        }
    }

    fn only_the_experimental_channel_of_has_the_external_auth_filter(version: GatewayApiVersion) {
        let filter_types = |channel| {
            let httproute = kinds(version, channel)
                .iter()
                .find(|k| {
                    k.api().api_version == "gateway.networking.k8s.io/v1"
                        && k.api().resource == "httproutes"
                })
                .unwrap_or_else(|| panic!("no v1 HTTPRoute in {channel:?}"));
            let mut route = json!({"spec": {"rules": [{"filters": [{"type": "ExternalAuth", "externalAuth": {"protocol": "HTTP", "backendRef": {"name": "auth", "port": 8080}, "http": {}}}]}]}});
            httproute.default(&mut route);
            httproute
                .validate(&route, None)
                .into_iter()
                .map(|e| format!("{}: {}", e.field, e.body))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            filter_types(GatewayApiChannel::Experimental),
            Vec::<String>::new()
        );
        let standard = filter_types(GatewayApiChannel::Standard);
        assert!(
            standard.first().is_some_and(|e| e.starts_with("spec.rules[0].filters[0].type: Unsupported value: \"ExternalAuth\": supported values: \"RequestHeaderModifier\"")),
            "{standard:?}"
        );
    }
}
