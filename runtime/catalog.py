"""Catalog files (../shared/data/FORMAT.md) to a validated `CapabilityTree`.

A catalog is one root node; a node with `children` is a router, one without is a leaf. Every
problem is collected with its node path, and a catalog with any problem loads nothing.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from stackroute.runtime.errors import CatalogError, Problem
from stackroute.runtime.grammar_budget import schema_budget_problem
from stackroute.runtime.schema_hazards import schema_hazard
from stackroute.runtime.schemas import schema_error
from stackroute.runtime.tree import CapabilityTree, Node

NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*")
# The completion states of every menu; no capability may be called like them (in any case:
# a sibling "done" beside DONE would only confuse the model).
RESERVED_NAMES = frozenset({"DONE", "BACK"})
KNOWN_KEYS = frozenset(
    {"name", "description", "children", "parameters", "sensitive", "handler", "metadata"}
)
HANDLER_PATTERN = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
# Control, format (bidi marks, zero-width), surrogate, private-use and unassigned characters.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})


@dataclass(frozen=True, kw_only=True)
class LoadLimits:
    """Bounds that keep a hostile catalog from costing unbounded time or memory."""

    max_depth: int = 12
    max_nodes: int = 200_000
    max_children: int = 10_000
    max_name_chars: int = 128
    max_description_chars: int = 20_000
    max_schema_chars: int = 100_000
    max_metadata_chars: int = 100_000  # a node's metadata (unknown keys included), as JSON


DEFAULT_LIMITS = LoadLimits()


def load_catalog(path: str | Path, *, limits: LoadLimits = DEFAULT_LIMITS) -> CapabilityTree:
    """Load a JSON or YAML catalog file; raise `CatalogError` listing every problem."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CatalogError([Problem("", f"cannot read catalog file {str(p)!r}: {e}")]) from e
    return parse_catalog_text(text, fmt=catalog_format(p), limits=limits)


def parse_catalog_text(
    text: str, *, fmt: str = "json", limits: LoadLimits = DEFAULT_LIMITS
) -> CapabilityTree:
    """Parse catalog text (`fmt` is "json" or "yaml")."""
    return build_tree(parse_catalog_document(text, fmt=fmt), limits=limits)


def parse_catalog_document(text: str, *, fmt: str = "json") -> Any:
    """The document in catalog text, not yet validated: the one parser every catalog reader
    uses. YAML anchors and aliases are refused: a few bytes of aliases can stand for a tree
    many times the size of the text, and every copy would be validated again."""
    try:
        if fmt == "yaml":
            return yaml.load(text, Loader=_CatalogYamlLoader)
        if json_nesting(text) > MAX_JSON_NESTING:
            raise RecursionError  # the same answer on every Python (3.13's parser goes deeper)
        return json.loads(text)
    except RecursionError as e:
        raise CatalogError([Problem("", "document nested too deeply to parse")]) from e
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise CatalogError([Problem("", f"not valid {fmt.upper()}: {e}")]) from e


MAX_JSON_NESTING = 512  # arrays and objects inside each other; real catalogs stay under 50
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def json_nesting(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON text (brackets inside strings do not
    count), without parsing it.

    >>> json_nesting('{"a": [1, {"b": "]]]"}]}')
    3
    """
    depth = deepest = 0
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest


def catalog_format(path: str | Path) -> str:
    """"yaml" for a `.yaml`/`.yml` file, else "json"."""
    return "yaml" if Path(path).suffix.lower() in {".yaml", ".yml"} else "json"


class _CatalogYamlLoader(yaml.SafeLoader):
    """YAML's safe loader without anchors and aliases (see `parse_catalog_document`)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            line = event.start_mark.line + 1 if event.start_mark is not None else "?"
            raise CatalogError([Problem("", f"YAML anchors and aliases are not allowed in a "
                                            f"catalog (line {line}): write each node out")])
        return super().compose_node(parent, index)


def build_tree(data: Any, *, limits: LoadLimits = DEFAULT_LIMITS) -> CapabilityTree:
    """Validate a catalog document (already parsed) and build the immutable tree."""
    if not isinstance(data, Mapping):
        raise CatalogError(
            [Problem("", f"expected the catalog to be an object (the root node), "
                         f"got {type(data).__name__}")]
        )
    builder = _Builder(limits)
    root = builder.node(data, (), is_root=True)
    if builder.problems:
        raise CatalogError(builder.problems)
    assert root is not None
    return CapabilityTree(root)


class _Builder:
    def __init__(self, limits: LoadLimits) -> None:
        self.limits = limits
        self.problems: list[Problem] = []
        self.num_nodes = 0
        # A schema's problem by its canonical JSON: each distinct schema is checked once (the
        # metaschema check costs milliseconds, and big catalogs repeat schemas).
        self._schema_problems: dict[str, str | None] = {}

    def fail(self, path: tuple[str, ...], message: str) -> None:
        self.problems.append(Problem("/".join(path), message))

    def node(self, data: Any, path: tuple[str, ...], *, is_root: bool = False) -> Node | None:
        self.num_nodes += 1
        if self.num_nodes > self.limits.max_nodes:
            if self.num_nodes == self.limits.max_nodes + 1:
                self.fail(path, f"catalog has more than {self.limits.max_nodes} nodes")
            return None
        if not isinstance(data, Mapping):
            self.fail(path, f"expected a node object, got {type(data).__name__}")
            return None
        name = data.get("name")
        if not isinstance(name, str) or not name:
            self.fail(path, f"'name' must be a non-empty string, got {name!r}")
            name = "?"
        elif not is_root:
            self._check_name(path, name)
        else:
            self._check_root_name(name)
        description = data.get("description", "")
        if not isinstance(description, str):
            self.fail(path, f"'description' must be a string, got {type(description).__name__}")
            description = ""
        elif len(description) > self.limits.max_description_chars:
            self.fail(path, f"description has {len(description)} characters, "
                            f"more than the limit {self.limits.max_description_chars}")
        sensitive = data.get("sensitive", False)
        if not isinstance(sensitive, bool):
            self.fail(path, f"'sensitive' must be true or false, got {sensitive!r}")
            sensitive = False
        handler = data.get("handler")
        if handler is not None and (
            not isinstance(handler, str) or not HANDLER_PATTERN.fullmatch(handler)
        ):
            self.fail(path, f"'handler' must be an import path 'module:function', got {handler!r}")
            handler = None
        metadata = {k: v for k, v in data.items() if k not in KNOWN_KEYS}
        extra_meta = data.get("metadata")
        if isinstance(extra_meta, Mapping):
            metadata.update(extra_meta)
        elif extra_meta is not None:
            self.fail(path, f"'metadata' must be an object, got {type(extra_meta).__name__}")
        if metadata:
            problem = _size_problem(metadata, self.limits.max_metadata_chars)
            if problem is not None:
                self.fail(path, f"metadata (with unknown keys) {problem}")
                metadata = {}

        if "children" in data:
            return self._router(data, path, name, description, sensitive, handler, metadata)
        parameters = self._parameters(path, data.get("parameters"))
        if is_root:
            self.fail(path, "the root must be a router with 'children'")
        return Node(
            name=name, path=path, description=description, parameters=parameters,
            sensitive=sensitive, handler=handler, metadata=metadata,
        )

    def _router(
        self, data: Mapping[str, Any], path: tuple[str, ...], name: str, description: str,
        sensitive: bool, handler: str | None, metadata: dict[str, Any],
    ) -> Node | None:
        children_data = data["children"]
        if not isinstance(children_data, list):
            self.fail(path, f"'children' must be a list, got {type(children_data).__name__}")
            return None
        if not children_data:
            self.fail(path, "empty router: 'children' is an empty list (a router needs at "
                            "least one child; drop 'children' to make it a leaf)")
            return None
        if len(children_data) > self.limits.max_children:
            self.fail(path, f"router has {len(children_data)} children, more than the limit "
                            f"{self.limits.max_children}")
            return None
        if "parameters" in data:
            self.fail(path, "a router cannot have 'parameters' (only leaves take arguments)")
        if handler is not None:
            self.fail(path, "a router cannot have a 'handler' (only leaves execute)")
        if sensitive:
            self.fail(path, "'sensitive' applies to leaves only")
        if len(path) >= self.limits.max_depth:
            self.fail(path, f"tree deeper than the limit of {self.limits.max_depth} levels")
            return None
        children: list[Node] = []
        seen: dict[str, int] = {}
        for i, child_data in enumerate(children_data):
            child_name = child_data.get("name") if isinstance(child_data, Mapping) else None
            label = child_name if isinstance(child_name, str) and child_name else f"[{i}]"
            if isinstance(child_name, str) and child_name:
                if child_name in seen:
                    self.fail((*path, label), f"duplicate sibling name {child_name!r} "
                                                f"(also child #{seen[child_name]})")
                seen.setdefault(child_name, i)
            child = self.node(child_data, (*path, label))
            if child is not None:
                children.append(child)
        return Node(
            name=name, path=path, description=description, children=tuple(children),
            metadata=metadata,
        )

    def _check_name(self, path: tuple[str, ...], name: str) -> None:
        if len(name) > self.limits.max_name_chars:
            self.fail(path, f"name has {len(name)} characters, more than the limit "
                            f"{self.limits.max_name_chars}")
        if not NAME_PATTERN.fullmatch(name):
            self.fail(path, f"bad name {name!r}: expected a letter then letters, digits, "
                            "'_' or '-'")
        if name.upper() in RESERVED_NAMES:
            self.fail(path, f"reserved name {name!r}: DONE and BACK are completion states")

    def _check_root_name(self, name: str) -> None:
        """The root's name is free text (it is no menu option), but it is shown in listings
        and logs: bounded, and without control or invisible characters (NUL, bidi marks)."""
        if len(name) > self.limits.max_name_chars:
            self.fail((), f"name has {len(name)} characters, more than the limit "
                          f"{self.limits.max_name_chars}")
        hidden = sorted({f"U+{ord(c):04X}" for c in name
                         if unicodedata.category(c) in _HIDDEN_CATEGORIES})
        if hidden:
            self.fail((), f"the root's name has control or invisible characters "
                          f"({', '.join(hidden[:5])})")

    def _parameters(self, path: tuple[str, ...], schema: Any) -> Mapping[str, Any] | None:
        if schema is None:
            return None
        if not isinstance(schema, Mapping):
            self.fail(path, f"'parameters' must be a JSON Schema object, got "
                            f"{type(schema).__name__}")
            return None
        problem = _size_problem(schema, self.limits.max_schema_chars)
        if problem is not None:
            self.fail(path, f"'parameters' schema {problem}")
            return None
        problem = self._schema_problem(schema)
        if problem is not None:
            self.fail(path, problem)
            return None
        if schema.get("type", "object") != "object":
            self.fail(path, f"'parameters' must describe an object (type 'object'), got type "
                            f"{schema.get('type')!r}")
            return None
        return schema


    def _schema_problem(self, schema: Mapping[str, Any]) -> str | None:
        try:
            key = json.dumps(schema, sort_keys=True, ensure_ascii=False, default=repr)
        except (TypeError, ValueError):  # keys of mixed types (YAML): checked, not cached
            key = ""
        if not key or key not in self._schema_problems:
            error = schema_error(schema)
            hazard = None if error is not None else (
                schema_hazard(schema) or schema_budget_problem(schema))
            self._schema_problems[key] = (
                f"invalid JSON Schema {error}" if error is not None
                else None if hazard is None else f"unsafe 'parameters' schema: {hazard}")
        return self._schema_problems[key]


def _size_problem(value: Any, max_chars: int) -> str | None:
    """Why `value` is not JSON of at most `max_chars` characters, or None. Encoding stops at
    the limit: a YAML document of nested aliases is small as text but exponential as JSON."""
    encoder = json.JSONEncoder(ensure_ascii=False, check_circular=True)
    num_chars = 0
    try:
        for chunk in encoder.iterencode(value):
            num_chars += len(chunk)
            if num_chars > max_chars:
                return f"is larger than the limit of {max_chars} characters as JSON"
    except (TypeError, ValueError, RecursionError) as e:
        return f"is not JSON-serialisable: {e}"
    return None
