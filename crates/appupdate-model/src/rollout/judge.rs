//! Whether a rollout can still succeed without someone else acting ([`Judge`]): fed each
//! [`Explanation`] with the time passed since the wait began, it answers [`Hopeless`] once
//! one of these holds for a pod of the new ReplicaSet:
//!
//! | rule | when |
//! | --- | --- |
//! | the image does not exist | a container in `ErrImagePull`/`ImagePullBackOff` whose waiting message, or one of its pod's `Failed` events, matches a not-found pattern of [`IMAGE_NOT_FOUND`], in two observations (two calls, for the same container name) |
//! | the image name is invalid | `InvalidImageName`, at once |
//! | the container cannot be configured | `CreateContainerConfigError` (a missing Secret or ConfigMap, a missing key) for the same pod and container in every observation for at least [`Judge::DEFAULT_CONFIG_ERROR_GRACE`] (configurable); not while the kubelet says it is still syncing its cache (`failed to sync secret cache`) |
//! | the container keeps crashing | `CrashLoopBackOff` with at least [`Judge::DEFAULT_CRASH_RESTARTS`] restarts (the caller's number) |
//!
//! Everything else is waited for: an unschedulable pod and an exceeded quota are explained but
//! never hopeless (an autoscaler may add nodes, someone may raise the quota), and so is an
//! image pull back-off whose message matches no pattern — a registry that times out, refuses
//! the connection or limits the rate recovers, and the kubelet retries. `ImagePullBackOff`
//! alone is never enough: Shopify's krane failed deploys on it and had to stop
//! (Shopify/krane PR #477, "Do not fail eagerly on ImagePullBackoff": transient registry errors
//! at scale), and now requires "not found" in the message (krane
//! `lib/krane/kubernetes_resource/pod.rb`, `doom_reason`). The progress deadline is
//! [`super::rollout_state`]'s.
//!
//! The kubelet passes the runtime's error text on unchanged, so the patterns are data, per
//! runtime ([`IMAGE_NOT_FOUND`]). Since Kubernetes 1.32 the `ImagePullBackOff` message carries the
//! last pull error too (`Back-off pulling image "x": ErrImagePull: <error>`, kubernetes PR
//! #127918, `pkg/kubelet/images/image_manager.go`); before, it is only `Back-off pulling image
//! "x"`, and the pod's `Failed` event (`Failed to pull image "x": <error>`) has the error.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Serialize;

use super::explain::{Explanation, PodReason};
use crate::text::{Untrusted, one_line};

/// One way a container runtime says the image does not exist (or may not be pulled at all):
/// every one of `contains` is in the message (compared in lower case) and, when set, the
/// message ends with `ends_with`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotFoundPattern {
    /// Whose wording it is: `containerd`, `CRI-O`, `Docker`.
    pub runtime: &'static str,
    /// Texts the message contains, in lower case.
    pub contains: &'static [&'static str],
    /// The text the message (trimmed, in lower case) ends with, if any.
    pub ends_with: Option<&'static str>,
    /// What it means, for the user.
    pub meaning: &'static str,
}

impl NotFoundPattern {
    fn matches(&self, lower: &str) -> bool {
        self.contains.iter().all(|c| lower.contains(c))
            && self
                .ends_with
                .is_none_or(|end| lower.trim_end().ends_with(end))
    }
}

/// The runtimes' not-found wordings, first match wins. Sources:
///
/// - containerd's resolver (`core/remotes/docker/resolver.go`, `Resolve`) answers a registry's
///   404 with `fmt.Errorf("%s: %w", ref, errdefs.ErrNotFound)` — `<ref>: not found` — and a
///   401 (what Docker Hub answers for a repository that does not exist) with `pull access
///   denied, repository does not exist or may require authorization: <server message>`; the
///   client wraps it in `failed to resolve reference %q: %w` (`client/pull.go`), the transfer
///   service in `failed to resolve image: %w` (`core/transfer/local/pull.go`), the CRI plugin
///   in `failed to pull and unpack image %q: %w`
///   (`internal/cri/server/images/image_pull.go`). As the kubelet shows it: `rpc error: code =
///   NotFound desc = failed to pull and unpack image "docker.io/library/nginx:notfound": failed
///   to resolve reference "docker.io/library/nginx:notfound":
///   docker.io/library/nginx:notfound: not found`.
/// - CRI-O pulls with containers/image: `reading manifest %s in %s: %w`
///   (`docker/docker_client.go`, `fetchManifest`) with the registry's error, `manifest unknown`
///   for a tag that does not exist (older releases: `Error reading manifest latest in
///   registry.example/image: manifest unknown: manifest unknown`, cri-o/cri-o issue #4388), and
///   Docker Hub's `requested access to the resource is denied` for a repository that does not
///   exist or needs credentials.
/// - Docker (cri-dockerd): `Error response from daemon: pull access denied for foo, repository
///   does not exist or may require 'docker login': denied: requested access to the resource is
///   denied`, and `manifest for nginx:notfound not found: manifest unknown: manifest unknown`.
///
/// A message that matches none is transient: `i/o timeout`, `connection refused`, `429 Too
/// Many Requests`, `context deadline exceeded`, `no such host`, `Back-off pulling image "x"`.
pub const IMAGE_NOT_FOUND: &[NotFoundPattern] = &[
    NotFoundPattern {
        runtime: "containerd",
        contains: &["failed to resolve reference"],
        ends_with: Some(": not found"),
        meaning: "the registry has no such repository or tag",
    },
    NotFoundPattern {
        runtime: "containerd",
        contains: &["failed to resolve image"],
        ends_with: Some(": not found"),
        meaning: "the registry has no such repository or tag",
    },
    NotFoundPattern {
        runtime: "containerd",
        contains: &["pull access denied, repository does not exist or may require authorization"],
        ends_with: None,
        meaning: "the repository does not exist or needs credentials",
    },
    NotFoundPattern {
        runtime: "Docker",
        contains: &[
            "pull access denied for ",
            "repository does not exist or may require 'docker login'",
        ],
        ends_with: None,
        meaning: "the repository does not exist or needs credentials",
    },
    NotFoundPattern {
        runtime: "CRI-O",
        contains: &["reading manifest ", "manifest unknown"],
        ends_with: None,
        meaning: "the registry has no such tag",
    },
    NotFoundPattern {
        runtime: "CRI-O",
        contains: &[
            "reading manifest ",
            "requested access to the resource is denied",
        ],
        ends_with: None,
        meaning: "the repository does not exist or needs credentials",
    },
    NotFoundPattern {
        runtime: "Docker",
        contains: &["manifest for ", " not found: manifest unknown"],
        ends_with: None,
        meaning: "the registry has no such tag",
    },
];

/// The not-found pattern `message` matches, if any ([`IMAGE_NOT_FOUND`]).
pub fn image_not_found(message: &str) -> Option<&'static NotFoundPattern> {
    let lower = message.to_lowercase();
    IMAGE_NOT_FOUND.iter().find(|p| p.matches(&lower))
}

/// Why a rollout cannot succeed without someone else acting ([`Judge::observe`]). Displayed as
/// one escaped line; serialised with a `rule` tag (`imageNotFound`, `invalidImageName`,
/// `configError`, `crashLoop`) and camelCase fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(
    tag = "rule",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Hopeless {
    /// The image does not exist (or may not be pulled), in two observations.
    ImageNotFound {
        pod: String,
        container: String,
        /// The runtime's message that said so.
        message: String,
        /// Whose wording matched ([`NotFoundPattern::runtime`]).
        runtime: &'static str,
        /// What it means ([`NotFoundPattern::meaning`]).
        meaning: &'static str,
    },
    /// The image's name cannot be parsed.
    InvalidImageName {
        pod: String,
        container: String,
        message: String,
    },
    /// The container could not be configured for `seconds` (a missing Secret or ConfigMap).
    ConfigError {
        pod: String,
        container: String,
        message: String,
        seconds: u64,
    },
    /// The container crashed `restarts` times.
    CrashLoop {
        pod: String,
        container: String,
        restarts: i64,
        #[serde(skip_serializing_if = "Option::is_none")]
        exit_code: Option<i64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        last_reason: Option<String>,
    },
}

impl fmt::Display for Hopeless {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Hopeless::ImageNotFound {
                pod,
                container,
                runtime,
                meaning,
                ..
            } => write!(
                f,
                "the image of container {} (pod {}) cannot be pulled: {meaning} ({runtime}'s wording, seen twice)",
                Untrusted(container),
                Untrusted(pod)
            ),
            Hopeless::InvalidImageName {
                pod,
                container,
                message,
            } => write!(
                f,
                "the image name of container {} (pod {}) is invalid: {}",
                Untrusted(container),
                Untrusted(pod),
                one_line(message)
            ),
            Hopeless::ConfigError {
                pod,
                container,
                message,
                seconds,
            } => write!(
                f,
                "container {} (pod {}) could not be configured for {seconds} s: {}",
                Untrusted(container),
                Untrusted(pod),
                one_line(message)
            ),
            Hopeless::CrashLoop {
                pod,
                container,
                restarts,
                exit_code,
                last_reason,
            } => {
                write!(
                    f,
                    "container {} (pod {}) keeps crashing: {restarts} restart{}",
                    Untrusted(container),
                    Untrusted(pod),
                    if *restarts == 1 { "" } else { "s" }
                )?;
                match (last_reason, exit_code) {
                    (Some(r), Some(c)) => write!(f, ", last {}, exit {c}", Untrusted(r)),
                    (Some(r), None) => write!(f, ", last {}", Untrusted(r)),
                    (None, Some(c)) => write!(f, ", last exit {c}"),
                    (None, None) => Ok(()),
                }
            }
        }
    }
}

/// Decides, over the observations of one rollout, whether it can still succeed (see the
/// module docs). Pure: the caller passes the time passed since the wait began.
#[derive(Clone, Debug)]
pub struct Judge {
    crash_restarts: u32,
    config_error_grace: Duration,
    /// Per container name: in how many observations its image was said not to exist.
    not_found: BTreeMap<String, u32>,
    /// Per (pod, container): when its configuration error was first seen, in the observations
    /// since that kept seeing it.
    config_errors: BTreeMap<(String, String), Duration>,
}

impl Default for Judge {
    fn default() -> Judge {
        Judge::new(Judge::DEFAULT_CRASH_RESTARTS)
    }
}

/// Why one container's image was said not to exist, in one observation.
struct NotFoundSeen<'a> {
    pod: &'a str,
    message: &'a str,
    pattern: &'static NotFoundPattern,
}

impl Judge {
    /// Restarts of a crash-looping container after which the rollout is hopeless.
    pub const DEFAULT_CRASH_RESTARTS: u32 = 3;

    /// How long a `CreateContainerConfigError` must persist to be hopeless.
    pub const DEFAULT_CONFIG_ERROR_GRACE: Duration = Duration::from_secs(10);

    /// A judge that gives up on a crash loop after `crash_restarts` restarts, and on a
    /// configuration error after [`Judge::DEFAULT_CONFIG_ERROR_GRACE`].
    pub fn new(crash_restarts: u32) -> Judge {
        Judge {
            crash_restarts,
            config_error_grace: Judge::DEFAULT_CONFIG_ERROR_GRACE,
            not_found: BTreeMap::new(),
            config_errors: BTreeMap::new(),
        }
    }

    /// The same judge, giving up on a configuration error after `grace`.
    pub fn with_config_error_grace(mut self, grace: Duration) -> Judge {
        self.config_error_grace = grace;
        self
    }

    /// One observation, `elapsed` after the wait began: why the rollout cannot succeed, if it
    /// cannot (see the module docs). Only what was read counts: an explanation whose pods could
    /// not be read decides nothing; one whose events could not be read, by the pods alone.
    pub fn observe(&mut self, elapsed: Duration, e: &Explanation) -> Option<Hopeless> {
        let mut verdict = None;
        let mut keep = |h: Option<Hopeless>| {
            if verdict.is_none() {
                verdict = h;
            }
        };
        for p in &e.pods {
            let Some(container) = &p.container else {
                continue;
            };
            match p.reason.as_str() {
                "InvalidImageName" => keep(Some(Hopeless::InvalidImageName {
                    pod: p.pod.clone(),
                    container: container.clone(),
                    message: p.message.clone(),
                })),
                "CrashLoopBackOff" if p.restarts.unwrap_or(0) >= i64::from(self.crash_restarts) => {
                    keep(Some(Hopeless::CrashLoop {
                        pod: p.pod.clone(),
                        container: container.clone(),
                        restarts: p.restarts.unwrap_or(0),
                        exit_code: p.exit_code,
                        last_reason: p.last_reason.clone(),
                    }));
                }
                _ => {}
            }
        }
        keep(self.config_error(elapsed, e));
        keep(self.image_not_found(e));
        verdict
    }

    /// The configuration errors of this observation; those seen in every observation for the
    /// grace period are hopeless.
    fn config_error(&mut self, elapsed: Duration, e: &Explanation) -> Option<Hopeless> {
        let now: Vec<&PodReason> = e
            .pods
            .iter()
            .filter(|p| {
                p.container.is_some()
                    && p.reason == "CreateContainerConfigError"
                    // The kubelet's own cache catching up, not a missing object (krane,
                    // kubernetes PR #75260: `failed to sync secret cache: timed out waiting
                    // for the condition`).
                    && !is_cache_sync(&p.message)
            })
            .collect();
        let key = |p: &PodReason| (p.pod.clone(), p.container.clone().unwrap_or_default());
        self.config_errors
            .retain(|k, _| now.iter().any(|p| key(p) == *k));
        let mut verdict = None;
        for p in now {
            let since = *self.config_errors.entry(key(p)).or_insert(elapsed);
            let persisted = elapsed.saturating_sub(since);
            if verdict.is_none() && persisted >= self.config_error_grace {
                verdict = Some(Hopeless::ConfigError {
                    pod: p.pod.clone(),
                    container: p.container.clone().unwrap_or_default(),
                    message: p.message.clone(),
                    seconds: persisted.as_secs(),
                });
            }
        }
        verdict
    }

    /// Counts, per container name, the observations in which its image was said not to
    /// exist; the second is hopeless.
    fn image_not_found(&mut self, e: &Explanation) -> Option<Hopeless> {
        let mut seen: BTreeMap<&str, NotFoundSeen<'_>> = BTreeMap::new();
        for p in &e.pods {
            let Some(container) = p.container.as_deref() else {
                continue;
            };
            if !matches!(p.reason.as_str(), "ErrImagePull" | "ImagePullBackOff") {
                continue;
            }
            // The container's own message, else its pod's `Failed` events about it.
            let from_events = e.events.iter().filter(|ev| {
                ev.pod == p.pod
                    && ev.reason == "Failed"
                    && ev.container.as_deref().is_none_or(|c| c == container)
            });
            let found = std::iter::once(p.message.as_str())
                .chain(from_events.map(|ev| ev.message.as_str()))
                .find_map(|m| image_not_found(m).map(|pattern| (m, pattern)));
            if let Some((message, pattern)) = found {
                seen.entry(container).or_insert(NotFoundSeen {
                    pod: &p.pod,
                    message,
                    pattern,
                });
            }
        }
        let mut verdict = None;
        for (container, s) in seen {
            let times = self.not_found.entry(container.to_owned()).or_insert(0);
            *times = times.saturating_add(1);
            if verdict.is_none() && *times >= 2 {
                verdict = Some(Hopeless::ImageNotFound {
                    pod: s.pod.to_owned(),
                    container: container.to_owned(),
                    message: s.message.to_owned(),
                    runtime: s.pattern.runtime,
                    meaning: s.pattern.meaning,
                });
            }
        }
        verdict
    }
}

/// `failed to sync secret cache: …`, `failed to sync configmap cache: …`.
fn is_cache_sync(message: &str) -> bool {
    message
        .split("failed to sync ")
        .skip(1)
        .any(|rest| rest.split_whitespace().nth(1) == Some("cache:"))
}

#[cfg(test)]
mod tests;
