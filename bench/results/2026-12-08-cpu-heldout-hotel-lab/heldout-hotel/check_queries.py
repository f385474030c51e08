#!/usr/bin/env python3
"""Check hotel.catalog.json and hotel.queries.jsonl in this folder.

Run from this folder:  /work/main/.venv/bin/python check_queries.py
Prints OK, or one line per error.
"""
import datetime
import json
import re
import sys

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError

CATALOG = "hotel.catalog.json"
QUERIES = "hotel.queries.jsonl"
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*$")
ID_PREFIX = "ht-"
N_QUERIES = 24
N_IN, N_OUT = 18, 6
STYLE_TAGS = {"clear": 6, "messy": 6, "terse": 6}
OOS_KINDS = {"chit-chat": 2, "other-product": 2, "near_miss": 2}

errors = []


def err(msg):
    errors.append(msg)


# ---- strict format checkers -------------------------------------------------
DATE_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
DATETIME_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-](\d{2}):(\d{2}))$")
EMAIL_RE = re.compile(
    r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
    r"@([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}$")

checker = FormatChecker(formats=())


@checker.checks("date")
def is_date(value):
    if not isinstance(value, str):
        return True
    m = DATE_RE.match(value)
    if not m:
        return False
    try:
        datetime.date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        return False
    return True


@checker.checks("date-time")
def is_datetime(value):
    if not isinstance(value, str):
        return True
    m = DATETIME_RE.match(value)
    if not m:
        return False
    try:
        datetime.datetime(int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]),
                          min(int(m[6]), 59))  # allow a leap second
    except ValueError:
        return False
    if int(m[6]) > 60:
        return False
    if m[8] != "Z":
        if int(m[9]) > 23 or int(m[10]) > 59:
            return False
    return True


@checker.checks("email")
def is_email(value):
    if not isinstance(value, str):
        return True
    return bool(EMAIL_RE.match(value)) and len(value) <= 254


# self-test of the format checkers
for v, ok in [("2026-12-14", True), ("2026-02-30", False), ("12/14/26", False), ("2026-1-4", False),
              ("2027-01-21T08:00:00-08:00", True), ("2027-01-21T08:00:00Z", True),
              ("2027-01-21T08:00:00", False), ("2027-01-21 08:00:00-08:00", False),
              ("2027-01-21T25:00:00-08:00", False)]:
    fn = is_date if "T" not in v and ":" not in v else is_datetime
    if fn(v) != ok:
        err(f"format checker self-test failed for {v!r}")
for v, ok in [("a.b@c.co", True), ("a@b", False), ("a b@c.com", False), ("@c.com", False)]:
    if is_email(v) != ok:
        err(f"email checker self-test failed for {v!r}")


# ---- catalog ----------------------------------------------------------------
def walk(node, path, depth, leaves):
    where = "/".join(path) or "<root>"
    if not isinstance(node, dict):
        err(f"{where}: node is not an object")
        return
    name = node.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        err(f"{where}: bad name {name!r}")
    desc = node.get("description")
    if not isinstance(desc, str) or len(desc.strip()) < 10:
        err(f"{where}: missing or too short description")
    if "children" in node:
        kids = node["children"]
        if not isinstance(kids, list) or not kids:
            err(f"{where}: router with no children")
            return
        if "parameters" in node:
            err(f"{where}: router has parameters")
        seen = set()
        for k in kids:
            kn = k.get("name") if isinstance(k, dict) else None
            if kn in seen:
                err(f"{where}: duplicate child name {kn!r}")
            seen.add(kn)
            walk(k, path + [kn if isinstance(kn, str) else "?"], depth + 1, leaves)
    else:
        if depth not in (2, 3):
            err(f"{where}: leaf at depth {depth}, want 2 or 3")
        params = node.get("parameters")
        if not isinstance(params, dict):
            err(f"{where}: leaf without parameters")
        else:
            try:
                Draft202012Validator.check_schema(params)
            except SchemaError as e:
                err(f"{where}: invalid draft 2020-12 schema: {e.message}")
            if params.get("type") != "object":
                err(f"{where}: parameters is not an object schema")
            props = params.get("properties", {})
            for r in params.get("required", []):
                if r not in props:
                    err(f"{where}: required {r!r} not in properties")
        if "sensitive" in node and not isinstance(node["sensitive"], bool):
            err(f"{where}: sensitive must be a boolean")
        ex = node.get("examples")
        if ex is not None and (not isinstance(ex, list) or not all(isinstance(x, str) and x.strip() for x in ex)):
            err(f"{where}: examples must be a list of non-empty strings")
        leaves[where] = node


with open(CATALOG, encoding="utf-8") as f:
    root = json.load(f)
if "children" not in root:
    err("root has no children")
leaves = {}
walk(root, [], 0, leaves)
if not 22 <= len(leaves) <= 24:
    err(f"leaf count {len(leaves)}, want 22-24")
if not any(l.get("sensitive") for l in leaves.values()):
    err("no sensitive leaf")
n_ex = sum(1 for l in leaves.values() if l.get("examples"))
if not (len(leaves) // 4 <= n_ex <= (len(leaves) * 5) // 12 + 1):
    err(f"{n_ex} leaves with examples, want about a third")

# ---- queries ----------------------------------------------------------------
queries = []
with open(QUERIES, encoding="utf-8") as f:
    for i, line in enumerate(f, 1):
        if not line.strip():
            err(f"line {i}: blank line")
            continue
        try:
            queries.append(json.loads(line))
        except json.JSONDecodeError as e:
            err(f"line {i}: bad JSON: {e}")

if len(queries) != N_QUERIES:
    err(f"{len(queries)} queries, want {N_QUERIES}")
ids = [q.get("id") for q in queries]
if len(set(ids)) != len(ids):
    err("duplicate query ids")
if set(ids) != {f"{ID_PREFIX}{i}" for i in range(1, N_QUERIES + 1)}:
    err(f"ids are not exactly {ID_PREFIX}1..{ID_PREFIX}{N_QUERIES}")

texts = [q.get("query", "") for q in queries]
if len(set(t.strip().lower() for t in texts)) != len(texts):
    err("duplicate query texts")
example_texts = {x.strip().lower() for l in leaves.values() for x in l.get("examples", [])}
for q in queries:
    if q.get("query", "").strip().lower() in example_texts:
        err(f"{q.get('id')}: query text copied into a leaf's examples")

n_in = n_out = 0
style_counts = {k: 0 for k in STYLE_TAGS}
oos_counts = {k: 0 for k in OOS_KINDS}
for q in queries:
    qid = q.get("id")
    if not isinstance(q.get("query"), str) or not q["query"].strip():
        err(f"{qid}: empty query")
    gold, tags = q.get("gold"), q.get("tags")
    if not isinstance(gold, list) or not isinstance(tags, list):
        err(f"{qid}: gold and tags must be lists")
        continue
    if gold:
        n_in += 1
        if len(gold) != 1:
            err(f"{qid}: in-scope query must have exactly one gold path")
        styles = [t for t in tags if t in STYLE_TAGS]
        if len(styles) != 1 or "out-of-scope" in tags:
            err(f"{qid}: needs exactly one of {sorted(STYLE_TAGS)}, got {tags}")
        for s in styles:
            style_counts[s] += 1
        args = q.get("args")
        if not isinstance(args, list) or len(args) != len(gold):
            err(f"{qid}: args must be a list with one object per gold call")
            continue
        for path, a in zip(gold, args):
            leaf = leaves.get(path)
            if leaf is None:
                err(f"{qid}: gold {path!r} is not a leaf")
                continue
            if not isinstance(a, dict):
                err(f"{qid}: args for {path} is not an object")
                continue
            v = Draft202012Validator(leaf["parameters"], format_checker=checker)
            for e in sorted(v.iter_errors(a), key=lambda e: list(e.path)):
                loc = "/".join(str(p) for p in e.path) or "<args>"
                err(f"{qid}: {path}: {loc}: {e.message}")
    else:
        n_out += 1
        if "args" in q:
            err(f"{qid}: out-of-scope query must not have args")
        kinds = [t for t in tags if t in OOS_KINDS]
        if "out-of-scope" not in tags or len(kinds) != 1 or any(t in STYLE_TAGS for t in tags):
            err(f"{qid}: out-of-scope tags must be ['out-of-scope', one of {sorted(OOS_KINDS)}], got {tags}")
        for k in kinds:
            oos_counts[k] += 1

if (n_in, n_out) != (N_IN, N_OUT):
    err(f"{n_in} in-scope / {n_out} out-of-scope, want {N_IN}/{N_OUT}")
if style_counts != STYLE_TAGS:
    err(f"style tag counts {style_counts}, want {STYLE_TAGS}")
if oos_counts != OOS_KINDS:
    err(f"out-of-scope kind counts {oos_counts}, want {OOS_KINDS}")

if errors:
    for e in errors:
        print("ERROR:", e)
    sys.exit(1)
print("OK")
