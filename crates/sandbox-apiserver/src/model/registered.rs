//! The kinds kube-apiserver v1.28's scheme knows, by group/version: what decides between "no
//! kind is registered" and "converting … unknown conversion" (or "the API version in the data
//! does not match") when a body names another type or version than the endpoint's.

/// Group/versions and their kinds (a kind's `…List` is registered with it): every one the
/// server serves, and the older versions its scheme still decodes.
const REGISTERED: &[(&str, &[&str])] = &[
    (
        "v1",
        &[
            "Binding",
            "ComponentStatus",
            "ConfigMap",
            "Endpoints",
            "Event",
            "LimitRange",
            "Namespace",
            "Node",
            "PersistentVolume",
            "PersistentVolumeClaim",
            "Pod",
            "PodTemplate",
            "ReplicationController",
            "ResourceQuota",
            "Secret",
            "Service",
            "ServiceAccount",
            "List",
            "RangeAllocation",
            "SerializedReference",
            "PodExecOptions",
            "PodLogOptions",
            "PodAttachOptions",
            "PodPortForwardOptions",
            "PodProxyOptions",
            "NodeProxyOptions",
            "ServiceProxyOptions",
            "PodStatusResult",
            "Eviction",
        ],
    ),
    (
        "admissionregistration.k8s.io/v1",
        &[
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ],
    ),
    ("apiextensions.k8s.io/v1", &["CustomResourceDefinition"]),
    ("apiregistration.k8s.io/v1", &["APIService"]),
    (
        "apps/v1",
        &[
            "ControllerRevision",
            "DaemonSet",
            "Deployment",
            "ReplicaSet",
            "StatefulSet",
        ],
    ),
    (
        "apps/v1beta1",
        &[
            "ControllerRevision",
            "Deployment",
            "DeploymentRollback",
            "Scale",
            "StatefulSet",
        ],
    ),
    (
        "apps/v1beta2",
        &[
            "ControllerRevision",
            "DaemonSet",
            "Deployment",
            "ReplicaSet",
            "Scale",
            "StatefulSet",
        ],
    ),
    (
        "authentication.k8s.io/v1",
        &["SelfSubjectReview", "TokenReview"],
    ),
    (
        "authorization.k8s.io/v1",
        &[
            "LocalSubjectAccessReview",
            "SelfSubjectAccessReview",
            "SelfSubjectRulesReview",
            "SubjectAccessReview",
        ],
    ),
    ("autoscaling/v1", &["HorizontalPodAutoscaler", "Scale"]),
    ("autoscaling/v2", &["HorizontalPodAutoscaler"]),
    ("autoscaling/v2beta1", &["HorizontalPodAutoscaler"]),
    ("autoscaling/v2beta2", &["HorizontalPodAutoscaler"]),
    ("batch/v1", &["CronJob", "Job"]),
    ("batch/v1beta1", &["CronJob"]),
    ("certificates.k8s.io/v1", &["CertificateSigningRequest"]),
    ("coordination.k8s.io/v1", &["Lease"]),
    ("discovery.k8s.io/v1", &["EndpointSlice"]),
    ("events.k8s.io/v1", &["Event"]),
    (
        "extensions/v1beta1",
        &[
            "DaemonSet",
            "Deployment",
            "DeploymentRollback",
            "Ingress",
            "NetworkPolicy",
            "ReplicaSet",
            "ReplicationControllerDummy",
            "Scale",
        ],
    ),
    (
        "flowcontrol.apiserver.k8s.io/v1beta2",
        &["FlowSchema", "PriorityLevelConfiguration"],
    ),
    (
        "flowcontrol.apiserver.k8s.io/v1beta3",
        &["FlowSchema", "PriorityLevelConfiguration"],
    ),
    (
        "networking.k8s.io/v1",
        &["Ingress", "IngressClass", "NetworkPolicy"],
    ),
    ("networking.k8s.io/v1beta1", &["Ingress", "IngressClass"]),
    ("node.k8s.io/v1", &["RuntimeClass"]),
    ("policy/v1", &["Eviction", "PodDisruptionBudget"]),
    ("policy/v1beta1", &["Eviction", "PodDisruptionBudget"]),
    (
        "rbac.authorization.k8s.io/v1",
        &["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"],
    ),
    ("scheduling.k8s.io/v1", &["PriorityClass"]),
    (
        "storage.k8s.io/v1",
        &[
            "CSIDriver",
            "CSINode",
            "CSIStorageCapacity",
            "StorageClass",
            "VolumeAttachment",
        ],
    ),
];

/// The meta kinds `AddToGroupVersion` registers in every group/version.
const META: &[&str] = &[
    "Status",
    "WatchEvent",
    "DeleteOptions",
    "ListOptions",
    "GetOptions",
    "CreateOptions",
    "UpdateOptions",
    "PatchOptions",
];

/// Is `kind` registered for `api_version` in the scheme?
pub fn is_registered(api_version: &str, kind: &str) -> bool {
    let Some((_, kinds)) = REGISTERED.iter().find(|(gv, _)| *gv == api_version) else {
        return false;
    };
    let base = kind.strip_suffix("List").unwrap_or(kind);
    META.contains(&kind) || kinds.contains(&kind) || kinds.contains(&base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_and_older_versions_and_meta_kinds_are_registered() {
        assert!(is_registered("apps/v1beta1", "StatefulSet"));
        assert!(is_registered("apps/v1", "DeploymentList"));
        assert!(is_registered("apps/v1", "Status"));
        assert!(!is_registered("apps/v1", "Pod"));
        assert!(!is_registered("apps/v1", "Scale"));
        assert!(!is_registered("foo/v1", "Deployment"));
    }
}
