//! Unit tests of the `envoy-gateway` auth provider: the policy of a scoped group, its updates,
//! removal and saved form, how the provider is chosen, and the order of its writes.

use super::*;
use crate::routes::refs::{ObjectRef, RouteFlags};
use crate::routes::{Listing, LiveRoutes, RoutesPlan, plan_routes, scope_identifier};
use appupdate_model::endpoints_file;
use appupdate_model::plan::{Action, AuthProvider, RouteStyle, write_order};
use pretty_assertions::assert_eq;

const FILE: &str = "endpoints:
  - path: /health
  - path: /protected/admin
    scopes: [user, admin]
";
/// The HTTPRoute (and policy) of the group [admin, user].
const ADMIN: &str = "web-4f515e078b8f8861";
const PUBLIC: &str = "web-e3b0c44298fc1c14";

fn flags(provider: Option<AuthProvider>) -> RouteFlags {
    RouteFlags {
        style: Some(RouteStyle::Gateway),
        auth_provider: provider,
        gateway: Some(ObjectRef::parse("gateways/public").unwrap()),
        auth_service: Some(ServiceRef::parse("auth/oauth:8080").unwrap()),
        ..RouteFlags::default()
    }
}

fn eg() -> RouteFlags {
    flags(Some(AuthProvider::EnvoyGateway))
}

struct Live {
    httproutes: Vec<Value>,
    policies: Listing,
}

impl Live {
    fn empty() -> Live {
        Live {
            httproutes: Vec::new(),
            policies: Listing::Items(Vec::new()),
        }
    }
}

fn run(
    text: &str,
    flags: &RouteFlags,
    live: &Live,
) -> Result<(Vec<ObjectChange>, RoutesPlan), PlanError> {
    let file = endpoints_file::parse(text, "e.yaml").unwrap();
    let svc = json!({"spec": {"ports": [{"name": "http", "port": 80}]}});
    let httproutes = Listing::Items(live.httproutes.clone());
    let routes = LiveRoutes {
        service: &svc,
        ingresses: &[],
        httproutes: &httproutes,
        security_policies: &live.policies,
        ingress_classes: None,
        gateway_support: None,
    };
    let planned = plan_routes("web", &file, flags, &routes)?;
    let changes = planned
        .updaters
        .iter()
        .map(|(u, at)| u.plan("shop", at.and_then(|at| routes.get(at))))
        .collect::<Result<_, _>>()?;
    Ok((changes, planned.summary))
}

/// What a server stores for the creates of `changes`.
fn stored(changes: &[ObjectChange], kind: Kind) -> Vec<Value> {
    changes
        .iter()
        .filter(|c| c.kind == kind)
        .map(|c| {
            let Some(Write::Create { body }) = &c.write else {
                panic!("not a create: {c:?}")
            };
            let mut body = Value::clone(body);
            body["metadata"]["uid"] = json!(format!("uid-{}", c.name));
            body["metadata"]["resourceVersion"] = json!("7");
            body
        })
        .collect()
}

/// A cluster that holds what a first exposure of `FILE` with `flags` created.
fn converged(flags: &RouteFlags) -> Live {
    let (changes, _) = run(FILE, flags, &Live::empty()).unwrap();
    Live {
        httproutes: stored(&changes, Kind::HttpRoute),
        policies: Listing::Items(stored(&changes, Kind::SecurityPolicy)),
    }
}

fn find<'a>(changes: &'a [ObjectChange], kind: Kind, name: &str) -> &'a ObjectChange {
    changes
        .iter()
        .find(|c| c.kind == kind && c.name == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {changes:?}"))
}

fn filter_types(route: &Value) -> Vec<String> {
    route["spec"]["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["filters"].as_array().into_iter().flatten())
        .map(|f| f["type"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_scoped_group_gets_a_policy_that_fails_closed_and_its_route_no_filter() {
    let (changes, summary) = run(FILE, &eg(), &Live::empty()).unwrap();
    let names: Vec<(Kind, &str, Action)> = changes
        .iter()
        .map(|c| (c.kind, c.name.as_str(), c.action()))
        .collect();
    assert_eq!(
        names,
        [
            (Kind::HttpRoute, ADMIN, Action::Create),
            (Kind::HttpRoute, PUBLIC, Action::Create),
            (Kind::SecurityPolicy, ADMIN, Action::Create),
        ]
    );
    let Some(Write::Create { body }) = &find(&changes, Kind::SecurityPolicy, ADMIN).write else {
        panic!("a create")
    };
    assert_eq!(
        **body,
        json!({
            "apiVersion": "gateway.envoyproxy.io/v1alpha1",
            "kind": "SecurityPolicy",
            "metadata": {
                "name": ADMIN,
                "namespace": "shop",
                "labels": {"app": "web", "identifier": "4f515e078b8f8861"},
            },
            "spec": {
                "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": ADMIN}],
                "extAuth": {
                    "failOpen": false,
                    "http": {
                        "backendRefs": [{"group": "", "kind": "Service", "name": "oauth", "namespace": "auth", "port": 8080, "weight": 1}],
                        "path": "/scopes/YWRtaW4gdXNlcg",
                        "headersToBackend": ["User-Id", "User-Scopes"],
                    },
                },
            },
        })
    );
    for route in stored(&changes, Kind::HttpRoute) {
        assert_eq!(filter_types(&route), ["URLRewrite"], "{route}");
    }
    assert_eq!(
        summary.header.attachment.auth_provider,
        Some(AuthProvider::EnvoyGateway)
    );
    // The policy is written in a round before its route; the public route has no guard.
    let order = write_order(&changes);
    assert_eq!(order.rounds, [Some(1), Some(0), Some(0)]);
}

#[test]
fn with_the_filter_provider_the_routes_carry_the_filter_and_get_no_policy() {
    let (changes, summary) = run(FILE, &flags(None), &Live::empty()).unwrap();
    assert!(changes.iter().all(|c| c.kind == Kind::HttpRoute));
    let admin = stored(&changes, Kind::HttpRoute)
        .into_iter()
        .find(|r| r["metadata"]["name"] == ADMIN)
        .unwrap();
    assert_eq!(filter_types(&admin), ["ExternalAuth", "URLRewrite"]);
    assert_eq!(
        summary.header.attachment.auth_provider,
        Some(AuthProvider::Filter)
    );
}

#[test]
fn a_converged_cluster_plans_nothing_and_the_provider_is_read_from_it() {
    let live = converged(&eg());
    for f in [eg(), RouteFlags::default()] {
        let (changes, summary) = run(FILE, &f, &live).unwrap();
        for c in &changes {
            assert_eq!(c.action(), Action::Unchanged, "{c:?}");
        }
        assert_eq!(changes.len(), 3);
        assert_eq!(
            summary.header.attachment.auth_provider,
            Some(AuthProvider::EnvoyGateway)
        );
        assert_eq!(
            summary.header.attachment.auth_service.as_deref(),
            Some("auth/oauth:8080")
        );
        assert!(summary.notes.is_empty(), "{:?}", summary.notes);
    }
}

#[test]
fn a_live_policy_is_updated_in_place_and_keeps_what_others_added() {
    let mut live = converged(&eg());
    let Listing::Items(policies) = &mut live.policies else {
        unreachable!()
    };
    policies[0]["spec"]["extAuth"]["http"]["backendRefs"][0]["name"] = json!("old-auth");
    policies[0]["spec"]["extAuth"]["failOpen"] = json!(true);
    policies[0]["spec"]["jwt"] = json!({"providers": [{"name": "corp"}]});
    policies[0]["metadata"]["labels"]["team"] = json!("payments");
    let (changes, _) = run(FILE, &eg(), &live).unwrap();
    let c = find(&changes, Kind::SecurityPolicy, ADMIN);
    assert_eq!(c.action(), Action::Update);
    let paths: Vec<&str> = c.fields.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        ["spec.extAuth.failOpen", "spec.extAuth.http.backendRefs"]
    );
    let Some(Write::Patch {
        base,
        patch_type,
        body,
    }) = &c.write
    else {
        panic!("a patch: {c:?}")
    };
    assert_eq!(
        (base.resource_version(), base.uid()),
        ("7", "uid-web-4f515e078b8f8861")
    );
    assert_eq!(*patch_type, PatchType::Merge);
    assert_eq!(
        **body,
        json!({"spec": {"extAuth": {
            "failOpen": false,
            "http": {"backendRefs": [{"group": "", "kind": "Service", "name": "oauth", "namespace": "auth", "port": 8080, "weight": 1}]},
        }}})
    );
    let after = c.after.as_ref().unwrap().get();
    assert_eq!(after["spec"]["extAuth"]["failOpen"], json!(false));
    assert!(
        after["spec"].get("jwt").is_none(),
        "only owned parts are shown"
    );
    // Nothing else is planned: the routes are as they should be.
    assert_eq!(
        changes.iter().filter(|c| c.is_change()).count(),
        1,
        "{changes:?}"
    );
}

#[test]
fn a_policy_under_the_name_that_is_not_this_groups_is_left_alone() {
    let mut live = converged(&eg());
    let Listing::Items(policies) = &mut live.policies else {
        unreachable!()
    };
    policies[0]["metadata"]["labels"]["identifier"] = json!("0000000000000000");
    let err = run(FILE, &eg(), &live).unwrap_err().to_string();
    assert!(
        err.starts_with(
            "securitypolicy.gateway.envoyproxy.io/web-4f515e078b8f8861: exists but is not the managed SecurityPolicy of this scope group"
        ),
        "{err}"
    );
}

#[test]
fn moving_to_the_filter_deletes_each_policy_after_its_route_has_the_filter_back() {
    let live = converged(&eg());
    let (changes, summary) = run(FILE, &flags(Some(AuthProvider::Filter)), &live).unwrap();
    let route = find(&changes, Kind::HttpRoute, ADMIN);
    assert_eq!(route.action(), Action::Update);
    let policy = find(&changes, Kind::SecurityPolicy, ADMIN);
    assert_eq!(policy.action(), Action::Delete);
    let Some(Write::Delete { base }) = &policy.write else {
        panic!("a delete")
    };
    assert_eq!(base.uid(), "uid-web-4f515e078b8f8861");
    assert_eq!(policy.route, None);
    let order = write_order(&changes);
    let round = |c: &ObjectChange| {
        let i = changes.iter().position(|x| std::ptr::eq(x, c)).unwrap();
        order.rounds[i]
    };
    assert_eq!((round(route), round(policy)), (Some(0), Some(1)));
    assert_eq!(
        summary.notes,
        [
            "Moving the scope checks of web's HTTPRoutes from Envoy Gateway SecurityPolicies to the ExternalAuth filter: each HTTPRoute gets the filter before its policy is deleted."
        ]
    );
    assert_eq!(
        summary.header.attachment_before.auth_provider,
        Some(AuthProvider::EnvoyGateway)
    );
}

#[test]
fn moving_to_envoy_gateway_creates_each_policy_before_its_route_drops_the_filter() {
    let live = converged(&flags(None));
    let (changes, summary) = run(FILE, &eg(), &live).unwrap();
    let route = find(&changes, Kind::HttpRoute, ADMIN);
    let policy = find(&changes, Kind::SecurityPolicy, ADMIN);
    assert_eq!(
        (route.action(), policy.action()),
        (Action::Update, Action::Create)
    );
    let order = write_order(&changes);
    let i = changes.iter().position(|c| std::ptr::eq(c, route)).unwrap();
    let j = changes
        .iter()
        .position(|c| std::ptr::eq(c, policy))
        .unwrap();
    assert_eq!((order.rounds[j], order.rounds[i]), (Some(0), Some(1)));
    assert!(summary.notes[0].starts_with("Moving the scope checks of web's HTTPRoutes from the ExternalAuth filter to Envoy Gateway SecurityPolicies"));
    // Without --auth-service the auth Service is taken from the live filters.
    let mut no_service = eg();
    no_service.auth_service = None;
    let (again, _) = run(FILE, &no_service, &live).unwrap();
    assert_eq!(again, changes);
}

#[test]
fn leaving_the_gateway_style_removes_the_policies_after_their_routes() {
    let live = converged(&eg());
    let mut to_ingress = RouteFlags {
        style: Some(RouteStyle::NginxAuth),
        ..RouteFlags::default()
    };
    to_ingress.auth_url = Some(super::super::refs::AuthUrl::parse("http://auth/verify").unwrap());
    to_ingress.ingress_class = Some("nginx".into());
    let (changes, _) = run(FILE, &to_ingress, &live).unwrap();
    let order = write_order(&changes);
    let round = |kind: Kind, action: Action| -> Vec<Option<usize>> {
        changes
            .iter()
            .zip(&order.rounds)
            .filter(|(c, _)| c.kind == kind && c.action() == action)
            .map(|(_, r)| *r)
            .collect()
    };
    assert_eq!(round(Kind::Ingress, Action::Create), [Some(0), Some(0)]);
    assert_eq!(round(Kind::HttpRoute, Action::Delete), [Some(1), Some(1)]);
    assert_eq!(round(Kind::SecurityPolicy, Action::Delete), [Some(2)]);
}

#[test]
fn a_route_removed_with_its_policy_says_the_scopes_the_policy_checked() {
    // Without this the record of the run would list the scoped paths as public, and an undo
    // would publish them without a check.
    let live = converged(&eg());
    let (changes, _) = run("endpoints:\n  - path: /health\n", &eg(), &live).unwrap();
    let route = find(&changes, Kind::HttpRoute, ADMIN);
    assert_eq!(route.action(), Action::Delete);
    let info = route.route.as_ref().unwrap();
    assert_eq!(info.scopes, ["admin", "user"]);
    assert_eq!(info.paths_before, ["/protected/admin"]);
    // Leaving the gateway style too.
    let mut to_ingress = RouteFlags {
        style: Some(RouteStyle::NginxSnippet),
        ..RouteFlags::default()
    };
    to_ingress.ingress_class = Some("nginx".into());
    let (changes, _) = run(FILE, &to_ingress, &live).unwrap();
    let info = find(&changes, Kind::HttpRoute, ADMIN)
        .route
        .clone()
        .unwrap();
    assert_eq!(info.scopes, ["admin", "user"]);
    // A policy's scopes count only for the route of their identifier.
    let removal = super::super::gateway::HttpRouteRemoval {
        app: "web".into(),
        name: ADMIN.into(),
        scopes: Some(vec!["other".into()]),
    };
    let c = removal.plan("shop", Some(&live.httproutes[0])).unwrap();
    assert_eq!(c.route.unwrap().scopes, Vec::<String>::new());
    assert_eq!(removal.check_saved("web"), Ok(()));
    let bad = super::super::gateway::HttpRouteRemoval {
        scopes: Some(vec!["a;b".into()]),
        ..removal
    };
    assert!(bad.check_saved("web").is_err());
}

#[test]
fn a_deleted_policy_is_listed_after_its_route_and_a_new_one_before() {
    use crate::updaters::{Plan, Planned};
    let plan_of = |live: &Live, text: &str| {
        let file = endpoints_file::parse(text, "e.yaml").unwrap();
        let svc = json!({"spec": {"ports": [{"port": 80}]}});
        let httproutes = Listing::Items(live.httproutes.clone());
        let routes = LiveRoutes {
            service: &svc,
            ingresses: &[],
            httproutes: &httproutes,
            security_policies: &live.policies,
            ingress_classes: None,
            gateway_support: None,
        };
        let planned = plan_routes("web", &file, &eg(), &routes).unwrap();
        let objects = planned
            .updaters
            .into_iter()
            .map(|(updater, at)| {
                let change = updater
                    .plan("shop", at.and_then(|at| routes.get(at)))
                    .unwrap();
                Planned::new(updater, change.into())
            })
            .collect();
        let plan = Plan::new("web".into(), "shop".into(), "c".into(), objects);
        plan.changes()
            .filter(|c| c.is_change())
            .map(|c| format!("{} {} {}", c.action(), c.kind, c.name))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        plan_of(&Live::empty(), FILE),
        [
            "create SecurityPolicy web-4f515e078b8f8861",
            "create HTTPRoute web-4f515e078b8f8861",
            "create HTTPRoute web-e3b0c44298fc1c14"
        ]
    );
    assert_eq!(
        plan_of(&converged(&eg()), "endpoints:\n  - path: /health\n"),
        [
            "delete HTTPRoute web-4f515e078b8f8861",
            "delete SecurityPolicy web-4f515e078b8f8861"
        ]
    );
}

#[test]
fn a_refused_external_auth_filter_points_to_envoy_gateway() {
    let message = r#"HTTPRoute.gateway.networking.k8s.io "web-4f515e078b8f8861" is invalid: [spec.rules[0].filters[0].type: Unsupported value: "ExternalAuth": supported values: "RequestHeaderModifier", "URLRewrite"]"#;
    let hint = crate::routes::refusal_hint(RouteStyle::Gateway, message).unwrap();
    assert!(hint.contains("--auth-provider envoy-gateway"), "{hint}");
    assert_eq!(
        crate::routes::refusal_hint(RouteStyle::Gateway, "invalid"),
        None
    );
}

#[test]
fn the_provider_is_refused_where_policies_cannot_be_seen() {
    let mut live = Live::empty();
    live.policies = Listing::NotServed;
    let err = run(FILE, &eg(), &live).unwrap_err().to_string();
    assert_eq!(
        err,
        "routes of web: the cluster does not serve gateway.envoyproxy.io/v1alpha1 SecurityPolicies, which the envoy-gateway auth provider writes to guard the paths with scopes; install Envoy Gateway (its CRDs), or choose --auth-provider filter"
    );
    live.policies = Listing::Forbidden;
    let err = run(FILE, &eg(), &live).unwrap_err().to_string();
    assert!(
        err.contains("listing SecurityPolicies is forbidden"),
        "{err}"
    );
    // Without the flag, scoped routes without the filter cannot be told apart.
    let mut unreadable = converged(&eg());
    unreadable.policies = Listing::Forbidden;
    let err = run(FILE, &RouteFlags::default(), &unreadable)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("name the provider with --auth-provider filter|envoy-gateway"),
        "{err}"
    );
    // With the filter provider, the policies are only left out, and said so.
    let (_, summary) = run(FILE, &flags(None), &live).unwrap();
    assert_eq!(
        summary.notes,
        [
            "SecurityPolicies could not be listed (forbidden), so managed SecurityPolicies of web, if any, are left out of this plan."
        ]
    );
}

#[test]
fn live_routes_checked_both_ways_need_the_flag() {
    let mut live = converged(&eg());
    let other = "endpoints:\n  - path: /u\n    scopes: [user]\n";
    let (more, _) = run(other, &flags(None), &Live::empty()).unwrap();
    live.httproutes.extend(stored(&more, Kind::HttpRoute));
    let err = run(FILE, &RouteFlags::default(), &live)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "routes of web: the managed HTTPRoutes check scopes in two ways (filter: web-04f8996da763b7a9; envoy-gateway: web-4f515e078b8f8861); choose one with --auth-provider filter|envoy-gateway"
    );
    assert!(run(FILE, &eg(), &live).is_ok());
}

#[test]
fn the_flag_belongs_to_the_gateway_style() {
    let f = RouteFlags {
        auth_provider: Some(AuthProvider::EnvoyGateway),
        ..RouteFlags::default()
    };
    assert_eq!(
        f.foreign_to(RouteStyle::NginxAuth),
        [("--auth-provider", "gateway")]
    );
    assert!(f.foreign_to(RouteStyle::Gateway).is_empty());
}

#[test]
fn a_removed_policy_is_deleted_conditionally_and_only_if_managed() {
    let live = converged(&eg());
    let policy = live.policies.items()[0].clone();
    let removal = SecurityPolicyRemoval {
        app: "web".into(),
        name: ADMIN.into(),
    };
    let c = removal.plan("shop", Some(&policy)).unwrap();
    assert_eq!(c.action(), Action::Delete);
    assert_eq!(c.fields.len(), 1);
    assert_eq!(c.fields[0].path, ".");
    assert_eq!(
        c.before.as_ref().unwrap().get()["spec"]["extAuth"]["failOpen"],
        json!(false)
    );
    assert_eq!(
        removal.plan("shop", None).unwrap().action(),
        Action::Unchanged
    );
    let mut foreign = policy;
    foreign["metadata"]["labels"] = json!({"app": "web"});
    let err = removal
        .plan("shop", Some(&foreign))
        .unwrap_err()
        .to_string();
    assert!(err.contains("is not a managed route of web"), "{err}");
}

fn saved_updater() -> SecurityPolicyUpdater {
    let file = endpoints_file::parse(FILE, "e.yaml").unwrap();
    let svc = json!({"spec": {"ports": [{"port": 80}]}});
    let (httproutes, policies) = (Listing::default(), Listing::default());
    let routes = LiveRoutes {
        service: &svc,
        ingresses: &[],
        httproutes: &httproutes,
        security_policies: &policies,
        ingress_classes: None,
        gateway_support: None,
    };
    let planned = plan_routes("web", &file, &eg(), &routes).unwrap();
    // As a saved plan holds it, and reads it back.
    let saved = planned
        .updaters
        .iter()
        .find(|(u, _)| matches!(u, Updater::SecurityPolicy(_)))
        .map(|(u, _)| serde_json::to_value(u).unwrap())
        .unwrap();
    match Updater::from_saved(saved).unwrap() {
        Updater::SecurityPolicy(u) => u,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_saved_policy_is_accepted_only_as_the_provider_makes_it() {
    let u = saved_updater();
    assert_eq!(u.check_saved("web", true), Ok(()));
    assert!(
        u.check_saved("shop", true)
            .unwrap_err()
            .to_string()
            .contains("\"web\"")
    );
    type Edit = fn(&mut SecurityPolicyUpdater);
    let edits: [(&str, Edit); 6] = [
        ("targets", |u| u.desired.route = "web-other".into()),
        ("public", |u| {
            u.desired.scopes.clear();
            u.desired.identifier = scope_identifier(&[]);
        }),
        ("identifier", |u| u.desired.identifier = "0000".into()),
        ("auth Service", |u| {
            u.desired.auth_service = "auth/x:0".into()
        }),
        ("valid object name", |u| {
            u.name = "Web;x".into();
            u.desired.route = "Web;x".into();
        }),
        ("\"", |u| {
            u.desired.scopes = vec!["ad\"min".into(), "user".into()]
        }),
    ];
    for (why, edit) in edits {
        let mut bad = u.clone();
        edit(&mut bad);
        let err = bad.check_saved("web", true).unwrap_err().to_string();
        assert!(err.contains(why), "{why}: {err}");
    }
    // Named after a route that is not its group's: only the update of a live one of that name
    // (a route created under another name keeps it) may take it.
    let mut other = u.clone();
    other.name = "legacy".into();
    other.desired.route = "legacy".into();
    let err = other.check_saved("web", true).unwrap_err().to_string();
    assert!(
        err.contains("a name no route style gives a new one"),
        "{err}"
    );
    assert_eq!(other.check_saved("web", false), Ok(()));
    let removal = SecurityPolicyRemoval {
        app: "web".into(),
        name: ADMIN.into(),
    };
    assert_eq!(removal.check_saved("web"), Ok(()));
    assert!(removal.check_saved("other").is_err());
}
