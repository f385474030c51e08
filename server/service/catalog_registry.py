"""The service's loaded catalogs: validated, compiled for the engine, persisted in the store.

A catalog whose leaves name handlers outside the operator's `allowed_handler_modules` is
refused (422, by leaf path), so a listed catalog never names code the operator did not allow.

A catalog's id is a slug of its root name plus the SHA-256 of its content (the parsed
document, so the same catalog in JSON or YAML, or with other whitespace, gets the same id):
uploading the same catalog twice is harmless and returns the same id. A match is checked
against the stored document, so no upload can stand in for another catalog (409).

Over a shared store (several instances on one PostgreSQL) a catalog uploaded to one instance
is usable on all: an instance that is asked for an id it has not loaded looks it up in the
store and compiles it then (once per instance, keyed by the content-hash id), and listing
catalogs brings the instance's set up to the store's (new ones compiled, deleted ones gone).
A catalog another instance deleted is refused on use: `get` asks the store whether it is
still there (one indexed read), and a session's creation checks it again in the store's own
transaction, so no instance creates a session on a deleted catalog.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackroute.runtime.catalog import (
    DEFAULT_LIMITS,
    LoadLimits,
    build_tree,
    catalog_format,
    parse_catalog_document,
)
from stackroute.runtime.errors import CatalogError, InputError, Problem, StateError
from stackroute.runtime.handlers import HandlerTable
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.engines.base import Engine, PrepareStats
from stackroute.server.service.store_protocol import StoreBackend
from stackroute.server.service.store_records import CatalogInUseError, CatalogRecord

log = logging.getLogger(__name__)

FORMATS = ("json", "yaml")
MAX_SLUG_CHARS = 40
# The canonical form is hashed as it is encoded, and encoding stops past this size: a YAML
# document of nested aliases is small as text but exponentially large as JSON.
MAX_CANONICAL_BYTES = 256 << 20


class UnknownCatalogError(InputError):
    code = "unknown_catalog"
    http_status = 404


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    tree: CapabilityTree
    source: str
    format: str
    created_unix: float
    compile: PrepareStats

    @property
    def name(self) -> str:
        return self.tree.name


class CatalogRegistry:
    """Catalogs by id. `add_text` validates and compiles before anything is stored, so a
    catalog that is listed is one every request can use at once."""

    def __init__(self, store: StoreBackend, engine: Engine, *,
                 limits: LoadLimits = DEFAULT_LIMITS,
                 allowed_handler_modules: Iterable[str] = (),
                 on_compiled: Callable[[CapabilityTree], None] | None = None) -> None:
        self.store = store
        self.engine = engine
        self.on_compiled = on_compiled  # e.g. the router pool builds the leaf index now
        self.limits = limits
        # Checks catalogs' handler import paths only; it never runs a handler.
        self.handlers = HandlerTable(allowed_modules=allowed_handler_modules)
        self._entries: dict[str, CatalogEntry] = {}
        self._lock = threading.Lock()

    def add_text(self, text: str, *, fmt: str = "json") -> tuple[CatalogEntry, bool]:
        """Validate, compile and persist a catalog; return it and whether it is new.

        Raises `CatalogError` (with every problem by node path) for an invalid catalog.
        """
        if fmt not in FORMATS:
            raise InputError(f"unknown catalog format {fmt!r}; expected one of {list(FORMATS)}")
        data = parse_catalog_document(text, fmt=fmt)
        tree = self._build(data)
        catalog_id = f"{_slug(tree.name)}-{_content_hash(data)}"
        with self._lock:
            existing = self._entries.get(catalog_id)
        if existing is not None:
            _check_same(catalog_id, data, existing.source, existing.format)
            return existing, False
        entry = self._compile(catalog_id, tree, text, fmt, time.time())
        is_new = self.store.put_catalog(CatalogRecord(
            id=catalog_id, name=tree.name, source=text, format=fmt,
            created_unix=entry.created_unix))
        if not is_new:  # stored before (perhaps one that no longer loads): the same one?
            stored = self.store.catalog(catalog_id)
            if stored is not None:
                _check_same(catalog_id, data, stored.source, stored.format)
        with self._lock:
            entry = self._entries.setdefault(catalog_id, entry)
        log.info("catalog %s loaded: %d nodes compiled in %.0f ms", catalog_id,
                 entry.compile.num_menus + entry.compile.num_schemas, entry.compile.compile_ms)
        return entry, is_new

    def add_file(self, path: str | Path) -> CatalogEntry:
        """Load a catalog file (YAML by its suffix, JSON otherwise)."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise CatalogError([Problem("", f"cannot read catalog file {str(p)!r}: {e}")]) from e
        fmt = catalog_format(p)
        try:
            return self.add_text(text, fmt=fmt)[0]
        except CatalogError as e:
            raise CatalogError([Problem(pr.path, f"{p}: {pr.message}")
                                for pr in e.problems]) from e

    def load_persisted(self) -> list[str]:
        """Load every catalog the store holds (at start-up); return the ids that failed.

        A stored catalog that no longer loads (validation rules changed) is logged and
        skipped, so one bad record does not keep the service from starting.
        """
        return [record.id for record in self.store.catalogs()
                if self._load_record(record) is None]

    def _load_record(self, record: CatalogRecord) -> CatalogEntry | None:
        """Compile a stored catalog into this instance; None (logged) if it no longer loads."""
        try:
            tree = self._build(parse_catalog_document(record.source, fmt=record.format))
            entry = self._compile(record.id, tree, record.source, record.format,
                                  record.created_unix)
        except CatalogError as e:
            log.warning("stored catalog %s no longer loads: %s", record.id, e)
            return None
        with self._lock:
            return self._entries.setdefault(record.id, entry)

    def entries(self) -> list[CatalogEntry]:
        if self.store.is_shared:  # other instances add and delete catalogs too
            self._sync()
        with self._lock:
            return sorted(self._entries.values(), key=lambda e: (e.created_unix, e.id))

    def _sync(self) -> None:
        records = self.store.catalogs()
        stored = {r.id for r in records}
        with self._lock:
            for gone in set(self._entries) - stored:
                del self._entries[gone]
            missing = [r for r in records if r.id not in self._entries]
        for record in missing:
            self._load_record(record)

    def get(self, catalog_id: str) -> CatalogEntry:
        with self._lock:
            entry = self._entries.get(catalog_id)
        if self.store.is_shared and entry is not None:  # deleted through another instance?
            if not self.store.has_catalog(catalog_id):
                self.forget(catalog_id)
                entry = None
        elif self.store.is_shared:  # uploaded through another instance: compile it here
            record = self.store.catalog(catalog_id)
            entry = None if record is None else self._load_record(record)
        with self._lock:
            known = sorted(self._entries)
        if entry is None:
            shown = ", ".join(known[:20]) + (" …" if len(known) > 20 else "")
            raise UnknownCatalogError(f"no catalog {catalog_id!r}; loaded: {shown or 'none'}")
        return entry

    def delete(self, catalog_id: str) -> None:
        """Forget a catalog. Refused while a running or paused session uses it (the store
        checks that in the transaction that deletes it)."""
        self.get(catalog_id)
        try:
            self.store.delete_catalog(catalog_id)
        except CatalogInUseError as e:
            raise StateError(str(e)) from e
        self.forget(catalog_id)

    def forget(self, catalog_id: str) -> None:
        """Drop a catalog from this instance's memory (the store no longer holds it)."""
        with self._lock:
            self._entries.pop(catalog_id, None)

    def _build(self, data: Any) -> CapabilityTree:
        """Validate; a handler outside the allowed modules is a problem of its leaf (the module
        is imported only when it is allowed)."""
        tree = build_tree(data, limits=self.limits)
        problems = self.handlers.problems(tree)
        if problems:
            raise CatalogError(problems)
        return tree

    def _compile(self, catalog_id: str, tree: CapabilityTree, text: str, fmt: str,
                 created_unix: float) -> CatalogEntry:
        # Only the catalog's own faults are the user's (a schema the grammar compiler cannot
        # take is an InputError, a 4xx); an engine's failure (a remote outage: 502/503/504)
        # keeps its own status, and anything else is our bug (500).
        stats = self.engine.prepare(tree)
        if self.on_compiled is not None:
            self.on_compiled(tree)
        return CatalogEntry(id=catalog_id, tree=tree, source=text, format=fmt,
                            created_unix=created_unix, compile=stats)


def _check_same(catalog_id: str, data: Any, source: str, fmt: str) -> None:
    """An id is a content hash, so a match is the same catalog; a different document under
    it (a hash collision) is refused rather than answered with, or replacing, the other."""
    if parse_catalog_document(source, fmt=fmt) != data:
        raise StateError(f"catalog id {catalog_id} is already used by another catalog; "
                         "refusing to replace or alias it")


def _slug(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:MAX_SLUG_CHARS].strip("-")
    return slug or "catalog"


def _content_hash(data: Mapping[str, Any]) -> str:
    digest = hashlib.sha256()
    num_bytes = 0
    encoder = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                               default=str)
    try:
        for chunk in encoder.iterencode(data):
            raw = chunk.encode()
            num_bytes += len(raw)
            if num_bytes > MAX_CANONICAL_BYTES:
                raise CatalogError([Problem("", f"catalog expands to more than "
                                                f"{MAX_CANONICAL_BYTES >> 20} MiB as JSON")])
            digest.update(raw)
    except (TypeError, ValueError, RecursionError) as e:  # mixed-type or circular YAML keys
        raise CatalogError([Problem("", f"catalog cannot be written as JSON: {e}")]) from e
    return digest.hexdigest()
