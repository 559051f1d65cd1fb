"""Logging set-up: call and turn ids on every record, redaction, JSON lines.

Transcripts, phone numbers and DTMF digits never go in a message body: they go in
structured fields (``extra=``), which :class:`RedactingFilter` masks. As a safety
net it also masks E.164 numbers and runs of 7 or more digits in message bodies,
exception text and every other string field.

Redaction is on unless turned off explicitly, for debugging: ``setup_logging(...,
redact=False)`` or ``CALLRT_LOG_REDACT=0``; a WARNING line then says so.
``CALLRT_LOG_JSON=1`` turns JSON lines on for any command.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any, ParamSpec, TypeVar

from agent.telephony.phone import mask_number

__all__ = [
    "setup_logging",
    "RedactingFilter",
    "ContextFilter",
    "JsonFormatter",
    "CallLogContext",
    "call_context",
    "call_logging",
    "current_call",
    "turn_context",
    "set_turn",
    "SENSITIVE_FIELDS",
]

#: Fields holding a phone number: shown as ``+1********67`` when the value parses.
PHONE_FIELDS = frozenset(
    {"number", "phone", "phone_number", "caller", "caller_number", "caller_id"}
    | {"callee", "callee_number", "destination", "sip_call_to"}
)
#: Fields holding what people said or typed, secrets, or model input/output about them.
TEXT_FIELDS = frozenset(
    {"text", "transcript", "user_transcript", "utterance", "reply", "say", "sentence"}
    | {"digits", "dtmf", "dtmf_inputs", "pin", "passphrase", "password", "secret"}
    | {"token", "question", "answer", "instructions", "prompt", "arguments", "args"}
    | {"content", "chat_ctx", "output"}
)
#: Masked fields. Keys with a ``pii`` dot segment (livekit's ``lk.pii.*``) are masked too.
SENSITIVE_FIELDS = PHONE_FIELDS | TEXT_FIELDS

_E164 = re.compile(r"\+\d[\d\s\-().]{6,}\d")
_DIGIT_RUN = re.compile(r"(?<!\w)\d{7,}(?!\w)")
_STD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
_FALSE = {"0", "false", "no", "off"}
_TRUE = {"1", "true", "yes", "on"}

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class CallLogContext:
    """One call's logging context, shared by every task of the call.

    Attributes:
        call_id: the call's id.
        turn_id: the call's current turn (set by :meth:`set_turn`), if any yet.
    """

    call_id: str
    turn_id: str | None = None

    def set_turn(self, turn_id: str | None) -> None:
        """Make ``turn_id`` the call's current turn, for every task of the call."""
        self.turn_id = turn_id


# The call context is a shared object, so a turn set by one task of the call is seen
# by all; turn_context is task-local and wins over the call's current turn.
_call: ContextVar[CallLogContext | None] = ContextVar("callrt_log_call", default=None)
_turn: ContextVar[str | None] = ContextVar("callrt_log_turn", default=None)


@contextlib.contextmanager
def call_context(call_id: str) -> Iterator[CallLogContext]:
    """Tag every record logged inside (and in tasks created inside) with ``call_id``."""
    ctx = CallLogContext(call_id)
    token = _call.set(ctx)
    try:
        yield ctx
    finally:
        _call.reset(token)


def call_logging(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Run a coroutine function in :func:`call_context` of its ``call_id`` keyword argument."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with call_context(str(kwargs["call_id"])):
            return await fn(*args, **kwargs)

    return wrapper


def current_call() -> CallLogContext | None:
    """The logging context of the call running here, if any."""
    return _call.get()


@contextlib.contextmanager
def turn_context(turn_id: str) -> Iterator[None]:
    """Tag records logged inside (by this task and tasks created inside) with ``turn_id``."""
    token = _turn.set(turn_id)
    try:
        yield
    finally:
        _turn.reset(token)


def set_turn(turn_id: str | None) -> None:
    """Set the current call's turn (no-op outside a :func:`call_context`)."""
    ctx = _call.get()
    if ctx is not None:
        ctx.set_turn(turn_id)


class ContextFilter(logging.Filter):
    """Adds ``call_id`` / ``turn_id`` from the context to records that lack them."""

    def filter(self, record: logging.LogRecord) -> bool:
        ctx = _call.get()
        fields = record.__dict__
        if ctx is not None and fields.get("call_id") is None:
            fields["call_id"] = ctx.call_id
        turn = _turn.get() or (ctx.turn_id if ctx is not None else None)
        if turn is not None and fields.get("turn_id") is None:
            fields["turn_id"] = turn
        return True


def scrub(text: str) -> str:
    """Mask E.164 numbers and runs of 7 or more digits in free text."""
    text = _E164.sub(lambda m: mask_number(m.group()), text)
    return _DIGIT_RUN.sub("***", text)


def _mask_text(value: Any) -> Any:
    if value is None:
        return None
    return f"*** ({len(value)} chars)" if isinstance(value, str) else "***"


def _mask_phone(value: Any) -> Any:
    if not isinstance(value, str) or not value:
        return _mask_text(value)
    if "*" in value:  # already masked by the caller (mask_number)
        return value
    masked = mask_number(value)
    return masked if masked != "***" else _mask_text(value)


def _redact(key: str, value: Any) -> Any:
    name = key.rsplit(".", 1)[-1].lower()
    if name in PHONE_FIELDS:
        return _mask_phone(value)
    if name in TEXT_FIELDS or "pii" in key.split("."):
        return _mask_text(value)
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: _redact(str(k), v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact(key, v) for v in value]
    return value


class RedactingFilter(logging.Filter):
    """Masks sensitive structured fields and numbers in message bodies, unless ``redact`` is False.

    Fields in :data:`SENSITIVE_FIELDS` (also inside dict-valued fields) are masked:
    phone numbers as ``+1********67``, text as ``*** (N chars)``. Message bodies,
    exception text and other string fields have numbers masked by :func:`scrub`.
    """

    def __init__(self, redact: bool = True) -> None:
        super().__init__()
        self.redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        # a record can reach several handlers: mask it once
        if not self.redact or record.__dict__.get("_redacted"):
            return True
        record.__dict__["_redacted"] = True
        for key, value in list(record.__dict__.items()):
            if key not in _STD and not key.startswith("_") and key not in ("call_id", "turn_id"):
                record.__dict__[key] = _redact(key, value)
        try:
            msg = record.getMessage()
        except Exception:  # a bad format string: the handler reports it when formatting
            return True
        record.msg, record.args = scrub(msg), None
        if record.exc_info and not record.exc_text:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = scrub(record.stack_info)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, call_id, turn_id, fields, exc."""

    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        data: dict[str, Any] = {
            "ts": ts.replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STD and not key.startswith("_") and key not in data:
                data[key] = value
        if record.exc_info:
            data["exc"] = record.exc_text or self.formatException(record.exc_info)
        if record.stack_info:
            data["stack"] = self.formatStack(record.stack_info)
        try:
            return json.dumps(data, default=repr)
        except (TypeError, ValueError):  # non-string dict keys, circular values
            plain = (str, int, float, bool, type(None))
            return json.dumps({k: v if isinstance(v, plain) else repr(v) for k, v in data.items()})


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ids = [record.__dict__.get(k) for k in ("call_id", "turn_id")]
        shown = " ".join(str(v) for v in ids if v is not None)
        record.__dict__["_ids"] = f" [{shown}]" if shown else ""
        return super().format(record)


def _env(name: str, values: set[str]) -> bool:
    return os.environ.get(name, "").strip().lower() in values


def setup_logging(
    *, verbose: bool, json_logs: bool, redact: bool = True, stream: IO[str] | None = None
) -> None:
    """Configure the root logger: one handler writing to ``stream`` (default stderr).

    Args:
        verbose: INFO (livekit too) instead of WARNING (livekit: ERROR).
        json_logs: JSON lines (also turned on by ``CALLRT_LOG_JSON=1``).
        redact: mask sensitive fields; False (or ``CALLRT_LOG_REDACT=0``) shows them.
        stream: where lines go (tests).
    """
    json_logs = json_logs or _env("CALLRT_LOG_JSON", _TRUE)
    off_by = None
    if not redact:
        off_by = "redact=False"
    elif _env("CALLRT_LOG_REDACT", _FALSE):
        off_by = "CALLRT_LOG_REDACT"
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(ContextFilter())
    handler.addFilter(RedactingFilter(off_by is None))
    if json_logs:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(_TextFormatter("%(levelname)s %(name)s%(_ids)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    # livekit is chatty at INFO; keep it at ERROR unless asked
    logging.getLogger("livekit").setLevel(logging.INFO if verbose else logging.ERROR)
    logging.getLogger("livekit.agents").setLevel(logging.INFO if verbose else logging.ERROR)
    if off_by is not None:
        logging.getLogger("agent.app.logs").warning(
            "log redaction is off: phone numbers, transcripts and DTMF digits are logged as is",
            extra={"turned_off_by": off_by},
        )
