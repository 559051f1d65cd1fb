"""One call's trust and steering, as the session's agent uses them.

:class:`CallControls` bundles what the agent consults on every turn and every
LLM request: who is on the line (:class:`~agent.trust.tools.CallTrust`, guardian
verification), the tool policy, the watchdog, and whether control markers are
on. It is a plain object owned by the call (built in :mod:`agent.app.call`); the
watchdog's background ballot is its only task, and :meth:`aclose` ends it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from agent.core.messages import CallerVerified, WatchdogVerdict
from agent.trust.tools import CallTrust, ToolPolicy

logger = logging.getLogger("agent.controls")

__all__ = ["CallControls"]

Interrupt = Callable[[str, str], None]


class CallControls:
    """Trust, tool policy, watchdog and markers for one call.

    Args:
        call_id: the call.
        publish: puts a message on the call bus.
        trust: the channel, the caller's number and verification.
        policy: the tool policy (tools are wrapped with it).
        watchdog: the watchdog (None: off).
        markers: whether control markers are parsed out of replies.
        context_notes: whether each reply's context says who is on the line.
    """

    def __init__(
        self,
        *,
        call_id: str,
        publish: Callable[[Any], None],
        trust: CallTrust,
        policy: ToolPolicy,
        watchdog: Any | None = None,
        markers: bool = True,
        context_notes: bool = False,
    ) -> None:
        self.call_id = call_id
        self._publish = publish
        self.trust = trust
        self.policy = policy
        self.watchdog = watchdog
        self.markers = markers
        self.context_notes = context_notes
        #: set by the session: interrupts run ``run_id`` for a reason (if still in flight)
        self.interrupt: Interrupt = lambda run_id, reason: None
        policy.observe = self.observe
        self._latest_run: str | None = None
        policy.run_id = lambda: self._latest_run

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    # -- turns -------------------------------------------------------------------

    def on_user_text(self, text: str) -> str:
        """A committed caller turn: verification, then the text to keep (secrets redacted)."""
        verifier = self.trust.verifier
        kept = text
        if verifier is not None:
            was = self.trust.verified
            if not was and verifier.check_turn(text):
                self._verified(getattr(verifier, "method", None) or "pin")
            kept = verifier.redact(text)
        self.policy.caller_turn(kept)
        self.observe("caller", kept)
        return kept

    def redact(self, text: str) -> str:
        """``text`` without the guardian's PIN or passphrase (for transcripts on the bus)."""
        verifier = self.trust.verifier
        return verifier.redact(text) if verifier is not None and text else text

    def on_dtmf(self, digits: str) -> None:
        verifier = self.trust.verifier
        if verifier is not None and not self.trust.verified and verifier.check_dtmf(digits):
            self._verified("dtmf")

    def start(self) -> None:
        """The call is answered: a caller known by number alone is verified now."""
        if self.trust.verified:
            self._verified("caller_id")

    def _verified(self, method: str) -> None:
        logger.info("caller verified", extra={"call_id": self.call_id, "method": method})
        self._publish(CallerVerified(call_id=self.call_id, at=self._now(), method=method))  # type: ignore[arg-type]

    def on_agent_text(self, text: str) -> None:
        self.policy.agent_turn(text)
        self.observe("agent", text)

    def observe(self, role: str, text: str) -> None:
        if self.watchdog is not None and text.strip():
            self.watchdog.observe(role, text)

    # -- LLM requests --------------------------------------------------------------

    def on_request(self, run_id: str) -> list[str]:
        """An LLM request starts for ``run_id``: reminders due now (the watchdog's)."""
        self._latest_run = run_id
        wd = self.watchdog
        if wd is None:
            return []
        try:
            reminders = list(wd.reminders())
            wd.request(run_id, self._on_blocker)
        except Exception:  # the watchdog never delays or breaks a reply
            logger.exception("watchdog failed", extra={"call_id": self.call_id})
            return []
        return reminders

    def _on_blocker(self, run_id: str, findings: Any) -> None:
        ids = ",".join(f.id for f in findings)
        self.interrupt(run_id, f"watchdog: {ids}")

    def on_verdict(self, entry: dict[str, Any], *, mode: str) -> None:
        """Publish a watchdog verdict (its ``watchdog_verdict`` log entry) on the bus."""
        self._publish(
            WatchdogVerdict(
                call_id=self.call_id,
                at=self._now(),
                act={f["id"]: round(f["p"], 3) for f in entry.get("act", [])},
                logged={f["id"]: round(f["p"], 3) for f in entry.get("logged", [])},
                source=str(entry.get("source", "")),
                mode=mode,
                interrupted_run=(
                    self._latest_run
                    if mode == "on" and any(f.get("severity") == "blocker" for f in entry["act"])
                    else None
                )
                if entry.get("act")
                else None,
            )
        )

    # -- the call's goal and findings handled elsewhere ---------------------------

    def set_goal(self, goal: str) -> None:
        """What the call is for now (the watchdog and the tool gate judge against it)."""
        if goal == self.policy.goal:
            return
        self.policy.goal = goal
        if self.watchdog is not None:
            self.watchdog.set_goal(goal)

    def on_tool_review(self, review: Any) -> None:
        """A tool call the policy did not allow was handled there: the watchdog need not flag it."""
        if self.watchdog is not None and review.decision != "allow":
            self.watchdog.settle("unsafe_next_action")

    async def aclose(self) -> None:
        if self.watchdog is not None:
            await self.watchdog.aclose()
