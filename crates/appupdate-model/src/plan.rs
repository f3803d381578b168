//! The plan: what this run would change, as data.
//!
//! Planning is pure. Each object the run may touch has an updater (`appupdate_plan::updaters`)
//! that names the fields it modifies and, given the live object (raw JSON, so no field is
//! lost), computes an [`ObjectChange`]: the action, the guarded field changes, the focused
//! before/after views that the user is shown, and the minimal write that realises it. The same
//! updater runs again on a conflict retry against the re-read object, and [`recheck`] decides
//! whether the fresh change is still the one the user approved (the approved-diff guard).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::route_style::{AuthProvider, RouteInfo, RouteStyle};
use crate::text::Untrusted;

/// The kinds of object this tool writes (the Service and IngressClasses are only read).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Kind {
    Deployment,
    HorizontalPodAutoscaler,
    Ingress,
    /// Gateway API `HTTPRoute` (`gateway.networking.k8s.io/v1`).
    #[serde(rename = "HTTPRoute")]
    HttpRoute,
    /// Envoy Gateway `SecurityPolicy` (`gateway.envoyproxy.io/v1alpha1`): the external auth of
    /// one HTTPRoute with the `envoy-gateway` auth provider.
    SecurityPolicy,
}

impl Kind {
    /// `apiVersion` of the version this tool speaks.
    pub fn api_version(self) -> &'static str {
        match self {
            Kind::Deployment => "apps/v1",
            Kind::HorizontalPodAutoscaler => "autoscaling/v2",
            Kind::Ingress => "networking.k8s.io/v1",
            Kind::HttpRoute => "gateway.networking.k8s.io/v1",
            Kind::SecurityPolicy => "gateway.envoyproxy.io/v1alpha1",
        }
    }

    /// API group ("" for core; none of ours is core).
    pub fn group(self) -> &'static str {
        match self {
            Kind::Deployment => "apps",
            Kind::HorizontalPodAutoscaler => "autoscaling",
            Kind::Ingress => "networking.k8s.io",
            Kind::HttpRoute => "gateway.networking.k8s.io",
            Kind::SecurityPolicy => "gateway.envoyproxy.io",
        }
    }

    /// Version within the group.
    pub fn version(self) -> &'static str {
        match self {
            Kind::Deployment | Kind::Ingress | Kind::HttpRoute => "v1",
            Kind::HorizontalPodAutoscaler => "v2",
            Kind::SecurityPolicy => "v1alpha1",
        }
    }

    /// Lower-case plural resource name, as in URLs and RBAC messages.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Deployment => "deployments",
            Kind::HorizontalPodAutoscaler => "horizontalpodautoscalers",
            Kind::Ingress => "ingresses",
            Kind::HttpRoute => "httproutes",
            Kind::SecurityPolicy => "securitypolicies",
        }
    }

    /// `resource.group`, the way kubectl names objects (`deployment.apps/web`).
    pub fn kubectl_name(self) -> &'static str {
        match self {
            Kind::Deployment => "deployment.apps",
            Kind::HorizontalPodAutoscaler => "horizontalpodautoscaler.autoscaling",
            Kind::Ingress => "ingress.networking.k8s.io",
            Kind::HttpRoute => "httproute.gateway.networking.k8s.io",
            Kind::SecurityPolicy => "securitypolicy.gateway.envoyproxy.io",
        }
    }

    /// `resource.group` in the plural, as in RBAC messages and lists
    /// (`httproutes.gateway.networking.k8s.io`).
    pub fn resource_name(self) -> String {
        format!("{}.{}", self.plural(), self.group())
    }

    /// Order within a write round ([`write_order`]) and in a listing: Deployment, HPA,
    /// Ingresses, SecurityPolicies, HTTPRoutes (a policy is listed before the route it guards,
    /// as a new one is written before it).
    pub fn order(self) -> u8 {
        match self {
            Kind::Deployment => 0,
            Kind::HorizontalPodAutoscaler => 1,
            Kind::Ingress => 2,
            Kind::SecurityPolicy => 3,
            Kind::HttpRoute => 4,
        }
    }

    /// The kind's name in the plural, for sentences ("Ingresses", "HTTPRoutes").
    pub fn plural_title(self) -> &'static str {
        match self {
            Kind::Deployment => "Deployments",
            Kind::HorizontalPodAutoscaler => "HorizontalPodAutoscalers",
            Kind::Ingress => "Ingresses",
            Kind::HttpRoute => "HTTPRoutes",
            Kind::SecurityPolicy => "SecurityPolicies",
        }
    }

    /// Whether objects of this kind publish the application's endpoints.
    pub fn is_route(self) -> bool {
        matches!(self, Kind::Ingress | Kind::HttpRoute)
    }

    /// The kind of route an object of this kind guards: a SecurityPolicy enforces the auth of
    /// the HTTPRoute of its own name ([`write_order`] writes it before that route serves, and
    /// deletes it only after).
    pub fn guards(self) -> Option<Kind> {
        match self {
            Kind::SecurityPolicy => Some(Kind::HttpRoute),
            _ => None,
        }
    }

    /// Whether objects of this kind belong to the application's routes: routes, and what
    /// guards them.
    pub fn is_route_part(self) -> bool {
        self.is_route() || self.guards().is_some()
    }
}

impl Kind {
    /// The `kind` of its objects (`HTTPRoute`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Deployment => "Deployment",
            Kind::HorizontalPodAutoscaler => "HorizontalPodAutoscaler",
            Kind::Ingress => "Ingress",
            Kind::HttpRoute => "HTTPRoute",
            Kind::SecurityPolicy => "SecurityPolicy",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What happens to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Unchanged,
    Create,
    Update,
    Delete,
}

/// The write order of a plan: the round (0 first) in which each change is written, `None` for
/// what is not written, and the paths whose removal could not be ordered after their new
/// server. Computed by [`write_order`], the one place the order is decided.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteOrder {
    /// One entry per change, in the order the changes were given.
    pub rounds: Vec<Option<usize>>,
    /// Endpoint paths that move between routes in a cycle (for example two paths swapping
    /// scope groups): each such route both gives a path to and takes one from another route of
    /// the cycle, so with one write per route one of them is unserved between the cycle's
    /// writes, which share a round. Sorted; empty for almost every plan.
    pub unguarded: Vec<String>,
}

impl WriteOrder {
    /// How many write rounds there are (the highest round plus one; 0 when nothing is written).
    pub fn round_count(&self) -> usize {
        self.rounds.iter().flatten().max().map_or(0, |r| r + 1)
    }
}

/// The write order, from the dependencies between the writes. Rounds run one after the other;
/// the writes of one round run concurrently, in any order.
///
/// A route write that stops serving an endpoint path (an update dropping it, or a delete)
/// depends on every other write after which that path is served (a create, or an update that
/// adds it or keeps it — a route that keeps a path may still change the hosts it serves it
/// on), in any kind and style. Each write goes in the first round after all the writes it
/// depends on; a write without dependencies — the Deployment, the HPA, a create, an update
/// that adds or changes paths in place (a change of style, of the auth service) and a route
/// whose dropped paths nobody serves afterwards — goes in round 0.
///
/// A write that guards a route ([`Kind::guards`]: a SecurityPolicy, the HTTPRoute of its name)
/// is ordered with that route: a route written to serve (a create or an update) waits for its
/// guard's create or update, and a guard deleted waits for its route's write (the route deleted,
/// or given its own auth back). So a scoped path is never reachable without its policy.
///
/// So a path that is served before and after the run is served at every moment of it: it is
/// served by its new route before any route that served it stops. The one exception is a
/// cycle — route A gives a path to route B while B gives one to A (two paths swapping scope
/// groups), or longer rings: no order of single writes keeps both served, so the writes of a
/// cycle share one round (after everything they depend on outside it) and its paths are
/// listed in [`WriteOrder::unguarded`].
pub fn write_order<'a>(changes: impl IntoIterator<Item = &'a ObjectChange>) -> WriteOrder {
    let changes: Vec<&ObjectChange> = changes.into_iter().collect();
    let n = changes.len();
    let written: Vec<bool> = changes.iter().map(|c| c.is_change()).collect();
    fn paths(c: &ObjectChange) -> (BTreeSet<&str>, BTreeSet<&str>) {
        match (&c.route, c.kind.is_route()) {
            (Some(r), true) => (
                r.paths_before.iter().map(String::as_str).collect(),
                if c.action() == Action::Delete {
                    BTreeSet::new()
                } else {
                    r.paths.iter().map(String::as_str).collect()
                },
            ),
            _ => (BTreeSet::new(), BTreeSet::new()),
        }
    }
    let sets: Vec<_> = changes.iter().map(|c| paths(c)).collect();
    // Path → the writes after which it is served.
    let mut servers: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, (_, after)) in sets.iter().enumerate() {
        if written[i] {
            for p in after {
                servers.entry(p).or_default().push(i);
            }
        }
    }
    // deps[i]: the writes i waits for, each with a path that makes it wait.
    let mut deps: Vec<Vec<(usize, &str)>> = vec![Vec::new(); n];
    for (i, (before, after)) in sets.iter().enumerate() {
        if !written[i] {
            continue;
        }
        for p in before.difference(after) {
            for &j in servers.get(p).into_iter().flatten() {
                if j != i && !deps[i].iter().any(|&(k, _)| k == j) {
                    deps[i].push((j, p));
                }
            }
        }
    }
    // Guards and the routes they guard, by kind, namespace and name.
    let mut by_name: BTreeMap<(Kind, &str, &str), usize> = BTreeMap::new();
    for (i, c) in changes.iter().enumerate() {
        if written[i] {
            by_name.insert((c.kind, c.namespace.as_str(), c.name.as_str()), i);
        }
    }
    for (i, c) in changes.iter().enumerate() {
        let Some(guarded) = c.kind.guards().filter(|_| written[i]) else {
            continue;
        };
        let Some(&j) = by_name.get(&(guarded, c.namespace.as_str(), c.name.as_str())) else {
            continue;
        };
        if c.action() == Action::Delete {
            deps[i].push((j, ""));
        } else if changes[j].action() != Action::Delete {
            deps[j].push((i, ""));
        }
    }
    let (component, order) = strongly_connected(&deps);
    // Components come sinks first: every component a write depends on has its round already.
    let mut component_round: Vec<usize> = vec![0; order.len()];
    for (c, members) in order.iter().enumerate() {
        let round = members
            .iter()
            .flat_map(|&i| deps[i].iter())
            .filter(|&&(j, _)| component[j] != c)
            .map(|&(j, _)| component_round[component[j]] + 1)
            .max()
            .unwrap_or(0);
        component_round[c] = round;
    }
    let rounds = (0..n)
        .map(|i| written[i].then(|| component_round[component[i]]))
        .collect();
    // Every path a write of a cycle stops serving and another write of the same cycle starts
    // to (`deps` keeps one path per pair of writes; a pair may exchange several).
    let mut unguarded: BTreeSet<String> = BTreeSet::new();
    for (i, (before, after)) in sets.iter().enumerate() {
        if !written[i] || !deps[i].iter().any(|&(j, _)| component[j] == component[i]) {
            continue;
        }
        for p in before.difference(after) {
            if servers
                .get(p)
                .into_iter()
                .flatten()
                .any(|&j| j != i && component[j] == component[i])
            {
                unguarded.insert((*p).to_owned());
            }
        }
    }
    WriteOrder {
        rounds,
        unguarded: unguarded.into_iter().collect(),
    }
}

/// Tarjan's strongly connected components of the graph `edges` (node → its successors, each
/// with a label), without recursion: the component of every node, and each component's
/// members. Components are listed sinks first: after every component reachable from them.
fn strongly_connected<T>(edges: &[Vec<(usize, T)>]) -> (Vec<usize>, Vec<Vec<usize>>) {
    const NONE: usize = usize::MAX;
    let n = edges.len();
    let mut index = vec![NONE; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut component = vec![NONE; n];
    let mut components: Vec<Vec<usize>> = Vec::new();
    let mut next = 0;
    for root in 0..n {
        if index[root] != NONE {
            continue;
        }
        // (node, how many of its edges have been followed)
        let mut work: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut e)) = work.last_mut() {
            if let Some(&(w, _)) = edges[v].get(*e) {
                *e += 1;
                if index[w] == NONE {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let c = components.len();
                let mut members = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component[w] = c;
                    members.push(w);
                    if w == v {
                        break;
                    }
                }
                components.push(members);
            }
        }
    }
    (component, components)
}

/// Where a change is listed among the routes of a plan ([`Plan::new`]): creates, updates that
/// add or change paths, updates that only take paths away, deletes; unchanged ones last.
fn listing_rank(change: &ObjectChange) -> u8 {
    match change.action() {
        Action::Unchanged => 4,
        Action::Create => 0,
        Action::Update => match &change.route {
            Some(r) if r.only_removes_paths() => 2,
            _ => 1,
        },
        Action::Delete => 3,
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Unchanged => "unchanged",
            Action::Create => "create",
            Action::Update => "update",
            Action::Delete => "delete",
        })
    }
}

/// A field that other steps read back from a plan (the history record, the undo's drift check,
/// the fleet's rollout follower), typed. The [`FieldChange::path`] text stays the one the plan
/// shows and saves; it is made by [`Field::path`] and read by [`Field::parse`], the one place
/// that knows its syntax. The route fields are only shown, so they keep their path text only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field<'a> {
    /// The image of the named container of a Deployment:
    /// `spec.template.spec.containers[name=<container>].image`.
    Image { container: &'a str },
    /// `spec.minReplicas` of a HorizontalPodAutoscaler.
    MinReplicas,
    /// `spec.maxReplicas` of a HorizontalPodAutoscaler.
    MaxReplicas,
    /// The whole object (`.`): a create or a delete.
    Whole,
}

impl<'a> Field<'a> {
    const IMAGE_PREFIX: &'static str = "spec.template.spec.containers[name=";
    const IMAGE_SUFFIX: &'static str = "].image";

    /// The path text of the field, as shown and saved.
    pub fn path(self) -> String {
        match self {
            Field::Image { container } => {
                format!("{}{container}{}", Self::IMAGE_PREFIX, Self::IMAGE_SUFFIX)
            }
            Field::MinReplicas => "spec.minReplicas".into(),
            Field::MaxReplicas => "spec.maxReplicas".into(),
            Field::Whole => ".".into(),
        }
    }

    /// The field a path text names, `None` for one that is not typed (a route's field).
    pub fn parse(path: &'a str) -> Option<Field<'a>> {
        Some(match path {
            "spec.minReplicas" => Field::MinReplicas,
            "spec.maxReplicas" => Field::MaxReplicas,
            "." => Field::Whole,
            _ => Field::Image {
                container: path
                    .strip_prefix(Self::IMAGE_PREFIX)?
                    .strip_suffix(Self::IMAGE_SUFFIX)?,
            },
        })
    }
}

/// One leaf value (or owned sub-tree) that the run changes. `None` means absent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FieldChange {
    /// A readable path, e.g. `spec.template.spec.containers[name=web].image`; typed by
    /// [`FieldChange::field`].
    pub path: String,
    pub before: Option<FieldValue>,
    pub after: Option<FieldValue>,
}

impl FieldChange {
    pub fn new(path: impl Into<String>, before: Option<Value>, after: Option<Value>) -> Self {
        FieldChange {
            path: path.into(),
            before: before.map(FieldValue::from),
            after: after.map(FieldValue::from),
        }
    }

    /// A change of a typed [`Field`], its path made by [`Field::path`].
    pub fn of(field: Field<'_>, before: Option<Value>, after: Option<Value>) -> Self {
        FieldChange::new(field.path(), before, after)
    }

    /// The typed field this change's path names, `None` for a route's field.
    pub fn field(&self) -> Option<Field<'_>> {
        Field::parse(&self.path)
    }

    /// The whole object (path `.`) going from `before` to `after`: the views' own values, not
    /// copies (a delete of a large route held its paths twice).
    pub fn whole(before: Option<&View>, after: Option<&View>) -> Self {
        let whole = |view: &View| {
            FieldValue(FieldRepr::InView {
                view: view.clone(),
                pointer: "".into(),
            })
        };
        FieldChange {
            path: Field::Whole.path(),
            before: before.map(whole),
            after: after.map(whole),
        }
    }

    pub fn before(&self) -> Option<Cow<'_, Value>> {
        self.before.as_ref().map(FieldValue::value)
    }

    pub fn after(&self) -> Option<Cow<'_, Value>> {
        self.after.as_ref().map(FieldValue::value)
    }
}

/// A changed field's value: its own, or the part of a view ([`ObjectChange::before`],
/// [`ObjectChange::after`]) that holds it — the same value, held once. An Ingress's paths are
/// both a field and part of its views; for a large application they were a fifth of the plan.
/// Compared, shown and saved as the value it stands for.
#[derive(Clone)]
pub struct FieldValue(FieldRepr);

#[derive(Clone)]
enum FieldRepr {
    Own(Value),
    InView { view: View, pointer: Box<str> },
}

impl FieldValue {
    /// The value at the JSON `pointer` (RFC 6901) of `view`, which is `of` (held or not);
    /// `None` when there is none.
    pub fn in_view(view: &View, of: &Value, pointer: &str) -> Option<FieldValue> {
        of.pointer(pointer)?;
        Some(FieldValue(FieldRepr::InView {
            view: view.clone(),
            pointer: pointer.into(),
        }))
    }

    /// The value: borrowed when own or in a held view.
    pub fn value(&self) -> Cow<'_, Value> {
        match &self.0 {
            FieldRepr::Own(v) => Cow::Borrowed(v),
            // Views are never changed once made (they are shared), so the pointer that
            // resolved when this was made still does.
            FieldRepr::InView { view, pointer } => {
                view.pointer(pointer).unwrap_or(Cow::Owned(Value::Null))
            }
        }
    }
}

impl From<Value> for FieldValue {
    fn from(v: Value) -> FieldValue {
        FieldValue(FieldRepr::Own(v))
    }
}

impl PartialEq for FieldValue {
    fn eq(&self, other: &FieldValue) -> bool {
        self.value() == other.value()
    }
}

impl fmt::Debug for FieldValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value().fmt(f)
    }
}

impl Serialize for FieldValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for FieldValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<FieldValue, D::Error> {
        Value::deserialize(d).map(FieldValue::from)
    }
}

/// A focused view ([`ObjectChange::before`], [`ObjectChange::after`]): held as a value, or made
/// from what the change holds anyway each time it is read — an updated Ingress's after-view is
/// its before-view with its patch applied, so a large application does not hold every route
/// twice. Data only: the renderer writes the text. Compared, shown and saved as the value it
/// stands for.
#[derive(Clone)]
pub struct View(ViewRepr);

#[derive(Clone)]
enum ViewRepr {
    Held(Arc<Value>),
    Made(Arc<dyn MakeView>),
}

/// Makes a view from parts a change holds; the same view each time (the parts are shared and
/// never changed).
pub trait MakeView: Send + Sync {
    fn make(&self) -> Value;

    /// The view this one is made from, when it is made from one ([`MakeView::make_from`]).
    fn base(&self) -> Option<&View> {
        None
    }

    /// The view made from `base`, the value of [`MakeView::base`] (read once by a caller that
    /// needs both).
    fn make_from(&self, base: &Value) -> Value {
        let _ = base;
        self.make()
    }
}

impl View {
    /// A view made from `parts` each time it is read.
    pub fn made(parts: impl MakeView + 'static) -> View {
        View(ViewRepr::Made(Arc::new(parts)))
    }

    /// The view: borrowed when held, read or made when not.
    pub fn get(&self) -> Cow<'_, Value> {
        match &self.0 {
            ViewRepr::Held(v) => Cow::Borrowed(v),
            ViewRepr::Made(parts) => Cow::Owned(parts.make()),
        }
    }

    /// The same view held the same way (one `Arc`), not only an equal one.
    fn same(&self, other: &View) -> bool {
        match (&self.0, &other.0) {
            (ViewRepr::Held(a), ViewRepr::Held(b)) => Arc::ptr_eq(a, b),
            (ViewRepr::Made(a), ViewRepr::Made(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// The part at the JSON `pointer` (RFC 6901); `None` when there is none.
    fn pointer(&self, pointer: &str) -> Option<Cow<'_, Value>> {
        match self.get() {
            Cow::Borrowed(v) => v.pointer(pointer).map(Cow::Borrowed),
            Cow::Owned(mut v) => v.pointer_mut(pointer).map(|p| Cow::Owned(p.take())),
        }
    }
}

impl From<Value> for View {
    fn from(v: Value) -> View {
        View(ViewRepr::Held(Arc::new(v)))
    }
}

impl From<Arc<Value>> for View {
    fn from(v: Arc<Value>) -> View {
        View(ViewRepr::Held(v))
    }
}

impl PartialEq for View {
    fn eq(&self, other: &View) -> bool {
        self.same(other) || *self.get() == *other.get()
    }
}

impl fmt::Debug for View {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.get().fmt(f)
    }
}

impl Serialize for View {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(s)
    }
}

impl<'de> Deserialize<'de> for View {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<View, D::Error> {
        Value::deserialize(d).map(View::from)
    }
}

/// Identity of a live object: the `metadata.resourceVersion` and `metadata.uid` that every
/// write to it is conditional on. Both are non-empty by construction — a patch carrying an
/// empty `resourceVersion` is applied unconditionally by the server, so there is no way to
/// make one (a saved plan with an empty one does not load either).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "BaseFields", rename_all = "camelCase", deny_unknown_fields)]
pub struct Base {
    resource_version: String,
    uid: String,
}

/// [`Base`] as read from a saved plan, before the check that neither is empty.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BaseFields {
    resource_version: String,
    uid: String,
}

impl TryFrom<BaseFields> for Base {
    type Error = &'static str;

    fn try_from(f: BaseFields) -> Result<Base, Self::Error> {
        Base::new(f.resource_version, f.uid).ok_or("resourceVersion and uid must not be empty")
    }
}

impl Base {
    /// `None` when either is empty.
    pub fn new(resource_version: impl Into<String>, uid: impl Into<String>) -> Option<Base> {
        let (resource_version, uid) = (resource_version.into(), uid.into());
        (!resource_version.is_empty() && !uid.is_empty()).then_some(Base {
            resource_version,
            uid,
        })
    }

    /// Reads `metadata.resourceVersion` and `metadata.uid` of a live object; `None` when the
    /// object lacks either (a server always sets both).
    pub fn of(live: &Value) -> Option<Base> {
        let meta = &live["metadata"];
        Base::new(
            meta["resourceVersion"].as_str().unwrap_or_default(),
            meta["uid"].as_str().unwrap_or_default(),
        )
    }

    /// [`Base::of`] for an object this run is about to write.
    pub fn required(live: &Value, reference: &str) -> Result<Base, PlanError> {
        Base::of(live).ok_or_else(|| PlanError::NoPrecondition {
            reference: reference.to_owned(),
        })
    }

    pub fn resource_version(&self) -> &str {
        &self.resource_version
    }

    pub fn uid(&self) -> &str {
        &self.uid
    }
}

/// How a patch body is interpreted by the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PatchType {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json` (lists such as containers merged by key).
    Strategic,
}

/// The minimal request that realises a change. A write to a live object carries that
/// object's [`Base`], so it is conditional by construction: the apply step cannot send one
/// without its precondition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "request",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum Write {
    /// A complete new object. It needs no precondition: a create fails when the name is
    /// taken (AlreadyExists).
    Create { body: Arc<Value> },
    /// Only the changed fields, sent with `metadata.resourceVersion` set to `base`'s.
    Patch {
        base: Base,
        patch_type: PatchType,
        body: Arc<Value>,
    },
    /// A delete with `base`'s uid and resourceVersion as preconditions.
    Delete { base: Base },
}

impl Write {
    /// The action this request performs.
    pub fn action(&self) -> Action {
        match self {
            Write::Create { .. } => Action::Create,
            Write::Patch { .. } => Action::Update,
            Write::Delete { .. } => Action::Delete,
        }
    }

    /// The live object this request is conditional on (`None` for a create).
    pub fn base(&self) -> Option<&Base> {
        match self {
            Write::Create { .. } => None,
            Write::Patch { base, .. } | Write::Delete { base } => Some(base),
        }
    }
}

#[cfg(any(test, feature = "test-support"))]
impl Write {
    /// A request of `action` with an empty body against a live object with resourceVersion `1`
    /// and uid `u1`, for tests of what looks only at the action.
    pub fn sample(action: Action) -> Option<Write> {
        let base = || Base::new("1", "u1").unwrap_or_else(|| unreachable!());
        match action {
            Action::Unchanged => None,
            Action::Create => Some(Write::Create {
                body: Value::Null.into(),
            }),
            Action::Update => Some(Write::Patch {
                base: base(),
                patch_type: PatchType::Merge,
                body: Value::Null.into(),
            }),
            Action::Delete => Some(Write::Delete { base: base() }),
        }
    }
}

#[cfg(any(test, feature = "test-support"))]
impl ObjectChange {
    /// An Ingress `name` in namespace `shop` with [`Write::sample`] of `action` and nothing
    /// else, for tests of what looks only at the action and the name.
    pub fn sample(name: &str, action: Action) -> ObjectChange {
        ObjectChange {
            kind: Kind::Ingress,
            namespace: "shop".into(),
            name: name.into(),
            live: None,
            fields: Vec::new(),
            before: None,
            after: None,
            write: Write::sample(action),
            route: None,
        }
    }
}

/// The computed change for one object. What happens to it ([`ObjectChange::action`]) is
/// decided by its [`Write`]: no write, no change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObjectChange {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    /// The identity of the live object the change was computed from, as shown to users
    /// (`-o json`); `None` when it does not exist. A write's precondition is its own
    /// [`Write::base`].
    pub live: Option<Base>,
    /// The guarded values: what the user is shown changing. Empty when unchanged.
    pub fields: Vec<FieldChange>,
    /// Focused view of the live object (only what the tool owns or shows for context);
    /// `None` for a create. Shared: an unchanged object's after-view is its before-view.
    pub before: Option<View>,
    /// Focused view after the change; `None` for a delete.
    pub after: Option<View>,
    /// The request to send; `None` when unchanged.
    pub write: Option<Write>,
    /// Endpoint view of route changes (Ingresses, HTTPRoutes).
    pub route: Option<RouteInfo>,
}

impl ObjectChange {
    /// Both views, the before-view read once when the after-view is made from it.
    pub fn views(&self) -> (Option<Cow<'_, Value>>, Option<Cow<'_, Value>>) {
        let before = self.before.as_ref().map(View::get);
        let after = self.after.as_ref().map(|after| {
            match self.made_from_before(after, before.as_deref()) {
                Some((parts, value)) => Cow::Owned(parts.make_from(value)),
                None => after.get(),
            }
        });
        (before, after)
    }

    /// The after-view's maker and the before-view's value (`before`, already read) when the
    /// after-view is made from this change's before-view.
    fn made_from_before<'a>(
        &self,
        after: &'a View,
        before: Option<&'a Value>,
    ) -> Option<(&'a dyn MakeView, &'a Value)> {
        match (&after.0, &self.before, before) {
            (ViewRepr::Made(parts), Some(b), Some(value))
                if parts.base().is_some_and(|base| base.same(b)) =>
            {
                Some((parts.as_ref(), value))
            }
            _ => None,
        }
    }

    /// `deployment.apps/web`, the way kubectl prints object references.
    pub fn reference(&self) -> String {
        format!("{}/{}", self.kind.kubectl_name(), self.name)
    }

    /// What happens to the object: its write's action, or unchanged.
    pub fn action(&self) -> Action {
        self.write.as_ref().map_or(Action::Unchanged, Write::action)
    }

    pub fn is_change(&self) -> bool {
        self.write.is_some()
    }
}

/// Why a requested change cannot be planned against the live state. Nothing has been written
/// when one of these is returned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "{} has no container named {:?}; its containers are {}",
        Untrusted(.reference), Untrusted(.container), Untrusted(.available)
    )]
    NoSuchContainer {
        reference: String,
        container: String,
        available: String,
    },
    #[error(
        "{} has {count} containers ({}); choose one with --container",
        Untrusted(.reference), Untrusted(.available)
    )]
    ContainerRequired {
        reference: String,
        count: usize,
        available: String,
    },
    #[error("{} has no containers", Untrusted(.reference))]
    NoContainers { reference: String },
    #[error(
        "--min {min} is greater than the maximum {max}{source}; raise --max or lower --min",
        source = if *.max_from_live { " currently set on the HorizontalPodAutoscaler" } else { "" }
    )]
    MinAboveMax {
        min: i32,
        max: i32,
        max_from_live: bool,
    },
    #[error(
        "--max {max} is less than the minimum {min}{source}; lower --min or raise --max",
        source = if *.min_from_live { " currently set on the HorizontalPodAutoscaler" } else { "" }
    )]
    MaxBelowMin {
        min: i32,
        max: i32,
        min_from_live: bool,
    },
    #[error("{} not found in namespace {}", Untrusted(.reference), Untrusted(.namespace))]
    Missing {
        reference: String,
        namespace: String,
    },
    #[error("{}: {}", Untrusted(.reference), Untrusted(.message))]
    Unexpected { reference: String, message: String },
    #[error(
        "{} came without metadata.resourceVersion or metadata.uid, so it cannot be written conditionally; it is left alone",
        Untrusted(.reference)
    )]
    NoPrecondition { reference: String },
}

/// A planned object: the updater that computed its change (kept for retries: it plans the
/// object again against the re-read object after every conflict) and the change the user
/// approves.
///
/// The updater is `U`, the closed set of updaters of `appupdate-plan`
/// (`appupdate_plan::updaters::Updater`, whose `Plan` and `Planned` name it): what a change is
/// does not depend on who computes it, so nothing here looks at `U`.
#[derive(Clone, Debug)]
pub struct Planned<U> {
    pub updater: U,
    /// Shared with the requests that send it and the report of what happened to it.
    pub change: Arc<ObjectChange>,
    /// The checksum of the saved plan this object is applied from (`apply FILE`): every write
    /// of it, retries included, also adds the checksum to the object's
    /// `kubectl-appupdate/applied-plans` annotation (`appupdate_plan::applied`). `None` for a
    /// run's own plan.
    pub mark: Option<String>,
}

impl<U> Planned<U> {
    /// `updater` with the change it computed, for a run's own plan (no mark).
    pub fn new(updater: U, change: Arc<ObjectChange>) -> Planned<U> {
        Planned {
            updater,
            change,
            mark: None,
        }
    }
}

/// How the endpoints are published by this plan, when it publishes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutesPlan {
    /// The style of the routes after the run.
    pub style: RouteStyle,
    /// The styles of the managed routes that are live now (empty on a first exposure); a
    /// style other than `style` among them makes the plan a migration.
    pub live_styles: Vec<RouteStyle>,
    /// What the plan decided on the user's behalf, and why (which IngressClass new Ingresses
    /// get, where the style came from), one sentence each.
    pub notes: Vec<String>,
    /// The style and attachment before and after, in the plugin's terms: what the history
    /// record of the run keeps of them.
    pub header: crate::intent::RoutesHeader,
}

impl RoutesPlan {
    /// The plan changes the style of live routes: new routes are created (or Ingresses
    /// rewritten in place) before the old ones are deleted.
    pub fn is_migration(&self) -> bool {
        self.live_styles.iter().any(|s| *s != self.style)
    }
}

/// Everything this run would do, in display order (the writes go in [`Plan::write_order`]).
#[derive(Clone, Debug)]
pub struct Plan<U> {
    pub app: String,
    pub namespace: String,
    pub context: String,
    pub objects: Vec<Planned<U>>,
    /// Present when the run publishes endpoints.
    pub routes: Option<RoutesPlan>,
}

/// Counts in the terraform style.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub create: usize,
    pub update: usize,
    pub delete: usize,
    pub unchanged: usize,
}

impl Summary {
    pub fn has_changes(&self) -> bool {
        self.create + self.update + self.delete > 0
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.has_changes() {
            write!(
                f,
                "Plan: {} to create, {} to update, {} to delete.",
                self.create, self.update, self.delete
            )
        } else {
            f.write_str("No changes.")
        }
    }
}

impl<U> Plan<U> {
    /// Builds a plan, ordering objects for display: the Deployment and HPA first, then the
    /// routes and their SecurityPolicies: creates, updates that add or change paths, updates
    /// that only take paths away, deletes, each by kind (a policy before its route, but a
    /// deleted one after it) and name; unchanged ones last. The order the writes are sent in is
    /// [`Plan::write_order`]'s: by round, concurrently within one.
    pub fn new(
        app: String,
        namespace: String,
        context: String,
        mut objects: Vec<Planned<U>>,
    ) -> Plan<U> {
        // The key borrows the name: a clone per comparison was thousands of allocations.
        fn key<U>(p: &Planned<U>) -> (bool, u8, u8, &str) {
            let c = &p.change;
            let route = c.kind.is_route_part();
            let rank = if route { listing_rank(c) } else { 0 };
            // A deleted guard after the deleted routes: it goes after its route.
            let order = match (c.kind.guards(), c.action()) {
                (Some(_), Action::Delete) => u8::MAX,
                _ => c.kind.order(),
            };
            (route, rank, order, c.name.as_str())
        }
        objects.sort_by(|a, b| key(a).cmp(&key(b)));
        Plan {
            app,
            namespace,
            context,
            objects,
            routes: None,
        }
    }

    /// The write order of this plan's changes, one round per object in `objects` order.
    pub fn write_order(&self) -> WriteOrder {
        write_order(self.changes())
    }

    /// The same plan, saying how it publishes the endpoints — and, when paths swap scope groups
    /// in a cycle ([`WriteOrder::unguarded`]), that one of them can be unserved for a moment.
    pub fn with_routes(mut self, mut routes: RoutesPlan) -> Plan<U> {
        let unguarded = self.write_order().unguarded;
        if !unguarded.is_empty() {
            routes.notes.push(format!(
                "The paths {} move between scope groups in a cycle (each of these groups gives another one a path): their routes are written in one round, and one of these paths can be unserved between those writes (move one, then the other, to avoid it).",
                unguarded
                    .iter()
                    .map(|p| Untrusted(p).to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        self.routes = Some(routes);
        self
    }

    pub fn changes(&self) -> impl Iterator<Item = &ObjectChange> {
        self.objects.iter().map(|p| &*p.change)
    }

    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for c in self.changes() {
            match c.action() {
                Action::Create => s.create += 1,
                Action::Update => s.update += 1,
                Action::Delete => s.delete += 1,
                Action::Unchanged => s.unchanged += 1,
            }
        }
        s
    }

    pub fn has_changes(&self) -> bool {
        self.summary().has_changes()
    }
}

/// Outcome of re-planning an object after a conflict or a failed precondition.
#[derive(Clone, Debug, PartialEq)]
pub enum Recheck {
    /// The fresh change writes exactly (a subset of) what was approved: send it.
    Proceed(ObjectChange),
    /// Someone else already made the approved change; nothing left to write.
    AlreadyDone,
    /// A field this run changes no longer holds the value the user was shown.
    Tripped(ObjectChange),
}

/// The approved-diff guard. `fresh` is the updater's change against the re-read object.
///
/// Proceeds only when every field the fresh change would write was approved with the same
/// before and after values, and the action is the same (and, for deletes, the object is the
/// same incarnation). Fields that already hold the approved value simply drop out of `fresh`.
pub fn recheck(approved: &ObjectChange, fresh: ObjectChange) -> Recheck {
    if fresh.action() == Action::Unchanged {
        return Recheck::AlreadyDone;
    }
    if fresh.action() != approved.action() {
        return Recheck::Tripped(fresh);
    }
    if let (
        Some(Write::Delete {
            base: approved_base,
        }),
        Some(Write::Delete { base }),
    ) = (&approved.write, &fresh.write)
    {
        let same_object = approved_base.uid() == base.uid();
        if !same_object || approved.fields != fresh.fields {
            return Recheck::Tripped(fresh);
        }
        return Recheck::Proceed(fresh);
    }
    let all_approved = fresh.fields.iter().all(|f| approved.fields.contains(f));
    if all_approved {
        Recheck::Proceed(fresh)
    } else {
        Recheck::Tripped(fresh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_typed_field_is_written_and_read_back_as_the_path_plans_have_saved() {
        for (field, path) in [
            (
                Field::Image { container: "web" },
                "spec.template.spec.containers[name=web].image",
            ),
            (Field::MinReplicas, "spec.minReplicas"),
            (Field::MaxReplicas, "spec.maxReplicas"),
            (Field::Whole, "."),
        ] {
            assert_eq!(field.path(), path);
            assert_eq!(Field::parse(path), Some(field));
            assert_eq!(FieldChange::of(field, None, None).field(), Some(field));
        }
        for route in [
            "spec.rules[0].http.paths",
            "metadata.annotations[nginx.ingress.kubernetes.io/auth-url]",
            "spec.template.spec.containers[name=web].command",
        ] {
            assert_eq!(Field::parse(route), None, "{route}");
        }
    }

    /// A view made from a value it keeps (a maker's simplest form).
    struct Fixed(Value);

    impl MakeView for Fixed {
        fn make(&self) -> Value {
            self.0.clone()
        }
    }

    #[test]
    fn a_view_held_or_made_is_written_and_read_as_the_value() {
        let value = json!({
            "metadata": {"name": "web-a", "annotations": {"x": "a \"q\"\n\u{1b}[31m é 🚀"}},
            "spec": {"n": -3, "u": 18446744073709551615_u64, "f": 0.1, "b": true, "z": null,
                     "rules": [{"http": {"paths": []}}, {}]}
        });
        let held = View::from(value.clone());
        let made = View::made(Fixed(value.clone()));
        for view in [&held, &made] {
            assert_eq!(*view.get(), value);
            // Key order kept, written as the value is.
            assert_eq!(
                serde_json::to_string_pretty(view).unwrap_or_default(),
                serde_json::to_string_pretty(&value).unwrap_or_default()
            );
            let read: View =
                serde_json::from_str(&text_json(view)).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(read, *view);
            assert_ne!(View::from(json!({"a": 1})), *view);
        }
        assert_eq!(held, made);
        assert!(matches!(made.get(), Cow::Owned(_)) && matches!(held.get(), Cow::Borrowed(_)));
    }

    #[test]
    fn a_part_of_a_view_is_found_as_value_pointer_finds_it() {
        let value = json!({
            "a": {"b": [10, {"c/d": "x", "e~f": [true]}, []], "b2": null},
            "spec": {"rules": [{"http": {"paths": [{"path": "/a"}]}}, {"host": "h"}]},
            "": {"": 1}
        });
        let views = [View::from(value.clone()), View::made(Fixed(value.clone()))];
        for pointer in [
            "",
            "/a",
            "/a/b/1/c~1d",
            "/a/b/1/e~0f/0",
            "/a/b2",
            "/spec/rules/0/http/paths",
            "/spec/rules/2",
            "/a/b/01",
            "/a/b/-",
            "/x",
            "//",
            "a",
        ] {
            for view in &views {
                assert_eq!(
                    view.pointer(pointer).as_deref(),
                    value.pointer(pointer),
                    "{pointer}"
                );
            }
        }
    }

    #[test]
    fn a_whole_object_field_is_its_views_value() {
        let value = json!({"metadata": {"name": "web-a"}, "spec": {"rules": []}});
        for view in [View::from(value.clone()), View::made(Fixed(value.clone()))] {
            let deleted = FieldChange::whole(Some(&view), None);
            let created = FieldChange::whole(None, Some(&view));
            assert_eq!(deleted, FieldChange::new(".", Some(value.clone()), None));
            assert_eq!(created, FieldChange::new(".", None, Some(value.clone())));
            assert_eq!(deleted.before().as_deref(), Some(&value));
            assert_eq!(
                serde_json::to_value(&created).unwrap_or_default(),
                json!({"path": ".", "before": null, "after": value})
            );
        }
    }

    fn text_json(v: &View) -> String {
        serde_json::to_string(v).unwrap_or_default()
    }

    #[test]
    fn a_field_value_in_a_view_is_the_views_part_compared_and_saved_as_that_value() {
        let value = json!({"spec": {"rules": [{"http": {"paths": [{"path": "/a"}]}}]}});
        let paths = json!([{"path": "/a"}]);
        let pointer = "/spec/rules/0/http/paths";
        // In a view held as a value, and in one made when read.
        let held = View::from(value.clone());
        let text = View::made(Fixed(value.clone()));
        assert_eq!(held, text);
        assert_eq!(*text.get(), value);
        assert!(matches!(text.get(), Cow::Owned(_)) && matches!(held.get(), Cow::Borrowed(_)));
        let in_text = FieldValue::in_view(&text, &value, pointer);
        let Some(shared) = FieldValue::in_view(&held, &value, pointer) else {
            panic!("the pointer resolves")
        };
        assert_eq!(*shared.value(), paths);
        assert_eq!(
            in_text.as_ref().map(FieldValue::value),
            Some(Cow::Borrowed(&paths))
        );
        assert_eq!(shared, FieldValue::from(paths.clone()));
        assert_ne!(shared, FieldValue::from(json!([])));
        assert!(FieldValue::in_view(&held, &value, "/spec/rules/1/http/paths").is_none());

        let field = FieldChange {
            path: "spec.rules[0].http.paths".into(),
            before: None,
            after: Some(shared),
        };
        assert_eq!(
            field,
            FieldChange::new("spec.rules[0].http.paths", None, Some(paths.clone()))
        );
        assert_eq!(field.after().as_deref(), Some(&paths));
        let saved = serde_json::to_value(&field).unwrap_or_default();
        assert_eq!(
            saved,
            json!({"path": "spec.rules[0].http.paths", "before": null, "after": paths})
        );
        let read: FieldChange = serde_json::from_value(saved).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read, field);
        assert_eq!(format!("{:?}", read.after), format!("{:?}", field.after));
    }

    fn change(action: Action, fields: Vec<FieldChange>) -> ObjectChange {
        ObjectChange {
            kind: Kind::HorizontalPodAutoscaler,
            namespace: "shop".into(),
            name: "web".into(),
            live: Base::new("1", "u1"),
            fields,
            before: None,
            after: None,
            write: Write::sample(action),
            route: None,
        }
    }

    fn min(before: i64, after: i64) -> FieldChange {
        FieldChange::of(Field::MinReplicas, Some(json!(before)), Some(json!(after)))
    }

    fn max(before: i64, after: i64) -> FieldChange {
        FieldChange::of(Field::MaxReplicas, Some(json!(before)), Some(json!(after)))
    }

    #[test]
    fn guard_proceeds_when_the_fresh_change_is_the_approved_one() {
        let approved = change(Action::Update, vec![min(2, 3), max(5, 8)]);
        let fresh = change(Action::Update, vec![min(2, 3), max(5, 8)]);
        assert!(matches!(recheck(&approved, fresh), Recheck::Proceed(_)));
    }

    #[test]
    fn guard_proceeds_with_the_rest_when_someone_made_part_of_the_change() {
        let approved = change(Action::Update, vec![min(2, 3), max(5, 8)]);
        let fresh = change(Action::Update, vec![max(5, 8)]);
        assert_eq!(recheck(&approved, fresh.clone()), Recheck::Proceed(fresh));
    }

    #[test]
    fn guard_trips_when_a_changed_field_moved_under_us() {
        let approved = change(Action::Update, vec![min(2, 3)]);
        let fresh = change(Action::Update, vec![min(4, 3)]);
        assert!(matches!(recheck(&approved, fresh), Recheck::Tripped(_)));
    }

    #[test]
    fn guard_reports_already_done_when_nothing_is_left() {
        let approved = change(Action::Update, vec![min(2, 3)]);
        let fresh = change(Action::Unchanged, vec![]);
        assert_eq!(recheck(&approved, fresh), Recheck::AlreadyDone);
    }

    #[test]
    fn guard_trips_when_an_updated_object_disappeared() {
        let approved = change(Action::Update, vec![min(2, 3)]);
        let fresh = change(Action::Create, vec![min(2, 3)]);
        assert!(matches!(recheck(&approved, fresh), Recheck::Tripped(_)));
    }

    #[test]
    fn guard_trips_when_a_deleted_object_was_recreated() {
        let approved = change(Action::Delete, vec![]);
        let mut fresh = change(Action::Delete, vec![]);
        fresh.write = Some(Write::Delete {
            base: Base::new("9", "u2").unwrap(),
        });
        assert!(matches!(recheck(&approved, fresh), Recheck::Tripped(_)));
    }

    #[test]
    fn a_base_needs_both_a_resource_version_and_a_uid() {
        assert_eq!(Base::new("", "u1"), None);
        assert_eq!(Base::new("1", ""), None);
        assert_eq!(Base::of(&json!({"metadata": {"uid": "u1"}})), None);
        let base = Base::of(&json!({"metadata": {"uid": "u1", "resourceVersion": "7"}})).unwrap();
        assert_eq!((base.resource_version(), base.uid()), ("7", "u1"));
    }

    fn route(name: &str, action: Action, before: &[&str], after: &[&str]) -> ObjectChange {
        let mut c = ObjectChange::sample(name, action);
        c.route = Some(RouteInfo {
            style: RouteStyle::Gateway,
            identifier: name.into(),
            scopes: Vec::new(),
            paths: after.iter().map(|p| (*p).to_owned()).collect(),
            paths_before: before.iter().map(|p| (*p).to_owned()).collect(),
            foreign: Vec::new(),
        });
        c
    }

    fn rounds(changes: &[ObjectChange]) -> Vec<Option<usize>> {
        write_order(changes).rounds
    }

    #[test]
    fn writes_without_dependencies_share_the_first_round() {
        let hpa = change(Action::Update, vec![min(2, 3)]);
        let mut unchanged_hpa = hpa.clone();
        unchanged_hpa.write = None;
        let changes = [
            hpa,
            unchanged_hpa,
            route("new", Action::Create, &[], &["/a"]),
            route("grows", Action::Update, &["/b"], &["/b", "/c"]),
            route("restyled", Action::Update, &["/d"], &["/d"]),
            // /e and /f are served by nobody afterwards: nothing to wait for.
            route("renamed", Action::Update, &["/e"], &["/e2"]),
            route("gone", Action::Delete, &["/f"], &[]),
            route("same", Action::Unchanged, &["/g"], &["/g"]),
        ];
        assert_eq!(
            rounds(&changes),
            [
                Some(0),
                None,
                Some(0),
                Some(0),
                Some(0),
                Some(0),
                Some(0),
                None
            ]
        );
        let order = write_order(&changes);
        assert_eq!(order.round_count(), 1);
        assert!(order.unguarded.is_empty());
        assert_eq!(write_order(&[]).round_count(), 0);
    }

    #[test]
    fn a_route_that_stops_serving_a_path_waits_for_its_new_server() {
        // A path moving between groups, and a migration to another kind.
        let changes = [
            route("old", Action::Update, &["/a", "/b"], &["/a"]),
            route("new", Action::Update, &["/c"], &["/b", "/c"]),
            route("ingress", Action::Delete, &["/x"], &[]),
            route("httproute", Action::Create, &[], &["/x"]),
        ];
        assert_eq!(rounds(&changes), [Some(1), Some(0), Some(1), Some(0)]);
        // A route that keeps the path is waited for too (it may change its hosts).
        let changes = [
            route("dropping", Action::Delete, &["/a"], &[]),
            route("keeping", Action::Update, &["/a"], &["/a", "/b"]),
        ];
        assert_eq!(rounds(&changes), [Some(1), Some(0)]);
        // An unchanged route that keeps serving it is not a write: nothing to wait for.
        let changes = [
            route("duplicate", Action::Delete, &["/a"], &[]),
            route("kept", Action::Unchanged, &["/a"], &["/a"]),
        ];
        assert_eq!(rounds(&changes), [Some(0), None]);
    }

    #[test]
    fn chains_take_one_round_per_link() {
        // A gives /p to B, B gives /q to C (a create), C's route is new.
        let changes = [
            route("a", Action::Update, &["/p", "/z"], &["/z"]),
            route("b", Action::Update, &["/q"], &["/p"]),
            route("c", Action::Create, &[], &["/q"]),
            route("d", Action::Delete, &["/z2"], &[]),
        ];
        assert_eq!(rounds(&changes), [Some(2), Some(1), Some(0), Some(0)]);
        let order = write_order(&changes);
        assert_eq!(order.round_count(), 3);
        assert!(order.unguarded.is_empty());
    }

    #[test]
    fn a_cycle_shares_one_round_after_what_it_waits_for_and_names_its_paths() {
        // /p and /q swap between a and b, and a gives /r to c, a new route.
        let changes = [
            route("a", Action::Update, &["/p", "/r"], &["/q"]),
            route("b", Action::Update, &["/q"], &["/p"]),
            route("c", Action::Create, &[], &["/r"]),
            route("d", Action::Delete, &["/p", "/q"], &[]),
        ];
        // a waits for b and c, b for a: {a, b} after c; d waits for a and b.
        assert_eq!(rounds(&changes), [Some(1), Some(1), Some(0), Some(2)]);
        let order = write_order(&changes);
        assert_eq!(order.unguarded, ["/p", "/q"]);
        assert_eq!(order.round_count(), 3);
    }

    fn policy(name: &str, action: Action) -> ObjectChange {
        let mut c = ObjectChange::sample(name, action);
        c.kind = Kind::SecurityPolicy;
        c
    }

    fn httproute(name: &str, action: Action, before: &[&str], after: &[&str]) -> ObjectChange {
        let mut c = route(name, action, before, after);
        c.kind = Kind::HttpRoute;
        c
    }

    #[test]
    fn a_guard_lands_before_its_route_serves_and_goes_after_it_stops() {
        // A new scoped route, a route that loses its filter, a route whose policy is only
        // updated, a route deleted with its policy, and one given its filter back.
        let changes = [
            httproute("new", Action::Create, &[], &["/a"]),
            policy("new", Action::Create),
            policy("unfiltered", Action::Create),
            httproute("unfiltered", Action::Update, &["/b"], &["/b"]),
            httproute("kept", Action::Unchanged, &["/c"], &["/c"]),
            policy("kept", Action::Update),
            policy("gone", Action::Delete),
            httproute("gone", Action::Delete, &["/d"], &[]),
            policy("refiltered", Action::Delete),
            httproute("refiltered", Action::Update, &["/e"], &["/e"]),
            // A policy of another kind's name guards nothing.
            policy("ingress", Action::Delete),
            route("ingress", Action::Update, &["/f"], &["/f"]),
        ];
        assert_eq!(
            rounds(&changes),
            [
                Some(1),
                Some(0),
                Some(0),
                Some(1),
                None,
                Some(0),
                Some(1),
                Some(0),
                Some(1),
                Some(0),
                Some(0),
                Some(0)
            ]
        );
        // Chained with the paths: /x moves from a deleted scoped route to a new one.
        let changes = [
            policy("old", Action::Delete),
            httproute("old", Action::Delete, &["/x"], &[]),
            httproute("new", Action::Create, &[], &["/x"]),
            policy("new", Action::Create),
        ];
        assert_eq!(rounds(&changes), [Some(3), Some(2), Some(1), Some(0)]);
        assert!(write_order(&changes).unguarded.is_empty());
    }

    #[test]
    fn long_chains_need_no_recursion() {
        // r0 gives /0 to r1, r1 gives /1 to r2, … : one round per link.
        let n = 2_000;
        let names: Vec<String> = (0..=n).map(|i| format!("/{i}")).collect();
        let changes: Vec<ObjectChange> = (0..=n)
            .map(|i| {
                let before: Vec<&str> = if i < n { vec![&names[i]] } else { vec![] };
                let after: Vec<&str> = if i > 0 { vec![&names[i - 1]] } else { vec![] };
                route(&format!("r{i}"), Action::Update, &before, &after)
            })
            .collect();
        let order = write_order(&changes);
        assert_eq!(order.rounds[n], Some(0));
        assert_eq!(order.rounds[0], Some(n));
        assert_eq!(order.round_count(), n + 1);
    }

    /// Paths that `c` serves before and after its write (none for what is not a route).
    fn served_by(c: &ObjectChange) -> (BTreeSet<String>, BTreeSet<String>) {
        match &c.route {
            Some(r) => (
                r.paths_before.iter().cloned().collect(),
                r.paths.iter().cloned().collect(),
            ),
            None => Default::default(),
        }
    }

    /// A random plan over the paths /0 … /5: up to 7 routes (Ingresses and HTTPRoutes), each
    /// created, updated, deleted or unchanged with any paths before and after (several routes
    /// may serve one path, before and after), a SecurityPolicy of some of the HTTPRoutes'
    /// names, itself created, updated, deleted or unchanged, and a Deployment update.
    fn any_plan() -> impl proptest::strategy::Strategy<Value = Vec<ObjectChange>> {
        use proptest::prelude::*;
        let paths = || proptest::collection::btree_set(0..6u8, 0..4);
        let one = (0..4u8, paths(), paths(), any::<bool>(), 0..5u8).prop_map(
            |(a, before, after, httproute, policy)| {
                let s = |set: &BTreeSet<u8>| -> Vec<String> {
                    set.iter().map(|p| format!("/{p}")).collect()
                };
                let (action, before, after) = match a {
                    0 => (Action::Create, Vec::new(), s(&after)),
                    1 => (Action::Update, s(&before), s(&after)),
                    2 => (Action::Delete, s(&before), Vec::new()),
                    _ => (Action::Unchanged, s(&before), s(&before)),
                };
                let policy = match policy {
                    0 => Some(Action::Create),
                    1 => Some(Action::Update),
                    2 => Some(Action::Delete),
                    3 => Some(Action::Unchanged),
                    _ => None,
                };
                (action, before, after, httproute, policy)
            },
        );
        proptest::collection::vec(one, 0..8).prop_map(|routes| {
            let mut changes = vec![change(Action::Update, vec![min(2, 3)])];
            let mut policies = Vec::new();
            for (i, (action, before, after, httproute, policy)) in routes.into_iter().enumerate() {
                let mut c = ObjectChange::sample(&format!("r{i}"), action);
                if httproute {
                    c.kind = Kind::HttpRoute;
                    if let Some(action) = policy {
                        let mut p = ObjectChange::sample(&format!("r{i}"), action);
                        p.kind = Kind::SecurityPolicy;
                        policies.push(p);
                    }
                }
                c.route = Some(RouteInfo {
                    style: RouteStyle::Gateway,
                    identifier: format!("r{i}"),
                    scopes: Vec::new(),
                    paths: after,
                    paths_before: before,
                    foreign: Vec::new(),
                });
                changes.push(c);
            }
            // Policies anywhere in the plan: after their routes and before.
            for (k, p) in policies.into_iter().enumerate() {
                let at = (k * 3) % (changes.len() + 1);
                changes.insert(at, p);
            }
            changes
        })
    }

    /// Whether write `i` must wait for write `j` by the guard rule: a route written to serve
    /// waits for its policy's create or update; a deleted policy waits for its route's write.
    fn guard_waits(changes: &[ObjectChange], i: usize, j: usize) -> bool {
        let (a, b) = (&changes[i], &changes[j]);
        if i == j || !a.is_change() || !b.is_change() || a.name != b.name {
            return false;
        }
        let deleted = |c: &ObjectChange| c.action() == Action::Delete;
        (a.kind == Kind::HttpRoute && b.kind == Kind::SecurityPolicy && !deleted(a) && !deleted(b))
            || (a.kind == Kind::SecurityPolicy && b.kind == Kind::HttpRoute && deleted(a))
    }

    proptest::proptest! {
        /// Written round by round, the writes of a round landing in any order, a path served
        /// before and after the plan is served at every moment, unless it moves in a cycle
        /// (and then a cycle is there); writes without dependencies are in round 0, every other
        /// write comes after what it depends on and no later than needed.
        #[test]
        #[allow(clippy::needless_range_loop)] // i, j are the changes' indices in the plan
        fn a_path_served_before_and_after_is_never_unserved(
            changes in any_plan(),
            shuffle in proptest::collection::vec(proptest::prelude::any::<proptest::sample::Index>(), 8),
        ) {
            let order = write_order(&changes);
            let n = changes.len();
            let sets: Vec<_> = changes.iter().map(served_by).collect();
            let written: Vec<bool> = changes.iter().map(ObjectChange::is_change).collect();
            // The dependencies, computed here from the definition.
            let depends = |i: usize, j: usize| {
                (i != j
                    && written[i]
                    && written[j]
                    && sets[i].0.difference(&sets[i].1).any(|p| sets[j].1.contains(p)))
                    || guard_waits(&changes, i, j)
            };
            let reaches = |from: usize, to: usize| {
                let mut seen = vec![false; n];
                let mut todo = vec![from];
                while let Some(v) = todo.pop() {
                    for w in 0..n {
                        if depends(v, w) && !seen[w] {
                            seen[w] = true;
                            todo.push(w);
                        }
                    }
                }
                seen[to]
            };
            let in_cycle = |i: usize, j: usize| reaches(i, j) && reaches(j, i);
            for i in 0..n {
                proptest::prop_assert_eq!(order.rounds[i].is_some(), written[i]);
                let deps: Vec<usize> = (0..n).filter(|&j| depends(i, j)).collect();
                if written[i] && deps.is_empty() {
                    proptest::prop_assert_eq!(order.rounds[i], Some(0), "{}", i);
                }
                for &j in &deps {
                    proptest::prop_assert!(
                        order.rounds[j] < order.rounds[i]
                            || (order.rounds[j] == order.rounds[i] && in_cycle(i, j)),
                        "{} waits for {}: {:?}", i, j, order.rounds
                    );
                }
            }
            // No round is empty: none is later than needed.
            for r in 0..order.round_count() {
                proptest::prop_assert!(order.rounds.contains(&Some(r)), "round {} empty", r);
            }
            // Every unguarded path moves inside a cycle.
            for p in &order.unguarded {
                proptest::prop_assert!(
                    (0..n).any(|i| (0..n).any(|j| {
                        i != j
                            && sets[i].0.contains(p)
                            && !sets[i].1.contains(p)
                            && sets[j].1.contains(p)
                            && in_cycle(i, j)
                    })),
                    "{} is not in a cycle", p
                );
            }
            let before: BTreeSet<&String> = sets.iter().flat_map(|s| &s.0).collect();
            let after: BTreeSet<&String> = sets.iter().flat_map(|s| &s.1).collect();
            let keep: Vec<&String> = before
                .intersection(&after)
                .copied()
                .filter(|p| !order.unguarded.contains(p))
                .collect();
            // The worst moment of each round for each path: every write of the round that
            // stops serving it has landed, none that starts to.
            for r in 0..order.round_count() {
                for &p in &keep {
                    let served = (0..n).any(|i| match order.rounds[i] {
                        Some(ri) if ri == r => sets[i].0.contains(p) && sets[i].1.contains(p),
                        Some(ri) if ri < r => sets[i].1.contains(p),
                        _ => sets[i].0.contains(p),
                    });
                    proptest::prop_assert!(served, "{} unserved in round {}: {:?}", p, r, order.rounds);
                }
            }
            // And one concrete run: round by round, each round's writes in a random order.
            let mut landed = vec![false; n];
            let serves = |landed: &[bool], p: &String| {
                (0..n).any(|i| if landed[i] { sets[i].1.contains(p) } else { sets[i].0.contains(p) })
            };
            for r in 0..order.round_count() {
                let mut round: Vec<usize> = (0..n).filter(|&i| order.rounds[i] == Some(r)).collect();
                for (k, ix) in shuffle.iter().enumerate().take(round.len()) {
                    let j = k + ix.index(round.len() - k);
                    round.swap(k, j);
                }
                for i in round {
                    landed[i] = true;
                    for &p in &keep {
                        proptest::prop_assert!(serves(&landed, p), "{} unserved after {}", p, i);
                    }
                    // A route never serves from its write on without the policy it gets, and a
                    // policy never goes while its route is as it was.
                    for a in 0..n {
                        for b in 0..n {
                            if guard_waits(&changes, a, b) {
                                proptest::prop_assert!(
                                    !landed[a] || landed[b],
                                    "{} landed before {}: {:?}", a, b, order.rounds
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn summary_reads_like_terraform() {
        let s = Summary {
            create: 1,
            update: 2,
            delete: 1,
            unchanged: 3,
        };
        assert_eq!(
            s.to_string(),
            "Plan: 1 to create, 2 to update, 1 to delete."
        );
        assert_eq!(Summary::default().to_string(), "No changes.");
    }
}
