#!/usr/bin/env python3
"""Check insurance.catalog.json and insurance.queries.jsonl (run from this folder)."""
import collections
import datetime
import json
import re
import sys

from jsonschema import Draft202012Validator, FormatChecker

CATALOG = "insurance.catalog.json"
QUERIES = "insurance.queries.jsonl"
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*$")
errors = []


def err(msg):
    errors.append(msg)


format_checker = FormatChecker()
if "date-time" not in format_checker.checkers:
    # rfc3339-validator is not installed: use a strict stand-in (offset required).
    @format_checker.checks("date-time", raises=ValueError)
    def _date_time(value):
        if not isinstance(value, str):
            return True
        if not re.match(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$", value):
            raise ValueError("not RFC 3339 date-time")
        datetime.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        return True
for fmt in ("date", "email", "date-time"):
    if fmt not in format_checker.checkers:
        err(f"format checker lacks {fmt!r}")

with open(CATALOG) as f:
    root = json.load(f)

leaves = {}      # path -> node
routers = {}     # path -> node


def walk(node, prefix):
    name = node.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        err(f"bad name {name!r} under {prefix or '<root>'}")
    if not isinstance(node.get("description"), str) or not node["description"].strip():
        err(f"{prefix or name}: missing description")
    children = node.get("children")
    if children is not None:
        if "parameters" in node:
            err(f"{prefix or name}: router has parameters")
        names = [c.get("name") for c in children]
        for n, k in collections.Counter(names).items():
            if k > 1:
                err(f"{prefix or '<root>'}: duplicate sibling name {n!r}")
        routers[prefix] = node
        for c in children:
            walk(c, f"{prefix}/{c.get('name')}" if prefix else c.get("name"))
        if not children:
            err(f"{prefix}: router with no children")
    else:
        leaves[prefix] = node
        params = node.get("parameters")
        if params is not None:
            try:
                Draft202012Validator.check_schema(params)
            except Exception as e:  # SchemaError
                err(f"{prefix}: invalid schema: {e.message if hasattr(e, 'message') else e}")
            if params.get("type") != "object":
                err(f"{prefix}: parameters type is not object")
            for r in params.get("required", []):
                if r not in params.get("properties", {}):
                    err(f"{prefix}: required {r!r} not in properties")
        if "sensitive" in node and not isinstance(node["sensitive"], bool):
            err(f"{prefix}: sensitive must be boolean")
        ex = node.get("examples")
        if ex is not None and not (isinstance(ex, list) and all(isinstance(x, str) for x in ex)):
            err(f"{prefix}: examples must be a list of strings")


walk(root, "")
groups = [p for p in routers if p]

queries = []
with open(QUERIES) as f:
    for ln, line in enumerate(f, 1):
        if line.strip():
            try:
                queries.append(json.loads(line))
            except json.JSONDecodeError as e:
                err(f"{QUERIES}:{ln}: bad JSON: {e}")

ids = [q.get("id") for q in queries]
if ids != [f"ins-{i}" for i in range(1, len(queries) + 1)]:
    err(f"ids are not ins-1..ins-{len(queries)} in order")
example_texts = {x.strip().lower() for n in leaves.values() for x in n.get("examples", [])}

in_scope = out_scope = 0
tag_counts = collections.Counter()
gold_leaf_counts = collections.Counter()
for q in queries:
    qid = q.get("id")
    if not isinstance(q.get("query"), str) or not q["query"].strip():
        err(f"{qid}: empty query")
    elif q["query"].strip().lower() in example_texts:
        err(f"{qid}: query copies a leaf example")
    gold, args = q.get("gold"), q.get("args", [])
    tag_counts.update(q.get("tags", []))
    if not isinstance(gold, list):
        err(f"{qid}: gold must be a list")
        continue
    if not gold:
        out_scope += 1
        if args:
            err(f"{qid}: out-of-scope query has args")
        continue
    in_scope += 1
    if len(args) != len(gold):
        err(f"{qid}: {len(gold)} gold calls but {len(args)} args")
    for i, path in enumerate(gold):
        gold_leaf_counts[path] += 1
        if path not in leaves:
            err(f"{qid}: gold {path!r} is not a leaf" + (" (it is a router)" if path in routers else ""))
            continue
        if i >= len(args):
            continue
        schema = leaves[path].get("parameters") or {"type": "object", "maxProperties": 0}
        v = Draft202012Validator(schema, format_checker=format_checker)
        for e in sorted(v.iter_errors(args[i]), key=lambda e: list(e.path)):
            loc = "/".join(str(p) for p in e.absolute_path) or "<args>"
            err(f"{qid}: args for {path} invalid at {loc}: {e.message}")

print(f"catalog: {len(groups)} groups, {len(leaves)} leaves, "
      f"{sum(1 for n in leaves.values() if n.get('sensitive'))} sensitive, "
      f"{sum(1 for n in leaves.values() if n.get('examples'))} with examples")
for g in groups:
    print(f"  {g}: {len(routers[g]['children'])} leaves")
print(f"queries: {len(queries)} total, {in_scope} in scope, {out_scope} out of scope")
print(f"  distinct gold leaves: {len(gold_leaf_counts)}; leaves never gold: {len(leaves) - len(gold_leaf_counts)}")
print("  tags: " + ", ".join(f"{t}={n}" for t, n in sorted(tag_counts.items())))
if errors:
    print(f"FAILED: {len(errors)} problem(s)")
    for e in errors:
        print("  - " + e)
    sys.exit(1)
print("OK: all checks passed")
