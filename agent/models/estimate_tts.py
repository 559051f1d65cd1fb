"""A TTS that speaks silence for as long as the text would take to say.

Used by text-only replays: agent turns occupy realistic time on the (virtual) clock
without running a synthesiser.
"""

from __future__ import annotations

from livekit.agents import tts, utils
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions

SECONDS_PER_CHARACTER = 0.065
MIN_SECONDS = 0.2
FRAME_SIZE_MS = 40


def estimated_duration(text: str) -> float:
    """Seconds an agent would take to say ``text``: 65 ms per character, at least 0.2 s."""
    return max(MIN_SECONDS, SECONDS_PER_CHARACTER * len(text.strip()))


class EstimateTTS(tts.TTS):
    """Silence of :func:`estimated_duration` per ``synthesize()`` call (16-bit mono)."""

    def __init__(self, *, sample_rate: int = 16000) -> None:
        """Create the TTS.

        Args:
            sample_rate: rate of the (silent) frames produced.
        """
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=False),
            sample_rate=sample_rate,
            num_channels=1,
        )

    @property
    def model(self) -> str:
        """Model name used in metrics."""
        return "estimate"

    @property
    def provider(self) -> str:
        """Provider name used in metrics."""
        return "local"

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> EstimateChunkedStream:
        """Return a stream of silence as long as ``text`` would take to say."""
        return EstimateChunkedStream(tts=self, input_text=text, conn_options=conn_options)


class EstimateChunkedStream(tts.ChunkedStream):
    """Silence for one ``synthesize()`` request."""

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        sample_rate = self._tts.sample_rate
        output_emitter.initialize(
            request_id=utils.shortuuid("tts_"),
            sample_rate=sample_rate,
            num_channels=1,
            mime_type="audio/pcm",
            frame_size_ms=FRAME_SIZE_MS,
        )
        samples = round(estimated_duration(self.input_text) * sample_rate)
        output_emitter.push(bytes(2 * samples))
