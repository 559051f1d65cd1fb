"""Logging set-up. Transcripts, phone numbers and DTMF digits never go in a message body:
they go in structured fields (``extra=``), which :class:`RedactingFilter` masks."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

__all__ = ["setup_logging", "RedactingFilter", "SENSITIVE_FIELDS"]

SENSITIVE_FIELDS = frozenset({"text", "transcript", "number", "phone", "digits", "caller"})
_STD = set(vars(logging.makeLogRecord({})))


class RedactingFilter(logging.Filter):
    """Masks sensitive structured fields unless ``redact`` is False."""

    def __init__(self, redact: bool = True) -> None:
        super().__init__()
        self.redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        if self.redact:
            for key in SENSITIVE_FIELDS:
                if key in record.__dict__:
                    record.__dict__[key] = "***"
        return True


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for k, v in record.__dict__.items():
            if k not in _STD and not k.startswith("_"):
                data[k] = v if isinstance(v, str | int | float | bool | None) else repr(v)
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data)


def setup_logging(*, verbose: bool, json_logs: bool, redact: bool = True) -> None:
    """Configure the root logger for the CLI (stderr)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RedactingFilter(redact))
    if json_logs:
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    # livekit is chatty at INFO; keep it at WARNING unless asked
    logging.getLogger("livekit").setLevel(logging.INFO if verbose else logging.ERROR)
    logging.getLogger("livekit.agents").setLevel(logging.INFO if verbose else logging.ERROR)
