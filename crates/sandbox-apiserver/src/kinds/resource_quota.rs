//! ResourceQuota (`v1`): `spec.hard` limits, `status.hard`/`status.used` as the quota
//! controller reports them, the `status` subresource, `ValidateResourceQuota`'s checks of the
//! resource names and quantities, the `kubectl get resourcequota` columns — and the admission
//! check a new pod goes through ([`exceeded_quota`]). Of the quota's resources the sandbox
//! counts `pods` and `count/pods` (every pod not Succeeded or Failed); the others are stored
//! and shown but not enforced.

use serde_json::{Map, Value, json};

use super::table::{age, age_column, column, name_column, st};
use super::{Kind, Subresource};
use crate::model::ApiResource;
use crate::model::names::is_qualified_name;
use crate::model::quantity;
use crate::model::schema;
use crate::model::status::{FieldError, go_quote};

pub struct ResourceQuota;

pub static RESOURCE_QUOTA: ResourceQuota = ResourceQuota;

static API: ApiResource = ApiResource {
    group: "",
    version: "v1",
    api_version: "v1",
    resource: "resourcequotas",
    kind: "ResourceQuota",
    list_kind: "ResourceQuotaList",
    namespaced: true,
};

/// The resources counted for pods (what the pod evaluator reports that the sandbox tracks).
pub const POD_COUNTS: &[&str] = &["count/pods", "pods"];

const STANDARD_QUOTA: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.storage",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "persistentvolumeclaims",
    "configmaps",
    "services.nodeports",
    "services.loadbalancers",
];

/// `IsStandardResourceName` (huge pages aside).
const STANDARD: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
    "requests.storage",
    "services.nodeports",
    "services.loadbalancers",
];

const INTEGER: &[&str] = &[
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
];

impl Kind for ResourceQuota {
    fn api(&self) -> &'static ApiResource {
        &API
    }

    fn schema(&self) -> usize {
        schema::RESOURCE_QUOTA
    }

    fn subresources(&self) -> &'static [Subresource] {
        &[Subresource::Status]
    }

    fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errs = validate_resources(obj.pointer("/spec/hard"), "spec.hard");
        if old.is_none() {
            errs.extend(validate_resources(
                obj.pointer("/status/hard"),
                "status.hard",
            ));
            errs.extend(validate_resources(
                obj.pointer("/status/used"),
                "status.used",
            ));
        }
        errs
    }

    fn validate_status(&self, obj: &Value, _old: &Value) -> Vec<FieldError> {
        let mut errs = validate_resources(obj.pointer("/status/hard"), "status.hard");
        errs.extend(validate_resources(
            obj.pointer("/status/used"),
            "status.used",
        ));
        errs
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "Request",
                "string",
                "",
                "Request represents a minimum amount of cpu/memory that a container may consume.",
                0,
            ),
            column(
                "Limit",
                "string",
                "",
                "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
                0,
            ),
            age_column(),
        ]
    }

    fn table_cells(&self, obj: &Value, now: i64) -> Vec<Value> {
        let empty = Map::new();
        let hard = obj
            .pointer("/status/hard")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let used = obj
            .pointer("/status/used")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let mut names: Vec<&String> = hard.keys().collect();
        names.sort();
        let (mut request, mut limit) = (Vec::new(), Vec::new());
        for n in names {
            let cell = format!(
                "{n}: {}/{}",
                used.get(n).and_then(Value::as_str).unwrap_or("0"),
                hard.get(n).and_then(Value::as_str).unwrap_or("0")
            );
            if n.split('.').count() > 1 && n.starts_with("limits.") {
                limit.push(cell);
            } else {
                request.push(cell);
            }
        }
        vec![
            json!(st(obj, "/metadata/name")),
            json!(request.join(", ")),
            json!(limit.join(", ")),
            json!(age(obj, now)),
        ]
    }
}

/// `ValidateResourceQuotaResourceName` and `ValidateResourceQuantityValue` of each entry of a
/// `ResourceList` (in key order: the real server walks a Go map).
fn validate_resources(list: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(m) = list.and_then(Value::as_object) else {
        return errs;
    };
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    for k in keys {
        let p = format!("{path}[{k}]");
        let name_errs = is_qualified_name(k);
        for msg in &name_errs {
            errs.push(FieldError::invalid(&p, &go_quote(k), msg));
        }
        let huge_pages = k.starts_with("hugepages-") || k.starts_with("requests.hugepages-");
        if name_errs.is_empty()
            && !k.contains('/')
            && !STANDARD.contains(&k.as_str())
            && !huge_pages
        {
            errs.push(FieldError::invalid(
                &p,
                &go_quote(k),
                "must be a standard resource type or fully qualified",
            ));
        }
        if name_errs.is_empty() && !k.contains('/') && !STANDARD_QUOTA.contains(&k.as_str()) {
            errs.push(FieldError::invalid(
                &p,
                &go_quote(k),
                "must be a standard resource for quota",
            ));
        }
        let q = m.get(k).and_then(Value::as_str).unwrap_or("0");
        let value = quantity::to_f64(q).unwrap_or(0.0);
        if value < 0.0 {
            errs.push(FieldError::invalid(
                &p,
                &go_quote(q),
                "must be greater than or equal to 0",
            ));
        }
        if (INTEGER.contains(&k.as_str()) || k.starts_with("count/")) && value.fract() != 0.0 {
            errs.push(FieldError::invalid(&p, q, "must be an integer"));
        }
    }
    errs
}

/// The ResourceQuota admission's refusal of one more pod in a namespace with `quotas`, where
/// `used` pods count: `exceeded quota: <name>, requested: pods=1, used: pods=1, limited:
/// pods=1` for the first quota it would exceed (`None`: every quota allows it).
pub fn exceeded_quota(quotas: &[&Value], used: i64) -> Option<String> {
    for q in quotas {
        let hard = q
            .pointer("/status/hard")
            .and_then(Value::as_object)
            .filter(|m| !m.is_empty())
            .or_else(|| q.pointer("/spec/hard").and_then(Value::as_object));
        let Some(hard) = hard else { continue };
        let mut exceeded: Vec<(&str, i64)> = Vec::new();
        for r in POD_COUNTS {
            let Some(limit) = hard
                .get(*r)
                .and_then(Value::as_str)
                .and_then(quantity::to_f64)
            else {
                continue;
            };
            if (used + 1) as f64 > limit {
                exceeded.push((r, limit as i64));
            }
        }
        if exceeded.is_empty() {
            continue;
        }
        let list = |f: &dyn Fn(i64) -> i64| {
            exceeded
                .iter()
                .map(|(r, limit)| format!("{r}={}", f(*limit)))
                .collect::<Vec<_>>()
                .join(",")
        };
        return Some(format!(
            "exceeded quota: {}, requested: {}, used: {}, limited: {}",
            st(q, "/metadata/name"),
            list(&|_| 1),
            list(&|_| used),
            list(&|l| l)
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_beyond_the_quota_is_refused_with_the_admission_message() {
        let q = json!({"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "1"}}});
        assert_eq!(exceeded_quota(&[&q], 0), None);
        assert_eq!(
            exceeded_quota(&[&q], 1).as_deref(),
            Some("exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1")
        );
        let both =
            json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "2", "count/pods": "2"}}});
        assert_eq!(
            exceeded_quota(&[&both], 2).as_deref(),
            Some(
                "exceeded quota: q, requested: count/pods=1,pods=1, used: count/pods=2,pods=2, limited: count/pods=2,pods=2"
            )
        );
    }

    #[test]
    fn quota_resources_must_be_standard_or_qualified() {
        let errs = validate_resources(Some(&json!({"pods": "1", "bananas": "2"})), "spec.hard");
        assert_eq!(errs.len(), 2);
        assert_eq!(
            errs[0].text(),
            "spec.hard[bananas]: Invalid value: \"bananas\": must be a standard resource type or fully qualified"
        );
        assert_eq!(
            errs[1].text(),
            "spec.hard[bananas]: Invalid value: \"bananas\": must be a standard resource for quota"
        );
    }
}
