//! Who else owns an object this tool is about to change, from the object as it was read (no
//! request of its own): its `metadata.managedFields`, field by field, and the labels and
//! annotations with which Helm, Argo CD, Flux and kapp mark what they manage.
//!
//! managedFields, per changed field:
//!
//! | entry | owner? | what follows |
//! | --- | --- | --- |
//! | operation `Apply`, any manager but this tool's (Helm 4, `kubectl apply --server-side`, Argo CD with server-side apply, a pipeline's manager) | yes, of the fields it holds | its next apply conflicts |
//! | operation `Update` by `helm` or `argocd-controller` (Helm 3, client-side syncs) | yes, of the fields it holds | its next upgrade or sync takes the value back |
//! | operation `Update` by anyone else (`kubectl-edit`, `kubectl-set`, `kubectl-create`, `kubectl-client-side-apply`, `kubectl-patch`, `kubectl-rollout`, controllers) | no | — |
//! | an entry with a `subresource` (`status`, `scale`) | no | — |
//! | this tool's own manager (`kubectl-appupdate`) | no | — |
//!
//! A manager that holds only other fields (say, labels) does not own the change. A change of
//! the whole object (`.`: a route or policy deleted) is owned by every owner that holds any of
//! its fields: its next run puts the object back.
//!
//! Labels and annotations name a tool: Helm (`app.kubernetes.io/managed-by: Helm` with
//! `meta.helm.sh/release-name`/`-namespace`), Argo CD (`argocd.argoproj.io/tracking-id`, trusted
//! only when its `<app>:<group>/<kind>:<namespace>/<name>` names this very object; the app may
//! be `<namespace>_<app>`), Flux (`kustomize.toolkit.fluxcd.io/name`/`namespace`,
//! `helm.toolkit.fluxcd.io/name`/`namespace`), kapp (`kapp.k14s.io/app`). Where managedFields
//! show that tool's manager, it owns the fields it holds, as above; where they show none of
//! its managers (stripped, or written by another manager), the whole object counts as owned.
//!
//! The Deployment and the autoscaler are read whole ([`owners`]). Routes and policies are read
//! in lists, which drop managedFields to keep big listings small; what these rules need of each
//! listed object is kept while the list is read instead ([`Marks`]: the tools its labels name,
//! and only the entries that may own, [`may_own`], their field sets cut at [`LISTED_DEPTH`]).

use serde_json::Value;

/// This tool's field manager: never an owner.
pub const OWN_MANAGER: &str = "kubectl-appupdate";

/// The owners of one object a plan changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectOwners {
    /// The object, as the plan names it (`deployment/web`).
    pub object: String,
    pub owners: Vec<Owner>,
}

/// Who owns changed fields of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub who: Who,
    /// The changed fields it holds (readable paths, as the plan shows them); empty when it
    /// owns the whole object.
    pub fields: Vec<String>,
    pub reason: Reason,
}

/// The owning tool or field manager.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Who {
    /// A Helm release `namespace/name`.
    Helm { release: String },
    /// An Argo CD application (`namespace/name` when the tracking id names its namespace).
    ArgoCd { application: String },
    /// A Flux Kustomization `namespace/name`.
    FluxKustomization { name: String },
    /// A Flux HelmRelease `namespace/name`.
    FluxHelmRelease { name: String },
    /// A kapp app.
    Kapp { app: String },
    /// Any other field manager that applies (server-side apply).
    Manager { manager: String },
}

/// What follows when the tool writes the field anyway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The owner applies (server-side apply): its next apply conflicts on the field.
    ApplyConflict,
    /// The owner updates (Helm 3, client-side sync): its next run takes the value back.
    TakesBack,
    /// Labels or annotations name the owner, and managedFields show none of its managers: the
    /// whole object is its, and its next run may revert the change.
    ObjectOwned,
}

impl Reason {
    /// The machine-readable reason of `-o json`.
    pub fn code(self) -> &'static str {
        match self {
            Reason::ApplyConflict => "apply-conflict",
            Reason::TakesBack => "update-takes-back",
            Reason::ObjectOwned => "object-owned",
        }
    }

    /// The reason a [`Reason::code`] names (as a saved plan holds it).
    pub fn from_code(code: &str) -> Option<Reason> {
        [
            Reason::ApplyConflict,
            Reason::TakesBack,
            Reason::ObjectOwned,
        ]
        .into_iter()
        .find(|r| r.code() == code)
    }
}

impl Who {
    /// The tool, as `-o json` names it (`helm`, `argocd`, `flux-kustomization`,
    /// `flux-helmrelease`, `kapp`, `field-manager`), and the release, application, Flux
    /// object, kapp app or manager.
    pub fn parts(&self) -> (&'static str, &str) {
        match self {
            Who::Helm { release } => ("helm", release),
            Who::ArgoCd { application } => ("argocd", application),
            Who::FluxKustomization { name } => ("flux-kustomization", name),
            Who::FluxHelmRelease { name } => ("flux-helmrelease", name),
            Who::Kapp { app } => ("kapp", app),
            Who::Manager { manager } => ("field-manager", manager),
        }
    }

    /// The owner [`Who::parts`] names (as a saved plan holds it).
    pub fn from_parts(tool: &str, name: &str) -> Option<Who> {
        let name = name.to_owned();
        Some(match tool {
            "helm" => Who::Helm { release: name },
            "argocd" => Who::ArgoCd { application: name },
            "flux-kustomization" => Who::FluxKustomization { name },
            "flux-helmrelease" => Who::FluxHelmRelease { name },
            "kapp" => Who::Kapp { app: name },
            "field-manager" => Who::Manager { manager: name },
            _ => return None,
        })
    }
}

impl std::fmt::Display for Who {
    /// The owner as a plan names it: `Helm release shop/web`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Who::Helm { release } => write!(f, "Helm release {release}"),
            Who::ArgoCd { application } => write!(f, "Argo CD application {application}"),
            Who::FluxKustomization { name } => write!(f, "Flux Kustomization {name}"),
            Who::FluxHelmRelease { name } => write!(f, "Flux HelmRelease {name}"),
            Who::Kapp { app } => write!(f, "kapp app {app}"),
            Who::Manager { manager } => write!(f, "field manager {manager}"),
        }
    }
}

impl Owner {
    /// The owner as a plan names it: `Helm release shop/web`.
    pub fn name(&self) -> String {
        self.who.to_string()
    }

    /// What follows, in the plan's words: `the next `helm upgrade` of release shop/web will
    /// conflict on .spec.template.spec.containers[name=web].image`.
    pub fn consequence(&self) -> String {
        let fields = self
            .fields
            .iter()
            .map(|f| format!(".{f}"))
            .collect::<Vec<_>>()
            .join(", ");
        let next = match &self.who {
            Who::Helm { release } => format!("the next `helm upgrade` of release {release}"),
            Who::ArgoCd { application } => {
                format!("the next sync of Argo CD application {application}")
            }
            Who::FluxKustomization { name } => {
                format!("the next reconcile of Flux Kustomization {name}")
            }
            Who::FluxHelmRelease { name } => {
                format!("the next reconcile of Flux HelmRelease {name}")
            }
            Who::Kapp { app } => format!("the next `kapp deploy` of app {app}"),
            Who::Manager { manager } => format!("the next apply by field manager {manager}"),
        };
        match self.reason {
            Reason::ApplyConflict => format!("{next} will conflict on {fields}"),
            Reason::TakesBack => format!("{next} will take {fields} back"),
            Reason::ObjectOwned => match &self.who {
                Who::ArgoCd { application } => {
                    format!("Argo CD application {application} may revert this")
                }
                _ => format!("{next} may revert this"),
            },
        }
    }
}

/// The managers Helm, Argo CD, Flux and kapp write with. An `Update` by one of them may make it
/// an owner; an `Update` by any other manager never does.
pub const TOOL_MANAGERS: [&str; 5] = [
    "helm",
    "argocd-controller",
    "kustomize-controller",
    "helm-controller",
    "kapp",
];

/// Whether a managedFields entry can make its manager an owner under the table above: not a
/// subresource's, not this tool's, and an `Apply`, or an `Update` by one of
/// [`TOOL_MANAGERS`]. Every other entry is dropped as it is read.
pub fn may_own(manager: &str, operation: &str, subresource: &str) -> bool {
    subresource.is_empty()
        && !manager.is_empty()
        && manager != OWN_MANAGER
        && (operation == "Apply" || (operation == "Update" && TOOL_MANAGERS.contains(&manager)))
}

/// A tool named by labels or annotations, and the field managers it writes with.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Named {
    who: Who,
    managers: &'static [&'static str],
}

/// The tools `object`'s labels and annotations name as its owner.
fn named(object: &Value) -> Vec<Named> {
    let meta = &object["metadata"];
    let label = |k: &str| meta["labels"][k].as_str().filter(|v| !v.is_empty());
    let annotation = |k: &str| meta["annotations"][k].as_str().filter(|v| !v.is_empty());
    let mut out = Vec::new();
    if label("app.kubernetes.io/managed-by") == Some("Helm")
        && let Some(release) = annotation("meta.helm.sh/release-name")
    {
        let namespace = annotation("meta.helm.sh/release-namespace")
            .or(meta["namespace"].as_str())
            .unwrap_or_default();
        out.push(Named {
            who: Who::Helm {
                release: format!("{namespace}/{release}"),
            },
            managers: &["helm"],
        });
    }
    if let Some(application) =
        annotation("argocd.argoproj.io/tracking-id").and_then(|id| argo_application(id, object))
    {
        out.push(Named {
            who: Who::ArgoCd { application },
            managers: &["argocd-controller"],
        });
    }
    for (prefix, managers, make) in [
        (
            "kustomize.toolkit.fluxcd.io",
            &["kustomize-controller"][..],
            (|name| Who::FluxKustomization { name }) as fn(String) -> Who,
        ),
        ("helm.toolkit.fluxcd.io", &["helm-controller"][..], |name| {
            Who::FluxHelmRelease { name }
        }),
    ] {
        if let (Some(name), Some(namespace)) = (
            label(&format!("{prefix}/name")),
            label(&format!("{prefix}/namespace")),
        ) {
            out.push(Named {
                who: make(format!("{namespace}/{name}")),
                managers,
            });
        }
    }
    if let Some(app) = label("kapp.k14s.io/app") {
        out.push(Named {
            who: Who::Kapp {
                app: app.to_owned(),
            },
            managers: &["kapp"],
        });
    }
    out
}

/// The Argo CD application a tracking id names, when the id names this very object:
/// `<app>:<group>/<kind>:<namespace>/<name>` (the app may be `<namespace>_<app>`; the group is
/// empty for the core group). An id copied from another object names something else: `None`.
fn argo_application(id: &str, object: &Value) -> Option<String> {
    let (app, rest) = id.split_once(':')?;
    let (group_kind, namespace_name) = rest.split_once(':')?;
    let (group, kind) = group_kind.split_once('/')?;
    let (namespace, name) = namespace_name.split_once('/')?;
    let meta = &object["metadata"];
    let object_group = object["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit_once('/'))
        .map_or("", |(g, _)| g);
    let same = group == object_group
        && Some(kind) == object["kind"].as_str()
        && Some(namespace) == meta["namespace"].as_str()
        && Some(name) == meta["name"].as_str();
    if !same || app.is_empty() {
        return None;
    }
    Some(match app.split_once('_') {
        Some((ns, app)) => format!("{ns}/{app}"),
        None => app.to_owned(),
    })
}

/// A readable field path (`spec.template.spec.containers[name=web].image`,
/// `metadata.labels[app]`, `spec.rules[0].http.paths`) as a `fieldsV1` path: `f:` fields,
/// `k:{"name":"web"}` for an entry of a list keyed by name; a list addressed otherwise (by
/// index, or by a key that is not the list's merge key) is held whole, so the path stops at it.
pub fn fields_v1_path(readable: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = readable.trim_start_matches('.');
    while !rest.is_empty() {
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        let (field, after) = rest.split_at(end);
        if !field.is_empty() {
            out.push(format!("f:{field}"));
        }
        rest = after;
        if let Some(inner) = rest.strip_prefix('[') {
            let Some(close) = inner.find(']') else {
                return out;
            };
            let selector = &inner[..close];
            rest = &inner[close + 1..];
            let map_key = matches!(field, "labels" | "annotations");
            match selector.split_once('=') {
                _ if map_key => out.push(format!("f:{selector}")),
                Some(("name", value)) => {
                    out.push(format!("k:{}", serde_json::json!({ "name": value })));
                }
                _ => return out,
            }
        }
        rest = rest.strip_prefix('.').unwrap_or(rest);
    }
    out
}

/// The deepest `fieldsV1` path of a field a plan changes in a route or a policy
/// (`spec.extAuth.http.path`: `f:spec`, `f:extAuth`, `f:http`, `f:path`). A listed object's
/// field sets are kept this deep ([`FieldSet::read`]'s `depth`).
pub const LISTED_DEPTH: usize = 4;

/// The keys of a managedFields entry's `fieldsV1`, as a tree. Read from a listed object it is
/// cut at [`LISTED_DEPTH`] levels: a node whose keys were dropped is `cut`, and holds whatever
/// is asked below it (so a deeper path is never missed, only possibly over-reported).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    keys: Vec<(Box<str>, FieldSet)>,
    cut: bool,
}

impl FieldSet {
    /// A field set of these keys; `cut` when keys below were dropped.
    pub fn new(keys: Vec<(Box<str>, FieldSet)>, cut: bool) -> FieldSet {
        FieldSet { keys, cut }
    }

    /// `fieldsV1` as read from an object, `depth` levels deep (`usize::MAX`: all of it).
    pub fn read(fields: &Value, depth: usize) -> FieldSet {
        let Some(map) = fields.as_object() else {
            return FieldSet::default();
        };
        if depth == 0 {
            return FieldSet {
                keys: Vec::new(),
                cut: !map.is_empty(),
            };
        }
        FieldSet {
            keys: map
                .iter()
                .map(|(k, v)| (k.as_str().into(), FieldSet::read(v, depth - 1)))
                .collect(),
            cut: false,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && !self.cut
    }

    /// Whether the set holds `path` (or something under it).
    fn holds(&self, path: &[String]) -> bool {
        let mut at = self;
        for key in path {
            if at.cut {
                return true;
            }
            match at.keys.iter().find(|(k, _)| **k == **key) {
                Some((_, next)) => at = next,
                None => return false,
            }
        }
        true
    }
}

/// A managedFields entry that may make its manager an owner ([`may_own`]): who, whether it
/// applies, and the fields it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    manager: Box<str>,
    apply: bool,
    fields: FieldSet,
}

impl Entry {
    /// The entry, when it may make its manager an owner; `None` for every other.
    pub fn new(
        manager: &str,
        operation: &str,
        subresource: &str,
        fields: FieldSet,
    ) -> Option<Entry> {
        may_own(manager, operation, subresource).then(|| Entry {
            manager: manager.into(),
            apply: operation == "Apply",
            fields,
        })
    }

    /// The entries of an object's `metadata.managedFields` that may make their managers owners,
    /// their field sets whole.
    fn of(object: &Value) -> Vec<Entry> {
        object["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| {
                let text = |k: &str| e[k].as_str().unwrap_or_default();
                Entry::new(
                    text("manager"),
                    text("operation"),
                    text("subresource"),
                    FieldSet::read(&e["fieldsV1"], usize::MAX),
                )
            })
            .collect()
    }
}

/// What an object says about who else may own its fields: the tools its labels and
/// annotations name, and the managedFields entries that may make their managers owners. Kept
/// for each listed route and policy in place of the object's managedFields (which a listing
/// drops), so that their owners are found from the one LIST, after the objects themselves are
/// planned and freed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Marks {
    tools: Vec<Named>,
    entries: Vec<Entry>,
}

impl Marks {
    /// The marks of `object` as read (its labels, annotations and whole managedFields).
    pub fn of(object: &Value) -> Marks {
        Marks::new(object, Entry::of(object))
    }

    /// The marks of `object`'s labels and annotations (its `apiVersion`, `kind`, namespace
    /// and name tell whether an Argo CD tracking id names it), with its managedFields `entries`
    /// as read apart.
    pub fn new(object: &Value, entries: Vec<Entry>) -> Marks {
        Marks {
            tools: named(object),
            entries,
        }
    }

    /// Nothing names an owner: no tool's labels, no entry that may own.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.entries.is_empty()
    }

    /// Who else owns the fields `changed` (readable paths; `.`: the whole object, created or
    /// deleted).
    pub fn owners(&self, changed: &[String]) -> Vec<Owner> {
        let whole = changed.iter().any(|c| c == ".");
        let paths: Vec<(&String, Vec<String>)> = changed
            .iter()
            .map(|c| (c, fields_v1_path(c)))
            .filter(|(_, p)| !p.is_empty())
            .collect();
        let mut out: Vec<Owner> = Vec::new();
        let mut add = |who: Who, fields: Vec<String>, reason: Reason| match out
            .iter_mut()
            .find(|o| o.who == who && o.reason == reason)
        {
            Some(o) => {
                for f in fields {
                    if !o.fields.contains(&f) {
                        o.fields.push(f);
                    }
                }
            }
            None => out.push(Owner {
                who,
                fields,
                reason,
            }),
        };
        for entry in &self.entries {
            let manager = &*entry.manager;
            let tool = self.tools.iter().find(|t| t.managers.contains(&manager));
            let reason = if entry.apply {
                Reason::ApplyConflict
            } else if tool.is_some() || matches!(manager, "helm" | "argocd-controller") {
                Reason::TakesBack
            } else {
                continue;
            };
            let who = || match tool {
                Some(t) => t.who.clone(),
                None => Who::Manager {
                    manager: manager.to_owned(),
                },
            };
            if whole && !entry.fields.is_empty() {
                // Deleting (or replacing) an object its manager holds fields of: its next
                // run puts them back.
                add(who(), Vec::new(), Reason::ObjectOwned);
                continue;
            }
            let fields: Vec<String> = paths
                .iter()
                .filter(|(_, p)| entry.fields.holds(p))
                .map(|(readable, _)| (*readable).clone())
                .collect();
            if !fields.is_empty() {
                add(who(), fields, reason);
            }
        }
        for tool in &self.tools {
            let has_manager = self
                .entries
                .iter()
                .any(|e| tool.managers.contains(&&*e.manager));
            if !has_manager && !changed.is_empty() {
                add(tool.who.clone(), Vec::new(), Reason::ObjectOwned);
            }
        }
        out
    }
}

/// A listed route's or policy's [`Marks`], by its kind and name: kept for the objects whose
/// marks are not empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marked {
    pub kind: crate::plan::Kind,
    pub name: String,
    pub marks: Marks,
}

/// Who else owns the fields `changed` (readable paths) of `object`, the live object as read.
pub fn owners(object: &Value, changed: &[String]) -> Vec<Owner> {
    Marks::of(object).owners(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const IMAGE: &str = "spec.template.spec.containers[name=web].image";

    fn image_fields() -> Value {
        json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
            "k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}
        }}}}})
    }

    fn labels_fields() -> Value {
        json!({"f:metadata": {"f:labels": {"f:app": {}}}})
    }

    fn entry(manager: &str, operation: &str, fields: Value) -> Value {
        json!({"manager": manager, "operation": operation, "apiVersion": "apps/v1", "fieldsV1": fields})
    }

    fn deployment(entries: Vec<Value>, labels: Value, annotations: Value) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "labels": labels,
                         "annotations": annotations, "managedFields": entries},
        })
    }

    fn helm_labels() -> (Value, Value) {
        (
            json!({"app.kubernetes.io/managed-by": "Helm"}),
            json!({"meta.helm.sh/release-name": "web", "meta.helm.sh/release-namespace": "shop"}),
        )
    }

    #[test]
    fn fields_v1_paths() {
        assert_eq!(
            fields_v1_path(IMAGE),
            [
                "f:spec",
                "f:template",
                "f:spec",
                "f:containers",
                "k:{\"name\":\"web\"}",
                "f:image"
            ]
        );
        assert_eq!(
            fields_v1_path("spec.maxReplicas"),
            ["f:spec", "f:maxReplicas"]
        );
        assert_eq!(
            fields_v1_path("metadata.labels[app]"),
            ["f:metadata", "f:labels", "f:app"]
        );
        assert_eq!(
            fields_v1_path("metadata.annotations[nginx.ingress.kubernetes.io/auth-url]"),
            [
                "f:metadata",
                "f:annotations",
                "f:nginx.ingress.kubernetes.io/auth-url"
            ]
        );
        assert_eq!(
            fields_v1_path("spec.rules[0].http.paths"),
            ["f:spec", "f:rules"]
        );
        assert_eq!(
            fields_v1_path("spec.rules[host=shop.example.com].http.paths"),
            ["f:spec", "f:rules"]
        );
    }

    /// One row: the managedFields entries, labels and annotations, and who owns the image.
    struct Row {
        what: &'static str,
        entries: Vec<Value>,
        labelled: Option<(Value, Value)>,
        want: Vec<(&'static str, Reason, usize)>,
    }

    #[test]
    fn who_owns_the_image() {
        let rows = vec![
            Row {
                what: "server-side apply by a pipeline",
                entries: vec![entry("ci-pipeline", "Apply", image_fields())],
                labelled: None,
                want: vec![("field manager ci-pipeline", Reason::ApplyConflict, 1)],
            },
            Row {
                what: "kubectl apply --server-side",
                entries: vec![entry("kubectl", "Apply", image_fields())],
                labelled: None,
                want: vec![("field manager kubectl", Reason::ApplyConflict, 1)],
            },
            Row {
                what: "Helm 4: labels and an Apply manager holding the image",
                entries: vec![entry("helm", "Apply", image_fields())],
                labelled: Some(helm_labels()),
                want: vec![("Helm release shop/web", Reason::ApplyConflict, 1)],
            },
            Row {
                what: "Helm 4: the Apply manager holds only labels",
                entries: vec![
                    entry("helm", "Apply", labels_fields()),
                    entry("kubectl-set", "Update", image_fields()),
                ],
                labelled: Some(helm_labels()),
                want: vec![],
            },
            Row {
                what: "Helm 3: Update by helm",
                entries: vec![entry("helm", "Update", image_fields())],
                labelled: Some(helm_labels()),
                want: vec![("Helm release shop/web", Reason::TakesBack, 1)],
            },
            Row {
                what: "Helm labels, managedFields stripped",
                entries: vec![],
                labelled: Some(helm_labels()),
                want: vec![("Helm release shop/web", Reason::ObjectOwned, 0)],
            },
            Row {
                what: "client-side Argo CD sync",
                entries: vec![entry("argocd-controller", "Update", image_fields())],
                labelled: None,
                want: vec![("field manager argocd-controller", Reason::TakesBack, 1)],
            },
            Row {
                what: "an apply manager owning only labels",
                entries: vec![entry("ci-pipeline", "Apply", labels_fields())],
                labelled: None,
                want: vec![],
            },
            Row {
                what: "people's kubectl and this tool",
                entries: vec![
                    entry("kubectl-create", "Update", image_fields()),
                    entry("kubectl-set", "Update", image_fields()),
                    entry("kubectl-edit", "Update", image_fields()),
                    entry("kubectl-client-side-apply", "Update", image_fields()),
                    entry("kubectl-patch", "Update", image_fields()),
                    entry("kubectl-rollout", "Update", image_fields()),
                    entry(OWN_MANAGER, "Apply", image_fields()),
                    entry(OWN_MANAGER, "Update", image_fields()),
                ],
                labelled: None,
                want: vec![],
            },
            Row {
                what: "a status write",
                entries: vec![{
                    let mut e = entry("ci-pipeline", "Apply", image_fields());
                    e["subresource"] = json!("status");
                    e
                }],
                labelled: None,
                want: vec![],
            },
        ];
        for row in rows {
            let (labels, annotations) = row.labelled.unwrap_or((json!({}), json!({})));
            let object = deployment(row.entries, labels, annotations);
            let got: Vec<(String, Reason, usize)> = owners(&object, &[IMAGE.to_owned()])
                .into_iter()
                .map(|o| (o.name(), o.reason, o.fields.len()))
                .collect();
            let want: Vec<(String, Reason, usize)> = row
                .want
                .into_iter()
                .map(|(n, r, f)| (n.to_owned(), r, f))
                .collect();
            assert_eq!(got, want, "{}", row.what);
        }
    }

    #[test]
    fn argo_cd_tracking_ids_are_trusted_only_for_this_object() {
        let tracked = |id: &str| {
            deployment(
                vec![],
                json!({"app.kubernetes.io/instance": "shop-apps"}),
                json!({"argocd.argoproj.io/tracking-id": id}),
            )
        };
        let name = |o: &Value| -> Vec<String> {
            owners(o, &[IMAGE.to_owned()])
                .iter()
                .map(Owner::consequence)
                .collect()
        };
        assert_eq!(
            name(&tracked("shop-apps:apps/Deployment:shop/web")),
            ["Argo CD application shop-apps may revert this"]
        );
        assert_eq!(
            name(&tracked("argocd_shop-apps:apps/Deployment:shop/web")),
            ["Argo CD application argocd/shop-apps may revert this"]
        );
        // Copied from another object: not an owner. The instance label alone never is.
        for id in [
            "shop-apps:apps/Deployment:shop/api",
            "shop-apps:apps/Deployment:other/web",
            "shop-apps:/Service:shop/web",
            "garbage",
        ] {
            assert!(name(&tracked(id)).is_empty(), "{id}");
        }
    }

    #[test]
    fn flux_and_kapp_labels_name_the_owner() {
        let flux = deployment(
            vec![],
            json!({"kustomize.toolkit.fluxcd.io/name": "apps",
                   "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}),
            json!({}),
        );
        assert_eq!(
            owners(&flux, &[IMAGE.to_owned()])[0].name(),
            "Flux Kustomization flux-system/apps"
        );
        // Flux's manager applies, and holds only labels: the image is not its.
        let applied = deployment(
            vec![entry("kustomize-controller", "Apply", labels_fields())],
            json!({"kustomize.toolkit.fluxcd.io/name": "apps",
                   "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}),
            json!({}),
        );
        assert!(owners(&applied, &[IMAGE.to_owned()]).is_empty());
        let hr = deployment(
            vec![],
            json!({"helm.toolkit.fluxcd.io/name": "web", "helm.toolkit.fluxcd.io/namespace": "shop"}),
            json!({}),
        );
        assert_eq!(
            owners(&hr, &[IMAGE.to_owned()])[0].name(),
            "Flux HelmRelease shop/web"
        );
        let kapp = deployment(vec![], json!({"kapp.k14s.io/app": "1690000000"}), json!({}));
        assert_eq!(
            owners(&kapp, &[IMAGE.to_owned()])[0].reason,
            Reason::ObjectOwned
        );
        // kapp updates with its own manager: per field.
        let kapp_fields = deployment(
            vec![entry("kapp", "Update", image_fields())],
            json!({"kapp.k14s.io/app": "1690000000"}),
            json!({}),
        );
        assert_eq!(
            owners(&kapp_fields, &[IMAGE.to_owned()])[0].reason,
            Reason::TakesBack
        );
    }

    #[test]
    fn the_plan_says_what_follows() {
        let (labels, annotations) = helm_labels();
        let object = deployment(
            vec![entry("helm", "Apply", image_fields())],
            labels.clone(),
            annotations.clone(),
        );
        let owner = &owners(&object, &[IMAGE.to_owned()])[0];
        assert_eq!(
            owner.consequence(),
            format!("the next `helm upgrade` of release shop/web will conflict on .{IMAGE}")
        );
        assert_eq!(owner.reason.code(), "apply-conflict");
        let object = deployment(
            vec![entry("helm", "Update", image_fields())],
            labels,
            annotations,
        );
        assert_eq!(
            owners(&object, &[IMAGE.to_owned()])[0].consequence(),
            format!("the next `helm upgrade` of release shop/web will take .{IMAGE} back")
        );
        // Nothing changed: nothing to own.
        assert!(owners(&object, &[]).is_empty());
    }

    fn ingress(entries: Vec<Value>, labels: Value, annotations: Value) -> Value {
        json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "web-public", "namespace": "shop", "labels": labels,
                         "annotations": annotations, "managedFields": entries},
        })
    }

    #[test]
    fn the_owner_of_a_route_holds_its_rules_not_its_annotations() {
        let (labels, annotations) = helm_labels();
        let rules = json!({"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {"f:rules": {}}});
        let object = ingress(
            vec![
                entry("helm", "Apply", rules),
                entry(
                    "kubectl-appupdate",
                    "Update",
                    json!({"f:metadata": {"f:annotations": {}}}),
                ),
            ],
            labels,
            annotations,
        );
        let paths = "spec.rules[host=shop.example.com].http.paths";
        let got = owners(&object, &[paths.to_owned()]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].reason, Reason::ApplyConflict);
        assert_eq!(got[0].fields, [paths]);
        let auth = "metadata.annotations[nginx.ingress.kubernetes.io/auth-url]";
        assert!(owners(&object, &[auth.to_owned()]).is_empty());
        // Deleting it: its next apply puts it back.
        let whole = owners(&object, &[".".to_owned()]);
        assert_eq!(
            whole
                .iter()
                .map(|o| (o.name(), o.reason, o.fields.len()))
                .collect::<Vec<_>>(),
            [("Helm release shop/web".to_owned(), Reason::ObjectOwned, 0)]
        );
        assert_eq!(
            whole[0].consequence(),
            "the next `helm upgrade` of release shop/web may revert this"
        );
    }

    #[test]
    fn a_listed_objects_marks_are_cut_but_find_the_same_owners() {
        let policy = json!({
            "apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "SecurityPolicy",
            "metadata": {"name": "web-user", "namespace": "shop", "managedFields": [
                entry("ci-pipeline", "Apply", json!({"f:spec": {"f:extAuth": {"f:http": {
                    "f:path": {}, "f:backendRefs": {}}}}})),
                entry("kubectl-edit", "Update", json!({"f:spec": {"f:targetRefs": {}}})),
                {"manager": "ci-pipeline", "operation": "Apply", "subresource": "status",
                 "fieldsV1": {"f:status": {}}},
            ]},
        });
        let whole = Marks::of(&policy);
        // As a listing keeps them: each entry that may own, its field set cut two levels deep.
        let listed_entries: Vec<Entry> = policy["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| {
                let text = |k: &str| e[k].as_str().unwrap_or_default();
                Entry::new(
                    text("manager"),
                    text("operation"),
                    text("subresource"),
                    FieldSet::read(&e["fieldsV1"], 2),
                )
            })
            .collect();
        assert_eq!(listed_entries.len(), 1, "{listed_entries:?}");
        let listed = Marks::new(&policy, listed_entries);
        for (changed, owned) in [
            ("spec.extAuth.http.path", true),
            ("spec.extAuth.http.backendRefs", true),
            ("spec.targetRefs", false),
        ] {
            for marks in [&whole, &listed] {
                let got = marks.owners(&[changed.to_owned()]);
                assert_eq!(!got.is_empty(), owned, "{changed}");
            }
        }
        // Cut above the field: held by whatever is below the cut (never missed).
        assert!(
            !listed
                .owners(&["spec.extAuth.failOpen".to_owned()])
                .is_empty()
        );
        assert!(
            whole
                .owners(&["spec.extAuth.failOpen".to_owned()])
                .is_empty()
        );
        // An object nobody else marks has empty marks, and is not kept.
        assert!(
            Marks::of(&json!({"metadata": {"managedFields": [
                entry(OWN_MANAGER, "Update", image_fields()),
                entry("kubectl-client-side-apply", "Update", image_fields()),
            ]}}))
            .is_empty()
        );
    }

    #[test]
    fn every_owner_and_reason_reads_back_from_its_parts() {
        for who in [
            Who::Helm {
                release: "shop/web".into(),
            },
            Who::ArgoCd {
                application: "apps".into(),
            },
            Who::FluxKustomization { name: "f/a".into() },
            Who::FluxHelmRelease { name: "f/b".into() },
            Who::Kapp { app: "k".into() },
            Who::Manager {
                manager: "ci".into(),
            },
        ] {
            let (tool, name) = who.parts();
            assert_eq!(Who::from_parts(tool, name), Some(who.clone()));
        }
        assert_eq!(Who::from_parts("chef", "x"), None);
        for r in [
            Reason::ApplyConflict,
            Reason::TakesBack,
            Reason::ObjectOwned,
        ] {
            assert_eq!(Reason::from_code(r.code()), Some(r));
        }
        assert_eq!(Reason::from_code("maybe"), None);
    }
}
