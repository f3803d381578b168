//! CPU cost of the pure pipeline for a large application: parse an endpoints file of 10 000
//! endpoints in 1 000 scope groups, plan against 1 000 live managed Ingresses (500 of which
//! change one path), and render the diff. `cargo bench --bench plan`; the performance report
//! (`cargo run --release -p appupdate-bench`) runs it and quotes the medians.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use kubectl_appupdate::diff_render::{self, RenderOptions};
use kubectl_appupdate::endpoints_file::{self, EndpointsFile};
use kubectl_appupdate::live_state::LiveState;
use kubectl_appupdate::plan::Plan;
use kubectl_appupdate::plan::RouteStyle;
use kubectl_appupdate::planner::{self, UpdateRequest};
use kubectl_appupdate::routes::refs::RouteFlags;
use kubectl_appupdate::routes::{self, BackendPort, RouteContext};
use kubectl_appupdate::updaters::{AutoscalerUpdate, ContainerUpdate};
use serde_json::json;

const APP: &str = "web";
const NS: &str = "demo";
const GROUPS: usize = 1_000;
const PER_GROUP: usize = 10;

/// 1 000 groups `[team-NNNN]` of 10 paths; with `changed`, the first 500 groups rename a path.
fn endpoints_text(changed: bool) -> String {
    let mut s = String::from("endpoints:\n");
    for k in 0..GROUPS {
        for j in 0..PER_GROUP {
            let suffix = if changed && k < GROUPS / 2 && j == PER_GROUP - 1 {
                "-v2"
            } else {
                ""
            };
            let _ = write!(
                s,
                "  - path: /t{k:04}/e{j}{suffix}\n    scopes: [team-{k:04}, read]\n"
            );
        }
    }
    s
}

fn live_state() -> LiveState {
    let old = endpoints_file::parse(&endpoints_text(false), "old.yaml").unwrap();
    let mut ctx = RouteContext::new(APP, BackendPort::Number(80));
    ctx.attachment.ingress_class = Some("nginx".into());
    let ingresses = routes::create_bodies(RouteStyle::NginxSnippet, &ctx, &old, NS)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(i, mut body)| {
            body["metadata"]["resourceVersion"] = json!((1000 + i).to_string());
            body["metadata"]["uid"] = json!(format!("00000000-0000-4000-8000-{i:012}"));
            body
        })
        .collect();
    LiveState {
        service: Some(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": APP, "namespace": NS},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
        })),
        ingresses,
        ..LiveState::default()
    }
}

fn plan(file: &EndpointsFile, live: &LiveState) -> Plan {
    let container_update = ContainerUpdate::default();
    let autoscaler_update = AutoscalerUpdate::default();
    let req = UpdateRequest {
        app: APP,
        namespace: NS,
        context: "bench",
        container: None,
        container_update: &container_update,
        autoscaler_update: &autoscaler_update,
        endpoints: Some(file),
        routes: &RouteFlags::default(),
    };
    planner::build_plan(&req, live).unwrap()
}

fn render(plan: &Plan, out: &mut Vec<u8>) {
    out.clear();
    diff_render::render_plan(out, plan, &RenderOptions::default()).unwrap();
}

fn bench(c: &mut Criterion) {
    let text = endpoints_text(true);
    let live = live_state();
    let file = endpoints_file::parse(&text, "endpoints.yaml").unwrap();
    let the_plan = plan(&file, &live);
    assert_eq!(the_plan.summary().update, GROUPS / 2);
    let mut out = Vec::with_capacity(8 << 20);

    let mut g = c.benchmark_group("plan_10k");
    g.sample_size(20);
    g.bench_function("parse", |b| {
        b.iter(|| endpoints_file::parse(black_box(&text), "endpoints.yaml").unwrap())
    });
    g.bench_function("build_plan", |b| b.iter(|| plan(black_box(&file), &live)));
    g.bench_function("render_plan", |b| {
        b.iter(|| render(black_box(&the_plan), &mut out))
    });
    g.bench_function("parse+plan+render", |b| {
        b.iter(|| {
            let f = endpoints_file::parse(black_box(&text), "endpoints.yaml").unwrap();
            let p = plan(&f, &live);
            render(&p, &mut out);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
