"""Trust: who is on the line and what the agent may do for them.

- :mod:`~agent.trust.call_controls`: the per-call controls object the session and
  tools consult (trust level, guardian, pending questions).
- :mod:`~agent.trust.tools`: tool specs, loading, and the policy that wraps them.
- :mod:`~agent.trust.guardian`: who the guardian (the account holder) is.
- :mod:`~agent.trust.verifier`: whether the caller is the guardian (pure).
- :mod:`~agent.trust.desk`: the questions waiting for the guardian.
- :mod:`~agent.trust.guardian_http`, :mod:`~agent.trust.guardian_remote`: the desk
  over HTTP, and the client job processes use.
"""
