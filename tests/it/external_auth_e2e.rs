//! Scoped routes in the `gateway` style fail closed where the cluster cannot enforce their
//! ExternalAuth filter, end to end against the sandbox: a cluster with the Gateway API's
//! standard channel refuses the filter in the server-side dry run (exit 3, nothing written),
//! a GatewayClass that publishes its supported features without ExternalAuth refuses the plan
//! before any write (exit 3), and a class that supports it, publishes nothing, or cannot be
//! read lets the routes be written — the last two with one note in the plan. Public routes
//! need no ExternalAuth and are written on either channel, without reading any Gateway. The
//! standard channel is checked in both releases the sandbox serves: v1.4.1 (what v1.28 can
//! install) and v1.6.1 (what current clusters install; its exchanges recorded on v1.33.3).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use sandbox_apiserver::{Fault, GatewayApiChannel, GatewayApiVersion, SandboxOptions};
use serde_json::{Value, json};

const PUBLIC: &str = "web-e3b0c44298fc1c14"; // scopes []
const USER: &str = "web-04f8996da763b7a9"; // scopes [user]

const SCOPED: &str = "endpoints:
  - path: /health
  - path: /unprotected
  - path: /protected/user
    scopes: [user]
";

const PUBLIC_ONLY: &str = "endpoints:
  - path: /health
  - path: /unprotected
";

const GATEWAY: [&str; 6] = [
    "--routes",
    "gateway",
    "--gateway",
    "gateways/public",
    "--auth-service",
    "auth/oauth:8080",
];

const CLASS: &str = "example";
const CLASSES: &str = "/apis/gateway.networking.k8s.io/v1/gatewayclasses";
const GATEWAYS: &str = "/apis/gateway.networking.k8s.io/v1/namespaces/gateways/gateways";

/// The demo application without its managed Ingresses, on a cluster with `channel`'s Gateway
/// API v1.4.1 CRDs.
fn cluster(channel: GatewayApiChannel) -> Env {
    cluster_of(GatewayApiVersion::V1_4_1, channel)
}

/// The same with the CRDs of the release `version`.
fn cluster_of(version: GatewayApiVersion, channel: GatewayApiChannel) -> Env {
    let env = Env::with_options(SandboxOptions {
        gateway_api_channel: channel,
        gateway_api_version: version,
        ..Default::default()
    });
    for name in [PUBLIC, USER] {
        env.sb.delete(&ingress_path(name)).unwrap();
    }
    env
}

/// The Gateway `gateways/public` of the GatewayClass `example`, whose controller publishes
/// `features` as `status.supportedFeatures` (`None`: publishes nothing).
fn gateway(env: &Env, features: Option<Value>) {
    env.sb
        .create(
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gateways"}}),
        )
        .unwrap();
    env.sb
        .create(
            CLASSES,
            json!({
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "GatewayClass",
                "metadata": {"name": CLASS},
                "spec": {"controllerName": "example.com/gateway-controller"},
            }),
        )
        .unwrap();
    if let Some(features) = features {
        env.sb
            .update_status(&format!("{CLASSES}/{CLASS}"), |c| {
                c["status"]["supportedFeatures"] = features;
            })
            .unwrap();
    }
    env.sb
        .create(
            GATEWAYS,
            json!({
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway",
                "metadata": {"name": "public", "namespace": "gateways"},
                "spec": {
                    "gatewayClassName": CLASS,
                    "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}],
                },
            }),
        )
        .unwrap();
}

fn features(names: &[&str]) -> Value {
    json!(names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>())
}

fn run(env: &Env, endpoints: &str, extra: &[&str]) -> std::process::Output {
    let file = env.write_file("endpoints.yaml", endpoints);
    let mut args = vec!["web", "--endpoints", file.to_str().unwrap()];
    args.extend_from_slice(&GATEWAY);
    args.extend_from_slice(extra);
    env.run(&args)
}

fn httproutes(env: &Env) -> Vec<String> {
    env.sb
        .list(&format!(
            "/apis/gateway.networking.k8s.io/v1/namespaces/{NS}/httproutes"
        ))
        .iter()
        .map(|r| r["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The GETs of Gateways and GatewayClasses the run sent, as `GET <path>`.
fn capability_reads(env: &Env) -> Vec<String> {
    env.sb
        .requests()
        .iter()
        .filter(|r| r.path.contains("/gateways/") || r.path.contains("/gatewayclasses"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

const NOTE_UNPUBLISHED: &str = "Could not verify that the Gateway supports the ExternalAuth filter (HTTPRouteExtAuth) the scoped routes use: the GatewayClass example publishes no supportedFeatures; make sure its controller implements ExternalAuth.";

#[test]
fn the_standard_channel_refuses_scoped_routes_in_the_dry_run_and_nothing_is_written() {
    standard_channel_refuses_scoped_routes(GatewayApiVersion::V1_4_1);
}

#[test]
fn the_v1_6_1_standard_channel_refuses_scoped_routes_in_the_dry_run_and_nothing_is_written() {
    standard_channel_refuses_scoped_routes(GatewayApiVersion::V1_6_1);
}

fn standard_channel_refuses_scoped_routes(version: GatewayApiVersion) {
    let env = cluster_of(version, GatewayApiChannel::Standard);
    gateway(&env, None);
    let o = run(&env, SCOPED, &["--yes"]);
    assert_code(&o, 3);
    // The plan was shown before the dry run, with the note that the class publishes nothing.
    let out = stdout(&o);
    assert!(
        out.contains("Plan: 2 to create, 0 to update, 0 to delete."),
        "{out}"
    );
    assert!(out.contains(NOTE_UNPUBLISHED), "{out}");
    assert_eq!(
        stderr(&o),
        "Warning: unknown field \"spec.rules[0].filters[0].externalAuth\"\n\
         httproute.gateway.networking.k8s.io/web-04f8996da763b7a9 NOT created: the HTTPRoutes of context \"sandbox\" have no ExternalAuth filter (the server's dry run refused it: Unsupported value \"ExternalAuth\" at spec.rules[0].filters[0].type): it is only in the Gateway API experimental channel; publish the scoped paths with --auth-provider envoy-gateway (Envoy Gateway's SecurityPolicy), through a Gateway API implementation whose experimental-channel CRDs are installed, or with --routes nginx-auth\n\
         httproute.gateway.networking.k8s.io/web-e3b0c44298fc1c14 NOT created: not attempted (public, 2 paths)\n\
         Nothing was changed.\n"
    );
    assert!(env.writes().is_empty(), "{:?}", env.writes());
    assert!(httproutes(&env).is_empty());
    // The dry run of the scoped route was the request that said so.
    let refused: Vec<_> = env
        .sb
        .requests()
        .into_iter()
        .filter(|r| r.dry_run && r.status == 422)
        .map(|r| r.path)
        .collect();
    assert_eq!(
        refused,
        [format!(
            "/apis/gateway.networking.k8s.io/v1/namespaces/{NS}/httproutes"
        )]
    );
}

#[test]
fn the_standard_channel_publishes_public_routes_without_reading_any_gateway() {
    standard_channel_publishes_public_routes(GatewayApiVersion::V1_4_1);
}

#[test]
fn the_v1_6_1_standard_channel_publishes_public_routes_without_reading_any_gateway() {
    standard_channel_publishes_public_routes(GatewayApiVersion::V1_6_1);
}

fn standard_channel_publishes_public_routes(version: GatewayApiVersion) {
    let env = cluster_of(version, GatewayApiChannel::Standard);
    gateway(&env, Some(features(&["Gateway", "HTTPRoute"])));
    let o = run(&env, PUBLIC_ONLY, &["--yes"]);
    assert_code(&o, 0);
    assert_eq!(stderr(&o), "");
    assert!(
        stdout(&o).contains("httproute.gateway.networking.k8s.io/web-e3b0c44298fc1c14 created"),
        "{}",
        stdout(&o)
    );
    assert_eq!(httproutes(&env), [PUBLIC]);
    // No scoped group, no ExternalAuth: nothing to check, even though the class would refuse.
    assert_eq!(capability_reads(&env), Vec::<String>::new());
}

#[test]
fn a_class_that_publishes_its_features_without_external_auth_refuses_the_plan() {
    let env = cluster(GatewayApiChannel::Experimental);
    gateway(
        &env,
        Some(features(&["Gateway", "HTTPRoute", "HTTPRouteExtAuthGRPC"])),
    );
    let o = run(&env, SCOPED, &["--yes"]);
    assert_code(&o, 3);
    assert_eq!(stdout(&o), "");
    assert_eq!(
        stderr(&o),
        "error: routes of web: the GatewayClass example of the Gateway gateways/public does not support the ExternalAuth filter the scoped paths need (its status.supportedFeatures has no HTTPRouteExtAuth), so their routes would not be protected; publish the scoped paths with --auth-provider envoy-gateway (Envoy Gateway's SecurityPolicy), through a Gateway API implementation whose experimental-channel CRDs are installed, or with --routes nginx-auth; nothing was changed\n"
    );
    assert!(env.writes().is_empty(), "{:?}", env.writes());
    assert!(
        !env.sb.requests().iter().any(|r| r.dry_run),
        "refused before the dry run"
    );
    assert!(httproutes(&env).is_empty());
}

#[test]
fn a_class_that_supports_external_auth_gets_its_routes_after_two_more_reads() {
    let env = cluster(GatewayApiChannel::Experimental);
    gateway(
        &env,
        Some(features(&["Gateway", "HTTPRoute", "HTTPRouteExtAuth"])),
    );
    let o = run(&env, SCOPED, &["--yes"]);
    assert_code(&o, 0);
    assert_eq!(stderr(&o), "");
    assert!(!stdout(&o).contains("Could not verify"), "{}", stdout(&o));
    assert_eq!(httproutes(&env), [USER, PUBLIC]);
    // The Gateway named by --gateway in the first round, its class after it.
    assert_eq!(
        capability_reads(&env),
        [
            format!("GET {GATEWAYS}/public"),
            format!("GET {CLASSES}/{CLASS}")
        ]
    );
}

#[test]
fn without_gateway_the_routes_name_the_gateway_to_check() {
    let env = cluster(GatewayApiChannel::Experimental);
    gateway(&env, Some(features(&["HTTPRoute", "HTTPRouteExtAuthHTTP"])));
    // A first exposure names the Gateway; the next run takes it from the live routes.
    assert_code(&run(&env, PUBLIC_ONLY, &["--yes"]), 0);
    env.sb.clear_requests();
    let file = env.write_file("endpoints.yaml", SCOPED);
    let o = env.run(&[
        "web",
        "--endpoints",
        file.to_str().unwrap(),
        "--auth-service",
        "auth/oauth:8080",
        "--yes",
    ]);
    assert_code(&o, 0);
    assert_eq!(httproutes(&env), [USER, PUBLIC]);
    assert_eq!(
        capability_reads(&env),
        [
            format!("GET {GATEWAYS}/public"),
            format!("GET {CLASSES}/{CLASS}")
        ]
    );
    // A class without the feature refuses the same run.
    env.sb
        .update_status(&format!("{CLASSES}/{CLASS}"), |c| {
            c["status"]["supportedFeatures"] = features(&["HTTPRoute"]);
        })
        .unwrap();
    let o = env.run(&[
        "web",
        "--endpoints",
        env.write_file(
            "more.yaml",
            &format!("{SCOPED}  - path: /protected/more\n    scopes: [user]\n"),
        )
        .to_str()
        .unwrap(),
        "--yes",
    ]);
    assert_code(&o, 3);
    assert!(
        stderr(&o).starts_with("error: routes of web: the GatewayClass example of the Gateway gateways/public does not support the ExternalAuth filter"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_class_that_publishes_no_features_gets_its_routes_with_one_note() {
    let env = cluster(GatewayApiChannel::Experimental);
    gateway(&env, Some(json!([])));
    let o = run(&env, SCOPED, &["--yes"]);
    assert_code(&o, 0);
    let out = stdout(&o);
    assert_eq!(out.matches("Could not verify").count(), 1, "{out}");
    assert!(out.contains(NOTE_UNPUBLISHED), "{out}");
    assert_eq!(stderr(&o), "");
    assert_eq!(httproutes(&env), [USER, PUBLIC]);
}

#[test]
fn a_class_the_user_may_not_read_gets_its_routes_with_one_note() {
    let env = cluster(GatewayApiChannel::Experimental);
    gateway(&env, Some(features(&["HTTPRoute"])));
    // A deployer with rights in its namespace only may not read cluster-scoped GatewayClasses.
    // The sandbox's identities cannot write routes without reading classes, so the class's GET
    // is answered as RBAC would (403 Forbidden).
    env.sb.inject(Fault::Status {
        method: Some("GET".into()),
        path_prefix: CLASSES.into(),
        status: 403,
        count: 1,
    });
    let o = run(&env, SCOPED, &["--yes"]);
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains("Could not verify that the Gateway supports the ExternalAuth filter (HTTPRouteExtAuth) the scoped routes use: the GatewayClass example may not be read (forbidden); make sure its controller implements ExternalAuth."),
        "{out}"
    );
    assert_eq!(out.matches("Could not verify").count(), 1, "{out}");
    assert_eq!(httproutes(&env), [USER, PUBLIC]);
}

#[test]
fn a_gateway_that_does_not_exist_is_noted_and_a_dry_run_writes_nothing() {
    let env = cluster(GatewayApiChannel::Experimental);
    let o = run(&env, SCOPED, &["--dry-run"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("Could not verify that the Gateway supports the ExternalAuth filter (HTTPRouteExtAuth) the scoped routes use: the Gateway gateways/public does not exist;"),
        "{}",
        stdout(&o)
    );
    assert_eq!(capability_reads(&env), [format!("GET {GATEWAYS}/public")]);
    assert!(env.writes().is_empty());
}
