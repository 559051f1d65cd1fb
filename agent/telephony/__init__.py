"""Lines a call runs on, and phone numbers.

- :mod:`~agent.telephony.line`: the line protocol every transport implements,
  with its declared capabilities.
- :mod:`~agent.telephony.sim`: the simulated line that plays recorded calls.
- :mod:`~agent.telephony.livekit`: LiveKit SIP: the server API and the room line.
- :mod:`~agent.telephony.chat_line`: the text line (``chat``, text-only replays).
- :mod:`~agent.telephony.audio`: audio frames and buffers shared by the lines.
- :mod:`~agent.telephony.phone`: E.164 parsing and masking.
"""
