//! Events as the cluster's components post them: core/v1 Events through client-go's recorder
//! (the controllers and the kubelet: `source`, `firstTimestamp`/`lastTimestamp`, `count`), and
//! the scheduler's `events.k8s.io/v1` Events, which core/v1 shows with an `eventTime`, an
//! `action`, an empty `source` and no count — and whose managedFields name the fields of the
//! API they were written through.

use serde_json::{Value, json};

use super::{as_manager, name, ns, uid};
use crate::kinds;
use crate::model::time;
use crate::store::State;

/// Names events as client-go does (`<object>.<unix nanoseconds in hex>`), strictly increasing.
#[derive(Default)]
pub struct Recorder {
    last: u128,
}

/// Who posts a core/v1 event.
#[derive(Clone, Copy)]
pub struct Source<'a> {
    pub component: &'a str,
    /// The node, for the kubelet.
    pub host: &'a str,
    /// The field manager its client writes as.
    pub manager: &'a str,
}

impl Recorder {
    fn name(&mut self, object: &str) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        self.last = now.max(self.last + 1);
        format!("{object}.{:x}", self.last)
    }

    /// Post a core/v1 event about `obj` (`field_path`: the container, for the kubelet).
    /// Returns its name.
    #[allow(clippy::too_many_arguments)]
    pub fn post(
        &mut self,
        st: &mut State,
        obj: &Value,
        api_version: &str,
        kind: &str,
        source: Source<'_>,
        ev_type: &str,
        reason: &str,
        message: &str,
        field_path: Option<&str>,
    ) -> Option<String> {
        let now = time::now_rfc3339();
        let mut involved = reference(obj, api_version, kind);
        if let Some(fp) = field_path {
            involved["fieldPath"] = json!(fp);
        }
        let mut src = json!({"component": source.component});
        if !source.host.is_empty() {
            src["host"] = json!(source.host);
        }
        let event_name = self.name(name(obj));
        let body = json!({
            "metadata": {"name": event_name, "namespace": ns(obj)},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "source": src,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "type": ev_type,
            "reportingComponent": source.component,
            "reportingInstance": source.host,
        });
        st.create_decoded(
            &kinds::EVENT,
            ns(obj),
            body,
            Vec::new(),
            &as_manager(source.manager),
        )
        .ok()
        .map(|_| event_name)
    }

    /// Count one more occurrence of an event: `count` + 1, `lastTimestamp` now, `message` as
    /// given (what the recorder's correlator patches).
    pub fn again(
        &mut self,
        st: &mut State,
        namespace: &str,
        event: &str,
        message: &str,
        manager: &str,
    ) {
        let now = time::now_rfc3339();
        let _ = st.system_update(&kinds::EVENT, namespace, event, manager, "", &mut |e| {
            let count = e.get("count").and_then(Value::as_i64).unwrap_or(1);
            e["count"] = json!(count + 1);
            e["lastTimestamp"] = json!(now);
            e["message"] = json!(message);
        });
    }

    /// Post the scheduler's event about `pod` (through `events.k8s.io/v1`).
    pub fn scheduler(
        &mut self,
        st: &mut State,
        pod: &Value,
        ev_type: &str,
        reason: &str,
        action: &str,
        message: &str,
    ) -> bool {
        let now = time::now_rfc3339();
        let body = json!({
            "metadata": {"name": self.name(name(pod)), "namespace": ns(pod)},
            "involvedObject": reference(pod, "v1", "Pod"),
            "reason": reason,
            "message": message,
            "source": {},
            "type": ev_type,
            "eventTime": time::now_rfc3339_micro(),
            "action": action,
            "reportingComponent": "default-scheduler",
            "reportingInstance": super::SCHEDULER_INSTANCE,
        });
        let fields = json!([{
            "manager": "kube-scheduler",
            "operation": "Update",
            "apiVersion": "events.k8s.io/v1",
            "time": now,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:action": {}, "f:eventTime": {}, "f:note": {}, "f:reason": {}, "f:regarding": {}, "f:reportingController": {}, "f:reportingInstance": {}, "f:type": {}},
        }]);
        st.create_with_fields(
            &kinds::EVENT,
            ns(pod),
            body,
            &as_manager("kube-scheduler"),
            fields,
        )
        .is_ok()
    }
}

/// An `ObjectReference` to `obj` as the recorder builds it.
fn reference(obj: &Value, api_version: &str, kind: &str) -> Value {
    json!({
        "kind": kind,
        "namespace": ns(obj),
        "name": name(obj),
        "uid": uid(obj),
        "apiVersion": api_version,
        "resourceVersion": super::text(obj, "/metadata/resourceVersion"),
    })
}
