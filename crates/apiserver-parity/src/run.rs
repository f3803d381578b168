//! Runs one sequence against one server: a fresh namespace, the steps in order (watches with
//! their concurrent requests), then everything the sequence created is removed again.

use std::time::Duration;

use serde_json::{Value, json};

use crate::client::{Got, Prepared, Server};
use crate::normalize::{body_value, watch_events};
use crate::sequence::{PatchKind, Sequence, Step, Vars, Who, remove_pointer, set_pointer};

/// The User-Agent of every request that does not set one: its first word is the field
/// manager the server records when no `fieldManager` is given.
pub const USER_AGENT: &str = "apiserver-parity/v0.1.0";

/// One step as it went on one server.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub step: String,
    pub description: String,
    pub expect: Option<u16>,
    /// `None` when the request could not be prepared (a `${…}` had no value).
    pub sent: Option<Prepared>,
    pub got: Got,
    pub events: Option<Vec<Value>>,
    pub during: Vec<Exchange>,
    /// For a request sent while a watch was open: when, after the watch opened.
    pub after_ms: u64,
    /// For a watch: how long the stream was read at most.
    pub stream_ms: Option<u64>,
}

impl Exchange {
    /// One line naming the request.
    pub fn request_line(&self) -> String {
        match &self.sent {
            Some(p) => format!(
                "{} {}{}",
                p.method,
                p.target,
                if p.who == Who::Admin {
                    String::new()
                } else {
                    format!(" as {}", p.who.fixture_user())
                }
            ),
            None => format!("(step {} was not sent)", self.step),
        }
    }
}

/// The implicit first step of every sequence.
pub fn create_namespace_step() -> Step {
    Step {
        name: "create-namespace".into(),
        description: Some("Create the sequence's own namespace.".into()),
        who: Who::Admin,
        method: "POST".into(),
        path: "/api/v1/namespaces".into(),
        query: Default::default(),
        headers: Default::default(),
        patch: None,
        body: Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "${ns}"}})),
        body_raw: None,
        set: Default::default(),
        remove: vec![],
        save: None,
        expect: Some(201),
        watch: None,
        after_ms: 0,
        sleep_ms: 0,
    }
}

fn query_value(v: &Value, vars: &Vars) -> Result<String, String> {
    match v {
        Value::String(s) => vars.string(s),
        Value::Null => Ok(String::new()),
        other => Ok(other.to_string()),
    }
}

/// Resolves a step into the exact request.
pub fn prepare(step: &Step, vars: &Vars) -> Result<Prepared, String> {
    let mut target = vars.string(&step.path)?;
    if !step.query.is_empty() {
        let mut q = form_urlencoded::Serializer::new(String::new());
        for (k, v) in &step.query {
            q.append_pair(k, &query_value(v, vars)?);
        }
        target.push(if target.contains('?') { '&' } else { '?' });
        target.push_str(&q.finish());
    }
    let mut headers: Vec<(String, String)> = Vec::new();
    for (k, v) in &step.headers {
        headers.push((k.clone(), query_value(v, vars)?));
    }
    let has = |headers: &[(String, String)], name: &str| {
        headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name))
    };
    let body = match (&step.body, &step.body_raw) {
        (_, Some(raw)) => Some(vars.string(raw)?.into_bytes()),
        (Some(b), None) => {
            let mut b = vars.json(b)?;
            for (pointer, v) in &step.set {
                set_pointer(&mut b, pointer, vars.json(v)?)?;
            }
            for pointer in &step.remove {
                remove_pointer(&mut b, pointer)?;
            }
            Some(serde_json::to_vec(&b).map_err(|e| e.to_string())?)
        }
        (None, None) => None,
    };
    if !has(&headers, "Content-Type") {
        if let Some(p) = step.patch {
            headers.push(("Content-Type".into(), p.content_type().into()));
        } else if body.is_some() {
            headers.push(("Content-Type".into(), "application/json".into()));
        }
    }
    if !has(&headers, "User-Agent") {
        headers.push(("User-Agent".into(), USER_AGENT.into()));
    }
    Ok(Prepared {
        who: step.who,
        method: step.method.clone(),
        target,
        headers,
        body,
    })
}

fn save(step: &Step, got: &Got, vars: &mut Vars) {
    if let Some(name) = &step.save {
        vars.saved.insert(name.clone(), body_value(&got.body));
    }
}

async fn one(server: &Server, step: &Step, vars: &mut Vars) -> Exchange {
    if step.sleep_ms > 0 {
        tokio::time::sleep(Duration::from_millis(step.sleep_ms)).await;
    }
    let description = step
        .description
        .clone()
        .unwrap_or_else(|| step.name.clone());
    let prepared = match prepare(step, vars) {
        Ok(p) => p,
        Err(e) => {
            return Exchange {
                step: step.name.clone(),
                description,
                expect: step.expect,
                sent: None,
                got: Got {
                    error: Some(e),
                    ..Default::default()
                },
                events: None,
                during: vec![],
                after_ms: step.after_ms,
                stream_ms: step.watch.as_ref().map(|w| w.max_ms),
            };
        }
    };
    let (got, events, during) = match &step.watch {
        None => (server.send(&prepared, None).await, None, vec![]),
        Some(w) => {
            let reading = server.send(&prepared, Some(Duration::from_millis(w.max_ms)));
            let mut inner_vars = vars.clone();
            let concurrent = async {
                let started = tokio::time::Instant::now();
                let mut out = Vec::new();
                for d in &w.during {
                    tokio::time::sleep_until(started + Duration::from_millis(d.after_ms)).await;
                    out.push(Box::pin(one(server, d, &mut inner_vars)).await);
                }
                out
            };
            let (got, during) = tokio::join!(reading, concurrent);
            vars.saved = inner_vars.saved;
            let events = watch_events(&got.body);
            (got, Some(events), during)
        }
    };
    save(step, &got, vars);
    Exchange {
        step: step.name.clone(),
        description,
        expect: step.expect,
        sent: Some(prepared),
        got,
        events,
        during,
        after_ms: step.after_ms,
        stream_ms: step.watch.as_ref().map(|w| w.max_ms),
    }
}

/// Runs the sequence in namespace `ns`, returning one exchange per step (the namespace
/// creation first); removes what it created unless `keep`.
pub async fn run_sequence(
    server: &Server,
    seq: &Sequence,
    ns: &str,
    run: &str,
    keep: bool,
) -> Vec<Exchange> {
    let mut vars = Vars::default();
    vars.fixed.insert("ns".into(), ns.into());
    vars.fixed.insert("run".into(), run.into());
    let mut out = vec![one(server, &create_namespace_step(), &mut vars).await];
    for step in &seq.steps {
        out.push(one(server, step, &mut vars).await);
    }
    if !keep {
        cleanup(server, seq, ns, &vars).await;
    }
    out
}

/// Collections a sequence may fill; emptied before the namespace is deleted, because a
/// server without controllers never removes a namespace's content by itself.
const NAMESPACED: &[&str] = &[
    "/apis/apps/v1/namespaces/{ns}/deployments",
    "/apis/apps/v1/namespaces/{ns}/replicasets",
    "/api/v1/namespaces/{ns}/services",
    "/api/v1/namespaces/{ns}/configmaps",
    "/api/v1/namespaces/{ns}/secrets",
    "/api/v1/namespaces/{ns}/serviceaccounts",
    "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers",
    "/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses",
    "/apis/gateway.networking.k8s.io/v1/namespaces/{ns}/httproutes",
    "/apis/gateway.networking.k8s.io/v1/namespaces/{ns}/gateways",
    "/apis/gateway.networking.k8s.io/v1/namespaces/{ns}/grpcroutes",
    "/apis/gateway.networking.k8s.io/v1beta1/namespaces/{ns}/referencegrants",
];

async fn admin(server: &Server, method: &str, target: String, body: Option<Value>) -> Got {
    let mut headers = vec![("User-Agent".to_string(), USER_AGENT.to_string())];
    if body.is_some() {
        headers.push((
            "Content-Type".into(),
            if method == "PATCH" {
                PatchKind::Merge.content_type().into()
            } else {
                "application/json".into()
            },
        ));
    }
    server
        .send(
            &Prepared {
                who: Who::Admin,
                method: method.into(),
                target,
                headers,
                body: body.map(|b| b.to_string().into_bytes()),
            },
            None,
        )
        .await
}

/// Deletes an object, first releasing finalizers nobody will act on (no controllers run).
async fn force_delete(server: &Server, path: String) {
    let got = admin(server, "GET", path.clone(), None).await;
    if got.status != 200 {
        return;
    }
    let obj = body_value(&got.body);
    if obj
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty())
    {
        admin(
            server,
            "PATCH",
            path.clone(),
            Some(json!({"metadata": {"finalizers": null}})),
        )
        .await;
    }
    admin(server, "DELETE", path, None).await;
}

async fn cleanup(server: &Server, seq: &Sequence, ns: &str, vars: &Vars) {
    for path in &seq.cleanup {
        let Ok(path) = vars.string(path) else {
            continue;
        };
        match path.strip_prefix("/api/v1/namespaces/") {
            Some(name) if !name.contains('/') => remove_namespace(server, name).await,
            _ => force_delete(server, path).await,
        }
    }
    remove_namespace(server, ns).await;
}

/// Empties a `parity-` namespace, deletes it and, since no namespace controller runs,
/// finalizes it.
async fn remove_namespace(server: &Server, ns: &str) {
    if !ns.starts_with("parity-") {
        return;
    }
    for collection in NAMESPACED {
        let collection = collection.replace("{ns}", ns);
        let got = admin(server, "GET", collection.clone(), None).await;
        if got.status != 200 {
            continue;
        }
        let list = body_value(&got.body);
        for item in list["items"].as_array().into_iter().flatten() {
            if let Some(name) = item.pointer("/metadata/name").and_then(Value::as_str) {
                force_delete(server, format!("{collection}/{name}")).await;
            }
        }
    }
    let ns_path = format!("/api/v1/namespaces/{ns}");
    admin(server, "DELETE", ns_path.clone(), None).await;
    let got = admin(server, "GET", ns_path.clone(), None).await;
    if got.status == 200 {
        let mut obj = body_value(&got.body);
        obj["spec"]["finalizers"] = json!([]);
        admin(server, "PUT", format!("{ns_path}/finalize"), Some(obj)).await;
    }
}
