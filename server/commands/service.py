"""`serve` (the HTTP API) and `bench` (the benchmarks, a plug-in found by entry point)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from stackroute.server.commands.common import (
    AbstainOpt,
    ArgumentValuesOpt,
    BaseUrlOpt,
    CalibrationOpt,
    ChatTemplateOpt,
    EngineArgOpt,
    MissingValuesOpt,
    ModelOpt,
    NoSpecOpt,
    OptionalValuesOpt,
    PolicyOpt,
    PromptOrderOpt,
    RecallOpt,
    ServedModelNameOpt,
    ShorthandOpt,
    ShortlistMarginOpt,
    ShortlistOpt,
    UnwindOpt,
    err_console,
    fail,
)


def serve(
    engine: Annotated[str | None, typer.Option(
        "--engine", help="transformers | vllm | remote [default: transformers]")] = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    host: Annotated[str | None, typer.Option("--host", help="[default: 127.0.0.1]")] = None,
    port: Annotated[int | None, typer.Option("--port", help="[default: 8000]")] = None,
    catalog: Annotated[list[Path] | None, typer.Option(
        "--catalog", help="catalog file to load at start (repeatable)")] = None,
    db: Annotated[str | None, typer.Option(
        "--db", help="session store: a SQLite file (PATH or sqlite:///PATH) or "
                     "postgresql://USER@HOST:PORT/DBNAME [default: ./stackroute.db]")] = None,
    api_key: Annotated[str | None, typer.Option(
        "--api-key", help="require 'Authorization: Bearer KEY' (or STACKROUTE_API_KEY)")] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", help="YAML or JSON settings file (or STACKROUTE_CONFIG)")] = None,
    allow_public_bind: Annotated[bool | None, typer.Option(
        "--allow-public-bind/--no-allow-public-bind",
        help="serve on a non-loopback host without an API key")] = None,
    log_level: Annotated[str | None, typer.Option(
        "--log-level", help="debug | info | warning | error")] = None,
    policy: PolicyOpt = None,
    calibration: CalibrationOpt = None,
    no_speculation: NoSpecOpt = False,
    unwinding: UnwindOpt = None,
    dtype: Annotated[str | None, typer.Option(
        "--dtype", help="transformers engine precision: auto | float32 | bfloat16 "
                        "(the dtype setting)")] = None,
    max_draft_tokens: Annotated[int | None, typer.Option(
        "--max-draft-tokens", help="transformers engine: tokens drafted from the prompt per "
                                   "pass, 0: off (the max_draft_tokens setting)")] = None,
    max_string_chars: Annotated[int | None, typer.Option(
        "--max-string-chars", help="cap of JSON strings without a maxLength (the "
                                   "max_string_chars setting)")] = None,
    allowed_host: Annotated[list[str] | None, typer.Option(
        "--allowed-host", help="a Host name served besides loopback and --host (repeat; a "
                               "proxy's or DNS name; '*' any): the allowed_hosts setting")] = None,
    allowed_origin: Annotated[list[str] | None, typer.Option(
        "--allowed-origin", help="a browser origin allowed to call the API besides the "
                                 "server's own (repeat): the allowed_origins setting")] = None,
    serve_docs: Annotated[bool | None, typer.Option(
        "--docs/--no-docs", help="serve /docs and /redoc (CDN scripts; off by default)")] = None,
    strict_openai: Annotated[bool | None, typer.Option(
        "--strict-openai/--lenient-openai", help="refuse OpenAI-API fields this server does "
        "not implement (400) instead of ignoring and naming them (the strict_openai "
        "setting)")] = None,
    max_tool_menu: Annotated[int | None, typer.Option(
        "--max-tool-menu", help="a chat request's tools list wider than this is grouped into "
                                "a tree before routing [default: 40]")] = None,
    prompt_order: PromptOrderOpt = None,
    shortlist: ShortlistOpt = None,
    shortlist_margin: ShortlistMarginOpt = None,
    abstain: AbstainOpt = None,
    argument_values: ArgumentValuesOpt = None,
    missing_values: MissingValuesOpt = None,
    optional_values: OptionalValuesOpt = None,
    recall_after_backs: RecallOpt = None,
    shorthand: ShorthandOpt = None,
    chat_template: ChatTemplateOpt = None,
    engine_arg: EngineArgOpt = None,
    served_model_name: ServedModelNameOpt = None,
    remote_constraints: Annotated[str | None, typer.Option(
        "--remote-constraints", help="remote engine: auto | structured_outputs | json_schema "
                                     "| grammar | none (the remote_constraints setting)")] = None,
) -> None:
    """Serve the HTTP API (routing, sessions, catalogs, OpenAI-compatible) with uvicorn.

    Flags override STACKROUTE_* environment variables, which override the config file."""
    import uvicorn
    from stackroute.server.engines.engine_args import EngineArgsError, parse_engine_args
    from stackroute.server.http.app import create_app
    from stackroute.server.http.json_logging import configure_logging, logging_config
    from stackroute.server.settings import ServerSettings, SettingsError

    try:
        engine_args = parse_engine_args(engine_arg) if engine_arg else None
    except EngineArgsError as e:
        raise fail(e) from e
    try:
        settings = ServerSettings.load(
            engine=engine, model=model, base_url=base_url, host=host, port=port,
            catalogs=catalog, db=db, api_key=api_key, config=config,
            allow_public_bind=allow_public_bind, log_level=log_level, policy=policy,
            calibration=calibration, speculation="off" if no_speculation else None,
            dtype=dtype, max_draft_tokens=max_draft_tokens, max_string_chars=max_string_chars,
            unwinding=unwinding, prompt_order=prompt_order, allowed_hosts=allowed_host,
            shortlist=shortlist, shortlist_margin=shortlist_margin, abstain=abstain,
            argument_values=argument_values, missing_values=missing_values,
            optional_values=optional_values, recall_after_backs=recall_after_backs,
            shorthand=shorthand, allowed_origins=allowed_origin,
            serve_docs=serve_docs,
            strict_openai=strict_openai, max_tool_menu=max_tool_menu,
            chat_template=chat_template, engine_args=engine_args,
            served_model_name=served_model_name, remote_constraints=remote_constraints)
    except SettingsError as e:
        err_console.print(f"[red]error[/red] {escape(str(e))}", highlight=False)
        raise typer.Exit(2) from e
    level = settings.log_level.value
    configure_logging(level)
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port,
                log_config=logging_config(level), log_level=level, access_log=False,
                server_header=False, proxy_headers=False, ws="none")


def bench(ctx: typer.Context) -> None:
    """The paper's benchmarks and ours (stackroute bench --help)."""
    from importlib.metadata import entry_points

    found = entry_points(group="stackroute.commands", name="bench")
    if not found:
        raise fail(LookupError("the benchmarks are not installed: no 'bench' entry point in "
                                "the 'stackroute.commands' group (reinstall stackroute)"))
    next(iter(found)).load()(ctx.args)
