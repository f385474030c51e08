#!/usr/bin/env python3
"""Check registrar.catalog.json and registrar.queries.jsonl against FORMAT.md rules.

Run from this folder:  python check_queries.py
"""
import json
import re
import sys
from collections import Counter
from datetime import datetime

from jsonschema import Draft202012Validator, FormatChecker

CATALOG = "registrar.catalog.json"
QUERIES = "registrar.queries.jsonl"
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*$")

errors = []


def make_format_checker():
    fc = FormatChecker()
    if "date-time" not in fc.checkers:  # rfc3339-validator not installed: add a strict fallback
        rfc3339 = re.compile(
            r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")

        @fc.checks("date-time", raises=ValueError)
        def _dt(value):
            if not isinstance(value, str):
                return True
            if not rfc3339.match(value):
                raise ValueError(f"not an RFC 3339 date-time: {value!r}")
            datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
            return True
    return fc


def walk(node, prefix, leaves, routers, depth=0):
    name = node.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        errors.append(f"bad node name {name!r} under {prefix or '<root>'}")
    if not node.get("description"):
        errors.append(f"node {prefix or name} has no description")
    kids = node.get("children")
    if kids:
        routers.append(prefix or "<root>")
        names = [k.get("name") for k in kids]
        for n, c in Counter(names).items():
            if c > 1:
                errors.append(f"duplicate sibling name {n!r} under {prefix or '<root>'}")
        if "parameters" in node:
            errors.append(f"router {prefix or '<root>'} has parameters")
        for k in kids:
            path = f"{prefix}/{k.get('name')}" if prefix else k.get("name")
            walk(k, path, leaves, routers, depth + 1)
    else:
        params = node.get("parameters")
        if params is not None:
            try:
                Draft202012Validator.check_schema(params)
            except Exception as e:  # SchemaError
                errors.append(f"leaf {prefix}: invalid schema: {e}")
            if params.get("type") != "object":
                errors.append(f"leaf {prefix}: parameters is not an object schema")
            for r in params.get("required", []):
                if r not in params.get("properties", {}):
                    errors.append(f"leaf {prefix}: required {r!r} not in properties")
        ex = node.get("examples")
        if ex is not None and not (isinstance(ex, list) and all(isinstance(e, str) for e in ex)):
            errors.append(f"leaf {prefix}: examples must be a list of strings")
        leaves[prefix] = node


def main():
    with open(CATALOG) as f:
        root = json.load(f)
    leaves, routers = {}, []
    walk(root, "", leaves, routers)
    groups = root.get("children", [])

    fc = make_format_checker()
    queries = []
    with open(QUERIES) as f:
        for ln, line in enumerate(f, 1):
            if line.strip():
                try:
                    queries.append(json.loads(line))
                except json.JSONDecodeError as e:
                    errors.append(f"{QUERIES}:{ln}: bad JSON: {e}")

    ids = [q.get("id") for q in queries]
    for i, c in Counter(ids).items():
        if c > 1:
            errors.append(f"duplicate query id {i}")
    expected_ids = [f"rg-{i}" for i in range(1, len(queries) + 1)]
    if ids != expected_ids:
        errors.append(f"ids are not rg-1..rg-{len(queries)} in order")

    used = Counter()
    tags = Counter()
    n_in = n_out = 0
    for q in queries:
        qid = q.get("id")
        if not isinstance(q.get("query"), str) or not q["query"].strip():
            errors.append(f"{qid}: empty query")
        gold = q.get("gold")
        args = q.get("args", [])
        tags.update(q.get("tags", []))
        if not isinstance(gold, list):
            errors.append(f"{qid}: gold is not a list")
            continue
        if len(args) != len(gold):
            errors.append(f"{qid}: {len(gold)} gold paths but {len(args)} args")
        if gold:
            n_in += 1
        else:
            n_out += 1
        for path, a in zip(gold, args):
            if path not in leaves:
                errors.append(f"{qid}: gold {path!r} is not a leaf")
                continue
            used[path] += 1
            schema = leaves[path].get("parameters")
            if schema is None:
                if a:
                    errors.append(f"{qid}: {path} takes no arguments but args given")
                continue
            v = Draft202012Validator(schema, format_checker=fc)
            for err in sorted(v.iter_errors(a), key=lambda e: list(e.path)):
                loc = "/".join(map(str, err.path)) or "<args>"
                errors.append(f"{qid}: args invalid for {path} at {loc}: {err.message}")

    n_params = sum(len(l.get("parameters", {}).get("properties", {})) for l in leaves.values())
    print(f"catalog: {len(groups)} groups, {len(leaves)} leaves, {len(routers)} routers, "
          f"{n_params} parameters, "
          f"{sum(1 for l in leaves.values() if l.get('sensitive'))} sensitive, "
          f"{sum(1 for l in leaves.values() if l.get('examples'))} with examples")
    for g in groups:
        print(f"  {g['name']}: {len(g.get('children', []))} leaves")
    print(f"queries: {len(queries)} total, {n_in} in scope, {n_out} out of scope")
    print(f"distinct gold leaves: {len(used)} of {len(leaves)}")
    print("tags: " + ", ".join(f"{t}={c}" for t, c in sorted(tags.items())))
    print("date-time format checked by: "
          + ("jsonschema" if "rfc3339_validator" in sys.modules else "local RFC 3339 fallback"))
    if errors:
        print(f"\nFAIL: {len(errors)} problem(s)")
        for e in errors:
            print("  - " + e)
        return 1
    print("\nOK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
