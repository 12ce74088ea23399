"""Signed webhook deliveries: ``X-Dragoman-Signature: sha256=<hex HMAC of "<timestamp>.<body>">``.

A receiver recomputes the HMAC with the shared secret over the timestamp header, a dot and the
raw body, compares in constant time, and rejects old timestamps to stop replays.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.error
import urllib.request
from typing import Any

from contract.errors import DragomanError


class WebhookDeliveryError(DragomanError):
    """The receiver did not answer 2xx (or could not be reached); the delivery is retried."""


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The value of the ``X-Dragoman-Signature`` header."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def post_signed(url: str, payload: dict[str, Any], secret: str, timeout: float) -> int:
    """POST ``payload`` as JSON with the signature headers; return the status, raise unless 2xx."""
    body = json.dumps(payload, separators=(",", ":")).encode()
    timestamp = str(int(time.time()))
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "dragoman-webhook/1",
            "X-Dragoman-Timestamp": timestamp,
            "X-Dragoman-Signature": signature(secret, timestamp, body),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        raise WebhookDeliveryError(f"{url} answered {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise WebhookDeliveryError(f"{url} unreachable: {exc}") from None
