#!/usr/bin/env python3
"""Check utilities.catalog.json and utilities.queries.jsonl (run from this folder)."""
import datetime
import json
import re
import sys
from collections import Counter

from jsonschema import Draft202012Validator, FormatChecker

CATALOG = "utilities.catalog.json"
QUERIES = "utilities.queries.jsonl"
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*$")

errors = []

# Format checker: the stock one skips date-time without optional deps and is lax on email.
fc = FormatChecker()


@fc.checks("date-time", raises=ValueError)
def _dt(value):
    if not isinstance(value, str):
        return True
    if not re.match(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$", value):
        raise ValueError("not RFC 3339 date-time with offset")
    datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return True


@fc.checks("email", raises=ValueError)
def _email(value):
    if isinstance(value, str) and not re.match(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$", value):
        raise ValueError("bad email")
    return True


def walk(node, prefix, leaves, groups):
    name = node.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        errors.append(f"bad name {name!r} under {prefix or '<root>'}")
    if not node.get("description"):
        errors.append(f"missing description at {prefix}/{name}")
    children = node.get("children")
    if children:
        names = [c.get("name") for c in children]
        dup = [n for n, k in Counter(names).items() if k > 1]
        if dup:
            errors.append(f"duplicate sibling names {dup} under {prefix or '<root>'}")
        for c in children:
            path = f"{prefix}/{c.get('name')}" if prefix else c.get("name")
            if c.get("children"):
                groups.append(path)
            walk(c, path, leaves, groups)
    else:
        params = node.get("parameters")
        if params is not None:
            try:
                Draft202012Validator.check_schema(params)
            except Exception as e:  # SchemaError
                errors.append(f"invalid schema at {prefix}: {e.message if hasattr(e, 'message') else e}")
            if params.get("type") != "object":
                errors.append(f"parameters of {prefix} is not type object")
            props = params.get("properties", {})
            for r in params.get("required", []):
                if r not in props:
                    errors.append(f"{prefix}: required '{r}' not in properties")
        ex = node.get("examples")
        if ex is not None and not (isinstance(ex, list) and all(isinstance(x, str) for x in ex)):
            errors.append(f"{prefix}: examples must be a list of strings")
        leaves[prefix] = node


with open(CATALOG) as f:
    root = json.load(f)
leaves, groups = {}, []
walk(root, "", leaves, groups)

queries = []
with open(QUERIES) as f:
    for ln, line in enumerate(f, 1):
        if line.strip():
            try:
                queries.append(json.loads(line))
            except json.JSONDecodeError as e:
                errors.append(f"{QUERIES}:{ln}: {e}")

ids = [q.get("id") for q in queries]
expected_ids = [f"ut-{i}" for i in range(1, len(queries) + 1)]
if ids != expected_ids:
    errors.append(f"ids not ut-1..ut-{len(queries)} in order: {ids}")
if len(set(ids)) != len(ids):
    errors.append("duplicate query ids")

in_scope = out_scope = 0
tag_counts = Counter()
leaf_use = Counter()
for q in queries:
    qid = q.get("id")
    for k in ("query", "gold", "tags"):
        if k not in q:
            errors.append(f"{qid}: missing '{k}'")
    gold, args = q.get("gold", []), q.get("args", [])
    tag_counts.update(q.get("tags", []))
    if not gold:
        out_scope += 1
        if args:
            errors.append(f"{qid}: out-of-scope query has args")
        continue
    in_scope += 1
    if len(gold) != 1:
        errors.append(f"{qid}: expected exactly one gold leaf, got {len(gold)}")
    if len(args) != len(gold):
        errors.append(f"{qid}: args length {len(args)} != gold length {len(gold)}")
    for i, path in enumerate(gold):
        leaf = leaves.get(path)
        if leaf is None:
            errors.append(f"{qid}: gold path {path!r} is not a leaf")
            continue
        leaf_use[path] += 1
        if i < len(args):
            schema = leaf.get("parameters") or {"type": "object", "maxProperties": 0}
            v = Draft202012Validator(schema, format_checker=fc)
            for e in v.iter_errors(args[i]):
                loc = "/".join(map(str, e.absolute_path)) or "<args>"
                errors.append(f"{qid}: args for {path} invalid at {loc}: {e.message}")

print(f"catalog: {len(groups)} groups, {len(leaves)} leaves "
      f"({sum(1 for l in leaves.values() if l.get('sensitive'))} sensitive, "
      f"{sum(1 for l in leaves.values() if l.get('examples'))} with examples)")
for g in groups:
    print(f"  {g}: {sum(1 for p in leaves if p.startswith(g + '/'))} leaves")
print(f"queries: {len(queries)} total, {in_scope} in scope, {out_scope} out of scope")
print(f"distinct gold leaves: {len(leaf_use)} of {len(leaves)}")
print("tags: " + ", ".join(f"{t}={n}" for t, n in sorted(tag_counts.items())))
if errors:
    print(f"FAILED: {len(errors)} problem(s)")
    for e in errors:
        print("  - " + e)
    sys.exit(1)
print("OK: all checks passed")
