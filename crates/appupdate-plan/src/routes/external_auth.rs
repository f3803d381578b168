//! Whether the cluster can enforce the `gateway` style's scoped routes: their `ExternalAuth`
//! HTTPRoute filter (GEP-1494) exists only in the Gateway API's **experimental** channel. A
//! cluster that installed the standard channel has no such filter, and a route with one must
//! never be written there as if it protected anything. Pure: the requests are `live_state`'s
//! and `apply`'s; this module reads their answers.
//!
//! # Before the plan: the GatewayClass's supported features
//!
//! When the run publishes scoped groups in the `gateway` style, the Gateways the routes attach
//! to (`--gateway`, else every `parentRefs` entry of the live managed HTTPRoutes) and their
//! GatewayClasses (`spec.gatewayClassName`) are read. A class that publishes
//! `status.supportedFeatures` (Gateway API v1.1 and later: a list of `{name: …}`; earlier
//! experimental releases: a list of strings — both are read) without ExternalAuth refuses the
//! plan (exit 3) before anything is written, naming the class and the feature. ExternalAuth is
//! any of [`FEATURES`]: GEP-1494 names the feature `HTTPRouteExtAuth` (`HTTPRouteExtAuthHTTP`
//! for the HTTP protocol these routes use), and the v1.6 API's documentation
//! `HTTPRouteExternalAuth` (`HTTPRouteExternalAuthHTTP`). When support cannot be verified — the
//! class publishes no features (an empty or absent list), or the Gateway or its class cannot be
//! read (403) or does not exist (404) — the plan says so in one note and the run goes on.
//!
//! # The server-side dry run: the HTTPRoute schema
//!
//! Whatever the class says, the cluster's HTTPRoute CRD decides whether the filter can be
//! stored. The standard channel's filter `type` enum has no `ExternalAuth`: the dry run answers
//! 422 with a `FieldValueNotSupported` cause at `spec.rules[N].filters[M].type`
//! ([`refuses_external_auth`]); a schema without the enum but without the field would store the
//! filter with its `externalAuth` pruned (and an `unknown field` warning), which the object the
//! dry run returns shows ([`dropped_external_auth`]). Either way the route is refused with
//! [`missing_filter`]'s line and the run ends with exit 3, nothing written.

use serde_json::Value;

use super::refs::ObjectRef;
use super::{APP_LABEL, IDENTIFIER_LABEL, label};
use appupdate_model::text::Untrusted;

/// The feature names that say a GatewayClass supports the ExternalAuth filter over HTTP.
pub const FEATURES: [&str; 4] = [
    "HTTPRouteExtAuth",
    "HTTPRouteExtAuthHTTP",
    "HTTPRouteExternalAuth",
    "HTTPRouteExternalAuthHTTP",
];

/// The feature a refusal names.
pub const FEATURE: &str = FEATURES[0];

/// What to do instead, when the cluster cannot enforce ExternalAuth.
pub const WAYS_FORWARD: &str = "publish the scoped paths with --auth-provider envoy-gateway (Envoy Gateway's SecurityPolicy), through a Gateway API implementation whose experimental-channel CRDs are installed, or with --routes nginx-auth";

/// A Gateway the routes attach to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct GatewayKey {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for GatewayKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{}",
            Untrusted(&self.namespace),
            Untrusted(&self.name)
        )
    }
}

impl GatewayKey {
    /// `--gateway [NAMESPACE/]NAME`, in `namespace` when it names none.
    pub fn of_flag(gateway: &ObjectRef, namespace: &str) -> GatewayKey {
        GatewayKey {
            namespace: gateway
                .namespace
                .clone()
                .unwrap_or_else(|| namespace.to_owned()),
            name: gateway.name.clone(),
        }
    }
}

/// What reading one object gave.
#[derive(Clone, Debug, PartialEq)]
pub enum Read {
    Found(Value),
    /// 404.
    NotFound,
    /// 403.
    Forbidden,
}

/// The Gateways the scoped routes attach to and their GatewayClasses, as read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GatewaySupport {
    pub gateways: Vec<(GatewayKey, Read)>,
    pub classes: Vec<(String, Read)>,
}

impl GatewaySupport {
    /// The GatewayClasses the Gateways read name, each once, in order.
    pub fn class_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for (_, read) in &self.gateways {
            if let Read::Found(gw) = read
                && let Some(class) = gateway_class_name(gw)
                && !names.iter().any(|n| n == class)
            {
                names.push(class.to_owned());
            }
        }
        names
    }
}

fn gateway_class_name(gateway: &Value) -> Option<&str> {
    gateway["spec"]["gatewayClassName"]
        .as_str()
        .filter(|c| !c.is_empty())
}

/// The Gateways a run's HTTPRoutes attach to: `--gateway` (in the run's `namespace` when it
/// names none), else every Gateway in the `parentRefs` of the live managed routes (a new route
/// takes one of theirs, a live one keeps its own), each once, sorted.
pub fn attached_gateways(
    flag: Option<&ObjectRef>,
    httproutes: &[Value],
    namespace: &str,
) -> Vec<GatewayKey> {
    if let Some(g) = flag {
        return vec![GatewayKey::of_flag(g, namespace)];
    }
    let mut keys: Vec<GatewayKey> = httproutes
        .iter()
        .filter(|r| label(r, APP_LABEL).is_some() && label(r, IDENTIFIER_LABEL).is_some())
        .flat_map(|r| {
            let route_ns = r["metadata"]["namespace"].as_str().unwrap_or(namespace);
            r["spec"]["parentRefs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| {
                    p["group"].as_str().unwrap_or("gateway.networking.k8s.io")
                        == "gateway.networking.k8s.io"
                        && p["kind"].as_str().unwrap_or("Gateway") == "Gateway"
                })
                .filter_map(move |p| {
                    Some(GatewayKey {
                        namespace: p["namespace"].as_str().unwrap_or(route_ns).to_owned(),
                        name: p["name"].as_str().filter(|n| !n.is_empty())?.to_owned(),
                    })
                })
        })
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// The names in a GatewayClass's `status.supportedFeatures`: `{name: …}` objects (v1.1 and
/// later) or strings (earlier).
pub fn supported_features(class: &Value) -> Vec<&str> {
    class["status"]["supportedFeatures"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().or_else(|| f["name"].as_str()))
        .collect()
}

/// What the Gateways and classes read say about ExternalAuth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every class publishes one of [`FEATURES`].
    Supported,
    /// A class publishes its features, and ExternalAuth is not among them: refused.
    Unsupported { class: String, gateway: GatewayKey },
    /// Support could not be verified, for these reasons: one note.
    Unverified(Vec<String>),
}

/// Decides from what was read (see the module docs): any class that publishes features without
/// ExternalAuth refuses; otherwise anything not verified (a Gateway or class unread, missing or
/// publishing nothing) is noted.
pub fn verdict(support: &GatewaySupport) -> Verdict {
    let mut unverified = Vec::new();
    if support.gateways.is_empty() {
        unverified.push("no Gateway is named to check".to_owned());
    }
    for (key, read) in &support.gateways {
        let gateway = match read {
            Read::Found(g) => g,
            Read::Forbidden => {
                unverified.push(format!("the Gateway {key} may not be read (forbidden)"));
                continue;
            }
            Read::NotFound => {
                unverified.push(format!("the Gateway {key} does not exist"));
                continue;
            }
        };
        let Some(class) = gateway_class_name(gateway) else {
            unverified.push(format!("the Gateway {key} names no GatewayClass"));
            continue;
        };
        let read = support
            .classes
            .iter()
            .find(|(name, _)| name == class)
            .map(|(_, r)| r);
        match read {
            Some(Read::Found(c)) => {
                let features = supported_features(c);
                if features.is_empty() {
                    unverified.push(format!(
                        "the GatewayClass {} publishes no supportedFeatures",
                        Untrusted(class)
                    ));
                } else if !features.iter().any(|f| FEATURES.contains(f)) {
                    return Verdict::Unsupported {
                        class: class.to_owned(),
                        gateway: key.clone(),
                    };
                }
            }
            Some(Read::Forbidden) => unverified.push(format!(
                "the GatewayClass {} may not be read (forbidden)",
                Untrusted(class)
            )),
            Some(Read::NotFound) | None => {
                unverified.push(format!(
                    "the GatewayClass {} does not exist",
                    Untrusted(class)
                ));
            }
        }
    }
    if unverified.is_empty() {
        Verdict::Supported
    } else {
        unverified.dedup();
        Verdict::Unverified(unverified)
    }
}

/// The refusal of a class that lacks the feature (after `routes of <app>: `).
pub fn unsupported_message(class: &str, gateway: &GatewayKey) -> String {
    format!(
        "the GatewayClass {} of the Gateway {gateway} does not support the ExternalAuth filter the scoped paths need (its status.supportedFeatures has no {FEATURE}), so their routes would not be protected; {WAYS_FORWARD}; nothing was changed",
        Untrusted(class)
    )
}

/// The plan's note when support could not be verified.
pub fn unverified_note(reasons: &[String]) -> String {
    format!(
        "Could not verify that the Gateway supports the ExternalAuth filter ({FEATURE}) the scoped routes use: {}; make sure its controller implements ExternalAuth.",
        reasons.join("; ")
    )
}

/// Whether a refused write's causes — `(field, reason, message)` of the 422's
/// `details.causes` — say the cluster's HTTPRoute has no ExternalAuth filter type: an
/// `Unsupported value: "ExternalAuth"` at a filter's `type`. The path of the first such cause.
pub fn refuses_external_auth<'a>(
    causes: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
) -> Option<&'a str> {
    causes.into_iter().find_map(|(field, reason, message)| {
        let at_filter_type = field.starts_with("spec.rules[")
            && field.contains("].filters[")
            && field.ends_with("].type");
        (reason == "FieldValueNotSupported"
            && at_filter_type
            && message.starts_with("Unsupported value: \"ExternalAuth\""))
        .then_some(field)
    })
}

/// Whether an HTTPRoute as the server would store it has an ExternalAuth filter without its
/// `externalAuth` settings: the schema has no such field and pruned it.
pub fn dropped_external_auth(stored: &Value) -> bool {
    stored["spec"]["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["filters"].as_array().into_iter().flatten())
        .any(|f| f["type"] == "ExternalAuth" && !f["externalAuth"].is_object())
}

/// The line of a route the cluster cannot store with its ExternalAuth filter: `how` says what
/// the dry run answered (the field refused, or the settings dropped), `context` is the kubeconfig
/// context.
pub fn missing_filter(context: &str, how: &str) -> String {
    format!(
        "the HTTPRoutes of context {:?} have no ExternalAuth filter ({how}): it is only in the Gateway API experimental channel; {WAYS_FORWARD}",
        Untrusted(context)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class(features: Value) -> Read {
        Read::Found(json!({"metadata": {"name": "eg"}, "status": {"supportedFeatures": features}}))
    }

    fn support(gateway: Read, class: Option<Read>) -> GatewaySupport {
        GatewaySupport {
            gateways: vec![(
                GatewayKey {
                    namespace: "gateways".into(),
                    name: "public".into(),
                },
                gateway,
            )],
            classes: class.map(|c| ("eg".to_owned(), c)).into_iter().collect(),
        }
    }

    fn gateway() -> Read {
        Read::Found(json!({"spec": {"gatewayClassName": "eg"}}))
    }

    #[test]
    fn a_class_publishing_the_feature_in_either_shape_or_name_supports_it() {
        for features in [
            json!([{"name": "HTTPRoute"}, {"name": "HTTPRouteExtAuth"}]),
            json!([{"name": "HTTPRouteExtAuthHTTP"}]),
            json!([{"name": "HTTPRouteExternalAuth"}]),
            json!(["Gateway", "HTTPRouteExternalAuthHTTP"]),
        ] {
            assert_eq!(
                verdict(&support(gateway(), Some(class(features.clone())))),
                Verdict::Supported,
                "{features}"
            );
        }
    }

    #[test]
    fn a_class_publishing_features_without_it_is_refused_by_name() {
        let v = verdict(&support(
            gateway(),
            Some(class(
                json!([{"name": "HTTPRoute"}, {"name": "HTTPRouteExtAuthGRPC"}]),
            )),
        ));
        let Verdict::Unsupported { class, gateway } = v else {
            panic!("{v:?}")
        };
        assert_eq!(
            format!("routes of web: {}", unsupported_message(&class, &gateway)),
            "routes of web: the GatewayClass eg of the Gateway gateways/public does not support the ExternalAuth filter the scoped paths need (its status.supportedFeatures has no HTTPRouteExtAuth), so their routes would not be protected; publish the scoped paths with --auth-provider envoy-gateway (Envoy Gateway's SecurityPolicy), through a Gateway API implementation whose experimental-channel CRDs are installed, or with --routes nginx-auth; nothing was changed"
        );
    }

    #[test]
    fn what_cannot_be_read_or_publishes_nothing_is_unverified_with_its_reason() {
        let cases = [
            (
                support(gateway(), Some(class(json!([])))),
                "the GatewayClass eg publishes no supportedFeatures",
            ),
            (
                support(
                    gateway(),
                    Some(Read::Found(json!({"metadata": {"name": "eg"}}))),
                ),
                "the GatewayClass eg publishes no supportedFeatures",
            ),
            (
                support(gateway(), Some(Read::Forbidden)),
                "the GatewayClass eg may not be read (forbidden)",
            ),
            (
                support(gateway(), Some(Read::NotFound)),
                "the GatewayClass eg does not exist",
            ),
            (
                support(Read::Forbidden, None),
                "the Gateway gateways/public may not be read (forbidden)",
            ),
            (
                support(Read::NotFound, None),
                "the Gateway gateways/public does not exist",
            ),
            (
                support(Read::Found(json!({"spec": {}})), None),
                "the Gateway gateways/public names no GatewayClass",
            ),
        ];
        for (s, why) in cases {
            assert_eq!(
                verdict(&s),
                Verdict::Unverified(vec![why.to_owned()]),
                "{s:?}"
            );
        }
        assert_eq!(
            unverified_note(&["the GatewayClass eg publishes no supportedFeatures".to_owned()]),
            "Could not verify that the Gateway supports the ExternalAuth filter (HTTPRouteExtAuth) the scoped routes use: the GatewayClass eg publishes no supportedFeatures; make sure its controller implements ExternalAuth."
        );
    }

    #[test]
    fn one_class_without_the_feature_refuses_even_when_another_is_unverified() {
        let mut s = support(Read::Forbidden, None);
        s.gateways.push((
            GatewayKey {
                namespace: "shop".into(),
                name: "internal".into(),
            },
            gateway(),
        ));
        s.classes
            .push(("eg".into(), class(json!([{"name": "HTTPRoute"}]))));
        assert!(matches!(verdict(&s), Verdict::Unsupported { .. }));
        assert_eq!(s.class_names(), ["eg"]);
    }

    #[test]
    fn the_gateways_are_the_flag_or_every_parent_of_the_managed_routes() {
        let flag = ObjectRef::parse("public").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            attached_gateways(Some(&flag), &[], "shop"),
            [GatewayKey {
                namespace: "shop".into(),
                name: "public".into()
            }]
        );
        let route = |name: &str, parents: Value| json!({"metadata": {"name": name, "namespace": "shop", "labels": {"app": "web", "identifier": "x"}}, "spec": {"parentRefs": parents}});
        let routes = [
            route(
                "a",
                json!([{"name": "public", "namespace": "gateways"}, {"kind": "Service", "group": "", "name": "mesh"}]),
            ),
            route(
                "b",
                json!([{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "internal"}, {"name": "public", "namespace": "gateways"}]),
            ),
            json!({"metadata": {"name": "unmanaged", "labels": {"app": "web"}}, "spec": {"parentRefs": [{"name": "other"}]}}),
        ];
        assert_eq!(
            attached_gateways(None, &routes, "shop")
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["gateways/public", "shop/internal"]
        );
    }

    mod planning {
        use super::*;
        use crate::routes::refs::{RouteFlags, ServiceRef};
        use crate::routes::{Listing, LiveRoutes, needs_gateway_check, plan_routes};
        use appupdate_model::endpoints_file;
        use appupdate_model::plan::RouteStyle;

        const SCOPED: &str = "endpoints:\n  - path: /a\n  - path: /b\n    scopes: [user]\n";
        const PUBLIC: &str = "endpoints:\n  - path: /a\n";

        fn parse<T>(r: Result<T, String>) -> T {
            r.unwrap_or_else(|e| panic!("{e}"))
        }

        fn flags(style: RouteStyle) -> RouteFlags {
            RouteFlags {
                style: Some(style),
                gateway: (style == RouteStyle::Gateway)
                    .then(|| parse(ObjectRef::parse("gateways/public"))),
                auth_service: (style == RouteStyle::Gateway)
                    .then(|| parse(ServiceRef::parse("auth/oauth:8080"))),
                ingress_class: (style != RouteStyle::Gateway).then(|| "nginx".to_owned()),
                auth_url: (style == RouteStyle::NginxAuth).then(|| {
                    parse(crate::routes::refs::AuthUrl::parse(
                        "http://oauth.auth:8080/v",
                    ))
                }),
                ..RouteFlags::default()
            }
        }

        /// The notes of the plan, or its refusal.
        fn plan(
            text: &str,
            style: RouteStyle,
            s: Option<&GatewaySupport>,
        ) -> Result<Vec<String>, String> {
            let file = endpoints_file::parse(text, "e.yaml").unwrap_or_else(|e| panic!("{e}"));
            let service = json!({"spec": {"ports": [{"port": 80}]}});
            let live = LiveRoutes {
                service: &service,
                ingresses: &[],
                httproutes: &Listing::Items(Vec::new()),
                security_policies: &Listing::Items(Vec::new()),
                ingress_classes: None,
                gateway_support: s,
            };
            plan_routes("web", &file, &flags(style), &live)
                .map(|p| p.summary.notes)
                .map_err(|e| e.to_string())
        }

        #[test]
        fn scoped_gateway_routes_are_refused_noted_or_planned_as_the_class_says() {
            let refusing = support(gateway(), Some(class(json!([{"name": "HTTPRoute"}]))));
            let err = plan(SCOPED, RouteStyle::Gateway, Some(&refusing)).unwrap_err();
            assert!(
                err.starts_with("routes of web: the GatewayClass eg of the Gateway gateways/public does not support the ExternalAuth filter"),
                "{err}"
            );
            let silent = support(gateway(), Some(class(json!([]))));
            let notes =
                plan(SCOPED, RouteStyle::Gateway, Some(&silent)).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                notes,
                [unverified_note(&[
                    "the GatewayClass eg publishes no supportedFeatures".to_owned()
                ])]
            );
            let supporting = support(
                gateway(),
                Some(class(json!([{"name": "HTTPRouteExtAuth"}]))),
            );
            assert_eq!(
                plan(SCOPED, RouteStyle::Gateway, Some(&supporting)),
                Ok(Vec::new())
            );
        }

        #[test]
        fn public_routes_and_other_styles_are_not_checked() {
            let refusing = support(gateway(), Some(class(json!([{"name": "HTTPRoute"}]))));
            assert_eq!(
                plan(PUBLIC, RouteStyle::Gateway, Some(&refusing)),
                Ok(Vec::new())
            );
            assert_eq!(
                plan(SCOPED, RouteStyle::NginxAuth, Some(&refusing)),
                Ok(Vec::new())
            );
            // Nothing read: nothing to decide from.
            assert_eq!(plan(SCOPED, RouteStyle::Gateway, None), Ok(Vec::new()));
        }

        #[test]
        fn the_gateways_are_read_only_for_scoped_groups_in_the_gateway_style() {
            let file = |t| endpoints_file::parse(t, "e.yaml").unwrap_or_else(|e| panic!("{e}"));
            let none = Listing::Items(Vec::new());
            let check = |text, style| {
                needs_gateway_check("web", &file(text), &flags(style), &[], &none, "shop")
            };
            assert_eq!(
                check(SCOPED, RouteStyle::Gateway),
                Some(vec![GatewayKey {
                    namespace: "gateways".into(),
                    name: "public".into()
                }])
            );
            assert_eq!(check(PUBLIC, RouteStyle::Gateway), None);
            assert_eq!(check(SCOPED, RouteStyle::NginxAuth), None);
            // The style read from live HTTPRoutes, the Gateway from their parentRefs.
            let live = Listing::Items(vec![json!({
                "metadata": {"name": "web-x", "namespace": "shop", "labels": {"app": "web", "identifier": "x"}},
                "spec": {"parentRefs": [{"name": "internal"}]},
            })]);
            assert_eq!(
                needs_gateway_check(
                    "web",
                    &file(SCOPED),
                    &RouteFlags::default(),
                    &[],
                    &live,
                    "shop"
                ),
                Some(vec![GatewayKey {
                    namespace: "shop".into(),
                    name: "internal".into()
                }])
            );
            // No --gateway and no live route: the plan refuses for want of a Gateway.
            let no_gateway = RouteFlags {
                gateway: None,
                ..flags(RouteStyle::Gateway)
            };
            assert_eq!(
                needs_gateway_check("web", &file(SCOPED), &no_gateway, &[], &none, "shop"),
                None
            );
        }
    }

    #[test]
    fn the_dry_run_answer_of_the_standard_channel_is_recognised() {
        // As recorded from kube-apiserver v1.28 with the standard channel (sandbox fixture
        // standard/14).
        let unsupported = "Unsupported value: \"ExternalAuth\": supported values: \"RequestHeaderModifier\", \"ResponseHeaderModifier\", \"RequestMirror\", \"RequestRedirect\", \"URLRewrite\", \"ExtensionRef\"";
        assert_eq!(
            refuses_external_auth([(
                "spec.rules[0].filters[0].type",
                "FieldValueNotSupported",
                unsupported
            )]),
            Some("spec.rules[0].filters[0].type")
        );
        // Another value refused, or the same text at another field, is something else.
        assert_eq!(
            refuses_external_auth([(
                "spec.rules[0].filters[0].type",
                "FieldValueNotSupported",
                "Unsupported value: \"CORS\": supported values: …"
            )]),
            None
        );
        assert_eq!(
            refuses_external_auth([(
                "spec.rules[0].matches[0].path.type",
                "FieldValueNotSupported",
                unsupported
            )]),
            None
        );
        let pruned = json!({"spec": {"rules": [{"filters": [{"type": "ExternalAuth"}, {"type": "URLRewrite", "urlRewrite": {}}]}]}});
        assert!(dropped_external_auth(&pruned));
        let kept = json!({"spec": {"rules": [{"filters": [{"type": "ExternalAuth", "externalAuth": {"protocol": "HTTP"}}]}]}});
        assert!(!dropped_external_auth(&kept));
        assert!(!dropped_external_auth(&json!({"kind": "Status"})));
    }
}
