"""Signed webhook deliveries: ``X-Dragoman-Signature: sha256=<hex HMAC of "<timestamp>.<body>">``.

A receiver recomputes the HMAC with the shared secret over the timestamp header, a dot and the
raw body, compares in constant time, and rejects old timestamps to stop replays.

A delivery goes only to public addresses (or to networks listed in
``DRAGOMAN_WEBHOOK_ALLOWED_NETWORKS``; see :mod:`orchestrator.webhook_addresses`), connects to the
addresses it vetted, follows no redirect, and is over by its deadline whatever the receiver does.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from contextlib import suppress
from typing import Any
from urllib.parse import urlsplit

from contract.errors import DragomanError
from contract.services import redact_url
from orchestrator.webhook_addresses import Network, ResolvedAddress, refusal, resolve


class WebhookDeliveryError(DragomanError):
    """The receiver did not answer 2xx (or could not be reached in time); the delivery is retried."""


class WebhookRefusedError(WebhookDeliveryError):
    """The callback URL points somewhere deliveries may not go (an internal address, not http(s))."""


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The value of the ``X-Dragoman-Signature`` header."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def post_signed(
    url: str, payload: dict[str, Any], secret: str, timeout: float, allowed_networks: Sequence[Network] = ()
) -> int:
    """POST ``payload`` as JSON with the signature headers within ``timeout`` seconds in all; return the status.

    Raises :class:`WebhookRefusedError` for a URL that may not be delivered to and
    :class:`WebhookDeliveryError` unless the receiver answers 2xx in time (a redirect included).
    """
    body = json.dumps(payload, separators=(",", ":")).encode()
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "dragoman-webhook/1",
        "X-Dragoman-Timestamp": timestamp,
        "X-Dragoman-Signature": signature(secret, timestamp, body),
    }
    return _post(url, body, headers, timeout, allowed_networks)


def _post(url: str, body: bytes, headers: dict[str, str], timeout: float, allowed: Sequence[Network]) -> int:
    shown = redact_url(url)
    deadline = time.monotonic() + timeout
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise WebhookRefusedError(f"{shown} is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookRefusedError(f"{shown}: webhooks are delivered to http:// and https:// URLs only")
    try:
        addresses = resolve(parts.hostname, port)
    except OSError as exc:
        raise WebhookDeliveryError(f"{shown}: cannot resolve {parts.hostname}: {exc}") from None
    for resolved in addresses:
        reason = refusal(resolved.address, allowed)
        if reason is not None:
            raise WebhookRefusedError(
                f"{shown}: {parts.hostname} is {resolved.address}, a {reason}; webhooks go to public addresses "
                "only (list an internal receiver's network in DRAGOMAN_WEBHOOK_ALLOWED_NETWORKS)"
            )
    tls = ssl.create_default_context() if parts.scheme == "https" else None
    connection = _PinnedConnection(parts.hostname, port, addresses, deadline, tls)
    watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), connection.cut)
    watchdog.daemon = True
    watchdog.start()
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    too_late = WebhookDeliveryError(f"{shown}: no answer within the {timeout:g}s delivery deadline")
    try:
        connection.request("POST", target, body=body, headers=headers)
        status = int(connection.getresponse().status)
    except (OSError, http.client.HTTPException) as exc:
        if connection.was_cut or isinstance(exc, TimeoutError):
            raise too_late from None
        raise WebhookDeliveryError(f"{shown} unreachable: {exc}") from None
    finally:
        watchdog.cancel()
        connection.close()
    if connection.was_cut:  # the cut ended the answer early: what was parsed of it is not to be trusted
        raise too_late
    if 300 <= status < 400:
        raise WebhookDeliveryError(f"{shown} answered {status}; redirects are not followed (use the final URL)")
    if not 200 <= status < 300:
        raise WebhookDeliveryError(f"{shown} answered {status}")
    return status


class _PinnedConnection(http.client.HTTPConnection):
    """HTTP(S) to addresses already vetted (no second DNS lookup); TLS is checked against the host name.

    :meth:`cut` (the deadline's watchdog, from another thread) shuts the socket down, which ends
    whatever read or write the delivery is blocked in.
    """

    def __init__(
        self, host: str, port: int, addresses: list[ResolvedAddress], deadline: float, tls: ssl.SSLContext | None
    ) -> None:
        self.default_port = 443 if tls is not None else 80  # the Host header leaves the default port out
        super().__init__(host, port, timeout=max(0.001, deadline - time.monotonic()))
        self._addresses = addresses
        self._deadline = deadline
        self._tls = tls
        self.was_cut = False

    def connect(self) -> None:
        """Connect to the first vetted address that answers, then do the TLS handshake if https."""
        last: OSError = TimeoutError("no address to connect to")
        for resolved in self._addresses:
            left = self._deadline - time.monotonic()
            if left <= 0 or self.was_cut:
                raise TimeoutError("delivery deadline reached while connecting")
            sock = socket.socket(resolved.family, socket.SOCK_STREAM)
            sock.settimeout(left)
            try:
                sock.connect(resolved.sockaddr)
            except OSError as exc:
                sock.close()
                last = exc
                continue
            if self._tls is None:
                self.sock = sock
                return
            wrapped = self._tls.wrap_socket(sock, server_hostname=self.host, do_handshake_on_connect=False)
            self.sock = wrapped  # before the handshake, so that the watchdog can cut a slow one
            wrapped.do_handshake()
            return
        raise last

    def cut(self) -> None:
        """End the delivery now: the deadline has passed."""
        self.was_cut = True
        sock = self.sock
        if sock is not None:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
