#!/usr/bin/env python3
"""Generate src/model/schema/generated.rs from the k8s-openapi crate sources.

Usage: tools/gen_schema.py ~/.cargo/registry/src/*/k8s-openapi-0.29.0/src/v1_33 > src/model/schema/generated.rs

k8s-openapi (generated from the Kubernetes OpenAPI document) gives field names, types, required-ness
and list/map merge strategies. What OpenAPI does not carry -- Go struct field order, which optional
fields are Go values (always serialised) rather than pointers, server-side-apply list keys with more
than one field, atomic structs -- is supplied by the override tables below, from the Go types of
k8s.io/api v1.28.
"""
import os
import re
import sys

ROOTS = [
    ("api/apps/v1", "Deployment"),
    ("api/core/v1", "Service"),
    ("api/core/v1", "Namespace"),
    ("api/autoscaling/v2", "HorizontalPodAutoscaler"),
    ("api/networking/v1", "Ingress"),
    ("api/core/v1", "ConfigMap"),
    ("api/networking/v1", "IngressClass"),
    ("api/authentication/v1", "SelfSubjectReview"),
    ("api/authorization/v1", "SelfSubjectAccessReview"),
    ("api/apps/v1", "ReplicaSet"),
    ("api/core/v1", "Pod"),
    ("api/core/v1", "Event"),
    ("api/core/v1", "ResourceQuota"),
]

# Go struct field order (k8s.io/api v1.28) for the types a user of this emulator reads most.
# Fields not listed keep OpenAPI (alphabetical) order after the listed ones.
ORDER = {
    "ObjectMeta": "name generateName namespace selfLink uid resourceVersion generation creationTimestamp deletionTimestamp deletionGracePeriodSeconds labels annotations ownerReferences finalizers managedFields",
    "ManagedFieldsEntry": "manager operation apiVersion time fieldsType fieldsV1 subresource",
    "OwnerReference": "apiVersion kind name uid controller blockOwnerDeletion",
    "LabelSelector": "matchLabels matchExpressions",
    "LabelSelectorRequirement": "key operator values",
    "Deployment": "metadata spec status",
    "DeploymentSpec": "replicas selector template strategy minReadySeconds revisionHistoryLimit paused progressDeadlineSeconds",
    "DeploymentStrategy": "type rollingUpdate",
    "RollingUpdateDeployment": "maxUnavailable maxSurge",
    "DeploymentStatus": "observedGeneration replicas updatedReplicas readyReplicas availableReplicas unavailableReplicas terminatingReplicas conditions collisionCount",
    "DeploymentCondition": "type status lastUpdateTime lastTransitionTime reason message",
    "PodTemplateSpec": "metadata spec",
    "PodSpec": "volumes initContainers containers ephemeralContainers restartPolicy terminationGracePeriodSeconds activeDeadlineSeconds dnsPolicy nodeSelector serviceAccountName serviceAccount automountServiceAccountToken nodeName hostNetwork hostPID hostIPC shareProcessNamespace securityContext imagePullSecrets hostname subdomain affinity schedulerName tolerations hostAliases priorityClassName priority dnsConfig readinessGates runtimeClassName enableServiceLinks preemptionPolicy overhead topologySpreadConstraints setHostnameAsFQDN os hostUsers schedulingGates resourceClaims resources",
    "Container": "name image command args workingDir ports envFrom env resources resizePolicy restartPolicy restartPolicyRules volumeMounts volumeDevices livenessProbe readinessProbe startupProbe lifecycle terminationMessagePath terminationMessagePolicy imagePullPolicy securityContext stdin stdinOnce tty",
    "ContainerPort": "name hostPort containerPort protocol hostIP",
    "EnvVar": "name value valueFrom",
    "EnvVarSource": "fieldRef resourceFieldRef configMapKeyRef secretKeyRef fileKeyRef",
    "EnvFromSource": "prefix configMapRef secretRef",
    "ObjectFieldSelector": "apiVersion fieldPath",
    "ResourceFieldSelector": "containerName resource divisor",
    "ConfigMapKeySelector": "name key optional",
    "SecretKeySelector": "name key optional",
    "ResourceRequirements": "limits requests claims",
    "VolumeMount": "name readOnly recursiveReadOnly mountPath subPath mountPropagation subPathExpr",
    "Probe": "exec httpGet tcpSocket grpc initialDelaySeconds timeoutSeconds periodSeconds successThreshold failureThreshold terminationGracePeriodSeconds",
    "HTTPGetAction": "path port host scheme httpHeaders",
    "HTTPHeader": "name value",
    "TCPSocketAction": "port host",
    "ExecAction": "command",
    "Lifecycle": "postStart preStop stopSignal",
    "LifecycleHandler": "exec httpGet tcpSocket sleep",
    "Volume": "name hostPath emptyDir gcePersistentDisk awsElasticBlockStore gitRepo secret nfs iscsi glusterfs persistentVolumeClaim rbd flexVolume cinder cephfs flocker downwardAPI fc azureFile configMap vsphereVolume quobyte azureDisk photonPersistentDisk projected portworxVolume scaleIO storageos csi ephemeral image",
    "ConfigMapVolumeSource": "name items defaultMode optional",
    "SecretVolumeSource": "secretName items defaultMode optional",
    "KeyToPath": "key path mode",
    "EmptyDirVolumeSource": "medium sizeLimit",
    "PersistentVolumeClaimVolumeSource": "claimName readOnly",
    "SecurityContext": "capabilities privileged seLinuxOptions windowsOptions runAsUser runAsGroup runAsNonRoot readOnlyRootFilesystem allowPrivilegeEscalation procMount seccompProfile appArmorProfile",
    "PodSecurityContext": "seLinuxOptions windowsOptions runAsUser runAsGroup runAsNonRoot supplementalGroups supplementalGroupsPolicy fsGroup sysctls fsGroupChangePolicy seccompProfile appArmorProfile seLinuxChangePolicy",
    "Capabilities": "add drop",
    "Toleration": "key operator value effect tolerationSeconds",
    "LocalObjectReference": "name",
    "Service": "metadata spec status",
    "ServiceSpec": "ports selector clusterIP clusterIPs type externalIPs sessionAffinity loadBalancerIP loadBalancerSourceRanges externalName externalTrafficPolicy healthCheckNodePort publishNotReadyAddresses sessionAffinityConfig ipFamilies ipFamilyPolicy allocateLoadBalancerNodePorts loadBalancerClass internalTrafficPolicy trafficDistribution",
    "ServicePort": "name protocol appProtocol port targetPort nodePort",
    "ServiceStatus": "loadBalancer conditions",
    "LoadBalancerStatus": "ingress",
    "LoadBalancerIngress": "ip hostname ipMode ports",
    "Namespace": "metadata spec status",
    "NamespaceSpec": "finalizers",
    "NamespaceStatus": "phase conditions",
    "HorizontalPodAutoscaler": "metadata spec status",
    "HorizontalPodAutoscalerSpec": "scaleTargetRef minReplicas maxReplicas metrics behavior",
    "CrossVersionObjectReference": "kind name apiVersion",
    "MetricSpec": "type object pods resource containerResource external",
    "ResourceMetricSource": "name target",
    "ContainerResourceMetricSource": "name target container",
    "MetricTarget": "type value averageValue averageUtilization",
    "HorizontalPodAutoscalerBehavior": "scaleUp scaleDown",
    "HPAScalingRules": "stabilizationWindowSeconds selectPolicy policies",
    "ObjectMetricSource": "describedObject target metric",
    "PodsMetricSource": "metric target",
    "ExternalMetricSource": "metric target",
    "MetricIdentifier": "name selector",
    "MetricStatus": "type object pods resource containerResource external",
    "ObjectMetricStatus": "metric current describedObject",
    "PodsMetricStatus": "metric current",
    "ResourceMetricStatus": "name current",
    "ContainerResourceMetricStatus": "name current container",
    "ExternalMetricStatus": "metric current",
    "MetricValueStatus": "value averageValue averageUtilization",
    "HPAScalingPolicy": "type value periodSeconds",
    "HorizontalPodAutoscalerStatus": "observedGeneration lastScaleTime currentReplicas desiredReplicas currentMetrics conditions",
    "HorizontalPodAutoscalerCondition": "type status lastTransitionTime reason message",
    "Ingress": "metadata spec status",
    "IngressSpec": "ingressClassName defaultBackend tls rules",
    "IngressRule": "host http",
    "HTTPIngressRuleValue": "paths",
    "HTTPIngressPath": "path pathType backend",
    "IngressBackend": "service resource",
    "IngressServiceBackend": "name port",
    "ServiceBackendPort": "name number",
    "IngressTLS": "hosts secretName",
    "IngressStatus": "loadBalancer",
    "IngressLoadBalancerStatus": "ingress",
    "IngressLoadBalancerIngress": "ip hostname ports",
    "ConfigMap": "metadata immutable data binaryData",
    "IngressClass": "metadata spec",
    "SelfSubjectReview": "metadata status",
    "UserInfo": "username uid groups extra",
    "SelfSubjectAccessReview": "metadata spec status",
    "SelfSubjectAccessReviewSpec": "resourceAttributes nonResourceAttributes",
    "ResourceAttributes": "namespace verb group version resource subresource name",
    "NonResourceAttributes": "path verb",
    "SubjectAccessReviewStatus": "allowed denied reason evaluationError",
    "IngressClassSpec": "controller parameters",
    "IngressClassParametersReference": "apiGroup kind name scope namespace",
    "DeleteOptions": "gracePeriodSeconds preconditions orphanDependents propagationPolicy dryRun ignoreStoreReadErrorWithClusterBreakingPotential",
    "Preconditions": "uid resourceVersion",
    # The rest of the reachable types, from the same Go source.
    "PreferredSchedulingTerm": "weight preference",
    "NodeAffinity": "requiredDuringSchedulingIgnoredDuringExecution preferredDuringSchedulingIgnoredDuringExecution",
    "PodAffinityTerm": "labelSelector namespaces topologyKey namespaceSelector",
    "WeightedPodAffinityTerm": "weight podAffinityTerm",
    "PodAffinity": "requiredDuringSchedulingIgnoredDuringExecution preferredDuringSchedulingIgnoredDuringExecution",
    "PodAntiAffinity": "requiredDuringSchedulingIgnoredDuringExecution preferredDuringSchedulingIgnoredDuringExecution",
    "SELinuxOptions": "user role type level",
    "SeccompProfile": "type localhostProfile",
    "WindowsSecurityContextOptions": "gmsaCredentialSpecName gmsaCredentialSpec runAsUserName hostProcess",
    "VolumeDevice": "name devicePath",
    "PodDNSConfig": "nameservers searches options",
    "EphemeralContainer": "name image command args workingDir ports envFrom env resources resizePolicy restartPolicy volumeMounts volumeDevices livenessProbe readinessProbe startupProbe lifecycle terminationMessagePath terminationMessagePolicy imagePullPolicy securityContext stdin stdinOnce tty targetContainerName",
    "HostAlias": "ip hostnames",
    "TopologySpreadConstraint": "maxSkew topologyKey whenUnsatisfiable labelSelector minDomains nodeAffinityPolicy nodeTaintsPolicy matchLabelKeys",
    "AWSElasticBlockStoreVolumeSource": "volumeID fsType partition readOnly",
    "AzureDiskVolumeSource": "diskName diskURI cachingMode fsType readOnly kind",
    "AzureFileVolumeSource": "secretName shareName readOnly",
    "CephFSVolumeSource": "monitors path user secretFile secretRef readOnly",
    "CinderVolumeSource": "volumeID fsType readOnly secretRef",
    "CSIVolumeSource": "driver readOnly fsType volumeAttributes nodePublishSecretRef",
    "DownwardAPIVolumeFile": "path fieldRef resourceFieldRef mode",
    "DownwardAPIVolumeSource": "items defaultMode",
    "PersistentVolumeClaimSpec": "accessModes selector resources volumeName storageClassName volumeMode dataSource dataSourceRef",
    "FCVolumeSource": "targetWWNs lun fsType readOnly wwids",
    "FlexVolumeSource": "driver fsType secretRef readOnly options",
    "GCEPersistentDiskVolumeSource": "pdName fsType partition readOnly",
    "GitRepoVolumeSource": "repository revision directory",
    "ISCSIVolumeSource": "targetPortal iqn lun iscsiInterface fsType readOnly portals chapAuthDiscovery chapAuthSession secretRef initiatorName",
    "NFSVolumeSource": "server path readOnly",
    "PhotonPersistentDiskVolumeSource": "pdID fsType",
    "PortworxVolumeSource": "volumeID fsType readOnly",
    "ConfigMapProjection": "name items optional",
    "SecretProjection": "name items optional",
    "VolumeProjection": "secret downwardAPI configMap serviceAccountToken",
    "ProjectedVolumeSource": "sources defaultMode",
    "QuobyteVolumeSource": "registry volume readOnly user group tenant",
    "RBDVolumeSource": "monitors image fsType pool user keyring secretRef readOnly",
    "ScaleIOVolumeSource": "gateway system secretRef sslEnabled protectionDomain storagePool storageMode volumeName fsType readOnly",
    "StorageOSVolumeSource": "volumeName volumeNamespace fsType readOnly secretRef",
    "VsphereVirtualDiskVolumeSource": "volumePath fsType storagePolicyName storagePolicyID",
    "Condition": "type status observedGeneration lastTransitionTime reason message",
    "PortStatus": "port protocol error",
    "NamespaceCondition": "type status lastTransitionTime reason message",
    "IngressPortStatus": "port protocol error",
    # ReplicaSets, Pods, Events and ResourceQuotas (what controllers and kubelets write), in the
    # Go struct order of k8s.io/api v1.33, the release their fixtures were recorded from.
    "ReplicaSet": "metadata spec status",
    "ReplicaSetSpec": "replicas minReadySeconds selector template",
    "ReplicaSetStatus": "replicas fullyLabeledReplicas readyReplicas availableReplicas terminatingReplicas observedGeneration conditions",
    "ReplicaSetCondition": "type status lastTransitionTime reason message",
    "Pod": "metadata spec status",
    "PodStatus": "observedGeneration phase conditions message reason nominatedNodeName hostIP hostIPs podIP podIPs startTime initContainerStatuses containerStatuses qosClass ephemeralContainerStatuses resize resourceClaimStatuses",
    "PodCondition": "type observedGeneration status lastProbeTime lastTransitionTime reason message",
    "PodIP": "ip",
    "HostIP": "ip",
    "PodResourceClaimStatus": "name resourceClaimName",
    "ContainerStatus": "name state lastState ready restartCount image imageID containerID started allocatedResources resources volumeMounts user allocatedResourcesStatus stopSignal",
    "ContainerState": "waiting running terminated",
    "ContainerStateWaiting": "reason message",
    "ContainerStateRunning": "startedAt",
    "ContainerStateTerminated": "exitCode signal reason message startedAt finishedAt containerID",
    "ContainerUser": "linux",
    "LinuxContainerUser": "uid gid supplementalGroups",
    "VolumeMountStatus": "name mountPath readOnly recursiveReadOnly",
    "ResourceStatus": "name resources",
    "ResourceHealth": "resourceID health",
    "Event": "metadata involvedObject reason message source firstTimestamp lastTimestamp count type eventTime series action related reportingComponent reportingInstance",
    "EventSource": "component host",
    "EventSeries": "count lastObservedTime",
    "ObjectReference": "kind namespace name uid apiVersion resourceVersion fieldPath",
    "ResourceQuota": "metadata spec status",
    "ResourceQuotaSpec": "hard scopes scopeSelector",
    "ResourceQuotaStatus": "hard used",
    "ScopeSelector": "matchExpressions",
    "ScopedResourceSelectorRequirement": "scopeName operator values",
}

# Optional (OpenAPI) fields that are Go *values*, not pointers: always serialised, as the zero
# value when absent (a struct serialises its own always-present fields; metav1.Time -> null;
# int -> 0; slice/map -> null).
VALUE = {
    "ObjectMeta.creationTimestamp",
    "Deployment.metadata", "Deployment.spec", "Deployment.status",
    "Service.metadata", "Service.spec", "Service.status",
    "Namespace.metadata", "Namespace.spec", "Namespace.status",
    "HorizontalPodAutoscaler.metadata", "HorizontalPodAutoscaler.spec", "HorizontalPodAutoscaler.status",
    "Ingress.metadata", "Ingress.spec", "Ingress.status",
    "ConfigMap.metadata", "IngressClass.metadata", "IngressClass.spec",
    "SelfSubjectReview.metadata", "SelfSubjectReview.status", "SelfSubjectReviewStatus.userInfo",
    "SelfSubjectAccessReview.metadata", "SelfSubjectAccessReview.status",
    "DeploymentSpec.strategy", "PodTemplateSpec.metadata", "PodTemplateSpec.spec",
    "Container.resources", "EphemeralContainer.resources",
    "ServiceStatus.loadBalancer", "IngressStatus.loadBalancer",
    "IngressServiceBackend.port", "ServicePort.targetPort",
    "HorizontalPodAutoscalerStatus.currentMetrics",
    "DeploymentCondition.lastUpdateTime", "DeploymentCondition.lastTransitionTime",
    "HorizontalPodAutoscalerCondition.lastTransitionTime",
    "NamespaceCondition.lastTransitionTime",
    "ResourceFieldSelector.divisor",
    "ReplicaSet.metadata", "ReplicaSet.spec", "ReplicaSet.status", "ReplicaSetSpec.template",
    "ReplicaSetCondition.lastTransitionTime",
    "Pod.metadata", "Pod.spec", "Pod.status", "PodCondition.lastProbeTime",
    "PodCondition.lastTransitionTime", "ContainerStatus.state", "ContainerStatus.lastState",
    "ContainerStateRunning.startedAt", "ContainerStateTerminated.startedAt",
    "ContainerStateTerminated.finishedAt",
    "Event.source", "Event.firstTimestamp", "Event.lastTimestamp", "Event.eventTime",
    "Event.reportingComponent", "Event.reportingInstance", "EventSeries.lastObservedTime",
    "ResourceQuota.metadata", "ResourceQuota.spec", "ResourceQuota.status",
}
# Optional scalar fields that are plain Go values with omitempty (a zero value is dropped);
# other optional scalars are pointers (a zero value is kept).
OMITZERO_SCALARS = {
    "ObjectMeta.generation", "DeploymentSpec.minReadySeconds", "DeploymentSpec.paused",
    "DeploymentStatus.observedGeneration", "DeploymentStatus.replicas", "DeploymentStatus.updatedReplicas",
    "DeploymentStatus.readyReplicas", "DeploymentStatus.availableReplicas", "DeploymentStatus.unavailableReplicas",
    "Container.stdin", "Container.stdinOnce", "Container.tty",
    "EphemeralContainer.stdin", "EphemeralContainer.stdinOnce", "EphemeralContainer.tty",
    "ContainerPort.hostPort", "ServicePort.nodePort", "ServiceSpec.healthCheckNodePort",
    "ServiceSpec.publishNotReadyAddresses", "VolumeMount.readOnly", "PodSpec.hostNetwork",
    "PodSpec.hostPID", "PodSpec.hostIPC", "HorizontalPodAutoscalerStatus.currentReplicas",
    "KeyToPath.mode", "PersistentVolumeClaimVolumeSource.readOnly", "Probe.initialDelaySeconds",
    "Probe.timeoutSeconds", "Probe.periodSeconds", "Probe.successThreshold", "Probe.failureThreshold",
    "SubjectAccessReviewStatus.denied",
    "ReplicaSetSpec.minReadySeconds", "ReplicaSetStatus.fullyLabeledReplicas",
    "ReplicaSetStatus.readyReplicas", "ReplicaSetStatus.availableReplicas",
    "ReplicaSetStatus.observedGeneration", "PodStatus.observedGeneration",
    "PodCondition.observedGeneration", "ContainerStateTerminated.signal", "Event.count",
    "EventSeries.count", "VolumeMountStatus.readOnly",
}
# Optional string fields that are Go pointers (an empty string is kept).
PTR_STRINGS = {
    "IngressSpec.ingressClassName", "HTTPIngressPath.pathType", "ServiceSpec.ipFamilyPolicy",
    "ServiceSpec.internalTrafficPolicy", "ServiceSpec.loadBalancerClass", "ServicePort.appProtocol",
    "PodSpec.runtimeClassName", "PodSpec.preemptionPolicy", "SecretVolumeSource.defaultMode",
    "ServiceSpec.trafficDistribution", "IngressClassParametersReference.apiGroup",
    "IngressClassParametersReference.scope", "IngressClassParametersReference.namespace",
    "ContainerStatus.stopSignal", "PodResourceClaimStatus.resourceClaimName",
    "VolumeMountStatus.recursiveReadOnly",
}
# Required fields that are Go pointers without omitempty: serialised as null when absent.
REQUIRED_POINTERS = {"DeploymentSpec.selector", "HTTPIngressPath.pathType", "ReplicaSetSpec.selector"}
# Server-side-apply list keys where they differ from the strategic-merge key.
SSA_KEYS = {
    "Container.ports": ["containerPort", "protocol"],
    "EphemeralContainer.ports": ["containerPort", "protocol"],
    "ServiceSpec.ports": ["port", "protocol"],
    "PodSpec.topologySpreadConstraints": ["topologyKey", "whenUnsatisfiable"],
}
# Structs whose managed fields are tracked as one unit (+structType=atomic).
ATOMIC_STRUCTS = {
    "LabelSelector", "LocalObjectReference", "ObjectFieldSelector", "ResourceFieldSelector",
    "ConfigMapKeySelector", "SecretKeySelector", "NodeSelector", "TypedLocalObjectReference",
    "OwnerReference", "NodeSelectorTerm", "ObjectReference", "SecretReference",
    "TopologySelectorTerm", "ScopeSelector", "EndpointAddress", "EndpointPort",
}

# Fields the v1_33 definitions have that k8s.io/api v1.28 does not (added in 1.29 to 1.33): a
# v1.28 server does not know them, so they are left out -- a body carrying one gets the unknown
# field warning (or Strict's error) and the field is dropped, as there. (PodResourceClaim's
# `source`, which 1.31 flattened, is not restored: 1.28 drops resourceClaims with its
# DynamicResourceAllocation feature off.)
NEWER = {
    "PodAffinityTerm.matchLabelKeys", "PodAffinityTerm.mismatchLabelKeys",
    "LifecycleHandler.sleep", "Lifecycle.stopSignal", "ResourceClaim.request",
    "SecurityContext.appArmorProfile", "VolumeMount.recursiveReadOnly",
    "PodResourceClaim.resourceClaimName", "PodResourceClaim.resourceClaimTemplateName",
    "PodSecurityContext.supplementalGroupsPolicy", "PodSecurityContext.appArmorProfile",
    "PodSecurityContext.seLinuxChangePolicy", "PersistentVolumeClaimSpec.volumeAttributesClassName",
    "VolumeProjection.clusterTrustBundle", "Volume.image", "PodSpec.resources",
    "DeploymentStatus.terminatingReplicas", "ServiceSpec.trafficDistribution",
    "HPAScalingRules.tolerance", "ResourceAttributes.fieldSelector",
    "ResourceAttributes.labelSelector",
}

def parse_file(path):
    src = open(path).read()
    m = re.search(r"pub struct (\w+) \{\n(.*?)\n\}", src, re.S)
    if not m:
        return None
    name = m.group(1)
    fields = []
    for fm in re.finditer(r"^    pub (\w+): (.+),$", m.group(2), re.M):
        fields.append((fm.group(1), fm.group(2)))
    json_names = dict((k, v) for v, k in re.findall(r'"(\w+)" => Field::Key_(\w+),', src))
    strategies = {}
    for sm in re.finditer(r"merge_strategies::(list|map)::(\w+)\(\s*&mut self\.(\w+)(.*?)\);\n", src, re.S):
        kind, strat, field, rest = sm.groups()
        keys = re.findall(r"lhs\.(\w+) == rhs\.", rest)
        strategies[field] = (kind, strat, keys)
    return name, fields, json_names, strategies

def module_file(root, mod, name):
    snake = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    snake = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", snake).lower()
    return os.path.join(root, mod, snake + ".rs")

def find_file(root, mod, name):
    d = os.path.join(root, mod)
    for f in os.listdir(d):
        p = os.path.join(d, f)
        if f.endswith(".rs") and f != "mod.rs":
            with open(p) as fh:
                if re.search(r"pub struct %s \{" % name, fh.read()):
                    return p
    raise SystemExit("type %s not found in %s" % (name, mod))

SCALARS = {
    "std::string::String": "Str", "i32": "I32", "i64": "I64", "f64": "F64", "bool": "Bool",
    "crate::ByteString": "Bytes",
    "crate::apimachinery::pkg::util::intstr::IntOrString": "IntOrStr",
    "crate::apimachinery::pkg::api::resource::Quantity": "Quantity",
    "crate::apimachinery::pkg::apis::meta::v1::Time": "Time",
    "crate::apimachinery::pkg::apis::meta::v1::MicroTime": "MicroTime",
    "crate::apimachinery::pkg::runtime::RawExtension": "Any",
    "crate::apimachinery::pkg::apis::meta::v1::FieldsV1": "Any",
    "crate::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON": "Any",
}

types = {}      # key -> dict
order = []      # keys in discovery order

def go_pkg(mod):
    last = mod.split("/")[-1]
    return last

def resolve(root, rust_ty, owner, field):
    """Return (expr, optional)."""
    optional = False
    if rust_ty.startswith("Option<") and rust_ty.endswith(">"):
        optional = True
        rust_ty = rust_ty[len("Option<"):-1]
    return ty_expr(root, rust_ty, owner, field), optional

def ty_expr(root, t, owner, field, inner=False):
    if t in SCALARS:
        return "T::" + SCALARS[t]
    m = re.match(r"std::vec::Vec<(.*)>$", t)
    if m:
        return ("LIST", ty_expr(root, m.group(1), owner, field, True))
    m = re.match(r"std::collections::BTreeMap<std::string::String, (.*)>$", t)
    if m:
        return ("MAP", ty_expr(root, m.group(1), owner, field, True))
    m = re.match(r"crate::(.*)::(\w+)$", t)
    if m:
        mod = m.group(1).replace("::", "/")
        name = m.group(2)
        key = mod + "/" + name
        visit(root, mod, name)
        return ("OBJ", key)
    raise SystemExit("unknown type %s (%s.%s)" % (t, owner, field))

def visit(root, mod, name):
    key = mod + "/" + name
    if key in types:
        return
    types[key] = None
    path = find_file(root, mod, name)
    parsed = parse_file(path)
    tname, fields, json_names, strategies = parsed
    out = []
    for rust_name, rust_ty in fields:
        jname = json_names.get(rust_name)
        if jname is None:
            raise SystemExit("no json name for %s.%s" % (name, rust_name))
        if "%s.%s" % (tname, jname) in NEWER:
            continue
        expr, optional = resolve(root, rust_ty, name, jname)
        out.append(dict(rust=rust_name, json=jname, expr=expr, optional=optional, strat=strategies.get(rust_name)))
    json_of = {f["rust"]: f["json"] for f in out}
    for f in out:
        if f["strat"]:
            kind, strat, keys = f["strat"]
            # keys are rust names of the item type; map them to json names later
            f["strat"] = (kind, strat, keys)
    types[key] = dict(name=tname, pkg=go_pkg(mod), fields=out, mod=mod)
    order.append(key)

for mod, name in ROOTS:
    visit(sys.argv[1], mod, name)

index = {k: i for i, k in enumerate(order)}

def item_json_names(key, rust_keys):
    t = types[key]
    m = {f["rust"]: f["json"] for f in t["fields"]}
    return [m[k] for k in rust_keys]

def render(expr, tname, f):
    if isinstance(expr, str):
        return expr
    kind = expr[0]
    if kind == "OBJ":
        return "T::Obj(%d)" % index[expr[1]]
    inner = render(expr[1], tname, f)
    strat = f["strat"]
    fq = tname + "." + f["json"]
    if kind == "LIST":
        if strat and strat[1] == "map":
            item_key = expr[1][1]
            keys = item_json_names(item_key, strat[2])
            ssa = SSA_KEYS.get(fq, keys)
            return "T::List(&%s, L::Map { merge_key: %s, keys: &[%s] })" % (
                inner, '"%s"' % keys[0], ", ".join('"%s"' % k for k in ssa))
        if strat and strat[1] == "set":
            return "T::List(&%s, L::Set)" % inner
        return "T::List(&%s, L::Atomic)" % inner
    if kind == "MAP":
        if strat and strat[1] == "atomic":
            return "T::Map(&%s, true)" % inner
        return "T::Map(&%s, false)" % inner
    raise SystemExit("bad expr")

def go_type(expr):
    if isinstance(expr, str):
        return {"T::Str": "string", "T::I32": "int32", "T::I64": "int64", "T::F64": "float64",
                "T::Bool": "bool", "T::Bytes": "[]uint8", "T::IntOrStr": "intstr.IntOrString",
                "T::Quantity": "resource.Quantity", "T::Time": "v1.Time", "T::MicroTime": "v1.MicroTime",
                "T::Any": "runtime.RawExtension"}[expr]
    if expr[0] == "OBJ":
        t = types[expr[1]]
        return "%s.%s" % (t["pkg"], t["name"])
    if expr[0] == "LIST":
        return "[]" + go_type(expr[1])
    return "map[string]" + go_type(expr[1])

print("// @generated by tools/gen_schema.py from k8s-openapi (v1_33 definitions) plus the Go-type")
print("// overrides in that script. Do not edit by hand.")
print("#![allow(clippy::all)]")
print("use super::{FieldDef, L, T, TypeDef};")
print()
print("pub static TYPES: &[TypeDef] = &[")
for key in order:
    t = types[key]
    tname = t["name"]
    fields = t["fields"]
    pref = ORDER.get(tname, "").split()
    def sort_key(f):
        return (pref.index(f["json"]) if f["json"] in pref else len(pref), f["json"])
    fields = sorted(fields, key=sort_key)
    print("    // %d" % index[key])
    print("    TypeDef {")
    print('        name: "%s",' % tname)
    print('        go_name: "%s.%s",' % (t["pkg"], tname))
    print("        atomic: %s," % ("true" if tname in ATOMIC_STRUCTS else "false"))
    print("        fields: &[")
    for f in fields:
        fq = tname + "." + f["json"]
        expr = f["expr"]
        is_scalar = isinstance(expr, str)
        if not f["optional"]:
            omit, ptr = False, fq in REQUIRED_POINTERS
        elif fq in VALUE:
            omit, ptr = False, False
        elif is_scalar and expr in ("T::I32", "T::I64", "T::Bool", "T::F64"):
            omit, ptr = (True, False) if fq in OMITZERO_SCALARS else (True, True)
        elif is_scalar and expr == "T::Str":
            omit, ptr = (True, True) if fq in PTR_STRINGS else (True, False)
        elif is_scalar and expr in ("T::Time", "T::MicroTime"):
            omit, ptr = True, True
        elif is_scalar:
            omit, ptr = True, True
        elif expr[0] == "OBJ":
            omit, ptr = True, True
        else:
            omit, ptr = True, False
        print('            FieldDef { name: "%s", ty: %s, omitempty: %s, ptr: %s, go_type: "%s" },' % (
            f["json"], render(expr, tname, f), str(omit).lower(), str(ptr).lower(), go_type(expr)))
    print("        ],")
    print("    },")
print("];")
print()
print("pub const OBJECT_META: usize = %d;" % index["apimachinery/pkg/apis/meta/v1/ObjectMeta"])
for mod, name in ROOTS:
    const = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).upper()
    print("pub const %s: usize = %d;" % (const, index[mod + "/" + name]))
