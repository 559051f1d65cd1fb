"""Call-control settings and the prompt rules that name the control markers.

The LLM steers the call with markers in its reply text (see
:mod:`agent.session.markers`): ``[END_CALL]``, ``[TRANSFER:target]`` and
``[ASK_GUARDIAN:question]``; the call's opening turn is the user turn
``[CALL_OPENING]``. :func:`control_prompt` writes the rules with the markers
spelled exactly as the model sees them, only for what this call can do (no
transfer rule without transfer targets, no guardian rule without a guardian).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent.core.messages import Direction
from agent.session.markers import CALL_OPENING, END_CALL
from agent.telephony.phone import PhoneNumberError, parse_e164

__all__ = [
    "TransferConfig",
    "ToolGateConfig",
    "WatchdogConfig",
    "control_prompt",
    "parse_destination",
]

Mode = Literal["off", "shadow", "on"]
_TARGET_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
_SIP_URI = re.compile(r"sips?:[^\s@]+@[^\s]+|tel:\+[0-9]{8,15}")


def parse_destination(value: str) -> str:
    """A transfer destination: an E.164 number, ``tel:+...`` or a ``sip:user@host`` URI."""
    text = value.strip()
    if _SIP_URI.fullmatch(text):
        return text
    try:
        return parse_e164(text)
    except PhoneNumberError:
        raise ValueError(
            f"expected an E.164 number (+15551234567) or a sip:/tel: URI, got {value!r}"
        ) from None


class TransferConfig(BaseModel):
    """Where ``[TRANSFER:name]`` may send the call: name -> number or SIP URI."""

    model_config = ConfigDict(extra="forbid")
    targets: dict[str, str] = Field(default_factory=dict)
    #: ``cold``: [TRANSFER:name] hands the call over. ``warm`` (LiveKit lines): the
    #: agent calls the ``transfer_call`` tool, which dials the target, briefs the
    #: person who answers, then connects the caller (livekit's WarmTransferTask).
    mode: Literal["cold", "warm"] = "cold"

    @field_validator("targets")
    @classmethod
    def _targets(cls, value: dict[str, str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, dest in value.items():
            key = name.strip().lower()
            if not _TARGET_NAME.fullmatch(key):
                raise ValueError(
                    f"target name {name!r}: expected lowercase letters, digits, '_', '-' or '.'"
                )
            try:
                out[key] = parse_destination(str(dest))
            except ValueError as exc:
                raise ValueError(f"target {name!r}: {exc}") from None
        return out


class ToolGateConfig(BaseModel):
    """The tool gate: decision questions before any tool call that has side effects."""

    model_config = ConfigDict(extra="forbid")
    mode: Mode = "on"
    #: A decision model (see ``python -m agent models``); empty: the built-in heuristics.
    model: str = ""
    timeout: float = Field(default=2.5, gt=0.0, le=30.0)


class WatchdogConfig(BaseModel):
    """The watchdog: a background ballot every few agent requests."""

    model_config = ConfigDict(extra="forbid")
    mode: Mode = "shadow"
    every: int = Field(default=3, ge=1, le=100)
    model: str = ""
    timeout: float = Field(default=2.5, gt=0.0, le=30.0)


def control_prompt(
    *,
    direction: Direction | Literal["chat"],
    transfer_targets: list[str],
    guardian: bool,
    warm_transfer: bool = False,
) -> str:
    """The call-control rules for the system prompt, markers spelled exactly.

    The task is already in the agent's instructions ("Your task on this call"),
    which is what "say why you are calling" refers to.
    """
    if direction == "outbound":
        opening = (
            "the call just connected: introduce yourself once, say why you are calling, "
            "and ask a short check-in question."
        )
    else:
        opening = "the caller just connected: greet them and ask how you can help."
    # kept short: every request of the call carries these lines
    lines = [
        "Call control: write these markers exactly; they are never spoken.",
        f"- The user turn {CALL_OPENING} means {opening}",
        f"- To hang up, say goodbye, then write {END_CALL}.",
    ]
    if transfer_targets:
        names = ", ".join(transfer_targets)
        lines.append(
            f"- To transfer the caller, say so, then write [TRANSFER:name]; names: {names}."
        )
    if guardian:
        lines.append(
            "- If only the account holder can answer or approve, write "
            "[ASK_GUARDIAN:your question]; the caller waits on hold."
        )
    return "\n".join(lines)
