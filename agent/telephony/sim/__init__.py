"""The simulated line: recorded calls played through the same actors as real ones.

- :mod:`~agent.telephony.sim.recorded_call`: the recorded-call format (a contract:
  ``docs/recorded-calls.md``).
- :mod:`~agent.telephony.sim.simulator`: ``CallSimulator``, the callee side.
- :mod:`~agent.telephony.sim.io`: livekit audio input/output over the simulator.
- :mod:`~agent.telephony.sim.tones`, :mod:`~agent.telephony.sim.recording`,
  :mod:`~agent.telephony.sim.speech_cache`: tones, call recordings, and callee
  speech synthesised once and cached.
"""
