//! What `--wait` reads once a rollout goes wrong, to say why ([`Cluster::rollout_evidence`]):
//! the Deployment's ReplicaSets (LIST with its selector), the new one among them, up to
//! [`POD_LIMIT`] of its pods (LIST with the selector and its `pod-template-hash`), and the events
//! of the pods an explanation names (one LIST per pod with
//! `fieldSelector=involvedObject.kind=Pod,involvedObject.name=<pod>`, at once). What the
//! requests ask for is computed by [`appupdate_model::rollout::replica_set`]; what the answers
//! mean, by [`appupdate_model::rollout::explain()`] ([`Evidence::explain`]).
//!
//! Nothing is read while a rollout goes well: the caller asks only once something is wrong.
//! An account that may not list ReplicaSets or pods gets [`EvidenceError::Forbidden`] (the
//! caller says "reasons not readable: forbidden"); one that may list pods but not events gets
//! the pods' reasons, with [`Evidence::events_forbidden`] set.

use futures::future::join_all;
use kube::core::Request;
use kube::core::params::ListParams;
use serde_json::Value;

use crate::cluster::{Cluster, ListItems, RequestError, segment};
use crate::describe::Target;
use appupdate_model::rollout::explain::{Explanation, explain, explained_pods, replica_failure};
use appupdate_model::rollout::replica_set::{
    SelectorError, event_field_selector, label_selector, new_replica_set, owned_by, pod_selector,
};

/// At most this many pods of the new ReplicaSet are read (`limit` of the LIST).
pub const POD_LIMIT: u32 = 50;

/// What the cluster says about a rollout's new pods ([`Cluster::rollout_evidence`]): objects
/// as the server returned them (without `metadata.managedFields`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evidence {
    /// The Deployment's new ReplicaSet; none before the controller has created it.
    pub replica_set: Option<Value>,
    /// Its pods (at most [`POD_LIMIT`]).
    pub pods: Vec<Value>,
    /// The events of the pods an explanation names.
    pub events: Vec<Value>,
    /// Whether listing those events was forbidden (the pods' own reasons are still there).
    pub events_forbidden: bool,
}

impl Evidence {
    /// Why the rollout of `deployment` has not completed, from this evidence
    /// ([`appupdate_model::rollout::explain()`]); the new ReplicaSet's `ReplicaFailure` when
    /// the Deployment has none yet; `events forbidden` as what could not be read.
    pub fn explain(&self, deployment: &Value) -> Explanation {
        let mut e = explain(deployment, &self.pods, &self.events);
        if e.replica_failure.is_none() {
            e.replica_failure = self.replica_set.as_ref().and_then(replica_failure);
        }
        if self.events_forbidden {
            e.unreadable = Some("events forbidden".into());
        }
        e
    }
}

/// Why the evidence could not be read. The messages are one escaped line each, as
/// [`RequestError::describe`] words them; the request's own error is kept in `error`.
#[derive(Debug, thiserror::Error)]
pub enum EvidenceError {
    /// The account may not list `what` (`replicasets.apps`, `pods`): 403.
    #[error("{message}")]
    Forbidden {
        what: &'static str,
        message: String,
        error: RequestError,
    },
    /// Listing `what` failed otherwise.
    #[error("{message}")]
    Request {
        what: &'static str,
        message: String,
        error: RequestError,
    },
    /// The Deployment's selector cannot be written as a label selector.
    #[error("cannot select the Deployment's pods: {0}")]
    Selector(#[from] SelectorError),
}

impl EvidenceError {
    /// Whether the account may not read what explains the rollout.
    pub fn is_forbidden(&self) -> bool {
        matches!(self, EvidenceError::Forbidden { .. })
    }

    /// What an explanation says instead: [`Explanation::unreadable`] with `forbidden`, or this
    /// error's message.
    pub fn explanation(&self) -> Explanation {
        match self {
            EvidenceError::Forbidden { .. } => Explanation::unreadable("forbidden"),
            other => Explanation::unreadable(other.to_string()),
        }
    }
}

impl Cluster {
    /// What the cluster says about the rollout of `deployment` (the live object, in this
    /// cluster's namespace): its new ReplicaSet, that ReplicaSet's pods, and the events of the
    /// pods an explanation names (see the module docs). No new ReplicaSet yet: no pods.
    pub async fn rollout_evidence(&self, deployment: &Value) -> Result<Evidence, EvidenceError> {
        let selector = label_selector(deployment.pointer("/spec/selector"))?;
        let replica_sets = self
            .list_in(
                format!("/apis/apps/v1/namespaces/{}/replicasets", self.ns()),
                "replicasets.apps",
                ListParams::default().labels(&selector),
            )
            .await?;
        let Some(replica_set) = new_replica_set(deployment, &replica_sets).cloned() else {
            return Ok(Evidence::default());
        };
        let rs_uid = replica_set
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty());
        let pods: Vec<Value> = self
            .list_in(
                self.core_path("pods"),
                "pods",
                ListParams::default()
                    .labels(&pod_selector(deployment, &replica_set)?)
                    .limit(POD_LIMIT),
            )
            .await?
            .into_iter()
            .filter(|p| rs_uid.is_none_or(|uid| owned_by(p, uid)))
            .collect();
        let names: Vec<String> = explained_pods(&pods)
            .iter()
            .filter_map(|p| p.pointer("/metadata/name").and_then(Value::as_str))
            .map(str::to_owned)
            .collect();
        let lists = join_all(names.iter().map(|name| {
            self.list_in(
                self.core_path("events"),
                "events",
                ListParams::default().fields(&event_field_selector(name)),
            )
        }))
        .await;
        let mut events = Vec::new();
        let mut events_forbidden = false;
        for list in lists {
            match list {
                Ok(items) => events.extend(items),
                Err(EvidenceError::Forbidden { .. }) => events_forbidden = true,
                Err(e) => return Err(e),
            }
        }
        Ok(Evidence {
            replica_set: Some(replica_set),
            pods,
            events,
            events_forbidden,
        })
    }

    fn ns(&self) -> std::borrow::Cow<'_, str> {
        segment(self.namespace())
    }

    /// `/api/v1/namespaces/<ns>/<plural>`.
    fn core_path(&self, plural: &str) -> String {
        format!("/api/v1/namespaces/{}/{plural}", self.ns())
    }

    /// LIST the collection at `path` (`what`, for messages): its items, without their
    /// `metadata.managedFields`.
    async fn list_in(
        &self,
        path: String,
        what: &'static str,
        params: ListParams,
    ) -> Result<Vec<Value>, EvidenceError> {
        let answer = match Self::build(Request::new(path).list(&params)) {
            Ok(req) => self.send::<ListItems>("rollout evidence", req).await,
            Err(e) => Err(e),
        };
        answer.map(|ListItems(items, _)| items).map_err(|error| {
            let target = Target {
                reference: what.to_owned(),
                namespace: self.namespace().to_owned(),
                context: self.conn.context.clone(),
                as_user: self.conn.as_user.clone(),
            };
            let message = error.describe("list", &target);
            if error.status_code() == Some(403) {
                EvidenceError::Forbidden {
                    what,
                    message,
                    error,
                }
            } else {
                EvidenceError::Request {
                    what,
                    message,
                    error,
                }
            }
        })
    }
}

#[cfg(test)]
mod tests;
