"""One HTTP request (a POST, or a GET) to an OpenAI-compatible server, bounded by one deadline for the whole
request (stdlib only).

- Deadline: ``seconds`` from sending the request to the answer's last byte. A socket's own timeout bounds each
  read only, so a server that sends its headers and then one byte a second would hold the request forever; a
  timer shuts the socket down at the deadline instead, and the request ends as timed out.
- Proxies: the environment's (``http_proxy``, ``https_proxy``, ``no_proxy``) for remote servers, as urllib does,
  but never for a server on this machine (a loopback name or address, or this machine's own name): cluster nodes
  often set ``http_proxy`` without ``no_proxy``, and no proxy reaches this machine's loopback. A failure through
  a proxy names the proxy (its credentials left out), since the server was never reached.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request


class ServerStatus(Exception):
    """The server answered with an HTTP error status; ``body`` is its text, ``retry_after`` its header in seconds."""

    def __init__(self, code: int, body: str, retry_after: float | None):
        super().__init__(f"HTTP {code}")
        self.code, self.body, self.retry_after = code, body, retry_after


class NoAnswer(Exception):
    """No whole answer arrived: the connection failed, broke, or the deadline passed (``timed_out``)."""

    def __init__(self, reason: str, timed_out: bool = False):
        super().__init__(reason)
        self.reason, self.timed_out = reason, timed_out


def post(url: str, payload: bytes, headers: dict, seconds: float) -> bytes:
    """The body of the answer to one POST, within ``seconds`` in all; ``ServerStatus`` or ``NoAnswer`` otherwise."""
    return _send(urllib.request.Request(url, data=payload, headers=headers, method="POST"), seconds)


def get(url: str, headers: dict, seconds: float) -> bytes:
    """The body of the answer to one GET, bounded and failing as ``post``."""
    return _send(urllib.request.Request(url, headers=headers, method="GET"), seconds)


def _send(request: urllib.request.Request, seconds: float) -> bytes:
    url = request.full_url
    proxy = proxy_for(url)
    with Deadline(seconds) as deadline:
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({} if proxy is None else urllib.request.getproxies()),
            _HTTPHandler(deadline), _HTTPSHandler(deadline),
        )
        try:
            with opener.open(request, timeout=seconds) as response:
                body = response.read()
        except urllib.error.HTTPError as err:
            raise ServerStatus(err.code, _error_body(err), _retry_after(err)) from None
        except (OSError, http.client.HTTPException) as err:
            if deadline.expired or isinstance(err, TimeoutError):
                raise NoAnswer(f"no answer within {seconds:g} s", timed_out=True) from None
            raise NoAnswer(_connection_failure(err, proxy)) from None
        if deadline.expired:  # an answer without a length, cut off by the deadline
            raise NoAnswer(f"no answer within {seconds:g} s", timed_out=True)
        return body


def proxy_for(url: str) -> str | None:
    """The proxy the environment sends ``url`` through (credentials left out), or None: none is set, ``no_proxy``
    names the host, or the host is this machine."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if is_this_machine(host) or urllib.request.proxy_bypass(host):
        return None
    proxy = urllib.request.getproxies().get(parts.scheme)
    return without_credentials(proxy) if proxy else None


def is_this_machine(host: str) -> bool:
    """A loopback or unspecified address, ``localhost`` (or a name under it), or this machine's own name."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host == socket.gethostname().lower()
    return address.is_loopback or address.is_unspecified


def without_credentials(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


class Deadline:
    """Shuts down every socket of one request when its time is up, whatever the socket is waiting for."""

    def __init__(self, seconds: float):
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:  # the plain socket's shutdown, under any TLS layer: it wakes a blocked read in another thread
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # already closed


class _Watched:
    """A connection that hands its socket to the request's Deadline once connected."""

    def __init__(self, *args, deadline: Deadline, **kwargs):
        super().__init__(*args, **kwargs)
        self._deadline = deadline

    def connect(self):
        super().connect()
        self._deadline.watch(self.sock)


class _WatchedHTTP(_Watched, http.client.HTTPConnection):
    pass


class _WatchedHTTPS(_Watched, http.client.HTTPSConnection):
    pass


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: Deadline):
        super().__init__()
        self._deadline = deadline

    def http_open(self, req):
        return self.do_open(_WatchedHTTP, req, deadline=self._deadline)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: Deadline):
        super().__init__()
        self._deadline = deadline

    def https_open(self, req):
        return self.do_open(_WatchedHTTPS, req, context=self._context, deadline=self._deadline)


def _connection_failure(err: Exception, proxy: str | None) -> str:
    reason = err.reason if isinstance(err, urllib.error.URLError) else f"{type(err).__name__}: {err}"
    if proxy is not None:
        return (f"cannot reach it through the proxy {proxy} (from the environment's proxy settings; add the server's "
                f"host to no_proxy if the proxy cannot reach it): {reason}")
    return f"cannot connect: {reason}"


def _error_body(err: urllib.error.HTTPError) -> str:
    try:
        return err.read().decode("utf-8", "replace")
    except (OSError, http.client.HTTPException):  # the body is only for the message
        return str(err.reason or "")


def _retry_after(err: urllib.error.HTTPError) -> float | None:
    try:
        return max(0.0, float(err.headers.get("Retry-After", "")))  # absent: "", a ValueError
    except (TypeError, ValueError):
        return None
