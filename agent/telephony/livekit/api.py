"""The LiveKit server API operations one phone call needs.

:class:`LiveKitTelephony` wraps ``livekit.api.LiveKitAPI`` (Twirp over HTTP,
protobuf bodies): create the call's room, dispatch the agent to it with a
:class:`DialJob` as metadata, dial the callee over the outbound SIP trunk and
wait for the answer, transfer the call, and hang up by deleting the room.

A call that is not answered is an outcome, not an error: :meth:`dial` returns
a :class:`DialResult` whose status :func:`answer_status` derives from the SIP
response the server reports (``sip_status_code`` in the Twirp error metadata).
Phone numbers never appear in a log message body; they go, masked, in the
``number`` field of ``extra``.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import aiohttp
from google.protobuf.duration_pb2 import Duration
from livekit.api import LiveKitAPI, ServerError, ServerErrorCode
from livekit.protocol.agent_dispatch import CreateAgentDispatchRequest
from livekit.protocol.room import CreateRoomRequest, DeleteRoomRequest
from livekit.protocol.sip import (
    CreateSIPParticipantRequest,
    SIPTransferReason,
    SIPTransferStatus,
    TransferSIPParticipantRequest,
)

from agent.core.messages import AnswerStatus
from agent.telephony.phone import PhoneNumberError, mask_number, parse_e164

__all__ = [
    "LiveKitConfigError",
    "LiveKitSettings",
    "DialResult",
    "DialJob",
    "TransferError",
    "LiveKitTelephony",
    "answer_status",
    "transfer_uri",
]

logger = logging.getLogger("agent.telephony.livekit.api")

_REQUIRED_ENV = ("LIVEKIT_URL", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET")
_URL_SCHEMES = ("ws://", "wss://", "http://", "https://")
_E164_EXPECTED = "expected an E.164 number like +15551234567"

#: SIP final responses that mean something other than "failed".
_SIP_STATUS: dict[int, AnswerStatus] = {
    486: "busy",  # Busy Here
    600: "busy",  # Busy Everywhere
    480: "no-answer",  # Temporarily Unavailable
    408: "no-answer",  # Request Timeout
    603: "rejected",  # Decline
}
_TRANSFER_REASON: dict[str, AnswerStatus] = {
    "STR_RINGING_TIMEOUT": "no-answer",
    "STR_REJECTED": "rejected",
}
# Digit runs long enough to be a phone number; masked out of server messages.
_NUMBERISH = re.compile(r"\+?\d[\d\s().-]{5,}\d")


class LiveKitConfigError(ValueError):
    """LiveKit settings that are missing or malformed; the message is one line."""


class TransferError(RuntimeError):
    """A SIP transfer that did not complete.

    Attributes:
        status: what happened at the transfer target (``busy``, ``no-answer``,
            ``rejected`` or ``failed``).
        sip_status_code: the SIP response code, when the server reported one.
        reason: a short description without phone numbers.
    """

    def __init__(self, status: AnswerStatus, reason: str, sip_status_code: int | None) -> None:
        super().__init__(f"transfer failed ({status}): {reason}")
        self.status = status
        self.reason = reason
        self.sip_status_code = sip_status_code


@dataclass(frozen=True)
class LiveKitSettings:
    """Where the LiveKit server is and how calls are placed through it.

    Attributes:
        url: the server URL (``wss://...`` or ``https://...``).
        api_key: the API key.
        api_secret: the API secret (never shown in ``repr``).
        sip_trunk_id: the outbound SIP trunk (``ST_...``); empty when the
            deployment only takes inbound calls.
        agent_name: the name the worker registers under for explicit dispatch.
        ringing_timeout: seconds an outbound call may ring before it is
            given up as not answered.
        max_call_duration: seconds after which the server ends a call.
    """

    url: str
    api_key: str
    api_secret: str = field(repr=False)
    sip_trunk_id: str = ""
    agent_name: str = "callrt"
    ringing_timeout: float = 30.0
    max_call_duration: float = 3600.0

    def __post_init__(self) -> None:
        if not self.ringing_timeout > 0:
            raise LiveKitConfigError(
                f"ringing_timeout: expected seconds > 0, got {self.ringing_timeout!r}"
            )
        if not self.max_call_duration > 0:
            raise LiveKitConfigError(
                f"max_call_duration: expected seconds > 0, got {self.max_call_duration!r}"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LiveKitSettings:
        """Read the settings from environment variables.

        ``LIVEKIT_URL``, ``LIVEKIT_API_KEY`` and ``LIVEKIT_API_SECRET`` are
        required; ``LIVEKIT_SIP_OUTBOUND_TRUNK`` and ``CALLRT_AGENT_NAME`` are
        optional.

        Args:
            env: the variables; ``os.environ`` when None.

        Raises:
            LiveKitConfigError: one line naming every missing variable, or
                naming ``LIVEKIT_URL`` when it is not a ws(s)/http(s) URL.
        """
        env = os.environ if env is None else env

        def get(name: str) -> str:
            return (env.get(name) or "").strip()

        missing = [name for name in _REQUIRED_ENV if not get(name)]
        if missing:
            raise LiveKitConfigError(
                f"environment: missing {', '.join(missing)}; expected the LiveKit server "
                "URL (wss://...) and an API key and secret"
            )
        url = get("LIVEKIT_URL")
        if not url.startswith(_URL_SCHEMES):
            raise LiveKitConfigError(
                f"LIVEKIT_URL: expected a ws://, wss://, http:// or https:// URL, got {url!r}"
            )
        return cls(
            url=url,
            api_key=get("LIVEKIT_API_KEY"),
            api_secret=get("LIVEKIT_API_SECRET"),
            sip_trunk_id=get("LIVEKIT_SIP_OUTBOUND_TRUNK"),
            agent_name=get("CALLRT_AGENT_NAME") or "callrt",
        )


def _e164(value: str, key: str) -> str:
    # The message names the key but never echoes the value: it may be a real number.
    try:
        return parse_e164(value)
    except PhoneNumberError as exc:
        raise ValueError(f"{key!r}: {_E164_EXPECTED} ({exc.reason})") from None


@dataclass(frozen=True)
class DialResult:
    """How an outbound dial ended.

    Attributes:
        status: ``answered``, or why not (``busy``, ``no-answer``, ``rejected``,
            ``failed``).
        participant_identity: the callee's participant identity in the room.
        sip_status_code: the SIP response code of a failed call, when known.
        reason: a short description of a failure, without phone numbers.
    """

    status: AnswerStatus
    participant_identity: str
    sip_status_code: int | None = None
    reason: str = ""


@dataclass(frozen=True)
class DialJob:
    """What an outbound dispatch carries to the worker, as JSON metadata.

    ``number`` and ``caller_id`` are checked and stored in canonical E.164 form;
    neither is shown in ``repr``.
    """

    number: str = field(repr=False)
    agent_config: str = "default"
    campaign_id: str | None = None
    contact_id: str | None = None
    caller_id: str | None = field(default=None, repr=False)
    #: the campaign attempt this dial is (the worker records the call's outcome under it)
    attempt_id: str | None = None
    #: the contact's variables, filled into the agent's texts
    variables: dict[str, str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "number", _e164(self.number, "number"))
        if self.caller_id is not None:
            object.__setattr__(self, "caller_id", _e164(self.caller_id, "caller_id"))

    def to_metadata(self) -> str:
        """The job as compact JSON (keys whose value is None are left out)."""
        data = {k: v for k, v in asdict(self).items() if v is not None}
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_metadata(cls, text: str) -> DialJob:
        """Parse dispatch metadata written by :meth:`to_metadata`.

        Raises:
            ValueError: not a JSON object, an unknown key, a missing ``number``,
                a value that is not a string, or a key holding no E.164 number;
                the message names the key.
        """
        where = "dispatch metadata"
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"{where}: expected a JSON object, got invalid JSON ({exc.msg} at {exc.pos})"
            ) from None
        if not isinstance(data, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(data).__name__}")
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ValueError(
                f"{where}: unknown key {unknown[0]!r}; expected keys {', '.join(known)}"
            )
        if "number" not in data:
            raise ValueError(f"{where}: missing key 'number' (the E.164 number to dial)")
        for key, value in data.items():
            optional = key not in ("number", "agent_config")
            if key == "variables" and value is not None:
                if not isinstance(value, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in value.items()
                ):
                    raise ValueError(f"{where}: 'variables': expected an object of strings")
                continue
            if not isinstance(value, str) and not (optional and value is None):
                raise ValueError(f"{where}: {key!r}: expected a string, got {type(value).__name__}")
        try:
            return cls(**data)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None


def _sip_code(exc: BaseException) -> int | None:
    raw = exc.metadata.get("sip_status_code") if isinstance(exc, ServerError) else None
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _sip_outcome(code: int | None, transfer_reason: str) -> AnswerStatus | None:
    if code is not None:
        return _SIP_STATUS.get(code, "failed")
    return _TRANSFER_REASON.get(transfer_reason)


def answer_status(exc: BaseException) -> AnswerStatus:
    """What a failed dial (or transfer) means for the call.

    SIP 486 and 600 are ``busy``; 480, 408 and a ringing timeout (a Twirp
    ``deadline_exceeded``, a transfer's ``STR_RINGING_TIMEOUT``, or a client-side
    timeout while waiting for the answer) are ``no-answer``; 603 is
    ``rejected``; anything else, including errors that are not about SIP at
    all, is ``failed``.
    """
    if isinstance(exc, ServerError):
        status = _sip_outcome(_sip_code(exc), exc.metadata.get("sip_transfer_reason", ""))
        if status is not None:
            return status
    match exc:
        case ServerError(code=ServerErrorCode.DEADLINE_EXCEEDED):
            return "no-answer"
        case aiohttp.ConnectionTimeoutError():
            return "failed"  # the server was not reached: nothing rang
        case TimeoutError():
            return "no-answer"
    return "failed"


def _scrub(text: str) -> str:
    return _NUMBERISH.sub("***", text)


def _sip_text(code: int | None, phrase: str, transfer_reason: str) -> str:
    sip = f"sip {code} {phrase}".strip() if code is not None else ""
    return _scrub(" ".join(part for part in (transfer_reason, sip) if part))


def _reason(exc: BaseException) -> str:
    """A short, number-free description of a failure, for results and logs."""
    if isinstance(exc, ServerError):
        meta = exc.metadata
        text = _sip_text(
            _sip_code(exc), meta.get("sip_status", ""), meta.get("sip_transfer_reason", "")
        )
        if text:
            return text
        if exc.message:
            return _scrub(f"{exc.code}: {exc.message}")
        # not a Twirp answer (a proxy's 503): the HTTP status is all there is to say
        return f"{exc.code} (http {exc.status})"
    if isinstance(exc, TimeoutError) and not isinstance(exc, aiohttp.ClientError):
        return "timeout"
    return _scrub(f"{type(exc).__name__}: {exc}".rstrip(": "))


def _duration(seconds: float) -> Duration:
    d = Duration()
    d.FromNanoseconds(round(seconds * 1e9))
    return d


def transfer_uri(destination: str) -> str:
    """The ``transfer_to`` of a SIP transfer.

    An E.164 number (or a ``tel:`` URI holding one) becomes ``tel:+<digits>``;
    a ``sip:`` or ``sips:`` URI is passed as given.

    Raises:
        ValueError: anything else (the message does not echo the destination).
    """
    text = destination.strip()
    bare = text[1:-1] if text.startswith("<") and text.endswith(">") else text
    if bare.lower().startswith(("sip:", "sips:")):
        return text
    if bare.lower().startswith("tel:"):
        bare = bare[4:]
    try:
        return "tel:" + parse_e164(bare)
    except PhoneNumberError as exc:
        raise ValueError(
            f"'transfer_to': {_E164_EXPECTED}, a tel: URI or a sip:/sips: URI ({exc.reason})"
        ) from None


class LiveKitTelephony:
    """The server side of a phone call: room, dispatch, dial, transfer, hang-up.

    Args:
        settings: the server and trunk.
        api: a ``livekit.api.LiveKitAPI`` to use (tests point one at a fake
            server); its owner closes it. Without one, an API client is built
            from ``settings`` on first use and closed by :meth:`aclose`.
    """

    def __init__(self, settings: LiveKitSettings, *, api: Any | None = None) -> None:
        self.settings = settings
        self._api = api
        self._owns_api = api is None
        self._closed = False

    def _client(self) -> Any:
        if self._closed:
            raise RuntimeError("LiveKitTelephony is closed")
        if self._api is None:
            s = self.settings
            self._api = LiveKitAPI(s.url, s.api_key, s.api_secret)
        return self._api

    async def create_room(self, name: str, *, metadata: str = "", empty_timeout: int = 60) -> str:
        """Create the call's room.

        Args:
            name: the room name.
            metadata: the room's metadata.
            empty_timeout: seconds the server keeps the room once it is empty.

        Returns:
            The room's name, as the server reports it.
        """
        room = await self._client().room.create_room(
            CreateRoomRequest(name=name, metadata=metadata, empty_timeout=empty_timeout)
        )
        logger.info("room created", extra={"room": room.name or name, "room_sid": room.sid})
        return str(room.name or name)

    async def dispatch(self, room: str, job: DialJob) -> str:
        """Dispatch the agent (``settings.agent_name``) to ``room`` with ``job`` as metadata.

        Returns:
            The dispatch id.
        """
        dispatch = await self._client().agent_dispatch.create_dispatch(
            CreateAgentDispatchRequest(
                agent_name=self.settings.agent_name, room=room, metadata=job.to_metadata()
            )
        )
        logger.info(
            "agent dispatched",
            extra={
                "room": room,
                "dispatch_id": dispatch.id,
                "agent_name": self.settings.agent_name,
                "number": mask_number(job.number),
            },
        )
        return str(dispatch.id)

    async def dial(
        self,
        room: str,
        number: str,
        *,
        identity: str,
        caller_id: str | None = None,
        play_ringtone: bool = False,
    ) -> DialResult:
        """Call ``number`` into ``room`` over the outbound trunk and wait for the answer.

        Args:
            room: the room the callee's leg joins.
            number: the E.164 number to call.
            identity: the callee's participant identity.
            caller_id: the number to call from (E.164), else the trunk's.
            play_ringtone: play a dial tone in the room while it rings.

        Returns:
            ``answered``, or the status of a call that did not connect: SIP
            failures, server errors and timeouts are results, never raised.

        Raises:
            ValueError: ``number`` or ``caller_id`` is not E.164 (nothing is sent).
            LiveKitConfigError: no outbound trunk is configured (nothing is sent).
        """
        to = _e164(number, "number")
        shown = _e164(caller_id, "caller_id") if caller_id else ""
        if not self.settings.sip_trunk_id:
            raise LiveKitConfigError(
                "LIVEKIT_SIP_OUTBOUND_TRUNK: expected the outbound SIP trunk id (ST_...) to dial"
            )
        request = CreateSIPParticipantRequest(
            sip_trunk_id=self.settings.sip_trunk_id,
            sip_call_to=to,
            sip_number=shown,
            room_name=room,
            participant_identity=identity,
            wait_until_answered=True,
            ringing_timeout=_duration(self.settings.ringing_timeout),
            max_call_duration=_duration(self.settings.max_call_duration),
            krisp_enabled=False,
            play_dialtone=play_ringtone,
        )
        where = {"room": room, "identity": identity, "number": mask_number(to)}
        logger.info("dialing", extra=where)
        try:
            info = await self._client().sip.create_sip_participant(request)
        except (ServerError, TimeoutError, aiohttp.ClientError) as exc:
            result = DialResult(answer_status(exc), identity, _sip_code(exc), _reason(exc))
            logger.info(
                "call not answered",
                extra={
                    **where,
                    "status": result.status,
                    "sip_status_code": result.sip_status_code,
                    "reason": result.reason,
                },
            )
            return result
        logger.info("call answered", extra={**where, "sip_call_id": info.sip_call_id})
        return DialResult(
            status="answered", participant_identity=info.participant_identity or identity
        )

    async def transfer(
        self, room: str, identity: str, transfer_to: str, *, play_dialtone: bool = False
    ) -> None:
        """Cold-transfer the SIP participant ``identity`` to ``transfer_to``.

        Args:
            room: the call's room.
            identity: the SIP participant to transfer.
            transfer_to: an E.164 number (sent as ``tel:+...``), a ``tel:`` URI
                or a ``sip:``/``sips:`` URI (sent as given).
            play_dialtone: play a dial tone to the caller while transferring.

        Raises:
            ValueError: ``transfer_to`` is none of those (nothing is sent).
            TransferError: the transfer did not complete.
        """
        uri = transfer_uri(transfer_to)
        request = TransferSIPParticipantRequest(
            participant_identity=identity,
            room_name=room,
            transfer_to=uri,
            play_dialtone=play_dialtone,
            ringing_timeout=_duration(self.settings.ringing_timeout),
        )
        # a sip: URI may hold a number too; mask_number hides anything but E.164 entirely
        where = {
            "room": room,
            "identity": identity,
            "number": mask_number(uri.removeprefix("tel:")),
        }
        logger.info("transferring", extra=where)
        try:
            response = await self._client().sip.transfer_sip_participant(request)
        except (ServerError, TimeoutError, aiohttp.ClientError) as exc:
            error = TransferError(answer_status(exc), _reason(exc), _sip_code(exc))
            logger.warning(
                "transfer failed", extra={**where, "status": error.status, "reason": error.reason}
            )
            raise error from exc
        # An older server answers with an empty message (status ONGOING): the
        # call was handed over. Only an explicit FAILED is a failure.
        if response.status == SIPTransferStatus.STS_TRANSFER_FAILED:
            code = int(response.sip_status.code) or None
            why = SIPTransferReason.Name(response.reason)
            status = _sip_outcome(code, why) or "failed"
            reason = _sip_text(code, response.sip_status.status, why)
            logger.warning("transfer failed", extra={**where, "status": status, "reason": reason})
            raise TransferError(status, reason, code)
        logger.info("transferred", extra={**where, "transfer_id": response.transfer_id})

    async def hang_up(self, room: str) -> None:
        """End the call by deleting its room (every participant's leg ends).

        A room that is already gone is not an error.

        Raises:
            livekit.api.ServerError: the server refused (other than not found).
        """
        try:
            await self._client().room.delete_room(DeleteRoomRequest(room=room))
        except ServerError as exc:
            if exc.code != ServerErrorCode.NOT_FOUND:
                raise
            logger.debug("room already gone", extra={"room": room})
            return
        logger.info("room deleted", extra={"room": room})

    async def aclose(self) -> None:
        """Close the API client this object built (an injected one stays open)."""
        if self._closed:
            return
        self._closed = True
        if self._owns_api and self._api is not None:
            await self._api.aclose()
        self._api = None
