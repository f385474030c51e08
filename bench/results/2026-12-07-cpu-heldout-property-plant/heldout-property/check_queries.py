#!/usr/bin/env python3
"""Check property.catalog.json and property.queries.jsonl (run from this folder)."""
import json
import re
import sys
from collections import Counter
from datetime import datetime

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError

CATALOG = "property.catalog.json"
QUERIES = "property.queries.jsonl"
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*$")

errors = []

# FormatChecker without rfc3339-validator does not check date-time; add a strict one
# (RFC 3339: full date, time, and an explicit offset or Z).
fmt = FormatChecker()
DT_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


@fmt.checks("date-time", raises=ValueError)
def _date_time(value):
    if not isinstance(value, str):
        return True
    if not DT_RE.match(value):
        raise ValueError(f"not RFC 3339 date-time: {value!r}")
    datetime.fromisoformat(value.replace("Z", "+00:00"))
    return True


def walk(node, prefix, leaves, routers, depth=0):
    name = node.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        errors.append(f"bad name {name!r} under {prefix or '<root>'}")
    if not isinstance(node.get("description"), str) or not node["description"].strip():
        errors.append(f"{prefix or name}: missing description")
    children = node.get("children")
    if children is not None:
        routers.append(prefix or "<root>")
        if "parameters" in node:
            errors.append(f"{prefix}: router has parameters")
        names = [c.get("name") for c in children]
        for n, k in Counter(names).items():
            if k > 1:
                errors.append(f"{prefix or '<root>'}: duplicate child name {n!r}")
        for c in children:
            p = f"{prefix}/{c.get('name')}" if prefix else c.get("name")
            walk(c, p, leaves, routers, depth + 1)
    else:
        schema = node.get("parameters")
        if schema is not None:
            try:
                Draft202012Validator.check_schema(schema)
            except SchemaError as e:
                errors.append(f"{prefix}: invalid schema: {e.message}")
            if schema.get("type") != "object":
                errors.append(f"{prefix}: parameters is not an object schema")
        ex = node.get("examples")
        if ex is not None and not (isinstance(ex, list) and all(isinstance(x, str) for x in ex)):
            errors.append(f"{prefix}: examples must be a list of strings")
        leaves[prefix] = node


with open(CATALOG) as f:
    root = json.load(f)
leaves, routers = {}, []
walk(root, "", leaves, routers)
groups = root.get("children", [])

queries = []
with open(QUERIES) as f:
    for ln, line in enumerate(f, 1):
        if line.strip():
            try:
                queries.append(json.loads(line))
            except json.JSONDecodeError as e:
                errors.append(f"{QUERIES}:{ln}: {e}")

ids = [q.get("id") for q in queries]
if ids != [f"pm-{i}" for i in range(1, len(queries) + 1)]:
    errors.append(f"ids are not pm-1..pm-{len(queries)} in order: {ids}")

in_scope = out_scope = 0
gold_leaves = Counter()
tags = Counter()
for q in queries:
    qid = q.get("id")
    gold, args = q.get("gold"), q.get("args")
    tags.update(q.get("tags", []))
    if not isinstance(q.get("query"), str) or not q["query"].strip():
        errors.append(f"{qid}: empty query")
    if not isinstance(gold, list) or not isinstance(args, list):
        errors.append(f"{qid}: gold/args must be lists")
        continue
    if len(args) != len(gold):
        errors.append(f"{qid}: {len(gold)} gold paths but {len(args)} args")
    if not gold:
        out_scope += 1
        if "out_of_scope" not in q.get("tags", []):
            errors.append(f"{qid}: empty gold but no out_of_scope tag")
        continue
    in_scope += 1
    if len(gold) != 1:
        errors.append(f"{qid}: expected exactly one gold leaf, got {gold}")
    for path, a in zip(gold, args):
        gold_leaves[path] += 1
        if path not in leaves:
            errors.append(f"{qid}: gold {path!r} is not a leaf")
            continue
        schema = leaves[path].get("parameters") or {"type": "object", "maxProperties": 0}
        v = Draft202012Validator(schema, format_checker=fmt)
        for e in sorted(v.iter_errors(a), key=str):
            loc = "/".join(map(str, e.absolute_path)) or "<args>"
            errors.append(f"{qid}: args invalid for {path} at {loc}: {e.message}")

for path, k in gold_leaves.items():
    if k > 1:
        errors.append(f"leaf {path} is gold for {k} queries (expected distinct leaves)")

n_params = sum(1 for n in leaves.values() if n.get("parameters"))
print(f"catalog: {CATALOG}  root={root['name']!r}")
print(f"  groups: {len(groups)}  routers (incl. root): {len(routers)}  leaves: {len(leaves)}"
      f"  (with parameters: {n_params}, sensitive: {sum(1 for n in leaves.values() if n.get('sensitive'))},"
      f" with examples: {sum(1 for n in leaves.values() if n.get('examples'))})")
for g in groups:
    print(f"    {g['name']}: {len(g.get('children', []))} leaves")
print(f"queries: {QUERIES}  total: {len(queries)}  in scope: {in_scope}  out of scope: {out_scope}")
print(f"  distinct gold leaves: {len(gold_leaves)}  leaves never gold: {len(leaves) - len(gold_leaves)}")
print("  tags: " + ", ".join(f"{t}={c}" for t, c in sorted(tags.items())))
if errors:
    print(f"FAIL: {len(errors)} problem(s)")
    for e in errors:
        print("  - " + e)
    sys.exit(1)
print("OK: catalog valid, all gold paths are leaves, all gold args validate (with FormatChecker)")
