#!/usr/bin/env python3
"""Record exchanges with a real kube-apiserver as conformance fixtures.

Usage: tools/record_fixtures.py CASES.yaml OUT_DIR [--server https://127.0.0.1:6443]
           [--ca ~/realk8s/pki/ca.crt] [--tokens ~/realk8s/pki/tokens.csv]

CASES.yaml is a list of cases, sent in order; each becomes OUT_DIR/NN-<name>.json in the format
of tests/fixtures/k8s (see its README): request (method, path, decoded query, user, headers,
body) and response (status, the headers clients read, body).

A case:
  name: create-configmap           # file name part
  description: …                   # why the case exists
  method: POST
  path: /api/v1/namespaces/$NS/configmaps?dryRun=All   # $NS: the namespace of the run
  user: admin                      # admin | readonly | noperm | invalid-token
  headers: {Accept: …}             # extra request headers (Content-Type is added for bodies)
  content_type: application/merge-patch+json   # default application/json
  body: {…}                        # the JSON body (or a string sent as is)
  body_from: other-case            # …or the response body of an earlier case,
  body_merge: {…}                  #    with this JSON merge patch applied
  fill: {pointer: /data/big, char: x, count: 1048577}   # a long string at a JSON pointer
  expect: 201                      # fail the recording when the status differs
  sleep_after: 1.2                 # seconds to wait after the case (timestamps one second apart)
  await:                           # before sending, poll (as admin) until a state is reached;
    path: /api/v1/namespaces/$NS/pods?labelSelector=app%3Dweb   # written into the fixture, so
    pointer: /items/*/status/containerStatuses/0/state/waiting/reason   # a replay waits too;
    equals: ImagePullBackOff       # `*` matches every item of a list; or `at_least: 2` (number)
    timeout: 60                    # seconds (default 60)
  capture:                         # after the case: names for later paths ($POD…), each a
    POD: "resp['items'][0]['metadata']['name']"   # Python expression over the response `resp`

A path may use `$NS` and every name captured so far (`$POD`); captured values are substituted
before the fixture is written, so fixtures hold what the real server named.

Requests go out like curl's (User-Agent curl/8.5.0, HTTP/1.1), so managedFields name the
manager `curl`, as in the recorded fixtures. Bearer tokens are read from the tokens file and
never written.
"""
import argparse
import copy
import http.client
import json
import os
import ssl
import sys
import time
import urllib.parse

import yaml

KEPT_HEADERS = ["Cache-Control", "Content-Type", "Etag", "Vary", "Warning", "X-Content-Type-Options"]


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def set_pointer(doc, pointer, value):
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    cur = doc
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = value


def substitute(v, ns, names=None):
    if isinstance(v, str):
        # Longest names first, so that $PODUID is not read as $POD followed by "UID".
        for k in sorted(names or {}, key=len, reverse=True):
            v = v.replace("$" + k, names[k])
        return v.replace("$NS", ns)
    if isinstance(v, list):
        return [substitute(x, ns, names) for x in v]
    if isinstance(v, dict):
        return {substitute(k, ns, names): substitute(x, ns, names) for k, x in v.items()}
    return v


def pointer_values(doc, pointer):
    """The values at a JSON pointer whose `*` segments match every item of a list."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    cur = [doc]
    for p in parts:
        nxt = []
        for c in cur:
            if p == "*" and isinstance(c, list):
                nxt.extend(c)
            elif isinstance(c, list) and p.isdigit() and int(p) < len(c):
                nxt.append(c[int(p)])
            elif isinstance(c, dict) and p in c:
                nxt.append(c[p])
        cur = nxt
    return cur


def state_reached(doc, cond):
    values = pointer_values(doc, cond["pointer"])
    if "equals" in cond:
        return any(v == cond["equals"] for v in values)
    if "at_least" in cond:
        return any(isinstance(v, (int, float)) and v >= cond["at_least"] for v in values)
    raise SystemExit("await needs equals or at_least: %r" % cond)


def send(url, ctx, method, path, data, headers):
    conn = http.client.HTTPSConnection(url.hostname, url.port, context=ctx)
    conn.request(method, path, body=data, headers=headers)
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    return resp, raw


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases")
    ap.add_argument("out")
    ap.add_argument("--server", default="https://127.0.0.1:6443")
    ap.add_argument("--ca", default=os.path.expanduser("~/realk8s/pki/ca.crt"))
    ap.add_argument("--tokens", default=os.path.expanduser("~/realk8s/pki/tokens.csv"))
    ap.add_argument("--namespace", default="kinds-fixtures-1")
    args = ap.parse_args()

    tokens = {}
    with open(args.tokens) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) >= 2:
                tokens[parts[1]] = parts[0]
    tokens["invalid-token"] = "not-a-token-the-server-knows"

    cases = yaml.safe_load(open(args.cases))
    os.makedirs(args.out, exist_ok=True)
    url = urllib.parse.urlparse(args.server)
    ctx = ssl.create_default_context(cafile=args.ca)
    responses = {}
    width = max(2, len(str(len(cases))))
    names = {}
    for i, case in enumerate(cases):
        case = substitute(case, args.namespace, names)
        if "await" in case:
            cond = case["await"]
            deadline = time.time() + cond.get("timeout", 60)
            auth = {"User-Agent": "curl/8.5.0", "Accept": "application/json",
                    "Authorization": "Bearer " + tokens["admin"]}
            while True:
                _, raw = send(url, ctx, "GET", cond["path"], None, auth)
                if state_reached(json.loads(raw), cond):
                    break
                if time.time() > deadline:
                    sys.exit("%s: %s never reached: %s" % (case["name"], cond, raw[:800]))
                time.sleep(0.2)
        method = case["method"]
        path = case["path"]
        user = case.get("user", "admin")
        headers = dict(case.get("headers", {}))
        body = case.get("body")
        if "body_from" in case:
            body = merge_patch(responses[case["body_from"]], case.get("body_merge", {}))
        if "fill" in case:
            fill = case["fill"]
            set_pointer(body, fill["pointer"], fill["char"] * fill["count"])
        data = None
        if body is not None:
            headers["Content-Type"] = case.get("content_type", "application/json")
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        sent = {"User-Agent": "curl/8.5.0", "Accept": "*/*", "Authorization": "Bearer " + tokens[user]}
        sent.update(headers)
        resp, raw = send(url, ctx, method, path, data, sent)
        try:
            rbody = json.loads(raw)
        except ValueError:
            rbody = raw.decode()
        responses[case["name"]] = rbody
        rheaders = {}
        for h in KEPT_HEADERS:
            values = resp.headers.get_all(h) or []
            if len(values) == 1:
                rheaders[h] = values[0]
            elif values:
                rheaders[h] = values
        request = {"method": method, "path": path}
        query = urllib.parse.urlparse(path).query
        if query:
            request["query"] = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
        request["user"] = user
        if headers:
            request["headers"] = headers
        if body is not None:
            request["body"] = body
        fixture = {"description": case["description"]}
        if "await" in case:
            fixture["await"] = {k: v for k, v in case["await"].items() if k != "timeout"}
        fixture["request"] = request
        fixture["response"] = {"status": resp.status, "headers": rheaders, "body": rbody}
        name = "%0*d-%s.json" % (width, i, case["name"])
        with open(os.path.join(args.out, name), "w") as f:
            json.dump(fixture, f, indent=2, ensure_ascii=False)
            f.write("\n")
        print("%s %d %s %s" % (name, resp.status, method, path))
        if "expect" in case and case["expect"] != resp.status:
            sys.exit("%s: expected %s, got %d: %s" % (case["name"], case["expect"], resp.status, raw[:500]))
        for var, expr in (case.get("capture") or {}).items():
            names[var] = str(eval(expr, {}, {"resp": rbody}))  # the cases file is ours
        if "sleep_after" in case:
            time.sleep(case["sleep_after"])


if __name__ == "__main__":
    main()
