#!/usr/bin/env python
"""Check legal.catalog.json and legal.queries.jsonl (run from this folder).

Catalog: node names/descriptions, unique sibling names, routers vs leaves, leaf depth
(2-3 under the root), leaf count, leaf schemas valid under JSON Schema 2020-12, only
known `format`s, `sensitive`/`examples` types, examples not copied from the queries.
Queries: ids, fields, every gold path is a leaf, args line up with gold, and every gold
argument object validates against its leaf schema with date / date-time / email
formats enforced strictly. Prints OK or the list of errors (exit status 1).
"""
import datetime
import json
import re
import sys
from pathlib import Path

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError

HERE = Path(__file__).resolve().parent
CATALOG = HERE / "legal.catalog.json"
QUERIES = HERE / "legal.queries.jsonl"

NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*$")
LEAF_DEPTHS = {2, 3}
LEAF_COUNT = (22, 24)
KNOWN_FORMATS = {"date", "date-time", "email"}
NODE_KEYS = {"name", "description", "children", "parameters", "sensitive", "examples"}

# ---- strict formats -------------------------------------------------------------
DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
DATETIME_RE = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
EMAIL_RE = re.compile(
    r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~\-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~\-]+)*"
    r"@([A-Za-z0-9]([A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}$")

checker = FormatChecker(formats=())


@checker.checks("date", raises=ValueError)
def _is_date(value):
    if not isinstance(value, str):
        return True
    if not DATE_RE.match(value):
        raise ValueError("not YYYY-MM-DD")
    datetime.date.fromisoformat(value)
    return True


@checker.checks("date-time", raises=ValueError)
def _is_datetime(value):
    if not isinstance(value, str):
        return True
    m = DATETIME_RE.match(value)
    if not m:
        raise ValueError("not an RFC 3339 date-time with offset")
    datetime.date.fromisoformat(m.group(1))
    hh, mm, ss = int(m.group(2)), int(m.group(3)), int(m.group(4))
    if hh > 23 or mm > 59 or ss > 60:
        raise ValueError("time out of range")
    off = m.group(6)
    if off not in ("Z", "z"):
        oh, om = int(off[1:3]), int(off[4:6])
        if oh > 23 or om > 59:
            raise ValueError("offset out of range")
    return True


@checker.checks("email", raises=ValueError)
def _is_email(value):
    if not isinstance(value, str):
        return True
    if len(value) > 254 or not EMAIL_RE.match(value) or len(value.split("@")[0]) > 64:
        raise ValueError("not an email address")
    return True


# ---- catalog ----------------------------------------------------------------------
def walk_formats(schema, where, errors):
    if isinstance(schema, dict):
        if "format" in schema and isinstance(schema["format"], str) \
                and schema["format"] not in KNOWN_FORMATS:
            errors.append(f"{where}: format {schema['format']!r} is not checked strictly")
        for k, v in schema.items():
            if k in ("enum", "const", "default", "examples"):
                continue
            walk_formats(v, where, errors)
    elif isinstance(schema, list):
        for v in schema:
            walk_formats(v, where, errors)


def check_catalog(root, errors):
    leaves = {}
    if not isinstance(root, dict):
        errors.append("catalog: root is not an object")
        return leaves
    if not root.get("children"):
        errors.append("catalog: root has no children")

    def visit(node, path, depth):
        where = "/".join(path) if path else "<root>"
        if not isinstance(node, dict):
            errors.append(f"{where}: node is not an object")
            return
        name = node.get("name")
        if not isinstance(name, str) or not NAME_RE.match(name):
            errors.append(f"{where}: bad name {name!r}")
        desc = node.get("description")
        if not isinstance(desc, str) or len(desc.strip()) < 20:
            errors.append(f"{where}: missing or too short description")
        extra = set(node) - NODE_KEYS
        if extra:
            errors.append(f"{where}: unexpected keys {sorted(extra)}")
        children = node.get("children")
        if children is not None:
            if not isinstance(children, list) or not children:
                errors.append(f"{where}: children must be a non-empty list")
                return
            for k in ("parameters", "sensitive", "examples"):
                if k in node:
                    errors.append(f"{where}: router has leaf key {k!r}")
            names = [c.get("name") for c in children if isinstance(c, dict)]
            dups = {n for n in names if names.count(n) > 1}
            if dups:
                errors.append(f"{where}: duplicate child names {sorted(dups)}")
            for c in children:
                cname = c.get("name") if isinstance(c, dict) else "?"
                visit(c, path + [str(cname)], depth + 1)
            return
        # leaf
        if depth not in LEAF_DEPTHS:
            errors.append(f"{where}: leaf at depth {depth}, expected {sorted(LEAF_DEPTHS)}")
        params = node.get("parameters")
        if params is not None:
            if not isinstance(params, dict) or params.get("type") != "object":
                errors.append(f"{where}: parameters must be an object schema")
            else:
                try:
                    Draft202012Validator.check_schema(params)
                except SchemaError as e:
                    errors.append(f"{where}: invalid schema: {e.message}")
                props = params.get("properties", {})
                for r in params.get("required", []):
                    if r not in props:
                        errors.append(f"{where}: required {r!r} not in properties")
                walk_formats(params, where, errors)
        if "sensitive" in node and not isinstance(node["sensitive"], bool):
            errors.append(f"{where}: sensitive must be a boolean")
        if "examples" in node:
            ex = node["examples"]
            if not isinstance(ex, list) or not all(isinstance(e, str) and e.strip() for e in ex):
                errors.append(f"{where}: examples must be a list of strings")
        leaves[where] = node

    if isinstance(root.get("name"), str) and isinstance(root.get("children"), list):
        visit(root, [], 0)
    lo, hi = LEAF_COUNT
    if not lo <= len(leaves) <= hi:
        errors.append(f"catalog: {len(leaves)} leaves, expected {lo}-{hi}")
    return leaves


# ---- queries ----------------------------------------------------------------------
def check_queries(lines, leaves, errors):
    ids = set()
    texts = []
    n_in = n_out = 0
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
        except json.JSONDecodeError as e:
            errors.append(f"queries line {i}: bad JSON: {e}")
            continue
        qid = q.get("id", f"line {i}")
        if not isinstance(q.get("id"), str):
            errors.append(f"{qid}: missing id")
        elif qid in ids:
            errors.append(f"{qid}: duplicate id")
        ids.add(qid)
        if not isinstance(q.get("query"), str) or not q["query"].strip():
            errors.append(f"{qid}: missing query text")
        else:
            texts.append(q["query"].strip().lower())
        tags = q.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            errors.append(f"{qid}: tags must be a list of strings")
        gold = q.get("gold")
        if not isinstance(gold, list) or not all(isinstance(g, str) for g in gold):
            errors.append(f"{qid}: gold must be a list of paths")
            continue
        args = q.get("args")
        if not gold:
            n_out += 1
            if args:
                errors.append(f"{qid}: out-of-scope query has args")
            if "out-of-scope" not in tags:
                errors.append(f"{qid}: empty gold but not tagged out-of-scope")
            continue
        n_in += 1
        if "out-of-scope" in tags:
            errors.append(f"{qid}: tagged out-of-scope but has gold")
        if args is not None and (not isinstance(args, list) or len(args) != len(gold)):
            errors.append(f"{qid}: args must be a list as long as gold")
            continue
        for j, path in enumerate(gold):
            leaf = leaves.get(path)
            if leaf is None:
                errors.append(f"{qid}: gold path {path!r} is not a leaf of the catalog")
                continue
            if args is None:
                continue
            a = args[j]
            if not isinstance(a, dict):
                errors.append(f"{qid}: args[{j}] is not an object")
                continue
            schema = leaf.get("parameters")
            if schema is None:
                if a:
                    errors.append(f"{qid}: {path} takes no arguments")
                continue
            v = Draft202012Validator(schema, format_checker=checker)
            for err in sorted(v.iter_errors(a), key=lambda e: list(e.absolute_path)):
                loc = "/".join(str(p) for p in err.absolute_path) or "<args>"
                errors.append(f"{qid}: {path}: {loc}: {err.message}")
    return n_in, n_out, texts


def main():
    errors = []
    try:
        root = json.loads(CATALOG.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        print(f"ERROR catalog: {e}")
        return 1
    leaves = check_catalog(root, errors)
    try:
        lines = QUERIES.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        print(f"ERROR queries: {e}")
        return 1
    n_in, n_out, texts = check_queries(lines, leaves, errors)
    for path, leaf in leaves.items():
        for ex in leaf.get("examples", []) or []:
            if isinstance(ex, str) and ex.strip().lower() in texts:
                errors.append(f"{path}: example copied from a test query: {ex!r}")
    if errors:
        for e in errors:
            print("ERROR", e)
        print(f"{len(errors)} error(s)")
        return 1
    print(f"OK ({len(leaves)} leaves, {n_in} in-scope, {n_out} out-of-scope queries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
