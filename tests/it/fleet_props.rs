//! Property tests of the combined plan of a fleet, through the public API: every cluster is
//! planned as the run plans it (`planner::build_plan` against its live objects), and the
//! clusters' plans are put together as the run puts them (`fleet_plan::FleetPlan`).
#![allow(clippy::unwrap_used)]

use appupdate_plan::fleet_plan::{FleetPlan, Member, same_plan};
use appupdate_plan::live::LiveState;
use appupdate_plan::planner::{UpdateRequest, build_plan};
use appupdate_plan::routes::refs::RouteFlags;
use appupdate_plan::updaters::Plan;
use appupdate_plan::updaters::{AutoscalerUpdate, ContainerUpdate};
use proptest::prelude::*;
use serde_json::{Value, json};

const APP: &str = "web";

/// One cluster's application as it may be found: its own images, replica count, bounds,
/// labels and extra containers, in its own namespace.
#[derive(Clone, Debug)]
struct Cluster {
    namespace: String,
    image: String,
    sidecar: Option<String>,
    replicas: i64,
    bounds: (i32, i32),
    label: Option<String>,
}

fn cluster() -> impl Strategy<Value = Cluster> {
    (
        prop::sample::select(vec!["shop", "shop-eu", "default"]),
        "registry\\.example\\.com/web:[0-9]\\.[0-9]",
        prop::option::of("sidecar:[0-9]"),
        1i64..10,
        (1i32..5, 5i32..20),
        prop::option::of("[a-z]{1,6}"),
    )
        .prop_map(
            |(namespace, image, sidecar, replicas, bounds, label)| Cluster {
                namespace: namespace.to_owned(),
                image,
                sidecar,
                replicas,
                bounds,
                label,
            },
        )
}

/// What the run asks for: a new image and bounds, any of them.
#[derive(Clone, Debug)]
struct Request {
    image: Option<String>,
    min: Option<i32>,
    max: Option<i32>,
}

fn request() -> impl Strategy<Value = Request> {
    (
        prop::option::of("registry\\.example\\.com/web:[0-9]\\.[0-9]"),
        prop::option::of(1i32..5),
        prop::option::of(5i32..20),
    )
        .prop_filter("at least one change", |(i, a, b)| {
            i.is_some() || a.is_some() || b.is_some()
        })
        .prop_map(|(image, min, max)| Request { image, min, max })
}

fn live(c: &Cluster, rv: u64) -> LiveState {
    let mut containers = vec![json!({"name": "app", "image": c.image})];
    if let Some(s) = &c.sidecar {
        containers.push(json!({"name": "sidecar", "image": s}));
    }
    let mut labels = json!({"app": APP});
    if let Some(l) = &c.label {
        labels["team"] = Value::from(l.as_str());
    }
    LiveState {
        deployment: Some(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": APP, "namespace": c.namespace, "labels": labels,
                         "resourceVersion": rv.to_string(), "uid": format!("d-{rv}")},
            "spec": {"replicas": c.replicas, "template": {"spec": {"containers": containers}}},
        })),
        autoscaler: Some(json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": APP, "namespace": c.namespace, "labels": labels,
                         "resourceVersion": (rv + 1).to_string(), "uid": format!("h-{rv}")},
            "spec": {"minReplicas": c.bounds.0, "maxReplicas": c.bounds.1,
                     "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": APP}},
        })),
        service: None,
        ..LiveState::default()
    }
}

/// The cluster once the request has been applied to it: everything else as it was.
fn converged(c: &Cluster, r: &Request) -> Cluster {
    let mut c = c.clone();
    if let Some(image) = &r.image {
        c.image = image.clone();
    }
    let (min, max) = (r.min.unwrap_or(c.bounds.0), r.max.unwrap_or(c.bounds.1));
    c.bounds = (min, max);
    c
}

fn plan(c: &Cluster, r: &Request, context: &str, rv: u64) -> Plan {
    let container_update = ContainerUpdate {
        image: r.image.clone(),
    };
    let autoscaler_update = AutoscalerUpdate {
        min_replicas: r.min,
        max_replicas: r.max,
    };
    let req = UpdateRequest {
        app: APP,
        namespace: &c.namespace,
        context,
        container: Some("app"),
        container_update: &container_update,
        autoscaler_update: &autoscaler_update,
        endpoints: None,
        routes: &RouteFlags::default(),
        undo_of: None,
    };
    build_plan(&req, &mut live(c, rv)).unwrap()
}

fn fleet(plans: &[Plan]) -> FleetPlan<'_> {
    FleetPlan {
        app: APP,
        members: plans.iter().map(Member::Planned).collect(),
        waves: &[],
        owners: Vec::new(),
    }
}

proptest! {
    /// However the clusters differ otherwise, once each holds what was asked, there is
    /// nothing to do anywhere: no cluster has a change, the totals are zero, and every section
    /// says so.
    #[test]
    fn for_any_fleet_of_converged_clusters_the_plan_is_empty(
        clusters in prop::collection::vec(cluster(), 1..8),
        r in request(),
        rv in 1u64..1_000_000,
    ) {
        let plans: Vec<Plan> = clusters
            .iter()
            .enumerate()
            .map(|(i, c)| plan(&converged(c, &r), &r, &format!("ctx-{i}"), rv + i as u64 * 7))
            .collect();
        let fleet = fleet(&plans);
        prop_assert!(!fleet.has_changes());
        prop_assert_eq!(fleet.changing(), 0);
        let total = fleet.total();
        prop_assert_eq!((total.create, total.update, total.delete), (0, 0, 0));
        let sections = fleet.sections();
        prop_assert!(sections.iter().all(|s| !s.plan().has_changes()));
        // Every cluster is in exactly one section.
        let mut named: Vec<&str> = sections.iter().flat_map(|s| s.contexts()).collect();
        named.sort_unstable();
        let mut all: Vec<&str> = plans.iter().map(|p| p.context.as_str()).collect();
        all.sort_unstable();
        prop_assert_eq!(named, all);
    }

    /// Folding loses nothing: two clusters share a section exactly when their plans show the
    /// same thing, and clusters that differ only in resourceVersions and uids always do.
    #[test]
    fn clusters_share_a_section_exactly_when_their_plans_are_the_same(
        clusters in prop::collection::vec(cluster(), 1..8),
        r in request(),
        rv in 1u64..1_000_000,
    ) {
        // Each cluster twice, the copy with other resourceVersions and uids.
        let plans: Vec<Plan> = clusters
            .iter()
            .enumerate()
            .flat_map(|(i, c)| {
                [
                    plan(c, &r, &format!("a-{i}"), rv + i as u64 * 7),
                    plan(c, &r, &format!("b-{i}"), rv + 500 + i as u64 * 3),
                ]
            })
            .collect();
        let fleet = fleet(&plans);
        let sections = fleet.sections();
        let section_of = |context: &str| {
            sections
                .iter()
                .position(|s| s.contexts().contains(&context))
                .unwrap()
        };
        for i in 0..clusters.len() {
            prop_assert_eq!(section_of(&format!("a-{i}")), section_of(&format!("b-{i}")));
        }
        for a in &plans {
            for b in &plans {
                prop_assert_eq!(
                    section_of(&a.context) == section_of(&b.context),
                    same_plan(a, b)
                );
            }
        }
        let total = fleet.total();
        let each: usize = plans.iter().map(|p| p.summary().update).sum();
        prop_assert_eq!(total.update, each);
    }
}
