"""Loading the settings: the TOML file, ``BZZZ_*`` variables (with their short names) and CLI
overrides, and errors that name where a bad setting came from.
"""

from __future__ import annotations

import difflib
import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bzzz.config.settings import Settings
from bzzz.errors import ConfigError

ENV_PREFIX = "BZZZ_"

# Short environment names for the settings people set most; value: (section, key).
ENV_ALIASES: dict[str, tuple[str, str]] = {
    "BZZZ_DATA_DIR": ("node", "data_dir"),
    "BZZZ_DATABASE_URL": ("node", "database_url"),
    "BZZZ_HTTP_HOST": ("node", "http_host"),
    "BZZZ_HTTP_PORT": ("node", "http_port"),
    "BZZZ_AUTH_TOKENS": ("node", "auth_tokens"),
    "BZZZ_AUTH_REQUIRED": ("auth", "required"),
    "BZZZ_AUTH_ISSUER": ("auth", "issuer"),
    "BZZZ_AUTH_AUDIENCE": ("auth", "audience"),
    "BZZZ_NATS_URL": ("bzzz", "nats_url"),
    "BZZZ_NATS_CREDS": ("bzzz", "nats_creds"),
    "BZZZ_NETWORK_ID": ("bzzz", "network_id"),
    "BZZZ_TRUSTED_NODES": ("bzzz", "trusted_nodes"),
    "BZZZ_FEDERATED_NETWORKS": ("bzzz", "federated_networks"),
    "BZZZ_PROJECTS": ("bzzz", "projects"),
    "BZZZ_HEARTBEAT_INTERVAL": ("bzzz", "heartbeat_interval"),
    "BZZZ_OPENAI_API_KEY": ("openai", "api_key"),
    "BZZZ_OPENAI_BASE_URL": ("openai", "base_url"),
    "BZZZ_DEFAULT_MODEL": ("openai", "default_model"),
    "BZZZ_DAILY_LIMIT": ("cost", "daily_limit"),
    "BZZZ_MONTHLY_LIMIT": ("cost", "monthly_limit"),
    "BZZZ_MAX_ACTIVE_THREADS": ("conversation", "max_active_threads"),
    "BZZZ_MAX_AGENTS": ("agents", "max_agents"),
    "BZZZ_LOG_LEVEL": ("logging", "level"),
    "BZZZ_LOG_FILE": ("logging", "file"),
    "BZZZ_NETWORK_KEY": ("encryption", "key"),
    "BZZZ_NETWORK_KEY_FILE": ("encryption", "key_file"),
    "BZZZ_SNAPSHOTS_EVERY": ("snapshots", "every"),
    "BZZZ_WHOOSH_URL": ("whoosh", "url"),
    "BZZZ_WHOOSH_TOKEN": ("whoosh", "token"),
}


def _env_overrides(
    environ: Mapping[str, str], origins: dict[tuple[str, str], str]
) -> dict[str, dict[str, Any]]:
    """Settings from BZZZ_* variables; ``origins`` learns which variable set each one."""
    sections = set(Settings.model_fields)
    result: dict[str, dict[str, Any]] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or name == "BZZZ_CONFIG":
            continue
        if name in ENV_ALIASES:
            section, key = ENV_ALIASES[name]
        elif "__" in name:
            section, _, key = name[len(ENV_PREFIX) :].lower().partition("__")
            if section not in sections:
                close = difflib.get_close_matches(section, sorted(sections), n=1, cutoff=0.6)
                hint = f"; did you mean {ENV_PREFIX}{close[0].upper()}__…?" if close else ""
                raise ConfigError(f"invalid setting {name}: unknown section {section!r}{hint}")
        else:
            continue
        result.setdefault(section, {})[key] = _env_value(raw)
        origins[(section, key)] = name
    return result


def _env_value(raw: str) -> Any:
    # JSON lets lists and tables come from the environment; anything else stays a string
    # and pydantic converts it to the field's type.
    stripped = raw.strip()
    if stripped[:1] in "[{":
        try:
            return json.loads(stripped)
        except json.JSONDecodeError:
            return raw
    return raw


def _merge(base: dict[str, Any], override: dict[str, dict[str, Any]]) -> dict[str, Any]:
    merged = {k: dict(v) if isinstance(v, dict) else v for k, v in base.items()}
    for section, values in override.items():
        target = merged.setdefault(section, {})
        if not isinstance(target, dict):
            raise ConfigError(f"invalid setting {section}: must be a table")
        target.update(values)
    return merged


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {path} does not exist") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc


def _file_keys(data: dict[str, Any]) -> set[tuple[str, str]]:
    """The (section, key) pairs a settings file holds; (name, "") for its top-level names."""
    keys = {(name, "") for name in data}
    for section, values in data.items():
        if isinstance(values, dict):
            keys.update((section, key) for key in values)
    return keys


def _env_name(field: tuple[str, str]) -> str:
    """The variable that sets a setting: its short name if it has one."""
    for alias, target in ENV_ALIASES.items():
        if target == field:
            return alias
    return ENV_PREFIX + "__".join(part for part in field if part).upper()


def _source(
    field: tuple[str, str], origins: dict[tuple[str, str], str], source: _FileSource | None
) -> str:
    """Where a setting came from: the variable set, the file and key, or (unset) its variable."""
    if field in origins:
        return origins[field]
    if source is not None and field in source.keys:
        section, key = field
        return f"{source.path}: [{section}] {key}" if key else f"{source.path}: [{section}]"
    return _env_name(field)


def _suggestion(error: Any, field: tuple[str, str]) -> str:
    if error["type"] != "extra_forbidden":
        return ""
    section, key = field
    if key and section in Settings.model_fields:
        model = Settings.model_fields[section].annotation
        known = list(getattr(model, "model_fields", {}))
    else:
        key, known = section, list(Settings.model_fields)
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else f"; known: {', '.join(sorted(known))}"


class _FileSource:
    """A settings file and the keys it holds, to name it in errors."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.keys = _file_keys(data)


def _describe(
    exc: ValidationError, origins: dict[tuple[str, str], str], source: _FileSource | None = None
) -> str:
    error = exc.errors()[0]
    loc = [str(part) for part in error["loc"]]
    dotted = ".".join(loc)
    field = (loc[0], loc[1]) if len(loc) >= 2 else (loc[0], "")
    # Name what the user set (a variable, or a key of the file); else the variable to set.
    where = _source(field, origins, source)
    return f"invalid setting {dotted} ({where}): {error['msg']}{_suggestion(error, field)}"


# BZZZ_* names that are no setting of a node but belong to the project's own tools: the
# deployment's compose file (deploy/) and the test suite. A node ignores them without a word.
TOOL_VARIABLES = (
    "BZZZ_ADMIN_TOKENS",
    "BZZZ_IMAGE",
    "BZZZ_PUBLISH_ADDR",
    "BZZZ_UI_SHOTS",
    # The node and token of the CLI commands that call a node over HTTP (cli/remote.py).
    "BZZZ_URL",
    "BZZZ_TOKEN",
)
TOOL_PREFIXES = ("BZZZ_TEST_",)


def _known_names() -> dict[str, str]:
    """Every variable that sets something, each mapped to the name to suggest for it (a
    setting's short name where it has one)."""
    names = {alias: alias for alias in ENV_ALIASES} | {"BZZZ_CONFIG": "BZZZ_CONFIG"}
    for section, field in Settings.model_fields.items():
        for key in getattr(field.annotation, "model_fields", {}):
            names[f"{ENV_PREFIX}{section}__{key}".upper()] = _env_name((section, key))
    return names


def nearest_setting(name: str) -> str | None:
    """The known variable closest to ``name`` (difflib), or None when none is close."""
    known = _known_names()
    close = difflib.get_close_matches(name.upper(), list(known), n=1, cutoff=0.6)
    return known[close[0]] if close else None


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """Warnings for BZZZ_* variables that set nothing, each with the nearest known setting.

    ``BZZZ_<SECTION>__<KEY>`` names are not here: an unknown one stops the start
    (``load_settings``), as an unknown key of the settings file does.
    """
    env = os.environ if environ is None else environ
    known = [*ENV_ALIASES, "BZZZ_CONFIG", *TOOL_VARIABLES]
    warnings = []
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name in known or "__" in name:
            continue
        if name.startswith(TOOL_PREFIXES):
            continue
        close = nearest_setting(name)
        hint = f"; did you mean {close}?" if close else ""
        warnings.append(f"{name} is not a setting and is ignored{hint}")
    return warnings


def load_settings(
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: dict[str, dict[str, Any]] | None = None,
) -> Settings:
    """Build the settings from file, environment and explicit overrides (CLI flags)."""
    env = os.environ if environ is None else environ
    path = config_file or env.get("BZZZ_CONFIG")
    data = _read_toml(Path(path).expanduser()) if path else {}
    source = _FileSource(Path(path).expanduser(), data) if path else None
    origins: dict[tuple[str, str], str] = {}
    data = _merge(data, _env_overrides(env, origins))
    for section, values in (overrides or {}).items():
        for key in values:
            origins.pop((section, key), None)
    data = _merge(data, overrides or {})
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, origins, source)) from exc
