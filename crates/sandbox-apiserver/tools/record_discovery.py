#!/usr/bin/env python3
"""Record what a real API server's discovery says about the groups of installed CRDs.

Usage: tools/record_discovery.py GROUP... > src/api/discovery/gateway_api.json
  (e.g. gateway.networking.k8s.io gateway.networking.x-k8s.io; server, CA and token as in
  tools/record_fixtures.py; AGGREGATED_VERSION=v2 for a server that no longer serves the
  v2beta1 aggregated discovery the sandbox speaks — Kubernetes 1.33 — whose group entries have
  the same shape)

Writes {"groups": [the /apis entries], "aggregated": [the aggregated /apis items],
"resourceLists": {"<group>/<version>": the /apis/<group>/<version> document}}: the order of
resources in those documents is the server's own (it follows its CRD informer, not a sort).
"""
import http.client
import json
import os
import ssl
import sys

SERVER = os.environ.get("SERVER", "127.0.0.1:6443")
CA = os.path.expanduser(os.environ.get("CA", "~/realk8s/pki/ca.crt"))
TOKENS = os.path.expanduser(os.environ.get("TOKENS", "~/realk8s/pki/tokens.csv"))
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=%s;as=APIGroupDiscoveryList,application/json" % os.environ.get(
    "AGGREGATED_VERSION", "v2beta1")


def get(path, accept="application/json"):
    token = next(l.split(",")[0] for l in open(TOKENS) if l.split(",")[1] == "admin")
    host, port = SERVER.split(":")
    conn = http.client.HTTPSConnection(host, int(port), context=ssl.create_default_context(cafile=CA))
    conn.request("GET", path, headers={"Authorization": "Bearer " + token, "Accept": accept})
    r = conn.getresponse()
    return json.loads(r.read())


def main():
    groups = sys.argv[1:]
    apis = get("/apis")
    aggregated = get("/apis", AGGREGATED)
    out = {
        "groups": [g for g in apis["groups"] if g["name"] in groups],
        "aggregated": [i for i in aggregated["items"] if i["metadata"]["name"] in groups],
        "resourceLists": {},
    }
    for g in out["groups"]:
        for v in g["versions"]:
            out["resourceLists"][v["groupVersion"]] = get("/apis/" + v["groupVersion"])
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
