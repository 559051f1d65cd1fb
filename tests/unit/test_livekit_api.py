"""LiveKitTelephony against a fake Twirp server: the requests it sends, what failures mean."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from livekit.api import LiveKitAPI, ServerError, SipCallError
from livekit.protocol import sip

from agent.telephony.livekit.api import (
    DialJob,
    DialResult,
    LiveKitConfigError,
    LiveKitSettings,
    LiveKitTelephony,
    TransferError,
    answer_status,
)
from tests.fakes.twirp_server import FakeLiveKit

NUMBER = "+15557654321"
CALLER_ID = "+14155550100"
DIGITS = ("5557654321", "4155550100", "7654321")


def _settings(lk: FakeLiveKit, **overrides: Any) -> LiveKitSettings:
    values: dict[str, Any] = {
        "url": lk.url,
        "api_key": lk.api_key,
        "api_secret": lk.api_secret,
        "sip_trunk_id": "ST_outbound",
        "agent_name": "callrt-test",
        "ringing_timeout": 25.0,
        "max_call_duration": 1800.0,
    }
    values.update(overrides)
    return LiveKitSettings(**values)


@pytest.fixture
async def lk() -> AsyncIterator[FakeLiveKit]:
    async with FakeLiveKit() as fake:
        yield fake


@pytest.fixture
async def telephony(lk: FakeLiveKit) -> AsyncIterator[LiveKitTelephony]:
    api = LiveKitAPI(lk.url, lk.api_key, lk.api_secret)
    t = LiveKitTelephony(_settings(lk), api=api)
    yield t
    await t.aclose()
    await api.aclose()


# -- create_room, dispatch --------------------------------------------------------


async def test_create_room_sends_name_metadata_and_empty_timeout(
    lk: FakeLiveKit, telephony: LiveKitTelephony
) -> None:
    name = await telephony.create_room("call-1", metadata='{"k":1}', empty_timeout=45)

    assert name == "call-1"
    [req] = lk.requests
    assert (req.service, req.method) == ("RoomService", "CreateRoom")
    assert req.authorization.startswith("Bearer ")
    assert req.claims is not None and req.claims.video is not None
    assert req.claims.video.room_create
    assert (req.message.name, req.message.metadata, req.message.empty_timeout) == (
        "call-1",
        '{"k":1}',
        45,
    )


async def test_dispatch_names_the_agent_and_carries_the_job(
    lk: FakeLiveKit, telephony: LiveKitTelephony
) -> None:
    job = DialJob(
        number="+1 (555) 765-4321", agent_config="configs/a.yaml", campaign_id="c1", contact_id="7"
    )

    dispatch_id = await telephony.dispatch("call-1", job)

    [msg] = lk.messages("CreateDispatch")
    assert dispatch_id.startswith("AD_")
    assert (msg.agent_name, msg.room) == ("callrt-test", "call-1")
    assert DialJob.from_metadata(msg.metadata) == job
    assert json.loads(msg.metadata)["number"] == NUMBER


async def test_a_telephony_without_an_injected_api_builds_and_closes_its_own(
    lk: FakeLiveKit,
) -> None:
    t = LiveKitTelephony(_settings(lk))
    assert await t.create_room("call-2") == "call-2"
    await t.aclose()
    await t.aclose()
    assert [r.method for r in lk.requests] == ["CreateRoom"]
    with pytest.raises(RuntimeError, match="closed"):
        await t.create_room("call-3")


async def test_the_fake_refuses_a_token_signed_with_another_secret(lk: FakeLiveKit) -> None:
    async with LiveKitAPI(lk.url, lk.api_key, "not-the-secret-but-just-as-long-0123456789") as api:
        t = LiveKitTelephony(_settings(lk), api=api)
        with pytest.raises(ServerError) as caught:
            await t.create_room("call-1")
    assert (caught.value.code, caught.value.status) == ("unauthenticated", 401)


async def test_the_fake_only_takes_the_protobuf_the_client_sends(lk: FakeLiveKit) -> None:
    async with aiohttp.ClientSession() as http:
        url = f"{lk.url}/twirp/livekit.RoomService/CreateRoom"
        async with http.post(url, json={"name": "call-1"}) as resp:
            assert (resp.status, (await resp.json())["code"]) == (404, "bad_route")
        async with http.post(url, data=b"", headers={"Content-Type": "application/protobuf"}) as r:
            assert (r.status, (await r.json())["code"]) == (401, "unauthenticated")
    assert lk.rooms == set()


# -- dial -------------------------------------------------------------------------


async def test_dial_sends_the_outbound_call_and_reports_the_answer(
    lk: FakeLiveKit, telephony: LiveKitTelephony
) -> None:
    result = await telephony.dial(
        "call-1", "+1 555 765 4321", identity="callee-7", caller_id=CALLER_ID
    )

    assert result == DialResult("answered", "callee-7")
    [req] = lk.requests
    assert (req.service, req.method) == ("SIP", "CreateSIPParticipant")
    assert req.claims is not None and req.claims.sip is not None and req.claims.sip.call
    msg = req.message
    assert msg.sip_trunk_id == "ST_outbound"
    assert msg.sip_call_to == NUMBER
    assert msg.sip_number == CALLER_ID
    assert (msg.room_name, msg.participant_identity) == ("call-1", "callee-7")
    assert msg.wait_until_answered is True
    assert msg.HasField("ringing_timeout") and msg.ringing_timeout.ToTimedelta().seconds == 25
    assert msg.max_call_duration.ToTimedelta().total_seconds() == 1800
    assert msg.krisp_enabled is False
    assert msg.play_dialtone is False


async def test_dial_without_caller_id_uses_the_trunk_number_and_can_play_a_ringtone(
    lk: FakeLiveKit, telephony: LiveKitTelephony
) -> None:
    await telephony.dial("call-1", NUMBER, identity="callee", play_ringtone=True)

    [msg] = lk.messages("CreateSIPParticipant")
    assert msg.sip_number == ""
    assert msg.play_dialtone is True


@pytest.mark.parametrize(
    ("sip_status", "status"),
    [
        (486, "busy"),
        (600, "busy"),
        (480, "no-answer"),
        (408, "no-answer"),
        (603, "rejected"),
        (404, "failed"),
        (500, "failed"),
        (487, "failed"),
    ],
)
async def test_dial_turns_a_sip_failure_into_a_result(
    lk: FakeLiveKit, telephony: LiveKitTelephony, sip_status: int, status: str
) -> None:
    lk.fail_next("CreateSIPParticipant", sip_status=sip_status)

    result = await telephony.dial("call-1", NUMBER, identity="callee")

    assert (result.status, result.sip_status_code) == (status, sip_status)
    assert result.participant_identity == "callee"
    assert result.reason.startswith(f"sip {sip_status}")


async def test_the_fake_makes_the_client_raise_its_real_sip_error(lk: FakeLiveKit) -> None:
    lk.fail_next("CreateSIPParticipant", sip_status=486, msg="busy here")
    async with LiveKitAPI(lk.url, lk.api_key, lk.api_secret) as api:
        with pytest.raises(SipCallError) as caught:
            await api.sip.create_sip_participant(
                sip.CreateSIPParticipantRequest(
                    sip_trunk_id="ST_x", sip_call_to=NUMBER, room_name="r"
                )
            )
    err = caught.value
    assert (err.sip_status_code, err.sip_status) == (486, "Busy Here")
    assert (err.code, err.status, err.message) == ("resource_exhausted", 429, "busy here")
    assert "error_details" in err.metadata


async def test_a_ringing_timeout_without_a_sip_status_is_no_answer(
    lk: FakeLiveKit, telephony: LiveKitTelephony
) -> None:
    lk.fail_next("CreateSIPParticipant", code="deadline_exceeded", msg="ringing timeout")

    result = await telephony.dial("call-1", NUMBER, identity="callee")

    assert result == DialResult("no-answer", "callee", None, "deadline_exceeded: ringing timeout")


async def test_a_server_error_that_is_not_about_sip_is_a_failed_call(
    lk: FakeLiveKit, telephony: LiveKitTelephony
) -> None:
    lk.fail_next("CreateSIPParticipant", code="not_found", msg="object cannot be found")

    result = await telephony.dial("call-1", NUMBER, identity="callee")

    assert (result.status, result.sip_status_code) == ("failed", None)
    assert result.reason == "not_found: object cannot be found"


async def test_the_servers_own_validation_failure_is_a_failed_call(lk: FakeLiveKit) -> None:
    async with LiveKitAPI(lk.url, lk.api_key, lk.api_secret) as api:
        t = LiveKitTelephony(_settings(lk, sip_trunk_id="ST_x"), api=api)
        lk.fail_next("CreateSIPParticipant", code="internal", msg=f"dialing {NUMBER} failed")
        result = await t.dial("call-1", NUMBER, identity="callee")
    assert result.status == "failed"
    assert "5557654321" not in result.reason


async def test_a_client_side_timeout_while_ringing_is_no_answer(lk: FakeLiveKit) -> None:
    async def times_out(request: Any, **_: Any) -> Any:
        raise TimeoutError

    api = SimpleNamespace(sip=SimpleNamespace(create_sip_participant=times_out))
    t = LiveKitTelephony(_settings(lk), api=api)

    assert await t.dial("call-1", NUMBER, identity="callee") == DialResult(
        "no-answer", "callee", None, "timeout"
    )


async def test_an_unreachable_server_is_a_failed_call(lk: FakeLiveKit) -> None:
    # the port is closed once the fake has stopped
    async with FakeLiveKit() as gone:
        settings = _settings(gone)
    t = LiveKitTelephony(settings)
    result = await t.dial("call-1", NUMBER, identity="callee")
    await t.aclose()
    assert result.status == "failed"
    assert result.reason.startswith("ClientConnectorError")


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"number": "5557654321"}, "'number'"),
        ({"number": "+1555"}, "'number'"),
        ({"number": NUMBER, "caller_id": "sales"}, "'caller_id'"),
    ],
)
async def test_a_bad_number_raises_before_anything_is_sent(
    lk: FakeLiveKit, telephony: LiveKitTelephony, kwargs: dict[str, Any], key: str
) -> None:
    with pytest.raises(ValueError, match=key):
        await telephony.dial("call-1", identity="callee", **kwargs)
    assert lk.requests == []


async def test_dialing_without_an_outbound_trunk_names_the_variable(lk: FakeLiveKit) -> None:
    t = LiveKitTelephony(_settings(lk, sip_trunk_id=""))
    with pytest.raises(LiveKitConfigError, match="LIVEKIT_SIP_OUTBOUND_TRUNK"):
        await t.dial("call-1", NUMBER, identity="callee")
    await t.aclose()
    assert lk.requests == []


# -- answer_status --------------------------------------------------------------------


def _sip_error(code: int) -> SipCallError:
    return SipCallError("x", "sip status", status=400, metadata={"sip_status_code": str(code)})


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (_sip_error(486), "busy"),
        (_sip_error(600), "busy"),
        (_sip_error(480), "no-answer"),
        (_sip_error(408), "no-answer"),
        (_sip_error(603), "rejected"),
        (_sip_error(404), "failed"),
        (_sip_error(500), "failed"),
        (ServerError("deadline_exceeded", "ringing timeout", status=408), "no-answer"),
        (TimeoutError(), "no-answer"),
        (aiohttp.ConnectionTimeoutError(), "failed"),
        # the server's code for 486 is resource_exhausted: without the SIP status
        # it is a rate limit, not a busy callee
        (ServerError("resource_exhausted", "rate limited", status=429), "failed"),
        (
            SipCallError(
                "x", "", status=408, metadata={"sip_transfer_reason": "STR_RINGING_TIMEOUT"}
            ),
            "no-answer",
        ),
        (RuntimeError("boom"), "failed"),
        (aiohttp.ClientConnectionError("refused"), "failed"),
    ],
)
def test_answer_status(exc: BaseException, status: str) -> None:
    assert answer_status(exc) == status


# -- transfer, hang_up ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("destination", "sent"),
    [
        ("+1 (555) 765-4321", "tel:+15557654321"),
        ("tel:+15557654321", "tel:+15557654321"),
        ("sip:billing@pbx.example.com", "sip:billing@pbx.example.com"),
        ("sips:desk@pbx.example.com;transport=tls", "sips:desk@pbx.example.com;transport=tls"),
    ],
)
async def test_transfer_sends_a_tel_or_sip_uri(
    lk: FakeLiveKit, telephony: LiveKitTelephony, destination: str, sent: str
) -> None:
    await telephony.transfer("call-1", "callee-7", destination, play_dialtone=True)

    [req] = lk.requests
    assert (req.service, req.method) == ("SIP", "TransferSIPParticipant")
    msg = req.message
    assert (msg.room_name, msg.participant_identity, msg.transfer_to) == (
        "call-1",
        "callee-7",
        sent,
    )
    assert msg.play_dialtone is True
    assert msg.ringing_timeout.ToTimedelta().seconds == 25


async def test_a_bad_transfer_target_raises_before_anything_is_sent(
    lk: FakeLiveKit, telephony: LiveKitTelephony
) -> None:
    with pytest.raises(ValueError, match="'transfer_to'") as caught:
        await telephony.transfer("call-1", "callee", "5557654321")
    assert "5557654321" not in str(caught.value)
    assert lk.requests == []


async def test_a_failed_transfer_raises_with_the_target_status(
    lk: FakeLiveKit, telephony: LiveKitTelephony
) -> None:
    lk.fail_next(
        "TransferSIPParticipant", sip_status=486, transfer_reason="STR_REJECTED", msg="busy"
    )
    with pytest.raises(TransferError) as caught:
        await telephony.transfer("call-1", "callee", NUMBER)
    assert (caught.value.status, caught.value.sip_status_code) == ("busy", 486)
    assert caught.value.reason == "STR_REJECTED sip 486 Busy Here"
    assert isinstance(caught.value.__cause__, SipCallError)


async def test_a_transfer_the_server_reports_failed_raises(
    lk: FakeLiveKit, telephony: LiveKitTelephony
) -> None:
    lk.respond_next(
        "TransferSIPParticipant",
        sip.TransferSIPParticipantResponse(
            transfer_id="TR_1",
            status=sip.SIPTransferStatus.STS_TRANSFER_FAILED,
            reason=sip.SIPTransferReason.STR_RINGING_TIMEOUT,
        ),
    )
    with pytest.raises(TransferError) as caught:
        await telephony.transfer("call-1", "callee", NUMBER)
    assert (caught.value.status, caught.value.sip_status_code) == ("no-answer", None)
    assert caught.value.reason == "STR_RINGING_TIMEOUT"


async def test_hang_up_deletes_the_room_and_a_room_already_gone_is_fine(
    lk: FakeLiveKit, telephony: LiveKitTelephony
) -> None:
    await telephony.create_room("call-1")

    await telephony.hang_up("call-1")
    await telephony.hang_up("call-1")  # the fake now answers not_found

    deletes = [r for r in lk.requests if r.method == "DeleteRoom"]
    assert [(r.service, r.message.room) for r in deletes] == [("RoomService", "call-1")] * 2
    assert "call-1" not in lk.rooms


async def test_hang_up_raises_other_server_errors(
    lk: FakeLiveKit, telephony: LiveKitTelephony
) -> None:
    lk.fail_next("DeleteRoom", code="permission_denied", msg="permissions denied")
    with pytest.raises(ServerError) as caught:
        await telephony.hang_up("call-1")
    assert caught.value.code == "permission_denied"


# -- settings and metadata --------------------------------------------------------------


def test_settings_from_env_name_every_missing_variable_on_one_line() -> None:
    with pytest.raises(LiveKitConfigError) as caught:
        LiveKitSettings.from_env({"LIVEKIT_API_KEY": "key", "LIVEKIT_API_SECRET": "  "})
    message = str(caught.value)
    assert "\n" not in message
    assert "LIVEKIT_URL" in message and "LIVEKIT_API_SECRET" in message
    assert "LIVEKIT_API_KEY" not in message

    with pytest.raises(LiveKitConfigError) as caught:
        LiveKitSettings.from_env({})
    assert all(name in str(caught.value) for name in ("URL", "API_KEY", "API_SECRET"))


def test_settings_from_env_reads_the_optional_variables() -> None:
    env = {
        "LIVEKIT_URL": "wss://example.livekit.cloud",
        "LIVEKIT_API_KEY": "key",
        "LIVEKIT_API_SECRET": "secret",
    }
    plain = LiveKitSettings.from_env(env)
    assert (plain.sip_trunk_id, plain.agent_name) == ("", "callrt")
    assert "secret" not in repr(plain)

    full = LiveKitSettings.from_env(
        {**env, "LIVEKIT_SIP_OUTBOUND_TRUNK": "ST_abc", "CALLRT_AGENT_NAME": "sales"}
    )
    assert (full.sip_trunk_id, full.agent_name) == ("ST_abc", "sales")

    with pytest.raises(LiveKitConfigError, match="LIVEKIT_URL"):
        LiveKitSettings.from_env({**env, "LIVEKIT_URL": "example.livekit.cloud"})


def test_dial_job_metadata_round_trips() -> None:
    job = DialJob(number=NUMBER, campaign_id="c1", caller_id="+1 415 555 0100")
    assert job.caller_id == CALLER_ID
    assert DialJob.from_metadata(job.to_metadata()) == job
    assert json.loads(job.to_metadata()) == {
        "number": NUMBER,
        "agent_config": "default",
        "campaign_id": "c1",
        "caller_id": CALLER_ID,
    }
    assert NUMBER not in repr(job)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{not json", "expected a JSON object"),
        ("[1, 2]", "got list"),
        ('{"agent_config": "a.yaml"}', "missing key 'number'"),
        ('{"number": "5557654321"}', "'number': expected an E.164 number"),
        ('{"number": 15551234567}', "'number': expected a string"),
        ('{"number": "+15557654321", "campaign_id": 3}', "'campaign_id': expected a string"),
        ('{"number": "+15557654321", "caller_id": "x"}', "'caller_id': expected an E.164"),
        ('{"number": "+15557654321", "numbr": "x"}', "unknown key 'numbr'"),
    ],
)
def test_dial_job_metadata_errors_name_the_key(text: str, expected: str) -> None:
    with pytest.raises(ValueError, match="dispatch metadata") as caught:
        DialJob.from_metadata(text)
    assert expected in str(caught.value)
    assert "5557654321" not in str(caught.value)


# -- logs ---------------------------------------------------------------------------------


async def test_no_phone_number_reaches_a_log_message(
    lk: FakeLiveKit, telephony: LiveKitTelephony, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    job = DialJob(number=NUMBER, caller_id=CALLER_ID)
    await telephony.create_room("call-1")
    await telephony.dispatch("call-1", job)
    await telephony.dial("call-1", NUMBER, identity="callee", caller_id=CALLER_ID)
    lk.fail_next("CreateSIPParticipant", sip_status=486)
    await telephony.dial("call-1", NUMBER, identity="callee")
    await telephony.transfer("call-1", "callee", CALLER_ID)
    lk.fail_next("TransferSIPParticipant", code="internal", msg=f"REFER to {NUMBER} failed")
    with pytest.raises(TransferError):
        await telephony.transfer("call-1", "callee", NUMBER)
    await telephony.hang_up("call-1")

    ours = [r for r in caplog.records if r.name.startswith("agent.telephony")]
    assert len(ours) >= 8
    for record in caplog.records:
        text = record.getMessage() + " " + str(getattr(record, "reason", ""))
        assert not any(d in text for d in DIGITS), text
    assert {getattr(r, "number", None) for r in ours} >= {"+1********21", "+1********00"}


# -- injected faults (docs/faults.md) ----------------------------------------------


async def test_a_503_from_in_front_of_the_server_on_dial_is_a_failed_call(
    lk: FakeLiveKit, telephony: LiveKitTelephony
) -> None:
    lk.unavailable_next("CreateSIPParticipant")

    result = await asyncio.wait_for(telephony.dial("call-1", NUMBER, identity="callee"), 5)

    assert result == DialResult("failed", "callee", None, "unknown (http 503)")
    assert len(lk.messages("CreateSIPParticipant")) == 1  # not retried against a local host


async def test_a_dial_the_server_never_answers_times_out_as_no_answer(lk: FakeLiveKit) -> None:
    api = LiveKitAPI(lk.url, lk.api_key, lk.api_secret)
    t = LiveKitTelephony(_settings(lk, ringing_timeout=1.0), api=api)
    lk.hang_next("CreateSIPParticipant")
    loop = asyncio.get_running_loop()
    start = loop.time()
    try:
        result = await asyncio.wait_for(t.dial("call-1", NUMBER, identity="callee"), 10)
    finally:
        await t.aclose()
        await api.aclose()
    # the client gives up after the ringing window plus livekit's 2 s margin
    assert 2.5 <= loop.time() - start <= 5.0
    assert result == DialResult("no-answer", "callee", None, "timeout")
