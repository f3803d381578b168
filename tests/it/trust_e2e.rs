//! What the plugin reads back is input, not authority: forged history records and edited plan
//! files, end to end against the sandbox. Each case asserts what the user sees and that
//! nothing was written — nothing outside the application, and nothing at all on a refusal.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::Write as _;

use base64::Engine as _;
use common::*;
use serde_json::{Value, json};

const NEW_IMAGE: &str = "registry.example.com/web:2.0";
const CONFIG_MAPS: &str = "/api/v1/namespaces/shop/configmaps";
const HISTORY_PATH: &str = "/api/v1/namespaces/shop/configmaps/web-appupdate-history";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/shop/deployments";
const INGRESSES: &str = "/apis/networking.k8s.io/v1/namespaces/shop/ingresses";

/// `json` gzip'd and base64'd, as the plugin stores a record.
fn stored(json: &[u8]) -> String {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(json).unwrap();
    base64::engine::general_purpose::STANDARD.encode(gz.finish().unwrap())
}

/// A record as an attacker who may write ConfigMaps would write it: the plugin's shape, any
/// values.
fn record(revision: u64, extra: Value) -> Value {
    let mut r = json!({
        "revision": revision,
        "time": "2026-12-01T07:00:00Z",
        "user": "admin",
        "tool": "kubectl-appupdate 0.1.0",
        "status": "applied",
        "source": {"type": "update"},
    });
    for (k, v) in extra.as_object().unwrap() {
        r[k] = v.clone();
    }
    r
}

/// Puts `records` (revision, stored text) into the history ConfigMap.
fn forge(env: &Env, records: &[(u64, String)]) {
    let mut data = serde_json::Map::new();
    for (rev, text) in records {
        data.insert(format!("revision-{rev}.json.gz"), json!(text));
    }
    let _ = env.sb.delete(HISTORY_PATH);
    env.sb
        .create(
            CONFIG_MAPS,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "web-appupdate-history", "labels": {"app": "web"}},
                   "binaryData": data}),
        )
        .unwrap();
}

/// Another application's Deployment and an unmanaged Ingress: what a forged record aims at.
fn bystanders(env: &Env) -> Value {
    let mut victim = env.deployment();
    victim["metadata"] = json!({"name": "victim", "labels": {"app": "victim"}});
    victim["spec"]["selector"] = json!({"matchLabels": {"app": "victim"}});
    victim["spec"]["template"]["metadata"] = json!({"labels": {"app": "victim"}});
    victim.as_object_mut().unwrap().remove("status");
    env.sb.create(DEPLOYMENTS, victim).unwrap();
    env.sb
        .create(
            INGRESSES,
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                   "metadata": {"name": "other", "labels": {"app": "web"}},
                   "spec": {"rules": [{"http": {"paths": [{"path": "/other", "pathType": "Prefix",
                     "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}),
        )
        .unwrap();
    snapshot(env)
}

/// Every Deployment and Ingress of the namespace, without server-set fields that a read moves.
fn snapshot(env: &Env) -> Value {
    let strip = |mut v: Value| {
        v["metadata"]
            .as_object_mut()
            .map(|m| m.remove("managedFields"));
        v.as_object_mut().map(|m| m.remove("status"));
        v
    };
    json!({
        "deployments": env.sb.list(DEPLOYMENTS).into_iter().map(strip).collect::<Vec<_>>(),
        "ingresses": env.sb.list(INGRESSES).into_iter().map(strip).collect::<Vec<_>>(),
    })
}

fn v1_route(kind: &str, api: &str, name: &str, action: &str, body: Value) -> Value {
    let key = if action == "create" {
        "after"
    } else {
        "before"
    };
    json!({"apiVersion": api, "kind": kind, "name": name, "action": action, key: body})
}

/// The hostile records, each with what `history` must say of it.
fn hostile_records() -> Vec<(&'static str, String, &'static str)> {
    let evil_deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "evil"}, "spec": {"template": {"spec": {"containers": [
            {"name": "x", "image": "evil.example.com/miner:1"}]}}}});
    let enc = |v: Value| stored(&serde_json::to_vec(&v).unwrap());
    let with = |extra: Value| enc(record(1, extra));
    let routes = |before: Value| {
        json!({"routes": [{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                           "name": "web-e3b0c44298fc1c14", "action": "update"}],
               "endpoints": {"before": before,
                             "after": {"style": "nginx-snippet", "groups": [{"paths": ["/a"]}]}}})
    };
    let mut bomb = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    bomb.write_all(&vec![b' '; 64 << 20]).unwrap();
    let bomb = base64::engine::general_purpose::STANDARD.encode(bomb.finish().unwrap());
    vec![
        (
            "a Deployment as a route",
            with(
                json!({"routes": [v1_route("Deployment", "apps/v1", "evil", "delete", evil_deployment)]}),
            ),
            "not a route kind",
        ),
        (
            "another app's Deployment",
            with(
                json!({"routes": [v1_route("Deployment", "apps/v1", "victim", "create", json!({}))]}),
            ),
            "not a route kind",
        ),
        (
            "a name that is a path",
            with(
                json!({"routes": [{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                                    "name": "web/status", "action": "delete"}]}),
            ),
            "not a valid object name",
        ),
        (
            "a path that rewrites nginx",
            with(routes(json!({"style": "nginx-snippet",
                               "groups": [{"paths": ["/a;\n}location / {return 200;"]}]}))),
            "routes before the change are not valid",
        ),
        (
            "a scope with a quote",
            with(routes(json!({"style": "nginx-snippet",
                               "groups": [{"scopes": ["u\"ser"], "paths": ["/a"]}]}))),
            "routes before the change are not valid",
        ),
        (
            "an auth URL with directives",
            with(routes(json!({"style": "nginx-auth",
                               "attachment": {"authUrl": "http://a/x;proxy_pass http://evil"},
                               "groups": [{"paths": ["/a"]}]}))),
            "auth URL",
        ),
        (
            "a container name that is not one",
            with(json!({"image": {"container": "../x", "before": "a:1", "after": "a:2"}})),
            "container name",
        ),
        (
            "an image that is not one",
            with(json!({"image": {"container": "web", "before": "evil image", "after": "a:2"}})),
            "not a valid image reference",
        ),
        (
            "a bound out of range",
            with(json!({"bounds": {"max": {"before": -5, "after": 9}}})),
            "out of range",
        ),
        (
            "a field this version never writes",
            with(
                json!({"image": {"container": "web", "before": "a:1", "after": "a:2"}, "body": {}}),
            ),
            "not a record of",
        ),
        (
            "not gzip",
            base64::engine::general_purpose::STANDARD.encode("plain"),
            "not gzip",
        ),
        ("a gzip bomb", bomb, "expands to more than 4 MiB"),
        (
            "an undo of itself",
            with(json!({"source": {"type": "undo", "revision": 1},
                        "bounds": {"max": {"before": 5, "after": 9}}})),
            "not an earlier revision",
        ),
    ]
}

#[test]
fn a_forged_record_is_listed_as_unverifiable_and_never_undone() {
    let env = Env::new();
    let before = bystanders(&env);
    for (what, text, why) in hostile_records() {
        forge(&env, &[(1, text)]);
        let writes = env.writes().len();

        let o = env.run(&["history", "web"]);
        assert_code(&o, 0);
        let out = stdout(&o);
        assert!(out.contains("unverifiable"), "{what}: {out}");
        assert!(out.contains(why), "{what}: {out}");

        for args in [
            &["web", "--undo", "--yes"][..],
            &["web", "--to-revision", "1", "--yes"][..],
        ] {
            let o = env.run(args);
            assert_code(&o, 5);
            let err = stderr(&o);
            assert!(
                err.contains("not undone: revision 1 is not verifiable"),
                "{what}: {err}"
            );
            assert!(err.contains(why), "{what}: {err}");
            assert!(err.contains("nothing was written"), "{what}: {err}");
        }
        assert_eq!(env.writes().len(), writes, "{what}: {:?}", env.writes());
        assert_eq!(snapshot(&env), before, "{what}");
    }
}

#[test]
fn a_record_of_an_earlier_version_with_route_bodies_is_not_replayed() {
    let env = Env::new();
    let before = bystanders(&env);
    // Well-formed as an earlier version wrote it: a route of the app, created, with its body.
    let body = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "other", "labels": {"app": "web", "identifier": "x"}}});
    let r = record(
        1,
        json!({"routes": [v1_route("Ingress", "networking.k8s.io/v1", "other", "create", body)]}),
    );
    forge(&env, &[(1, stored(&serde_json::to_vec(&r).unwrap()))]);
    let writes = env.writes().len();
    let o = env.run(&["web", "--undo", "--yes"]);
    assert_code(&o, 5);
    let err = stderr(&o);
    assert!(
        err.contains("recorded by an earlier version of kubectl-appupdate"),
        "{err}"
    );
    assert_eq!(env.writes().len(), writes);
    assert_eq!(snapshot(&env), before);
}

#[test]
fn a_valid_forged_record_can_only_produce_what_an_ordinary_run_can() {
    let env = Env::new();
    let before = bystanders(&env);
    // Passes validation: its undo is an ordinary plan of the app's own routes and nothing else.
    let r = record(
        1,
        json!({
            "routes": [{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                        "name": "victim", "action": "delete"}],
            "endpoints": {
                "before": {"style": "nginx-auth",
                           "attachment": {"authUrl": "http://auth.example.com/check"},
                           "groups": [{"paths": ["/x"]}, {"scopes": ["admin"], "paths": ["/y"]}]},
                "after": {"style": "nginx-snippet", "groups": []}
            }
        }),
    );
    forge(&env, &[(1, stored(&serde_json::to_vec(&r).unwrap()))]);
    // What it says it left is not what is live: refused as drift, nothing written.
    let o = env.run(&["web", "--undo", "--yes"]);
    assert_code(&o, 5);
    assert!(
        stderr(&o).contains("the routes of web changed since revision 1"),
        "{}",
        stderr(&o)
    );
    assert!(env.writes().is_empty(), "{:?}", env.writes());
    // Forced, it is applied as what it is: an ordinary plan.
    let o = env.run(&["web", "--undo", "--yes", "--force-undo", "routes"]);
    assert_code(&o, 0);
    // Only the app's managed routes were written, named and labelled by the style.
    for w in env.app_writes() {
        assert!(w.path.starts_with(INGRESSES), "{w:?}");
    }
    let after = snapshot(&env);
    assert_eq!(after["deployments"], before["deployments"]);
    for ing in after["ingresses"].as_array().unwrap() {
        let name = ing["metadata"]["name"].as_str().unwrap();
        let was = before["ingresses"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["metadata"]["name"] == name);
        if let Some(was) = was.filter(|w| w["metadata"]["labels"]["identifier"].is_null()) {
            // An unmanaged Ingress (labelled app=web only) is never touched.
            assert_eq!(ing, was);
            continue;
        }
        assert!(name.starts_with("web-"), "{name}");
        assert_eq!(ing["metadata"]["labels"]["app"], "web");
        assert!(ing["metadata"]["labels"]["identifier"].is_string(), "{ing}");
    }
}

// ---- saved plans ----

fn plan_out(env: &Env, args: &[&str]) -> String {
    let file = env.dir.path().join("plan.json");
    let mut all = vec!["web"];
    all.extend_from_slice(args);
    all.extend(["--plan-out", file.to_str().unwrap()]);
    let o = env.run(&all);
    assert_code(&o, 0);
    std::fs::read_to_string(file).unwrap()
}

/// The file with its checksum made again, as anyone can.
fn reseal(mut doc: Value) -> String {
    reseal_plan(&mut doc);
    serde_json::to_string_pretty(&doc).unwrap()
}

fn objects(doc: &mut Value) -> &mut Vec<Value> {
    doc["content"]["clusters"][0]["objects"]
        .as_array_mut()
        .unwrap()
}

fn find<'a>(doc: &'a mut Value, updater: &str) -> &'a mut Value {
    objects(doc)
        .iter_mut()
        .find(|o| o["updater"]["type"] == updater)
        .unwrap()
}

#[test]
fn an_edited_plan_file_is_refused_before_any_request_and_writes_nothing() {
    let env = Env::new();
    let before = bystanders(&env);
    let endpoints = env.write_file(
        "endpoints.yaml",
        "endpoints:\n  - path: /a\n  - path: /b\n    scopes: [user]\n",
    );
    let text = plan_out(
        &env,
        &[
            "--image",
            NEW_IMAGE,
            "--endpoints",
            endpoints.to_str().unwrap(),
        ],
    );
    let doc: Value = serde_json::from_str(&text).unwrap();
    type Edit = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "retargeted to another app's Deployment",
            Box::new(|d| {
                let o = find(d, "deployment-image");
                o["updater"]["spec"]["name"] = json!("victim");
                o["change"]["name"] = json!("victim");
            }),
            "not the application's own \"web\"",
        ),
        (
            "a name with a slash",
            Box::new(|d| {
                let o = find(d, "deployment-image");
                o["updater"]["spec"]["name"] = json!("web/status");
                o["change"]["name"] = json!("web/status");
            }),
            "not a valid object name",
        ),
        (
            "a name with ..",
            Box::new(|d| {
                let o = find(d, "ingress");
                o["updater"]["spec"]["name"] = json!("..");
                o["change"]["name"] = json!("..");
            }),
            "not a valid object name",
        ),
        (
            "a name with %2F",
            Box::new(|d| {
                let o = find(d, "ingress");
                o["updater"]["spec"]["name"] = json!("web%2Fx");
                o["change"]["name"] = json!("web%2Fx");
            }),
            "not a valid object name",
        ),
        (
            "an updater of another kind",
            Box::new(|d| {
                let o = find(d, "deployment-image");
                o["change"]["kind"] = json!("Ingress");
            }),
            "is planned by an updater of deployment.apps objects",
        ),
        (
            "an updater type never saved",
            Box::new(|d| {
                let o = find(d, "deployment-image");
                o["updater"]["type"] = json!("route-recreate");
            }),
            "which kubectl-appupdate does not save",
        ),
        (
            "an annotation the style never writes",
            Box::new(|d| {
                let o = find(d, "ingress");
                o["updater"]["spec"]["desired"]["annotations"]["nginx.ingress.kubernetes.io/server-snippet"] =
                    json!("return 200;");
            }),
            "not the Ingress the nginx-snippet style makes",
        ),
        (
            "a path the endpoints file refuses",
            Box::new(|d| {
                let o = find(d, "ingress");
                o["updater"]["spec"]["desired"]["paths"] = json!(["/a;evil"]);
            }),
            "path \"/a;evil\" contains ';'",
        ),
        (
            "the app of a route changed",
            Box::new(|d| {
                let o = find(d, "ingress");
                o["updater"]["spec"]["desired"]["app"] = json!("victim");
            }),
            "planned for the application \"victim\"",
        ),
    ];
    for (what, edit, why) in cases {
        let mut d = doc.clone();
        edit(&mut d);
        let file = env.write_file("edited.json", &reseal(d));
        let requests = env.sb.requests().len();
        let o = env.run(&["apply", file.to_str().unwrap(), "--yes"]);
        assert_code(&o, 3);
        let err = stderr(&o);
        assert!(err.contains("edited.json was edited"), "{what}: {err}");
        assert!(err.contains(why), "{what}: {err}");
        assert_eq!(
            env.sb.requests().len(),
            requests,
            "{what}: a request was sent"
        );
    }
    assert_eq!(snapshot(&env), before);
}

#[test]
fn a_plan_whose_views_disagree_with_its_updaters_is_refused_as_edited() {
    let env = Env::new();
    let before = bystanders(&env);
    let text = plan_out(&env, &["--image", NEW_IMAGE]);
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    // The diff the file shows says NEW_IMAGE; its updater would write another image.
    find(&mut doc, "deployment-image")["updater"]["spec"]["update"]["image"] =
        json!("evil.example.com/miner:1");
    let file = env.write_file("edited.json", &reseal(doc));
    let o = env.run(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(err.contains("the saved plan was edited"), "{err}");
    assert!(err.contains("evil.example.com/miner:1"), "{err}");
    assert!(env.writes().is_empty(), "{:?}", env.writes());
    assert_eq!(snapshot(&env), before);
}

#[test]
fn a_saved_removal_of_an_unmanaged_route_is_refused_with_nothing_written() {
    let env = Env::new();
    let before = bystanders(&env);
    // The demo app's routes: a public and a [user] group; the plan removes the [user] one.
    let endpoints = env.write_file("endpoints.yaml", "endpoints:\n  - path: /a\n");
    let text = plan_out(
        &env,
        &[
            "--endpoints",
            endpoints.to_str().unwrap(),
            "--allow-empty-endpoints",
        ],
    );
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    // Retargeted at the unmanaged Ingress "other" (labelled app=web only).
    let removal = find(&mut doc, "ingress-removal");
    removal["updater"]["spec"]["name"] = json!("other");
    removal["change"]["name"] = json!("other");
    let file = env.write_file("edited.json", &reseal(doc));
    let o = env.run(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_code(&o, 5);
    let err = stderr(&o);
    assert!(err.contains("is not a managed route of web"), "{err}");
    assert!(env.writes().is_empty(), "{:?}", env.writes());
    assert_eq!(snapshot(&env), before);
}

// ---- signed history ----

const HISTORY_KEY: &str = "0123456789abcdef0123456789abcdef\n";
const OTHER_KEY: &str = "fedcba9876543210fedcba9876543210\n";

/// The history's `binaryData`.
fn stored_records(env: &Env) -> serde_json::Map<String, Value> {
    env.sb.get(HISTORY_PATH).unwrap()["binaryData"]
        .as_object()
        .unwrap()
        .clone()
}

/// Puts `text` in the history under `key` (`None`: removes the key), as a ConfigMap writer can.
fn plant(env: &Env, key: &str, text: Option<Value>) {
    env.sb
        .update(HISTORY_PATH, |cm| {
            let data = cm["binaryData"].as_object_mut().unwrap();
            match &text {
                Some(t) => data.insert(key.to_owned(), t.clone()),
                None => data.remove(key),
            };
        })
        .unwrap();
}

/// `history web --history-key KEY` as (revision, signature check) pairs.
fn signature_checks(env: &Env, key: &str) -> Vec<(u64, String)> {
    let o = env.run(&["history", "web", "-o", "json", "--history-key", key]);
    assert_code(&o, 0);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    doc["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["revision"].as_u64().unwrap(),
                r["signatureCheck"].as_str().unwrap_or("-").to_owned(),
            )
        })
        .collect()
}

#[test]
fn with_the_history_key_an_undo_takes_only_records_the_tool_signed_with_it() {
    let env = Env::new();
    let key = env.write_file("history.key", HISTORY_KEY);
    let other = env.write_file("other.key", OTHER_KEY);
    let (key, other) = (key.to_str().unwrap(), other.to_str().unwrap());
    // Revision 1, signed by the tool.
    assert_code(
        &env.run(&["web", "--max", "7", "--yes", "--history-key", key]),
        0,
    );
    assert_eq!(signature_checks(&env, key), [(1, "verified".to_owned())]);
    let o = env.run(&["history", "web", "--history-key", key]);
    let out = stdout(&o);
    assert!(out.lines().next().unwrap().contains("SIGNATURE"), "{out}");
    assert!(out.lines().nth(1).unwrap().contains("verified"), "{out}");
    let signed = stored_records(&env)["revision-1.json.gz"].clone();

    // 1. A ConfigMap writer adds revision 2: "undo" it to an image of theirs.
    let forged = record(
        2,
        json!({"image": {"container": "app", "before": "evil.example.com/miner:1",
                         "after": "registry.example.com/web:1.0"}}),
    );
    plant(
        &env,
        "revision-2.json.gz",
        Some(json!(stored(&serde_json::to_vec(&forged).unwrap()))),
    );
    let before = snapshot(&env);
    let writes = env.writes().len();
    let o = env.run(&["web", "--undo", "--yes", "--history-key", key]);
    assert_code(&o, 5);
    let err = stderr(&o);
    assert!(
        err.contains("not undone: revision 2 of web in namespace \"shop\" (context \"sandbox\") is not signed, and --history-key "),
        "{err}"
    );
    assert!(
        err.contains("undoes only records signed with that key; nothing was written"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(env.writes().len(), writes, "{:?}", env.writes());
    assert_eq!(snapshot(&env), before);
    // Without the key nothing is checked: the forged record is an ordinary undo plan, and
    // its diff is all that shows the image.
    let o = env.run(&["web", "--undo", "--dry-run"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("evil.example.com/miner:1"),
        "{}",
        stdout(&o)
    );

    // 2. Signed, but with another key (a writer with a key of their own).
    plant(&env, "revision-2.json.gz", None);
    assert_code(
        &env.run(&["web", "--min", "3", "--yes", "--history-key", other]),
        0,
    );
    let before = snapshot(&env);
    let o = env.run(&["web", "--undo", "--yes", "--history-key", key]);
    assert_code(&o, 5);
    let err = stderr(&o);
    assert!(
        err.contains("not undone: revision 2 of web in namespace \"shop\" (context \"sandbox\") does not verify with --history-key "),
        "{err}"
    );
    assert_eq!(env.bounds(), (3, 7));
    assert_eq!(snapshot(&env), before);

    // 3. The tool's own signed record copied to another revision.
    plant(&env, "revision-3.json.gz", Some(signed.clone()));
    let o = env.run(&["web", "--undo", "--yes", "--history-key", key]);
    assert_code(&o, 5);
    assert!(
        stderr(&o).contains(
            "revision 3 of web in namespace \"shop\" (context \"sandbox\") does not verify"
        ),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        signature_checks(&env, key),
        [
            (1, "verified".to_owned()),
            (2, "invalid".to_owned()),
            (3, "invalid".to_owned())
        ]
    );

    // The tool's own record undoes fine, with the key from the environment this time; the
    // undo's own record is signed too.
    plant(&env, "revision-2.json.gz", None);
    plant(&env, "revision-3.json.gz", None);
    let o = env
        .cmd()
        .args(["web", "--undo", "--yes"])
        .env("APPUPDATE_HISTORY_KEY_FILE", key)
        .output()
        .unwrap();
    assert_code(&o, 0);
    assert_eq!(env.bounds(), (3, 5));
    assert_eq!(
        signature_checks(&env, key),
        [(1, "verified".to_owned()), (2, "verified".to_owned())]
    );
}

#[test]
fn a_record_applied_from_a_saved_plan_is_signed_with_the_history_key() {
    let env = Env::new();
    let key = env.write_file("history.key", HISTORY_KEY);
    let key = key.to_str().unwrap();
    let file = env.dir.path().join("plan.json");
    let o = env.run(&["web", "--max", "9", "--plan-out", file.to_str().unwrap()]);
    assert_code(&o, 0);
    let o = env.run(&[
        "apply",
        file.to_str().unwrap(),
        "--yes",
        "--history-key",
        key,
    ]);
    assert_code(&o, 0);
    assert_eq!(signature_checks(&env, key), [(1, "verified".to_owned())]);
    // Read with another key, it is not the tool's.
    let other = env.write_file("other.key", OTHER_KEY);
    assert_eq!(
        signature_checks(&env, other.to_str().unwrap()),
        [(1, "invalid".to_owned())]
    );
    // A key too short is refused before anything is sent.
    let short = env.write_file("short.key", "0123456789\n");
    let requests = env.sb.requests().len();
    let o = env.run(&[
        "web",
        "--undo",
        "--yes",
        "--history-key",
        short.to_str().unwrap(),
    ]);
    assert_code(&o, 3);
    assert!(
        stderr(&o).contains("--history-key ")
            && stderr(&o).contains("short.key: the key is shorter than 16 bytes"),
        "{}",
        stderr(&o)
    );
    assert_eq!(env.sb.requests().len(), requests);
}
