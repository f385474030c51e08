"""The settings file (`--config` / `STACKROUTE_CONFIG`, YAML or JSON): read, checked and its
relative paths resolved, as one pydantic-settings source below the flags and the environment
(settings.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, InitSettingsSource, PydanticBaseSettingsSource
from stackroute.runtime.errors import InputError

CONFIG_ENV = "STACKROUTE_CONFIG"


class SettingsError(InputError, ValueError):
    """Settings that cannot start a server; the message lists every problem."""


class ConfigFileSource(PydanticBaseSettingsSource):
    """The settings file named by the `config` flag or `STACKROUTE_CONFIG`."""

    def __init__(self, settings_cls: type[BaseSettings],
                 init_settings: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        given = init_settings.init_kwargs if isinstance(init_settings, InitSettingsSource) else {}
        path = given.get("config") or os.environ.get(CONFIG_ENV)
        self.path = Path(path) if path else None

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ returns the whole file

    def __call__(self) -> dict[str, Any]:
        if self.path is None:
            return {}
        data = read_config_file(self.path)
        if "config" in data:
            raise SettingsError(f"{self.path}: a config file cannot name another config file")
        return _resolve_paths(data, self.path.parent)


def read_config_file(path: Path) -> dict[str, Any]:
    """A mapping of settings from a `.json`, `.yaml` or `.yml` file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SettingsError(f"cannot read config file {path}: {error.strerror}") from None
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as error:
        raise SettingsError(f"config file {path} is not valid: {error}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SettingsError(f"config file {path} must hold a mapping of settings; got "
                            f"{type(data).__name__}")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def _resolve_paths(data: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Relative `catalogs`, `db`, `calibration` and `chat_template` paths in a config file
    are relative to the file."""
    def resolve(value: Any) -> Any:
        return str(folder / value) if isinstance(value, str) and not Path(value).is_absolute() \
            else value

    out = dict(data)
    if isinstance(out.get("catalogs"), list):
        out["catalogs"] = [resolve(v) for v in out["catalogs"]]
    for key in ("db", "calibration", "chat_template"):
        if key in out and not (key == "db" and ":" in str(out[key])):  # a URL stays as given
            out[key] = resolve(out[key])
    return out
