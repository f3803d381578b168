//! The resource quota controller: `status.hard` from `spec.hard`, `status.used` of the
//! resources the sandbox counts (`pods`, `count/pods`: pods not Succeeded or Failed; the others
//! as `0`). A use that grew is recorded as the API server's quota admission records it (manager
//! `kube-apiserver`, when it admitted the pod); anything else as the controller
//! (`kube-controller-manager`).

use serde_json::{Map, Value, json};

use super::{list, name, ns};
use crate::kinds;
use crate::model::quantity;
use crate::store::State;

pub(super) fn sync_all(st: &mut State) -> bool {
    let mut changed = false;
    for q in list(st, &kinds::RESOURCE_QUOTA, None) {
        let hard = q
            .pointer("/spec/hard")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let pods = list(st, &kinds::POD, Some(ns(&q)))
            .iter()
            .filter(|p| !kinds::is_terminal(p))
            .count();
        let mut used = Map::new();
        for r in hard.keys() {
            let n = if kinds::POD_COUNTS.contains(&r.as_str()) {
                pods
            } else {
                0
            };
            used.insert(r.clone(), json!(n.to_string()));
        }
        let status = q.get("status").cloned().unwrap_or(json!({}));
        let want = json!({"hard": hard, "used": used});
        if status.get("hard") == want.get("hard") && status.get("used") == want.get("used") {
            continue;
        }
        let count = |s: &Value, r: &str| {
            s.pointer(&format!("/used/{}", r.replace('/', "~1")))
                .and_then(Value::as_str)
                .and_then(quantity::to_f64)
        };
        let grew = status.get("hard") == want.get("hard")
            && kinds::POD_COUNTS.iter().any(
                |r| matches!((count(&status, r), count(&want, r)), (Some(a), Some(b)) if b > a),
            );
        let manager = if grew {
            "kube-apiserver"
        } else {
            "kube-controller-manager"
        };
        if st
            .system_update(
                &kinds::RESOURCE_QUOTA,
                ns(&q),
                name(&q),
                manager,
                "status",
                &mut |o| o["status"] = want.clone(),
            )
            .is_ok()
        {
            changed = true;
        }
    }
    changed
}
