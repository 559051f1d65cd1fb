"""A fake LiveKit server for contract tests: the Twirp endpoints a call uses.

An aiohttp app on 127.0.0.1 (a free port) that speaks Twirp the way
``livekit.api``'s client does: a POST to ``/twirp/livekit.<Service>/<Method>``
with a protobuf body (``Content-Type: application/protobuf``) and a signed
bearer JWT. Each request body is decoded into the real ``livekit.protocol``
message and recorded. The answer is a protobuf response message, or a Twirp
error (JSON ``{"code", "msg", "meta"}`` with the code's HTTP status) encoded
the way the LiveKit server encodes SIP failures, so the client raises its
real exception types (``ServerError``, ``SipCallError``).

What it checks, like the server: the content type, the bearer token (a JWT
signed with the fake's key and secret, carrying the grants the endpoint needs)
and the fields the server validates before dialing or transferring.

Usage::

    async with FakeLiveKit() as lk:
        api = LiveKitAPI(lk.url, lk.api_key, lk.api_secret)
        lk.fail_next("CreateSIPParticipant", sip_status=486, msg="busy here")
        ...
        assert lk.messages("CreateSIPParticipant")[0].sip_call_to == "+15551234567"
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from google.protobuf.any_pb2 import Any as AnyProto
from google.protobuf.message import DecodeError, Message
from google.rpc import status_pb2
from livekit.api import TokenVerifier
from livekit.api.access_token import Claims
from livekit.protocol import agent_dispatch, models, room, sip

__all__ = ["FakeLiveKit", "TwirpRequest", "TWIRP_HTTP_STATUS", "sip_twirp_code"]

#: Twirp error code -> HTTP status (the Twirp v7 spec).
TWIRP_HTTP_STATUS: dict[str, int] = {
    "canceled": 408,
    "unknown": 500,
    "invalid_argument": 400,
    "malformed": 400,
    "deadline_exceeded": 408,
    "not_found": 404,
    "bad_route": 404,
    "already_exists": 409,
    "permission_denied": 403,
    "unauthenticated": 401,
    "resource_exhausted": 429,
    "failed_precondition": 412,
    "aborted": 409,
    "out_of_range": 400,
    "unimplemented": 501,
    "internal": 500,
    "unavailable": 503,
    "dataloss": 500,
}

# SIP response -> gRPC code -> Twirp code, as livekit/protocol's SIPStatus.GRPCStatus
# maps them (livekit/sip.go); a code missing from its table ends up invalid_argument.
_SIP_TWIRP_CODE: dict[int, str] = {
    400: "invalid_argument",
    401: "permission_denied",
    402: "permission_denied",
    403: "permission_denied",
    404: "not_found",
    407: "unauthenticated",
    408: "deadline_exceeded",
    410: "not_found",
    480: "resource_exhausted",
    481: "not_found",
    484: "invalid_argument",
    486: "resource_exhausted",
    487: "aborted",
    488: "invalid_argument",
    491: "aborted",
    500: "failed_precondition",
    501: "failed_precondition",
    502: "failed_precondition",
    503: "failed_precondition",
    504: "deadline_exceeded",
    600: "resource_exhausted",
    603: "permission_denied",
    604: "not_found",
    606: "invalid_argument",
    607: "permission_denied",
    608: "permission_denied",
}

_SIP_PHRASE: dict[int, str] = {
    404: "Not Found",
    408: "Request Timeout",
    480: "Temporarily Unavailable",
    486: "Busy Here",
    487: "Request Terminated",
    500: "Server Internal Error",
    503: "Service Unavailable",
    600: "Busy Everywhere",
    603: "Decline",
}


# PyJWT warns about HMAC keys under 32 bytes (and warnings are errors in tests)
_SECRET = "fake-livekit-secret-0123456789abcdef"


def sip_twirp_code(sip_status: int) -> str:
    """The Twirp error code the LiveKit server sends for a failed call's SIP status."""
    return _SIP_TWIRP_CODE.get(sip_status, "invalid_argument")


@dataclass(frozen=True)
class TwirpRequest:
    """One request the fake received.

    Attributes:
        service: ``RoomService``, ``SIP`` or ``AgentDispatchService``.
        method: e.g. ``CreateSIPParticipant``.
        message: the body, decoded as the endpoint's livekit-protocol request.
        authorization: the ``Authorization`` header as sent.
        claims: the verified token's claims (None when the token was refused).
    """

    service: str
    method: str
    message: Any  # the endpoint's request class; Any so tests read its fields freely
    authorization: str
    claims: Claims | None


@dataclass(frozen=True)
class _Failure:
    code: str
    msg: str
    meta: dict[str, str]


@dataclass(frozen=True)
class _Unavailable:
    """Not the LiveKit server's answer: a proxy's plain-text 503 (no Twirp JSON)."""

    body: str


@dataclass(frozen=True)
class _Hang:
    """No answer at all: the request stays open until the fake stops."""


_Outcome = Message | _Failure | _Unavailable | _Hang


@dataclass
class _Endpoint:
    service: str
    request: type[Message]
    answer: Callable[[Any], Message | _Failure]
    grants: Callable[[Claims, Any], bool]
    outcomes: deque[_Outcome] = field(default_factory=deque)


_GRPC_CODE = {
    "invalid_argument": 3,
    "deadline_exceeded": 4,
    "not_found": 5,
    "permission_denied": 7,
    "resource_exhausted": 8,
    "failed_precondition": 9,
    "aborted": 10,
    "unauthenticated": 16,
}


def _sip_status_name(sip_status: int) -> str:
    try:
        return sip.SIPStatusCode.Name(sip_status)  # type: ignore[arg-type]
    except ValueError:
        return str(sip_status)


def _error_details(sip_status: int, phrase: str, code: str, msg: str) -> str:
    # what xtwirp.WithDetailsFromStatus attaches: a google.rpc.Status holding the SIPStatus
    detail = AnyProto()
    detail.Pack(sip.SIPStatus(code=sip_status, status=phrase))  # type: ignore[arg-type]
    status = status_pb2.Status(code=_GRPC_CODE.get(code, 2), message=msg)
    status.details.append(detail)
    return base64.b64encode(status.SerializeToString()).decode()


class FakeLiveKit:
    """The fake server; an async context manager that serves while entered.

    Args:
        api_key: the key tokens must be issued by.
        api_secret: the secret tokens must be signed with.

    Attributes:
        url: ``http://127.0.0.1:<port>`` once entered.
        requests: every request received, in order.
        rooms: names of the rooms that exist (created by CreateRoom, by a dial or
            a dispatch into a new room; removed by DeleteRoom).
    """

    def __init__(self, api_key: str = "devkey", api_secret: str = _SECRET) -> None:
        self.api_key = api_key
        self.api_secret = api_secret
        self.url = ""
        self.requests: list[TwirpRequest] = []
        self.rooms: set[str] = set()
        self._verifier = TokenVerifier(api_key, api_secret)
        self._runner: web.AppRunner | None = None
        self._release = asyncio.Event()
        self._endpoints: dict[str, _Endpoint] = {
            "CreateRoom": _Endpoint(
                "RoomService",
                room.CreateRoomRequest,
                self._create_room,
                lambda c, r: bool(c.video and c.video.room_create),
            ),
            "DeleteRoom": _Endpoint(
                "RoomService",
                room.DeleteRoomRequest,
                self._delete_room,
                lambda c, r: bool(c.video and c.video.room_create),
            ),
            "CreateSIPParticipant": _Endpoint(
                "SIP",
                sip.CreateSIPParticipantRequest,
                self._create_sip_participant,
                lambda c, r: bool(c.sip and c.sip.call),
            ),
            "TransferSIPParticipant": _Endpoint(
                "SIP",
                sip.TransferSIPParticipantRequest,
                self._transfer_sip_participant,
                lambda c, r: bool(
                    c.sip
                    and c.sip.call
                    and c.video
                    and c.video.room_admin
                    and c.video.room == r.room_name
                ),
            ),
            "CreateDispatch": _Endpoint(
                "AgentDispatchService",
                agent_dispatch.CreateAgentDispatchRequest,
                self._create_dispatch,
                lambda c, r: bool(c.video and c.video.room_admin and c.video.room == r.room),
            ),
        }

    # -- scripting --------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        *,
        sip_status: int | None = None,
        msg: str | None = None,
        code: str | None = None,
        meta: Mapping[str, str] | None = None,
        transfer_reason: str | None = None,
    ) -> None:
        """Make the next call of ``method`` fail the way the server would.

        Args:
            method: the Twirp method, e.g. ``"CreateSIPParticipant"``.
            sip_status: a SIP final response (486, 603...): the error carries
                the server's code for it and the ``sip_status_code``,
                ``sip_status`` and ``error_details`` metadata.
            msg: the error message (default: the server's for the SIP status).
            code: the Twirp error code (default: the SIP status's, else ``internal``).
            meta: extra metadata.
            transfer_reason: a ``SIPTransferReason`` name (``STR_RINGING_TIMEOUT``)
                for a failed transfer, sent as ``sip_transfer_reason``.
        """
        endpoint = self._endpoint(method)
        full_meta: dict[str, str] = {}
        if sip_status is not None:
            phrase = _SIP_PHRASE.get(sip_status, "")
            code = code or sip_twirp_code(sip_status)
            msg = msg if msg is not None else f"sip status {sip_status}: {phrase}"
            full_meta["sip_status_code"] = str(sip_status)
            full_meta["sip_status"] = phrase or _sip_status_name(sip_status)
            full_meta["error_details"] = _error_details(sip_status, phrase, code, msg)
        if transfer_reason is not None:
            full_meta["sip_transfer_reason"] = transfer_reason
            full_meta["sip_transfer_id"] = f"TR_{uuid.uuid4().hex[:12]}"
        full_meta.update(meta or {})
        endpoint.outcomes.append(_Failure(code or "internal", msg or "", full_meta))

    def unavailable_next(self, method: str, body: str = "upstream connect error") -> None:
        """Answer the next call of ``method`` with HTTP 503 and a plain-text body, as a
        load balancer in front of an overloaded or restarting server does."""
        self._endpoint(method).outcomes.append(_Unavailable(body))

    def hang_next(self, method: str) -> None:
        """Never answer the next call of ``method`` (it is released when the fake stops)."""
        self._endpoint(method).outcomes.append(_Hang())

    def respond_next(self, method: str, message: Message) -> None:
        """Answer the next call of ``method`` with ``message`` instead of the default."""
        self._endpoint(method).outcomes.append(message)

    def messages(self, method: str) -> list[Any]:
        """The decoded request messages received for ``method``, in order."""
        return [r.message for r in self.requests if r.method == method]

    def _endpoint(self, method: str) -> _Endpoint:
        try:
            return self._endpoints[method]
        except KeyError:
            raise ValueError(
                f"FakeLiveKit: no endpoint {method!r}; expected one of {', '.join(self._endpoints)}"
            ) from None

    # -- serving ----------------------------------------------------------------

    async def __aenter__(self) -> FakeLiveKit:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()  # hung requests end now, not after aiohttp's shutdown timeout
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        prefix = "/twirp/livekit."
        service, _, method = path.removeprefix(prefix).partition("/")
        endpoint = self._endpoints.get(method)
        if (
            request.method != "POST"
            or not path.startswith(prefix)
            or endpoint is None
            or endpoint.service != service
        ):
            return _error("bad_route", f"no handler for path {path!r}")
        # Twirp's own check: JSON bodies are allowed by Twirp, but livekit's Python
        # client always sends protobuf, so anything else is a contract break.
        if request.content_type != "application/protobuf":
            return _error("bad_route", f"unexpected Content-Type: {request.content_type!r}")
        try:
            message = endpoint.request.FromString(await request.read())
        except DecodeError as exc:
            return _error("malformed", f"the request could not be decoded: {exc}")

        authorization = request.headers.get("Authorization", "")
        claims = self._verify(authorization)
        self.requests.append(TwirpRequest(service, method, message, authorization, claims))
        if claims is None:
            return _error("unauthenticated", "invalid token")
        if not endpoint.grants(claims, message):
            return _error("permission_denied", "permissions denied")

        outcome = endpoint.outcomes.popleft() if endpoint.outcomes else endpoint.answer(message)
        if isinstance(outcome, _Hang):
            await self._release.wait()
            return web.Response(status=503, text="server going away")
        if isinstance(outcome, _Unavailable):
            return web.Response(status=503, text=outcome.body)
        if isinstance(outcome, _Failure):
            return _error(outcome.code, outcome.msg, outcome.meta)
        return web.Response(body=outcome.SerializeToString(), content_type="application/protobuf")

    def _verify(self, authorization: str) -> Claims | None:
        scheme, _, token = authorization.partition(" ")
        if scheme != "Bearer" or token.count(".") != 2:
            return None
        try:
            return self._verifier.verify(token)
        except Exception:  # any invalid token: expired, bad signature, wrong issuer
            return None

    # -- default answers ----------------------------------------------------------

    def _create_room(self, req: room.CreateRoomRequest) -> Message | _Failure:
        if not req.name:
            return _Failure("invalid_argument", "missing room name", {})
        self.rooms.add(req.name)
        return models.Room(
            sid=f"RM_{uuid.uuid4().hex[:12]}",
            name=req.name,
            empty_timeout=req.empty_timeout,
            metadata=req.metadata,
            creation_time=int(time.time()),
        )

    def _delete_room(self, req: room.DeleteRoomRequest) -> Message | _Failure:
        if req.room not in self.rooms:
            return _Failure("not_found", "requested room does not exist", {})
        self.rooms.discard(req.room)
        return room.DeleteRoomResponse()

    def _create_sip_participant(self, req: sip.CreateSIPParticipantRequest) -> Message | _Failure:
        # the checks of CreateSIPParticipantRequest.Validate (livekit/sip.go)
        if not req.sip_trunk_id and not req.HasField("trunk"):
            return _Failure("invalid_argument", "missing sip trunk id", {})
        if not req.sip_call_to:
            return _Failure("invalid_argument", "missing sip callee number", {})
        if "@" in req.sip_call_to:
            return _Failure(
                "invalid_argument",
                "SipCallTo should be a phone number or SIP user, not a full SIP URI",
                {},
            )
        if not req.room_name:
            return _Failure("invalid_argument", "missing room name", {})
        self.rooms.add(req.room_name)
        return sip.SIPParticipantInfo(
            participant_id=f"PA_{uuid.uuid4().hex[:12]}",
            participant_identity=req.participant_identity or f"sip_{uuid.uuid4().hex[:8]}",
            room_name=req.room_name,
            sip_call_id=f"SCL_{uuid.uuid4().hex[:12]}",
        )

    def _transfer_sip_participant(
        self, req: sip.TransferSIPParticipantRequest
    ) -> Message | _Failure:
        # the checks of TransferSIPParticipantRequest.Validate (livekit/sip.go)
        if not req.room_name:
            return _Failure("invalid_argument", "missing room name", {})
        if not req.participant_identity:
            return _Failure("invalid_argument", "missing participant identity", {})
        if not req.transfer_to:
            return _Failure("invalid_argument", "missing transfer to", {})
        inner = req.transfer_to.removeprefix("<").removesuffix(">")
        if not inner.startswith(("sip:", "sips:", "tel:")):
            return _Failure(
                "invalid_argument",
                "transfer_to must be a valid SIP(s) or TEL URI (sip:, sips: or tel:)",
                {},
            )
        return sip.TransferSIPParticipantResponse(
            transfer_id=f"TR_{uuid.uuid4().hex[:12]}",
            status=sip.SIPTransferStatus.STS_TRANSFER_SUCCESSFUL,
            reason=sip.SIPTransferReason.STR_COMPLETED,
        )

    def _create_dispatch(
        self, req: agent_dispatch.CreateAgentDispatchRequest
    ) -> Message | _Failure:
        if not req.room:
            return _Failure("invalid_argument", "missing room", {})
        self.rooms.add(req.room)
        return agent_dispatch.AgentDispatch(
            id=f"AD_{uuid.uuid4().hex[:12]}",
            agent_name=req.agent_name,
            room=req.room,
            metadata=req.metadata,
            state=agent_dispatch.AgentDispatchState(created_at=time.time_ns()),
        )


def _error(code: str, msg: str, meta: Mapping[str, str] | None = None) -> web.Response:
    body: dict[str, Any] = {"code": code, "msg": msg}
    if meta:
        body["meta"] = dict(meta)
    return web.json_response(body, status=TWIRP_HTTP_STATUS.get(code, 500))
