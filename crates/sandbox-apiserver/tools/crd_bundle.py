#!/usr/bin/env python3
"""Bundle CustomResourceDefinitions for the sandbox: what the API server uses of each CRD
(group, names, scope, and per version: served, storage, subresources, printer columns and the
openAPIV3Schema), as compact JSON without descriptions.

Usage: tools/crd_bundle.py ../../../shared/gateway-api/experimental-v1.4.1.yaml \
           > src/kinds/custom/gateway-api-v1.4.1.json
"""
import json
import sys

import yaml


def strip(node):
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def main():
    out = []
    with open(sys.argv[1]) as f:
        for doc in yaml.safe_load_all(f):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            versions = []
            for v in spec["versions"]:
                versions.append({
                    "name": v["name"],
                    "served": v.get("served", False),
                    "storage": v.get("storage", False),
                    "subresources": v.get("subresources", {}),
                    "additionalPrinterColumns": strip(v.get("additionalPrinterColumns", [])),
                    "openAPIV3Schema": strip(v["schema"]["openAPIV3Schema"]),
                })
            out.append({
                "name": doc["metadata"]["name"],
                "group": spec["group"],
                "names": spec["names"],
                "scope": spec["scope"],
                "versions": versions,
            })
    json.dump(out, sys.stdout, separators=(",", ":"), sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
