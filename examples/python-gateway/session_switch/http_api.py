"""ejabberd's `mod_http_api` as the post-to-room half of the atomic send
(DESIGN §5, §8), over the standard library's `http.client`: `POST
{api_url}/{command}` with the command's arguments as a JSON object. The twin
of the Rust host's host/bridge/src/transport/http_api.rs (same checks, same kinds).

Why `check_sender` exists (DESIGN §5, verified on ejabberd 23.01): the room
silently drops a groupchat message whose sender is not a MUC/Sub subscriber
(nor a service admin or an online occupant), and `send_message` still
answers 200. Only the server can tell, and only before the post.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import urllib.parse
from typing import Iterable, Optional, Tuple

from .failure import SwitchError, bad_input, transport

#: At most this much of an error answer is quoted in a message.
QUOTE_CHARS = 300


def one_line(text: str, limit: int = QUOTE_CHARS) -> str:
    """`text` on one line (whitespace runs collapsed), at most `limit` characters."""
    joined = " ".join(text.split())
    return joined if len(joined) <= limit else joined[:limit] + "…"


def split_room(room: str) -> Tuple[str, str]:
    """A bare room JID `name@service` as `(name, service)`, the arguments of
    ejabberd's room commands. `bad-input` for no `@`, an empty part, a
    resource, whitespace or control characters."""

    def bad(why: str) -> SwitchError:
        return bad_input(
            f"room JID {room!r} {why}; set [xmpp] room to the bare room JID, "
            "e.g. coregroup@conference.example.org"
        )

    if "/" in room:
        raise bad("has a resource (/…); a groupchat goes to the bare room JID")
    if any(c.isspace() or ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in room):
        raise bad("contains whitespace or control characters")
    name, at, service = room.partition("@")
    if not at or not name or not service or "@" in service:
        raise bad("is not of the form name@service")
    return name, service


def comparable_bare_jid(jid: str) -> str:
    """The bare part of `jid`, lower-cased: ejabberd stores JIDs prepped,
    which for the ASCII names agents use is lower case."""
    return jid.split("/", 1)[0].strip().lower()


def is_subscriber(sender: str, subscribers: Iterable[str]) -> bool:
    wanted = comparable_bare_jid(sender)
    return any(comparable_bare_jid(s) == wanted for s in subscribers)


def _xml_illegal(c: str) -> bool:
    """XML 1.0 `Char` excludes these (a Python str may also hold a lone
    surrogate, which no XML text may)."""
    o = ord(c)
    return (o < 0x20 and c not in "\t\n\r") or o in (0xFFFE, 0xFFFF) or 0xD800 <= o <= 0xDFFF


class HttpApi:
    """`mod_http_api` at `api_url` (e.g. `http://127.0.0.1:5280/api`), with
    optional HTTP basic credentials `(user, password)` (ejabberd's user is a
    JID). `timeout` (seconds) bounds connecting and then each read."""

    def __init__(self, api_url: str, credentials: Optional[tuple] = None, timeout: float = 5.0):
        self.api_url = api_url.strip().rstrip("/")
        parts = urllib.parse.urlsplit(self.api_url)

        def bad(why: str) -> SwitchError:
            return bad_input(
                f"[xmpp] api_url {self.api_url!r} {why}; give the mod_http_api base, e.g. "
                "http://127.0.0.1:5280/api"
            )

        if parts.scheme not in ("http", "https"):
            raise bad("is not an http:// or https:// URL")
        if not parts.hostname:
            raise bad("has no host")
        if "@" in parts.netloc:
            raise bad("holds credentials; use api_user and api_password_env instead")
        if parts.query:
            raise bad("has a query (?…)")
        if timeout <= 0:
            raise bad_input("the HTTP time limit is zero; give it in seconds, e.g. 5")
        self._parts = parts
        self.timeout = timeout
        self._authorization = None
        if credentials is not None:
            user, password = credentials
            if ":" in user:
                raise bad_input(
                    f"the HTTP API user {user!r} contains ':', which basic authentication "
                    "cannot carry (RFC 7617)"
                )
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            self._authorization = f"Basic {token}"

    def __repr__(self) -> str:  # credentials stay out of logs
        return f"HttpApi({self.api_url!r}, credentials={'…' if self._authorization else None})"

    def _call(self, command: str, args: dict) -> Tuple[int, str]:
        """POST `args` to `{api_url}/{command}`; `(status, text)` of any
        answer. Raises `_NotSent` when the request cannot have reached the
        server, `_MaybeSent` when it may have (no answer after it went out)."""
        url = f"{self.api_url}/{command}"
        cls = http.client.HTTPSConnection if self._parts.scheme == "https" else http.client.HTTPConnection
        conn = cls(self._parts.hostname, self._parts.port, timeout=self.timeout)
        body = json.dumps(args, ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._authorization:
            headers["Authorization"] = self._authorization
        try:
            try:
                conn.connect()
            except socket.gaierror:
                raise _NotSent(f"cannot resolve the host of {url}") from None
            except socket.timeout:
                raise _NotSent(
                    f"cannot reach POST {url} within {self.timeout} s (connecting timed out)"
                ) from None
            except OSError as e:
                raise _NotSent(f"cannot connect to {url}: {e}") from None
            try:
                conn.request("POST", f"{self._parts.path}/{command}", body=body, headers=headers)
            except OSError as e:
                # The request did not go out whole: the server cannot act on it.
                raise _NotSent(f"POST {url} failed while sending: {e}") from None
            try:
                response = conn.getresponse()
                text = response.read().decode("utf-8", "replace")
            except socket.timeout:
                raise _MaybeSent(f"no answer from POST {url} within {self.timeout} s") from None
            except (OSError, http.client.HTTPException) as e:
                raise _MaybeSent(f"the connection to POST {url} broke before an answer came ({e})") from None
            return response.status, text
        finally:
            conn.close()

    def _refused(self, command: str, status: int, text: str) -> SwitchError:
        url = f"{self.api_url}/{command}"
        said = one_line(text)
        if status == 404:
            return transport(
                f"POST {url} answered 404 ({said}); check [xmpp] api_url: it is the base the "
                "mod_http_api handler is mounted on (e.g. http://127.0.0.1:5280/api)"
            )
        if status in (401, 403):
            return transport(
                f"POST {url} answered {status} ({said}); the API refused this client: set "
                f"api_user / api_password_env, or allow {command} in ejabberd's api_permissions"
            )
        return transport(f"POST {url} answered HTTP {status}: {said}")

    def check_sender(self, sender: str, room: str) -> None:
        """Raise unless the room accepts `sender` (a bare JID) as a sender:
        `POST get_subscribers {"name", "service"}` must list it. Errors:
        `not-accepted` (not a subscriber, with the command that fixes it;
        the room does not exist), `bad-input` (room JID, empty sender),
        `transport` (unreachable, refused, a time-out)."""
        name, service = split_room(room)
        if not sender.strip():
            raise bad_input("the sender JID is empty; set the agent's jid in the config")
        try:
            status, text = self._call("get_subscribers", {"name": name, "service": service})
        except (_NotSent, _MaybeSent) as e:
            raise transport(f"{e}; is ejabberd running at [xmpp] api_url?") from None
        if status == 400 and "room does not exist" in text.lower():
            raise SwitchError(
                "not-accepted",
                f"room {room} does not exist on the server ({one_line(text)}); check [xmpp] room "
                "in the config, or create the room with allow_subscription=true",
            )
        if status != 200:
            raise self._refused("get_subscribers", status, text)
        try:
            subscribers = json.loads(text)
            if not isinstance(subscribers, list) or not all(isinstance(s, str) for s in subscribers):
                raise ValueError("not a list of strings")
        except ValueError as e:
            raise transport(
                f"POST {self.api_url}/get_subscribers answered 200 but not a JSON list of JIDs "
                f"({e}): {one_line(text)}"
            ) from None
        if not is_subscriber(sender, subscribers):
            bare = comparable_bare_jid(sender)
            nick = bare.split("@", 1)[0]
            raise SwitchError(
                "not-accepted",
                f"{bare} is not a MUC/Sub subscriber of room {room}, so the room would drop its "
                "messages while ejabberd still reports success; subscribe it once: "
                f"ejabberdctl subscribe_room {bare} {nick} {room} urn:xmpp:mucsub:nodes:messages",
            )

    def post(self, sender: str, room: str, body: str) -> None:
        """`POST send_message {"type": "groupchat", "from", "to", "subject":
        "", "body"}` (all five keys: 23.01 answers 400 without `subject`).
        Errors: `bad-input` (empty sender or body, a character XML 1.0
        forbids: nothing is posted); `unknown-outcome` (no answer after the
        request went out: the room may have the message); `transport`."""
        split_room(room)
        if not sender.strip():
            raise bad_input("the sender JID is empty; set the agent's jid in the config")
        if not body:
            raise bad_input("the message body is empty; nothing to post")
        for index, c in enumerate(body):
            if _xml_illegal(c):
                raise bad_input(
                    f"the message body holds U+{ord(c):04X} at character {index}, which XML 1.0 "
                    "forbids and which would break every client in the room; nothing was posted "
                    "(remove control characters)"
                )
        args = {"type": "groupchat", "from": sender, "to": room, "subject": "", "body": body}
        try:
            status, text = self._call("send_message", args)
        except _NotSent as e:
            raise transport(f"{e}; nothing was posted: is ejabberd running?") from None
        except _MaybeSent as e:
            raise SwitchError(
                "unknown-outcome",
                f"{e}; the room may have the message: look before sending it again",
            ) from None
        if status != 200:
            raise self._refused("send_message", status, text)


class _NotSent(Exception):
    """The request cannot have reached the server."""


class _MaybeSent(Exception):
    """The request may have reached the server; no answer came."""
