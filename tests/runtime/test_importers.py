"""OpenAI `tools` and MCP `tools/list` to catalogs (tier a)."""

from __future__ import annotations

from typing import Any

import pytest
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.errors import CatalogError
from stackroute.runtime.importers import from_mcp_tools, from_openai_tools

OBJ = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}


def fn(name: str, description: str = "", parameters: Any = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "description": description, **extra}
    if parameters is not None:
        body["parameters"] = parameters
    return {"type": "function", "function": body}


def test_openai_tools_dotted_slashed_and_namespace_become_branches() -> None:
    tools = [
        fn("billing.invoices.create", "Create an invoice.", OBJ),
        fn("billing.invoices.list", "List invoices."),
        fn("billing/refund", "Refund a payment.", OBJ),
        fn("weather", "Weather for a city."),
        fn("search", "Search the docs.", namespace="docs"),
        {"name": "bare", "description": "A tool without the function wrapper."},
    ]
    doc = from_openai_tools(tools, name="api", description="Company API")
    assert doc == {
        "name": "api", "description": "Company API",
        "children": [
            {"name": "billing", "description": "Tools under billing: invoices, refund",
             "children": [
                 {"name": "invoices",
                  "description": "Tools under billing.invoices: create, list",
                  "children": [
                      {"name": "create", "description": "Create an invoice.", "parameters": OBJ,
                       "original_name": "billing.invoices.create"},
                      {"name": "list", "description": "List invoices.",
                       "original_name": "billing.invoices.list"},
                  ]},
                 {"name": "refund", "description": "Refund a payment.", "parameters": OBJ,
                  "original_name": "billing/refund"},
             ]},
            {"name": "weather", "description": "Weather for a city."},
            {"name": "docs", "description": "Tools under docs: search",
             "children": [{"name": "search", "description": "Search the docs."}]},
            {"name": "bare", "description": "A tool without the function wrapper."},
        ],
    }
    tree = build_tree(doc)
    assert sorted(leaf.path_str for leaf in tree.leaves()) == [
        "bare", "billing/invoices/create", "billing/invoices/list", "billing/refund",
        "docs/search", "weather"]
    assert tree.node("billing/invoices/create").metadata == {
        "original_name": "billing.invoices.create"}


def test_openai_names_are_cleaned_and_keep_the_original() -> None:
    doc = from_openai_tools([fn("2fa.send code!"), fn("__x__")])
    assert [(c["name"], c.get("original_name")) for c in doc["children"]] == [
        ("x_2fa", None), ("x", "__x__")]
    assert doc["children"][0]["children"] == [
        {"name": "send_code", "description": "", "original_name": "2fa.send code!"}]
    build_tree(doc)


@pytest.mark.parametrize("bad", [[{"type": "function"}], [{"function": {"name": 3}}], ["x"]])
def test_openai_malformed_entries(bad: list[Any]) -> None:
    with pytest.raises(CatalogError) as info:
        from_openai_tools(bad)
    assert [p.path for p in info.value.problems] == ["[0]"]


def test_mcp_tools_list_destructive_hint_marks_sensitive() -> None:
    result = {"tools": [
        {"name": "fs/read_file", "description": "Read a file.", "inputSchema": OBJ,
         "annotations": {"readOnlyHint": True}},
        {"name": "fs/delete_file", "description": "Delete a file.", "inputSchema": OBJ,
         "annotations": {"destructiveHint": True}},
        {"name": "fs.move", "description": "Move a file.",
         "annotations": {"destructiveHint": True, "readOnlyHint": True}},
        {"name": "ping", "namespace": "net.tools", "description": "Ping a host."},
        {"name": "now"},
    ]}
    doc = from_mcp_tools(result, name="mcp")
    tree = build_tree(doc)
    assert sorted((leaf.path_str, leaf.sensitive) for leaf in tree.leaves()) == [
        ("fs/delete_file", True), ("fs/move", False), ("fs/read_file", False),
        ("net/tools/ping", True), ("now", True)]  # MCP: unannotated tools may be destructive
    assert tree.node("fs/read_file").parameters == OBJ
    assert tree.node("fs/read_file").metadata == {"original_name": "fs/read_file"}
    assert tree.node("net").description == "Tools under net: tools"
    # a bare list of tools is accepted too
    assert from_mcp_tools(result["tools"], name="mcp") == doc


def test_mcp_malformed_entry() -> None:
    with pytest.raises(CatalogError) as info:
        from_mcp_tools({"tools": [{"name": "ok"}, {"description": "no name"}]})
    assert [(p.path, p.message) for p in info.value.problems] == [
        ("[1]", "expected an MCP tool with a 'name'")]


def test_imported_name_collisions_are_reported_by_the_loader() -> None:
    doc = from_openai_tools([fn("a.b"), fn("a"), fn("DONE")])
    with pytest.raises(CatalogError) as info:
        build_tree(doc)
    assert [p.path for p in info.value.problems] == ["a", "DONE"]
