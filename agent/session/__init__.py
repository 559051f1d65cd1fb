"""The session layer: one call's conversation through livekit's ``AgentSession``.

- :mod:`~agent.session.actor`: :class:`SessionActor`, the actor that owns the
  ``AgentSession`` and speaks the message union on the bus.
- :mod:`~agent.session.agent`: the livekit ``Agent`` (``CallAgent``), its reply gate
  and the session hooks the guardrails plug into.
- :mod:`~agent.session.sentences`: the sentence gate (first clause, sentences).
- :mod:`~agent.session.markers`: control markers found and stripped from the reply.
- :mod:`~agent.session.runs`: run tracking (which reply answers which turn).
- :mod:`~agent.session.latency`: the per-turn latency breakdown (``TurnLatency``).

It never imports the controller: the controller commands it through messages.
"""
