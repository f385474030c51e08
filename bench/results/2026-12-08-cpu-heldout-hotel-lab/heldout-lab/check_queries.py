#!/usr/bin/env python3
"""Check lab.catalog.json and lab.queries.jsonl (run from this folder).

Usage: /work/main/.venv/bin/python check_queries.py
Prints OK, or one line per error (exit status 1).
"""
import datetime
import json
import re
import sys
from collections import Counter

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError

CATALOG = "lab.catalog.json"
QUERIES = "lab.queries.jsonl"
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*$")

errors = []


def err(msg):
    errors.append(msg)


# ---------------------------------------------------------------- formats
DATE_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
DATETIME_RE = re.compile(
    r"^(\d{4}-\d{2}-\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-](\d{2}):(\d{2}))$"
)
EMAIL_RE = re.compile(
    r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
    r"@[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.[A-Za-z]{2,63}$"
)


def is_date(value):
    if not isinstance(value, str):
        return True  # format only applies to strings
    if not DATE_RE.match(value):
        return False
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        return False
    return True


def is_datetime(value):
    """RFC 3339 date-time with a mandatory offset (Z or +hh:mm / -hh:mm)."""
    if not isinstance(value, str):
        return True
    m = DATETIME_RE.match(value)
    if not m:
        return False
    if not is_date(m.group(1)):
        return False
    hh, mm, ss = int(m.group(2)), int(m.group(3)), int(m.group(4))
    if hh > 23 or mm > 59 or ss > 59:
        return False
    if m.group(6) != "Z":
        oh, om = int(m.group(7)), int(m.group(8))
        if oh > 23 or om > 59:
            return False
    return True


def is_email(value):
    if not isinstance(value, str):
        return True
    return len(value) <= 254 and bool(EMAIL_RE.match(value)) and len(value.split("@")[0]) <= 64


format_checker = FormatChecker(formats=())
format_checker.checks("date")(is_date)
format_checker.checks("date-time")(is_datetime)
format_checker.checks("email")(is_email)


def self_test():
    good = [(is_date, "2026-12-16"), (is_datetime, "2026-12-03T08:40:00-05:00"),
            (is_datetime, "2026-12-03T08:40:00.5Z"), (is_email, "h.park@northbridge-bio.org")]
    bad = [(is_date, "12/16/2026"), (is_date, "2026-02-30"), (is_date, "2026-1-5"),
           (is_datetime, "2026-12-03T08:40:00"), (is_datetime, "2026-12-03 08:40:00-05:00"),
           (is_datetime, "2026-12-03T08:40-05:00"), (is_datetime, "2026-12-03T24:00:00Z"),
           (is_datetime, "2026-12-03T08:40:00-0500"), (is_email, "h.park@"),
           (is_email, "h..park@northbridge-bio.org"), (is_email, "Heidi Park"),
           (is_email, "h.park@localhost")]
    for fn, v in good:
        if not fn(v):
            err(f"self-test: {fn.__name__} rejected valid {v!r}")
    for fn, v in bad:
        if fn(v):
            err(f"self-test: {fn.__name__} accepted invalid {v!r}")


# ---------------------------------------------------------------- catalog
def walk_defaults(schema, where):
    """Check that every `default` validates against the subschema that holds it."""
    if isinstance(schema, dict):
        if "default" in schema:
            sub = {k: v for k, v in schema.items() if k != "default"}
            for e in Draft202012Validator(sub, format_checker=format_checker).iter_errors(schema["default"]):
                err(f"{where}: default {schema['default']!r} invalid: {e.message}")
        for k, v in schema.items():
            if k == "properties" and isinstance(v, dict):
                for pn, ps in v.items():
                    walk_defaults(ps, f"{where}.{pn}")
            elif isinstance(v, (dict, list)) and k not in ("enum", "const", "default", "examples"):
                walk_defaults(v, where)
    elif isinstance(schema, list):
        for v in schema:
            walk_defaults(v, where)


def check_catalog(root):
    leaves = {}
    depths = []
    all_examples = []

    if not isinstance(root, dict) or not root.get("children"):
        err("catalog root must be a router with children")
        return leaves, all_examples
    if not isinstance(root.get("description"), str) or not root["description"].strip():
        err("root: missing description")

    def visit(node, path, depth):
        name = node.get("name")
        label = "/".join(path) or "<root>"
        if not isinstance(name, str) or not NAME_RE.match(name):
            err(f"{label}: bad name {name!r}")
        desc = node.get("description")
        if not isinstance(desc, str) or len(desc.strip()) < 10:
            err(f"{label}: missing or too short description")
        if "sensitive" in node and not isinstance(node["sensitive"], bool):
            err(f"{label}: sensitive must be a boolean")
        children = node.get("children")
        if children is not None:
            if not isinstance(children, list) or not children:
                err(f"{label}: router with empty children")
                return
            if "parameters" in node:
                err(f"{label}: router must not have parameters")
            if "examples" in node:
                err(f"{label}: examples belong on leaves")
            names = [c.get("name") for c in children]
            for n, k in Counter(names).items():
                if k > 1:
                    err(f"{label}: duplicate child name {n!r}")
            for c in children:
                visit(c, path + [c.get("name", "?")], depth + 1)
        else:
            depths.append((label, depth))
            leaves[label] = node
            params = node.get("parameters")
            if params is None:
                err(f"{label}: leaf without parameters")
            else:
                try:
                    Draft202012Validator.check_schema(params)
                    node["_schema_ok"] = True
                except SchemaError as e:
                    err(f"{label}: invalid draft 2020-12 schema: {e.message}")
                    node["_schema_ok"] = False
                if params.get("type") != "object":
                    err(f"{label}: parameters must be an object schema")
                props = params.get("properties", {})
                for r in params.get("required", []):
                    if r not in props:
                        err(f"{label}: required {r!r} not in properties")
                if node["_schema_ok"]:
                    walk_defaults(params, label)
            ex = node.get("examples")
            if ex is not None:
                if not isinstance(ex, list) or not (2 <= len(ex) <= 3) or not all(isinstance(s, str) and s.strip() for s in ex):
                    err(f"{label}: examples must be 2-3 non-empty strings")
                else:
                    all_examples.extend((label, s) for s in ex)

    names = [c.get("name") for c in root["children"]]
    for n, k in Counter(names).items():
        if k > 1:
            err(f"root: duplicate child name {n!r}")
    for c in root["children"]:
        visit(c, [c.get("name", "?")], 1)

    if not 22 <= len(leaves) <= 24:
        err(f"leaf count {len(leaves)} not in 22..24")
    for label, d in depths:
        if d not in (2, 3):
            err(f"{label}: leaf at depth {d}, must be 2 or 3")
    n_ex = sum(1 for n in leaves.values() if "examples" in n)
    if not round(len(leaves) / 4) <= n_ex <= round(len(leaves) / 2):
        err(f"{n_ex} leaves have examples; expected about a third")
    if not any(n.get("sensitive") is True for n in leaves.values()):
        err("no sensitive leaf")
    return leaves, all_examples


# ---------------------------------------------------------------- queries
def norm(s):
    return re.sub(r"\s+", " ", s.strip().lower())


def check_queries(lines, leaves, examples):
    ids = []
    tag_counts = Counter()
    in_scope = out_scope = 0
    example_texts = {norm(s): label for label, s in examples}
    for i, line in enumerate(lines, 1):
        if not line.strip():
            err(f"queries line {i}: blank line")
            continue
        try:
            q = json.loads(line)
        except json.JSONDecodeError as e:
            err(f"queries line {i}: bad JSON: {e}")
            continue
        qid = q.get("id")
        ids.append(qid)
        where = f"query {qid}"
        extra = set(q) - {"id", "query", "gold", "args", "tags"}
        if extra:
            err(f"{where}: unexpected keys {sorted(extra)}")
        text = q.get("query")
        if not isinstance(text, str) or not text.strip():
            err(f"{where}: empty query")
        elif norm(text) in example_texts:
            err(f"{where}: query copied from examples of {example_texts[norm(text)]}")
        gold = q.get("gold")
        tags = q.get("tags")
        if not isinstance(gold, list) or not isinstance(tags, list):
            err(f"{where}: gold and tags must be lists")
            continue
        if gold:
            in_scope += 1
            if len(gold) != 1:
                err(f"{where}: in-scope query must have exactly one gold leaf")
            if len(tags) != 1 or tags[0] not in ("clear", "messy", "terse"):
                err(f"{where}: in-scope tags must be one of clear/messy/terse, got {tags}")
            else:
                tag_counts[tags[0]] += 1
            args = q.get("args")
            if not isinstance(args, list) or len(args) != len(gold):
                err(f"{where}: args must be a list with one object per gold call")
                continue
            for path, a in zip(gold, args):
                if path not in leaves:
                    err(f"{where}: gold {path!r} is not a leaf")
                    continue
                if not isinstance(a, dict):
                    err(f"{where}: args entry must be an object")
                    continue
                if not leaves[path].get("_schema_ok"):
                    err(f"{where}: cannot check args, schema of {path} is invalid")
                    continue
                schema = leaves[path]["parameters"]
                v = Draft202012Validator(schema, format_checker=format_checker)
                for e in sorted(v.iter_errors(a), key=lambda e: [str(p) for p in e.path]):
                    loc = "/".join(str(p) for p in e.path) or "<args>"
                    err(f"{where}: args invalid for {path} at {loc}: {e.message}")
        else:
            out_scope += 1
            if "args" in q:
                err(f"{where}: out-of-scope query must not have args")
            kinds = {"chit-chat", "other-product", "near_miss"}
            if len(tags) != 2 or tags[0] != "out-of-scope" or tags[1] not in kinds:
                err(f"{where}: out-of-scope tags must be ['out-of-scope', chit-chat|other-product|near_miss], got {tags}")
            else:
                tag_counts[tags[1]] += 1

    dup = [k for k, c in Counter(ids).items() if c > 1]
    if dup:
        err(f"duplicate query ids: {dup}")
    expected_ids = {f"lb-{n}" for n in range(1, 25)}
    if set(ids) != expected_ids or len(ids) != 24:
        err(f"ids must be exactly lb-1..lb-24 (got {len(ids)} lines)")
    if in_scope != 18:
        err(f"{in_scope} in-scope queries, expected 18")
    if out_scope != 6:
        err(f"{out_scope} out-of-scope queries, expected 6")
    for t in ("clear", "messy", "terse"):
        if tag_counts[t] != 6:
            err(f"{tag_counts[t]} '{t}' queries, expected 6")
    for t in ("chit-chat", "other-product", "near_miss"):
        if tag_counts[t] != 2:
            err(f"{tag_counts[t]} '{t}' queries, expected 2")
    return tag_counts


def main():
    self_test()
    try:
        with open(CATALOG, encoding="utf-8") as f:
            catalog = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"cannot read {CATALOG}: {e}")
        return 1
    leaves, examples = check_catalog(catalog)
    try:
        with open(QUERIES, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        print(f"cannot read {QUERIES}: {e}")
        return 1
    check_queries(lines, leaves, examples)
    if errors:
        for e in errors:
            print(e)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
