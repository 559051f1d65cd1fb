"""Placing a campaign's calls: the in-process simulator, an instant dry run, or LiveKit.

A dispatcher turns one :class:`DialRequest` into a :class:`~.store.CallRecord`.
It never raises for a call that went wrong (that is a disposition); an
exception means the dispatcher itself failed, and the dialer records ``error``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agent.app.config import AgentConfig
from agent.campaigns.store import CallRecord, CampaignStore

logger = logging.getLogger("agent.campaigns.dispatch")

__all__ = [
    "DialRequest",
    "Dispatcher",
    "InstantDispatcher",
    "LiveKitDispatcher",
    "SimulatorDispatcher",
    "record_campaign_call",
]


@dataclass(frozen=True)
class DialRequest:
    """One attempt to call one contact."""

    campaign: str
    campaign_id: int
    contact_id: int
    contact_line: int
    attempt_id: int
    attempt_no: int
    number: str = field(repr=False)
    variables: dict[str, str] = field(default_factory=dict, repr=False)
    caller_id: str | None = field(default=None, repr=False)

    def key(self, seed: int) -> int:
        """A stable random key for this contact's attempt (the same on every run)."""
        digest = hashlib.sha256(f"{seed}:{self.number}:{self.attempt_no}".encode()).digest()
        return int.from_bytes(digest[:8], "big")


class Dispatcher(Protocol):
    """Places one call and reports how it ended."""

    #: whether the dispatcher records the call in the store itself (a LiveKit worker does)
    records_calls: bool

    async def dial(self, request: DialRequest) -> CallRecord: ...

    async def aclose(self) -> None: ...


#: (disposition, voicemail_left, amd category, weight) of an instant dry run
INSTANT_MIX: tuple[tuple[str, bool, str | None, int], ...] = (
    ("completed", False, "human", 35),
    ("voicemail", True, "machine-vm", 18),
    ("voicemail", False, "machine-vm", 4),
    ("no-answer", False, None, 18),
    ("busy", False, None, 10),
    ("unavailable", False, "machine-unavailable", 5),
    ("failed", False, None, 5),
    ("rejected", False, None, 3),
    ("transferred", False, "human", 2),
)


class InstantDispatcher:
    """No call is run: each attempt draws a seeded disposition and lasts ``seconds``.

    For load tests, benchmarks and dry runs of a campaign's schedule. The draw
    depends only on the seed, the number and the attempt, so reruns agree.
    """

    records_calls = False

    def __init__(self, *, seed: int = 0, seconds: float = 0.0) -> None:
        self.seed = seed
        self.seconds = seconds
        self._weights = [w for *_, w in INSTANT_MIX]

    async def dial(self, request: DialRequest) -> CallRecord:
        rng = random.Random(request.key(self.seed))
        disposition, left, amd, _ = rng.choices(INSTANT_MIX, weights=self._weights)[0]
        if self.seconds > 0:
            await asyncio.sleep(self.seconds)
        answered = amd is not None
        return CallRecord(
            disposition=disposition,
            voicemail_left=left,
            amd_category=amd,
            duration=round(rng.uniform(8.0, 90.0), 3) if answered else 0.0,
            call_id=f"sim_{request.attempt_id}",
        )

    async def aclose(self) -> None:
        return None


class SimulatorDispatcher:
    """Runs each attempt as a recorded call through the real actors, in this process.

    A contact whose variables name a recorded call (``call: <name>``) gets that
    call; every other attempt gets a seeded pick from ``calls``. Each call's
    result (the replay JSON line, with its transcript) is written to
    ``out_dir/calls/``; with audio, its stereo recording to ``out_dir/recordings/``.

    Args:
        calls: the recorded calls to draw from.
        config: the campaign's agent config (contact variables are filled in per call).
        seed: the pick's seed.
        text_only: deliver speech as transcripts (fast) instead of audio.
        out_dir: where transcripts and recordings go (None: not written).
        models: prebuilt models (tests pass scripted ones); built from config otherwise.
    """

    records_calls = False

    def __init__(
        self,
        calls: Sequence[Any],
        config: AgentConfig,
        *,
        seed: int = 0,
        text_only: bool = True,
        out_dir: Path | None = None,
        models: Any | None = None,
    ) -> None:
        from agent.replay.runner import Replayer, ReplayOptions

        if not calls:
            raise ValueError("expected at least one recorded call to simulate")
        self.calls = list(calls)
        self.by_name = {c.name: c for c in self.calls}
        self.config = config
        self.seed = seed
        self.text_only = text_only
        self.out_dir = out_dir
        self._base = Replayer(config, ReplayOptions(text_only=text_only), models=models)

    def pick(self, request: DialRequest) -> Any:
        named = request.variables.get("call")
        if named and named in self.by_name:
            return self.by_name[named]
        return self.calls[request.key(self.seed) % len(self.calls)]

    async def dial(self, request: DialRequest) -> CallRecord:
        from agent.replay.runner import Replayer, ReplayOptions

        call = self.pick(request)
        record_dir = None
        if self.out_dir is not None and not self.text_only:
            record_dir = self.out_dir / "recordings" / f"attempt-{request.attempt_id}"
        config = self.config.with_variables(request.variables)
        if request.caller_id:
            config = config.model_copy(update={"caller_number": request.caller_id})
        replayer = Replayer(
            config,
            ReplayOptions(text_only=self.text_only, record_dir=record_dir),
            models=self._base.models(),
        )
        replayed = await replayer.replay(call)
        result = replayed.result
        transcript = recording = None
        if self.out_dir is not None:
            folder = self.out_dir / "calls"
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"attempt-{request.attempt_id}.json"
            path.write_text(result.to_json_line() + "\n", encoding="utf-8")
            transcript = str(path)
            if record_dir is not None and (record_dir / f"{call.name}.wav").exists():
                recording = str(record_dir / f"{call.name}.wav")
            from agent.replay.timeline import CallPage, render_call_page
            from agent.telephony.phone import mask_number

            title = (
                f"campaign {request.campaign}: contact {mask_number(request.number)}, "
                f"attempt {request.attempt_no}"
            )
            page = CallPage.of(replayed, Path(recording) if recording else None, title=title)
            path.with_suffix(".html").write_text(render_call_page(page), encoding="utf-8")
        call_id = next((getattr(m, "call_id", None) for m in replayed.messages), None)
        return CallRecord(
            disposition=result.disposition,
            voicemail_left=result.voicemail_left,
            amd_category=result.amd.category if result.amd else None,
            duration=result.duration,
            call_id=call_id,
            transcript_path=transcript,
            recording_path=recording,
            detail=f"simulated: {call.name}",
        )

    async def aclose(self) -> None:
        return None


class LiveKitDispatcher:
    """Places each attempt through LiveKit: a room, an agent dispatch, the worker dials.

    The worker runs the call in its own process and records the outcome in the
    campaign store under the attempt id (it needs ``CALLRT_DB_URL`` pointing at
    the same store); this dispatcher waits for that record.

    Args:
        telephony: a :class:`~agent.telephony.livekit.api.LiveKitTelephony`.
        store: the campaign store the worker writes to.
        agent_config: the agent config path the worker loads ("default" for its own).
        timeout: seconds to wait for the worker's record before giving up (``error``).
        poll: seconds between looks at the store.
    """

    records_calls = True

    def __init__(
        self,
        telephony: Any,
        store: CampaignStore,
        *,
        agent_config: str = "default",
        timeout: float = 900.0,
        poll: float = 1.0,
    ) -> None:
        self.telephony = telephony
        self.store = store
        self.agent_config = agent_config
        self.timeout = timeout
        self.poll = poll

    async def dial(self, request: DialRequest) -> CallRecord:
        from agent.telephony.livekit.api import DialJob

        job = DialJob(
            number=request.number,
            agent_config=self.agent_config,
            campaign_id=str(request.campaign_id),
            contact_id=str(request.contact_id),
            caller_id=request.caller_id,
            attempt_id=str(request.attempt_id),
            variables=dict(request.variables) or None,
        )
        room = f"campaign-{request.campaign_id}-attempt-{request.attempt_id}"
        try:
            await self.telephony.create_room(room)
            await self.telephony.dispatch(room, job)
        except Exception as exc:  # the server refused: the call was never placed
            logger.warning(
                "dispatch failed",
                extra={"attempt_id": request.attempt_id, "error": type(exc).__name__},
            )
            return CallRecord(disposition="failed", detail=f"dispatch failed: {exc}"[:500])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while loop.time() < deadline:
            record = await self.store.call_for_attempt(request.attempt_id)
            if record is not None:
                return record
            await asyncio.sleep(self.poll)
        await self.telephony.hang_up(room)
        return CallRecord(
            disposition="error", detail=f"no outcome from the worker after {self.timeout:.0f} s"
        )

    async def aclose(self) -> None:
        await self.telephony.aclose()


async def record_campaign_call(
    attempt_id: str, call_id: str, result: Any, *, db_url: str | None = None
) -> bool:
    """Record a campaign call's outcome from the worker process that ran it.

    ``result`` is the call's :class:`~agent.replay.results.CallResult` (from a
    :class:`~agent.replay.observer.CallObserver` on its bus). The store is
    ``db_url`` or ``CALLRT_DB_URL``; without one the outcome cannot reach the
    dialer (it then records ``error`` when it stops waiting). Returns whether
    the call was recorded; never raises.
    """
    import os
    from datetime import UTC, datetime

    from agent.campaigns.store import DB_ENV

    url = db_url or os.environ.get(DB_ENV, "").strip()
    if not url or not attempt_id.isdigit():
        logger.warning(
            "campaign call not recorded: no campaign store (set CALLRT_DB_URL)",
            extra={"call_id": call_id},
        )
        return False
    record = CallRecord(
        disposition=result.disposition,
        voicemail_left=result.voicemail_left,
        amd_category=result.amd.category if result.amd else None,
        duration=result.duration,
        call_id=call_id,
    )
    try:
        store = await CampaignStore.open(url)
        try:
            await store.record_call(int(attempt_id), record, now=datetime.now(UTC))
        finally:
            await store.aclose()
    except Exception as exc:  # the call is over: report, never raise
        logger.error(
            "campaign call not recorded",
            extra={"call_id": call_id, "error": f"{type(exc).__name__}: {exc}"[:300]},
        )
        return False
    return True
