#!/usr/bin/env python
"""Check fleet.catalog.json and fleet.queries.jsonl (run from this folder).

Structure: names, unique siblings, routers vs leaves, leaf schemas valid (draft 2020-12),
leaf count 22-24, leaves 2-3 levels under the root.
Queries: ids unique, fields well formed, 18 in-scope / 6 out-of-scope, every gold path is a
leaf, every gold argument object validates against its leaf schema with date, date-time and
email formats enforced strictly (own checkers, not dependent on optional packages).
Prints OK or the errors.
"""
import datetime
import json
import re
import sys

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError

CATALOG = "fleet.catalog.json"
QUERIES = "fleet.queries.jsonl"
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*$")
LEAF_KEYS_OK = {"name", "description", "parameters", "sensitive", "examples"}

errors = []


def err(msg):
    errors.append(msg)


# ---------------------------------------------------------------- strict formats
fmt = FormatChecker(formats=())

DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
DATETIME_RE = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
EMAIL_RE = re.compile(
    r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$")


@fmt.checks("date", raises=ValueError)
def _date(value):
    if not isinstance(value, str):
        return True
    if not DATE_RE.match(value):
        raise ValueError("not YYYY-MM-DD")
    datetime.date.fromisoformat(value)
    return True


@fmt.checks("date-time", raises=ValueError)
def _date_time(value):
    if not isinstance(value, str):
        return True
    m = DATETIME_RE.match(value)
    if not m:
        raise ValueError("not RFC 3339 date-time with offset")
    datetime.date.fromisoformat(m.group(1))
    h, mi, s = int(m.group(2)), int(m.group(3)), int(m.group(4))
    if h > 23 or mi > 59 or s > 60:
        raise ValueError("bad time")
    off = m.group(6)
    if off not in ("Z", "z"):
        oh, om = int(off[1:3]), int(off[4:6])
        if oh > 23 or om > 59:
            raise ValueError("bad offset")
    return True


@fmt.checks("email", raises=ValueError)
def _email(value):
    if not isinstance(value, str):
        return True
    if not EMAIL_RE.match(value) or ".." in value.split("@")[0] \
            or value.startswith(".") or value.split("@")[0].endswith("."):
        raise ValueError("not an email address")
    return True


# ---------------------------------------------------------------- catalog
def walk(node, prefix, depth, leaves, where):
    if not isinstance(node, dict):
        err(f"{where}: node is not an object")
        return
    name = node.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        err(f"{where}: bad or missing name {name!r}")
        return
    if not isinstance(node.get("description"), str) or len(node["description"].strip()) < 15:
        err(f"{where}: missing or too short description")
    path = name if prefix is None else (f"{prefix}/{name}" if prefix else name)
    if "children" in node:
        kids = node["children"]
        if not isinstance(kids, list) or not kids:
            err(f"{where}: router with empty or non-list children")
            return
        for k in ("parameters", "examples", "sensitive"):
            if k in node:
                err(f"{where}: router has leaf key {k!r}")
        seen = set()
        for i, kid in enumerate(kids):
            kname = kid.get("name") if isinstance(kid, dict) else None
            if kname in seen:
                err(f"{where}: duplicate child name {kname!r}")
            seen.add(kname)
            child_prefix = "" if prefix is None else path
            walk(kid, child_prefix, depth + 1, leaves, f"{where}/{kname or i}")
    else:
        if prefix is None:
            err("root must be a router")
            return
        if not 2 <= depth <= 3:
            err(f"{path}: leaf at depth {depth}, expected 2-3 under the root")
        extra = set(node) - LEAF_KEYS_OK
        if extra:
            err(f"{path}: unexpected keys {sorted(extra)}")
        if "sensitive" in node and not isinstance(node["sensitive"], bool):
            err(f"{path}: sensitive must be boolean")
        if "examples" in node:
            ex = node["examples"]
            if not isinstance(ex, list) or not ex or not all(isinstance(e, str) and e.strip() for e in ex):
                err(f"{path}: examples must be a non-empty list of strings")
        schema = node.get("parameters")
        if schema is not None:
            try:
                Draft202012Validator.check_schema(schema)
            except SchemaError as e:
                err(f"{path}: invalid parameters schema: {e.message}")
                schema = None
            else:
                if schema.get("type") != "object":
                    err(f"{path}: parameters must be type object")
                for r in schema.get("required", []):
                    if r not in schema.get("properties", {}):
                        err(f"{path}: required {r!r} not in properties")
        leaves[path] = schema if schema is not None else {"type": "object", "maxProperties": 0}


try:
    with open(CATALOG, encoding="utf-8") as f:
        catalog = json.load(f)
except (OSError, ValueError) as e:
    print(f"ERROR: cannot load {CATALOG}: {e}")
    sys.exit(1)

leaves = {}
walk(catalog, None, 0, leaves, "root")
if not 22 <= len(leaves) <= 24:
    err(f"catalog has {len(leaves)} leaves, expected 22-24")

# ---------------------------------------------------------------- queries
ids = set()
n_in = n_out = 0
try:
    lines = open(QUERIES, encoding="utf-8").read().splitlines()
except OSError as e:
    print(f"ERROR: cannot read {QUERIES}: {e}")
    sys.exit(1)

for ln, line in enumerate(lines, 1):
    if not line.strip():
        err(f"line {ln}: blank line")
        continue
    try:
        q = json.loads(line)
    except ValueError as e:
        err(f"line {ln}: bad JSON: {e}")
        continue
    qid = q.get("id")
    where = f"line {ln} ({qid})"
    if not isinstance(qid, str) or not qid:
        err(f"{where}: missing id")
    elif qid in ids:
        err(f"{where}: duplicate id")
    ids.add(qid)
    if not isinstance(q.get("query"), str) or not q["query"].strip():
        err(f"{where}: missing query text")
    extra = set(q) - {"id", "query", "gold", "args", "tags"}
    if extra:
        err(f"{where}: unexpected keys {sorted(extra)}")
    gold = q.get("gold")
    if not isinstance(gold, list) or not all(isinstance(g, str) for g in gold):
        err(f"{where}: gold must be a list of paths")
        continue
    tags = q.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        err(f"{where}: tags must be a list of strings")
        tags = []
    args = q.get("args")
    if gold:
        n_in += 1
        if "out-of-scope" in tags:
            err(f"{where}: has gold but tagged out-of-scope")
        if len(gold) != 1:
            err(f"{where}: expected a single-tool request")
        if args is None:
            err(f"{where}: in-scope query without args")
            continue
        if not isinstance(args, list) or len(args) != len(gold):
            err(f"{where}: args must be a list as long as gold")
            continue
        for path, a in zip(gold, args):
            if path not in leaves:
                err(f"{where}: gold path {path!r} is not a leaf of the catalog")
                continue
            if not isinstance(a, dict):
                err(f"{where}: args for {path} is not an object")
                continue
            v = Draft202012Validator(leaves[path], format_checker=fmt)
            for e in sorted(v.iter_errors(a), key=lambda e: list(e.absolute_path)):
                loc = "/".join(str(p) for p in e.absolute_path) or "(root)"
                err(f"{where}: {path} args {loc}: {e.message}")
    else:
        n_out += 1
        if "out-of-scope" not in tags:
            err(f"{where}: no gold but not tagged out-of-scope")
        if args not in (None, []):
            err(f"{where}: out-of-scope query with args")

if n_in != 18 or n_out != 6:
    err(f"expected 18 in-scope and 6 out-of-scope queries, found {n_in} and {n_out}")

# self-test of the strict format checker
for fmt_name, bad in (("date", "2026-02-30"), ("date", "12/01/2026"),
                      ("date-time", "2026-12-01T10:00:00"), ("email", "a@b")):
    if fmt.conforms(bad, fmt_name):
        err(f"format checker accepts bad {fmt_name} {bad!r}")

if errors:
    for e in errors:
        print("ERROR:", e)
    sys.exit(1)
print(f"OK ({len(leaves)} leaves, {n_in} in-scope, {n_out} out-of-scope)")
