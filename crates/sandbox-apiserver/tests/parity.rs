//! Replays the exchanges `apiserver-parity --record` captured from a real kube-apiserver
//! v1.28.0 (`tests/fixtures/parity/<sequence>/NN-<step>.json`) on a fresh sandbox per
//! sequence, with the harness's own normalisation (`src/bin/apiserver-parity/normalize.rs`):
//! same status, compared headers and body once random values are placeholders.
//!
//! Requests are sent as recorded, with every random value the real server produced (versions,
//! uids, continue tokens, generated names) replaced by the sandbox's value that has the same
//! placeholder - as a client that read it would send it.
//!
//! `PENDING` lists the fixtures the sandbox does not reproduce yet, each with its divergence.
//! The test fails when a fixture outside it differs, and when one on it is reproduced (take
//! it off the list), so the list only shrinks.
#![allow(clippy::unwrap_used)]

#[path = "../src/bin/apiserver-parity/normalize.rs"]
mod normalize;

#[allow(dead_code)]
#[path = "../src/bin/apiserver-parity/client.rs"]
mod client;

use std::path::{Path, PathBuf};
use std::time::Duration;

use client::{Got, Prepared, Server, Who};
use normalize::{Observed, Side, body_value, first_difference, header_map, watch_events};
use sandbox_apiserver::{Sandbox, SandboxOptions};
use serde_json::Value;

/// Fixtures the sandbox does not reproduce yet: (`sequence/file`, the first difference, real
/// server first), grouped by sequence under a note naming the divergences. Steps that only
/// follow from an earlier divergence of their sequence (an object the sandbox did not create,
/// a version it did not bump) are listed too: they pass once that one is fixed.
const PENDING: &[(&str, &str)] = &[
    // A malformed resourceVersion in a patch: the real 500 message is the bare strconv error; a
    // non-string resourceVersion: the real 422 message shows the patch as a Go map; a uid in a
    // patch body that does not match: 422 (metadata.uid: field is immutable), not 409.
    (
        "conflicts/06-malformed-resource-version.json",
        "/body/message: real \"strconv.ParseUint: parsing \\\"12abc\\\": invalid syntax\", sandbox \"Internal error occurred: resourceVersion: Invalid value: \\\"12abc\\\": strconv.ParseUint: parsing \\\"12…",
    ),
    (
        "conflicts/08-resource-version-as-number.json",
        "/body/message: real \" \\\"\\\" is invalid: patch: Invalid value: \\\"{\\\\\\\"apiVersion\\\\\\\":\\\\\\\"autoscaling/v2\\\\\\\",\\\\\\\"kind\\\\\\\":\\…, sandbox \" \\\"\\\" is invalid: patch: Invalid value: \\\"{\\\\\\\"kind\\\\\\\":\\\\\\\"HorizontalPodAutoscaler\\\\\\\",\\\\\\\"apiVers…",
    ),
    (
        "conflicts/09-uid-mismatch-in-patch.json",
        "/status: real 422, sandbox 409",
    ),
    // Request bodies in YAML, no Content-Type (taken as JSON) and protobuf are decoded by the
    // real server (415 only for other types, with its own message); Accept: application/yaml gets
    // YAML (objects and Status errors), an unacceptable Accept gets 406; server-side apply
    // (application/apply-patch+yaml) is served: 422 without fieldManager, create, 409 conflict,
    // force; a YAML merge patch is 400.
    (
        "content-types/01-create-yaml.json",
        "/status: real 201, sandbox 415",
    ),
    (
        "content-types/03-create-text-plain.json",
        "/body/message: real \"the body of the request was in an unknown format - accepted media types include: application/json, …, sandbox \"415: Unsupported Media Type\"",
    ),
    (
        "content-types/04-create-protobuf-garbage.json",
        "/status: real 400, sandbox 415",
    ),
    (
        "content-types/05-create-no-content-type.json",
        "/status: real 201, sandbox 415",
    ),
    (
        "content-types/12-get-as-yaml.json",
        "/body: real \"apiVersion: networking.k8s.io/v1\\nkind: Ingress\\nmetadata:\\n  creationTimestamp: \\\"2026-12-01T06:32…, sandbox {\"kind\":\"Ingress\",\"apiVersion\":\"networking.k8s.io/v1\",\"metadata\":{\"name\":\"charset\",\"namespace\":\"<ns>…",
    ),
    (
        "content-types/13-get-as-unknown-type.json",
        "/status: real 406, sandbox 200",
    ),
    (
        "content-types/15-error-as-yaml.json",
        "/body: real \"apiVersion: v1\\ncode: 404\\ndetails:\\n  group: networking.k8s.io\\n  kind: ingresses\\n  name: missing…, sandbox {\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"ingresses.networking.…",
    ),
    (
        "content-types/16-apply-patch-without-field-manager.json",
        "/status: real 422, sandbox 415",
    ),
    (
        "content-types/17-apply-patch-creates.json",
        "/status: real 201, sandbox 415",
    ),
    (
        "content-types/18-apply-patch-conflict.json",
        "/status: real 409, sandbox 415",
    ),
    (
        "content-types/19-apply-patch-force.json",
        "/status: real 200, sandbox 415",
    ),
    (
        "content-types/20-patch-yaml-merge.json",
        "/status: real 400, sandbox 404",
    ),
    // A DELETE with a body ignores the query: ?dryRun=All with a DeleteOptions body (even {})
    // without dryRun deletes for real; the sandbox honours the query.
    (
        "delete-body-overrides-query/03-get-after.json",
        "/status: real 404, sandbox 200",
    ),
    (
        "delete-body-overrides-query/06-get-ingress-after.json",
        "/status: real 404, sandbox 200",
    ),
    // dryRun=All DELETE with propagationPolicy Foreground or Orphan (query or body) returns the
    // object as it would be (deletionTimestamp, deletionGracePeriodSeconds: 0, finalizer
    // foregroundDeletion/orphan, generation bumped), not a Status.
    (
        "delete-dry-run-propagation/02-dry-run-foreground-query.json",
        "/body/kind: real \"Deployment\", sandbox \"Status\"",
    ),
    (
        "delete-dry-run-propagation/04-dry-run-foreground-body.json",
        "/body/kind: real \"Deployment\", sandbox \"Status\"",
    ),
    (
        "delete-dry-run-propagation/06-dry-run-orphan-query.json",
        "/body/kind: real \"Deployment\", sandbox \"Status\"",
    ),
    // A real Foreground delete returns the object and leaves it in place, terminating (no garbage
    // collector), until its finalizer is released; the sandbox deletes at once. The later steps
    // follow from that.
    (
        "delete-foreground-without-gc/02-foreground-delete.json",
        "/body/kind: real \"Deployment\", sandbox \"Status\"",
    ),
    (
        "delete-foreground-without-gc/03-get-terminating.json",
        "/status: real 200, sandbox 404",
    ),
    (
        "delete-foreground-without-gc/04-list-terminating.json",
        "/body/items/0: real {\"metadata\":{\"name\":\"web\",\"namespace\":\"<ns>\",\"uid\":\"<uid:Deployment/web>\",\"resourceVersion\":\"<rv:Dep…, sandbox (absent)",
    ),
    (
        "delete-foreground-without-gc/05-patch-terminating.json",
        "/status: real 200, sandbox 404",
    ),
    (
        "delete-foreground-without-gc/06-delete-terminating-again.json",
        "/status: real 200, sandbox 404",
    ),
    (
        "delete-foreground-without-gc/07-add-finalizer-while-terminating.json",
        "/status: real 422, sandbox 404",
    ),
    (
        "delete-foreground-without-gc/08-release-finalizers.json",
        "/status: real 200, sandbox 404",
    ),
    // DeleteOptions validation: the message lists "nil" among supported propagation policies;
    // orphanDependents with a policy and an unknown dryRun value in the body are 422 (the sandbox
    // deletes for real, so the later steps find nothing); a DeleteOptions body of another kind is
    // 500.
    (
        "delete-invalid-options/02-invalid-propagation-policy.json",
        "/body/message: real \"DeleteOptions.meta.k8s.io \\\"\\\" is invalid: propagationPolicy: Unsupported value: \\\"Sometimes\\\": sup…, sandbox \"DeleteOptions.meta.k8s.io \\\"\\\" is invalid: propagationPolicy: Unsupported value: \\\"Sometimes\\\": sup…",
    ),
    (
        "delete-invalid-options/03-orphan-and-policy.json",
        "/status: real 422, sandbox 200",
    ),
    (
        "delete-invalid-options/05-invalid-dry-run-value-in-body.json",
        "/status: real 422, sandbox 200",
    ),
    (
        "delete-invalid-options/06-negative-grace-period.json",
        "/status: real 200, sandbox 404",
    ),
    (
        "delete-invalid-options/08-delete-options-wrong-kind.json",
        "/status: real 500, sandbox 404",
    ),
    (
        "delete-invalid-options/09-uid-precondition-mismatch.json",
        "/status: real 409, sandbox 404",
    ),
    (
        "delete-invalid-options/10-rv-precondition-mismatch.json",
        "/status: real 409, sandbox 404",
    ),
    (
        "delete-invalid-options/12-get-still-there.json",
        "/status: real 200, sandbox 404",
    ),
    // serviceAccountName is mirrored into the deprecated serviceAccount field (and its
    // managedFields entry); a probe without a handler is 422 (must specify a handler type).
    (
        "deployment-defaults/02-rolling-update-percentages.json",
        "/body/metadata/managedFields/0/fieldsV1/f:spec/f:template/f:spec/f:serviceAccount: real {}, sandbox (absent)",
    ),
    (
        "deployment-defaults/05-probe-without-handler.json",
        "/status: real 422, sandbox 201",
    ),
    // Strategic merge puts list elements the patch adds (containers, ports) before the existing
    // ones; decoding errors of JSON/merge/strategic patches have other texts and a non-object
    // merge patch is 400; a wrongly typed strategic patch value reports the patch as a Go map.
    (
        "deployment-patch-types/03-strategic-new-container.json",
        "/body/spec/template/spec/containers/0/name: real \"sidecar\", sandbox \"app\"",
    ),
    (
        "deployment-patch-types/04-strategic-two-new-containers-and-existing.json",
        "/body/spec/template/spec/containers/0/name: real \"zeta\", sandbox \"app\"",
    ),
    (
        "deployment-patch-types/07-strategic-env-and-ports-merge.json",
        "/body/spec/template/spec/containers/0/ports/0/name: real \"metrics\", sandbox \"http\"",
    ),
    (
        "deployment-patch-types/08-strategic-null-deletes.json",
        "/body/spec/template/spec/containers/0/ports/0/name: real \"metrics\", sandbox \"http\"",
    ),
    (
        "deployment-patch-types/14-json-patch-not-a-list.json",
        "/body/message: real \"error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp\", sandbox \"json: cannot unmarshal object into Go value of type jsonpatch.Patch\"",
    ),
    (
        "deployment-patch-types/16-merge-patch-not-an-object.json",
        "/status: real 400, sandbox 422",
    ),
    (
        "deployment-patch-types/17-strategic-patch-malformed.json",
        "/body/message: real \"unexpected end of JSON input\", sandbox \"invalid JSON document\"",
    ),
    (
        "deployment-patch-types/18-strategic-wrong-type.json",
        "/body/message: real \" \\\"\\\" is invalid: patch: Invalid value: \\\"map[spec:map[replicas:three]]\\\": unrecognized type: int32…, sandbox \" \\\"\\\" is invalid: patch: Invalid value: \\\"{\\\\\\\"kind\\\\\\\":\\\\\\\"Deployment\\\\\\\",\\\\\\\"apiVersion\\\\\\\":\\\\\\\"a…",
    ),
    (
        "deployment-patch-types/21-patch-empty-body.json",
        "/body/message: real \"error decoding patch: unexpected end of JSON input\", sandbox \"Invalid JSON Patch\"",
    ),
    // A Deployment name longer than 63 characters gets a Warning header; missing selector also
    // reports the template labels mismatch; maxUnavailable/maxSurge messages print intstr values
    // Go-style; an unknown strategy type is reported on spec.strategy with the whole struct.
    (
        "deployment-validation/02-name-too-long.json",
        "/headers/Warning: real \"299 - \\\"metadata.name: this is used in Pod names and hostnames, which can result in surprising beha…, sandbox (absent)",
    ),
    (
        "deployment-validation/05-missing-selector.json",
        "/body/message: real \"Deployment.apps \\\"web\\\" is invalid: [spec.selector: Required value, spec.template.metadata.labels: …, sandbox \"Deployment.apps \\\"web\\\" is invalid: spec.selector: Required value\"",
    ),
    (
        "deployment-validation/11-negative-replicas-and-bad-strategy.json",
        "/body/message: real \"Deployment.apps \\\"web\\\" is invalid: [spec.replicas: Invalid value: -1: must be greater than or equa…, sandbox \"Deployment.apps \\\"web\\\" is invalid: [spec.replicas: Invalid value: -1: must be greater than or equa…",
    ),
    (
        "deployment-validation/13-bad-strategy-type.json",
        "/body/message: real \"Deployment.apps \\\"web\\\" is invalid: spec.strategy: Unsupported value: apps.DeploymentStrategy{Type:…, sandbox \"Deployment.apps \\\"web\\\" is invalid: spec.strategy.type: Unsupported value: \\\"BlueGreen\\\": supported…",
    ),
    // The Gateway API group and CRD kinds are missing from /apis, the aggregated documents and
    // their group/version documents; /livez?verbose lists the real server's checks;
    // /openapi/v3 lists every group/version.
    (
        "discovery/15-livez-verbose.json",
        "/body: real \"[+]ping ok\\n[+]log ok\\n[+]etcd ok\\n[+]poststarthook/start-kube-apiserver-admission-initializer ok\\n…, sandbox \"ok\"",
    ),
    (
        "discovery/16-openapi-v3-index.json",
        "/body/paths/.well-known/openid-configuration: real {\"serverRelativeURL\":\"/openapi/v3/.well-known/openid-configuration?hash=E38C77093957AD90DA4BB5259D6E…, sandbox (absent)",
    ),
    // fieldValidation=Strict refuses duplicate JSON fields (400) and, on PATCH, answers unknown
    // or duplicate fields with 422 Invalid (not 400); an unknown fieldValidation value is 422;
    // server-side apply is not served.
    (
        "field-validation/04-create-duplicate-field-strict.json",
        "/status: real 400, sandbox 201",
    ),
    (
        "field-validation/05-create-duplicate-field-warn.json",
        "/body/metadata/uid: real \"<uid:Deployment/dup2>\", sandbox \"<uid:Deployment/dup2#2>\"",
    ),
    (
        "field-validation/06-invalid-field-validation-value.json",
        "/status: real 422, sandbox 400",
    ),
    (
        "field-validation/08-merge-patch-unknown-strict.json",
        "/status: real 422, sandbox 400",
    ),
    (
        "field-validation/09-strategic-patch-unknown-strict.json",
        "/status: real 422, sandbox 400",
    ),
    (
        "field-validation/10-json-patch-unknown-strict.json",
        "/status: real 422, sandbox 400",
    ),
    (
        "field-validation/13-strategic-patch-duplicate-strict.json",
        "/status: real 422, sandbox 200",
    ),
    (
        "field-validation/14-apply-unknown-strict.json",
        "/status: real 500, sandbox 415",
    ),
    // HPA validation: a resource metric without target reports type twice and averageUtilization
    // (not target); Utilization with averageValue also reports Forbidden; an unknown metric type
    // is reported once more (FieldValueNotSupported); behavior reports an unknown selectPolicy
    // and policy type; autoscaling/v1 (conversion) is not served.
    (
        "hpa-validation/05-resource-metric-without-target.json",
        "/body/message: real \"HorizontalPodAutoscaler.autoscaling \\\"notarget\\\" is invalid: [spec.metrics[0].resource.target.type:…, sandbox \"HorizontalPodAutoscaler.autoscaling \\\"notarget\\\" is invalid: [spec.metrics[0].resource.target.type:…",
    ),
    (
        "hpa-validation/06-resource-metric-bad-target-type.json",
        "/body/message: real \"HorizontalPodAutoscaler.autoscaling \\\"badtarget\\\" is invalid: spec.metrics[0].resource.target.avera…, sandbox \"HorizontalPodAutoscaler.autoscaling \\\"badtarget\\\" is invalid: spec.metrics[0].resource.target: Requ…",
    ),
    (
        "hpa-validation/07-utilization-with-value.json",
        "/body/message: real \"HorizontalPodAutoscaler.autoscaling \\\"both\\\" is invalid: [spec.metrics[0].resource.target.averageUt…, sandbox \"HorizontalPodAutoscaler.autoscaling \\\"both\\\" is invalid: spec.metrics[0].resource.target.averageUti…",
    ),
    (
        "hpa-validation/08-unknown-metric-type.json",
        "/body/details/causes/1: real {\"reason\":\"FieldValueNotSupported\",\"message\":\"Unsupported value: \\\"Magic\\\": supported values: \\\"Cont…, sandbox (absent)",
    ),
    (
        "hpa-validation/11-behavior-invalid.json",
        "/body/message: real \"HorizontalPodAutoscaler.autoscaling \\\"behavior\\\" is invalid: [spec.behavior.scaleUp.stabilizationWi…, sandbox \"HorizontalPodAutoscaler.autoscaling \\\"behavior\\\" is invalid: [spec.behavior.scaleUp.stabilizationWi…",
    ),
    (
        "hpa-validation/17-autoscaling-v1-get.json",
        "/status: real 200, sandbox 404",
    ),
    // Impersonate-User/-Group are ignored by the sandbox: the real server authorizes as the
    // impersonated identity (403 naming it), refuses impersonation by users without the
    // impersonate verb (users "x" is forbidden ... cannot impersonate), and a group without a
    // user is 500. Later resourceVersions follow from the writes the sandbox let through.
    (
        "impersonation/03-admin-as-readonly-patch.json",
        "/status: real 403, sandbox 200",
    ),
    (
        "impersonation/04-admin-as-readonly-patch-dry-run.json",
        "/status: real 403, sandbox 200",
    ),
    (
        "impersonation/05-admin-as-noperm-get.json",
        "/status: real 403, sandbox 200",
    ),
    (
        "impersonation/06-admin-as-noperm-list.json",
        "/status: real 403, sandbox 200",
    ),
    (
        "impersonation/07-admin-as-unknown-user.json",
        "/status: real 403, sandbox 200",
    ),
    (
        "impersonation/08-admin-as-user-in-masters-group.json",
        "/body/metadata/resourceVersion: real \"<rv:Deployment/web>\", sandbox \"<rv:Deployment/web#2>\"",
    ),
    (
        "impersonation/09-admin-as-readonly-manager.json",
        "/body/metadata/resourceVersion: real \"<rv:Deployment/web#2>\", sandbox \"<rv:Deployment/web#3>\"",
    ),
    (
        "impersonation/10-admin-group-without-user.json",
        "/status: real 500, sandbox 200",
    ),
    (
        "impersonation/11-admin-as-readonly-with-uid-and-extra.json",
        "/body/metadata/resourceVersion: real \"<rv:Deployment/web#2>\", sandbox \"<rv:Deployment/web#3>\"",
    ),
    (
        "impersonation/12-admin-as-service-account.json",
        "/status: real 403, sandbox 200",
    ),
    (
        "impersonation/14-readonly-impersonates-admin.json",
        "/status: real 403, sandbox 200",
    ),
    (
        "impersonation/15-readonly-impersonates-group.json",
        "/status: real 403, sandbox 200",
    ),
    (
        "impersonation/16-noperm-impersonates-readonly.json",
        "/body/message: real \"users \\\"readonly\\\" is forbidden: User \\\"noperm\\\" cannot impersonate resource \\\"users\\\" in API group…, sandbox \"deployments.apps \\\"web\\\" is forbidden: User \\\"noperm\\\" cannot patch resource \\\"deployments\\\" in API…",
    ),
    (
        "impersonation/18-get-deployment.json",
        "/body/metadata/resourceVersion: real \"<rv:Deployment/web#2>\", sandbox \"<rv:Deployment/web#3>\"",
    ),
    // Ingress validation texts: a path without pathType is "Required value: pathType must be
    // specified"; port name and number together, no port, no backend and two backends are
    // reported on `backend` with the real wording; an invalid ingressClassName is not reported
    // before TLS errors; an Ingress with neither rules nor defaultBackend is reported on `spec`;
    // the kubernetes.io/ingress.class annotation gets a deprecation Warning.
    (
        "ingress-validation/01-path-without-path-type.json",
        "/body/message: real \"Ingress.networking.k8s.io \\\"nopathtype\\\" is invalid: spec.rules[0].http.paths[0].pathType: Required…, sandbox \"Ingress.networking.k8s.io \\\"nopathtype\\\" is invalid: spec.rules[0].http.paths[0].pathType: Unsuppor…",
    ),
    (
        "ingress-validation/02-port-name-and-number.json",
        "/body/message: real \"Ingress.networking.k8s.io \\\"bothports\\\" is invalid: spec.rules[0].http.paths[0].backend: Invalid va…, sandbox \"Ingress.networking.k8s.io \\\"bothports\\\" is invalid: spec.rules[0].http.paths[0].backend.service.por…",
    ),
    (
        "ingress-validation/03-port-neither.json",
        "/body/message: real \"Ingress.networking.k8s.io \\\"noport\\\" is invalid: spec.rules[0].http.paths[0].backend: Required valu…, sandbox \"Ingress.networking.k8s.io \\\"noport\\\" is invalid: spec.rules[0].http.paths[0].backend.service.port: …",
    ),
    (
        "ingress-validation/04-no-backend.json",
        "/body/message: real \"Ingress.networking.k8s.io \\\"nobackend\\\" is invalid: spec.rules[0].http.paths[0].backend: Invalid va…, sandbox \"Ingress.networking.k8s.io \\\"nobackend\\\" is invalid: spec.rules[0].http.paths[0].backend: Invalid va…",
    ),
    (
        "ingress-validation/05-service-and-resource-backend.json",
        "/body/message: real \"Ingress.networking.k8s.io \\\"twobackends\\\" is invalid: spec.rules[0].http.paths[0].backend: Invalid …, sandbox \"Ingress.networking.k8s.io \\\"twobackends\\\" is invalid: spec.rules[0].http.paths[0].backend: Invalid …",
    ),
    (
        "ingress-validation/13-bad-tls-and-class.json",
        "/body/message: real \"Ingress.networking.k8s.io \\\"badtls\\\" is invalid: [spec.tls[0].hosts[0]: Invalid value: \\\"bad host\\\"…, sandbox \"Ingress.networking.k8s.io \\\"badtls\\\" is invalid: [spec.ingressClassName: Invalid value: \\\"Nginx Cla…",
    ),
    (
        "ingress-validation/15-no-rules-no-default.json",
        "/body/message: real \"Ingress.networking.k8s.io \\\"empty\\\" is invalid: spec: Invalid value: []networking.IngressRule(nil):…, sandbox \"Ingress.networking.k8s.io \\\"empty\\\" is invalid: spec.rules: Invalid value: []networking.IngressRule…",
    ),
    // Table column definitions for Deployments: the real READY column is a string.
    (
        "kubectl-requests/02-get-table.json",
        "/body/columnDefinitions/2/type: real \"string\", sandbox \"integer\"",
    ),
    (
        "kubectl-requests/03-list-table.json",
        "/body/columnDefinitions/2/type: real \"string\", sandbox \"integer\"",
    ),
    (
        "kubectl-requests/10-get-watch-table.json",
        "/events/0/object/columnDefinitions/2/type: real \"string\", sandbox \"integer\"",
    ),
    // LIST with a selector and limit: no remainingItemCount; invalid continue token message;
    // continue with resourceVersion is 400; resourceVersion=0 ignores limit (no continue);
    // resourceVersionMatch=Exact serves the old snapshot; match without version is 422; a future
    // resourceVersion is 504 Timeout; a malformed one is 500.
    (
        "list-pagination/07-first-page-with-selector.json",
        "/body/metadata/remainingItemCount: real (absent), sandbox 2",
    ),
    (
        "list-pagination/08-second-page-with-selector.json",
        "/body/metadata/remainingItemCount: real (absent), sandbox 1",
    ),
    (
        "list-pagination/12-field-selector-with-limit.json",
        "/body/metadata/remainingItemCount: real (absent), sandbox 2",
    ),
    (
        "list-pagination/13-invalid-continue.json",
        "/body/message: real \"invalid continue token: continue key is not valid: invalid character '\\\\u009e' looking for beginnin…, sandbox \"continue key is not valid: illegal base64 data\"",
    ),
    (
        "list-pagination/14-continue-with-resource-version.json",
        "/status: real 400, sandbox 200",
    ),
    (
        "list-pagination/17-resource-version-zero-with-limit.json",
        "/body/metadata/continue: real (absent), sandbox \"<continue:4>\"",
    ),
    (
        "list-pagination/19-exact-old-version.json",
        "/body/items/1/metadata/name: real \"b\", sandbox \"aa\"",
    ),
    (
        "list-pagination/20-match-without-version.json",
        "/status: real 422, sandbox 200",
    ),
    (
        "list-pagination/21-future-version.json",
        "/status: real 504, sandbox 200",
    ),
    (
        "list-pagination/22-garbage-version.json",
        "/status: real 500, sandbox 200",
    ),
    // Field selector errors: unsupported fields have the real message; a set-based field selector
    // is refused where the real parser stops.
    (
        "list-selectors/26-field-unsupported.json",
        "/body/message: real \"\\\"spec.ingressClassName\\\" is not a known field selector: only \\\"metadata.name\\\", \\\"metadata.namespa…, sandbox \"field label not supported: spec.ingressClassName\"",
    ),
    (
        "list-selectors/27-field-unsupported-deployment.json",
        "/body/message: real \"\\\"spec.replicas\\\" is not a known field selector: only \\\"metadata.name\\\", \\\"metadata.namespace\\\"\", sandbox \"field label not supported: spec.replicas\"",
    ),
    (
        "list-selectors/28-field-set-based.json",
        "/body/message: real \"invalid selector: 'metadata.name in (a,b)'; can't understand 'b)'\", sandbox \"invalid selector: 'metadata.name in (a,b)'; can't understand 'metadata.name in (a'\"",
    ),
    // Server-side apply is not served; a fieldManager over 128 characters is 422. The later
    // resourceVersions follow from the apply.
    (
        "managed-fields/07-apply-by-d.json",
        "/status: real 200, sandbox 415",
    ),
    (
        "managed-fields/08-field-manager-too-long.json",
        "/status: real 422, sandbox 200",
    ),
    (
        "managed-fields/09-reset-managed-fields.json",
        "/body/metadata/resourceVersion: real \"<rv:Deployment/web#7>\", sandbox \"<rv:Deployment/web#6>\"",
    ),
    (
        "managed-fields/10-get-after-reset.json",
        "/body/metadata/resourceVersion: real \"<rv:Deployment/web#7>\", sandbox \"<rv:Deployment/web#6>\"",
    ),
    (
        "managed-fields/11-set-managed-fields-invalid.json",
        "/body/metadata/resourceVersion: real \"<rv:Deployment/web#7>\", sandbox \"<rv:Deployment/web#6>\"",
    ),
    // Finalizer names must be standard or fully qualified (422); ownerReferences are validated
    // (empty name and uid; the sandbox also accepts two controllers); a patch that changes
    // metadata.namespace is 400 and one that sets deletionTimestamp 422 (field is immutable). The
    // 409 follows from the accepted invalid owner reference.
    (
        "metadata-limits/02-bad-finalizer.json",
        "/status: real 422, sandbox 201",
    ),
    (
        "metadata-limits/03-unqualified-finalizer-warning.json",
        "/status: real 422, sandbox 201",
    ),
    (
        "metadata-limits/04-bad-owner-reference.json",
        "/status: real 422, sandbox 201",
    ),
    (
        "metadata-limits/05-owner-reference.json",
        "/status: real 201, sandbox 409",
    ),
    (
        "metadata-limits/06-two-controllers.json",
        "/status: real 422, sandbox 201",
    ),
    (
        "metadata-limits/13-patch-changes-namespace.json",
        "/status: real 400, sandbox 200",
    ),
    (
        "metadata-limits/15-patch-sets-deletion-timestamp.json",
        "/status: real 422, sandbox 200",
    ),
    // Deleting a namespace leaves it Terminating on a server without the namespace controller
    // (readable, content kept, new content refused with 403); the sandbox removes it at once.
    (
        "namespaces/10-get-terminating.json",
        "/status: real 200, sandbox 404",
    ),
    (
        "namespaces/11-create-in-terminating.json",
        "/status: real 403, sandbox 404",
    ),
    (
        "namespaces/12-get-content-of-terminating.json",
        "/status: real 200, sandbox 404",
    ),
    (
        "namespaces/13-delete-terminating-again.json",
        "/status: real 200, sandbox 404",
    ),
    // A served CRD's 404 is a JSON Status; PUT or PATCH on a collection is 405; a cluster-scoped
    // resource under a namespace is 404; HEAD is 405.
    (
        "not-found-and-routing/21-put-collection.json",
        "/status: real 405, sandbox 404",
    ),
    (
        "not-found-and-routing/22-patch-collection.json",
        "/status: real 405, sandbox 404",
    ),
    (
        "not-found-and-routing/26-head-request.json",
        "/status: real 405, sandbox 200",
    ),
    // PUT error texts: a malformed resourceVersion (bare strconv error), a namespace mismatch, a
    // body of another kind (unknown conversion) or apiVersion (does not match the expected API
    // version).
    (
        "put-and-generation/05-put-garbage-version.json",
        "/body/message: real \"strconv.ParseUint: parsing \\\"abc\\\": invalid syntax\", sandbox \"Internal error occurred: resourceVersion: Invalid value: \\\"abc\\\": strconv.ParseUint: parsing \\\"abc\\…",
    ),
    (
        "put-and-generation/13-put-namespace-mismatch.json",
        "/body/message: real \"the namespace of the provided object does not match the namespace sent on the request\", sandbox \"the namespace of the object (default) does not match the namespace on the request (<ns>)\"",
    ),
    (
        "put-and-generation/15-put-wrong-kind.json",
        "/body/message: real \"StatefulSet in version \\\"v1\\\" cannot be handled as a Deployment: converting (v1.StatefulSet) to (ap…, sandbox \"StatefulSet in version \\\"v1\\\" cannot be handled as a Deployment: no kind \\\"StatefulSet\\\" is registe…",
    ),
    (
        "put-and-generation/16-put-wrong-api-version.json",
        "/body/message: real \"the API version in the data (apps/v1beta1) does not match the expected API version (apps/v1)\", sandbox \"Deployment in version \\\"v1beta1\\\" cannot be handled as a Deployment: no kind \\\"Deployment\\\" is regi…",
    ),
    // A forbidden watch with a metadata.name field selector names the object in the 403 message.
    (
        "rbac-noperm-anonymous-invalid/04-noperm-watch.json",
        "/events/0/message: real \"deployments.apps \\\"web\\\" is forbidden: User \\\"noperm\\\" cannot watch resource \\\"deployments\\\" in API…, sandbox \"deployments.apps is forbidden: User \\\"noperm\\\" cannot watch resource \\\"deployments\\\" in API group \\…",
    ),
    // force on a non-apply patch is 422; a fieldManager with a control character is 422; a
    // malformed limit is 400 (strconv error); watch=maybe starts a watch. The later
    // resourceVersions follow from the accepted force patch.
    (
        "request-options/02-force-on-merge-patch.json",
        "/status: real 422, sandbox 200",
    ),
    (
        "request-options/03-unknown-query-parameter.json",
        "/body/metadata/resourceVersion: real \"<rv:Ingress/a>\", sandbox \"<rv:Ingress/a#2>\"",
    ),
    (
        "request-options/04-dry-run-on-get.json",
        "/body/metadata/resourceVersion: real \"<rv:Ingress/a>\", sandbox \"<rv:Ingress/a#2>\"",
    ),
    (
        "request-options/05-field-manager-invalid-characters.json",
        "/status: real 422, sandbox 200",
    ),
    (
        "request-options/06-list-timeout-seconds.json",
        "/body/items/0/metadata/resourceVersion: real \"<rv:Ingress/a>\", sandbox \"<rv:Ingress/a#3>\"",
    ),
    (
        "request-options/07-list-bad-limit.json",
        "/status: real 400, sandbox 200",
    ),
    (
        "request-options/08-list-bad-watch.json",
        "/events/0/object/metadata/resourceVersion: real \"<rv:Ingress/a>\", sandbox \"<rv:Ingress/a#3>\"",
    ),
    (
        "request-options/09-include-object-without-table.json",
        "/body/items/0/metadata/resourceVersion: real \"<rv:Ingress/a>\", sandbox \"<rv:Ingress/a#3>\"",
    ),
    // A dry-run Service create shows clusterIP 10.0.0.0 (the dry-run allocator), not an allocated
    // address; RequireDualStack on a single-stack cluster and a clusterIP outside the range are
    // 422; a type change to NodePort is recorded in managedFields without the allocated nodePort;
    // a Service delete returns the Service, not a Status. The list differs because the sandbox
    // accepted the dual-stack Service.
    (
        "services/07-session-affinity-defaults.json",
        "/body/spec/clusterIP: real \"<ip:4>\", sandbox \"<ip:5>\"",
    ),
    (
        "services/12-require-dual-stack.json",
        "/status: real 422, sandbox 201",
    ),
    (
        "services/13-cluster-ip-out-of-range.json",
        "/status: real 422, sandbox 201",
    ),
    (
        "services/14-patch-to-node-port.json",
        "/body/metadata/managedFields/0/fieldsV1/f:spec/f:ports/k:{\"port\":80,\"protocol\":\"TCP\"}/f:nodePort: real (absent), sandbox {}",
    ),
    (
        "services/15-patch-ports-strategic.json",
        "/body/metadata/managedFields/0/fieldsV1/f:spec/f:ports/k:{\"port\":80,\"protocol\":\"TCP\"}/f:nodePort: real (absent), sandbox {}",
    ),
    (
        "services/16-list-services.json",
        "/body/items/0/metadata/name: real \"external\", sandbox \"dual\"",
    ),
    (
        "services/17-delete-service.json",
        "/body/kind: real \"Service\", sandbox \"Status\"",
    ),
    // A status patch is validated (replicas -1 is 422); the scale subresource's 404 names
    // deployments/scale; the later resourceVersions follow from the accepted invalid status.
    (
        "subresources/05-invalid-status.json",
        "/status: real 422, sandbox 200",
    ),
    (
        "subresources/06-get-scale.json",
        "/body/metadata/resourceVersion: real \"<rv:Deployment/web#2>\", sandbox \"<rv:Deployment/web#3>\"",
    ),
    (
        "subresources/07-put-scale.json",
        "/status: real 200, sandbox 409",
    ),
    (
        "subresources/08-patch-scale.json",
        "/body/metadata/resourceVersion: real \"<rv:Scale/web#2>\", sandbox \"<rv:Scale/web>\"",
    ),
    (
        "subresources/10-get-deployment.json",
        "/body/metadata/resourceVersion: real \"<rv:Scale/web#2>\", sandbox \"<rv:Scale/web>\"",
    ),
    (
        "subresources/12-scale-of-missing.json",
        "/body/message: real \"deployments/scale.apps \\\"missing\\\" not found\", sandbox \"deployments.apps \\\"missing\\\" not found\"",
    ),
    // Table column definitions: Deployment READY is a string; Service, HPA and Ingress column
    // descriptions have the real texts; a v1beta1 Table and a PartialObjectMetadataList are
    // served.
    (
        "tables/06-deployments-table.json",
        "/body/columnDefinitions/2/type: real \"string\", sandbox \"integer\"",
    ),
    (
        "tables/07-services-table.json",
        "/body/columnDefinitions/1/description: real \"type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, …, sandbox \"type determines how the Service is exposed.\"",
    ),
    (
        "tables/08-hpa-table.json",
        "/body/columnDefinitions/1/description: real \"scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics sh…, sandbox \"reference to the target object\"",
    ),
    (
        "tables/09-ingresses-table.json",
        "/body/columnDefinitions/1/description: real \"The name of the IngressClass resource that should be used for additional configuration\", sandbox \"The name of the IngressClass resource.\"",
    ),
    (
        "tables/10-ingress-table-include-object.json",
        "/body/columnDefinitions/1/description: real \"The name of the IngressClass resource that should be used for additional configuration\", sandbox \"The name of the IngressClass resource.\"",
    ),
    (
        "tables/11-hpa-table-include-none.json",
        "/body/columnDefinitions/1/description: real \"scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics sh…, sandbox \"reference to the target object\"",
    ),
    (
        "tables/13-empty-table.json",
        "/body/columnDefinitions/1/description: real \"The name of the IngressClass resource that should be used for additional configuration\", sandbox \"The name of the IngressClass resource.\"",
    ),
    (
        "tables/14-table-with-limit.json",
        "/body/columnDefinitions/1/description: real \"type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, …, sandbox \"type determines how the Service is exposed.\"",
    ),
    (
        "tables/15-table-v1beta1.json",
        "/body/apiVersion: real \"meta.k8s.io/v1beta1\", sandbox \"meta.k8s.io/v1\"",
    ),
    (
        "tables/16-partial-object-metadata-list.json",
        "/body/kind: real \"PartialObjectMetadataList\", sandbox \"DeploymentList\"",
    ),
    // An object leaving a watch's label selector is sent as DELETED with its previous state; a
    // watch from a resourceVersion older than the watch cache is 200 with one ERROR event (410
    // Expired, "too old resource version"), not a 410 response; a malformed resourceVersion is
    // 500; resourceVersionMatch on a watch is 422; watch=true on an object path returns the
    // object (no watch).
    (
        "watch-semantics/02-watch-selector-transitions.json",
        "/events/0/object/metadata/labels/stage: real \"blue\", sandbox \"green\"",
    ),
    (
        "watch-semantics/03-watch-too-old.json",
        "/status: real 200, sandbox 410",
    ),
    (
        "watch-semantics/04-watch-garbage-version.json",
        "/status: real 500, sandbox 422",
    ),
    (
        "watch-semantics/06-watch-resource-version-match.json",
        "/status: real 422, sandbox 200",
    ),
    (
        "watch-semantics/10-watch-object-path.json",
        "/events/0/kind: real \"Ingress\", sandbox (absent)",
    ),
];

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/parity")
}

fn who(user: &str) -> Who {
    match user {
        "admin" => Who::Admin,
        "readonly" => Who::Readonly,
        "noperm" => Who::Noperm,
        "invalid-token" => Who::Invalid,
        "anonymous" => Who::Anonymous,
        other => panic!("unknown fixture user {other}"),
    }
}

fn translate_target(target: &str, rec: &Side, ours: &Side) -> String {
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    let mut out = normalize::translate_str(path, rec, ours);
    if let Some(q) = query {
        let mut ser = form_urlencoded::Serializer::new(String::new());
        for (k, v) in form_urlencoded::parse(q.as_bytes()) {
            ser.append_pair(&k, &normalize::translate_str(&v, rec, ours));
        }
        out.push('?');
        out.push_str(&ser.finish());
    }
    out
}

/// Server-set metadata the real server and the sandbox answered for the same object at the
/// same point (creationTimestamp, managedFields): a request body that carries the recorded
/// value (a PUT of an object as read) carries the sandbox's instead, as a client that read
/// it from the sandbox would send it.
#[derive(Default)]
struct Seen(Vec<(Value, Value)>);

const SERVER_SET: &[&str] = &["creationTimestamp", "managedFields"];

impl Seen {
    fn learn(&mut self, recorded: &Value, ours: &Value) {
        if let (Some(r), Some(o)) = (recorded.get("metadata"), ours.get("metadata")) {
            for field in SERVER_SET {
                if let (Some(a), Some(b)) = (r.get(field), o.get(field)) {
                    self.0.push((a.clone(), b.clone()));
                }
            }
        }
        if let (Some(ri), Some(oi)) = (
            recorded.get("items").and_then(Value::as_array),
            ours.get("items").and_then(Value::as_array),
        ) {
            for (r, o) in ri.iter().zip(oi) {
                self.learn(r, o);
            }
        }
    }

    fn rewrite(&self, body: &mut Value) {
        let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) else {
            return;
        };
        for field in SERVER_SET {
            if let Some(v) = meta.get_mut(*field)
                && let Some((_, ours)) = self.0.iter().rev().find(|(r, _)| r == v)
            {
                *v = ours.clone();
            }
        }
    }
}

/// The recorded request in the sandbox's terms.
fn prepared(req: &Value, rec: &Side, ours: &Side, seen: &Seen) -> Prepared {
    let headers = req["headers"]
        .as_object()
        .map(|h| {
            h.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default();
    let body = match req.get("body") {
        None => None,
        Some(Value::String(raw)) => Some(normalize::translate_str(raw, rec, ours).into_bytes()),
        Some(v) => {
            let mut v = normalize::translate(v, rec, ours);
            seen.rewrite(&mut v);
            Some(serde_json::to_vec(&v).unwrap())
        }
    };
    Prepared {
        who: who(req["user"].as_str().unwrap_or("admin")),
        method: req["method"].as_str().unwrap().to_string(),
        target: translate_target(req["path"].as_str().unwrap(), rec, ours),
        headers,
        body,
    }
}

fn initial_events(fixture: &Value) -> bool {
    fixture["request"]["path"]
        .as_str()
        .is_some_and(normalize::starts_with_initial_events)
}

fn generate_name(fixture: &Value) -> Option<String> {
    fixture
        .pointer("/request/body/metadata/generateName")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// What the recording says the real server answered.
fn recorded(fixture: &Value) -> Observed {
    let resp = &fixture["response"];
    let events = resp
        .get("events")
        .and_then(Value::as_array)
        .map(|e| e.to_vec());
    let watch = events.is_some();
    Observed {
        status: resp["status"].as_u64().unwrap_or(0) as u16,
        headers: resp["headers"].as_object().cloned().unwrap_or_default(),
        body: if events.is_some() {
            Value::Null
        } else {
            resp["body"].clone()
        },
        events,
        error: None,
        generate_name: generate_name(fixture),
        during: fixture["concurrent_requests"]
            .as_array()
            .map(|d| d.iter().map(recorded).collect())
            .unwrap_or_default(),
        initial_events: watch && initial_events(fixture),
    }
}

fn observed(got: &Got, watch: bool, generate_name: Option<String>) -> Observed {
    Observed {
        status: got.status,
        headers: header_map(&got.headers),
        body: if watch {
            Value::Null
        } else {
            body_value(&got.body)
        },
        events: watch.then(|| watch_events(&got.body)),
        error: got.error.clone(),
        generate_name,
        during: vec![],
        initial_events: false,
    }
}

/// Replays one fixture; a watch is read while its concurrent requests go out at their
/// recorded offsets, until the server ends it or the recorded reading time is up.
async fn replay_one(
    server: &Server,
    fixture: &Value,
    rec: &Side,
    ours: &Side,
    seen: &Seen,
) -> Observed {
    let req = prepared(&fixture["request"], rec, ours, seen);
    if fixture["response"].get("events").is_none() {
        let got = server.send(&req, None).await;
        return observed(&got, false, generate_name(fixture));
    }
    let limit = Duration::from_millis(fixture["stream_ms"].as_u64().unwrap_or(3000));
    let started = tokio::time::Instant::now();
    let concurrent = async {
        let mut out = Vec::new();
        for c in fixture["concurrent_requests"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let at = started + Duration::from_millis(c["after_ms"].as_u64().unwrap_or(0));
            tokio::time::sleep_until(at).await;
            let got = server
                .send(&prepared(&c["request"], rec, ours, seen), None)
                .await;
            out.push(observed(&got, false, generate_name(c)));
        }
        out
    };
    let (got, during) = tokio::join!(server.send(&req, Some(limit)), concurrent);
    let mut o = observed(&got, true, None);
    o.during = during;
    o.initial_events = initial_events(fixture);
    o
}

struct Outcome {
    file: String,
    difference: Option<String>,
}

async fn replay_sequence(dir: PathBuf) -> Vec<Outcome> {
    let sequence = dir.file_name().unwrap().to_string_lossy().into_owned();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let sb = Sandbox::start(SandboxOptions {
        tls: true,
        // As the harness starts it: far from the small numbers messages contain.
        initial_resource_version: 1_000_000,
        ..Default::default()
    })
    .unwrap();
    let server = Server::from_yaml("sandbox", &sb.kubeconfig_yaml("default"))
        .await
        .unwrap();
    let mut rec = Side::default();
    let mut ours = Side::default();
    let mut seen = Seen::default();
    let mut out = Vec::new();
    for f in files {
        let fixture: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let file = format!("{sequence}/{}", f.file_name().unwrap().to_string_lossy());
        let got = replay_one(&server, &fixture, &rec, &ours, &seen).await;
        let want = recorded(&fixture);
        seen.learn(&want.body, &got.body);
        for (w, g) in want.during.iter().zip(&got.during) {
            seen.learn(&w.body, &g.body);
        }
        let a = rec.exchange(&want);
        let b = ours.exchange(&got);
        let mut difference = first_difference(&a, &b, "").map(|d| d.to_string());
        if difference.is_none() && !ours.problems.is_empty() {
            difference = Some(ours.problems.join("; "));
        }
        ours.problems.clear();
        rec.problems.clear();
        out.push(Outcome { file, difference });
    }
    drop(server);
    tokio::task::spawn_blocking(move || drop(sb)).await.unwrap();
    out
}

#[test]
fn every_parity_fixture_is_reproduced_or_pending() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(
        !dirs.is_empty(),
        "no fixtures in {}",
        fixtures_dir().display()
    );
    // Sequences are independent (a sandbox each) and mostly wait on watches: run them side
    // by side.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let outcomes: Vec<Outcome> = runtime.block_on(async {
        let tasks: Vec<_> = dirs
            .into_iter()
            .map(|d| tokio::spawn(replay_sequence(d)))
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        all
    });
    let mut unexpected = Vec::new();
    let mut now_reproduced = Vec::new();
    let mut reproduced = 0;
    for o in &outcomes {
        let pending = PENDING.iter().any(|(f, _)| *f == o.file);
        match (&o.difference, pending) {
            (None, false) => {
                reproduced += 1;
                println!("ok       {}", o.file);
            }
            (None, true) => {
                println!("FIXED    {} (still on PENDING)", o.file);
                now_reproduced.push(o.file.clone());
            }
            (Some(d), true) => println!("pending  {}: {d}", o.file),
            (Some(d), false) => {
                println!("FAIL     {}: {d}", o.file);
                unexpected.push(format!("    (\"{}\", {:?}),", o.file, d));
            }
        }
    }
    let stale: Vec<&str> = PENDING
        .iter()
        .map(|(f, _)| *f)
        .filter(|f| !outcomes.iter().any(|o| o.file == *f))
        .collect();
    println!(
        "parity: {reproduced} of {} fixtures reproduced, {} pending",
        outcomes.len(),
        PENDING.len()
    );
    assert!(
        unexpected.is_empty(),
        "fixtures not reproduced and not pending:\n{}",
        unexpected.join("\n")
    );
    assert!(
        now_reproduced.is_empty(),
        "reproduced now - take them off PENDING: {now_reproduced:?}"
    );
    assert!(
        stale.is_empty(),
        "PENDING names fixtures that do not exist: {stale:?}"
    );
}
