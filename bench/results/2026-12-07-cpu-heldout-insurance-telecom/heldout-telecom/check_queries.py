"""Check telecom.catalog.json and telecom.queries.jsonl (run from this folder)."""
import json, re, sys
from collections import Counter
from datetime import datetime
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError

NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*$")
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
errors = []

fc = FormatChecker()
if "date-time" not in fc.checkers:  # strict RFC 3339 when rfc3339-validator is absent
    @fc.checks("date-time", raises=ValueError)
    def _dt(v):
        if not isinstance(v, str):
            return True
        if not RFC3339.match(v):
            raise ValueError("not RFC 3339")
        datetime.fromisoformat(v.replace("Z", "+00:00").replace("z", "+00:00"))
        return True

cat = json.load(open("telecom.catalog.json"))
leaves, routers = {}, []

def walk(node, path):
    name = node.get("name", "")
    if not NAME_RE.match(name):
        errors.append(f"bad name {name!r} at {path or '<root>'}")
    if "description" not in node or not node["description"].strip():
        errors.append(f"missing description at {path or '<root>'}")
    kids = node.get("children")
    if kids:
        routers.append(path)
        dup = [n for n, c in Counter(k.get("name") for k in kids).items() if c > 1]
        if dup:
            errors.append(f"duplicate sibling names {dup} under {path or '<root>'}")
        for k in kids:
            walk(k, f"{path}/{k['name']}" if path else k["name"])
    else:
        if "parameters" in node:
            try:
                Draft202012Validator.check_schema(node["parameters"])
            except SchemaError as e:
                errors.append(f"invalid schema at {path}: {e.message}")
            for ex in node.get("examples", []):
                if not isinstance(ex, str):
                    errors.append(f"non-string example at {path}")
        leaves[path] = node

walk(cat, "")
groups = {r: sum(1 for l in leaves if l.startswith(r + "/")) for r in routers if r}

queries = [json.loads(l) for l in open("telecom.queries.jsonl") if l.strip()]
ids = [q["id"] for q in queries]
if ids != [f"tc-{i}" for i in range(1, len(queries) + 1)]:
    errors.append(f"ids not tc-1..tc-{len(queries)} in order")
tags, gold_use = Counter(), Counter()
n_in = n_out = 0
for q in queries:
    qid, gold, args = q["id"], q.get("gold"), q.get("args", [])
    tags.update(q.get("tags", []))
    if not isinstance(q.get("query"), str) or not q["query"].strip():
        errors.append(f"{qid}: empty query")
    if not gold:
        n_out += 1
        if args:
            errors.append(f"{qid}: out-of-scope with args")
        continue
    n_in += 1
    if len(gold) != 1:
        errors.append(f"{qid}: expected exactly one gold leaf, got {len(gold)}")
    if len(args) != len(gold):
        errors.append(f"{qid}: args/gold length mismatch")
    for path, a in zip(gold, args):
        gold_use[path] += 1
        if path not in leaves:
            errors.append(f"{qid}: gold {path!r} is not a leaf")
            continue
        schema = leaves[path].get("parameters", {"type": "object", "maxProperties": 0})
        for e in Draft202012Validator(schema, format_checker=fc).iter_errors(a):
            errors.append(f"{qid}: args invalid for {path}: {'/'.join(map(str, e.path))} {e.message}")

print(f"catalog: {len(routers) - 1} groups, {len(leaves)} leaves, "
      f"{sum(1 for l in leaves.values() if l.get('sensitive'))} sensitive, "
      f"{sum(1 for l in leaves.values() if l.get('examples'))} with examples")
for g, n in groups.items():
    print(f"  {g}: {n} leaves")
print(f"queries: {len(queries)} total, {n_in} in scope, {n_out} out of scope")
print(f"  distinct gold leaves: {len(gold_use)}; leaves used more than once: "
      f"{[p for p, c in gold_use.items() if c > 1] or 'none'}")
print(f"  unused leaves: {len(leaves) - len(gold_use)}")
print("  tags: " + ", ".join(f"{t}={c}" for t, c in sorted(tags.items())))
print(f"  formats checked: {sorted(fc.checkers)}")
if errors:
    print(f"FAIL: {len(errors)} error(s)")
    for e in errors:
        print("  - " + e)
    sys.exit(1)
print("OK: catalog valid, all gold paths are leaves, all gold args validate")
