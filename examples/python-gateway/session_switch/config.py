"""The config a gateway shares with the CLI: `session-switch.toml`
(DESIGN §8 "Config"), read with the standard library's `tomllib`. Yields the
policy's `settings` (passed to its `configure`, never compiled in) and what
the send needs to reach ejabberd's HTTP API.

The policy's `configure` validates the settings (unique names, JIDs,
nicks, sessions; TTL ≥ 1; …); this module checks shapes and types only, and
what the Python side itself uses. The Rust CLI
(`xmpp-session-bridge --config PATH agents`) checks a file fully.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from .failure import SwitchError, bad_input

#: The seed's TTL of a record, seconds.
DEFAULT_TTL_SECONDS = 3600
#: Clock skew tolerated between the sender's and the gateway's clocks, seconds.
DEFAULT_FUTURE_SKEW_SECONDS = 120
#: Hermes's XMPP adapter's limit on a message, characters.
DEFAULT_MAX_BODY_CHARS = 10_000
#: Time limit of one HTTP API request, seconds (the Rust host's default).
DEFAULT_HTTP_TIMEOUT_SECONDS = 5


@dataclass(frozen=True)
class Agent:
    """One `[[agents]]` entry (WIT `agent`)."""

    name: str
    jid: str
    nick: str
    sessions: List[str]
    aliases: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class Settings:
    """The policy's WIT `settings` record; units as in `wit/types.wit`."""

    room: str
    ttl_seconds: int = DEFAULT_TTL_SECONDS
    future_skew_seconds: int = DEFAULT_FUTURE_SKEW_SECONDS
    max_body_chars: int = DEFAULT_MAX_BODY_CHARS
    legacy_agent: Optional[str] = None
    agents: List[Agent] = field(default_factory=list)


@dataclass(frozen=True)
class HttpApiConfig:
    """How the Python embedding posts: ejabberd's `mod_http_api`."""

    api_url: str
    #: `(user, password)` for HTTP basic authentication, or `None`.
    credentials: Optional[tuple]
    timeout_seconds: float


@dataclass(frozen=True)
class Config:
    """A read config: the policy's settings and the HTTP API to post through
    (`None` when `[xmpp] api_url` is absent: sends then fail with kind
    `transport`)."""

    path: Optional[Path]
    settings: Settings
    http_api: Optional[HttpApiConfig]


def hermes_home() -> Path:
    """`$HERMES_HOME` when set and not empty, else `~/.hermes` (Hermes's rule)."""
    home = os.environ.get("HERMES_HOME")
    return Path(home) if home else Path.home() / ".hermes"


def default_path() -> Path:
    """`$HERMES_HOME/session-switch.toml`."""
    return hermes_home() / "session-switch.toml"


def load(path: os.PathLike | str) -> Config:
    """Read and check the config at `path`.

    Errors (`SwitchError`, kind `bad-input`, naming the file): unreadable
    file, invalid TOML (with line and column), a missing or mistyped key,
    `api_user` without `api_password_env` (or the reverse), or a password
    variable that is not set."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise bad_input(
            f"cannot read config {path}: no such file (copy examples/session-switch.toml "
            "there, or pass the path)"
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise bad_input(f"cannot read config {path}: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise bad_input(f"config {path}: {e}") from None
    return parse(data, str(path), path)


def parse(data: Dict[str, Any], origin: str, path: Optional[Path] = None) -> Config:
    """Check parsed TOML `data`; `origin` names it in errors."""

    def fail(what: str) -> SwitchError:
        return bad_input(f"config {origin}: {what}")

    def get(table: Dict[str, Any], where: str, key: str, kind: type, default: Any = ...) -> Any:
        if key not in table:
            if default is ...:
                raise fail(f"{where}{key} is missing")
            return default
        value = table[key]
        # TOML booleans are not integers here.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise fail(f"{where}{key} must be {kind.__name__}, not {value!r}")
        return value

    def strings(table: Dict[str, Any], where: str, key: str, default: Any = ...) -> List[str]:
        value = get(table, where, key, list, default)
        if not all(isinstance(v, str) for v in value):
            raise fail(f"{where}{key} must be a list of strings")
        return list(value)

    xmpp = get(data, "", "xmpp", dict)
    redirect = get(data, "", "redirect", dict, {})
    raw_agents = get(data, "", "agents", list, [])
    if not raw_agents:
        raise fail("no [[agents]]: configure at least one agent")
    agents = []
    for i, a in enumerate(raw_agents):
        if not isinstance(a, dict):
            raise fail(f"agents[{i}] must be a table")
        where = f"agents[{i}]."
        name = get(a, where, "name", str)
        agents.append(
            Agent(
                name=name,
                jid=get(a, where, "jid", str),
                nick=get(a, where, "nick", str, name),
                sessions=strings(a, where, "sessions"),
                aliases=strings(a, where, "aliases", []),
            )
        )
    settings = Settings(
        room=get(xmpp, "[xmpp] ", "room", str),
        ttl_seconds=get(redirect, "[redirect] ", "ttl_seconds", int, DEFAULT_TTL_SECONDS),
        future_skew_seconds=get(
            redirect, "[redirect] ", "future_skew_seconds", int, DEFAULT_FUTURE_SKEW_SECONDS
        ),
        max_body_chars=get(xmpp, "[xmpp] ", "max_body_chars", int, DEFAULT_MAX_BODY_CHARS),
        legacy_agent=get(redirect, "[redirect] ", "legacy_agent", str, None),
        agents=agents,
    )
    for key in ("ttl_seconds", "future_skew_seconds", "max_body_chars"):
        value = getattr(settings, key)
        if not 0 <= value <= 0xFFFF_FFFF:
            raise fail(f"{key} = {value} is out of range (0 to 4294967295)")

    api_url = get(xmpp, "[xmpp] ", "api_url", str, None)
    user = get(xmpp, "[xmpp] ", "api_user", str, None)
    password_env = get(xmpp, "[xmpp] ", "api_password_env", str, None)
    if (user is None) != (password_env is None):
        raise fail("api_user and api_password_env go together (the variable holds the password)")
    credentials = None
    if user is not None:
        password = os.environ.get(password_env)
        if password is None:
            raise bad_input(
                f"api_password_env names {password_env}, which is not set: export it with the API password"
            )
        credentials = (user, password)
    timeout = get(xmpp, "[xmpp] ", "timeout_seconds", int, DEFAULT_HTTP_TIMEOUT_SECONDS)
    if timeout < 1:
        raise fail("timeout_seconds must be at least 1")
    http_api = HttpApiConfig(api_url, credentials, float(timeout)) if api_url else None
    return Config(path=path, settings=settings, http_api=http_api)
