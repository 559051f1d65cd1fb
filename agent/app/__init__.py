"""The application layer: the only place that composes the layers below.

- :mod:`~agent.app.call`: ``run_call``, the composition root of one call (line,
  session, AMD, guardrail and controller actors on one bus).
- :mod:`~agent.app.config` (with ``config_env``, ``config_errors``,
  ``config_layers``): the agent config file, its defaults and its errors.
- :mod:`~agent.app.guarding`: the glue between the session's hooks and the
  guardrail actor.
- :mod:`~agent.app.worker`: the LiveKit worker (inbound and dispatched calls).
- :mod:`~agent.app.chat`: a call over the text line (``chat``).
- :mod:`~agent.app.logs`, :mod:`~agent.app.metrics`: logging and Prometheus.
- :mod:`~agent.app.cli`: the command line (``python -m agent``).
"""
