//! kubectl as a real client: TLS, the generated kubeconfig, discovery, tables, create/replace,
//! the three patch types and server-side apply, label, delete, watch, and the read-only identity;
//! plus the standalone `sandbox-apiserver serve` command.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sandbox_apiserver::{Sandbox, SandboxOptions};

fn kubectl_available() -> bool {
    let ok = Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("\n*** SKIPPED: kubectl is not on PATH — the kubectl tests did not run ***\n");
    }
    ok
}

struct Kubectl {
    kubeconfig: PathBuf,
    home: PathBuf,
}

impl Kubectl {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("kubectl");
        c.env_remove("KUBECONFIG")
            .env("HOME", &self.home)
            .env_remove("NO_COLOR")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args);
        c
    }
    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

fn setup(sb: &Sandbox, tag: &str) -> (Kubectl, common::TempDir) {
    let dir = common::TempDir::new(tag);
    let kubeconfig = dir.path().join("kubeconfig");
    sb.write_kubeconfig(&kubeconfig, "demo").unwrap();
    (
        Kubectl {
            kubeconfig,
            home: dir.path().to_path_buf(),
        },
        dir,
    )
}

const DEPLOYMENT_YAML: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  labels:
    app: api
spec:
  selector:
    matchLabels:
      app: api
  template:
    metadata:
      labels:
        app: api
    spec:
      containers:
      - name: api
        image: nginx:1.25
";

#[test]
fn kubectl_reads_and_writes_through_the_generated_kubeconfig() {
    if !kubectl_available() {
        return;
    }
    let sb = Sandbox::start(SandboxOptions::default()).unwrap();
    sb.seed_demo_app("demo", "web").unwrap();
    let (k, dir) = setup(&sb, "rw");

    let yaml = k.ok(&["get", "deployment", "web", "-o", "yaml"]);
    assert!(
        yaml.contains("image: registry.example.com/web:1.0"),
        "{yaml}"
    );
    assert!(yaml.contains("resourceVersion:"));
    let table = k.ok(&["get", "deploy,svc,hpa,ing"]);
    assert!(
        table.contains("deployment.apps/web") && table.contains("0/2"),
        "{table}"
    );
    assert!(
        table.contains("service/web") && table.contains("ClusterIP") && table.contains("80/TCP"),
        "{table}"
    );
    assert!(table.contains("web-unmanaged"), "{table}");

    let file = dir.path().join("api.yaml");
    std::fs::write(&file, DEPLOYMENT_YAML).unwrap();
    assert!(
        k.ok(&["create", "-f", file.to_str().unwrap()])
            .contains("deployment.apps/api created")
    );
    let created = sb
        .get("/apis/apps/v1/namespaces/demo/deployments/api")
        .unwrap();
    assert_eq!(
        created["metadata"]["managedFields"][0]["manager"],
        "kubectl-create"
    );
    let log = sb.requests();
    let post = log.iter().find(|r| r.method == "POST").unwrap();
    assert!(
        post.query.contains("fieldValidation=Strict"),
        "kubectl leaves validation to the server: {}",
        post.query
    );

    std::fs::write(&file, DEPLOYMENT_YAML.replace("nginx:1.25", "nginx:1.26")).unwrap();
    assert!(
        k.ok(&["replace", "-f", file.to_str().unwrap()])
            .contains("deployment.apps/api replaced")
    );
    k.ok(&[
        "patch",
        "deployment",
        "api",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":3}}"#,
    ]);
    k.ok(&[
        "patch",
        "deployment",
        "api",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/replicas","value":2}]"#,
    ]);
    k.ok(&[
        "patch",
        "deployment",
        "api",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"api","image":"nginx:1.27"}]}}}}"#,
    ]);
    k.ok(&["label", "deployment", "api", "team=platform"]);
    let d = sb
        .get("/apis/apps/v1/namespaces/demo/deployments/api")
        .unwrap();
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    assert_eq!(d["metadata"]["labels"]["team"], "platform");
    assert_eq!(
        d["metadata"]["generation"], 5,
        "create, replace, two scalings, image; labels do not count"
    );

    // A stale replace conflicts like on a real cluster.
    let mut stale: serde_json::Value =
        serde_json::from_str(&k.ok(&["get", "deployment", "api", "-o", "json"])).unwrap();
    sb.update("/apis/apps/v1/namespaces/demo/deployments/api", |d| {
        d["metadata"]["annotations"] = serde_json::json!({"x": "y"})
    })
    .unwrap();
    stale["spec"]["replicas"] = serde_json::json!(4);
    std::fs::write(&file, serde_json::to_string(&stale).unwrap()).unwrap();
    let out = k.run(&["replace", "-f", file.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("the object has been modified; please apply your changes to the latest version and try again"));

    assert!(
        k.ok(&["delete", "deployment", "api"])
            .contains("deployment.apps \"api\" deleted")
    );
    let out = k.run(&["get", "deployment", "api"]);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("Error from server (NotFound): deployments.apps \"api\" not found")
    );
}

#[test]
fn the_read_only_context_can_read_but_not_delete() {
    if !kubectl_available() {
        return;
    }
    let sb = Sandbox::start(SandboxOptions::default()).unwrap();
    sb.seed_demo_app("demo", "web").unwrap();
    let (k, _dir) = setup(&sb, "ro");
    assert!(
        k.ok(&["--context", "sandbox-readonly", "get", "deployment", "web"])
            .contains("web")
    );
    let out = k.run(&[
        "--context",
        "sandbox-readonly",
        "delete",
        "deployment",
        "web",
    ]);
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "Error from server (Forbidden): deployments.apps \"web\" is forbidden: User \"readonly\" cannot delete resource \"deployments\" in API group \"apps\" in the namespace \"demo\""
    );
    assert!(
        sb.get("/apis/apps/v1/namespaces/demo/deployments/web")
            .is_some()
    );
    let out = k.run(&["--context", "sandbox-invalid", "get", "deployment", "web"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Unauthorized"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn kubectl_auth_can_i_and_whoami_answer_for_the_impersonated_user() {
    if !kubectl_available() {
        return;
    }
    let sb = Sandbox::start(SandboxOptions::default()).unwrap();
    sb.seed_demo_app("demo", "web").unwrap();
    let (k, _dir) = setup(&sb, "can-i");
    let can_i = |args: &[&str]| {
        let out = k.run(args);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
        )
    };
    assert_eq!(
        can_i(&["auth", "can-i", "patch", "deployments"]),
        (Some(0), "yes".into())
    );
    assert_eq!(
        can_i(&["--as", "readonly", "auth", "can-i", "patch", "deployments"]),
        (Some(1), "no".into())
    );
    assert_eq!(
        can_i(&["--as", "readonly", "auth", "can-i", "get", "deployments"]),
        (Some(0), "yes".into())
    );
    assert_eq!(
        can_i(&[
            "--context",
            "sandbox-readonly",
            "auth",
            "can-i",
            "list",
            "secrets"
        ]),
        (Some(1), "no".into())
    );
    let who = k.ok(&["--as", "jane", "--as-group", "team-a", "auth", "whoami"]);
    assert!(who.contains("jane") && who.contains("team-a"), "{who}");
}

#[test]
fn kubectl_get_watch_prints_changes() {
    if !kubectl_available() {
        return;
    }
    let sb = Sandbox::start(SandboxOptions::default()).unwrap();
    sb.seed_demo_app("demo", "web").unwrap();
    let (k, _dir) = setup(&sb, "watch");
    let mut child = k
        .command(&["get", "deployment", "web", "-w", "--request-timeout=10s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(first.starts_with("NAME"), "{first}");
    assert!(
        rx.recv_timeout(Duration::from_secs(5))
            .unwrap()
            .starts_with("web")
    );
    // kubectl drops the first event of a single-object watch (the ADDED replay of the current
    // state); change the object only once its watch is open, or the change would be that event.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sb.requests().iter().any(|r| r.query.contains("watch=true")) {
        assert!(Instant::now() < deadline, "kubectl never watched");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    sb.update("/apis/apps/v1/namespaces/demo/deployments/web", |d| {
        d["spec"]["replicas"] = serde_json::json!(4)
    })
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut lines = Vec::new();
    while !lines
        .iter()
        .any(|l: &String| l.starts_with("web") && l.contains("0/4"))
    {
        assert!(Instant::now() < deadline, "no updated row in {lines:?}");
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(200)) {
            lines.push(l);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn wait_for_line(reader: &mut impl BufRead, needle: &str, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    let mut line = String::new();
    while Instant::now() < deadline {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if line.contains(needle) {
            return line;
        }
    }
    panic!("no line containing {needle:?}");
}

#[test]
fn the_standalone_command_serves_the_demo_until_terminated() {
    let dir = common::TempDir::new("serve");
    let kubeconfig = dir.path().join("kubeconfig");
    let log = dir.path().join("requests.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandbox-apiserver"))
        .args([
            "serve",
            "--demo",
            "--app",
            "shop",
            "--namespace",
            "sandbox",
            "--rollout",
            "auto:200ms",
            "--kubeconfig",
        ])
        .arg(&kubeconfig)
        .arg("--request-log")
        .arg(&log)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let line = wait_for_line(&mut stderr, "serving", Duration::from_secs(20));
    assert!(
        line.contains("https://127.0.0.1:") && line.contains(kubeconfig.to_str().unwrap()),
        "{line}"
    );
    if kubectl_available() {
        let k = Kubectl {
            kubeconfig: kubeconfig.clone(),
            home: dir.path().to_path_buf(),
        };
        let out = k.ok(&["get", "deploy,svc,hpa,ing"]);
        assert!(
            out.contains("deployment.apps/shop") && out.contains("shop-unmanaged"),
            "{out}"
        );
        let logged = std::fs::read_to_string(&log).unwrap();
        let entries: Vec<serde_json::Value> = logged
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(entries.iter().any(|e| e["path"]
            == "/apis/apps/v1/namespaces/sandbox/deployments"
            && e["status"] == 200));
    }
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            assert!(s.success(), "exit status {s:?}");
            break;
        }
        assert!(Instant::now() < deadline, "did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut rest = String::new();
    let _ = stderr.read_to_string(&mut rest);
}

const ROUTE_YAML: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: web-route
  labels:
    app: web
spec:
  parentRefs:
  - name: gw
  hostnames:
  - shop.example.com
  rules:
  - matches:
    - path:
        type: PathPrefix
        value: /web/health
    filters:
    - type: URLRewrite
      urlRewrite:
        path:
          type: ReplacePrefixMatch
          replacePrefixMatch: /health
    backendRefs:
    - name: web
      port: 80
";

#[test]
fn kubectl_manages_config_maps_ingress_classes_and_http_routes() {
    if !kubectl_available() {
        return;
    }
    let sb = Sandbox::start(SandboxOptions::default()).unwrap();
    sb.seed_demo_app("demo", "web").unwrap();
    sb.create_ingress_class("public", true).unwrap();
    let (k, dir) = setup(&sb, "kinds");

    let classes = k.ok(&["get", "ingressclass"]);
    assert!(
        classes.contains("CONTROLLER")
            && classes.contains("public")
            && classes.contains("k8s.io/ingress-nginx"),
        "{classes}"
    );
    let resources = k.ok(&["api-resources", "--api-group=gateway.networking.k8s.io"]);
    assert!(
        resources.contains("httproutes")
            && resources.contains("gtw")
            && resources.contains("HTTPRoute"),
        "{resources}"
    );

    k.ok(&[
        "create",
        "configmap",
        "web-history",
        "--from-literal=records=[]",
    ]);
    let cms = k.ok(&["get", "configmaps"]);
    assert!(cms.contains("web-history") && cms.contains("DATA"), "{cms}");

    let file = dir.path().join("route.yaml");
    std::fs::write(&file, ROUTE_YAML).unwrap();
    assert!(
        k.ok(&["apply", "-f", file.to_str().unwrap()])
            .contains("httproute.gateway.networking.k8s.io/web-route created")
    );
    let routes = k.ok(&["get", "httproutes"]);
    assert!(
        routes.contains("HOSTNAMES") && routes.contains("[\"shop.example.com\"]"),
        "{routes}"
    );
    std::fs::write(
        &file,
        ROUTE_YAML.replace("shop.example.com", "www.example.com"),
    )
    .unwrap();
    assert!(
        k.ok(&["apply", "-f", file.to_str().unwrap()])
            .contains("httproute.gateway.networking.k8s.io/web-route configured")
    );
    let route = sb
        .get("/apis/gateway.networking.k8s.io/v1/namespaces/demo/httproutes/web-route")
        .unwrap();
    assert_eq!(
        route["spec"]["hostnames"],
        serde_json::json!(["www.example.com"])
    );
    assert_eq!(route["metadata"]["generation"], 2);
    assert_eq!(
        route["spec"]["rules"][0]["backendRefs"][0]["kind"], "Service",
        "the CRD's defaults are applied"
    );

    std::fs::write(&file, ROUTE_YAML.replace("/web/health", "web//health")).unwrap();
    let out = k.run(&["apply", "-f", file.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("The HTTPRoute \"web-route\" is invalid")
            && err.contains("spec.rules[0].matches[0].path: Invalid value: \"object\": must not contain '//' when type one of ['Exact', 'PathPrefix']"),
        "{err}"
    );

    let out = k.run(&["--context", "sandbox-readonly", "get", "httproutes"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains(
        "User \"readonly\" cannot list resource \"httproutes\" in API group \"gateway.networking.k8s.io\""
    ));
    assert!(
        k.ok(&["delete", "httproute", "web-route"])
            .contains("httproute.gateway.networking.k8s.io \"web-route\" deleted")
    );
    assert!(
        sb.get("/apis/gateway.networking.k8s.io/v1/namespaces/demo/httproutes/web-route")
            .is_none()
    );
}

#[test]
fn kubectl_shows_the_pods_replica_sets_and_events_of_a_failing_rollout() {
    if !kubectl_available() {
        return;
    }
    let sb = Sandbox::start(SandboxOptions {
        rollout: sandbox_apiserver::Rollout::Auto {
            delay: Duration::from_millis(200),
        },
        kubelet: sandbox_apiserver::KubeletTimings {
            pull_backoff_after: Duration::from_millis(100),
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    sb.seed_demo_app("demo", "web").unwrap();
    let (k, _dir) = setup(&sb, "kubectl-pods");
    k.ok(&["rollout", "status", "deployment/web", "--timeout=20s"]);
    k.ok(&[
        "set",
        "image",
        "deployment/web",
        "app=registry.example.com/web:notfound",
    ]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let pods = loop {
        let out = k.ok(&["get", "pods", "-l", "app=web", "-o", "wide"]);
        if out.contains("ImagePullBackOff") {
            break out;
        }
        assert!(Instant::now() < deadline, "no ImagePullBackOff: {out}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(pods.starts_with("NAME"), "{pods}");
    assert!(pods.contains("0/1     ImagePullBackOff"), "{pods}");
    assert!(pods.contains("1/1     Running"), "{pods}");
    assert!(pods.contains(sandbox_apiserver::NODE_NAME), "{pods}");
    let rs = k.ok(&["get", "rs", "-o", "wide"]);
    assert!(rs.contains("DESIRED   CURRENT   READY"), "{rs}");
    assert!(rs.contains("registry.example.com/web:notfound"), "{rs}");
    let events = k.ok(&["get", "events", "--field-selector", "reason=BackOff"]);
    assert!(
        events.contains("Back-off pulling image \"registry.example.com/web:notfound\""),
        "{events}"
    );
    let described = k.ok(&["describe", "pods", "-l", "app=web"]);
    assert!(
        described.contains("ErrImagePull") || described.contains("ImagePullBackOff"),
        "{described}"
    );
    let status = k.run(&["rollout", "status", "deployment/web", "--timeout=1s"]);
    assert!(!status.status.success(), "the rollout never completes");
}

/// A Deployment as a Helm 4 chart renders it: the labels and annotations Helm sets.
const HELM_DEPLOYMENT_YAML: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app.kubernetes.io/name: web
    app.kubernetes.io/instance: web
    app.kubernetes.io/managed-by: Helm
    helm.sh/chart: web-0.1.0
  annotations:
    meta.helm.sh/release-name: web
    meta.helm.sh/release-namespace: demo
spec:
  replicas: 2
  selector:
    matchLabels:
      app.kubernetes.io/name: web
  template:
    metadata:
      labels:
        app.kubernetes.io/name: web
    spec:
      containers:
      - name: app
        image: nginx:1.25
        ports:
        - containerPort: 8080
";

/// The managedFields entries of an object: (manager, operation).
fn managers(obj: &serde_json::Value) -> Vec<(String, String)> {
    obj.pointer("/metadata/managedFields")
        .and_then(serde_json::Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap_or("").to_string(),
                        e["operation"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn kubectl_applies_server_side_as_a_named_field_manager() {
    if !kubectl_available() {
        return;
    }
    let sb = Sandbox::start(SandboxOptions::default()).unwrap();
    sb.create(
        "/api/v1/namespaces",
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}}),
    )
    .unwrap();
    let (k, dir) = setup(&sb, "ssa");
    let file = dir.path().join("web.yaml");
    std::fs::write(&file, HELM_DEPLOYMENT_YAML).unwrap();
    let file = file.to_str().unwrap();
    let path = "/apis/apps/v1/namespaces/demo/deployments/web";

    let out = k.ok(&[
        "apply",
        "--server-side",
        "--field-manager",
        "helm",
        "-f",
        file,
    ]);
    assert!(
        out.contains("deployment.apps/web serverside-applied"),
        "{out}"
    );
    let web = sb.get(path).unwrap();
    assert_eq!(managers(&web), [("helm".to_string(), "Apply".to_string())]);
    let helm = &web["metadata"]["managedFields"][0]["fieldsV1"];
    assert!(
        helm.pointer("/f:metadata/f:labels/f:app.kubernetes.io~1managed-by")
            .is_some(),
        "{helm}"
    );
    assert!(
        helm.pointer("/f:spec/f:template/f:spec/f:containers/k:{\"name\":\"app\"}/f:image")
            .is_some(),
        "{helm}"
    );
    assert!(
        helm.pointer("/f:spec/f:revisionHistoryLimit").is_none(),
        "defaults are nobody's: {helm}"
    );

    // kubectl set image takes the image; helm's next apply conflicts on it.
    k.ok(&["set", "image", "deployment/web", "app=nginx:1.26"]);
    let refused = k.run(&[
        "apply",
        "--server-side",
        "--field-manager",
        "helm",
        "-f",
        file,
    ]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{err}");
    assert!(
        err.contains("Apply failed with 1 conflict: conflict with \"kubectl-set\" using apps/v1: .spec.template.spec.containers[name=\"app\"].image"),
        "{err}"
    );
    let web = sb.get(path).unwrap();
    assert_eq!(
        web["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.26",
        "a refused apply changes nothing"
    );

    let out = k.ok(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager",
        "helm",
        "-f",
        file,
    ]);
    assert!(out.contains("serverside-applied"), "{out}");
    let web = sb.get(path).unwrap();
    assert_eq!(
        web["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.25"
    );
    assert_eq!(
        managers(&web),
        [("helm".to_string(), "Apply".to_string())],
        "kubectl-set lost its only field"
    );
}
