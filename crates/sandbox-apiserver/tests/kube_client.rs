//! kube-rs (the plugin's client) against the sandbox: typed decoding of every served kind,
//! patches with dry run, optimistic-concurrency errors, RBAC errors and a runtime watcher.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use kube::{Client, Config};
use sandbox_apiserver::{Sandbox, SandboxOptions};
use serde_json::json;

async fn client(sb: &Sandbox, context: &str) -> Client {
    let kc = Kubeconfig::from_yaml(&sb.kubeconfig_yaml("demo")).unwrap();
    let opts = KubeConfigOptions {
        context: Some(context.into()),
        ..Default::default()
    };
    Client::try_from(Config::from_custom_kubeconfig(kc, &opts).await.unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_decodes_patches_and_watches() {
    let sb = Sandbox::start(SandboxOptions::default()).unwrap();
    sb.seed_demo_app("demo", "web").unwrap();
    let c = client(&sb, "sandbox").await;
    let deploys: Api<Deployment> = Api::namespaced(c.clone(), "demo");
    let d = deploys.get("web").await.unwrap();
    assert_eq!(d.spec.replicas, Some(2));
    let svc: Service = Api::namespaced(c.clone(), "demo").get("web").await.unwrap();
    assert!(svc.spec.unwrap().cluster_ip.is_some());
    let hpa: HorizontalPodAutoscaler = Api::namespaced(c.clone(), "demo").get("web").await.unwrap();
    assert_eq!(hpa.spec.max_replicas, 5);
    let ns: Namespace = Api::all(c.clone()).get("demo").await.unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Active"));
    let ings: Api<Ingress> = Api::namespaced(c.clone(), "demo");
    let managed = ings
        .list(&ListParams::default().labels("app=web,identifier"))
        .await
        .unwrap();
    assert_eq!(managed.items.len(), 2);

    let pp = PatchParams {
        dry_run: true,
        field_manager: Some("kubectl-appupdate".into()),
        ..Default::default()
    };
    let image = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "registry.example.com/web:2.0"}]}}}});
    let dry = deploys
        .patch("web", &pp, &Patch::Strategic(&image))
        .await
        .unwrap();
    assert_eq!(dry.metadata.generation, Some(2));
    assert_eq!(
        deploys.get("web").await.unwrap().metadata.generation,
        Some(1),
        "dry run stored nothing"
    );
    let pp = PatchParams {
        field_manager: Some("kubectl-appupdate".into()),
        ..Default::default()
    };
    let real = deploys
        .patch("web", &pp, &Patch::Merge(&json!({"spec": {"replicas": 3}})))
        .await
        .unwrap();
    assert_eq!(real.spec.replicas, Some(3));

    let mut stale = d.clone();
    stale.spec.replicas = Some(9);
    let err = deploys
        .replace("web", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
            assert!(s.message.contains("the object has been modified"));
        }
        other => panic!("expected a 409, got {other:?}"),
    }

    let ro = client(&sb, "sandbox-readonly").await;
    let err = Api::<Deployment>::namespaced(ro, "demo")
        .patch("web", &PatchParams::default(), &Patch::Merge(&json!({})))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 403 && s.reason == "Forbidden"),
        "{err:?}"
    );

    let mut stream = watcher(deploys.clone(), watcher::Config::default()).boxed();
    let mut seen_init = false;
    let mut updated = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, stream.next()).await {
        match ev.unwrap() {
            watcher::Event::InitDone => {
                seen_init = true;
                sb.update("/apis/apps/v1/namespaces/demo/deployments/web", |d| {
                    d["spec"]["replicas"] = json!(4)
                })
                .unwrap();
            }
            watcher::Event::Apply(d) if d.spec.replicas == Some(4) => {
                updated = true;
                break;
            }
            _ => {}
        }
    }
    assert!(seen_init && updated, "init {seen_init}, update {updated}");
}

/// Sandboxes on one shared runtime (`SandboxOptions::runtime`), as a benchmark of thousands
/// runs them: each serves with a CA of its own, and dropping one stops it alone.
#[test]
fn sandboxes_on_a_shared_runtime_each_keep_their_own_ca() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let start = || {
        let sb = Sandbox::start(SandboxOptions {
            runtime: Some(rt.handle().clone()),
            ..SandboxOptions::default()
        })
        .unwrap();
        sb.seed_demo_app("demo", "web").unwrap();
        sb
    };
    let (one, two) = (start(), start());
    assert_ne!(one.ca_pem(), two.ca_pem());
    let (one_addr, two_url) = (one.addr(), two.url().to_owned());
    rt.block_on(async {
        for sb in [&one, &two] {
            let d: Deployment = Api::namespaced(client(sb, "sandbox").await, "demo")
                .get("web")
                .await
                .unwrap();
            assert_eq!(d.metadata.name.as_deref(), Some("web"));
        }
        // The first sandbox's CA does not vouch for the second one's certificate.
        let yaml = one.kubeconfig_yaml("demo").replace(one.url(), &two_url);
        let kc = Kubeconfig::from_yaml(&yaml).unwrap();
        let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap();
        let crossed: Api<Deployment> = Api::namespaced(Client::try_from(config).unwrap(), "demo");
        assert!(crossed.get("web").await.is_err());
    });
    drop(one);
    // Dropped: its listener closes (polled: its task ends on the shared runtime's threads).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(one_addr).is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "a dropped sandbox still accepts connections"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    rt.block_on(async {
        let d: Deployment = Api::namespaced(client(&two, "sandbox").await, "demo")
            .get("web")
            .await
            .unwrap();
        assert_eq!(d.metadata.name.as_deref(), Some("web"));
    });
}
