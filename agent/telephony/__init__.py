"""Lines a call runs on, and phone numbers.

- :mod:`~agent.telephony.protocol`: the line protocol every line implements, and
  the capabilities each declares.
- :mod:`~agent.telephony.line`: the telephone line model (band limit, G.711, noise).
- :mod:`~agent.telephony.sim`: the simulated line that plays recorded calls.
- :mod:`~agent.telephony.livekit`: LiveKit SIP: the server API and the room line.
- :mod:`~agent.telephony.chat_line`: the text line (``chat``, text-only replays).
- :mod:`~agent.telephony.audio`: audio frames and buffers shared by the lines.
- :mod:`~agent.telephony.phone`: E.164 parsing and masking.
"""
