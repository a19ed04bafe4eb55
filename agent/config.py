"""The user's configuration, without editing the installed package: a TOML file and AGENT_* environment variables.

    file   $AGENT_CONFIG, else $XDG_CONFIG_HOME/agent/config.toml (~/.config/agent/config.toml)
    env    AGENT_<SECTION>__<KEY>, e.g. AGENT_RUN__SAMPLES=8, AGENT_PROGRESS__HEARTBEAT_S=30

A flag on the command line wins over the environment, which wins over the file, which wins over the built-in
defaults. Everything is validated (pydantic): an unknown key or a bad value is one line naming where it came from.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from agent.errors import UserError
from agent.llm.pricing import Price
from agent.runconfig import Flag, RunConfig, run_flags

ENV_PREFIX = "AGENT_"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


def run_defaults_model(model: type[RunConfig] | None = None) -> type[_Section]:
    """The [run] section: every flag of agent.runconfig.RunConfig (or `model`, one with more fields) by its flag's
    name, unset by default, held to the field's own constraints (a switch written on/off)."""
    fields: dict[str, Any] = {}
    for f in run_flags(model):
        kind: Any = Literal["on", "off"] if f.flag.switch else f.info.annotation
        constraints = [m for m in f.info.metadata if not isinstance(m, Flag)]
        fields[f.name] = (Optional[Annotated[kind, *constraints]] if constraints else Optional[kind], None)
    return create_model("RunDefaults", __base__=_Section, __doc__="Defaults for `agent run`'s flags (same names, "
                        "dashes as underscores); unset: the built-in default.", **fields)


if TYPE_CHECKING:
    class RunDefaults(_Section):
        def __getattr__(self, name: str) -> Any: ...
else:
    RunDefaults = run_defaults_model()


class StoreSettings(_Section):
    root: Path | None = Field(default=None, description="where runs are kept when --root is not given (default: .)")


class ProgressSettings(_Section):
    heartbeat_s: float = Field(default=60.0, ge=0, description="a log's 'still ...' line during a long phase; 0: off")


class ModelPrice(Price):
    """A model's price, for every endpoint or only for the one at `base_url` (a proxy, a local server)."""

    base_url: str | None = None


class UserConfig(BaseSettings):
    """Everything a user may set; see the module's docstring for where it is read from."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid")

    run: RunDefaults = Field(default_factory=RunDefaults)
    store: StoreSettings = Field(default_factory=StoreSettings)
    progress: ProgressSettings = Field(default_factory=ProgressSettings)
    prices: dict[str, ModelPrice] = Field(default_factory=dict, description="USD per 1M tokens, by model name")

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings],
                                   init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings  # the file comes in through init (load_user_config), below the env

    def price(self, model: str, base_url: str) -> Price | None:
        """The user's price for `model` at `base_url`: one bound to that endpoint first, then one for any."""
        entry = self.prices.get(model)
        if entry is None or (entry.base_url is not None and entry.base_url.rstrip("/") != base_url.rstrip("/")):
            return None
        return Price(input=entry.input, output=entry.output, reasoning=entry.reasoning)


def config_path(env: dict[str, str] | None = None) -> Path:
    """$AGENT_CONFIG, else the XDG place."""
    env = dict(os.environ) if env is None else env
    if env.get("AGENT_CONFIG"):
        return Path(env["AGENT_CONFIG"]).expanduser()
    base = Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "agent" / "config.toml"


def load_user_config(path: Path | None = None) -> UserConfig:
    """The file (if any) under the environment; one line naming the file, or the variable, for anything wrong."""
    path = path or config_path()
    data: dict[str, Any] = {}
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            raise UserError(f"config {path}: {e}", "fix the file, or point AGENT_CONFIG elsewhere") from None
    elif "AGENT_CONFIG" in os.environ:
        raise UserError(f"config {path}: no such file (AGENT_CONFIG)")
    # The environment is read on its own first, so an error says which source holds the bad value.
    try:
        env_only = UserConfig()
    except ValidationError as e:
        raise UserError(f"environment: {_first_error(e, env=True)}") from None
    try:
        UserConfig.model_validate(data)
        merged = _deep_merge(data, env_only.model_dump(exclude_unset=True))
        return UserConfig.model_validate(merged)
    except ValidationError as e:
        raise UserError(f"config {path}: {_first_error(e)}", "fix the file, or point AGENT_CONFIG elsewhere") from None


def value_sources(path: Path | None = None) -> dict[str, str]:
    """Each setting's dotted key (`run.samples`, `prices."gpt-4o"`) -> where it was set: the environment variable's
    name, else `config FILE`; a key not here has its built-in default. Read after load_user_config validated both."""
    path = path or config_path()
    sources: dict[str, str] = {}
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            data = {}
        for key in _dotted(data):
            sources[key] = f"config {path}"
    for name in os.environ:
        if name.startswith(ENV_PREFIX) and "__" in name:
            parts = [part.lower() for part in name[len(ENV_PREFIX):].split("__")]
            key = f'prices."{parts[1]}"' if parts[0] == "prices" and len(parts) > 1 else ".".join(parts)
            for known in [k for k in sources if k == key or k.startswith(key + ".")]:
                del sources[known]  # the variable wins over the file, a whole section included
            sources[key] = name
    return sources


def source_of(key: str, sources: dict[str, str]) -> str:
    """Where `key` came from: its own entry or its section's (AGENT_RUN='{...}'), else the built-in default."""
    parts = key.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in sources:
            return sources[".".join(parts[:n])]
    return "default"


def _dotted(data: dict[str, Any], prefix: str = "") -> list[str]:
    """The leaf keys of a settings tree; a price is one value (its fields go together)."""
    keys: list[str] = []
    for key, value in data.items():
        name = f'{prefix}"{key}"' if prefix == "prices." else prefix + key
        if isinstance(value, dict) and prefix != "prices.":
            keys += _dotted(value, name + ".")
        else:
            keys.append(name)
    return keys


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = _deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _first_error(e: ValidationError, env: bool = False) -> str:
    err = e.errors()[0]
    loc = [str(x) for x in err["loc"]]
    where = (ENV_PREFIX + "__".join(loc).upper()) if env else ".".join(loc)
    more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
    return f"{where}: {err['msg']}{more}"
