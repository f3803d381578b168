//! HTTP behaviour beyond the recorded fixtures, the library handle, the request log, TLS and
//! HTTP/2, identities, watches, and robustness against malformed input.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;
use std::time::Duration;

use common::{Conn, admin, get, request, send_json};
use sandbox_apiserver::{Identity, Sandbox, SandboxOptions};
use serde_json::{Value, json};

fn sandbox() -> Sandbox {
    Sandbox::start(SandboxOptions::default()).unwrap()
}

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/shop/deployments";

fn deployment(name: &str, image: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": {"metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": name, "image": image}]}}}})
}

fn namespace(sb: &Sandbox, ns: &str) {
    sb.create(
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )
    .unwrap();
}

#[test]
fn library_handle_reads_and_writes_through_the_server_paths() {
    let sb = sandbox();
    namespace(&sb, "shop");
    let created = sb
        .create(DEPLOYMENTS, deployment("web", "nginx:1.25"))
        .unwrap();
    assert_eq!(
        created["spec"]["replicas"],
        json!(1),
        "defaulted like the real server"
    );
    assert_eq!(created["metadata"]["generation"], json!(1));
    assert_eq!(
        created["metadata"]["managedFields"][0]["manager"],
        json!("sandbox-control")
    );
    let rv: u64 = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();

    let got = sb.get(&format!("{DEPLOYMENTS}/web")).unwrap();
    assert_eq!(got, created);
    assert_eq!(sb.list(DEPLOYMENTS).len(), 1);
    assert_eq!(
        sb.list("/apis/apps/v1/deployments").len(),
        1,
        "all namespaces"
    );

    let updated = sb
        .update(&format!("{DEPLOYMENTS}/web"), |d| {
            d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.26")
        })
        .unwrap();
    assert_eq!(updated["metadata"]["generation"], json!(2));
    assert_eq!(
        updated["metadata"]["resourceVersion"],
        json!((rv + 1).to_string())
    );
    let mut managers: Vec<&str> = updated["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["manager"].as_str().unwrap())
        .collect();
    managers.sort();
    assert_eq!(managers, ["sandbox-competitor", "sandbox-control"]);

    let err = sb.create(DEPLOYMENTS, deployment("web", "x")).unwrap_err();
    assert_eq!((err.code, err.reason.as_str()), (409, "AlreadyExists"));
    let err = sb
        .create(DEPLOYMENTS, deployment("Bad_Name", "x"))
        .unwrap_err();
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));

    sb.delete(&format!("{DEPLOYMENTS}/web")).unwrap();
    assert!(sb.get(&format!("{DEPLOYMENTS}/web")).is_none());
    assert!(
        sb.requests().is_empty(),
        "handle calls are not client requests"
    );
}

#[test]
fn the_handle_applies_as_a_named_field_manager() {
    let sb = sandbox();
    namespace(&sb, "shop");
    let path = format!("{DEPLOYMENTS}/web");
    // Create on apply: one Apply entry owning exactly the configuration's fields.
    let web = sb
        .apply(&path, "helm", deployment("web", "nginx:1.25"))
        .unwrap();
    let entries = web["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{web}");
    assert_eq!(entries[0]["manager"], "helm");
    assert_eq!(entries[0]["operation"], "Apply");
    let fields = &entries[0]["fieldsV1"];
    assert_eq!(
        fields.pointer("/f:spec/f:template/f:spec/f:containers/k:{\"name\":\"web\"}/f:image"),
        Some(&json!({}))
    );
    assert!(fields.pointer("/f:spec/f:replicas").is_none(), "{fields}");
    assert_eq!(web["spec"]["replicas"], 1, "defaulted");

    // Another manager's Update takes the image; the next apply of another value conflicts.
    sb.update(&path, |d| {
        d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.26");
    })
    .unwrap();
    let refused = sb
        .apply(&path, "helm", deployment("web", "nginx:1.27"))
        .unwrap_err();
    assert_eq!(refused.code, 409);
    assert_eq!(
        refused.message,
        "Apply failed with 1 conflict: conflict with \"sandbox-competitor\" using apps/v1: .spec.template.spec.containers[name=\"web\"].image"
    );
    assert_eq!(
        sb.get(&path).unwrap()["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.26"
    );

    // force_apply takes it back.
    let web = sb
        .force_apply(&path, "helm", deployment("web", "nginx:1.27"))
        .unwrap();
    assert_eq!(
        web["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    let managers: Vec<&str> = web["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["manager"].as_str().unwrap())
        .collect();
    assert_eq!(managers, ["helm"], "the competitor lost its only field");
}

#[test]
fn seed_demo_app_creates_the_demo_objects() {
    let sb = sandbox();
    sb.seed_demo_app("demo", "web").unwrap();
    let d = sb
        .get("/apis/apps/v1/namespaces/demo/deployments/web")
        .unwrap();
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["name"],
        json!("app")
    );
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        json!("registry.example.com/web:1.0")
    );
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
        json!(8080)
    );
    let svc = sb.get("/api/v1/namespaces/demo/services/web").unwrap();
    assert_eq!(svc["spec"]["ports"][0]["port"], json!(80));
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], json!(8080));
    let hpa = sb
        .get("/apis/autoscaling/v2/namespaces/demo/horizontalpodautoscalers/web")
        .unwrap();
    assert_eq!(
        (
            hpa["spec"]["minReplicas"].clone(),
            hpa["spec"]["maxReplicas"].clone()
        ),
        (json!(2), json!(5))
    );
    let ings = sb.list("/apis/networking.k8s.io/v1/namespaces/demo/ingresses");
    assert_eq!(ings.len(), 3);
    let managed: Vec<&Value> = ings
        .iter()
        .filter(|i| i["metadata"]["labels"].get("identifier").is_some())
        .collect();
    assert_eq!(managed.len(), 2);
    for i in &managed {
        let id = i["metadata"]["labels"]["identifier"].as_str().unwrap();
        assert!(id.len() == 16 && id.chars().all(|c| c.is_ascii_hexdigit()));
        assert!(
            i["metadata"]["annotations"]["nginx.ingress.kubernetes.io/configuration-snippet"]
                .as_str()
                .unwrap()
                .contains("rewrite ^/web/")
        );
        assert_eq!(i["spec"]["ingressClassName"], json!("nginx"));
    }
    assert!(
        ings.iter()
            .all(|i| i["metadata"]["labels"]["app"] == json!("web"))
    );
    // Seeding twice is harmless.
    sb.seed_demo_app("demo", "web").unwrap();
}

#[test]
fn kubeconfig_has_one_context_per_identity_and_embeds_the_ca() {
    use base64::Engine;
    let sb = sandbox();
    let y = sb.kubeconfig_yaml("shop");
    for ctx in [
        "sandbox",
        "sandbox-readonly",
        "sandbox-noperm",
        "sandbox-invalid",
    ] {
        assert!(y.contains(&format!("- name: {ctx}\n")), "{ctx} in {y}");
    }
    assert!(y.contains("current-context: sandbox\n"));
    assert!(y.contains("namespace: \"shop\""));
    assert!(y.contains(&format!("server: \"{}\"", sb.url())));
    let b64 = y
        .lines()
        .find_map(|l| l.trim().strip_prefix("certificate-authority-data: "))
        .unwrap();
    let pem = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    assert_eq!(String::from_utf8(pem).unwrap(), sb.ca_pem().unwrap());
    for id in [
        Identity::Admin,
        Identity::ReadOnly,
        Identity::NoPerm,
        Identity::Invalid,
    ] {
        assert!(y.contains(&sb.token(id)));
    }
    assert_ne!(
        sb.token(Identity::Admin),
        Sandbox::start(SandboxOptions::default())
            .unwrap()
            .token(Identity::Admin),
        "tokens are per instance"
    );
}

fn curl() -> Option<()> {
    Command::new("curl")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| ())
}

#[test]
fn tls_with_the_generated_ca_serves_http2_and_keeps_http1_connections_alive() {
    if curl().is_none() {
        eprintln!("SKIPPED: curl is not on PATH");
        return;
    }
    let sb = sandbox();
    let dir = common::TempDir::new("tls");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, sb.ca_pem().unwrap()).unwrap();
    let auth = format!("Authorization: Bearer {}", admin(&sb));
    for (flag, want) in [("--http2", "HTTP/2.0"), ("--http1.1", "HTTP/1.1")] {
        sb.clear_requests();
        let out = Command::new("curl")
            .args(["-sS", "--fail", flag, "--cacert"])
            .arg(&ca)
            .args(["-H", &auth])
            .arg(format!("{}/version", sb.url()))
            .arg(format!("{}/api", sb.url()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let log = sb.requests();
        assert_eq!(log.len(), 2);
        assert!(log.iter().all(|r| r.http_version == want), "{log:?}");
        assert_eq!(
            log[0].connection_id, log[1].connection_id,
            "one connection for both requests"
        );
        assert_eq!(sb.counters().connections, 1);
    }
    // localhost is in the certificate too.
    let out = Command::new("curl")
        .args(["-sS", "--fail", "--cacert"])
        .arg(&ca)
        .args(["-H", &auth])
        .arg(format!("https://localhost:{}/version", sb.addr().port()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_request_log_records_and_counts_every_request() {
    let sb = sandbox();
    namespace(&sb, "shop");
    let body = deployment("web", "nginx:1");
    assert_eq!(
        send_json(
            &sb,
            "POST",
            &format!("{DEPLOYMENTS}?dryRun=All"),
            "application/json",
            &body
        )
        .status,
        201
    );
    assert_eq!(
        send_json(&sb, "POST", DEPLOYMENTS, "application/json", &body).status,
        201
    );
    assert_eq!(get(&sb, &format!("{DEPLOYMENTS}/web")).status, 200);
    assert_eq!(get(&sb, &format!("{DEPLOYMENTS}/nope")).status, 404);
    let mut stale = sb.get(&format!("{DEPLOYMENTS}/web")).unwrap();
    stale["metadata"]["resourceVersion"] = json!("1");
    let r = send_json(
        &sb,
        "PUT",
        &format!("{DEPLOYMENTS}/web"),
        "application/json",
        &stale,
    );
    assert_eq!(r.status, 409);
    let r = request(
        &sb,
        Some(&sb.token(Identity::ReadOnly)),
        "GET",
        &format!("{DEPLOYMENTS}?labelSelector=app%3Dweb"),
        &[],
        None,
    );
    assert_eq!(r.status, 200);

    let log = sb.requests();
    assert_eq!(
        log.iter().map(|r| r.seq).collect::<Vec<_>>(),
        (1..=6).collect::<Vec<u64>>()
    );
    assert!(log[0].dry_run && !log[1].dry_run);
    assert_eq!(log[0].query, "dryRun=All");
    assert_eq!(log[3].reason.as_deref(), Some("NotFound"));
    assert_eq!(log[4].reason.as_deref(), Some("Conflict"));
    assert_eq!(log[5].user, "readonly");
    assert_eq!(log[5].query, "labelSelector=app=web", "decoded");
    assert!(
        log.iter()
            .all(|r| r.duration_ms >= 0.0 && r.fault.is_none())
    );
    let c = sb.counters();
    assert_eq!(c.requests, 6);
    assert_eq!(c.writes, 3);
    assert_eq!(c.dry_run_writes, 1);
    assert_eq!(c.conflicts, 1);
    assert_eq!(c.by_method["GET"], 3);
    assert_eq!(c.by_status[&201], 2);
    assert_eq!(
        c.connections, 6,
        "one connection per request with Connection: close"
    );
    let line = serde_json::to_value(&log[0]).unwrap();
    for field in [
        "seq",
        "method",
        "path",
        "query",
        "user",
        "dry_run",
        "status",
        "reason",
        "fault",
        "started_ms",
        "duration_ms",
        "connection_id",
    ] {
        assert!(line.get(field).is_some(), "{field}");
    }
    sb.clear_requests();
    assert!(sb.requests().is_empty());
    assert_eq!(sb.counters().requests, 0);
}

#[test]
fn identities_are_authorised_like_rbac() {
    let sb = sandbox();
    sb.seed_demo_app("demo", "web").unwrap();
    let ro = sb.token(Identity::ReadOnly);
    let body = serde_json::to_vec(&deployment("api", "x")).unwrap();
    let r = request(
        &sb,
        Some(&ro),
        "POST",
        "/apis/apps/v1/namespaces/demo/deployments?dryRun=All",
        &[("Content-Type", "application/json")],
        Some(&body),
    );
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json()["message"],
        json!(
            "deployments.apps is forbidden: User \"readonly\" cannot create resource \"deployments\" in API group \"apps\" in the namespace \"demo\""
        )
    );
    let r = request(&sb, Some(&ro), "GET", "/api/v1/namespaces/demo", &[], None);
    assert_eq!(r.status, 200);
    let r = request(
        &sb,
        Some(&ro),
        "DELETE",
        "/api/v1/namespaces/demo",
        &[],
        None,
    );
    assert_eq!(
        r.json()["message"],
        json!(
            "namespaces \"demo\" is forbidden: User \"readonly\" cannot delete resource \"namespaces\" in API group \"\" in the namespace \"demo\""
        )
    );
    let np = sb.token(Identity::NoPerm);
    let r = request(
        &sb,
        Some(&np),
        "GET",
        "/apis/apps/v1/deployments",
        &[],
        None,
    );
    assert_eq!(
        r.json()["message"],
        json!(
            "deployments.apps is forbidden: User \"noperm\" cannot list resource \"deployments\" in API group \"apps\" at the cluster scope"
        )
    );
    assert_eq!(
        request(&sb, Some(&np), "GET", "/version", &[], None).status,
        200
    );
    assert_eq!(
        request(&sb, Some(&np), "GET", "/api/v1", &[], None).status,
        200
    );
    let r = request(&sb, Some(&np), "GET", "/metrics", &[], None);
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json()["message"],
        json!("forbidden: User \"noperm\" cannot get path \"/metrics\"")
    );
    let r = request(
        &sb,
        Some(&sb.token(Identity::Invalid)),
        "GET",
        "/version",
        &[],
        None,
    );
    assert_eq!(r.status, 401);
    let r = request(&sb, None, "GET", "/api", &[], None);
    assert_eq!(r.status, 403, "anonymous over TLS");
    assert_eq!(request(&sb, None, "GET", "/version", &[], None).status, 200);
    assert_eq!(get(&sb, "/metrics").status, 404);
}

#[test]
fn plain_http_treats_requests_without_credentials_as_admin() {
    let sb = Sandbox::start(SandboxOptions {
        tls: false,
        ..Default::default()
    })
    .unwrap();
    assert!(sb.url().starts_with("http://"));
    assert!(
        !sb.kubeconfig_yaml("x")
            .contains("certificate-authority-data")
    );
    assert_eq!(
        request(&sb, None, "GET", "/api/v1/namespaces", &[], None).status,
        200
    );
    assert_eq!(
        request(
            &sb,
            Some(&sb.token(Identity::ReadOnly)),
            "DELETE",
            "/api/v1/namespaces/x",
            &[],
            None
        )
        .status,
        403
    );
}

fn read_events(
    conn: &mut Conn,
    headers: &[(String, String)],
    want: usize,
    timeout: Duration,
) -> Vec<Value> {
    let deadline = std::time::Instant::now() + timeout;
    let mut buf = Vec::new();
    loop {
        buf.extend(conn.read_body(headers, Duration::from_millis(100)));
        let text = String::from_utf8_lossy(&buf).into_owned();
        let events: Vec<Value> = text
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if events.len() >= want || std::time::Instant::now() > deadline {
            return events;
        }
    }
}

#[test]
fn watches_follow_label_selector_transitions_and_time_out() {
    let sb = sandbox();
    namespace(&sb, "shop");
    sb.create(DEPLOYMENTS, deployment("web", "nginx:1"))
        .unwrap();
    let mut conn = Conn::open(&sb);
    conn.send(
        Some(&admin(&sb)),
        "GET",
        &format!("{DEPLOYMENTS}?watch=true&labelSelector=tier%3Dfront&timeoutSeconds=3"),
        &[],
        None,
    );
    let (status, headers) = conn.read_head(Duration::from_secs(5)).unwrap();
    assert_eq!(status, 200);
    let web = format!("{DEPLOYMENTS}/web");
    sb.update(&web, |d| d["metadata"]["labels"]["tier"] = json!("front"))
        .unwrap();
    sb.update(&web, |d| d["spec"]["replicas"] = json!(3))
        .unwrap();
    sb.update(&web, |d| d["metadata"]["labels"]["tier"] = json!("back"))
        .unwrap();
    sb.delete(&web).unwrap();
    let events = read_events(&mut conn, &headers, 3, Duration::from_secs(5));
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "MODIFIED", "DELETED"]);
    assert_eq!(events[1]["object"]["kind"], json!("Deployment"));
    assert_eq!(events[1]["object"]["spec"]["replicas"], json!(3));
    // timeoutSeconds=3 ends the stream.
    let rest = conn.read_body(&headers, Duration::from_secs(5));
    assert!(rest.is_empty());
}

#[test]
fn watch_without_resource_version_starts_with_added_and_bookmarks_are_accepted() {
    let sb = sandbox();
    namespace(&sb, "shop");
    namespace(&sb, "other");
    sb.create(DEPLOYMENTS, deployment("b", "x:1")).unwrap();
    sb.create(DEPLOYMENTS, deployment("a", "x:1")).unwrap();
    sb.create(
        "/apis/apps/v1/namespaces/other/deployments",
        deployment("c", "x:1"),
    )
    .unwrap();
    let mut conn = Conn::open(&sb);
    conn.send(
        Some(&admin(&sb)),
        "GET",
        "/apis/apps/v1/deployments?watch=1&allowWatchBookmarks=true",
        &[],
        None,
    );
    let (status, headers) = conn.read_head(Duration::from_secs(5)).unwrap();
    assert_eq!(status, 200);
    let events = read_events(&mut conn, &headers, 3, Duration::from_secs(5));
    let names: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap(),
                e["object"]["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [("ADDED", "c"), ("ADDED", "a"), ("ADDED", "b")],
        "storage order: namespace, then name"
    );
}

#[test]
fn lists_paginate_with_continue_tokens() {
    let sb = sandbox();
    namespace(&sb, "shop");
    for n in ["a", "b", "c", "d", "e"] {
        sb.create(DEPLOYMENTS, deployment(n, "x:1")).unwrap();
    }
    let first = get(&sb, &format!("{DEPLOYMENTS}?limit=2")).json();
    assert_eq!(first["items"].as_array().unwrap().len(), 2);
    assert_eq!(first["metadata"]["remainingItemCount"], json!(3));
    let token = first["metadata"]["continue"].as_str().unwrap();
    let second = get(&sb, &format!("{DEPLOYMENTS}?limit=2&continue={token}")).json();
    let names: Vec<&str> = second["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c", "d"]);
    let r = get(&sb, &format!("{DEPLOYMENTS}?continue=%%%"));
    assert_eq!(r.status, 400);
}

#[test]
fn the_node_list_answers_with_the_nodes_given_also_as_metadata() {
    let sb = Sandbox::start(SandboxOptions {
        node_platforms: vec![
            ("linux".into(), "amd64".into()),
            ("linux".into(), "arm64".into()),
        ],
        ..SandboxOptions::default()
    })
    .unwrap();
    let list = get(&sb, "/api/v1/nodes").json();
    assert_eq!(list["kind"], json!("NodeList"));
    assert_eq!(list["items"][1]["metadata"]["name"], json!("node-1"));
    assert_eq!(
        list["items"][1]["metadata"]["labels"]["kubernetes.io/arch"],
        json!("arm64")
    );
    let accept =
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    let r = request(
        &sb,
        Some(&admin(&sb)),
        "GET",
        "/api/v1/nodes",
        &[("Accept", accept)],
        None,
    );
    let partial = r.json();
    assert_eq!(partial["kind"], json!("PartialObjectMetadataList"));
    let labels: Vec<(&str, &str)> = partial["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            assert_eq!(n["kind"], json!("PartialObjectMetadata"));
            assert!(n.get("status").is_none(), "metadata only: {n}");
            let l = &n["metadata"]["labels"];
            (
                l["kubernetes.io/os"].as_str().unwrap(),
                l["kubernetes.io/arch"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(labels, [("linux", "amd64"), ("linux", "arm64")]);
    // Without nodes given, the list is empty, as before.
    assert_eq!(get(&sandbox(), "/api/v1/nodes").json()["items"], json!([]));
}

#[test]
fn kubectl_style_table_requests_get_tables() {
    let sb = sandbox();
    sb.seed_demo_app("demo", "web").unwrap();
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    let r = request(
        &sb,
        Some(&admin(&sb)),
        "GET",
        "/apis/apps/v1/namespaces/demo/deployments",
        &[("Accept", accept)],
        None,
    );
    // The real server labels a Table plain application/json.
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    let t = r.json();
    assert_eq!(t["kind"], json!("Table"));
    let cols: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        &cols[..5],
        ["Name", "Ready", "Up-to-date", "Available", "Age"]
    );
    assert_eq!(t["rows"][0]["cells"][0], json!("web"));
    assert_eq!(t["rows"][0]["cells"][1], json!("0/2"));
    assert_eq!(
        t["rows"][0]["object"]["kind"],
        json!("PartialObjectMetadata")
    );
}

#[test]
fn malformed_requests_get_statuses_not_panics() {
    let sb = sandbox();
    namespace(&sb, "shop");
    let t = admin(&sb);
    let weird_paths = [
        "/apis/apps/v1/namespaces/shop/deployments/%ZZ",
        "/apis//v1",
        "/api/v1/namespaces//services",
        "/apis/apps/v1/namespaces/shop/deployments/a/b/c/d",
        "/apis/apps/v1/namespaces/shop/deployments?labelSelector=%28%28%28",
        "/apis/apps/v1/namespaces/shop/deployments?labelSelector=a+in+%28",
        "/apis/apps/v1/namespaces/shop/deployments?fieldSelector=spec.x%3D1",
        "/apis/apps/v1/namespaces/shop/deployments?fieldSelector=garbage",
        "/apis/apps/v1/namespaces/shop/deployments?limit=-1",
        "/apis/apps/v1/namespaces/shop/deployments?watch=true&sendInitialEvents=true",
        "/api/v1/namespaces/shop/pods/x",
        "/openapi/v3/nope",
        "/sandbox/unknown",
    ];
    for p in weird_paths {
        let r = request(&sb, Some(&t), "GET", p, &[], None);
        assert!((200..500).contains(&r.status), "{p}: {}", r.status);
    }
    // A malformed resourceVersion is the storage layer's bare 500, as on a real server.
    let r = get(
        &sb,
        "/apis/apps/v1/namespaces/shop/deployments?watch=true&resourceVersion=abc",
    );
    assert_eq!(
        (r.status, r.json()["message"].clone()),
        (
            500,
            json!(
                "resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax"
            )
        )
    );
    let r = get(
        &sb,
        "/apis/apps/v1/namespaces/shop/deployments?fieldSelector=spec.x%3D1",
    );
    assert_eq!(
        (r.status, r.json()["message"].clone()),
        (
            400,
            json!(
                "\"spec.x\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
            )
        )
    );
    let bodies: [&[u8]; 8] = [
        b"",
        b"[]",
        b"\"x\"",
        b"null",
        b"{",
        b"{\"kind\":5}",
        b"{\"spec\":{\"replicas\":1e99}}",
        &[0xff, 0xfe, 0x00],
    ];
    for b in bodies {
        for (m, ct) in [
            ("POST", "application/json"),
            ("PUT", "application/json"),
            ("PATCH", "application/merge-patch+json"),
            ("PATCH", "application/strategic-merge-patch+json"),
            ("PATCH", "application/json-patch+json"),
        ] {
            let path = if m == "POST" {
                DEPLOYMENTS.to_string()
            } else {
                format!("{DEPLOYMENTS}/web")
            };
            let r = request(&sb, Some(&t), m, &path, &[("Content-Type", ct)], Some(b));
            assert!(
                (400..500).contains(&r.status),
                "{m} {ct} {:?}: {} {}",
                String::from_utf8_lossy(b),
                r.status,
                r.text()
            );
            assert_eq!(r.json()["kind"], json!("Status"));
        }
    }
    let r = request(
        &sb,
        Some(&t),
        "POST",
        DEPLOYMENTS,
        &[("Content-Type", "application/json")],
        Some(b"[]"),
    );
    assert!(r.json()["message"].as_str().unwrap().starts_with("the object provided is unrecognized (must be of type Deployment): couldn't get version/kind; json parse error: json: cannot unmarshal array"));
    let r = request(
        &sb,
        Some(&t),
        "POST",
        DEPLOYMENTS,
        &[("Content-Type", "text/plain")],
        Some(b"{}"),
    );
    assert_eq!(
        (r.status, r.json()["reason"].clone()),
        (415, json!("UnsupportedMediaType"))
    );
    let r = request(
        &sb,
        Some(&t),
        "POST",
        &format!("{DEPLOYMENTS}/web"),
        &[("Content-Type", "application/json")],
        Some(b"{}"),
    );
    assert_eq!(r.status, 405);
    assert_eq!(get(&sb, "/api/v1/namespaces/shop/namespaces").status, 404);
    assert_eq!(get(&sb, "/apis/apps/v1/deployments/web").status, 404);
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let r = request(
        &sb,
        Some(&t),
        "POST",
        DEPLOYMENTS,
        &[("Content-Type", "application/json")],
        Some(deep.as_bytes()),
    );
    assert_eq!(r.status, 400);
    assert_eq!(get(&sb, "/version").status, 200, "still serving");
}

#[test]
fn validation_follows_the_v1_28_strategies() {
    let sb = sandbox();
    namespace(&sb, "shop");
    let mut bad = deployment("web", "nginx:1");
    bad["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    let r = send_json(&sb, "POST", DEPLOYMENTS, "application/json", &bad);
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["message"],
        json!(
            "Deployment.apps \"web\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`"
        )
    );
    let mut bad = deployment("web", "");
    bad["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("image");
    let r = send_json(&sb, "POST", DEPLOYMENTS, "application/json", &bad);
    assert_eq!(
        r.json()["details"]["causes"][0],
        json!({"reason": "FieldValueRequired", "message": "Required value", "field": "spec.template.spec.containers[0].image"})
    );
    let r = send_json(
        &sb,
        "POST",
        "/api/v1/namespaces/shop/services",
        "application/json",
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "1web"}, "spec": {"ports": [{"port": 80}]}}),
    );
    assert_eq!(r.status, 422);
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("a DNS-1035 label must consist of lower case alphanumeric characters")
    );
    let ing = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "x"},
        "spec": {"rules": [{"http": {"paths": [{"path": "/a//b", "pathType": "Exact", "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}});
    let r = send_json(
        &sb,
        "POST",
        "/apis/networking.k8s.io/v1/namespaces/shop/ingresses",
        "application/json",
        &ing,
    );
    assert_eq!(
        r.json()["details"]["causes"][0]["message"],
        json!("Invalid value: \"/a//b\": must not contain '//'")
    );
    let r = send_json(
        &sb,
        "POST",
        "/api/v1/namespaces",
        "application/json",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}}),
    );
    assert_eq!(
        r.json()["details"]["causes"][0]["message"],
        json!("Invalid value: \"a.b\": must not contain dots")
    );
}

#[test]
fn generation_defaulting_and_no_op_rules() {
    let sb = sandbox();
    namespace(&sb, "shop");
    let svc = send_json(&sb, "POST", "/api/v1/namespaces/shop/services", "application/json",
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}})).json();
    assert!(svc["metadata"].get("generation").is_none());
    assert_eq!(svc["spec"]["type"], json!("ClusterIP"));
    // A PUT without clusterIP keeps the allocated one (and is then a no-op).
    let mut again = svc.clone();
    again["spec"].as_object_mut().unwrap().remove("clusterIP");
    again["spec"].as_object_mut().unwrap().remove("clusterIPs");
    let r = send_json(
        &sb,
        "PUT",
        "/api/v1/namespaces/shop/services/web",
        "application/json",
        &again,
    )
    .json();
    assert_eq!(r["spec"]["clusterIP"], svc["spec"]["clusterIP"]);
    assert_eq!(
        r["metadata"]["resourceVersion"],
        svc["metadata"]["resourceVersion"]
    );

    let mut d = deployment("web", "nginx:1");
    d["spec"]["template"]["spec"]["containers"][0]["resources"] =
        json!({"limits": {"cpu": "0.5", "memory": "1024Mi"}});
    d["spec"]["template"]["spec"]["containers"][0]["livenessProbe"] =
        json!({"httpGet": {"port": 8080}});
    let created = send_json(&sb, "POST", DEPLOYMENTS, "application/json", &d).json();
    let c = &created["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        c["resources"]["limits"],
        json!({"cpu": "500m", "memory": "1Gi"})
    );
    assert_eq!(
        c["livenessProbe"],
        json!({"httpGet": {"path": "/", "port": 8080, "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
    );
    let merge = |p: Value| {
        send_json(
            &sb,
            "PATCH",
            &format!("{DEPLOYMENTS}/web"),
            "application/merge-patch+json",
            &p,
        )
        .json()
    };
    assert_eq!(
        merge(json!({"metadata": {"labels": {"x": "1"}}}))["metadata"]["generation"],
        json!(1)
    );
    assert_eq!(
        merge(json!({"metadata": {"annotations": {"x": "1"}}}))["metadata"]["generation"],
        json!(2)
    );
    let same = merge(json!({"metadata": {"annotations": {"x": "1"}}}));
    assert_eq!(same["metadata"]["generation"], json!(2));
    let rv = same["metadata"]["resourceVersion"].clone();
    assert_eq!(
        merge(json!({"spec": {"paused": false}}))["metadata"]["resourceVersion"],
        rv,
        "no-op patch keeps the rv"
    );
    let status_attempt = merge(json!({"status": {"replicas": 5}}));
    assert_eq!(
        status_attempt["status"],
        json!({}),
        "the main resource never writes status"
    );
}

#[test]
fn unknown_fields_warn_by_default_and_fail_when_strict() {
    let sb = sandbox();
    namespace(&sb, "shop");
    let mut d = deployment("web", "nginx:1");
    d["spec"]["x"] = json!(1);
    let r = send_json(&sb, "POST", DEPLOYMENTS, "application/json", &d);
    assert_eq!(r.status, 201);
    assert_eq!(
        r.header_all("Warning"),
        ["299 - \"unknown field \\\"spec.x\\\"\""]
    );
    assert!(r.json()["spec"].get("x").is_none());
    let r = send_json(
        &sb,
        "PATCH",
        &format!("{DEPLOYMENTS}/web?fieldValidation=Strict"),
        "application/merge-patch+json",
        &json!({"spec": {"y": 1}}),
    );
    // A patch's strict errors are a 422 naming the patched object.
    assert_eq!(r.status, 422);
    let message = r.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.starts_with(" \"\" is invalid: patch: Invalid value: \"{\\\"apiVersion\\\":")
            && message.ends_with("\": strict decoding error: unknown field \"spec.y\""),
        "{message}"
    );
    let r = send_json(
        &sb,
        "PATCH",
        &format!("{DEPLOYMENTS}/web?fieldValidation=Ignore"),
        "application/merge-patch+json",
        &json!({"spec": {"y": 1}}),
    );
    assert!(r.header("Warning").is_none());
}

#[test]
fn a_deleted_namespace_stays_terminating_with_its_content_until_finalized() {
    let sb = sandbox();
    sb.seed_demo_app("demo", "web").unwrap();
    let t = admin(&sb);
    let r = request(
        &sb,
        Some(&t),
        "DELETE",
        "/api/v1/namespaces/demo",
        &[],
        None,
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"]["phase"], json!("Terminating"));
    // No namespace controller runs: the content stays, new content is refused.
    assert_eq!(sb.list("/apis/networking.k8s.io/v1/ingresses").len(), 3);
    let r = send_json(
        &sb,
        "POST",
        "/api/v1/namespaces/demo/services",
        "application/json",
        &json!({"metadata": {"name": "late"}, "spec": {"ports": [{"port": 80}]}}),
    );
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json()["message"],
        json!(
            "services \"late\" is forbidden: unable to create new content in namespace demo because it is being terminated"
        )
    );
    // Emptying spec.finalizers (the namespace controller's last step) removes it.
    let mut ns = get(&sb, "/api/v1/namespaces/demo").json();
    ns["spec"]["finalizers"] = json!([]);
    let r = send_json(
        &sb,
        "PUT",
        "/api/v1/namespaces/demo/finalize",
        "application/json",
        &ns,
    );
    assert_eq!(r.status, 200);
    assert_eq!(get(&sb, "/api/v1/namespaces/demo").status, 404);
}

#[test]
fn status_and_scale_subresources() {
    let sb = sandbox();
    sb.seed_demo_app("demo", "web").unwrap();
    let web = "/apis/apps/v1/namespaces/demo/deployments/web";
    let scale = get(&sb, &format!("{web}/scale")).json();
    assert_eq!(scale["kind"], json!("Scale"));
    assert_eq!(scale["spec"]["replicas"], json!(2));
    assert_eq!(scale["status"]["selector"], json!("app=web"));
    let r = send_json(
        &sb,
        "PATCH",
        &format!("{web}/scale"),
        "application/merge-patch+json",
        &json!({"spec": {"replicas": 4}}),
    );
    assert_eq!(
        (r.status, r.json()["spec"]["replicas"].clone()),
        (200, json!(4))
    );
    let d = sb.get(web).unwrap();
    assert_eq!(d["spec"]["replicas"], json!(4));
    assert_eq!(d["metadata"]["generation"], json!(2));
    let r = send_json(
        &sb,
        "PATCH",
        &format!("{web}/scale"),
        "application/merge-patch+json",
        &json!({"spec": {"replicas": -1}}),
    );
    assert_eq!(r.status, 422);
    let mut stale = scale.clone();
    stale["spec"]["replicas"] = json!(1);
    assert_eq!(
        send_json(
            &sb,
            "PUT",
            &format!("{web}/scale"),
            "application/json",
            &stale
        )
        .status,
        409
    );

    // Status writes change only status, never the generation.
    let r = send_json(
        &sb,
        "PATCH",
        &format!("{web}/status"),
        "application/merge-patch+json",
        &json!({"status": {"replicas": 4, "observedGeneration": 2}, "spec": {"replicas": 9}}),
    );
    assert_eq!(r.status, 200);
    let d = sb.get(web).unwrap();
    assert_eq!(d["status"]["replicas"], json!(4));
    assert_eq!(d["spec"]["replicas"], json!(4));
    assert_eq!(d["metadata"]["generation"], json!(2));
    let status_entry = d["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["subresource"] == "status")
        .cloned()
        .unwrap();
    assert_eq!(
        status_entry["fieldsV1"],
        json!({"f:status": {"f:observedGeneration": {}, "f:replicas": {}}})
    );
    assert_eq!(
        get(&sb, &format!("{web}/status")).json()["status"]["replicas"],
        json!(4)
    );
    assert_eq!(
        get(&sb, "/api/v1/namespaces/demo/services/web/scale").status,
        404
    );
}

#[test]
fn services_are_created_by_put_and_oversized_bodies_rejected() {
    let sb = sandbox();
    namespace(&sb, "shop");
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "api"}, "spec": {"ports": [{"port": 80}]}});
    let r = send_json(
        &sb,
        "PUT",
        "/api/v1/namespaces/shop/services/api",
        "application/json",
        &svc,
    );
    assert_eq!(r.status, 201, "Services allow create on update");
    let r = send_json(
        &sb,
        "PUT",
        &format!("{DEPLOYMENTS}/web"),
        "application/json",
        &deployment("web", "x:1"),
    );
    assert_eq!(r.status, 404, "Deployments do not");
    let big = vec![b' '; 3 * 1024 * 1024 + 1];
    let r = request(
        &sb,
        Some(&admin(&sb)),
        "POST",
        DEPLOYMENTS,
        &[("Content-Type", "application/json")],
        Some(&big),
    );
    assert_eq!(
        (r.status, r.json()["reason"].clone()),
        (413, json!("RequestEntityTooLarge"))
    );
}

#[test]
fn aggregated_discovery_honours_etags() {
    let sb = sandbox();
    let accept = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    let r = request(
        &sb,
        Some(&admin(&sb)),
        "GET",
        "/apis",
        &[("Accept", accept)],
        None,
    );
    assert_eq!(r.json()["kind"], json!("APIGroupDiscoveryList"));
    let etag = r.header("Etag").unwrap().to_string();
    let r = request(
        &sb,
        Some(&admin(&sb)),
        "GET",
        "/apis",
        &[("Accept", accept), ("If-None-Match", &etag)],
        None,
    );
    assert_eq!(r.status, 304);
    let r = get(&sb, "/apis/batch/v1");
    assert_eq!(r.json()["groupVersion"], json!("batch/v1"));
    let r = get(&sb, "/api/v1/namespaces/default/pods");
    assert_eq!(
        (r.status, r.json()["kind"].clone()),
        (200, json!("PodList"))
    );
    // A watch of a resource that never changes stays open until it times out.
    let t = std::time::Instant::now();
    let r = get(
        &sb,
        "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1",
    );
    assert_eq!((r.status, r.body.len()), (200, 0));
    assert!(t.elapsed() >= Duration::from_millis(900));
}
