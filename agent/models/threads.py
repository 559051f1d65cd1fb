"""CPU threads for local inference when other work shares the cores.

Two measures keep a 2-thread llama.cpp generation from collapsing when anything else
runs on the machine: another call's process, a transcription, a synthesis.

1. **A short OpenMP spin** (:func:`limit_openmp_spin`). llama.cpp (and CTranslate2,
   under faster-whisper) run their threads as OpenMP teams. At each barrier, a thread
   that finished its share spins for GNU OpenMP's default of 300,000 rounds before it
   sleeps. When the team's other thread has lost its core to another process, the
   spinning one holds the only free core and the barrier takes a whole scheduler slice.
   On a 2-core machine, two processes each evaluating a prompt on 2 threads took
   1.4 to 6.3 s for 89 tokens instead of 0.23 s. With ``GOMP_SPINCOUNT=1000`` they
   took 0.45 s, and an idle machine is as fast as before. The variable must be set
   before the OpenMP runtime loads, so this module sets it when :mod:`agent.models` is
   imported, unless the environment already sets it or ``OMP_WAIT_POLICY``.

2. **Threads chosen by measured token time** (:class:`DecodeThreads`). Generating one
   token is bound by memory, not arithmetic. On an idle machine 2 threads take about
   10 ms a token and 1 thread 14 ms. When another process generates at the same time,
   2 threads take about 40 ms, even with the short spin, and 1 thread 15 to 20 ms.
   So each generated token runs on whichever count has lately been faster, and the
   slower count is tried again now and then in case the load has changed.

Figures: ``bench/llm.py --contention`` on the 2-core development machine.
"""

from __future__ import annotations

import os
import threading

__all__ = ["OPENMP_SPIN", "DecodeThreads", "limit_openmp_spin"]

#: GNU OpenMP spin rounds at a barrier before a waiting thread sleeps
OPENMP_SPIN = "1000"


def limit_openmp_spin(environ: dict[str, str] | os._Environ[str] | None = None) -> bool:
    """Set ``GOMP_SPINCOUNT`` to :data:`OPENMP_SPIN` unless the environment chose a policy.

    Args:
        environ: the environment to change; ``os.environ`` when None.

    Returns:
        Whether the variable was set (False if ``GOMP_SPINCOUNT`` or
        ``OMP_WAIT_POLICY`` was already there: the operator's choice stands).
    """
    env = os.environ if environ is None else environ
    if "GOMP_SPINCOUNT" in env or "OMP_WAIT_POLICY" in env:
        return False
    env["GOMP_SPINCOUNT"] = OPENMP_SPIN
    return True


class DecodeThreads:
    """Picks 1 or ``most`` threads for the next generated token, by measured token time.

    Each count keeps a moving average of its seconds per token. The next token runs on
    a count that has no measurement yet, else on the faster one; every
    ``probe_every``-th token runs on the slower one, so that a change in load is seen.
    One instance serves every context of a model file in the process (the load it
    measures is the machine's); it is thread-safe.

    Args:
        most: the most threads a decode may use (the model's ``n_threads``).
        probe_every: one token in this many runs on the count that is not preferred.
        weight: weight of the newest measurement in the moving average.
    """

    def __init__(self, most: int, *, probe_every: int = 12, weight: float = 0.3) -> None:
        if most < 1:
            raise ValueError(f"most: expected at least 1 thread, got {most}")
        if probe_every < 2:
            raise ValueError(f"probe_every: expected at least 2, got {probe_every}")
        if not 0.0 < weight <= 1.0:
            raise ValueError(f"weight: expected a number in (0, 1], got {weight}")
        self._choices = (most, 1) if most > 1 else (1,)
        self._probe_every = probe_every
        self._weight = weight
        self._seconds: dict[int, float] = {}
        self._tokens = 0
        self._lock = threading.Lock()

    @property
    def most(self) -> int:
        """The largest thread count this chooses."""
        return self._choices[0]

    def seconds_per_token(self) -> dict[int, float]:
        """The moving average of seconds per token for each count measured so far."""
        with self._lock:
            return dict(self._seconds)

    def preferred(self) -> int:
        """The count that is faster on the measurements so far (``most`` if none)."""
        with self._lock:
            return self._preferred()

    def _preferred(self) -> int:
        if len(self._seconds) < len(self._choices):
            return self._choices[0]
        return min(self._choices, key=lambda n: (self._seconds[n], -n))

    def choose(self) -> int:
        """Threads for the next token."""
        with self._lock:
            self._tokens += 1
            for n in self._choices:
                if n not in self._seconds:
                    return n
            best = self._preferred()
            if len(self._choices) > 1 and self._tokens % self._probe_every == 0:
                return next(n for n in self._choices if n != best)
            return best

    def record(self, threads: int, seconds: float) -> None:
        """A token took ``seconds`` on ``threads`` threads."""
        if threads not in self._choices or seconds < 0:
            return
        with self._lock:
            old = self._seconds.get(threads)
            self._seconds[threads] = (
                seconds if old is None else old + self._weight * (seconds - old)
            )
