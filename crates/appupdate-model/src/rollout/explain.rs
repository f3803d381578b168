//! Why a rollout has not completed, in the cluster's own words ([`explain`]): from the pods of
//! the new ReplicaSet, their Warning events and the Deployment's `ReplicaFailure` condition.
//!
//! - **Pods.** Per pod and container (init containers too): the waiting reason and its message
//!   as the kubelet wrote it (`ErrImagePull`, `ImagePullBackOff`, `CrashLoopBackOff`,
//!   `CreateContainerConfigError`, `InvalidImageName`, `RunContainerError`, `ContainerCreating`…),
//!   with the last termination (`lastState.terminated`: its reason — `Error`, `OOMKilled`,
//!   `StartError` — and exit code) and the restart count; a container terminated now, with a
//!   non-zero exit or any reason but an init container's success; a running container that is
//!   not ready and has restarted (its last termination); `PodScheduled=False` with the
//!   scheduler's message; a `Failed` pod's reason (`Evicted`); and, for a pod with none of
//!   these, its `Ready=False` condition (a readiness probe that does not pass). Pods being
//!   deleted are left out. The pods with the most serious reasons come first (a failing
//!   container before a pod that cannot be scheduled, before one still being created or not
//!   ready), then by name; the first [`SHOWN_PODS`] are named, the rest counted
//!   ([`Explanation::more_pods`]).
//! - **Deployment.** Its `ReplicaFailure=True` condition: the ReplicaSet could not create pods
//!   (`FailedCreate`: an exceeded quota, an admission webhook's refusal).
//! - **Events.** The newest Warning events of the named pods, at most [`EVENTS_PER_POD`] each:
//!   newest by `series.lastObservedTime`, `lastTimestamp`, `eventTime` or `firstTimestamp`
//!   (whichever is latest; events written through `events.k8s.io` have no `lastTimestamp`);
//!   the same reason and message for the same container once, their counts added; events of an
//!   earlier pod of the same name (another `involvedObject.uid`) left out; and the kubelet's
//!   `Error: ImagePullBackOff`-style echoes of the container's own reason skipped.
//!
//! Everything here is cluster text and untrusted: the data ([`Explanation`], serialised into
//! `-o json` documents) keeps it exactly; [`Explanation::lines`] and [`Explanation::current`]
//! escape it ([`crate::text::Untrusted`], [`crate::text::one_line`]) and shorten long messages.
//! An account that may not read pods or events gets [`Explanation::unreadable`] instead.

use std::cmp::Reverse;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::text::{Untrusted, one_line};

/// How many pods an explanation names; the rest are counted.
pub const SHOWN_PODS: usize = 3;

/// How many Warning events of each named pod an explanation keeps, newest first.
pub const EVENTS_PER_POD: usize = 3;

/// The longest message [`Explanation::lines`] shows, in characters (the data keeps it whole).
const SHOWN_MESSAGE_CHARS: usize = 1000;

/// Why a rollout has not completed ([`explain`]). Serialised into `-o json` documents: camelCase
/// fields, empty ones left out, new fields only ever added.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// What holds the named pods back: one entry per pod and container (or per pod, for its
    /// scheduling or phase), the most serious pods first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<PodReason>,
    /// How many more pods have a reason than are named.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more_pods: u64,
    /// The Deployment's (or new ReplicaSet's) `ReplicaFailure` condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_failure: Option<ReplicaFailure>,
    /// The newest Warning events of the named pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<PodEvent>,
    /// What could not be read, and why: `forbidden` (the pods), `events forbidden` (only their
    /// events; the pods' reasons are there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
}

/// What holds one pod (and one of its containers) back.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodReason {
    /// The pod's name.
    pub pod: String,
    /// The container's name; none for the pod's scheduling, readiness or phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Whether the container is an init container.
    #[serde(default, skip_serializing_if = "is_false")]
    pub init_container: bool,
    /// The kubelet's (or scheduler's) reason: `ImagePullBackOff`, `CrashLoopBackOff`,
    /// `Unschedulable`…
    pub reason: String,
    /// Its message, as written.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The exit code: of the last termination while the container waits or runs again, of the
    /// current one when it is terminated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// The reason of the last termination (`Error`, `OOMKilled`, `StartError`), while the
    /// container waits or runs again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reason: Option<String>,
    /// How many times the container has restarted, when it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarts: Option<i64>,
}

/// A `ReplicaFailure=True` condition: pods could not be created.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaFailure {
    /// `FailedCreate`, as written.
    pub reason: String,
    /// The refusal: `pods "web-…" is forbidden: exceeded quota: …`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// One Warning event of a named pod.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodEvent {
    /// The pod's name.
    pub pod: String,
    /// The container the event is about (from `involvedObject.fieldPath`), when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// `Failed`, `BackOff`, `FailedScheduling`, `Unhealthy`…
    pub reason: String,
    /// As written.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// How many times it happened.
    pub count: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Explanation {
    /// Pods and events could not be read, for `reason` (`forbidden`).
    pub fn unreadable(reason: impl Into<String>) -> Explanation {
        Explanation {
            unreadable: Some(reason.into()),
            ..Explanation::default()
        }
    }

    /// Whether it says nothing at all.
    pub fn is_empty(&self) -> bool {
        *self == Explanation::default()
    }

    /// The most serious current reason, short, for a progress line: `web-7d9c-x2kq:
    /// ImagePullBackOff`, `web-7d9c-x2kq: CrashLoopBackOff (4 restarts)`, `deployment:
    /// FailedCreate`; escaped. None when there is none.
    pub fn current(&self) -> Option<String> {
        let worst = self
            .pods
            .iter()
            .enumerate()
            .max_by_key(|(i, p)| (severity(&p.reason), Reverse(*i)))
            .map(|(_, p)| p);
        if let Some(p) = worst {
            let mut line = format!("{}: {}", Untrusted(&p.pod), Untrusted(&p.reason));
            if let Some(n) = p.restarts {
                line.push_str(&format!(" ({n} restart{})", plural(n)));
            }
            return Some(line);
        }
        if let Some(rf) = &self.replica_failure {
            return Some(format!("deployment: {}", Untrusted(&rf.reason)));
        }
        self.unreadable
            .as_ref()
            .map(|r| format!("reasons not readable: {}", Untrusted(r)))
    }

    /// One line per fact, for an error message, escaped:
    ///
    /// ```text
    /// pod web-7d9c-x2kq container web: ImagePullBackOff: Back-off pulling image "nginx:notfound": …
    /// pod web-7d9c-h4m2 container web: CrashLoopBackOff (last OOMKilled, exit 137; 4 restarts): back-off 40s …
    /// 2 more pods
    /// deployment: ReplicaFailure FailedCreate: pods "web-7d9c-x2kq" is forbidden: exceeded quota: …
    /// event Failed (x3) on web-7d9c-x2kq: Failed to pull image "nginx:notfound": …
    /// reasons not readable: forbidden
    /// ```
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        out.extend(self.pods.iter().map(PodReason::line));
        if self.more_pods > 0 {
            out.push(format!(
                "{} more pod{}",
                self.more_pods,
                if self.more_pods == 1 { "" } else { "s" }
            ));
        }
        if let Some(rf) = &self.replica_failure {
            out.push(with_message(
                format!("deployment: ReplicaFailure {}", Untrusted(&rf.reason)),
                &rf.message,
            ));
        }
        for e in &self.events {
            let mut head = format!("event {}", Untrusted(&e.reason));
            if e.count > 1 {
                head.push_str(&format!(" (x{})", e.count));
            }
            head.push_str(&format!(" on {}", Untrusted(&e.pod)));
            out.push(with_message(head, &e.message));
        }
        if let Some(r) = &self.unreadable {
            out.push(format!("reasons not readable: {}", Untrusted(r)));
        }
        out
    }
}

impl PodReason {
    /// `pod web-x container web: CrashLoopBackOff (last Error, exit 1; 4 restarts): message`.
    fn line(&self) -> String {
        let mut head = format!("pod {}", Untrusted(&self.pod));
        if let Some(c) = &self.container {
            let kind = if self.init_container {
                "init container"
            } else {
                "container"
            };
            head.push_str(&format!(" {kind} {}", Untrusted(c)));
        }
        head.push_str(&format!(": {}", Untrusted(&self.reason)));
        let mut details = Vec::new();
        match (&self.last_reason, self.exit_code) {
            (Some(r), Some(code)) => details.push(format!("last {}, exit {code}", Untrusted(r))),
            (Some(r), None) => details.push(format!("last {}", Untrusted(r))),
            (None, Some(code)) => details.push(format!("exit {code}")),
            (None, None) => {}
        }
        if let Some(n) = self.restarts {
            details.push(format!("{n} restart{}", plural(n)));
        }
        if !details.is_empty() {
            head.push_str(&format!(" ({})", details.join("; ")));
        }
        with_message(head, &self.message)
    }
}

fn plural(n: i64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `head: message` (`head` alone without one), the message on one line, escaped and shortened.
fn with_message(head: String, message: &str) -> String {
    let shown = shown_message(message);
    if shown.is_empty() {
        head
    } else {
        format!("{head}: {shown}")
    }
}

/// `message` on one escaped line of at most [`SHOWN_MESSAGE_CHARS`] characters (then `…`).
fn shown_message(message: &str) -> String {
    let line = one_line(message);
    match line.char_indices().nth(SHOWN_MESSAGE_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

/// How serious a reason is, for the order of pods and the progress line: a failing container
/// (3) before a pod that cannot be scheduled (2), before one still on its way (1).
fn severity(reason: &str) -> u8 {
    match reason {
        "ContainerCreating" | "PodInitializing" | "ContainersNotReady" => 1,
        "Unschedulable" | "SchedulingGated" => 2,
        _ => 3,
    }
}

fn text<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn owned_text(v: &Value, pointer: &str) -> String {
    text(v, pointer).unwrap_or_default().to_owned()
}

/// The condition of `type_` in `obj`'s `status.conditions`.
fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

/// `obj`'s `ReplicaFailure=True` condition (a Deployment's or a ReplicaSet's).
pub fn replica_failure(obj: &Value) -> Option<ReplicaFailure> {
    let c = condition(obj, "ReplicaFailure")?;
    (c.get("status").and_then(Value::as_str) == Some("True")).then(|| ReplicaFailure {
        reason: owned_text(c, "/reason"),
        message: owned_text(c, "/message"),
    })
}

/// One container's reason, when it has one.
fn container_reason(pod: &str, status: &Value, init: bool) -> Option<PodReason> {
    let name = text(status, "/name").map(str::to_owned);
    let restarts = status
        .get("restartCount")
        .and_then(Value::as_i64)
        .filter(|n| *n > 0);
    let last = status.pointer("/lastState/terminated");
    let last_reason = last.and_then(|t| text(t, "/reason")).map(str::to_owned);
    let last_exit = last.and_then(|t| t.get("exitCode")).and_then(Value::as_i64);
    let base = PodReason {
        pod: pod.to_owned(),
        container: name,
        init_container: init,
        restarts,
        ..PodReason::default()
    };
    let state = status.get("state");
    if let Some(waiting) = state
        .and_then(|s| s.get("waiting"))
        .filter(|w| w.is_object())
    {
        return Some(PodReason {
            reason: text(waiting, "/reason").unwrap_or("Waiting").to_owned(),
            message: owned_text(waiting, "/message"),
            exit_code: last_exit,
            last_reason,
            ..base
        });
    }
    if let Some(term) = state
        .and_then(|s| s.get("terminated"))
        .filter(|t| t.is_object())
    {
        let exit = term.get("exitCode").and_then(Value::as_i64);
        // An init container that finished did its job.
        if init && exit == Some(0) {
            return None;
        }
        return Some(PodReason {
            reason: text(term, "/reason").unwrap_or("Terminated").to_owned(),
            message: owned_text(term, "/message"),
            exit_code: exit,
            ..base
        });
    }
    let running = state
        .and_then(|s| s.get("running"))
        .is_some_and(Value::is_object);
    let ready = status.get("ready").and_then(Value::as_bool) == Some(true);
    // Running again after a crash, and not ready: what the last run ended with.
    if running && !ready && restarts.is_some() {
        let reason = last_reason?;
        return Some(PodReason {
            reason,
            message: last.map(|t| owned_text(t, "/message")).unwrap_or_default(),
            exit_code: last_exit,
            ..base
        });
    }
    None
}

/// Everything that holds one pod back (see the module docs).
fn pod_reasons(pod: &Value) -> Vec<PodReason> {
    let name = text(pod, "/metadata/name").unwrap_or_default();
    if text(pod, "/status/phase") == Some("Failed") {
        return vec![PodReason {
            pod: name.to_owned(),
            reason: text(pod, "/status/reason").unwrap_or("Failed").to_owned(),
            message: owned_text(pod, "/status/message"),
            ..PodReason::default()
        }];
    }
    let mut out = Vec::new();
    if let Some(c) = condition(pod, "PodScheduled")
        && c.get("status").and_then(Value::as_str) == Some("False")
    {
        out.push(PodReason {
            pod: name.to_owned(),
            reason: text(c, "/reason").unwrap_or("Unschedulable").to_owned(),
            message: owned_text(c, "/message"),
            ..PodReason::default()
        });
    }
    for (key, init) in [
        ("initContainerStatuses", true),
        ("containerStatuses", false),
    ] {
        let statuses = pod
            .pointer(&format!("/status/{key}"))
            .and_then(Value::as_array);
        out.extend(
            statuses
                .into_iter()
                .flatten()
                .filter_map(|s| container_reason(name, s, init)),
        );
    }
    if out.is_empty()
        && let Some(c) = condition(pod, "Ready")
        && c.get("status").and_then(Value::as_str) == Some("False")
    {
        out.push(PodReason {
            pod: name.to_owned(),
            reason: text(c, "/reason").unwrap_or("NotReady").to_owned(),
            message: owned_text(c, "/message"),
            ..PodReason::default()
        });
    }
    out
}

/// A pod with reasons, as chosen for an explanation.
struct Described<'a> {
    pod: &'a Value,
    reasons: Vec<PodReason>,
    severity: u8,
}

/// The pods with reasons, most serious first, then by name; and how many there are.
fn described(pods: &[Value]) -> (Vec<Described<'_>>, usize) {
    let mut all: Vec<Described<'_>> = pods
        .iter()
        .filter(|p| {
            p.pointer("/metadata/deletionTimestamp")
                .is_none_or(Value::is_null)
        })
        .filter_map(|pod| {
            let reasons = pod_reasons(pod);
            let severity = reasons.iter().map(|r| severity(&r.reason)).max()?;
            Some(Described {
                pod,
                reasons,
                severity,
            })
        })
        .collect();
    all.sort_by(|a, b| {
        b.severity.cmp(&a.severity).then_with(|| {
            text(a.pod, "/metadata/name")
                .unwrap_or_default()
                .cmp(text(b.pod, "/metadata/name").unwrap_or_default())
        })
    });
    let total = all.len();
    all.truncate(SHOWN_PODS);
    (all, total)
}

/// The pods an explanation names (at most [`SHOWN_PODS`]), in its order: whose events are worth
/// reading.
pub fn explained_pods(pods: &[Value]) -> Vec<&Value> {
    described(pods).0.into_iter().map(|d| d.pod).collect()
}

/// Why a rollout has not completed: the reasons of the new ReplicaSet's `pods`, the newest
/// Warning `events` of those named, and the `deployment`'s `ReplicaFailure` condition (see the
/// module docs). Any objects are accepted; what is missing or malformed is left out.
pub fn explain(deployment: &Value, pods: &[Value], events: &[Value]) -> Explanation {
    let (shown, total) = described(pods);
    let pod_events = shown
        .iter()
        .flat_map(|d| events_of(d.pod, events))
        .collect();
    Explanation {
        more_pods: u64::try_from(total - shown.len()).unwrap_or(u64::MAX),
        pods: shown.into_iter().flat_map(|d| d.reasons).collect(),
        replica_failure: replica_failure(deployment),
        events: pod_events,
        unreadable: None,
    }
}

/// A time the API server wrote (RFC 3339 in UTC, seconds or microseconds), as a key that orders
/// like the time: the date and time of day, then the fraction in nanoseconds.
fn time_key(s: &str) -> Option<(&str, u32)> {
    let (day_time, rest) = (s.get(..19)?, s.get(19..)?);
    let fraction: String = rest
        .strip_prefix('.')
        .unwrap_or_default()
        .chars()
        .take_while(char::is_ascii_digit)
        .take(9)
        .collect();
    let nanos = format!("{fraction:0<9}").parse().ok()?;
    Some((day_time, nanos))
}

/// When an event last happened: the latest of the times it carries.
fn last_seen(event: &Value) -> Option<(&str, u32)> {
    [
        "/series/lastObservedTime",
        "/lastTimestamp",
        "/eventTime",
        "/firstTimestamp",
        "/metadata/creationTimestamp",
    ]
    .iter()
    .filter_map(|p| text(event, p).and_then(time_key))
    .max()
}

/// `web` of `spec.containers{web}` or `spec.initContainers{web}`.
fn container_of(field_path: &str) -> Option<String> {
    let inner = field_path
        .strip_prefix("spec.containers{")
        .or_else(|| field_path.strip_prefix("spec.initContainers{"))?;
    inner.strip_suffix('}').map(str::to_owned)
}

/// The kubelet's echo of a container's reason (`Error: ImagePullBackOff`): nothing the
/// container's own entry does not say.
fn is_echo(message: &str) -> bool {
    message
        .strip_prefix("Error: ")
        .is_some_and(|r| !r.is_empty() && r.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// The newest Warning events of `pod` (see the module docs).
fn events_of(pod: &Value, events: &[Value]) -> Vec<PodEvent> {
    let name = text(pod, "/metadata/name").unwrap_or_default();
    let uid = text(pod, "/metadata/uid").filter(|u| !u.is_empty());
    let mut found: Vec<(PodEvent, Option<(&str, u32)>)> = Vec::new();
    for e in events {
        let about = e.get("involvedObject");
        let kind = about.and_then(|o| text(o, "/kind"));
        let event_uid = about
            .and_then(|o| text(o, "/uid"))
            .filter(|u| !u.is_empty());
        if text(e, "/type") != Some("Warning")
            || about.and_then(|o| text(o, "/name")) != Some(name)
            || kind.is_some_and(|k| k != "Pod")
            || matches!((uid, event_uid), (Some(a), Some(b)) if a != b)
        {
            continue;
        }
        let message = owned_text(e, "/message");
        if is_echo(&message) {
            continue;
        }
        let count = [e.get("count"), e.pointer("/series/count")]
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .find(|n| *n > 0)
            .unwrap_or(1);
        let event = PodEvent {
            pod: name.to_owned(),
            container: about
                .and_then(|o| text(o, "/fieldPath"))
                .and_then(container_of),
            reason: owned_text(e, "/reason"),
            message,
            count,
        };
        let seen = last_seen(e);
        match found.iter_mut().find(|(f, _)| {
            (&f.container, &f.reason, &f.message)
                == (&event.container, &event.reason, &event.message)
        }) {
            Some((same, when)) => {
                same.count = same.count.saturating_add(event.count);
                *when = (*when).max(seen);
            }
            None => found.push((event, seen)),
        }
    }
    // Newest first; among equal times, the order the server listed them in.
    found.sort_by(|a, b| b.1.cmp(&a.1));
    found
        .into_iter()
        .take(EVENTS_PER_POD)
        .map(|(e, _)| e)
        .collect()
}

#[cfg(test)]
mod tests;
