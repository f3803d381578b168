//! Competing writers that delete, re-create or create an Ingress between the plan and the
//! write, end to end: both right before the dry-run preflight (`Trigger::NextWrite`) and
//! between the preflight (if any: a run that writes one object sends none) and the real write
//! (`Trigger::NextRealWrite`). The sandbox panics
//! on drop if a competitor could not act, so each test really races.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use sandbox_apiserver::{Fault, Trigger};
use serde_json::{Value, json};

const PUBLIC: &str = "web-e3b0c44298fc1c14"; // scopes []
const USER: &str = "web-04f8996da763b7a9"; // scopes [user]
const ADMIN_USER: &str = "web-4f515e078b8f8861"; // scopes [admin, user]

fn apply_endpoints(env: &Env, text: &str) -> std::process::Output {
    let file = env.write_file("endpoints.yaml", text);
    env.run(&["web", "--endpoints", file.to_str().unwrap(), "--yes"])
}

/// Adds /catalog to the public group and moves /unprotected from it to a new [admin, user]
/// group: the create is in the first write round, the update of PUBLIC (which stops serving
/// /unprotected) waits for it.
const ADD_CATALOG_AND_ADMIN: &str = "endpoints:
  - path: /health
  - path: /catalog
  - path: /protected/user
    scopes: [user]
  - path: /unprotected
    scopes: [admin, user]
";

/// Drops the [user] group: a delete of USER (one object: no dry run, the delete is its own
/// check).
const DROP_USER: &str = "endpoints:
  - path: /health
  - path: /unprotected
";

/// Drops the [user] group and adds /catalog to the public one: a delete of USER and an update
/// of PUBLIC, dry-run before either is written.
const DROP_USER_ADD_CATALOG: &str = "endpoints:
  - path: /health
  - path: /catalog
  - path: /unprotected
";

#[test]
fn an_ingress_deleted_before_the_preflight_trips_the_guard_and_nothing_is_written() {
    let env = Env::new();
    env.sb.inject(Fault::CompetingDelete {
        object_path: ingress_path(PUBLIC),
        after: Trigger::NextWrite,
    });
    let o = apply_endpoints(&env, ADD_CATALOG_AND_ADMIN);
    assert_code(&o, 5);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "ingress.networking.k8s.io/{PUBLIC} NOT updated: it was deleted after the plan was shown; nothing was written"
        )),
        "{err}"
    );
    assert!(err.contains("Nothing was changed."), "{err}");
    assert!(env.writes().is_empty(), "{:?}", env.app_writes());
    assert!(
        env.sb.get(&ingress_path(PUBLIC)).is_none(),
        "not re-created"
    );
    assert!(env.sb.get(&ingress_path(ADMIN_USER)).is_none());
}

#[test]
fn an_ingress_deleted_after_the_preflight_trips_the_guard_and_is_not_recreated() {
    let env = Env::new();
    env.sb.inject(Fault::CompetingDelete {
        object_path: ingress_path(PUBLIC),
        after: Trigger::NextRealWrite,
    });
    let o = apply_endpoints(&env, ADD_CATALOG_AND_ADMIN);
    assert_code(&o, 5);
    let (out, err) = (stdout(&o), stderr(&o));
    // The report lists exactly what was applied: the create (first round) landed.
    assert!(
        out.contains(&format!("ingress.networking.k8s.io/{ADMIN_USER} created")),
        "{out}"
    );
    assert!(
        err.contains(&format!(
            "ingress.networking.k8s.io/{PUBLIC} NOT updated: it was deleted after the plan was shown"
        )),
        "{err}"
    );
    assert!(
        err.contains("The application is partly updated: 1 change was not applied"),
        "{err}"
    );
    assert!(
        env.sb.get(&ingress_path(PUBLIC)).is_none(),
        "not re-created"
    );
    assert!(env.sb.get(&ingress_path(ADMIN_USER)).is_some());
    let methods: Vec<String> = env.app_writes().iter().map(|w| w.method.clone()).collect();
    assert_eq!(
        methods,
        vec!["POST", "PATCH"],
        "one create, one update (404)"
    );
}

#[test]
fn a_deleted_ingress_recreated_before_the_preflight_is_left_alone() {
    let env = Env::new();
    env.sb.inject(Fault::CompetingRecreate {
        object_path: ingress_path(USER),
        after: Trigger::NextWrite,
        mutate: None,
    });
    let o = apply_endpoints(&env, DROP_USER_ADD_CATALOG);
    assert_code(&o, 5);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "ingress.networking.k8s.io/{USER} NOT deleted: it was deleted and re-created after the plan was shown; the new object was left alone"
        )),
        "{err}"
    );
    assert!(err.contains("Nothing was changed."), "{err}");
    assert!(env.writes().is_empty());
    assert!(
        env.sb.get(&ingress_path(USER)).is_some(),
        "the new one stays"
    );
}

#[test]
fn a_deleted_ingress_recreated_before_its_real_delete_fails_the_uid_precondition_and_is_left_alone()
{
    let env = Env::new();
    let old_uid = env.sb.get(&ingress_path(USER)).unwrap()["metadata"]["uid"].clone();
    env.sb.inject(Fault::CompetingRecreate {
        object_path: ingress_path(USER),
        after: Trigger::NextRealWrite,
        mutate: None,
    });
    let o = apply_endpoints(&env, DROP_USER);
    assert_code(&o, 5);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "ingress.networking.k8s.io/{USER} NOT deleted: it was deleted and re-created after the plan was shown; the new object was left alone"
        )),
        "{err}"
    );
    let live = env.sb.get(&ingress_path(USER)).unwrap();
    assert_ne!(live["metadata"]["uid"], old_uid, "the re-created object");
    // The one real DELETE met the uid precondition (409) and nothing else was written.
    let writes = env.app_writes();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(
        (writes[0].method.as_str(), writes[0].status),
        ("DELETE", 409)
    );
}

fn delete_public_so_the_plan_creates_it(env: &Env) {
    env.sb.delete(&ingress_path(PUBLIC)).unwrap();
}

const PUBLIC_ONLY: &str = "endpoints:
  - path: /health
  - path: /unprotected
  - path: /protected/user
    scopes: [user]
";

fn competing_public_ingress(labels: Value) -> Value {
    json!({
        "metadata": {"labels": labels, "annotations": {"team.example.com/owner": "payments"}},
        "spec": {
            "ingressClassName": "nginx",
            "rules": [{"http": {"paths": [{
                "path": "/web/old", "pathType": "Prefix",
                "backend": {"service": {"name": "web", "port": {"number": 80}}}
            }]}}]
        }
    })
}

#[test]
fn a_create_that_meets_a_managed_sibling_becomes_a_conditional_update() {
    for trigger in [Trigger::NextWrite, Trigger::NextRealWrite] {
        let env = Env::new();
        delete_public_so_the_plan_creates_it(&env);
        env.sb.inject(Fault::CompetingCreate {
            object_path: ingress_path(PUBLIC),
            after: trigger,
            body: competing_public_ingress(json!({"app": "web", "identifier": "e3b0c44298fc1c14"})),
        });
        let o = apply_endpoints(&env, PUBLIC_ONLY);
        assert_code(&o, 0);
        let out = stdout(&o);
        assert!(
            out.contains("Plan: 1 to create, 0 to update, 0 to delete."),
            "{out}"
        );
        assert!(
            out.contains(&format!("ingress.networking.k8s.io/{PUBLIC} created")),
            "{trigger:?}: {out}"
        );
        let live = env.sb.get(&ingress_path(PUBLIC)).unwrap();
        // Exactly the shown paths; what the tool does not own (a foreign annotation) stays.
        assert_eq!(
            paths_of(&live),
            vec!["/web/health", "/web/unprotected"],
            "{trigger:?}"
        );
        assert_eq!(
            live["metadata"]["annotations"]["team.example.com/owner"],
            "payments"
        );
        assert!(
            live["metadata"]["annotations"]["nginx.ingress.kubernetes.io/configuration-snippet"]
                .as_str()
                .unwrap()
                .contains("rewrite ^/web/(.*)$ /$1 break;")
        );
        // The write that landed was a PATCH conditional on the sibling's resourceVersion.
        let writes = env.app_writes();
        let landed: Vec<_> = writes.iter().filter(|w| w.status < 300).collect();
        assert_eq!(landed.len(), 1, "{writes:?}");
        assert_eq!(landed[0].method, "PATCH");
    }
}

#[test]
fn a_create_that_meets_an_unmanaged_ingress_of_that_name_is_refused_and_left_alone() {
    for trigger in [Trigger::NextWrite, Trigger::NextRealWrite] {
        let env = Env::new();
        delete_public_so_the_plan_creates_it(&env);
        env.sb.inject(Fault::CompetingCreate {
            object_path: ingress_path(PUBLIC),
            after: trigger,
            body: competing_public_ingress(json!({"app": "web"})),
        });
        let o = apply_endpoints(&env, PUBLIC_ONLY);
        assert_code(&o, 1);
        let err = stderr(&o);
        assert!(
            err.contains(&format!(
                "ingress.networking.k8s.io/{PUBLIC} NOT created: ingress.networking.k8s.io/{PUBLIC} already exists and is not one of web's managed Ingresses"
            )),
            "{trigger:?}: {err}"
        );
        assert!(err.contains("Nothing was changed."), "{err}");
        let live = env.sb.get(&ingress_path(PUBLIC)).unwrap();
        assert_eq!(paths_of(&live), vec!["/web/old"], "left alone");
        assert_eq!(live["metadata"]["labels"], json!({"app": "web"}));
        assert!(
            env.app_writes().iter().all(|w| w.status >= 400),
            "{:?}",
            env.app_writes()
        );
    }
}
