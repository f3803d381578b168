use std::time::Duration;

use futures::StreamExt;

use super::follow::{Explain, follow_observations};
use super::*;
use appupdate_kube::watch::Observation;
use appupdate_model::plan::ObjectChange;
use appupdate_model::rollout::Explanation;
use serde_json::{Value, json};

fn deployment(generation: i64, replicas: i64, status: Value) -> Value {
    json!({
        "metadata": {"name": "web", "generation": generation},
        "spec": {"replicas": replicas},
        "status": status,
    })
}

const FAIL_FAST: Stop = Stop {
    fail_fast: true,
    crash_restarts: 3,
};

/// Answers each look at the pods with the next of `answers` (the last one again once they run
/// out; nothing wrong when there are none), counting the looks.
#[derive(Default)]
struct Scripted {
    answers: Vec<Explanation>,
    looks: std::sync::atomic::AtomicUsize,
}

impl Explain for Scripted {
    fn explain<'a>(&'a self, _: &'a Value) -> futures::future::BoxFuture<'a, Explanation> {
        let n = self.looks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let answer = self
            .answers
            .get(n)
            .or(self.answers.last())
            .cloned()
            .unwrap_or_default();
        Box::pin(async move { answer })
    }
}

/// A pod of the new ReplicaSet that cannot pull its image: containerd's words for a tag that
/// does not exist.
fn image_not_found() -> Explanation {
    let pod = json!({
        "metadata": {"name": "web-7d9c-x2kq", "labels": {"pod-template-hash": "7d9c"}},
        "status": {"phase": "Pending", "containerStatuses": [{
            "name": "web", "ready": false, "restartCount": 0, "image": "nginx:notfound",
            "state": {"waiting": {"reason": "ErrImagePull", "message": "failed to pull and unpack image \"docker.io/library/nginx:notfound\": failed to resolve reference \"docker.io/library/nginx:notfound\": docker.io/library/nginx:notfound: not found"}}
        }]}
    });
    appupdate_model::rollout::explain(&deployment(2, 1, json!({})), &[pod], &[])
}

/// Stuck half-way: the controller saw the change, the new replica is not available.
fn stuck_half_way() -> Observation {
    Observation::Object(deployment(
        2,
        1,
        json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1, "availableReplicas": 1}),
    ))
}

fn follow_stuck(
    answers: Vec<Explanation>,
    stop: Stop,
    timeout: Duration,
) -> (Result<Waited, WaitError>, String, usize) {
    let rt = paused_runtime();
    let mut lines = Lines::new(Vec::new(), "deployment.apps/web", false);
    let stream =
        futures::stream::iter(vec![(0, stuck_half_way())]).chain(futures::stream::pending());
    let explainer = Scripted {
        answers,
        looks: Default::default(),
    };
    let r = rt.block_on(follow_observations(
        stream,
        &[Subject::Rollout],
        &target(),
        Some(timeout),
        stop,
        &explainer,
        &mut lines,
    ));
    let looks = explainer.looks.load(std::sync::atomic::Ordering::SeqCst);
    (r, String::from_utf8(lines.into_inner()).unwrap(), looks)
}

#[test]
fn an_image_the_registry_does_not_have_ends_the_wait_at_the_second_look_and_says_why() {
    let (r, lines, looks) =
        follow_stuck(vec![image_not_found()], FAIL_FAST, Duration::from_secs(600));
    let e = r.expect_err("the wait ends early");
    assert!(matches!(e, WaitError::CannotSucceed { .. }), "{e:?}");
    assert_eq!(
        looks, 2,
        "two observations of the same verdict, then no more"
    );
    let message = e.to_string();
    assert!(
        message.contains("cannot succeed without someone acting"),
        "{message}"
    );
    assert!(message.contains("web-7d9c-x2kq"), "{message}");
    assert!(message.contains("ErrImagePull"), "{message}");
    assert!(
        message.contains("--fail-fast=false waits until --timeout"),
        "{message}"
    );
    assert!(
        lines.contains(
            "Waiting for the rollout of deployment.apps/web: web-7d9c-x2kq: ErrImagePull"
        ),
        "the progress shows the current reason: {lines}"
    );
    match e {
        WaitError::CannotSucceed { after, .. } => {
            assert_eq!(after, LOOK_AFTER + LOOK_EVERY, "stopped at the second look")
        }
        _ => unreachable!(),
    }
}

#[test]
fn without_fail_fast_the_wait_runs_to_its_timeout_and_the_timeout_says_why() {
    let stop = Stop {
        fail_fast: false,
        ..FAIL_FAST
    };
    let (r, _, looks) = follow_stuck(vec![image_not_found()], stop, Duration::from_secs(30));
    let e = r.expect_err("timed out");
    assert!(matches!(e, WaitError::Timeout { .. }), "{e:?}");
    assert!(looks >= 3, "it kept looking: {looks}");
    let message = e.to_string();
    assert!(message.starts_with("timed out after 30s"), "{message}");
    assert!(
        message.contains("\n  pod web-7d9c-x2kq"),
        "the reasons follow, one per line: {message}"
    );
    assert_eq!(e.explanation(), Some(&image_not_found()));
}

#[test]
fn a_wait_with_nothing_wrong_to_say_times_out_as_before() {
    let (r, _, _) = follow_stuck(Vec::new(), FAIL_FAST, Duration::from_secs(30));
    let e = r.expect_err("timed out");
    assert!(matches!(e, WaitError::Timeout { .. }), "{e:?}");
    assert_eq!(e.explanation(), None);
    assert!(!e.to_string().contains('\n'), "{e}");
}

#[test]
fn a_rollout_that_completes_soon_costs_no_look_at_its_pods() {
    let rt = paused_runtime();
    let mut lines = Lines::new(Vec::new(), "deployment.apps/web", false);
    let done = Observation::Object(deployment(
        2,
        1,
        json!({"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}),
    ));
    // Half-way at once, complete 4 s later: before the first look.
    let stream = futures::stream::iter(vec![(0, stuck_half_way())]).chain(
        futures::stream::once(async move {
            tokio::time::sleep(LOOK_AFTER - Duration::from_secs(1)).await;
            (0, done)
        })
        .chain(futures::stream::pending()),
    );
    let explainer = Scripted {
        answers: vec![image_not_found()],
        looks: Default::default(),
    };
    let r = rt.block_on(follow_observations(
        stream,
        &[Subject::Rollout],
        &target(),
        Some(Duration::from_secs(60)),
        FAIL_FAST,
        &explainer,
        &mut lines,
    ));
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(explainer.looks.load(std::sync::atomic::Ordering::SeqCst), 0);
}

/// A runtime whose clock moves only when every task waits: timeouts without waiting.
fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

fn target() -> WaitTarget {
    WaitTarget {
        namespace: "shop".into(),
        name: "web".into(),
        context: "sandbox".into(),
    }
}

#[test]
fn durations_print_like_go() {
    assert_eq!(format_duration(Duration::from_secs(300)), "5m0s");
    assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
    assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
    assert_eq!(format_duration(Duration::from_secs(3661)), "1h1m1s");
}

fn run(
    obs: Vec<Observation>,
    timeout: Option<Duration>,
) -> (Result<RolloutState, WaitError>, String) {
    let rt = paused_runtime();
    let mut lines = Lines::new(Vec::new(), "deployment.apps/web", false);
    // After the given observations the stream stays open and silent, like an idle watch.
    let stream = futures::stream::iter(obs)
        .map(|o| (0, o))
        .chain(futures::stream::pending());
    let r = rt.block_on(follow_observations(
        stream,
        &[Subject::Rollout],
        &target(),
        timeout,
        FAIL_FAST,
        &Scripted::default(),
        &mut lines,
    ));
    let r = r.map(|waited| waited.rollout.expect("a complete rollout"));
    (r, String::from_utf8(lines.into_inner()).unwrap())
}

#[test]
fn plain_lines_follow_each_change_and_end_on_completion() {
    let o = |g, s| Observation::Object(deployment(g, 2, s));
    let (r, text) = run(
        vec![
            o(
                2,
                json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}),
            ),
            o(
                2,
                json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1, "availableReplicas": 2}),
            ),
            o(
                2,
                json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1, "availableReplicas": 2}),
            ),
            o(
                2,
                json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}),
            ),
        ],
        Some(Duration::from_secs(60)),
    );
    assert_eq!(r, Ok(RolloutState::Complete { replicas: 2 }));
    assert_eq!(
        text,
        "Waiting for the rollout of deployment.apps/web: waiting for the controller to observe generation 2 (observed 1)\n\
         Waiting for the rollout of deployment.apps/web: 1 of 2 new replicas updated\n\
         deployment.apps/web successfully rolled out (2 replicas updated and available)\n"
    );
}

#[test]
fn a_stalled_rollout_times_out_naming_the_object_and_what_it_waited_for() {
    let (r, _) = run(
        vec![Observation::Object(deployment(
            2,
            2,
            json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1, "availableReplicas": 1}),
        ))],
        Some(Duration::from_secs(300)),
    );
    assert_eq!(
        r.unwrap_err().to_string(),
        "timed out after 5m0s waiting for the rollout of deployment.apps/web in namespace \"shop\" \
         (context \"sandbox\"): 1 of 2 new replicas updated; the changes were applied, the rollout \
         may still finish (kubectl rollout status deployment/web -n shop)"
    );
}

#[test]
fn transient_problems_are_retried_and_fatal_ones_end_the_wait() {
    let (r, _) = run(
        vec![
            Observation::Problem {
                message: "connection refused".into(),
                fatal: false,
            },
            Observation::Object(deployment(
                1,
                1,
                json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}),
            )),
        ],
        None,
    );
    assert!(r.is_ok());
    let (r, _) = run(
        vec![Observation::Problem {
            message: "forbidden".into(),
            fatal: true,
        }],
        None,
    );
    assert!(matches!(r, Err(WaitError::Watch { .. })));
    let (r, _) = run(vec![Observation::Gone], None);
    assert!(matches!(r, Err(WaitError::Deleted { .. })));
}

fn route_ref(kind: Kind, name: &str) -> RouteRef {
    RouteRef {
        kind,
        name: name.into(),
    }
}

fn http_route(conditions: Value) -> Value {
    json!({
        "metadata": {"name": "web-a", "namespace": "shop", "generation": 1},
        "spec": {"parentRefs": [{"name": "public", "namespace": "gateways"}]},
        "status": {"parents": [{"parentRef": {"name": "public", "namespace": "gateways"},
                                "controllerName": "example.com/gw", "conditions": conditions}]},
    })
}

fn cond(kind: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": kind, "status": status, "reason": reason, "message": message,
           "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1})
}

fn complete_deployment() -> Value {
    deployment(
        1,
        1,
        json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}),
    )
}

/// Follows the rollout (subject 0), the HTTPRoute `web-a` (1) and the Ingress `web-b` (2).
fn run_all(
    obs: Vec<(usize, Observation)>,
    timeout: Option<Duration>,
) -> (Result<Waited, WaitError>, String) {
    let rt = paused_runtime();
    let followed = Followed {
        rollout: true,
        routes: vec![
            route_ref(Kind::HttpRoute, "web-a"),
            route_ref(Kind::Ingress, "web-b"),
        ],
    };
    let mut lines = Lines::new(Vec::new(), "deployment.apps/web", false);
    let stream = futures::stream::iter(obs).chain(futures::stream::pending());
    let r = rt.block_on(follow_observations(
        stream,
        &followed.subjects(),
        &target(),
        timeout,
        FAIL_FAST,
        &Scripted::default(),
        &mut lines,
    ));
    (r, String::from_utf8(lines.into_inner()).unwrap())
}

#[test]
fn the_wait_ends_once_the_rollout_and_every_route_are_done() {
    let accepted = http_route(json!([
        cond("Accepted", "True", "Accepted", ""),
        cond("ResolvedRefs", "True", "ResolvedRefs", "")
    ]));
    let addressed = json!({"metadata": {"name": "web-b"},
                           "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}});
    let mut unreported = http_route(json!([]));
    unreported["status"] = json!({});
    let (r, text) = run_all(
        vec![
            (1, Observation::Object(unreported)),
            (0, Observation::Object(complete_deployment())),
            (1, Observation::Object(accepted)),
            (
                2,
                Observation::Object(json!({"metadata": {"name": "web-b"}})),
            ),
            (2, Observation::Object(addressed)),
        ],
        Some(Duration::from_secs(60)),
    );
    let waited = r.unwrap();
    assert_eq!(
        text,
        "Waiting for httproute.gateway.networking.k8s.io/web-a: Gateway gateways/public has not reported on it yet\n\
         deployment.apps/web successfully rolled out (1 replica updated and available)\n\
         httproute.gateway.networking.k8s.io/web-a accepted by Gateway gateways/public\n\
         Waiting for ingress.networking.k8s.io/web-b: no address from its Ingress controller yet\n\
         ingress.networking.k8s.io/web-b has an address: 203.0.113.7\n"
    );
    assert_eq!(
        waited.lines("web"),
        [
            "deployment.apps/web successfully rolled out (1 replica updated and available)",
            "httproute.gateway.networking.k8s.io/web-a accepted by Gateway gateways/public",
            "ingress.networking.k8s.io/web-b has an address: 203.0.113.7",
        ]
    );
    assert_eq!(
        waited.summary(),
        "successfully rolled out (1 replica updated and available); 2 routes taken up"
    );
}

#[test]
fn a_refused_route_ends_the_wait_at_once_naming_parent_reason_and_message() {
    let refused = http_route(json!([
        cond("Accepted", "True", "Accepted", ""),
        cond(
            "ResolvedRefs",
            "False",
            "BackendNotFound",
            "Service \"web\" not found\u{1b}[2J"
        )
    ]));
    // No timeout: the refusal ends it, not the clock.
    let (r, text) = run_all(vec![(1, Observation::Object(refused))], None);
    let err = r.unwrap_err();
    assert!(!err.is_rollout());
    assert_eq!(
        err.to_string(),
        "httproute.gateway.networking.k8s.io/web-a in namespace \"shop\" (context \"sandbox\") was refused: \
         Gateway gateways/public set ResolvedRefs=False (BackendNotFound: \"Service \\\"web\\\" not found\\e[2J\"); \
         the changes were applied but it does not serve them: fix what it says, or undo them with \
         kubectl appupdate web -n shop --context sandbox --undo"
    );
    // Said once, by the error.
    assert!(!text.contains("BackendNotFound"), "{text}");
}

#[test]
fn a_timeout_names_every_object_still_pending_and_what_it_waits_for() {
    let mut unreported = http_route(json!([]));
    unreported["status"] = json!({});
    let (r, _) = run_all(
        vec![
            (0, Observation::Object(complete_deployment())),
            (1, Observation::Object(unreported)),
        ],
        Some(Duration::from_secs(2)),
    );
    assert_eq!(
        r.unwrap_err().to_string(),
        "timed out after 2s waiting for httproute.gateway.networking.k8s.io/web-a (Gateway gateways/public \
         has not reported on it yet), ingress.networking.k8s.io/web-b (no status seen yet) in namespace \"shop\" \
         (context \"sandbox\"); the changes were applied and may still be taken up (kubectl get -n shop -o yaml \
         httproute.gateway.networking.k8s.io/web-a ingress.networking.k8s.io/web-b shows their status), or \
         undo them with kubectl appupdate web -n shop --context sandbox --undo"
    );
    // The rollout alone pending: its own message, as without routes.
    let accepted = http_route(json!([
        cond("Accepted", "True", "Accepted", ""),
        cond("ResolvedRefs", "True", "ResolvedRefs", "")
    ]));
    let addressed = json!({"metadata": {"name": "web-b"},
                           "status": {"loadBalancer": {"ingress": [{"hostname": "lb"}]}}});
    let (r, _) = run_all(
        vec![
            (1, Observation::Object(accepted)),
            (2, Observation::Object(addressed)),
        ],
        Some(Duration::from_secs(2)),
    );
    let err = r.unwrap_err();
    assert!(matches!(err, WaitError::Timeout { .. }), "{err}");
    assert!(err.is_rollout());
}

#[test]
fn a_route_deleted_or_unwatchable_ends_the_wait_naming_it() {
    let (r, _) = run_all(vec![(2, Observation::Gone)], None);
    assert_eq!(
        r.unwrap_err().to_string(),
        "ingress.networking.k8s.io/web-b in namespace \"shop\" (context \"sandbox\") was deleted while \
         waiting for it to be taken up; the changes had been applied"
    );
    let (r, _) = run_all(
        vec![(
            1,
            Observation::Problem {
                message: "forbidden".into(),
                fatal: true,
            },
        )],
        None,
    );
    assert!(matches!(r, Err(WaitError::RouteWatch { .. })));
}

fn report(entries: Vec<(Kind, &str, Action, Outcome)>) -> Report {
    Report {
        entries: entries
            .into_iter()
            .map(|(kind, name, action, outcome)| {
                let mut c = ObjectChange::sample(name, action);
                c.kind = kind;
                (std::sync::Arc::new(c), outcome)
            })
            .collect(),
        stopped_in_preflight: false,
        interrupted: None,
    }
}

#[test]
fn the_routes_written_are_followed_and_deleted_ones_are_not() {
    let r = report(vec![
        (
            Kind::HorizontalPodAutoscaler,
            "web",
            Action::Update,
            Outcome::Applied,
        ),
        (Kind::HttpRoute, "web-new", Action::Create, Outcome::Applied),
        (
            Kind::HttpRoute,
            "web-upd",
            Action::Update,
            Outcome::AlreadyDone,
        ),
        (
            Kind::HttpRoute,
            "web-same",
            Action::Unchanged,
            Outcome::Unchanged,
        ),
        (Kind::Ingress, "web-old", Action::Delete, Outcome::Applied),
        (Kind::Ingress, "web-ing", Action::Update, Outcome::Applied),
    ]);
    assert_eq!(
        Followed::after_writes(&r, false),
        Followed {
            rollout: false,
            routes: vec![
                route_ref(Kind::HttpRoute, "web-new"),
                route_ref(Kind::HttpRoute, "web-upd"),
                route_ref(Kind::Ingress, "web-ing"),
            ],
        }
    );
    // --image: the rollout too, even when the image was already set.
    assert!(Followed::after_writes(&r, true).rollout);
    // An undo that wrote the Deployment.
    let undo = report(vec![(
        Kind::Deployment,
        "web",
        Action::Update,
        Outcome::Applied,
    )]);
    assert!(Followed::after_writes(&undo, false).rollout);
    // Bounds only: nothing to follow.
    let bounds = report(vec![(
        Kind::HorizontalPodAutoscaler,
        "web",
        Action::Update,
        Outcome::Applied,
    )]);
    assert!(Followed::after_writes(&bounds, false).is_empty());
}
