//! CPU cost of the pure pipeline for a large application: parse an endpoints file of N
//! endpoints in N/10 scope groups, plan against N/10 live managed Ingresses (half of which
//! change one path), and render the diff; for N = 1 000, 10 000 and 100 000 (criterion groups
//! `plan_1k`, `plan_10k`, `plan_100k`), to show how the cost grows. `cargo bench --bench plan`
//! (`-- plan_10k` for one size); the performance report (`cargo run --release -p
//! appupdate-bench`) runs it and quotes the medians.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::hint::black_box;

use appupdate_model::compact_json;
use appupdate_model::endpoints_file::{self, EndpointsFile};
use appupdate_model::plan::RouteStyle;
use appupdate_plan::live::LiveState;
use appupdate_plan::planner::{self, UpdateRequest};
use appupdate_plan::routes::refs::RouteFlags;
use appupdate_plan::routes::{self, BackendPort, RouteContext};
use appupdate_plan::updaters::Plan;
use appupdate_plan::updaters::{AutoscalerUpdate, ContainerUpdate};
use appupdate_render::diff_render::{self, RenderOptions};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::json;

// The plugin's allocator (src/main.rs), so that these figures are the plugin's.
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const APP: &str = "web";
const NS: &str = "demo";
const PER_GROUP: usize = 10;

/// `groups` groups `[team-NNNN]` of 10 paths; with `changed`, the first half rename a path.
fn endpoints_text(groups: usize, changed: bool) -> String {
    let mut s = String::from("endpoints:\n");
    for k in 0..groups {
        for j in 0..PER_GROUP {
            let suffix = if changed && k < groups / 2 && j == PER_GROUP - 1 {
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

fn live_state(groups: usize) -> LiveState {
    let old = endpoints_file::parse(&endpoints_text(groups, false), "old.yaml").unwrap();
    let mut ctx = RouteContext::new(APP, BackendPort::Number(80));
    ctx.attachment.ingress_class = Some("nginx".into());
    let ingresses = routes::create_bodies(RouteStyle::NginxSnippet, &ctx, &old, NS)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(i, mut body)| {
            body["metadata"]["resourceVersion"] = json!((1000 + i).to_string());
            body["metadata"]["uid"] = json!(format!("00000000-0000-4000-8000-{i:012}"));
            // As the plugin reads a LIST: every array and object at its size.
            compact_json::copy(&body)
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

/// The plan; it moves the live routes it plans from out of `live`, as the plugin's does.
fn plan(file: &EndpointsFile, live: &mut LiveState) -> Plan {
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
        undo_of: None,
    };
    planner::build_plan(&req, live).unwrap()
}

fn render(plan: &Plan, out: &mut Vec<u8>) {
    out.clear();
    diff_render::render_plan(out, plan, &RenderOptions::default()).unwrap();
}

/// One size: `groups` scope groups of 10 endpoints.
fn bench_size(c: &mut Criterion, name: &str, groups: usize, samples: usize) {
    let text = endpoints_text(groups, true);
    let live = live_state(groups);
    let file = endpoints_file::parse(&text, "endpoints.yaml").unwrap();
    let the_plan = plan(&file, &mut live.clone());
    assert_eq!(the_plan.summary().update, groups / 2);
    let mut out = Vec::with_capacity(groups << 12);

    let mut g = c.benchmark_group(name);
    g.sample_size(samples);
    g.bench_function("parse", |b| {
        b.iter_with_large_drop(|| {
            endpoints_file::parse(black_box(&text), "endpoints.yaml").unwrap()
        })
    });
    // Each iteration plans from a fresh copy of the live state, made as the LIST reads it
    // (outside the timing). What an iteration made is dropped outside the timing too: the
    // plugin never frees a plan or a parsed file one value at a time (it exits).
    let fresh = || LiveState {
        ingresses: compact_json::copy_all(&live.ingresses),
        ..live.clone()
    };
    g.bench_function("build_plan", |b| {
        b.iter_batched_ref(
            fresh,
            |live| plan(black_box(&file), live),
            BatchSize::LargeInput,
        )
    });
    g.bench_function("render_plan", |b| {
        b.iter(|| render(black_box(&the_plan), &mut out))
    });
    g.bench_function("parse+plan+render", |b| {
        b.iter_batched_ref(
            fresh,
            |live| {
                let f = endpoints_file::parse(black_box(&text), "endpoints.yaml").unwrap();
                let p = plan(&f, live);
                render(&p, &mut out);
                (f, p)
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn bench(c: &mut Criterion) {
    bench_size(c, "plan_1k", 100, 50);
    bench_size(c, "plan_10k", 1_000, 20);
    bench_size(c, "plan_100k", 10_000, 10);
}

criterion_group!(benches, bench);
criterion_main!(benches);
