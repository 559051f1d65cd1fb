"""The call controller: policy for the whole call.

- :mod:`~agent.controller.fsm`: the pure state machine (no I/O, no asyncio):
  events in, commands out.
- :mod:`~agent.controller.actor`: the thin actor that feeds it messages and carries
  out its commands.
- :mod:`~agent.controller.prompt_rules`: what the call can do (transfer, watchdog,
  tool gate settings) and the prompt rules that name the control markers.
"""
