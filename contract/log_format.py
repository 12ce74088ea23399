"""Log output for dragoman's commands: readable text, or one JSON object per line for log pipelines.

Both formats scrub credentials (URL passwords, password/secret/token parameters), whatever logged
them. Lines about a job carry its id as ``job_id`` (passed with ``extra={"job_id": ...}``), so a log
search by id finds its story.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from typing import Literal

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")

# user:password@ inside any scheme://... URL (up to the last '@' before the host: a password may hold one)
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@\"']*:)[^\s/\"']+@")
# Names whose value is a credential: URL query parameters (?password=, &sslpassword=, ?token=),
# libpq key=value strings (password='x y'), reprs (webhook_secret='...') and dict/JSON keys.
_SECRET_NAME = r"[\w.-]*(?:password|passwd|secret|token|signature|credential|api[_-]?key|access[_-]?key)|pwd|pass"
_QUOTED = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
_SECRET_PARAMETER = re.compile(
    rf"(?P<head>(?<![\w.-])(?:{_SECRET_NAME})\s*=\s*)(?:{_QUOTED}|[^\s&;#'\",)\\]+)", re.IGNORECASE
)
_SECRET_KEY = re.compile(rf"(?P<head>(?P<q>[\"'])(?:{_SECRET_NAME})(?P=q)\s*:\s*)(?:{_QUOTED})", re.IGNORECASE)
# The ``extra=`` fields dragoman attaches to lines about a job (other libraries add their own, not shown).
CONTEXT_FIELDS = ("job_id", "entry_id", "consumer")


def scrub_secrets(text: str) -> str:
    """``text`` with every credential in it replaced by ``***``.

    That is URL passwords, and the values of password, secret, token and key parameters, whether in
    a URL's query, a libpq ``key=value`` string, a repr or a dict.
    """
    text = _URL_PASSWORD.sub(r"\g<head>***@", text)
    text = _SECRET_PARAMETER.sub(r"\g<head>***", text)
    return _SECRET_KEY.sub(r"\g<head>\g<q>***\g<q>", text)


class TextLogFormatter(logging.Formatter):
    """``time level logger: message key=value...`` with extras (such as ``job_id``) appended."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        """The classic line, extras appended, secrets scrubbed."""
        line = super().format(record)
        extras = " ".join(f"{k}={v}" for k, v in _extras(record).items())
        return scrub_secrets(f"{line} {extras}" if extras else line)


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``message``, extras, ``exception``."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a single JSON line, secrets scrubbed."""
        entry: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(_extras(record))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        # Scrubbed before encoding: a quoted secret is still one string then, and the line stays valid JSON.
        scrubbed = {key: scrub_secrets(value) if isinstance(value, str) else value for key, value in entry.items()}
        return json.dumps(scrubbed, ensure_ascii=False, default=str)


def configure_logging(level: str = "INFO", log_format: LogFormat = "text") -> None:
    """Send every logger's records (vLLM's included) to stderr in ``log_format``."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"unknown log format {log_format!r}; use one of {', '.join(LOG_FORMATS)}")
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLogFormatter() if log_format == "json" else TextLogFormatter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
    if log_format == "json":
        _route_vllm_logs_to_root()


def _route_vllm_logs_to_root() -> None:
    """vLLM logs through its own handler in its own format; hand its records to ours instead."""
    os.environ["VLLM_CONFIGURE_LOGGING"] = "0"  # read when vLLM is imported (later, by the engine)
    vllm_logger = logging.getLogger("vllm")
    for existing in list(vllm_logger.handlers):
        vllm_logger.removeHandler(existing)
    vllm_logger.propagate = True


def _extras(record: logging.LogRecord) -> dict[str, object]:
    return {name: record.__dict__[name] for name in CONTEXT_FIELDS if name in record.__dict__}
