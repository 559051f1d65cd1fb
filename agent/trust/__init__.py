"""Trust: who is on the line and what the agent may do for them.

- :mod:`~agent.trust.call_controls`: the per-call controls object the session and
  tools consult (trust level, guardian, pending questions).
- :mod:`~agent.trust.tools`: tool specs, loading, and the policy that wraps them.
- :mod:`~agent.trust.guardian`: the account holder's verifier and question desk.
- :mod:`~agent.trust.guardian_http`, :mod:`~agent.trust.guardian_remote`: the desk
  over HTTP, and the client job processes use.
"""
