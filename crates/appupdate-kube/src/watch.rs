//! `--wait`'s watches: the observations of one object, each new version of it, its absence, or
//! a failed request ([`Observation`]), as a stream ([`Cluster::watch_object`]). A list+watch
//! with `fieldSelector=metadata.name=<name>` over kube's watcher on the cluster's client,
//! resumed with backoff after dropped connections; each watch request is kept open by the
//! server for less than `--request-timeout` ([`watch_timeout_secs`]), so an idle watch is
//! closed by the server, not cut by the client. The plugin's `wait` follows the streams of
//! everything it waits for at once and decides, from each version, what it means.

use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;

use crate::cluster::Cluster;
use crate::describe::{Target, describe_kube_error, one_line};
use appupdate_model::plan::Kind;
use appupdate_model::text::Untrusted;

/// What the watch delivered: the object, its absence, or a problem.
#[derive(Clone, Debug, PartialEq)]
pub enum Observation {
    Object(Value),
    /// Not found when listed, or deleted.
    Gone,
    /// A failed request. `fatal` problems (401, 403, 404 on the watch itself) end the wait; the
    /// others are retried with backoff and reported if the time runs out.
    Problem {
        message: String,
        fatal: bool,
    },
}

impl Cluster {
    /// The observations of `name` of `kind` in the cluster's namespace (see the module docs).
    /// The stream does not end by itself: the caller stops reading it.
    pub fn watch_object(&self, kind: Kind, name: &str) -> BoxStream<'static, Observation> {
        let gvk = GroupVersionKind::gvk(kind.group(), kind.version(), kind.name());
        let resource = ApiResource::from_gvk_with_plural(&gvk, kind.plural());
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.conn.client.current(), self.namespace(), &resource);
        let config = watcher::Config::default()
            .fields(&format!("metadata.name={name}"))
            .timeout(watch_timeout_secs(self.conn.request_timeout));
        let about = Target {
            reference: format!("{}/{}", kind.kubectl_name(), Untrusted(name)),
            namespace: self.namespace().to_owned(),
            context: self.conn.context.clone(),
            as_user: self.conn.as_user.clone(),
        };
        let events = watcher::watcher(api, config).default_backoff();
        // Track whether the object appeared in each (re)list, like kube's `watch_object`.
        events
            .scan(false, move |seen, event| {
                let out = match event {
                    Ok(Event::Init) => {
                        *seen = false;
                        None
                    }
                    Ok(Event::InitApply(obj)) => {
                        *seen = true;
                        Some(to_observation(&obj, kind))
                    }
                    Ok(Event::Apply(obj)) => Some(to_observation(&obj, kind)),
                    Ok(Event::Delete(_)) => Some(Observation::Gone),
                    Ok(Event::InitDone) => (!*seen).then_some(Observation::Gone),
                    Err(e) => Some(observation_of_error(&e, &about)),
                };
                futures::future::ready(Some(out))
            })
            .filter_map(futures::future::ready)
            .boxed()
    }
}

/// Seconds the server keeps one watch request open: below `--request-timeout` (the client's read
/// timeout) so an idle watch is closed by the server, not cut by the client.
pub fn watch_timeout_secs(request_timeout: Option<Duration>) -> u32 {
    let cap = 290u64;
    let secs = match request_timeout {
        Some(t) => t.as_secs().saturating_sub(1).clamp(1, cap),
        None => cap,
    };
    u32::try_from(secs).unwrap_or(290)
}

fn observation_of_error(err: &watcher::Error, target: &Target) -> Observation {
    match err {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => {
            let fatal = matches!(e, kube::Error::Api(s) if matches!(s.code, 401 | 403 | 404));
            let verb = if matches!(err, watcher::Error::InitialListFailed(_)) {
                "list"
            } else {
                "watch"
            };
            Observation::Problem {
                message: describe_kube_error(e, verb, target),
                fatal,
            }
        }
        watcher::Error::WatchError(status) => Observation::Problem {
            message: format!(
                "the watch reported {} {}",
                status.code,
                one_line(&status.message)
            ),
            fatal: false,
        },
        watcher::Error::NoResourceVersion => Observation::Problem {
            message: "the server sent no resourceVersion to resume the watch from".into(),
            fatal: true,
        },
    }
}

fn to_observation(obj: &DynamicObject, kind: Kind) -> Observation {
    match serde_json::to_value(obj) {
        Ok(v) => Observation::Object(v),
        Err(e) => Observation::Problem {
            message: format!("cannot read the {kind}: {e}"),
            fatal: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watch_timeout_stays_below_the_request_timeout() {
        assert_eq!(watch_timeout_secs(None), 290);
        assert_eq!(watch_timeout_secs(Some(Duration::from_secs(10))), 9);
        assert_eq!(watch_timeout_secs(Some(Duration::from_millis(500))), 1);
    }
}
