//! Every request to the API server but `--wait`'s watches (those are [`crate::watch`], over
//! kube's watcher on the same client). Objects travel as raw JSON (`serde_json::Value`), so a
//! field this binary's API types do not know is never dropped; writes are patches, creates and
//! deletes with preconditions, never a typed read-modify-write.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use kube::core::Request;
use kube::core::params::{
    DeleteParams, GetParams, ListParams, Patch, PatchParams, PostParams, Preconditions,
};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::describe::{Target, classify, describe_kube_error};
use crate::kube_context::Connection;
pub use appupdate_model::list_items::ListItems;
use appupdate_model::owners::{Marked, Marks};
use appupdate_model::plan::{Base, Kind, PatchType};
use appupdate_model::text::Untrusted;

/// The field manager recorded in managedFields for our writes.
pub const FIELD_MANAGER: &str = "kubectl-appupdate";

/// A request failed: the kube error, or our own `--request-timeout` bound.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("the request timed out after {0:?} (--request-timeout)")]
    Timeout(Duration),
}

impl RequestError {
    /// The API status code, when the server answered with one.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            RequestError::Kube(kube::Error::Api(s)) => Some(s.code),
            _ => None,
        }
    }

    /// The causes of a refusal (`details.causes` of the server's Status), each as
    /// `(field, reason, message)`; none for any other failure.
    pub fn causes(&self) -> Vec<(&str, &str, &str)> {
        match self {
            RequestError::Kube(kube::Error::Api(s)) => s
                .details
                .iter()
                .flat_map(|d| &d.causes)
                .map(|c| (c.field.as_str(), c.reason.as_str(), c.message.as_str()))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The API status reason (`Conflict`, `AlreadyExists`, `NotFound`…).
    pub fn reason(&self) -> Option<&str> {
        match self {
            RequestError::Kube(kube::Error::Api(s)) => Some(s.reason.as_str()),
            _ => None,
        }
    }

    /// Whether a write that failed this way may nevertheless have been applied: no answer came
    /// back after the request may have reached the server (a timeout, a connection lost
    /// mid-exchange). A refused connection, a credential failure or any server answer means the
    /// write did not land.
    pub fn may_have_landed(&self) -> bool {
        match self {
            RequestError::Timeout(_) => true,
            RequestError::Kube(kube::Error::Api(_)) => false,
            RequestError::Kube(
                e @ (kube::Error::HyperError(_)
                | kube::Error::Service(_)
                | kube::Error::ReadEvents(_)),
            ) => classify(e).may_have_been_sent(),
            RequestError::Kube(_) => false,
        }
    }

    /// One line for the user: what failed, on which object, in which namespace and context.
    /// `verb` is the RBAC verb (get, list, patch, create, delete).
    pub fn describe(&self, verb: &str, target: &Target) -> String {
        match self {
            RequestError::Kube(e) => describe_kube_error(e, verb, target),
            RequestError::Timeout(d) => format!(
                "cannot reach the cluster of context {:?} for {}: the request timed out after {d:?} (--request-timeout)",
                Untrusted(&target.context),
                Untrusted(&target.reference)
            ),
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.status_code() == Some(404)
    }

    /// A resourceVersion or uid precondition failed: someone else wrote first.
    pub fn is_conflict(&self) -> bool {
        self.status_code() == Some(409) && self.reason() == Some("Conflict")
    }

    pub fn is_already_exists(&self) -> bool {
        self.status_code() == Some(409) && self.reason() == Some("AlreadyExists")
    }
}

/// Where `-v` logs each request: one line, escaped.
pub type RequestLog = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

/// A client bound to one namespace, with the run's timeout, and where `-v` logs each request
/// (`None`: nowhere).
#[derive(Clone)]
pub struct Cluster {
    pub conn: Connection,
    pub log: Option<RequestLog>,
}

fn collection_path(kind: Kind, namespace: &str) -> String {
    format!(
        "/apis/{}/{}/namespaces/{}/{}",
        kind.group(),
        kind.version(),
        segment(namespace),
        kind.plural()
    )
}

/// RFC 3986's unreserved characters are kept, every other byte is percent-encoded.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// [`UNRESERVED`] with the dot escaped as well.
const UNRESERVED_BUT_DOT: &AsciiSet = &UNRESERVED.add(b'.');

/// `value` as one URL path segment: every byte outside RFC 3986's unreserved characters
/// percent-encoded, so that no name — valid ones never need it — can reach another path
/// (`web/status`, `..`, `%2F`). A name that needs any escape, and `.` and `..`, has its dots
/// escaped too.
pub fn segment(value: &str) -> Cow<'_, str> {
    let kept: Cow<'_, str> = utf8_percent_encode(value, UNRESERVED).into();
    if matches!(kept, Cow::Borrowed(_)) && value != "." && value != ".." {
        return kept;
    }
    utf8_percent_encode(value, UNRESERVED_BUT_DOT)
        .to_string()
        .into()
}

impl Cluster {
    pub fn new(conn: Connection, log: Option<RequestLog>) -> Cluster {
        Cluster { conn, log }
    }

    pub fn namespace(&self) -> &str {
        &self.conn.namespace
    }

    /// A session on this cluster ([`crate::connections`]): its connection may be open until
    /// the session (and any other open on it) ends; waits for a permit of the run's limit.
    pub async fn session(&self) -> crate::connections::Session {
        self.conn.sessions.open().await
    }

    /// How many clusters of the run may have a connection open at once: how many of them a
    /// stage works on at a time (more would only wait for a connection, each holding what its
    /// work needs meanwhile).
    pub fn at_once(&self) -> usize {
        self.conn.sessions.limit().most()
    }

    /// Sends `req` within `--request-timeout`, logging it for `-v` as `what`.
    pub(crate) async fn send<T: DeserializeOwned>(
        &self,
        what: &str,
        req: http::Request<Vec<u8>>,
    ) -> Result<T, RequestError> {
        self.send_read(what, req, |text| serde_json::from_str(text))
            .await
    }

    /// [`Cluster::send`] with the answer read by `read`, as kube's `Client::request` reads it
    /// with `serde_json::from_str`: a reader compiled elsewhere (a LIST's items are read in
    /// `appupdate-model`, whose code is optimised for speed: [`ListItems`]).
    async fn send_read<T>(
        &self,
        what: &str,
        req: http::Request<Vec<u8>>,
        read: impl FnOnce(&str) -> serde_json::Result<T>,
    ) -> Result<T, RequestError> {
        let started = Instant::now();
        let method = req.method().clone();
        let uri = req.uri().to_string();
        let client = &self.conn.client;
        let fut = async move {
            let text = client.request_text(req).await?;
            read(&text).map_err(|e| {
                tracing::warn!("{}, {:?}", text, e);
                kube::Error::SerdeError(e)
            })
        };
        let result = match self.conn.request_timeout {
            Some(t) => match tokio::time::timeout(t, fut).await {
                Ok(r) => r.map_err(RequestError::from),
                Err(_) => Err(RequestError::Timeout(t)),
            },
            None => fut.await.map_err(RequestError::from),
        };
        if let Some(log) = &self.log {
            let outcome = match &result {
                Ok(_) => "ok".to_owned(),
                Err(e) => match e.status_code() {
                    Some(code) => format!("{code} {}", Untrusted(e.reason().unwrap_or_default())),
                    None => "failed".to_owned(),
                },
            };
            log(&format!(
                "  {method} {} ({what}): {outcome} in {} ms",
                Untrusted(&uri),
                started.elapsed().as_millis()
            ));
        }
        result
    }

    /// A request kube built, or its failure to build one as a [`RequestError`].
    pub(crate) fn build(
        r: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
    ) -> Result<http::Request<Vec<u8>>, RequestError> {
        r.map_err(|e| RequestError::Kube(kube::Error::BuildRequest(e)))
    }

    /// GET one object; `Ok(None)` when it does not exist.
    pub async fn get(&self, kind: Kind, name: &str) -> Result<Option<Value>, RequestError> {
        let req = Self::build(
            Request::new(collection_path(kind, self.namespace()))
                .get(&segment(name), &GetParams::default()),
        )?;
        match self.send("read", req).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// GET the Service `name` (core group).
    pub async fn get_service(&self, name: &str) -> Result<Option<Value>, RequestError> {
        let path = format!("/api/v1/namespaces/{}/services", segment(self.namespace()));
        let req = Self::build(Request::new(path).get(&segment(name), &GetParams::default()))?;
        match self.send("read", req).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// LIST objects of `kind` matching a label selector; items come without kind/apiVersion, and
    /// are read without their `metadata.managedFields` ([`ListItems`]). With them, the
    /// [`Marks`] of each item that names another possible owner (its labels and annotations,
    /// and the managedFields entries that may own, cut to [`appupdate_model::owners::LISTED_DEPTH`]): who
    /// else owns a listed object is found from this one request.
    pub async fn list(
        &self,
        kind: Kind,
        label_selector: &str,
    ) -> Result<(Vec<Value>, Vec<Marked>), RequestError> {
        let lp = ListParams::default().labels(label_selector);
        let req = Self::build(Request::new(collection_path(kind, self.namespace())).list(&lp))?;
        let ListItems(mut items, mut entries) = self
            .send_read("list", req, appupdate_model::list_items::read_list_items)
            .await?;
        let mut marked = Vec::new();
        let mut entries = entries.drain(..).peekable();
        for (index, item) in items.iter_mut().enumerate() {
            if let Value::Object(m) = item {
                m.entry("apiVersion")
                    .or_insert_with(|| Value::String(kind.api_version().into()));
                m.entry("kind")
                    .or_insert_with(|| Value::String(kind.to_string()));
            }
            let own = match entries.peek() {
                Some((at, _)) if *at == index => entries.next().map(|(_, e)| e),
                _ => None,
            };
            let marks = Marks::new(item, own.unwrap_or_default());
            if !marks.is_empty() {
                marked.push(Marked {
                    kind,
                    name: item["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    marks,
                });
            }
        }
        Ok((items, marked))
    }

    /// GET the Gateway `name` in `namespace` (`gateway.networking.k8s.io/v1`); `Ok(None)`
    /// when it does not exist.
    pub async fn get_gateway(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, RequestError> {
        let path = format!(
            "/apis/gateway.networking.k8s.io/v1/namespaces/{}/gateways",
            segment(namespace)
        );
        self.get_at(path, name).await
    }

    /// GET the GatewayClass `name` (cluster-scoped); `Ok(None)` when it does not exist.
    pub async fn get_gateway_class(&self, name: &str) -> Result<Option<Value>, RequestError> {
        self.get_at(
            "/apis/gateway.networking.k8s.io/v1/gatewayclasses".into(),
            name,
        )
        .await
    }

    /// GET `name` in the collection at `path`; `Ok(None)` when it does not exist.
    async fn get_at(&self, path: String, name: &str) -> Result<Option<Value>, RequestError> {
        let req = Self::build(Request::new(path).get(&segment(name), &GetParams::default()))?;
        match self.send("read", req).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// LIST the cluster's nodes as metadata only (`PartialObjectMetadataList`: names and
    /// labels, no status): where the image check finds the platforms pods can land on.
    pub async fn list_node_metadata(&self) -> Result<Value, RequestError> {
        let mut req = Self::build(Request::new("/api/v1/nodes").list(&ListParams::default()))?;
        req.headers_mut().insert(
            http::header::ACCEPT,
            http::HeaderValue::from_static(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
            ),
        );
        self.send("list nodes (metadata)", req).await
    }

    /// LIST the cluster's IngressClasses (cluster-scoped, no selector).
    pub async fn list_ingress_classes(&self) -> Result<Vec<Value>, RequestError> {
        let req = Self::build(
            Request::new("/apis/networking.k8s.io/v1/ingressclasses").list(&ListParams::default()),
        )?;
        let mut list: Value = self.send("list", req).await?;
        Ok(match list.get_mut("items").map(Value::take) {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        })
    }

    /// PATCH with `base`'s `metadata.resourceVersion` in the body as the precondition.
    pub async fn patch(
        &self,
        kind: Kind,
        name: &str,
        patch_type: PatchType,
        body: &Value,
        base: &Base,
        dry_run: bool,
    ) -> Result<Value, RequestError> {
        let mut body = body.clone();
        if let Value::Object(m) = &mut body {
            let meta = m
                .entry("metadata")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Value::Object(meta) = meta {
                meta.insert(
                    "resourceVersion".into(),
                    Value::String(base.resource_version().into()),
                );
            }
        }
        let pp = PatchParams {
            dry_run,
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        let patch = match patch_type {
            PatchType::Merge => Patch::Merge(body),
            PatchType::Strategic => Patch::Strategic(body),
        };
        let req = Self::build(Request::new(collection_path(kind, self.namespace())).patch(
            &segment(name),
            &pp,
            &patch,
        ))?;
        self.send(if dry_run { "dry-run patch" } else { "patch" }, req)
            .await
    }

    /// POST a new object.
    pub async fn create(
        &self,
        kind: Kind,
        body: &Value,
        dry_run: bool,
    ) -> Result<Value, RequestError> {
        let pp = PostParams {
            dry_run,
            field_manager: Some(FIELD_MANAGER.into()),
        };
        let data =
            serde_json::to_vec(body).map_err(|e| RequestError::Kube(kube::Error::SerdeError(e)))?;
        let req =
            Self::build(Request::new(collection_path(kind, self.namespace())).create(&pp, data))?;
        self.send(if dry_run { "dry-run create" } else { "create" }, req)
            .await
    }

    /// DELETE with `base`'s uid and resourceVersion as preconditions (kube's `DeleteParams`:
    /// `DeleteOptions` in the body, `dryRun: [All]` there and in the query).
    pub async fn delete(
        &self,
        kind: Kind,
        name: &str,
        base: &Base,
        dry_run: bool,
    ) -> Result<Value, RequestError> {
        let dp = DeleteParams {
            dry_run,
            preconditions: Some(Preconditions {
                uid: Some(base.uid().to_owned()),
                resource_version: Some(base.resource_version().to_owned()),
            }),
            ..DeleteParams::default()
        };
        let mut req = Self::build(
            Request::new(collection_path(kind, self.namespace())).delete(&segment(name), &dp),
        )?;
        if dry_run {
            // The query parameter too, as kubectl sends it: a proxy or webhook in front of the
            // server that reads only the query still sees a dry run.
            let uri = format!("{}dryRun=All", req.uri());
            *req.uri_mut() = uri
                .parse()
                .map_err(|e| RequestError::Kube(kube::Error::HttpError(http::Error::from(e))))?;
        }
        self.send(if dry_run { "dry-run delete" } else { "delete" }, req)
            .await
    }
}

/// The history ConfigMap and who the server says we are: requests outside the plan's kinds.
impl Cluster {
    fn config_maps_path(&self) -> String {
        format!(
            "/api/v1/namespaces/{}/configmaps",
            segment(self.namespace())
        )
    }

    /// GET the ConfigMap `name`; `Ok(None)` when it does not exist.
    pub async fn get_config_map(&self, name: &str) -> Result<Option<Value>, RequestError> {
        let req = Self::build(
            Request::new(self.config_maps_path()).get(&segment(name), &GetParams::default()),
        )?;
        match self.send("read", req).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates the ConfigMap `body`, or merge-patches `name` conditionally on `base`.
    pub async fn write_config_map(
        &self,
        name: &str,
        write: &appupdate_model::plan::Write,
    ) -> Result<Value, RequestError> {
        use appupdate_model::plan::Write;
        let pp = PostParams {
            dry_run: false,
            field_manager: Some(FIELD_MANAGER.into()),
        };
        let req = match write {
            Write::Create { body } => {
                let data = serde_json::to_vec(body)
                    .map_err(|e| RequestError::Kube(kube::Error::SerdeError(e)))?;
                Self::build(Request::new(self.config_maps_path()).create(&pp, data))?
            }
            Write::Patch { base, body, .. } => {
                let mut body = Value::clone(body);
                body["metadata"] = serde_json::json!({"resourceVersion": base.resource_version()});
                let params = PatchParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..Default::default()
                };
                Self::build(Request::new(self.config_maps_path()).patch(
                    &segment(name),
                    &params,
                    &Patch::Merge(body),
                ))?
            }
            Write::Delete { .. } => return Ok(Value::Null),
        };
        self.send("history", req).await
    }

    /// The user name the server authenticated this client as (a SelfSubjectReview,
    /// `authentication.k8s.io/v1`, served from Kubernetes 1.28); `Ok(None)` when the answer
    /// has none.
    pub async fn who_am_i(&self) -> Result<Option<String>, RequestError> {
        let body = serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "SelfSubjectReview",
        });
        let data = serde_json::to_vec(&body)
            .map_err(|e| RequestError::Kube(kube::Error::SerdeError(e)))?;
        let req = Self::build(
            Request::new("/apis/authentication.k8s.io/v1/selfsubjectreviews")
                .create(&PostParams::default(), data),
        )?;
        let review: Value = self.send("who am I", req).await?;
        Ok(review["status"]["userInfo"]["username"]
            .as_str()
            .filter(|u| !u.is_empty())
            .map(str::to_owned))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_one_path_segment_whatever_it_holds() {
        let cases = [
            ("web", "web"),
            ("web-1.v2_x~", "web-1.v2_x~"),
            (".", "%2E"),
            ("..", "%2E%2E"),
            ("...", "..."),
            ("web/status", "web%2Fstatus"),
            ("../x", "%2E%2E%2Fx"),
            ("a%2Fb", "a%252Fb"),
            ("a b?c#d", "a%20b%3Fc%23d"),
            ("é", "%C3%A9"),
            ("", ""),
        ];
        for (name, want) in cases {
            assert_eq!(segment(name), want, "{name:?}");
        }
        assert!(matches!(segment("web-1"), Cow::Borrowed(_)));
    }
}
