"""Which MCP servers to reach and how: a servers file (`import-mcp`) or a catalog's
`mcp_servers` field, both the same mapping `name -> {command, args, env, cwd} | {url, headers}`.

>>> servers = parse_servers({"law": {"command": "python", "args": ["law.py"]},
...                          "web": {"url": "http://127.0.0.1:9000/mcp"}})
>>> [(s.name, s.transport.value) for s in servers]
[('law', 'stdio'), ('web', 'http')]
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml
from stackroute.runtime.errors import InputError

CATALOG_FIELD = "mcp_servers"  # the root field of a catalog that names its MCP servers
LEAF_FIELD = "mcp"  # a leaf's `{"server": NAME, "tool": TOOL}`: forward calls there
_STDIO_KEYS = frozenset({"command", "args", "env", "cwd", "timeout_s"})
_HTTP_KEYS = frozenset({"url", "headers", "timeout_s"})


class McpConfigError(InputError):
    code = "invalid_mcp_servers"


class Transport(StrEnum):
    STDIO = "stdio"
    HTTP = "http"  # streamable HTTP


@dataclass(frozen=True, kw_only=True)
class McpServerConfig:
    name: str
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float | None = None  # a tool call's limit; None: the gateway's default

    def to_dict(self) -> dict[str, Any]:
        """The form `parse_servers` reads back (the catalog field keeps it)."""
        out: dict[str, Any] = ({"command": self.command, "args": list(self.args)}
                               if self.transport is Transport.STDIO else {"url": self.url})
        if self.env:
            out["env"] = dict(self.env)
        if self.cwd is not None:
            out["cwd"] = self.cwd
        if self.headers:
            out["headers"] = dict(self.headers)
        if self.timeout_s is not None:
            out["timeout_s"] = self.timeout_s
        return out


def parse_servers(data: Any) -> list[McpServerConfig]:
    """Servers from `{name: spec}` (or `{"servers": {name: spec}}`); every problem is an
    `McpConfigError` saying what was expected and what arrived."""
    if isinstance(data, Mapping) and set(data) == {"servers"}:
        data = data["servers"]
    if not isinstance(data, Mapping) or not data:
        raise McpConfigError(f"expected a non-empty object of MCP servers by name, got "
                             f"{type(data).__name__}{'' if data else ' (empty)'}")
    return [_server(str(name), spec) for name, spec in data.items()]


def load_servers_file(path: str | Path) -> list[McpServerConfig]:
    """A servers file: JSON, or YAML by its `.yaml`/`.yml` suffix."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
        data = (yaml.safe_load(text) if p.suffix.lower() in {".yaml", ".yml"}
                else json.loads(text))
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as e:
        raise McpConfigError(f"cannot read MCP servers file {str(p)!r}: {e}") from e
    return parse_servers(data)


def _server(name: str, spec: Any) -> McpServerConfig:
    where = f"MCP server {name!r}"
    if not name or not name[0].isalpha():
        raise McpConfigError(f"{where}: a server name must start with a letter")
    if not isinstance(spec, Mapping):
        raise McpConfigError(f"{where}: expected an object with 'command' or 'url', got "
                             f"{type(spec).__name__}")
    if ("command" in spec) == ("url" in spec):
        raise McpConfigError(f"{where}: expected exactly one of 'command' (stdio) or 'url' "
                             f"(streamable HTTP), got keys {sorted(spec)}")
    is_stdio = "command" in spec
    unknown = set(spec) - (_STDIO_KEYS if is_stdio else _HTTP_KEYS)
    if unknown:
        allowed = sorted(_STDIO_KEYS if is_stdio else _HTTP_KEYS)
        raise McpConfigError(f"{where}: unknown keys {sorted(unknown)}; expected {allowed}")
    timeout = spec.get("timeout_s")
    if timeout is not None and (not isinstance(timeout, int | float) or timeout <= 0):
        raise McpConfigError(f"{where}: 'timeout_s' must be a positive number, got {timeout!r}")
    if is_stdio:
        command, args = spec["command"], spec.get("args", [])
        if not isinstance(command, str) or not command:
            raise McpConfigError(f"{where}: 'command' must be a non-empty string, got "
                                 f"{command!r}")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise McpConfigError(f"{where}: 'args' must be a list of strings, got {args!r}")
        return McpServerConfig(name=name, transport=Transport.STDIO, command=command,
                               args=tuple(args), env=_strings(where, "env", spec.get("env")),
                               cwd=spec.get("cwd"), timeout_s=timeout)
    url = spec["url"]
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise McpConfigError(f"{where}: 'url' must be an http(s) URL, got {url!r}")
    return McpServerConfig(name=name, transport=Transport.HTTP, url=url,
                           headers=_strings(where, "headers", spec.get("headers")),
                           timeout_s=timeout)


def _strings(where: str, key: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise McpConfigError(f"{where}: {key!r} must map strings to strings, got {value!r}")
    return dict(value)
