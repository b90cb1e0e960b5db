"""What the OpenAI-compatible backend sends, and what it refuses to send: messages in the API's form, the replica
URLs, and secrets kept out of presets, run folders, ids and messages (an ``api_key_env`` that is a key, a URL with
credentials, a key a server echoes back)."""

from __future__ import annotations

import json
import os
import re
import urllib.parse

from garen_infer.errors import GarenError
from garen_infer.llm.types import Chat

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # what a POSIX shell can export
ECHO_CHARS = 8  # a run of this many of the key's characters in an answer or a message counts as an echo of the key


def openai_messages(chat: Chat) -> Chat:
    """The API wants each call's arguments as a JSON string (the chats keep dicts) and a tool result without the
    ``name`` that chat templates read."""
    out = []
    for message in chat:
        if message["role"] == "tool":
            message = {k: v for k, v in message.items() if k != "name"}
        if message.get("tool_calls"):
            calls = [{**c,
                      "function": {**c["function"],
                                   "arguments": json.dumps(c["function"]["arguments"], ensure_ascii=False)}}
                     for c in message["tool_calls"]]
            message = {**message, "tool_calls": calls}
        out.append(message)
    return out


def replica_urls(base_url) -> list[str]:
    """``base_url`` (one URL, or a list of replicas) as a list without trailing slashes or repeats."""
    urls = [base_url] if isinstance(base_url, str) else list(base_url) if isinstance(base_url, (list, tuple)) else []
    if not urls or not all(isinstance(u, str) and u.strip() for u in urls):
        raise GarenError(f"openai backend: base_url must be a URL or a list of URLs, not {base_url!r}")
    for url in urls:
        check_base_url(url, "base_url of the openai backend")
    return list(dict.fromkeys(u.strip().rstrip("/") for u in urls))


def check_secrets(spec: dict, where: str) -> None:
    """A preset's openai spec holds no secret: no key as ``api_key_env``, no password in ``base_url``."""
    if "api_key_env" in spec:
        check_api_key_env(spec["api_key_env"], f"{where}.api_key_env")
    urls = spec.get("base_url")
    for url in urls if isinstance(urls, list) else [urls]:
        check_base_url(url, f"{where}.base_url")


def check_base_url(url, where: str) -> None:
    """Refuse a URL with ``user:password@`` (or a user alone): the URL is written to config.json, named in the
    backend id and in every message. The message shows the URL with its credentials left out."""
    if not isinstance(url, str):
        return  # replica_urls names the wrong type
    parts = urllib.parse.urlsplit(url.strip())
    if "@" in parts.netloc:
        shown = urllib.parse.urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))
        raise GarenError(f"invalid setting {where}: {shown} holds credentials before '@'; give the URL without them "
                         "and the key through api_key_env (the name of a variable that holds it)")


def check_api_key_env(value, where: str) -> None:
    """Refuse an ``api_key_env`` that cannot be a variable's name, or that names no variable here and looks like a
    key itself (a run of 24 characters without an underscore, or a mix of lower case, upper case and digits, where
    a variable's name is words joined by underscores): the value is written into the run's config.json. The
    message never repeats the value."""
    if value is None:
        return
    if not isinstance(value, str):
        raise GarenError(f"invalid setting {where}: expected the name of an environment variable (or null), "
                         f"not a {type(value).__name__}")
    if not ENV_NAME.fullmatch(value):
        odd = next((c for c in value if not (c.isascii() and (c.isalnum() or c == "_"))), None)
        why = f"it contains {odd!r}" if odd else "it is empty" if not value else "it starts with a digit"
    elif value not in os.environ and (max(map(len, value.split("_"))) >= 24
                                      or all(
                                          any(test(c) for c in value)
                                          for test in (str.islower, str.isupper, str.isdigit)
                                      )):
        why = "it names no variable that is set and looks like a key itself"
    else:
        return
    raise GarenError(
        f"invalid setting {where}: the value ({len(value)} characters) is not the name of an environment "
        f"variable ({why}); "
        "put the key in a variable (export OPENAI_API_KEY=...) and give the variable's name (api_key_env: "
        "OPENAI_API_KEY), or null for a server that needs no key"
    )


def redact(text: str, key: str | None) -> str:
    """``text`` with every echo of ``key`` replaced by ``***``: the whole key, and any run of ``ECHO_CHARS`` or more
    of its characters (servers echo a key's first characters, its last ones, or the key cut short)."""
    if not key or not text:
        return text
    text = text.replace(key, "***")
    if len(key) < ECHO_CHARS:
        return text
    pieces = {key[i : i + ECHO_CHARS] for i in range(len(key) - ECHO_CHARS + 1)}
    if not any(piece in text for piece in pieces):
        return text
    covered = [False] * len(text)
    for i in range(len(text) - ECHO_CHARS + 1):
        if text[i : i + ECHO_CHARS] in pieces:
            covered[i : i + ECHO_CHARS] = [True] * ECHO_CHARS
    out = []
    for i, char in enumerate(text):
        if not covered[i]:
            out.append(char)
        elif i == 0 or not covered[i - 1]:
            out.append("***")  # one mark per echoed run
    return "".join(out)


def redacted(value, key: str):
    """A parsed answer with ``redact`` applied to every string in it (keys of mappings included)."""
    if isinstance(value, str):
        return redact(value, key)
    if isinstance(value, list):
        return [redacted(v, key) for v in value]
    if isinstance(value, dict):
        return {redact(k, key): redacted(v, key) for k, v in value.items()}
    return value
