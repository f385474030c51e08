"""`stackroute mcp CATALOG...` (the tree as an MCP server over stdio) and
`stackroute catalog import-mcp SERVERS -o OUT` (MCP servers' tools as one catalog)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from stackroute.server.commands.common import (
    AbstainOpt,
    ArgumentValuesOpt,
    BaseUrlOpt,
    CalibrationOpt,
    MissingValuesOpt,
    ModelOpt,
    OptionalValuesOpt,
    PolicyOpt,
    RecallOpt,
    ShorthandOpt,
    err_console,
    fail,
)

if TYPE_CHECKING:
    from stackroute.server.mcp.server_app import Mode
    from stackroute.server.settings import ServerSettings

log = logging.getLogger(__name__)


def mcp(
    catalogs: Annotated[list[Path], typer.Argument(
        help="catalog files (an import-mcp catalog names its MCP servers)")],
    mode: Annotated[str, typer.Option(
        "--mode", help="route (one `route` tool) | discover (list_children, describe_leaf, "
                       "call_leaf) | both")] = "route",
    engine: Annotated[str | None, typer.Option(
        "--engine", help="transformers | vllm | remote [default: transformers]")] = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    db: Annotated[str | None, typer.Option(
        "--db", help="session store (a SQLite file): what makes a call sent once across "
                     "restarts [default: ./stackroute.db]")] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", help="YAML or JSON settings file (or STACKROUTE_CONFIG)")] = None,
    policy: PolicyOpt = None,
    calibration: CalibrationOpt = None,
    abstain: AbstainOpt = None,
    argument_values: ArgumentValuesOpt = None,
    missing_values: MissingValuesOpt = None,
    optional_values: OptionalValuesOpt = None,
    recall_after_backs: RecallOpt = None,
    shorthand: ShorthandOpt = None,
    log_level: Annotated[str | None, typer.Option(
        "--log-level", help="debug | info | warning | error (on stderr)")] = None,
    max_wait_s: Annotated[float, typer.Option(
        "--max-wait-s", min=0.0, help="a routed request still running after this answers "
                                      "'running'; `result(id)` polls it")] = 300.0,
) -> None:
    """Serve the catalogs' tree as an MCP server on stdin/stdout, forwarding calls of MCP
    leaves to their servers (docs/mcp.md)."""
    from stackroute.runtime.errors import StackrouteError
    from stackroute.server.settings import ServerSettings, SettingsError

    _require_sdk()
    from stackroute.server.mcp.server_app import Mode

    try:
        chosen = Mode(mode)
    except ValueError:
        raise fail(ValueError(f"--mode must be one of {', '.join(m.value for m in Mode)}; "
                              f"got {mode!r}")) from None
    try:
        settings = ServerSettings.load(engine=engine, model=model, base_url=base_url,
                                       catalogs=catalogs, db=db, config=config, policy=policy,
                                       calibration=calibration, abstain=abstain,
                                       argument_values=argument_values,
                                       missing_values=missing_values,
                                       optional_values=optional_values,
                                       recall_after_backs=recall_after_backs,
                                       shorthand=shorthand, log_level=log_level)
    except SettingsError as e:
        err_console.print(f"[red]error[/red] {escape(str(e))}", highlight=False)
        raise typer.Exit(2) from e
    logging.basicConfig(stream=sys.stderr, level=settings.log_level.value.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        serve_stdio(settings, chosen, max_wait_s=max_wait_s)
    except StackrouteError as e:
        raise fail(e) from e


def serve_stdio(settings: ServerSettings, mode: Mode, *, max_wait_s: float) -> None:
    """Build the engine, the service and the gateway; serve MCP on stdio until EOF."""
    from stackroute.server.engines.base import ClosableEngine
    from stackroute.server.http.app import build_engine
    from stackroute.server.mcp.gateway import McpGateway
    from stackroute.server.mcp.server_app import build_server
    from stackroute.server.service.services import Services

    gateway = McpGateway(timeout_s=settings.leaf_timeout_s)
    engine = None
    services = None
    try:
        gateway.register_files(settings.catalogs)
        engine = build_engine(settings)
        services = Services.open(settings, engine, handlers=gateway.handlers(
            settings.allowed_handler_modules))
        gateway.attach(services)
        log.info("stackroute mcp: serving %s on stdio (%s mode)",
                 ", ".join(gateway.catalog_names()), mode.value)
        build_server(gateway, mode=mode, max_wait_s=max_wait_s).run("stdio")
    finally:
        if services is not None:
            services.close()
        gateway.close()
        if isinstance(engine, ClosableEngine):
            engine.close()


def import_mcp(
    servers: Annotated[Path, typer.Argument(
        help="servers file: {name: {command, args, env} | {url, headers}} (JSON or YAML)")],
    out: Annotated[Path, typer.Option("-o", "--out", help="catalog file to write")],
    name: Annotated[str, typer.Option("--name", help="the catalog's root name")] = "mcp",
    max_flat: Annotated[int, typer.Option(
        "--max-flat", min=1, help="a server with more tools gets build-tree routers below "
                                  "it")] = 12,
) -> None:
    """Read every server's tools/list and write one catalog: a subtree per server (built
    into a tree when it is wide), its leaves forwarding to their server."""
    from stackroute.runtime.catalog import build_tree
    from stackroute.runtime.errors import StackrouteError
    from stackroute.server.mcp.config import load_servers_file
    from stackroute.server.mcp.importer import ImportOptions, import_servers

    _require_sdk()

    try:
        configs = load_servers_file(servers)
        from stackroute.server.embeddings.vector_cache import CachedEmbedder

        document = import_servers(configs, name=name,
                                  embedder=_LazyEmbedder(CachedEmbedder.for_default_model),
                                  options=ImportOptions(max_flat=max_flat))
    except StackrouteError as e:
        raise fail(e) from e
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    stats = build_tree(document).stats()
    err_console.print(f"{escape(str(out))}: {len(configs)} servers, {stats.num_leaves} tools, "
                      f"depth {stats.depth}, widest menu {stats.max_menu}", highlight=False)


def _require_sdk() -> None:
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        raise fail(ModuleNotFoundError("the MCP SDK is not installed: pip install "
                                       "'stackroute[mcp]'"))


class _LazyEmbedder:
    """The embedding model, loaded on the first `embed` (a narrow import needs none)."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._embedder: Any | None = None

    @property
    def key(self) -> str:
        return str(getattr(self._loaded(), "key", "embedder"))

    def embed(self, texts: list[str]) -> Any:
        return self._loaded().embed(texts)

    def _loaded(self) -> Any:
        if self._embedder is None:
            self._embedder = self._factory()
        return self._embedder
