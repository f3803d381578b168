//! The sixth layer: the `/sandbox/…` control surface, which gives standalone runs what the
//! [`crate::Sandbox`] handle gives Rust tests — the request log and counters, faults (as JSON),
//! the rollout mode, the admission webhooks, seeding the demo application ([`demo`]). Admin
//! token required (401
//! without, 403 for other identities); not logged, not counted.
//!
//! Uses [`crate::http`], [`crate::controllers`], [`crate::store`] and [`crate::model`].

pub mod demo;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use serde_json::{Value, json};

use crate::api::{Reply, full};
use crate::controllers::rollout::{Controller, Rollout};
use crate::http::auth::Identity;
use crate::http::faults::{Fault, Mutation, Trigger};
use crate::http::{ControlSurface, Server};
use crate::kinds::IngressNginxWebhook;
use crate::model::gojson;
use crate::store::patch::merge_patch;

/// The control surface of one sandbox.
pub struct Control {
    pub rollout: Arc<Controller>,
}

fn control_reply(code: u16, v: &Value) -> Reply {
    Reply {
        status: code,
        headers: vec![
            ("Content-Type".into(), "application/json".into()),
            ("Cache-Control".into(), "no-cache, private".into()),
        ],
        body: full(gojson::encode(v, true)),
        reason: None,
        cut: false,
        json: None,
    }
}

fn control_error(code: u16, msg: &str) -> Reply {
    control_reply(code, &json!({"error": msg}))
}

fn opt_u32(v: &Value, key: &str, default: u32) -> u32 {
    v.get(key)
        .and_then(Value::as_u64)
        .map(|n| n.min(u64::from(u32::MAX)) as u32)
        .unwrap_or(default)
}

fn opt_string(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// Parse a fault from its JSON form (see the crate README).
pub(crate) fn fault_from_json(v: &Value) -> Result<Fault, String> {
    let fault = fault_kind_from_json(v)?;
    Ok(match v.get("dryRun").and_then(Value::as_bool) {
        Some(dry_run) => Fault::Restrict {
            dry_run,
            fault: Box::new(fault),
        },
        None => fault,
    })
}

fn fault_kind_from_json(v: &Value) -> Result<Fault, String> {
    let kind = v
        .get("type")
        .and_then(Value::as_str)
        .ok_or("missing \"type\"")?;
    let path = |key: &str| opt_string(v, key).ok_or(format!("missing \"{key}\""));
    Ok(match kind {
        "conflicts" => Fault::Conflicts {
            object_path: path("objectPath")?,
            count: opt_u32(v, "count", 1),
        },
        "status" => Fault::Status {
            method: opt_string(v, "method"),
            path_prefix: path("pathPrefix")?,
            status: v
                .get("status")
                .and_then(Value::as_u64)
                .and_then(|s| u16::try_from(s).ok())
                .ok_or("missing \"status\"")?,
            count: opt_u32(v, "count", 1),
        },
        "latency" => Fault::Latency(Duration::from_millis(
            v.get("ms")
                .and_then(Value::as_u64)
                .ok_or("missing \"ms\"")?,
        )),
        "competingDelete" => Fault::CompetingDelete {
            object_path: path("objectPath")?,
            after: trigger(v)?,
        },
        "competingRecreate" => Fault::CompetingRecreate {
            object_path: path("objectPath")?,
            after: trigger(v)?,
            mutate: v.get("mergePatch").cloned().map(|patch| {
                Box::new(move |obj: &mut Value| *obj = merge_patch(obj, &patch)) as Mutation
            }),
        },
        "competingCreate" => Fault::CompetingCreate {
            object_path: path("objectPath")?,
            after: trigger(v)?,
            body: v.get("body").cloned().ok_or("missing \"body\"")?,
        },
        "competingWrite" => {
            let after = trigger(v)?;
            let patch = v.get("mergePatch").cloned().unwrap_or_else(
                || json!({"metadata": {"annotations": {"sandbox/competing-write": "1"}}}),
            );
            Fault::CompetingWrite {
                object_path: path("objectPath")?,
                after,
                mutate: Box::new(move |obj| *obj = merge_patch(obj, &patch)),
            }
        }
        "dropConnection" => Fault::DropConnection {
            method: opt_string(v, "method"),
            path_prefix: path("pathPrefix")?,
            count: opt_u32(v, "count", 1),
        },
        "dropMidResponse" => Fault::DropMidResponse {
            method: opt_string(v, "method"),
            path_prefix: path("pathPrefix")?,
            count: opt_u32(v, "count", 1),
        },
        "hang" => Fault::Hang {
            path_prefix: path("pathPrefix")?,
            count: opt_u32(v, "count", 1),
        },
        "hold" => Fault::Hold {
            method: opt_string(v, "method"),
            path_prefix: path("pathPrefix")?,
            count: opt_u32(v, "count", 1),
        },
        other => return Err(format!("unknown fault type {other:?}")),
    })
}

/// `"after"` of a competing-writer fault (default `read`).
fn trigger(v: &Value) -> Result<Trigger, String> {
    match v.get("after").and_then(Value::as_str).unwrap_or("read") {
        "read" => Ok(Trigger::Read),
        "nextWrite" => Ok(Trigger::NextWrite),
        "nextRealWrite" => Ok(Trigger::NextRealWrite),
        other => Err(format!(
            "\"after\" must be \"read\", \"nextWrite\" or \"nextRealWrite\", not {other:?}"
        )),
    }
}

/// Parse `off`, `stuck`, `deadline`, `auto`, `auto:2s`, `auto:500ms`.
pub fn parse_rollout(s: &str) -> Result<Rollout, String> {
    match s {
        "off" => Ok(Rollout::Off),
        "stuck" => Ok(Rollout::Stuck),
        "deadline" | "progress-deadline-exceeded" => Ok(Rollout::ProgressDeadlineExceeded),
        "auto" => Ok(Rollout::Auto {
            delay: Duration::from_secs(2),
        }),
        other => {
            let d = other.strip_prefix("auto:").ok_or(format!(
                "unknown rollout mode {other:?}: use off, stuck, deadline, auto or auto:<duration>"
            ))?;
            let delay = if let Some(ms) = d.strip_suffix("ms") {
                ms.parse::<u64>()
                    .map(Duration::from_millis)
                    .map_err(|e| e.to_string())?
            } else if let Some(s) = d.strip_suffix('s') {
                s.parse::<f64>()
                    .map(Duration::from_secs_f64)
                    .map_err(|e| e.to_string())?
            } else {
                return Err(format!("bad duration {d:?}: use e.g. 2s or 500ms"));
            };
            Ok(Rollout::Auto { delay })
        }
    }
}

fn fault_summary(f: &Fault) -> Value {
    match f {
        Fault::Conflicts { object_path, count } => {
            json!({"type": "conflicts", "objectPath": object_path, "count": count})
        }
        Fault::Status {
            method,
            path_prefix,
            status,
            count,
        } => {
            json!({"type": "status", "method": method, "pathPrefix": path_prefix, "status": status, "count": count})
        }
        Fault::Latency(d) => json!({"type": "latency", "ms": d.as_millis() as u64}),
        Fault::CompetingWrite {
            object_path, after, ..
        } => json!({"type": "competingWrite", "objectPath": object_path, "after": after}),
        Fault::CompetingDelete { object_path, after } => {
            json!({"type": "competingDelete", "objectPath": object_path, "after": after})
        }
        Fault::CompetingRecreate {
            object_path, after, ..
        } => json!({"type": "competingRecreate", "objectPath": object_path, "after": after}),
        Fault::CompetingCreate {
            object_path, after, ..
        } => json!({"type": "competingCreate", "objectPath": object_path, "after": after}),
        Fault::DropConnection {
            method,
            path_prefix,
            count,
        } => {
            json!({"type": "dropConnection", "method": method, "pathPrefix": path_prefix, "count": count})
        }
        Fault::DropMidResponse {
            method,
            path_prefix,
            count,
        } => {
            json!({"type": "dropMidResponse", "method": method, "pathPrefix": path_prefix, "count": count})
        }
        Fault::Hang { path_prefix, count } => {
            json!({"type": "hang", "pathPrefix": path_prefix, "count": count})
        }
        Fault::Hold {
            method,
            path_prefix,
            count,
        } => {
            json!({"type": "hold", "method": method, "pathPrefix": path_prefix, "count": count})
        }
        Fault::Restrict { dry_run, fault } => {
            let mut v = fault_summary(fault);
            v["dryRun"] = json!(dry_run);
            v
        }
    }
}

/// `/sandbox/…`: admin token required; not logged.
impl ControlSurface for Control {
    fn handle(
        &self,
        server: &Server,
        id: Option<Identity>,
        method: &Method,
        path: &str,
        query: &[(String, String)],
        body: &Bytes,
    ) -> Reply {
        match id {
            None | Some(Identity::Invalid) => {
                return control_error(401, "an admin bearer token is required");
            }
            Some(Identity::Admin) => {}
            Some(_) => {
                return control_error(403, "only the admin identity may use the control surface");
            }
        }
        let parsed = if body.is_empty() {
            Ok(json!({}))
        } else {
            serde_json::from_slice::<Value>(body)
        };
        let Ok(payload) = parsed else {
            return control_error(400, "the body must be JSON");
        };
        match (method.as_str(), path.trim_end_matches('/')) {
            ("GET", "/sandbox/requests") => {
                let since: u64 = query
                    .iter()
                    .find(|(k, _)| k == "since")
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(0);
                let entries = server.log.entries_since(since);
                control_reply(200, &serde_json::to_value(entries).unwrap_or(json!([])))
            }
            ("DELETE", "/sandbox/requests") => {
                server.log.clear();
                control_reply(200, &json!({}))
            }
            ("GET", "/sandbox/counters") => control_reply(
                200,
                &serde_json::to_value(server.log.counters()).unwrap_or(json!({})),
            ),
            ("GET", "/sandbox/faults") => {
                let list = server.faults.inspect(|active, latency| {
                    let mut list: Vec<Value> = active.iter().map(fault_summary).collect();
                    if !latency.is_zero() {
                        list.push(fault_summary(&Fault::Latency(latency)));
                    }
                    list
                });
                control_reply(200, &Value::Array(list))
            }
            ("POST", "/sandbox/faults") => {
                let items = match &payload {
                    Value::Array(a) => a.clone(),
                    other => vec![other.clone()],
                };
                let mut parsed = Vec::new();
                for it in &items {
                    match fault_from_json(it) {
                        Ok(f) => parsed.push(f),
                        Err(e) => return control_error(400, &e),
                    }
                }
                for fault in parsed {
                    server.faults.arm(fault);
                }
                control_reply(201, &json!({"armed": items.len()}))
            }
            ("DELETE", "/sandbox/faults") => {
                server.faults.clear();
                control_reply(200, &json!({}))
            }
            ("GET", "/sandbox/rollout") => {
                let mode = match self.rollout.mode() {
                    Rollout::Off => json!({"mode": "off"}),
                    Rollout::Stuck => json!({"mode": "stuck"}),
                    Rollout::ProgressDeadlineExceeded => json!({"mode": "deadline"}),
                    Rollout::Auto { delay } => {
                        json!({"mode": "auto", "delayMs": delay.as_millis() as u64})
                    }
                };
                control_reply(200, &mode)
            }
            ("PUT", "/sandbox/rollout") => {
                let mode = payload.get("mode").and_then(Value::as_str).unwrap_or("");
                let spec = match (mode, payload.get("delayMs").and_then(Value::as_u64)) {
                    ("auto", Some(ms)) => format!("auto:{ms}ms"),
                    (m, _) => m.to_string(),
                };
                match parse_rollout(&spec) {
                    Ok(r) => {
                        self.rollout.set_mode(r);
                        control_reply(200, &json!({"mode": mode}))
                    }
                    Err(e) => control_error(400, &e),
                }
            }
            ("POST", "/sandbox/seed") => {
                let ns = payload
                    .get("namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("demo");
                let app = payload.get("app").and_then(Value::as_str).unwrap_or("web");
                let class = payload.get("defaultIngressClass").and_then(Value::as_str);
                let seeded = demo::seed(&server.store, ns, app).and_then(|()| match class {
                    Some(c) => demo::ingress_class(&server.store, c, true),
                    None => Ok(()),
                });
                match seeded {
                    Ok(()) => control_reply(
                        201,
                        &json!({"namespace": ns, "app": app, "defaultIngressClass": class}),
                    ),
                    Err(e) => control_reply(e.code, &e.to_json()),
                }
            }
            ("GET", "/sandbox/admission") => {
                let mode = server.store.read().webhooks.ingress_nginx;
                control_reply(
                    200,
                    &json!({"ingressNginxWebhook": mode.map_or("off", IngressNginxWebhook::as_str)}),
                )
            }
            ("PUT", "/sandbox/admission") => {
                let wanted = payload
                    .get("ingressNginxWebhook")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let Some(mode) = IngressNginxWebhook::parse(wanted) else {
                    return control_error(
                        400,
                        "ingressNginxWebhook must be off, snippets-disabled or risky-annotations",
                    );
                };
                match demo::set_ingress_nginx_webhook(&server.store, mode) {
                    Ok(()) => control_reply(200, &json!({"ingressNginxWebhook": wanted})),
                    Err(e) => control_reply(e.code, &e.to_json()),
                }
            }
            ("GET", "/sandbox/kubeconfig") | ("GET", "/sandbox") => control_reply(
                200,
                &json!({"endpoints": ["GET/DELETE /sandbox/requests", "GET /sandbox/counters", "GET/POST/DELETE /sandbox/faults", "GET/PUT /sandbox/rollout", "POST /sandbox/seed", "GET/PUT /sandbox/admission"]}),
            ),
            _ => control_error(404, "unknown control endpoint; see the crate README"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollout_modes_parse() {
        assert_eq!(parse_rollout("off"), Ok(Rollout::Off));
        assert_eq!(
            parse_rollout("auto:2s"),
            Ok(Rollout::Auto {
                delay: Duration::from_secs(2)
            })
        );
        assert_eq!(
            parse_rollout("auto:250ms"),
            Ok(Rollout::Auto {
                delay: Duration::from_millis(250)
            })
        );
        assert!(parse_rollout("sometimes").is_err());
    }

    #[test]
    fn faults_parse_from_json() {
        assert!(matches!(
            fault_from_json(
                &json!({"type": "status", "pathPrefix": "/apis", "status": 503, "count": 2})
            ),
            Ok(Fault::Status {
                status: 503,
                count: 2,
                ..
            })
        ));
        assert!(fault_from_json(&json!({"type": "nope"})).is_err());
    }
}
