"""callrt: a telephony voice-agent runtime on livekit-agents.

The package is built in layers; each imports only the layers below it (held by
the import-linter contracts in ``pyproject.toml``, run by ``make lint``):

- :mod:`agent.app`: the composition root (``run_call``), config, worker, chat
  session, logs, metrics and the command line (``agent.app.cli``). Only it composes.
- :mod:`agent.replay`, :mod:`agent.campaigns`: recorded-call replays and outbound
  campaigns, the app's two drivers of calls.
- :mod:`agent.controller`: the call's state machine and its actor.
- :mod:`agent.session`: the session actor over livekit's ``AgentSession``.
- :mod:`agent.trust`: call controls, tools and their policy, the guardian.
- :mod:`agent.telephony`: lines (simulated, LiveKit, chat) and phone numbers.
- :mod:`agent.models`: local and cloud STT/TTS/LLM/VAD as livekit plugins.
- :mod:`agent.core`: the message union and the actor kernel; imports nothing of ours.

``amd`` and ``guardrails`` (top-level packages) sit beside the session and the
controller and import only :mod:`agent.core`.
"""
