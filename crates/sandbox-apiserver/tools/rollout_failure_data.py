#!/usr/bin/env python3
"""Write the objects of each recorded rollout failure as one plain JSON file per kind.

Usage: tools/rollout_failure_data.py [--server https://127.0.0.1:6443 --ca CA --tokens TOKENS]

Reads tests/fixtures/rollout-failures/<kind>/ (recorded by tools/record_fixtures.py, see that
folder's README) and writes ../../tests/data/rollout-failures/<kind>.json (the repository's
tests/data/): the failing Deployment, the ReplicaSetList of its selector, the PodList of the new
ReplicaSet and the EventList of its first pod — each exactly as the real server returned it in
the fixtures — and, with --server (the real server the fixtures were recorded on, still
running), the EventList of the new ReplicaSet read from it now (FailedCreate for an exceeded
quota). Unit tests that classify a failure read these files instead of a cluster.
"""
import argparse
import http.client
import json
import os
import ssl
import sys
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures", "rollout-failures")
OUT = os.path.join(HERE, "..", "..", "..", "tests", "data", "rollout-failures")

WHAT = {
    "image-not-found": "The image registry.example.com/web:notfound does not exist: ErrImagePull, then ImagePullBackOff.",
    "crash-loop": "The container of registry.example.com/web:crash exits 1: CrashLoopBackOff, restarts growing.",
    "missing-secret": "The container's environment needs Secret web-credentials, which does not exist: CreateContainerConfigError.",
    "insufficient-cpu": "The container requests 100 cpus, the node has 64: Pending, PodScheduled False Unschedulable, FailedScheduling.",
    "quota-exceeded": "A ResourceQuota of one pod: the new ReplicaSet's pod is refused, ReplicaFailure FailedCreate on the ReplicaSet and the Deployment.",
}


def fixture(kind, suffix):
    folder = os.path.join(FIXTURES, kind)
    for name in sorted(os.listdir(folder)):
        if name.endswith(suffix + ".json"):
            with open(os.path.join(folder, name)) as f:
                return json.load(f)
    return None


def body(kind, suffix):
    f = fixture(kind, suffix)
    return f["response"]["body"] if f else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server")
    ap.add_argument("--ca")
    ap.add_argument("--tokens")
    args = ap.parse_args()
    token = None
    if args.server:
        with open(args.tokens) as f:
            for line in f:
                parts = line.strip().split(",")
                if len(parts) >= 2 and parts[1] == "admin":
                    token = parts[0]
    os.makedirs(OUT, exist_ok=True)
    for kind, what in WHAT.items():
        deployment = body(kind, "get-deployment-failing")
        revision = deployment["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
        replica_sets = body(kind, "list-replicasets-by-selector")
        new_rs = [r for r in replica_sets["items"]
                  if r["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == revision][0]
        pods = body(kind, "list-pods-of-new-replicaset")
        data = {
            "description": what,
            "recordedFrom": "kube-apiserver v1.33.3 with kube-controller-manager, kube-scheduler and the stand-in kubelet "
                            "of shared/tools/build-realk8s.sh (node fake-node-1)",
            "fixtures": "crates/sandbox-apiserver/tests/fixtures/rollout-failures/%s/" % kind,
            "deployment": deployment,
            "replicaSets": replica_sets,
            "newReplicaSet": new_rs["metadata"]["name"],
            "pods": pods,
        }
        events = body(kind, "list-events-of-pod")
        if events is not None:
            data["podEvents"] = events
        after = body(kind, "get-deployment-deadline-exceeded")
        if after is not None:
            data["deploymentAfterDeadline"] = after
        if args.server:
            url = urllib.parse.urlparse(args.server)
            ns = deployment["metadata"]["namespace"]
            selector = urllib.parse.quote("involvedObject.kind=ReplicaSet,involvedObject.name=" + new_rs["metadata"]["name"])
            conn = http.client.HTTPSConnection(url.hostname, url.port, context=ssl.create_default_context(cafile=args.ca))
            conn.request("GET", "/api/v1/namespaces/%s/events?fieldSelector=%s" % (ns, selector),
                         headers={"Authorization": "Bearer " + token, "Accept": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                sys.exit("%s: events of the ReplicaSet: HTTP %d" % (kind, resp.status))
            data["replicaSetEvents"] = json.loads(resp.read())
        path = os.path.join(OUT, kind + ".json")
        with open(path, "w") as f:
            json.dump(data, f, indent=2, ensure_ascii=False)
            f.write("\n")
        print(path)


if __name__ == "__main__":
    main()
