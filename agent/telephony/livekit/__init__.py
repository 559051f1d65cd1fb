"""LiveKit telephony: SIP dialing through the server API, and the room as a line.

- :mod:`~agent.telephony.livekit.api`: dialing, transfers and hang-ups through
  LiveKit's server API.
- :mod:`~agent.telephony.livekit.line`: ``LiveKitLine``, a room's SIP participant as
  the call's line.
"""
