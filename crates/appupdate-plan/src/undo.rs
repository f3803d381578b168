//! Undo (`--undo`, `--to-revision N`): the earlier intent of a history record, planned as an
//! ordinary run.
//!
//! Pure. A record says what its run meant in the plugin's own terms: the image of a container,
//! the autoscaler bounds, and the routes before and after ([`appupdate_model::intent`]). The undo asks
//! the planner for the earlier values — the image before, the bounds before, the routes before
//! as an endpoints file and the route flags that set their style and attachment
//! ([`request`]) — through the same planner, updaters and route styles as a run from flags.
//! So an undo can only produce what an ordinary run can: the application's Deployment and
//! HorizontalPodAutoscaler (named after it) and the managed routes a route style generates
//! (`<app>-<identifier>`, labelled `app` and `identifier`). Nothing else in a record is used;
//! a record is validated when it is read ([`crate::history::validate`]).
//!
//! A value that is no longer at the record's `after` value was changed by someone since: it
//! is listed by [`drift`], and the caller refuses the plan unless the user named exactly
//! those with `--force-undo` (the drift keys: `image`, `min`, `max`, `routes`). A value already
//! back at its `before` value simply drops out of the plan. Every write is conditional and
//! guarded like any other, and the undo is itself recorded, so undoing an undo redoes.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::history::Record;
use crate::routes::refs::RouteFlags;
use crate::updaters::{AutoscalerUpdate, ContainerUpdate};
use appupdate_model::endpoints_file::EndpointsFile;
use appupdate_model::intent::{self, flags_to_restore};
use appupdate_model::plan::{AuthProvider, Kind, Plan, RouteStyle};

/// A field changed since the record: what it is now and what the record left it at.
#[derive(Clone, Debug, PartialEq)]
pub struct Drift {
    /// The name `--force-undo` takes: `image`, `min`, `max`, or the object's reference.
    pub key: String,
    pub reference: String,
    pub path: String,
    pub now: Option<Value>,
    pub recorded: Option<Value>,
}

/// What the undo of a record asks the planner for: the values before its run.
#[derive(Clone, Debug, Default)]
pub struct Intent {
    pub container: Option<String>,
    pub container_update: ContainerUpdate,
    pub autoscaler_update: AutoscalerUpdate,
    /// The routes before, as an endpoints file (`None`: the run did not change routes).
    pub endpoints: Option<EndpointsFile>,
    /// The route style and the attachment parts the run changed.
    pub routes: RouteFlags,
}

/// What the undo of `record` asks the planner for; `Err` says why it cannot be undone.
pub fn request(record: &Record) -> Result<Intent, String> {
    if record.routes_truncated {
        return Err(
            "it was recorded without its routes (they were too large), so it cannot be undone"
                .into(),
        );
    }
    let mut intent = Intent::default();
    if let Some(image) = &record.image {
        let before = image
            .before
            .clone()
            .ok_or("it recorded no image before the change")?;
        intent.container = Some(image.container.clone());
        intent.container_update.image = Some(before);
    }
    if let Some(bounds) = &record.bounds {
        let before = |c: &Option<crate::history::Change<i64>>| {
            c.as_ref()
                .and_then(|c| c.before)
                .and_then(|v| i32::try_from(v).ok())
        };
        intent.autoscaler_update = AutoscalerUpdate {
            min_replicas: before(&bounds.min),
            max_replicas: before(&bounds.max),
        };
    }
    match &record.endpoints {
        Some(change) => {
            let source = format!("revision {} (routes before)", record.revision);
            intent.endpoints = Some(change.before.endpoints_file(&source)?);
            intent.routes = flags_to_restore(&change.before, &change.after)?;
        }
        None if !record.routes.is_empty() => {
            return Err(
                "it was recorded by an earlier version of kubectl-appupdate, which kept route objects instead of the endpoints they served, so its routes cannot be undone; publish the earlier endpoints with --endpoints instead"
                    .into(),
            );
        }
        None => {}
    }
    Ok(intent)
}

/// The container named in the Deployment updater's field path.
fn container_of(path: &str) -> Option<&str> {
    path.strip_prefix("spec.template.spec.containers[name=")?
        .strip_suffix("].image")
}

/// What changed since `record` among the values `plan` (the undo's, made against the live
/// objects) sets back: each value whose live value is not the one the record left.
pub fn drift(record: &Record, plan: &Plan) -> Vec<Drift> {
    let mut out = Vec::new();
    for change in plan.changes() {
        for f in &change.fields {
            let (key, recorded) = match change.kind {
                Kind::Deployment if container_of(&f.path).is_some() => (
                    "image",
                    record
                        .image
                        .as_ref()
                        .and_then(|i| i.after.clone())
                        .map(Value::String),
                ),
                Kind::HorizontalPodAutoscaler => {
                    let bounds = record.bounds.as_ref();
                    match f.path.as_str() {
                        "spec.minReplicas" => (
                            "min",
                            bounds.and_then(|b| b.min.as_ref()?.after).map(Value::from),
                        ),
                        "spec.maxReplicas" => (
                            "max",
                            bounds.and_then(|b| b.max.as_ref()?.after).map(Value::from),
                        ),
                        _ => continue,
                    }
                }
                _ => continue,
            };
            if f.before().as_deref() != recorded.as_ref() {
                out.push(Drift {
                    key: key.into(),
                    reference: change.reference(),
                    path: f.path.clone(),
                    now: f.before().map(Cow::into_owned),
                    recorded,
                });
            }
        }
    }
    if let Some(change) = &record.endpoints {
        let live = intent::groups_of(
            plan.changes()
                .filter_map(|c| c.route.as_ref())
                .map(|info| (info, false)),
        );
        let left = change.after.groups();
        // `/a/` and `/a` are one path (the endpoints file refuses both at once): compared as
        // the part a route matches.
        let core = |g: &intent::Groups| -> intent::Groups {
            let mut out = intent::Groups::new();
            for (scopes, paths) in g {
                let cores: Vec<String> = paths
                    .iter()
                    .map(|p| crate::routes::path_core(p).to_owned())
                    .collect();
                intent::add_paths(&mut out, scopes, &cores);
            }
            out
        };
        let live_styles = plan
            .routes
            .as_ref()
            .map(|r| r.live_styles.clone())
            .unwrap_or_default();
        let style_moved = !left.is_empty()
            && change.after.style.is_some()
            && live_styles != change.after.style.into_iter().collect::<Vec<_>>();
        // Gateway routes whose scopes someone moved to the other auth provider since.
        let live_provider = plan
            .routes
            .as_ref()
            .and_then(|r| r.header.attachment_before.auth_provider);
        let provider_moved = !left.is_empty()
            && change.after.style == Some(RouteStyle::Gateway)
            && live_styles == [RouteStyle::Gateway]
            && live_provider.unwrap_or(AuthProvider::Filter)
                != change
                    .after
                    .attachment
                    .auth_provider
                    .unwrap_or(AuthProvider::Filter);
        if core(&live) != core(&left) || style_moved || provider_moved {
            out.push(Drift {
                key: "routes".into(),
                reference: format!("the routes of {}", plan.app),
                path: ".".into(),
                now: Some(json!(groups_json(&live))),
                recorded: Some(json!(groups_json(&left))),
            });
        }
    }
    out
}

/// What differs between two route sets as [`groups_json`] writes them: `: [user] serves /a,
/// /b now, revision N left /a; …` (empty when it cannot tell).
fn routes_difference(now: Option<&Value>, left: Option<&Value>) -> String {
    let read = |v: Option<&Value>| -> intent::Groups {
        v.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|g| {
                let strings = |k: &str| -> Vec<String> {
                    g[k].as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                };
                (strings("scopes"), strings("paths"))
            })
            .collect()
    };
    let (now, left) = (read(now), read(left));
    let mut keys: Vec<&Vec<String>> = now.keys().chain(left.keys()).collect();
    keys.sort();
    keys.dedup();
    let show = |paths: Option<&Vec<String>>| match paths {
        Some(p) if !p.is_empty() => p.join(", "),
        _ => "nothing".to_owned(),
    };
    let parts: Vec<String> = keys
        .into_iter()
        .filter(|k| now.get(*k) != left.get(*k))
        .map(|k| {
            let group = if k.is_empty() {
                "public".to_owned()
            } else {
                format!("[{}]", k.join(", "))
            };
            format!(
                "{group} serves {} now, the record left {}",
                show(now.get(k)),
                show(left.get(k))
            )
        })
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join("; "))
    }
}

fn groups_json(groups: &intent::Groups) -> Value {
    groups
        .iter()
        .map(|(scopes, paths)| json!({"scopes": scopes, "paths": paths}))
        .collect()
}

/// Why an undo with drift is refused (`None`: it may go ahead): the drifted fields must be
/// exactly the ones named with `--force-undo`.
pub fn refusal(revision: u64, drift: &[Drift], forced: &BTreeSet<String>) -> Option<String> {
    let drifted: BTreeSet<String> = drift.iter().map(|d| d.key.clone()).collect();
    if drifted == *forced {
        return None;
    }
    let list = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(",");
    if drifted.is_empty() {
        return Some(format!(
            "--force-undo {} names fields that nobody changed since revision {revision}; drop --force-undo",
            list(forced)
        ));
    }
    let what: Vec<String> = drift
        .iter()
        .map(|d| {
            if d.path == "." {
                let what = routes_difference(d.now.as_ref(), d.recorded.as_ref());
                format!("{} changed since revision {revision}{what}", d.reference)
            } else {
                format!(
                    "{} {} is now {} (revision {revision} left it at {})",
                    d.reference,
                    d.path,
                    short(&d.now),
                    short(&d.recorded)
                )
            }
        })
        .collect();
    Some(format!(
        "not undone: {}; to overwrite exactly these, add --force-undo {}",
        what.join("; "),
        list(&drifted)
    ))
}

fn short(v: &Option<Value>) -> String {
    match v {
        None | Some(Value::Null) => "absent".into(),
        Some(Value::String(s)) => format!("{s:?}"),
        Some(Value::Object(_) | Value::Array(_)) => "different".into(),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{self, BoundsChange, Change, ImageChange, RouteChange, Source, Status};
    use crate::live::LiveState;
    use crate::planner::{UpdateRequest, build_plan};
    use crate::routes::Listing;
    use appupdate_model::intent::{AttachmentRecord, GroupRecord, RouteSet, RoutesChange};
    use appupdate_model::plan::{Action, RouteStyle, Write};
    use proptest::prelude::*;

    fn record(endpoints: Option<RoutesChange>) -> Record {
        Record {
            revision: 4,
            time: "2026-12-01T07:00:00Z".into(),
            user: "admin".into(),
            tool: "kubectl-appupdate 0.1.0".into(),
            status: Status::Applied,
            source: Source::Update,
            saved_plan: false,
            image: Some(ImageChange {
                container: "app".into(),
                before: Some("r/web:1".into()),
                after: Some("r/web:2".into()),
            }),
            bounds: Some(BoundsChange {
                min: None,
                max: Some(Change {
                    before: Some(5),
                    after: Some(9),
                }),
            }),
            routes: endpoints
                .as_ref()
                .map(|_| {
                    vec![RouteChange {
                        api_version: "networking.k8s.io/v1".into(),
                        kind: "Ingress".into(),
                        name: "web-e3b0c44298fc1c14".into(),
                        action: Action::Update,
                        before: None,
                        after: None,
                    }]
                })
                .unwrap_or_default(),
            endpoints,
            routes_truncated: false,
            plan_checksum: None,
            fleet_run: None,
            signature: None,
        }
    }

    fn live() -> LiveState {
        LiveState {
            deployment: Some(
                json!({"metadata": {"name": "web", "resourceVersion": "9", "uid": "u9"},
                "spec": {"template": {"spec": {"containers": [
                    {"name": "app", "image": "r/web:2"}, {"name": "proxy", "image": "envoy"}]}}}}),
            ),
            autoscaler: Some(
                json!({"metadata": {"name": "web", "resourceVersion": "10", "uid": "u10"},
                "spec": {"minReplicas": 2, "maxReplicas": 9}}),
            ),
            service: Some(json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}})),
            ingresses: Vec::new(),
            httproutes: Listing::Items(Vec::new()),
            history: None,
            security_policies: Listing::NotServed,
            ingress_classes: Some(vec![json!({"metadata": {"name": "nginx",
                "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}}})]),
            gateway_support: None,
        }
    }

    fn undo_plan(r: &Record, live: &mut LiveState) -> Result<Plan, String> {
        let intent = request(r)?;
        let req = UpdateRequest {
            app: "web",
            namespace: "shop",
            context: "ctx",
            container: intent.container.as_deref(),
            container_update: &intent.container_update,
            autoscaler_update: &intent.autoscaler_update,
            endpoints: intent.endpoints.as_ref(),
            routes: &intent.routes,
            undo_of: Some(r.revision),
        };
        build_plan(&req, live).map_err(|e| e.to_string())
    }

    #[test]
    fn the_undo_asks_the_planner_for_the_values_before() {
        let r = record(None);
        let plan = undo_plan(&r, &mut live()).unwrap();
        assert!(drift(&r, &plan).is_empty());
        let deploy = plan.changes().find(|c| c.kind == Kind::Deployment).unwrap();
        assert_eq!(deploy.fields[0].after().as_deref(), Some(&json!("r/web:1")));
        let hpa = plan
            .changes()
            .find(|c| c.kind == Kind::HorizontalPodAutoscaler)
            .unwrap();
        assert_eq!(hpa.fields[0].after().as_deref(), Some(&json!(5)));
    }

    #[test]
    fn the_undo_names_itself_in_the_change_cause() {
        let r = record(None);
        let mut l = live();
        let cm = json!({"metadata": {"name": "web-appupdate-history", "resourceVersion": "3", "uid": "h"},
                        "binaryData": {"revision-4.json.gz": "x"}});
        l.history = Some(Some(cm));
        let plan = undo_plan(&r, &mut l).unwrap();
        let deploy = plan.changes().find(|c| c.kind == Kind::Deployment).unwrap();
        let after = deploy.after.as_ref().unwrap().get();
        assert_eq!(
            after["metadata"]["annotations"]["kubernetes.io/change-cause"],
            json!("kubectl-appupdate: undo of revision 4: image r/web:2 → r/web:1 (revision 5)")
        );
    }

    #[test]
    fn a_value_changed_since_the_record_is_drift_by_its_key() {
        let r = record(None);
        let mut l = live();
        l.autoscaler.as_mut().unwrap()["spec"]["maxReplicas"] = json!(12);
        let plan = undo_plan(&r, &mut l).unwrap();
        let d = drift(&r, &plan);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].key, "max");
        assert_eq!(
            refusal(4, &d, &BTreeSet::new()).unwrap(),
            "not undone: horizontalpodautoscaler.autoscaling/web spec.maxReplicas is now 12 (revision 4 left it at 9); to overwrite exactly these, add --force-undo max"
        );
        assert_eq!(refusal(4, &d, &["max".to_owned()].into()), None);
    }

    #[test]
    fn routes_changed_since_the_record_are_drift() {
        let set = |paths: &[&str]| RouteSet {
            style: Some(RouteStyle::NginxSnippet),
            attachment: AttachmentRecord::default(),
            groups: vec![GroupRecord {
                scopes: vec![],
                paths: paths.iter().map(|p| p.to_string()).collect(),
            }],
        };
        let r = record(Some(RoutesChange {
            before: set(&["/a"]),
            after: set(&["/a", "/b"]),
        }));
        // Nothing live: the record left /a and /b.
        let plan = undo_plan(&r, &mut live()).unwrap();
        let d = drift(&r, &plan);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].key, "routes");
    }

    #[test]
    fn a_record_of_bodies_or_without_its_routes_is_not_undone() {
        let mut r = record(None);
        r.routes.push(RouteChange {
            api_version: "networking.k8s.io/v1".into(),
            kind: "Ingress".into(),
            name: "web-x".into(),
            action: Action::Create,
            before: None,
            after: Some(json!({})),
        });
        assert!(request(&r).unwrap_err().contains("earlier version"));
        r.routes_truncated = true;
        assert!(request(&r).unwrap_err().contains("too large"));
    }

    /// Mostly valid values, now and then one the validator must refuse.
    fn token(valid: &'static str) -> impl Strategy<Value = String> {
        prop_oneof![
            12 => valid,
            1 => any::<String>(),
            1 => Just("a;b".to_owned()),
            1 => Just("../x".to_owned()),
            1 => Just("web/status".to_owned()),
        ]
    }

    fn route_set() -> impl Strategy<Value = RouteSet> {
        (
            prop::option::of(prop_oneof![
                Just(RouteStyle::NginxSnippet),
                Just(RouteStyle::NginxAuth),
                Just(RouteStyle::Gateway)
            ]),
            prop::option::of(token("[a-z]{1,6}")),
            prop::option::of(token("[a-z]{1,6}")),
            prop::collection::vec(
                (
                    prop::collection::vec(token("[a-z]{1,6}"), 0..3),
                    prop::collection::btree_set(token("[a-z]{1,6}"), 1..4),
                ),
                0..4,
            ),
        )
            .prop_map(|(style, auth_url, gateway, groups)| RouteSet {
                style,
                attachment: AttachmentRecord {
                    auth_url: auth_url.map(|u| format!("http://auth/{u}")),
                    gateway,
                    auth_service: Some("auth:8080".into()),
                    ..AttachmentRecord::default()
                },
                groups: groups
                    .into_iter()
                    .enumerate()
                    .map(|(i, (scopes, paths))| GroupRecord {
                        scopes,
                        paths: paths.into_iter().map(|p| format!("/g{i}/{p}")).collect(),
                    })
                    .collect(),
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, max_global_rejects: 20_000, ..ProptestConfig::default() })]

        /// For any record the validator accepts, the undo plan touches only the app's objects:
        /// its Deployment and HPA, and managed routes named and labelled by a route style.
        #[test]
        fn an_accepted_record_undoes_only_the_apps_own_objects(
            before in route_set(),
            after in route_set(),
            kind in prop_oneof![Just("Ingress"), Just("Deployment"), Just("HTTPRoute")],
            name in token("web-[a-z]{1,6}"),
        ) {
            let mut r = record(Some(RoutesChange { before, after }));
            r.routes[0].kind = kind.to_owned();
            r.routes[0].api_version = match kind {
                "Deployment" => "apps/v1",
                "HTTPRoute" => "gateway.networking.k8s.io/v1",
                _ => "networking.k8s.io/v1",
            }.to_owned();
            r.routes[0].name = name;
            prop_assume!(history::validate(&r, "web").is_ok());
            let mut l = live();
            l.ingresses.push(json!({"metadata": {"name": "web-e3b0c44298fc1c14",
                "resourceVersion": "3", "uid": "u3",
                "labels": {"app": "web", "identifier": "e3b0c44298fc1c14"}},
                "spec": {"rules": [{"http": {"paths": []}}]}}));
            let Ok(plan) = undo_plan(&r, &mut l) else { return Ok(()) };
            for c in plan.changes() {
                match c.kind {
                    Kind::Deployment | Kind::HorizontalPodAutoscaler => {
                        prop_assert_eq!(&c.name, "web");
                    }
                    Kind::Ingress | Kind::HttpRoute | Kind::SecurityPolicy => {
                        prop_assert!(c.name.starts_with("web-"), "{}", c.name);
                        if let Some(Write::Create { body }) = &c.write {
                            prop_assert_eq!(&body["metadata"]["labels"]["app"], "web");
                            let id = body["metadata"]["labels"]["identifier"].as_str().unwrap_or_default();
                            prop_assert_eq!(&c.name, &format!("web-{id}"));
                        }
                    }
                }
            }
        }
    }
}
