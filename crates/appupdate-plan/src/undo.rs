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
//! those with `--force-undo` (the drift keys: `image`, `min`, `max`, `routes` — the scope
//! groups and the style — and the parts of the routes' attachment, named as their flags are:
//! [`ATTACHMENT_KEYS`]). A value already back at its `before` value simply drops out of the
//! plan. Every write is conditional and guarded like any other, and the undo is itself
//! recorded, so undoing an undo redoes.
//!
//! The attachment: an undo sets back the auth URL or auth Service always (every route of a
//! style takes them) and the class, hosts, TLS Secret and Gateway when the record's run
//! changed them ([`flags_to_restore`]). Each of those whose live value (the live routes'
//! attachment as the planner reads it) is neither the record's `after` value nor the value the
//! undo restores is drift; the auth URL and auth Service only where routes that check scopes
//! carry them. The auth provider is drift whenever the live gateway routes check scopes with
//! another provider than the record left. Where the live object's managedFields tell, the
//! refusal names who last set the value and when ([`holders`], [`last_changed`]).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::history::Record;
use crate::live::LiveState;
use crate::routes::refs::RouteFlags;
use crate::updaters::Plan;
use crate::updaters::{AutoscalerUpdate, ContainerUpdate};
use appupdate_model::endpoints_file::EndpointsFile;
use appupdate_model::intent::{self, flags_to_restore};
use appupdate_model::plan::{AuthProvider, Field, Kind, RouteStyle};
use appupdate_model::text::Untrusted;

/// A field changed since the record: what it is now and what the record left it at.
#[derive(Clone, Debug, PartialEq)]
pub struct Drift {
    /// The name `--force-undo` takes: `image`, `min`, `max`, `routes`, or a part of the
    /// routes' attachment ([`ATTACHMENT_KEYS`]).
    pub key: String,
    pub reference: String,
    pub path: String,
    pub now: Option<Value>,
    pub recorded: Option<Value>,
    /// Who last changed it, where the live object's managedFields tell ([`last_changed`]).
    pub changed_by: Option<Changer>,
}

/// The `--force-undo` names of the parts of the routes' attachment, as the route flags name
/// them.
pub const ATTACHMENT_KEYS: &[&str] = &[
    "auth-url",
    "auth-service",
    "gateway",
    "ingress-class",
    "hosts",
    "tls-secret",
    "auth-provider",
];

/// Who last wrote a field, by the managedFields of the live object that holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Changer {
    /// The field manager (`kubectl-annotate`, `kubectl-appupdate`, …).
    pub manager: String,
    /// When, as the server recorded it (RFC 3339).
    pub time: Option<String>,
    /// The object, e.g. `ingress.networking.k8s.io/web-3a…`.
    pub object: String,
}

/// The live object an attachment part is read from, and the field that holds it as a
/// `metadata.managedFields` `fieldsV1` path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The part's `--force-undo` name.
    pub key: &'static str,
    pub kind: Kind,
    pub name: String,
    pub fields: &'static [&'static str],
}

impl Drift {
    /// A part of the routes' attachment.
    pub fn is_attachment(&self) -> bool {
        ATTACHMENT_KEYS.contains(&self.key.as_str())
    }
}

/// `record` without the values in `drift`: what a run that failed puts back of its own changes
/// when someone else has moved some of them since it wrote them (`--undo-on-failure` leaves
/// those as they are, and lists them). The routes go back together or not at all: a drift in
/// them or in any part of their attachment leaves every route as it is.
pub fn without(record: &Record, drift: &[Drift]) -> Record {
    let mut kept = record.clone();
    for d in drift {
        match d.key.as_str() {
            "image" => kept.image = None,
            "min" | "max" => {
                if let Some(bounds) = kept.bounds.as_mut() {
                    if d.key == "min" {
                        bounds.min = None;
                    } else {
                        bounds.max = None;
                    }
                }
            }
            _ => {
                kept.endpoints = None;
                kept.routes.clear();
            }
        }
    }
    if kept
        .bounds
        .as_ref()
        .is_some_and(|b| b.min.is_none() && b.max.is_none())
    {
        kept.bounds = None;
    }
    kept
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

/// What changed since `record` among the values `plan` (the undo's, made against the live
/// objects) sets back: each value whose live value is not the one the record left.
pub fn drift(record: &Record, plan: &Plan) -> Vec<Drift> {
    let mut out = Vec::new();
    for change in plan.changes() {
        for f in &change.fields {
            let bounds = record.bounds.as_ref();
            let (key, recorded) = match (change.kind, f.field()) {
                (Kind::Deployment, Some(Field::Image { .. })) => (
                    "image",
                    record
                        .image
                        .as_ref()
                        .and_then(|i| i.after.clone())
                        .map(Value::String),
                ),
                (Kind::HorizontalPodAutoscaler, Some(Field::MinReplicas)) => (
                    "min",
                    bounds.and_then(|b| b.min.as_ref()?.after).map(Value::from),
                ),
                (Kind::HorizontalPodAutoscaler, Some(Field::MaxReplicas)) => (
                    "max",
                    bounds.and_then(|b| b.max.as_ref()?.after).map(Value::from),
                ),
                _ => continue,
            };
            // An image an admission controller pinned to its digest when it was written is
            // the image the record wrote.
            let pinned = match (f.before().as_deref(), recorded.as_ref()) {
                (Some(Value::String(now)), Some(Value::String(left))) if key == "image" => {
                    appupdate_model::image::pinned_at_admission(now, left)
                }
                _ => false,
            };
            if f.before().as_deref() != recorded.as_ref() && !pinned {
                out.push(Drift {
                    key: key.into(),
                    reference: change.reference(),
                    path: f.path.clone(),
                    now: f.before().map(Cow::into_owned),
                    recorded,
                    changed_by: None,
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
        if core(&live) != core(&left) || style_moved {
            out.push(Drift {
                key: "routes".into(),
                reference: format!("the routes of {}", plan.app),
                path: Field::Whole.path(),
                now: Some(json!(groups_json(&live))),
                recorded: Some(json!(groups_json(&left))),
                changed_by: None,
            });
        }
        // Gateway routes whose scopes someone moved to the other auth provider since.
        let live_provider = plan
            .routes
            .as_ref()
            .and_then(|r| r.header.attachment_before.auth_provider);
        let left_provider = change.after.attachment.auth_provider;
        let provider_moved = !left.is_empty()
            && change.after.style == Some(RouteStyle::Gateway)
            && live_styles == [RouteStyle::Gateway]
            && live_provider.unwrap_or(AuthProvider::Filter)
                != left_provider.unwrap_or(AuthProvider::Filter);
        if provider_moved {
            let name =
                |p: Option<AuthProvider>| Some(json!(p.unwrap_or(AuthProvider::Filter).as_str()));
            out.push(Drift {
                key: "auth-provider".into(),
                reference: format!("the routes of {}", plan.app),
                path: "auth provider".into(),
                now: name(live_provider),
                recorded: name(left_provider),
                changed_by: None,
            });
        }
        if !left.is_empty() && !style_moved {
            // Parts only a route that checks scopes carries: compared when the routes the
            // record left and the live ones both have such a route.
            let scoped = |g: &intent::Groups| g.keys().any(|scopes| !scopes.is_empty());
            let scoped = scoped(&live) && scoped(&left);
            out.extend(attachment_drift(
                &plan.app,
                change,
                plan.routes.as_ref(),
                scoped,
            ));
        }
    }
    out
}

/// The parts of the routes' attachment the undo sets back (the flags [`flags_to_restore`]
/// gives it) whose live value is neither the one the record left nor the one the undo
/// restores: someone changed them since. The live value is the live routes' attachment as the
/// planner reads it for their style without flags (the plan's `attachment_before`). The auth
/// URL and auth Service only when `scoped` (routes that check scopes carry them); the auth
/// provider is [`drift`]'s own check.
fn attachment_drift(
    app: &str,
    change: &intent::RoutesChange,
    routes: Option<&appupdate_model::plan::RoutesPlan>,
    scoped: bool,
) -> Vec<Drift> {
    let Some(routes) = routes else {
        return Vec::new();
    };
    // The same single style as the record left: another is drift of the routes as a whole.
    if routes.live_styles.len() != 1 || change.after.style != routes.live_styles.first().copied() {
        return Vec::new();
    }
    let Ok(flags) = flags_to_restore(&change.before, &change.after) else {
        return Vec::new();
    };
    let live = &routes.header.attachment_before;
    let left = &change.after.attachment;
    let text = |v: &Option<String>| v.clone().map(Value::String);
    let hosts = |h: &[String]| (!h.is_empty()).then(|| json!(h));
    // (key, what it is, whether the undo sets it, live, left, what the undo restores)
    let parts = [
        (
            "auth-url",
            "auth URL",
            scoped && flags.auth_url.is_some(),
            text(&live.auth_url),
            text(&left.auth_url),
            flags.auth_url.as_ref().map(|u| json!(u.as_str())),
        ),
        (
            "auth-service",
            "auth Service",
            scoped && flags.auth_service.is_some(),
            text(&live.auth_service),
            text(&left.auth_service),
            flags.auth_service.as_ref().map(|s| json!(s.to_string())),
        ),
        (
            "gateway",
            "Gateway",
            flags.gateway.is_some(),
            text(&live.gateway),
            text(&left.gateway),
            flags.gateway.as_ref().map(|g| json!(g.to_string())),
        ),
        (
            "ingress-class",
            "IngressClass",
            flags.ingress_class.is_some(),
            text(&live.ingress_class),
            text(&left.ingress_class),
            text(&flags.ingress_class),
        ),
        (
            "hosts",
            "hosts",
            !flags.hosts.is_empty(),
            hosts(&live.hosts),
            hosts(&left.hosts),
            hosts(&flags.hosts),
        ),
        (
            "tls-secret",
            "TLS Secret",
            flags.tls_secret.is_some(),
            text(&live.tls_secret),
            text(&left.tls_secret),
            text(&flags.tls_secret),
        ),
    ];
    parts
        .into_iter()
        .filter(|(_, _, set, now, left, restores)| *set && now != left && now != restores)
        .map(|(key, what, _, now, recorded, _)| Drift {
            key: key.into(),
            reference: format!("the routes of {app}"),
            path: what.into(),
            now,
            recorded,
            changed_by: None,
        })
        .collect()
}

/// The live object each part of the routes' attachment is read from — as the planner reads
/// the live routes' attachment for their style without flags — and the field holding it: what
/// an undo reads again to say who changed a part since its record. Empty unless the live
/// managed routes are of one style. Read before planning, which takes the live routes.
pub fn holders(app: &str, live: &LiveState) -> Vec<Holder> {
    use crate::routes::{self, LiveRoutes, name_of};
    let styles = routes::live_styles(&live.ingresses, live.httproutes.items());
    let style = match styles.keys().collect::<Vec<_>>().as_slice() {
        [one] => **one,
        _ => return Vec::new(),
    };
    let holder = |key, kind, obj: &Value, fields| {
        Some(Holder {
            key,
            kind,
            name: name_of(obj)?.to_owned(),
            fields,
        })
    };
    let by_name = |objs: &[Value]| -> BTreeMap<String, Value> {
        objs.iter()
            .filter_map(|o| Some((name_of(o)?.to_owned(), o.clone())))
            .collect()
    };
    let ingress = routes::first_sibling(&live.ingresses);
    let route = routes::first_sibling(live.httproutes.items());
    let mut out = Vec::new();
    if style == RouteStyle::Gateway {
        out.extend(
            route.and_then(|r| holder("hosts", Kind::HttpRoute, r, &["f:spec", "f:hostnames"])),
        );
        out.extend(
            route.and_then(|r| holder("gateway", Kind::HttpRoute, r, &["f:spec", "f:parentRefs"])),
        );
        let service = Value::Null;
        let provider = routes::choose_provider(
            app,
            None,
            &LiveRoutes {
                service: live.service.as_ref().unwrap_or(&service),
                ingresses: &live.ingresses,
                httproutes: &live.httproutes,
                security_policies: &live.security_policies,
                ingress_classes: None,
                gateway_support: None,
            },
        )
        .unwrap_or(AuthProvider::Filter);
        let from_routes = by_name(live.httproutes.items())
            .into_values()
            .find(|o| routes::gateway::auth_service_of(o).is_some())
            .and_then(|o| holder("auth-service", Kind::HttpRoute, &o, &["f:spec", "f:rules"]));
        let from_policies = by_name(live.security_policies.items())
            .into_values()
            .find(|o| routes::envoy_gateway::auth_service_of(o).is_some())
            .and_then(|o| {
                holder(
                    "auth-service",
                    Kind::SecurityPolicy,
                    &o,
                    &["f:spec", "f:extAuth"],
                )
            });
        out.extend(match provider {
            AuthProvider::Filter => from_routes.or(from_policies),
            AuthProvider::EnvoyGateway => from_policies.or(from_routes),
        });
    } else {
        out.extend(ingress.and_then(|i| holder("hosts", Kind::Ingress, i, &["f:spec", "f:rules"])));
        out.extend(ingress.and_then(|i| {
            holder(
                "ingress-class",
                Kind::Ingress,
                i,
                &["f:spec", "f:ingressClassName"],
            )
        }));
        out.extend(
            ingress.and_then(|i| holder("tls-secret", Kind::Ingress, i, &["f:spec", "f:tls"])),
        );
        if style == RouteStyle::NginxAuth {
            out.extend(
                by_name(&live.ingresses)
                    .into_values()
                    .filter(|o| routes::style_of(Kind::Ingress, o) == Some(RouteStyle::NginxAuth))
                    .find(|o| routes::nginx_auth::auth_url_of(o).is_some())
                    .and_then(|o| {
                        holder(
                            "auth-url",
                            Kind::Ingress,
                            &o,
                            &[
                                "f:metadata",
                                "f:annotations",
                                "f:nginx.ingress.kubernetes.io/auth-url",
                            ],
                        )
                    }),
            );
        }
    }
    out
}

/// Who last changed the field `fields` (a `fieldsV1` path) of `object`, by its
/// `metadata.managedFields`: the one entry whose `fieldsV1` holds that field. `None` when no
/// entry or several do (shared ownership says nothing of who changed it last).
pub fn last_changed(object: &Value, fields: &[&str]) -> Option<Changer> {
    let holds = |entry: &&Value| {
        fields
            .iter()
            .try_fold(&entry["fieldsV1"], |at, f| at.get(*f))
            .is_some()
    };
    let entries = object["metadata"]["managedFields"].as_array()?;
    let mut holding = entries.iter().filter(holds);
    let (Some(entry), None) = (holding.next(), holding.next()) else {
        return None;
    };
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let group = object["apiVersion"]
        .as_str()
        .and_then(|v| v.split_once('/'))
        .map(|(group, _)| format!(".{group}"))
        .unwrap_or_default();
    Some(Changer {
        manager: entry["manager"].as_str()?.to_owned(),
        time: entry["time"].as_str().map(str::to_owned),
        object: format!("{}{group}/{name}", kind.to_ascii_lowercase()),
    })
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
            if d.is_attachment() {
                let by = d.changed_by.as_ref().map_or(String::new(), |c| {
                    format!(
                        "; last set by {}{}, in {}",
                        Untrusted(&c.manager),
                        c.time
                            .as_ref()
                            .map_or(String::new(), |t| format!(" at {}", Untrusted(t))),
                        Untrusted(&c.object),
                    )
                });
                format!(
                    "the {} of {} ({}) is now {} (revision {revision} left it at {}{by})",
                    d.path,
                    d.reference,
                    d.key,
                    attachment_value(&d.now),
                    attachment_value(&d.recorded)
                )
            } else if Field::parse(&d.path) == Some(Field::Whole) {
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

/// An attachment value in a message: quoted and escaped; hosts as a list.
fn attachment_value(v: &Option<Value>) -> String {
    match v {
        None | Some(Value::Null) => "unset".into(),
        Some(Value::String(s)) => format!("{:?}", Untrusted(s)),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| format!("{:?}", Untrusted(i.as_str().unwrap_or_default())))
            .collect::<Vec<_>>()
            .join(", "),
        Some(other) => format!("{:?}", Untrusted(other.to_string())),
    }
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
    use crate::planner::{UpdateRequest, build_plan};
    use crate::routes::Listing;
    use appupdate_model::intent::{AttachmentRecord, GroupRecord, RouteSet, RoutesChange};
    use appupdate_model::plan::{Action, RouteStyle, Write};
    use proptest::prelude::*;

    fn drifted(key: &str) -> Drift {
        Drift {
            key: key.into(),
            reference: String::new(),
            path: String::new(),
            now: None,
            recorded: None,
            changed_by: None,
        }
    }

    #[test]
    fn a_put_back_leaves_out_exactly_what_moved_since_the_run_wrote_it() {
        let r = record(None);
        let kept = without(&r, &[drifted("image")]);
        assert_eq!(kept.image, None);
        assert_eq!(kept.bounds, r.bounds, "the bounds still go back");
        let kept = without(&r, &[drifted("max")]);
        assert_eq!(kept.bounds, None, "the only bound changed moved: none left");
        assert_eq!(kept.image, r.image);
        let kept = without(&r, &[]);
        assert_eq!(kept.image, r.image);
        assert_eq!(kept.bounds, r.bounds);
        let intent = request(&without(&r, &[drifted("image")])).unwrap();
        assert_eq!(intent.container_update.image, None);
        assert_eq!(intent.autoscaler_update.max_replicas, Some(5));
    }

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
            overridden: Vec::new(),
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
            marks: Vec::new(),
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

    const GROUPS: &str = "endpoints:\n  - path: /a\n  - path: /b\n    scopes: [user]\n";

    fn routes_set(style: RouteStyle, attachment: AttachmentRecord) -> RouteSet {
        RouteSet {
            style: Some(style),
            attachment,
            groups: vec![
                GroupRecord {
                    scopes: vec![],
                    paths: vec!["/a".into()],
                },
                GroupRecord {
                    scopes: vec!["user".into()],
                    paths: vec!["/b".into()],
                },
            ],
        }
    }

    /// The live state after a run published [`GROUPS`] in `style` attached as `attachment`:
    /// the routes that run created, as the server would hold them.
    fn exposed(style: RouteStyle, attachment: &AttachmentRecord) -> LiveState {
        let mut l = live();
        l.security_policies = Listing::Items(Vec::new());
        let set = routes_set(style, attachment.clone());
        let flags = flags_to_restore(&set, &RouteSet::default()).unwrap();
        let file = appupdate_model::endpoints_file::parse(GROUPS, "t").unwrap();
        let req = UpdateRequest {
            app: "web",
            namespace: "shop",
            context: "ctx",
            container: None,
            container_update: &ContainerUpdate::default(),
            autoscaler_update: &AutoscalerUpdate::default(),
            endpoints: Some(&file),
            routes: &flags,
            undo_of: None,
        };
        let plan = build_plan(&req, &mut l.clone()).unwrap();
        for (i, c) in plan.changes().enumerate() {
            let Some(Write::Create { body }) = &c.write else {
                continue;
            };
            let mut body = Value::clone(body);
            body["metadata"]["resourceVersion"] = json!(format!("{}", 20 + i));
            body["metadata"]["uid"] = json!(format!("u{i}"));
            match c.kind {
                Kind::Ingress => l.ingresses.push(body),
                Kind::HttpRoute => {
                    if let Listing::Items(items) = &mut l.httproutes {
                        items.push(body);
                    }
                }
                Kind::SecurityPolicy => {
                    if let Listing::Items(items) = &mut l.security_policies {
                        items.push(body);
                    }
                }
                _ => {}
            }
        }
        l
    }

    fn nginx_auth(url: &str) -> AttachmentRecord {
        AttachmentRecord {
            ingress_class: Some("nginx".into()),
            hosts: vec!["a.example.com".into()],
            tls_secret: Some("tls-a".into()),
            auth_url: Some(url.into()),
            ..AttachmentRecord::default()
        }
    }

    fn gateway(provider: AuthProvider) -> AttachmentRecord {
        AttachmentRecord {
            hosts: vec!["a.example.com".into()],
            gateway: Some("gateways/public".into()),
            auth_service: Some("auth/oauth:8080".into()),
            auth_provider: Some(provider),
            ..AttachmentRecord::default()
        }
    }

    /// The record of a run that moved the routes from `before` to `after`, and the drift of
    /// its undo against routes attached as `live`.
    fn attachment_drift_of(
        style: RouteStyle,
        before: AttachmentRecord,
        after: AttachmentRecord,
        live: AttachmentRecord,
    ) -> Vec<Drift> {
        let mut r = record(Some(RoutesChange {
            before: routes_set(style, before),
            after: routes_set(style, after),
        }));
        r.image = None;
        r.bounds = None;
        let mut l = exposed(style, &live);
        let plan = undo_plan(&r, &mut l).unwrap();
        drift(&r, &plan)
    }

    #[test]
    fn each_attachment_value_changed_since_the_record_is_drift_by_its_flags_name() {
        let a = nginx_auth("http://a.example/check");
        type Edit = fn(&mut AttachmentRecord, &str);
        let ingress_parts: [(&str, Edit, [&str; 3]); 4] = [
            (
                "auth-url",
                |x, v| x.auth_url = Some(v.into()),
                [
                    "http://a.example/check",
                    "http://b.example/check",
                    "http://c.example/check",
                ],
            ),
            (
                "ingress-class",
                |x, v| x.ingress_class = Some(v.into()),
                ["class-a", "class-b", "class-c"],
            ),
            (
                "hosts",
                |x, v| x.hosts = vec![v.into()],
                ["a.example.com", "b.example.com", "c.example.com"],
            ),
            (
                "tls-secret",
                |x, v| x.tls_secret = Some(v.into()),
                ["tls-a", "tls-b", "tls-c"],
            ),
        ];
        for (key, edit, [va, vb, vc]) in ingress_parts {
            let (mut before, mut after, mut now) = (a.clone(), a.clone(), a.clone());
            edit(&mut before, va);
            edit(&mut after, vb);
            edit(&mut now, vc);
            let d = attachment_drift_of(RouteStyle::NginxAuth, before.clone(), after.clone(), now);
            assert_eq!(d.len(), 1, "{key}: {d:?}");
            assert_eq!(d[0].key, key);
            let shown = |v: &str| if key == "hosts" { json!([v]) } else { json!(v) };
            assert_eq!(d[0].now, Some(shown(vc)), "{key}");
            assert_eq!(d[0].recorded, Some(shown(vb)), "{key}");
            // Already back at the value the undo restores: nothing to overwrite.
            let mut back = a.clone();
            edit(&mut back, va);
            assert!(
                attachment_drift_of(RouteStyle::NginxAuth, before, after, back).is_empty(),
                "{key}"
            );
        }
        let g = gateway(AuthProvider::Filter);
        let gateway_parts: [(&str, Edit, [&str; 3]); 2] = [
            (
                "gateway",
                |x, v| x.gateway = Some(v.into()),
                ["gateways/a", "gateways/b", "gateways/c"],
            ),
            (
                "auth-service",
                |x, v| x.auth_service = Some(v.into()),
                ["auth/a:8080", "auth/b:8080", "auth/c:8080"],
            ),
        ];
        for (key, edit, [va, vb, vc]) in gateway_parts {
            let (mut before, mut after, mut now) = (g.clone(), g.clone(), g.clone());
            edit(&mut before, va);
            edit(&mut after, vb);
            edit(&mut now, vc);
            let d = attachment_drift_of(RouteStyle::Gateway, before, after, now);
            assert_eq!(d.len(), 1, "{key}: {d:?}");
            assert_eq!(d[0].key, key);
            assert_eq!(d[0].now, Some(json!(vc)), "{key}");
            assert_eq!(d[0].recorded, Some(json!(vb)), "{key}");
        }
        // The provider: the undo always sets it; someone moved the scopes to Envoy Gateway.
        let d = attachment_drift_of(
            RouteStyle::Gateway,
            g.clone(),
            g.clone(),
            gateway(AuthProvider::EnvoyGateway),
        );
        assert_eq!(
            d.iter().map(|d| d.key.as_str()).collect::<Vec<_>>(),
            ["auth-provider"]
        );
        assert_eq!(d[0].now, Some(json!("envoy-gateway")));
        assert_eq!(d[0].recorded, Some(json!("filter")));
    }

    #[test]
    fn the_auth_url_is_drift_even_when_the_record_did_not_change_it_since_undo_restores_it() {
        let a = nginx_auth("http://a.example/check");
        let mut before = a.clone();
        before.ingress_class = Some("class-a".into());
        // The run changed the class only; someone changed the auth URL and the hosts since.
        let mut now = a.clone();
        now.auth_url = Some("http://attacker.example/allow-all".into());
        now.hosts = vec!["c.example.com".into()];
        let d = attachment_drift_of(RouteStyle::NginxAuth, before, a, now);
        // The hosts are not set back by this undo (the run did not change them): no drift.
        assert_eq!(
            d.iter().map(|d| d.key.as_str()).collect::<Vec<_>>(),
            ["auth-url"]
        );
        let message = refusal(4, &d, &BTreeSet::new()).unwrap();
        assert_eq!(
            message,
            "not undone: the auth URL of the routes of web (auth-url) is now \"http://attacker.example/allow-all\" (revision 4 left it at \"http://a.example/check\"); to overwrite exactly these, add --force-undo auth-url"
        );
        assert_eq!(refusal(4, &d, &["auth-url".to_owned()].into()), None);
        assert!(refusal(4, &d, &["routes".to_owned()].into()).is_some());
    }

    #[test]
    fn an_auth_url_is_compared_only_where_routes_that_check_scopes_carry_one() {
        // The record left only public routes: none carries an auth URL to compare.
        let public = |url: &str| RouteSet {
            groups: vec![GroupRecord {
                scopes: vec![],
                paths: vec!["/a".into()],
            }],
            ..routes_set(RouteStyle::NginxAuth, nginx_auth(url))
        };
        let mut r = record(Some(RoutesChange {
            before: routes_set(RouteStyle::NginxAuth, nginx_auth("http://a.example/check")),
            after: public("http://b.example/check"),
        }));
        r.image = None;
        r.bounds = None;
        let mut l = exposed(RouteStyle::NginxAuth, &nginx_auth("http://c.example/check"));
        let plan = undo_plan(&r, &mut l).unwrap();
        let keys: Vec<String> = drift(&r, &plan).into_iter().map(|d| d.key).collect();
        assert_eq!(keys, ["routes"]);
    }

    #[test]
    fn who_changed_a_value_is_named_only_where_one_managed_fields_entry_holds_it() {
        let annotation = [
            "f:metadata",
            "f:annotations",
            "f:nginx.ingress.kubernetes.io/auth-url",
        ];
        let object = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web-x", "managedFields": [
            {"manager": "kubectl-appupdate", "operation": "Update", "time": "2026-12-01T07:00:00Z",
             "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}, "f:annotations": {"f:nginx.ingress.kubernetes.io/rewrite-target": {}}},
                          "f:spec": {"f:rules": {}}}},
            {"manager": "kubectl-annotate", "operation": "Update", "time": "2026-12-02T08:00:00Z",
             "fieldsV1": {"f:metadata": {"f:annotations": {"f:nginx.ingress.kubernetes.io/auth-url": {}}}}}
        ]}});
        assert_eq!(
            last_changed(&object, &annotation),
            Some(Changer {
                manager: "kubectl-annotate".into(),
                time: Some("2026-12-02T08:00:00Z".into()),
                object: "ingress.networking.k8s.io/web-x".into(),
            })
        );
        assert_eq!(
            last_changed(&object, &["f:spec", "f:rules"])
                .unwrap()
                .manager,
            "kubectl-appupdate"
        );
        // Nobody, or two managers sharing it: nothing is said.
        assert_eq!(last_changed(&object, &["f:spec", "f:tls"]), None);
        let mut shared = object.clone();
        shared["metadata"]["managedFields"][0]["fieldsV1"]["f:metadata"]["f:annotations"]["f:nginx.ingress.kubernetes.io/auth-url"] =
            json!({});
        assert_eq!(last_changed(&shared, &annotation), None);
        assert_eq!(last_changed(&json!({"metadata": {}}), &annotation), None);
        // Said in the refusal.
        let d = Drift {
            key: "auth-url".into(),
            reference: "the routes of web".into(),
            path: "auth URL".into(),
            now: Some(json!("http://c.example/check")),
            recorded: Some(json!("http://b.example/check")),
            changed_by: last_changed(&object, &annotation),
        };
        assert_eq!(
            refusal(3, &[d], &BTreeSet::new()).unwrap(),
            "not undone: the auth URL of the routes of web (auth-url) is now \"http://c.example/check\" (revision 3 left it at \"http://b.example/check\"; last set by kubectl-annotate at 2026-12-02T08:00:00Z, in ingress.networking.k8s.io/web-x); to overwrite exactly these, add --force-undo auth-url"
        );
    }

    #[test]
    fn the_holders_are_the_objects_the_planner_reads_the_attachment_from() {
        let l = exposed(RouteStyle::NginxAuth, &nginx_auth("http://a.example/check"));
        let h = holders("web", &l);
        let keys: Vec<&str> = h.iter().map(|h| h.key).collect();
        assert_eq!(keys, ["hosts", "ingress-class", "tls-secret", "auth-url"]);
        let first = l
            .ingresses
            .iter()
            .filter_map(|i| i["metadata"]["name"].as_str())
            .min()
            .unwrap();
        assert!(
            h.iter().all(|h| h.kind == Kind::Ingress && h.name == first),
            "{h:?}"
        );
        let l = exposed(RouteStyle::Gateway, &gateway(AuthProvider::EnvoyGateway));
        let h = holders("web", &l);
        let auth = h.iter().find(|h| h.key == "auth-service").unwrap();
        assert_eq!(auth.kind, Kind::SecurityPolicy);
        assert_eq!(auth.fields, ["f:spec", "f:extAuth"]);
        assert!(holders("web", &live()).is_empty());
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
