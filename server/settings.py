"""Server settings: the process edge, where flags, environment and a config file meet.

Precedence, highest first: values passed in (the `serve` command's flags), `STACKROUTE_*`
environment variables, the config file (`--config` / `STACKROUTE_CONFIG`, YAML or JSON), the
defaults below. Unknown keys in the file or in the flags are an error; list values in the
environment are JSON (`STACKROUTE_CATALOGS='["a.yaml", "b.yaml"]'`); relative paths in a config
file are relative to that file. Settings are frozen:
nothing changes them after start-up.

>>> ServerSettings(port=9000).host
'127.0.0.1'
"""

from __future__ import annotations

import ipaddress
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict
from stackroute.grammars.string_caps import DEFAULT_MAX_STRING_CHARS
from stackroute.runtime.errors import InputError
from stackroute.runtime.prompt import PromptOrder
from stackroute.server.engines.cpu_dtype import DEFAULT_DTYPE
from stackroute.server.engines.prompt_lookup import DEFAULT_MAX_DRAFT_TOKENS
from stackroute.server.redaction import redact_secrets
from stackroute.server.routing.options import (
    ArgumentValues,
    DraftSource,
    MissingValues,
    OptionalValues,
    Policy,
    RouterOptions,
)
from stackroute.server.routing.prefix_warming import WarmScope
from stackroute.server.settings_file import ConfigFileSource, SettingsError

ENV_PREFIX = "STACKROUTE_"
LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost"})


class LogLevel(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class ServerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True,
                                      validate_default=True)

    config: Path | None = Field(None, description="YAML or JSON file with these settings")
    engine: str = Field("transformers", description="engine name (transformers | vllm | "
                                                    "remote) or import path 'module:factory'")
    model: str | None = Field(None, description="model folder, GGUF file or preset "
                                 "(smollm2-135m | qwen2.5-coder-1.5b); none: embedded")
    base_url: str | None = Field(None, description="base URL of a remote engine")
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535, description="0 picks a free port")
    catalogs: list[Path] = Field(default_factory=list, description="catalog files to load")
    db: str = Field("./stackroute.db", description="session store: a SQLite file (a path or "
                    "sqlite:///PATH) or postgresql://USER@HOST:PORT/DBNAME")
    api_key: SecretStr | None = Field(None, description="bearer token clients must send")
    allow_public_bind: bool = Field(
        False, description="allow a non-loopback host without an API key")
    protect_metrics: bool = Field(False, description="require the API key on /metrics too")
    max_body_bytes: int = Field(8 << 20, ge=1024, description="largest request body, bytes")
    max_prompt_tokens: int = Field(8192, ge=1)
    max_menu_options: int = Field(512, ge=1, description="options in one menu or choice list")
    max_session_steps: int = Field(200, ge=1)
    session_lease_s: float = Field(
        10.0, gt=0, description="PostgreSQL store: a session's lease; a stopped instance's "
                                "sessions resume elsewhere after about 4/3 of it")
    max_queue: int = Field(64, ge=0, description="requests waiting for the engine")
    max_concurrency: int = Field(
        4, ge=1, description="requests handed to the engine at once (it batches or serialises)")
    default_max_tokens: int = Field(256, ge=1, description="chat max_tokens when none is sent")
    max_output_tokens: int = Field(4096, ge=1, description="largest max_tokens a request may ask")
    leaf_timeout_s: float = Field(30.0, gt=0)
    leaf_isolation: Literal["process", "thread"] = Field(
        "process", description="run leaf handlers in killable worker processes (a hung or "
        "crashing handler costs one worker) or on threads of the server (a hung handler "
        "keeps its thread)")
    allowed_handler_modules: list[str] = Field(default_factory=list)
    speculation: DraftSource | None = Field(
        None, description="speculative routing: verify drafted paths in one pass (routes: a "
        "route cache of requests seen before | evidence: leaf embeddings | both | off); "
        "decisions stay step-by-step routing's (guided: each level verified under the bias "
        "guided routing puts there); engines that cannot verify paths (vllm, remote) route "
        "step by step; none: the model's calibration's under the guided policy (both, for "
        "both shipped models), else routes")
    unwinding: bool = Field(
        False, description="plain policy: verify the DONE answers that unwind the stack after "
        "a call in one pass (decisions never change; fewer model calls, no faster on a "
        "1-thread CPU, bench/results/2026-12-03-cpu-unwind); transformers engine only")
    policy: Policy | None = Field(
        None, description="routing policy: plain (the model's constrained choice alone) | "
        "guided (leaf evidence as a prior, with the recovery moves the calibration turns on); "
        "none: guided where the engine's model has a calibration, else plain")
    calibration: Path | None = Field(
        None, description="calibration file for the guided policy (stackroute calibrate); "
        "none: the one shipped for the engine's model")
    prompt_order: PromptOrder = Field(
        PromptOrder.MENU_FIRST, description="where a routing prompt puts the root's "
        "menu: menu-first (before the request, so every request on a catalog shares its KV; "
        "runtime/prompt.py) | request-first (after it, the layout before issue 29)")
    # Seal-Tools dev: at margin 0.08 the evidence's shortlist held the gold option at 188 of
    # 188 shortlisted field menus (200 requests); with the model, the same calls as the full
    # menus at 0.42x the prefill (bench/results/2026-12-04-cpu-shared-prompt).
    shortlist: bool = Field(
        True, description="guided policy: an inner menu opens with its best options and "
        "OTHER (which opens the full menu) where the leaf evidence separates them from the "
        "rest by shortlist_margin (server/routing/shortlist.py); off: every menu in full")
    shortlist_margin: float = Field(
        0.08, ge=0, description="evidence gap (cosine units) between a shortlist's last "
        "option and the first option it hides")
    shortlist_max_options: int = Field(
        3, ge=1, description="options a shortlisted menu shows at most (besides OTHER)")
    abstain: bool | None = Field(
        None, description="guided policy: before a run's first leaf call, ask the model "
        "whether the leaf does what the request asks and end the run with no call when the "
        "fitted check (the model's calibration, its `abstention` object) says nothing fits "
        "(server/routing/abstention.py): true where the calibration has a check | false | "
        "none: as the calibration says (its `is_default`, set from the measured numbers)")
    recall_after_backs: int | None = Field(
        None, ge=0, description="guided policy: after this many BACKs in a frame the leaf "
        "evidence decides it with no model call (its best remaining leaf, else BACK, else DONE "
        "at the root; server/routing/recovery.py); 0: off; none: the calibration's (2)")
    argument_values: ArgumentValues | None = Field(
        None, description="who picks each argument value among the values the request holds "
        "(server/routing/arguments/filling.py): model (a constrained choice, the candidates' "
        "priors as its bias) | priors (the highest prior, no model call) | none: as the "
        "model's calibration says (its `arguments.values`; the 135M default: priors, which "
        "matched its choices on Seal-Tools dev at no cost), else model")
    missing_values: MissingValues = Field(
        MissingValues.ASK, description="a required value the request holds nothing for "
        "(\"send money to Asha\": no amount): ask (the call pauses until the user supplies "
        "it: `run --values`, POST /v1/sessions/{id}/values, MCP elicitation, a question in "
        "an OpenAI tools answer; runtime/missing_values.py) | write (the model makes one up "
        "under the schema, flagged as written_values)")
    optional_values: OptionalValues = Field(
        OptionalValues.MEANING, description="which optional properties a call fills "
        "(server/routing/arguments/filling.py): words (the request names the property, or "
        "holds a value only its kind takes) | meaning (also a value the request gives "
        "without its name, \"on Facebook\" for platform: a request value whose embedding is "
        "most like this property's among the leaf's, arguments/meaning.py; Seal-Tools dev at "
        "the gold leaf: more exact calls, bench/results/2026-12-05-cpu-optional-meaning)")
    shorthand: bool = Field(
        True, description="guided policy: the leaf evidence reads a request's shorthand of "
        "the catalog's words as those words ('van 12 odo' as odometer, 'rpt' as report), "
        "where the embedding model's vocabulary holds no such whole word "
        "(server/embeddings/abbreviations.py; bench/results/2026-12-08-cpu-heldout-hotel-lab)")
    warm_on_load: WarmScope = Field(
        WarmScope.ROOT, description="what a catalog load computes before its first request: "
        "root (the prompt header every request shares, and the root menu's neutral contrast "
        "under the guided policy) | all (every menu's neutral contrast too: one model call "
        "per router) | off; it runs in the background: a load never waits for it")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        DEFAULT_DTYPE, description="transformers engine precision: auto is bfloat16 where the "
        "CPU multiplies it natively (AMX or AVX-512 BF16), else float32")
    max_draft_tokens: int = Field(
        DEFAULT_MAX_DRAFT_TOKENS, ge=0, description="transformers engine: tokens a greedy "
        "generation drafts from its prompt per pass (argument values copied from the "
        "request); answers never change; 0 turns drafting off")
    max_string_chars: int = Field(
        DEFAULT_MAX_STRING_CHARS, ge=1, description="JSON strings whose schema sets no "
        "maxLength (and unbounded formats such as email) end after this many characters, so "
        "argument generation ends")
    max_argument_tokens: int = Field(
        384, ge=1, description="tokens a leaf's argument generation may take (an answer cut "
        "off there is retried once under the schema's required properties only)")
    log_level: LogLevel = LogLevel.INFO
    # -- engines: chat template, vLLM pass-through, remote upstream (server/engines) -------
    chat_template: Path | None = Field(
        None, description="a chat template file (Jinja, or a tokenizer_config.json) replacing "
        "the model's own; used where a check at load finds it prefix-stable (transformers and "
        "vllm engines)")
    engine_args: dict[str, Any] = Field(
        default_factory=dict, description="vllm engine: engine arguments passed through to "
        "vLLM (tensor_parallel_size, max_model_len, quantization, gpu_memory_utilization, "
        "...), checked against vLLM's EngineArgs")
    served_model_name: str | None = Field(
        None, description="vllm engine: the name the OpenAI API answers to; none: the model "
        "folder's name")
    remote_constraints: str = Field(
        "auto", description="remote engine: how menus are constrained: auto (probe the "
        "upstream at start) | structured_outputs | json_schema | grammar | none")

    @field_validator("remote_constraints")
    @classmethod
    def _constraint_api(cls, value: str) -> str:
        from stackroute.server.engines.remote_features import parse_constraint_api

        parse_constraint_api(value)  # a ValueError names the values it takes
        return value

    @model_validator(mode="after")
    def _engine_settings_fit(self) -> ServerSettings:
        """An engine setting the engine cannot use is refused at start, naming it."""
        from stackroute.server.engines.registry import BUILT_IN, engine_options

        if self.engine in BUILT_IN:
            try:
                engine_options(self.engine, chat_template=self.chat_template,
                               engine_args=self.engine_args,
                               served_model_name=self.served_model_name,
                               remote_constraints=self.remote_constraints)
            except InputError as e:
                raise ValueError(str(e)) from None
        return self
    # -- end of engines ---------------------------------------------------------------------
    mcp_mode: Literal["route", "discover", "both", "off"] = Field(
        "route", description="`/mcp` (the MCP gateway, docs/mcp.md): route (one `route` "
        "tool) | discover (list_children, describe_leaf, call_leaf) | both | off")
    # -- OpenAI tool calling and leniency (server/http/openai_*, server/service/tool_*) ----
    strict_openai: bool = Field(
        False, description="refuse OpenAI-API fields this server does not implement (400 "
        "unsupported_field) instead of ignoring them with a warning and the "
        "X-Stackroute-Ignored-Fields response header")
    max_tool_menu: int = Field(
        40, ge=2, description="a chat request's tools list wider than this is grouped into a "
        "tree (build-tree) before it is routed; narrower ones are one menu")
    max_tool_catalogs: int = Field(
        64, ge=1, description="tools lists kept built (by content hash) in memory")
    max_tool_runs: int = Field(
        4096, ge=1, description="routing runs kept waiting for a tool result (the tool_call "
        "id names one); the oldest are forgotten")
    # -- end of OpenAI tool calling ----------------------------------------------------------
    # -- sessions and request hardening (server/service, server/http) --------------------
    max_session_workers: int = Field(4, ge=1, description="sessions stepped at the same time")
    max_active_sessions: int = Field(
        64, ge=1, description="running sessions queued or stepping; more is a 429")
    allow_auto_approve: bool | None = Field(
        None, description="let a client start a session with auto_approve (gated calls run "
        "without confirmation); none: allowed only when no API key is set")
    body_timeout_s: float = Field(
        30.0, gt=0, description="longest time a client may take to send a request body")
    max_connections: int = Field(
        256, ge=1, description="HTTP requests handled at once; more are answered 503")
    max_leaf_memory_mb: int | None = Field(
        1024, ge=16, description="address-space limit of a leaf worker process "
        "(leaf_isolation=process), MiB; none: no limit")
    # -- browser and scrape hardening (server/http/origin_guard.py, metrics.py) ----------
    allowed_hosts: list[str] = Field(
        default_factory=list, description="Host names served besides the loopback names and "
        "the bound host (a reverse proxy's or DNS name); '*' serves any (DNS rebinding guard; "
        "a server bound to 0.0.0.0 serves any Host unless this lists them)")
    allowed_origins: list[str] = Field(
        default_factory=list, description="browser origins (scheme://host[:port]) allowed to "
        "call the API besides the server's own, e.g. a console behind a TLS proxy")
    serve_docs: bool = Field(
        False, description="serve the interactive API docs at /docs and /redoc (their scripts "
        "come from a CDN, outside the console's content-security policy); /openapi.json is "
        "always served")
    session_gauge_ttl_s: float = Field(
        30.0, ge=0, description="how long /metrics reuses its sessions-by-status counts "
        "before counting the store again (an open scrape must not cost a COUNT each)")
    # -- end of browser and scrape hardening ------------------------------------------------

    @property
    def is_auto_approve_allowed(self) -> bool:
        if self.allow_auto_approve is not None:
            return self.allow_auto_approve
        return self.api_key is None

    @property
    def max_leaf_memory_bytes(self) -> int | None:
        return None if self.max_leaf_memory_mb is None else self.max_leaf_memory_mb << 20
    # -- end of sessions and request hardening --------------------------------------------


    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        from stackroute.server.engines.registry import UnknownEngineError, check_engine_name

        try:
            return check_engine_name(value)
        except UnknownEngineError as e:
            raise ValueError(str(e)) from None

    @field_validator("db", mode="before")
    @classmethod
    def _store_url(cls, value: Any) -> Any:
        """A URL the server cannot serve is refused here, at start (a mangled
        `postgresql:/…` would otherwise become a SQLite file of that name)."""
        from stackroute.server.service.store_url import StoreUrlError, parse_store_url

        if isinstance(value, Path):
            return str(value)
        if isinstance(value, str):
            try:
                parse_store_url(value)
            except StoreUrlError as e:
                raise ValueError(str(e)) from None
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower_level(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _safe_bind(self) -> ServerSettings:
        if self.api_key is not None and not self.api_key.get_secret_value():
            raise ValueError("api_key is empty; leave it unset to turn authentication off")
        if not is_loopback(self.host) and self.api_key is None and not self.allow_public_bind:
            raise ValueError(
                f"refusing to bind to {self.host!r} without an API key: set --api-key (or "
                f"{ENV_PREFIX}API_KEY), or set allow_public_bind ({ENV_PREFIX}ALLOW_PUBLIC_BIND"
                "=true) to serve without authentication")
        if self.engine == "remote" and not self.base_url:
            raise ValueError("engine 'remote' needs base_url")
        return self

    def router_options(self, model: str) -> RouterOptions:
        """How the service routes, for an engine serving `model` (calibration.py decides
        the default policy from the calibrations that exist)."""
        from stackroute.server.routing.calibration import router_options

        return router_options(model, policy=self.policy, calibration=self.calibration,
                              speculation=self.speculation, unwinding=self.unwinding,
                              prompt_order=self.prompt_order,
                              shortlist=self.shortlist, shortlist_margin=self.shortlist_margin,
                              max_argument_tokens=self.max_argument_tokens,
                              abstain=self.abstain, argument_values=self.argument_values,
                              missing_values=self.missing_values,
                              optional_values=self.optional_values,
                              recall_after_backs=self.recall_after_backs,
                              shorthand=self.shorthand)

    @classmethod
    def default(cls, name: str) -> Any:
        """The product default of setting `name` (no environment or config file read): the
        one place options objects and command flags take their defaults from."""
        return cls.model_fields[name].get_default(call_default_factory=True)

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # No .env file and no secrets folder: a file the operator did not name is not read.
        return init_settings, env_settings, ConfigFileSource(settings_cls, init_settings)

    @classmethod
    def load(cls, **flags: Any) -> ServerSettings:
        """Settings from flags (None means "not given"), environment and config file; raises
        SettingsError with one line per problem."""
        given = {k: v for k, v in flags.items() if v is not None and v != []}
        try:
            return cls(**given)
        except ValidationError as error:
            raise SettingsError(describe_errors(error)) from None


def is_loopback(host: str) -> bool:
    """True for loopback addresses and names (`127.0.0.1`, `::1`, `localhost`)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def describe_errors(error: ValidationError) -> str:
    """One line per problem: `setting: message`, and what arrived where the message does not
    say it already (a plain value, secrets masked; never the API key)."""
    lines = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "settings"
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown setting"
        given = item.get("input")
        if item["type"] not in ("value_error", "extra_forbidden", "missing") \
                and isinstance(given, str | int | float) and "api_key" not in item["loc"]:
            message += f"; got {redact_secrets(repr(given))}"
        lines.append(f"{where}: {message}")
    return "invalid settings:\n  " + "\n  ".join(lines)
