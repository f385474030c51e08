"""Register capabilities from Python: a decorator binds a leaf path to a handler.

    caps = Capabilities("bank", "Banking tools")
    caps.router("payments", "Send, receive and track payments.")

    @caps.leaf("payments/send_money", sensitive=True)
    def send_money(payee: str, amount: float) -> dict:
        "Send money to a contact or an account."
        ...

    tree, handlers = caps.build()

The parameter schema comes from the type hints unless given explicitly.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

from stackroute.runtime.catalog import LoadLimits, build_tree
from stackroute.runtime.errors import CatalogError, Problem
from stackroute.runtime.handlers import HandlerTable
from stackroute.runtime.tree import CapabilityTree

F = TypeVar("F", bound=Callable[..., Any])
_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean"}


class Capabilities:
    def __init__(self, name: str = "root", description: str = "") -> None:
        self.name = name
        self.description = description
        self._routers: dict[str, str] = {}
        self._leaves: dict[str, dict[str, Any]] = {}
        self._handlers: dict[str, Callable[..., Any]] = {}

    def router(self, path: str, description: str) -> None:
        self._routers[path.strip("/")] = description

    def leaf(self, path: str, *, description: str | None = None,
             parameters: Mapping[str, Any] | None = None,
             sensitive: bool = False) -> Callable[[F], F]:
        def bind(fn: F) -> F:
            key = path.strip("/")
            if key in self._leaves:
                raise CatalogError([Problem(key, "leaf registered twice")])
            doc = inspect.getdoc(fn) or ""
            self._leaves[key] = {
                "description": description if description is not None else doc.split("\n\n")[0],
                "parameters": dict(parameters) if parameters is not None else schema_from_hints(fn),
                "sensitive": sensitive,
            }
            self._handlers[key] = fn
            return fn
        return bind

    def to_catalog(self) -> dict[str, Any]:
        """The registered capabilities as a catalog document (FORMAT.md)."""
        root: dict[str, Any] = {"name": self.name, "description": self.description,
                                "children": []}
        index: dict[str, dict[str, Any]] = {"": root}

        def router_node(path: str) -> dict[str, Any]:
            if path in index:
                return index[path]
            parent_path, _, name = path.rpartition("/")
            node = {"name": name, "description": self._routers.get(path, ""), "children": []}
            router_node(parent_path)["children"].append(node)
            index[path] = node
            return node

        for path in self._routers:
            router_node(path)
        for path, spec in self._leaves.items():
            parent_path, _, name = path.rpartition("/")
            leaf = {"name": name, **spec}
            if not spec["sensitive"]:
                del leaf["sensitive"]
            router_node(parent_path)["children"].append(leaf)
        return root

    def build(self, *, limits: LoadLimits | None = None) -> tuple[CapabilityTree, HandlerTable]:
        tree = build_tree(self.to_catalog(), **({"limits": limits} if limits else {}))
        return tree, HandlerTable(self._handlers)


def schema_from_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """A JSON Schema object for a function's keyword parameters, from its type hints."""
    hints = typing.get_type_hints(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(name, Any)
        # Only a default makes an argument omittable: `x: str | None` with no default must still
        # be passed, or the handler call fails with a TypeError.
        schema, _ = _type_schema(annotation)
        if param.default is inspect.Parameter.empty:
            required.append(name)
        elif isinstance(param.default, str | int | float | bool):
            schema["default"] = param.default
        properties[name] = schema
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    return out


def _type_schema(annotation: Any) -> tuple[dict[str, Any], bool]:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        inner, _ = _type_schema(rest[0]) if len(rest) == 1 else ({}, False)
        return inner, type(None) in args
    if annotation in _SIMPLE:
        return {"type": _SIMPLE[annotation]}, False
    if origin is Literal:
        return {"enum": list(args)}, False
    if origin in (list, tuple, set, frozenset) or annotation in (list, tuple):
        item = _type_schema(args[0])[0] if args else {}
        return {"type": "array", "items": item} if item else {"type": "array"}, False
    if origin is dict or annotation is dict:
        return {"type": "object"}, False
    return {}, False
