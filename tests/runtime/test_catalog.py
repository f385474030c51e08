"""Catalog loading and validation (tier a): tables of catalogs and the exact problems found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from machine_kit import BANK_CATALOG, bank_tree
from stackroute.runtime.catalog import LoadLimits, build_tree, load_catalog, parse_catalog_text
from stackroute.runtime.errors import CatalogError, InputError
from stackroute.runtime.tree import CapabilityTree


def root(*children: Any, **extra: Any) -> dict[str, Any]:
    return {"name": "root", "description": "r", "children": list(children), **extra}


def leaf(name: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": "d", **extra}


def router(name: str, *children: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": "d", "children": list(children), **extra}


NAME_RULE = "expected a letter then letters, digits, '_' or '-'"
RESERVED = "DONE and BACK are completion states"
HANDLER_RULE = "'handler' must be an import path 'module:function'"

# (id, catalog document, exact problems as (node path, message))
INVALID_CATALOGS: list[tuple[str, Any, list[tuple[str, str]]]] = [
    ("name starts with a digit", root(leaf("1abc")),
     [("1abc", f"bad name '1abc': {NAME_RULE}")]),
    ("name with a space", root(router("pay", leaf("send money"))),
     [("pay/send money", f"bad name 'send money': {NAME_RULE}")]),
    ("name with a dot", root(leaf("a.b")), [("a.b", f"bad name 'a.b': {NAME_RULE}")]),
    ("empty name", root(leaf("")), [("[0]", "'name' must be a non-empty string, got ''")]),
    ("missing name", root({"description": "x"}),
     [("[0]", "'name' must be a non-empty string, got None")]),
    ("name not a string", root(leaf(7)), [("[0]", "'name' must be a non-empty string, got 7")]),
    ("duplicate siblings", root(leaf("a"), leaf("b"), leaf("a")),
     [("a", "duplicate sibling name 'a' (also child #0)")]),
    ("duplicate router and leaf", root(router("a", leaf("x")), leaf("a")),
     [("a", "duplicate sibling name 'a' (also child #0)")]),
    ("reserved DONE", root(leaf("DONE")), [("DONE", f"reserved name 'DONE': {RESERVED}")]),
    ("reserved BACK", root(leaf("BACK")), [("BACK", f"reserved name 'BACK': {RESERVED}")]),
    ("reserved done, lower case", root(router("p", leaf("done"))),
     [("p/done", f"reserved name 'done': {RESERVED}")]),
    ("reserved Back as a router", root(router("Back", leaf("x"))),
     [("Back", f"reserved name 'Back': {RESERVED}")]),
    ("empty router", root(router("p")),
     [("p", "empty router: 'children' is an empty list (a router needs at least one child; "
            "drop 'children' to make it a leaf)")]),
    ("children not a list", root({"name": "p", "children": {"a": 1}}),
     [("p", "'children' must be a list, got dict")]),
    ("child not an object", root("a"), [("[0]", "expected a node object, got str")]),
    ("invalid JSON Schema", root(router("p", leaf("x", parameters={"type": "strin"}))),
     [("p/x", "invalid JSON Schema at type: 'strin' is not valid under any of the given "
              "schemas")]),
    ("invalid nested JSON Schema",
     root(leaf("x", parameters={"type": "object",
                                "properties": {"n": {"type": "integer", "minimum": "0"}}})),
     [("x", "invalid JSON Schema at properties/n/minimum: '0' is not of type 'number'")]),
    ("invalid regex in a schema",
     root(leaf("x", parameters={"type": "object",
                                "properties": {"a": {"type": "string", "pattern": "("}}})),
     [("x", "invalid JSON Schema at properties/a/pattern: '(' is not a 'regex'")]),
    ("parameters of type string", root(leaf("x", parameters={"type": "string"})),
     [("x", "'parameters' must describe an object (type 'object'), got type 'string'")]),
    ("parameters a list", root(leaf("x", parameters=[1])),
     [("x", "'parameters' must be a JSON Schema object, got list")]),
    ("parameters a boolean schema", root(leaf("x", parameters=True)),
     [("x", "'parameters' must be a JSON Schema object, got bool")]),
    ("router with parameters", root(router("p", leaf("x"), parameters={"type": "object"})),
     [("p", "a router cannot have 'parameters' (only leaves take arguments)")]),
    ("router with a handler and sensitive", root(router("p", leaf("x"), handler="m:f",
                                                        sensitive=True)),
     [("p", "a router cannot have a 'handler' (only leaves execute)"),
      ("p", "'sensitive' applies to leaves only")]),
    ("handler without a colon", root(leaf("a", handler="os.system")),
     [("a", f"{HANDLER_RULE}, got 'os.system'")]),
    ("handler with two colons", root(leaf("a", handler="a:b:c")),
     [("a", f"{HANDLER_RULE}, got 'a:b:c'")]),
    ("handler with code in it", root(leaf("a", handler="os:system('rm -rf /')")),
     [("a", f"{HANDLER_RULE}, got \"os:system('rm -rf /')\"")]),
    ("handler not a string", root(leaf("a", handler=5)), [("a", f"{HANDLER_RULE}, got 5")]),
    ("description not a string", root(leaf("x", description=3)),
     [("x", "'description' must be a string, got int")]),
    ("sensitive not a boolean", root(leaf("x", sensitive="yes")),
     [("x", "'sensitive' must be true or false, got 'yes'")]),
    ("metadata not an object", root(leaf("x", metadata=[1])),
     [("x", "'metadata' must be an object, got list")]),
    ("root is a leaf", {"name": "r"}, [("", "the root must be a router with 'children'")]),
    ("root is a list", [{"name": "r"}],
     [("", "expected the catalog to be an object (the root node), got list")]),
    ("root is null", None,
     [("", "expected the catalog to be an object (the root node), got NoneType")]),
    ("every problem is collected",
     root(leaf("ok"), leaf("BACK"), router("p", leaf("x y"), leaf("z", parameters={"type": 1}))),
     [("BACK", f"reserved name 'BACK': {RESERVED}"),
      ("p/x y", f"bad name 'x y': {NAME_RULE}"),
      ("p/z", "invalid JSON Schema at type: 1 is not valid under any of the given schemas")]),
]


@pytest.mark.parametrize(("doc", "expected"), [(c[1], c[2]) for c in INVALID_CATALOGS],
                         ids=[c[0] for c in INVALID_CATALOGS])
def test_invalid_catalogs_name_every_problem_and_load_nothing(
        doc: Any, expected: list[tuple[str, str]]) -> None:
    with pytest.raises(CatalogError) as info:
        build_tree(doc)
    assert [(p.path, p.message) for p in info.value.problems] == expected
    assert isinstance(info.value, InputError)
    assert info.value.code == "invalid_catalog"


# (id, limits, catalog document, exact problems)
OVER_LIMITS: list[tuple[str, LoadLimits, Any, list[tuple[str, str]]]] = [
    ("depth over the limit", LoadLimits(max_depth=2),
     root(router("a", router("b", leaf("c")))),
     [("a/b", "tree deeper than the limit of 2 levels")]),
    ("too many nodes", LoadLimits(max_nodes=3), root(leaf("a"), leaf("b"), leaf("c"), leaf("d")),
     [("c", "catalog has more than 3 nodes")]),
    ("too many children", LoadLimits(max_children=2), root(leaf("a"), leaf("b"), leaf("c")),
     [("", "router has 3 children, more than the limit 2")]),
    ("name too long", LoadLimits(max_name_chars=4), root(leaf("abcde")),
     [("abcde", "name has 5 characters, more than the limit 4")]),
    ("description too long", LoadLimits(max_description_chars=4),
     root(leaf("a", description="12345")),
     [("a", "description has 5 characters, more than the limit 4")]),
    ("schema too large", LoadLimits(max_schema_chars=20),
     root(leaf("a", parameters={"type": "object", "properties": {"x": {"type": "string"}}})),
     [("a", "'parameters' schema is larger than the limit of 20 characters as JSON")]),
]


@pytest.mark.parametrize(("limits", "doc", "expected"), [c[1:] for c in OVER_LIMITS],
                         ids=[c[0] for c in OVER_LIMITS])
def test_load_limits(limits: LoadLimits, doc: Any, expected: list[tuple[str, str]]) -> None:
    with pytest.raises(CatalogError) as info:
        build_tree(doc, limits=limits)
    assert [(p.path, p.message) for p in info.value.problems] == expected


def test_depth_at_the_limit_loads() -> None:
    tree = build_tree(root(router("a", leaf("b"))), limits=LoadLimits(max_depth=2))
    assert tree.stats().depth == 2


def test_default_depth_limit_is_twelve_levels() -> None:
    doc: dict[str, Any] = leaf("x")
    for i in range(12, 0, -1):
        doc = router(f"n{i}", doc)
    with pytest.raises(CatalogError) as info:
        build_tree(root(doc))
    assert [(p.path, p.message) for p in info.value.problems] == [
        ("n1/n2/n3/n4/n5/n6/n7/n8/n9/n10/n11/n12",
         "tree deeper than the limit of 12 levels")]


# (id, text, format, exact problems)
BAD_TEXT: list[tuple[str, str, str, list[tuple[str, str]]]] = [
    ("truncated JSON", "[1,", "json",
     [("", "not valid JSON: Expecting value: line 1 column 4 (char 3)")]),
    ("JSON list", "[1]", "json",
     [("", "expected the catalog to be an object (the root node), got list")]),
    ("empty YAML", "", "yaml",
     [("", "expected the catalog to be an object (the root node), got NoneType")]),
    ("YAML scalar", "just text", "yaml",
     [("", "expected the catalog to be an object (the root node), got str")]),
    ("deeply nested JSON", "[" * 5_000 + "]" * 5_000, "json",
     [("", "document nested too deeply to parse")]),
    ("deeply nested JSON object", '{"name": ' * 5_000, "json",
     [("", "document nested too deeply to parse")]),
    ("deeply nested YAML", "a: " + "[" * 1_000, "yaml",
     [("", "document nested too deeply to parse")]),
]


@pytest.mark.parametrize(("text", "fmt", "expected"), [c[1:] for c in BAD_TEXT],
                         ids=[c[0] for c in BAD_TEXT])
def test_bad_catalog_text(text: str, fmt: str, expected: list[tuple[str, str]]) -> None:
    with pytest.raises(CatalogError) as info:
        parse_catalog_text(text, fmt=fmt)
    assert [(p.path, p.message) for p in info.value.problems] == expected


def test_invalid_yaml_says_so() -> None:
    with pytest.raises(CatalogError) as info:
        parse_catalog_text("a: [1", fmt="yaml")
    [problem] = info.value.problems
    assert problem.path == ""
    assert problem.message.startswith("not valid YAML: while parsing a flow sequence")


def test_yaml_with_non_string_schema_keys_is_checked_not_crashed() -> None:
    text = ("name: r\nchildren:\n  - name: a\n    description: d\n"
            "    parameters: {type: object, 1: x}\n")
    tree = parse_catalog_text(text, fmt="yaml")  # the metaschema ignores unknown keys
    assert tree.node("a").parameters == {"type": "object", 1: "x"}


@pytest.mark.parametrize(("levels", "expected"), [
    (150, "invalid JSON Schema nested too deeply"),
    (5_000, "'parameters' schema is not JSON-serialisable: maximum recursion depth exceeded"),
])
def test_deeply_nested_parameters_are_refused_not_crashed(levels: int, expected: str) -> None:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    with pytest.raises(CatalogError) as info:
        build_tree(root(leaf("x", parameters=schema)))
    [problem] = info.value.problems
    assert problem.path == "x"
    assert problem.message.startswith(expected)


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(CatalogError) as info:
        load_catalog(tmp_path / "missing.json")
    [problem] = info.value.problems
    assert problem.path == ""
    assert problem.message.startswith("cannot read catalog file ")


def test_a_catalog_with_any_error_loads_nothing(tmp_path: Path) -> None:
    doc = json.loads(json.dumps(BANK_CATALOG))
    doc["children"][1]["children"][1]["children"][0]["parameters"]["type"] = "nope"
    path = tmp_path / "bank.catalog.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(CatalogError) as info:
        load_catalog(path)
    assert [p.path for p in info.value.problems] == ["accounts/statements/monthly"]
    assert "1 problem(s)" in str(info.value)
    assert "accounts/statements/monthly: invalid JSON Schema" in str(info.value)


def test_error_message_lists_five_problems_then_counts() -> None:
    with pytest.raises(CatalogError) as info:
        build_tree(root(*(leaf(f"{i}x") for i in range(7))))
    message = str(info.value)
    assert message.startswith("catalog has 7 problem(s): 0x: bad name '0x'")
    assert message.endswith("(and 2 more)")


def test_yaml_and_json_files_load_the_same_tree(tmp_path: Path) -> None:
    json_path = tmp_path / "bank.catalog.json"
    yaml_path = tmp_path / "bank.catalog.yaml"
    yml_path = tmp_path / "bank.yml"
    json_path.write_text(json.dumps(BANK_CATALOG))
    yaml_path.write_text(yaml.safe_dump(BANK_CATALOG))
    yml_path.write_text(yaml.safe_dump(BANK_CATALOG))
    from_json = load_catalog(json_path)
    assert load_catalog(yaml_path).root == from_json.root
    assert load_catalog(yml_path).root == from_json.root
    assert from_json.root == bank_tree().root


def test_unknown_keys_are_kept_as_metadata() -> None:
    tree = build_tree(root(
        leaf("a", original_name="A!", returns={"type": "string"},
             metadata={"owner": "team-x"}),
        router("p", leaf("b"), tags=["x"]),
        source="unit test",
    ))
    assert tree.node("a").metadata == {"original_name": "A!", "returns": {"type": "string"},
                                       "owner": "team-x"}
    assert tree.node("p").metadata == {"tags": ["x"]}
    assert tree.root.metadata == {"source": "unit test"}
    assert tree.node("p/b").metadata == {}


def test_tree_lookups() -> None:
    tree = bank_tree()
    monthly = tree.node("accounts/statements/monthly")
    assert monthly.path == ("accounts", "statements", "monthly")
    assert monthly.is_leaf and monthly.depth == 3
    assert tree.node(("accounts", "statements")).child_names == ("monthly",)
    assert tree.node("/payments/").name == "payments"
    assert tree.node("") is tree.root
    assert tree.get("payments/nope") is None
    assert "payments/send_money" in tree and "nope" not in tree
    with pytest.raises(KeyError, match="no node at path 'nope' in catalog 'bank'"):
        tree.node("nope")
    assert tree.node("payments/send_money").sensitive
    assert sorted(n.path_str for n in tree.leaves()) == [
        "accounts/open_account", "accounts/statements/monthly", "payments/balance",
        "payments/send_money", "weather"]
    assert sorted(n.path_str for n in tree.routers()) == [
        "", "accounts", "accounts/statements", "payments"]


def test_bank_stats_exact() -> None:
    stats = bank_tree().stats()
    assert stats.to_dict() == {
        "num_leaves": 5, "num_routers": 4, "depth": 3, "max_menu": 3, "largest_menu_path": "",
        "branching_by_level": [
            {"level": 0.0, "routers": 1.0, "min": 3.0, "median": 3.0, "mean": 3.0, "max": 3.0},
            {"level": 1.0, "routers": 2.0, "min": 2.0, "median": 2.0, "mean": 2.0, "max": 2.0},
            {"level": 2.0, "routers": 1.0, "min": 1.0, "median": 1.0, "mean": 1.0, "max": 1.0},
        ],
    }


def test_seal_tools_loads_with_the_stats_of_its_readme(seal_tools: CapabilityTree) -> None:
    stats = seal_tools.stats()
    assert (stats.num_leaves, stats.num_routers, stats.depth, stats.max_menu) == (
        4076, 2423, 3, 146)
    assert stats.largest_menu_path == ""
    assert [b["routers"] for b in stats.branching_by_level] == [1.0, 146.0, 2276.0]
    leaf_node = next(seal_tools.leaves())
    assert leaf_node.depth == 3 and leaf_node.parameters is not None
    assert "original_name" in leaf_node.metadata


# -- issue 15.3: YAML aliases multiply validation cost ---------------------------------------
ALIASED = """
name: bank
children:
  - name: payments
    children:
      - name: send
        parameters: &schema
          type: object
          properties: {amount: {type: number}}
      - name: refund
        parameters: *schema
"""


def test_yaml_anchors_and_aliases_are_refused() -> None:
    with pytest.raises(CatalogError, match="anchors and aliases") as caught:
        parse_catalog_text(ALIASED, fmt="yaml")
    assert "line 7" in str(caught.value)  # where the anchor is, so the author can fix it


def test_each_distinct_schema_is_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import stackroute.runtime.catalog as catalog_module

    checked: list[Any] = []
    real = catalog_module.schema_error

    def counting(schema: Any) -> Any:
        checked.append(schema)
        return real(schema)

    monkeypatch.setattr(catalog_module, "schema_error", counting)
    schema = {"type": "object", "properties": {"q": {"type": "string", "pattern": "^a+$"}}}
    doc = {"name": "r", "children": [{"name": "g", "children": [
        {"name": f"leaf{i}", "parameters": dict(schema)} for i in range(8)]}]}
    tree = build_tree(doc)
    assert sum(1 for _ in tree.leaves()) == 8
    assert len(checked) == 1
