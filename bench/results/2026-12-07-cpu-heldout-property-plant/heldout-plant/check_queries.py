#!/usr/bin/env python
"""Check plant.catalog.json and plant.queries.jsonl (run from this folder)."""
import collections
import datetime
import json
import re
import sys

from jsonschema import Draft202012Validator, FormatChecker

CATALOG = "plant.catalog.json"
QUERIES = "plant.queries.jsonl"
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*$")
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")

errors = []


def err(msg):
    errors.append(msg)


# jsonschema's FormatChecker only checks date-time when an optional package is
# installed; register a strict RFC 3339 check so it is always enforced.
format_checker = FormatChecker()


@format_checker.checks("date-time", raises=ValueError)
def _date_time(value):
    if not isinstance(value, str):
        return True
    if not RFC3339.match(value):
        raise ValueError(f"not an RFC 3339 date-time: {value!r}")
    datetime.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    return True


# ---- catalog ---------------------------------------------------------------
with open(CATALOG, encoding="utf-8") as f:
    root = json.load(f)

leaves = {}    # path -> node
routers = []   # paths ("" for root)


def walk(node, path):
    name = node.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        err(f"bad name {name!r} at {path or '<root>'}")
    if not isinstance(node.get("description"), str) or not node["description"].strip():
        err(f"missing description at {path or '<root>'}")
    children = node.get("children")
    if children:
        routers.append(path)
        if "parameters" in node:
            err(f"router {path or '<root>'} has parameters")
        names = [c.get("name") for c in children]
        for n, k in collections.Counter(names).items():
            if k > 1:
                err(f"duplicate sibling name {n!r} under {path or '<root>'}")
        for c in children:
            walk(c, f"{path}/{c.get('name')}" if path else c.get("name"))
    else:
        leaves[path] = node
        schema = node.get("parameters")
        if schema is not None:
            try:
                Draft202012Validator.check_schema(schema)
            except Exception as e:  # SchemaError
                err(f"invalid schema at {path}: {e}")
            if schema.get("type") != "object":
                err(f"schema at {path} is not an object schema")
        ex = node.get("examples")
        if ex is not None and not (isinstance(ex, list) and all(isinstance(x, str) for x in ex)):
            err(f"examples at {path} must be a list of strings")


walk(root, "")
groups = root.get("children", [])

# ---- queries ---------------------------------------------------------------
queries = []
with open(QUERIES, encoding="utf-8") as f:
    for i, line in enumerate(f, 1):
        if line.strip():
            try:
                queries.append(json.loads(line))
            except json.JSONDecodeError as e:
                err(f"{QUERIES}:{i}: bad JSON: {e}")

ids = [q.get("id") for q in queries]
expected_ids = [f"mf-{i}" for i in range(1, 25)]
if sorted(ids, key=str) != sorted(expected_ids):
    err(f"ids are not exactly mf-1..mf-24: {ids}")

tag_counts = collections.Counter()
gold_counts = collections.Counter()
in_scope = out_scope = 0
for q in queries:
    qid = q.get("id")
    if not isinstance(q.get("query"), str) or not q["query"].strip():
        err(f"{qid}: empty query")
    gold, args, tags = q.get("gold"), q.get("args"), q.get("tags", [])
    tag_counts.update(tags)
    if not isinstance(gold, list) or not isinstance(args, list):
        err(f"{qid}: gold and args must be lists")
        continue
    if len(gold) != len(args):
        err(f"{qid}: {len(gold)} gold paths but {len(args)} args objects")
    if gold:
        in_scope += 1
        if len(gold) != 1:
            err(f"{qid}: in-scope request should have exactly one gold leaf")
        if {"near_miss", "chitchat", "out-of-scope"} & set(tags):
            err(f"{qid}: in-scope request carries an out-of-scope tag")
    else:
        out_scope += 1
        if args:
            err(f"{qid}: out-of-scope request has args")
        if not ({"near_miss", "chitchat"} & set(tags)):
            err(f"{qid}: out-of-scope request lacks near_miss/chitchat tag")
    for path, a in zip(gold, args):
        gold_counts[path] += 1
        if path not in leaves:
            err(f"{qid}: gold path {path!r} is not a leaf" + (" (it is a router)" if path in routers else ""))
            continue
        schema = leaves[path].get("parameters") or {"type": "object", "maxProperties": 0}
        v = Draft202012Validator(schema, format_checker=format_checker)
        for e in sorted(v.iter_errors(a), key=lambda e: list(e.path)):
            loc = "/".join(str(p) for p in e.path) or "<args>"
            err(f"{qid}: args invalid for {path} at {loc}: {e.message}")
        # every date in the args should be in 2027
        for s in re.findall(r'"(\d{4})-\d{2}-\d{2}', json.dumps(a)):
            if s != "2027":
                err(f"{qid}: date outside 2027 in args")

# ---- report ----------------------------------------------------------------
print(f"catalog: {len(groups)} groups, {len(routers)} routers (incl. root), {len(leaves)} leaves")
for g in groups:
    n = sum(1 for p in leaves if p.startswith(g["name"] + "/"))
    print(f"  {g['name']}: {n} leaves")
print(f"  leaves with examples: {sum(1 for n in leaves.values() if n.get('examples'))}, "
      f"sensitive: {sum(1 for n in leaves.values() if n.get('sensitive'))}")
print(f"queries: {len(queries)} total, {in_scope} in scope, {out_scope} out of scope")
print(f"  distinct gold leaves: {len(gold_counts)} of {len(leaves)}")
print("  tags: " + ", ".join(f"{t}={c}" for t, c in sorted(tag_counts.items())))
if not (20 <= len(leaves) <= 24):
    err(f"expected 20-24 leaves, found {len(leaves)}")
if len(groups) != 5:
    err(f"expected 5 groups, found {len(groups)}")
if (in_scope, out_scope) != (18, 6):
    err(f"expected 18 in scope and 6 out of scope, found {in_scope} and {out_scope}")

if errors:
    print(f"FAIL: {len(errors)} problem(s)")
    for e in errors:
        print("  - " + e)
    sys.exit(1)
print("OK: catalog schemas valid, all gold paths are leaves, all gold args validate")
