"""A text conversation through the phone-call composition (:class:`agent.app.chat.ChatSession`).

Each test types turns into a :class:`ChatSession` on the virtual clock and checks
what a person on the other side would notice: what the agent said, how the chat
ended, what the agent was told (the LLM requests), which tool calls ran, and
the call's messages (verification, tool reviews, guardian questions).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from livekit.agents import llm

from agent.app.call import ModelSet
from agent.app.chat import ChatSession
from agent.app.config import AgentConfig
from agent.core import clock
from agent.core.messages import Channel
from agent.models.estimate_tts import EstimateTTS
from agent.models.script_llm import ScriptLLM, load_script, new_input
from agent.telephony.sim.io import TranscriptFeedSTT
from tests.fakes.models import ScriptedLLM

DATA = Path(__file__).resolve().parents[1] / "data" / "chat"
OPENING = "[CALL_OPENING]"
GUARDIAN_NUMBER = "+15550100999"
OTHER_NUMBER = "+15550100111"
SPOKEN_PIN = "two four six eight"

# -- tools the agent config names as "tests.unit.test_chat:<function>" ------------------

#: Every tool call that actually ran: (tool, arguments).
RAN: list[tuple[str, dict[str, str]]] = []


def look_up_balance() -> str:
    """Look up the caller's account balance."""
    RAN.append(("look_up_balance", {}))
    return "The balance is 42 dollars."


def update_address(street: str) -> str:
    """Change the mailing address on the caller's account.

    Args:
        street: The new street address.
    """
    RAN.append(("update_address", {"street": street}))
    return f"Address changed to {street}."


def book_appointment(day: str) -> str:
    """Book a dental appointment for the caller.

    Args:
        day: The day of the week.
    """
    RAN.append(("book_appointment", {"day": day}))
    return f"Booked for {day}."


TOOLS = [
    {"function": "tests.unit.test_chat:look_up_balance", "side_effects": False},
    {"function": "tests.unit.test_chat:update_address"},
    {"function": "tests.unit.test_chat:book_appointment", "confirm": True},
]


@pytest.fixture(autouse=True)
def _no_tool_ran_yet() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


# -- helpers ----------------------------------------------------------------------------


class RecordingScriptLLM(ScriptLLM):
    """The ``script:`` LLM, remembering each request and the loop time it was made."""

    def __init__(self, path: Path) -> None:
        super().__init__(load_script(path), source=str(path))
        self.requests: list[tuple[float, llm.ChatContext]] = []

    def chat(self, *, chat_ctx: llm.ChatContext, **kwargs: Any) -> llm.LLMStream:
        self.requests.append((asyncio.get_running_loop().time(), chat_ctx.copy()))
        return super().chat(chat_ctx=chat_ctx, **kwargs)


def models(model: llm.LLM) -> ModelSet:
    return ModelSet(
        stt=TranscriptFeedSTT(),
        llm=model,
        tts=EstimateTTS(sample_rate=16000),
        vad=None,
        turn_detection="stt",
    )


def replies(rules: list[tuple[str, str]], default: str = "Okay.") -> Callable[[Any], str]:
    """A ScriptedLLM reply function: the first pattern found in the request's new input."""

    def reply(chat_ctx: llm.ChatContext) -> str:
        text, _ = new_input(chat_ctx)
        return next((say for pattern, say in rules if re.search(pattern, text, re.I)), default)

    return reply


def run(main: Coroutine[Any, Any, Any]) -> Any:
    return clock.run(main)


def of_kind(s: ChatSession, kind: str) -> list[Any]:
    return [m for m in s.messages if m.kind == kind]


def said(s: ChatSession) -> list[str]:
    """Everything the agent said, turn by turn."""
    return [m.text for m in of_kind(s, "agent_turn_completed")]


def messages_of(ctx: llm.ChatContext, role: str) -> list[str]:
    return [m.text_content or "" for m in ctx.messages() if m.role == role]


async def until(check: Callable[[], Any], *, within: float = 120.0) -> Any:
    """Wait (virtual time) until ``check()`` is truthy; returns it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while loop.time() < deadline:
        if value := check():
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"not true within {within} s of virtual time")


def agent_config(**keys: Any) -> AgentConfig:
    """An agent config from these keys (as in a YAML file; the environment is not read)."""
    return AgentConfig.model_validate(keys)


def guardian_config(**guardian: Any) -> AgentConfig:
    return agent_config(
        guardian={"numbers": [GUARDIAN_NUMBER], "pin": "2468", **guardian}, tools=TOOLS
    )


def tool_chat(
    config: AgentConfig, caller: str = GUARDIAN_NUMBER, channel: Channel = "voice"
) -> tuple[ChatSession, RecordingScriptLLM]:
    model = RecordingScriptLLM(DATA / "tool_replies.yaml")
    return ChatSession(config, models(model), channel=channel, caller_number=caller), model


def reviews(s: ChatSession) -> list[tuple[str, str, str]]:
    return [(m.tool, m.decision, m.reason) for m in of_kind(s, "tool_call_reviewed")]


# -- the conversation -------------------------------------------------------------------


def test_the_agent_opens_the_chat_and_the_opening_marker_is_not_kept() -> None:
    model = ScriptedLLM(
        replies([(re.escape(OPENING), "Hello, this is Sam. How can I help?")], "Sure.")
    )

    async def main() -> tuple[str, str]:
        s = ChatSession(agent_config(), models(model))
        opening = await s.start()
        reply = await s.send("What are your hours?")
        await s.close()
        return opening, reply.text

    opening, reply = run(main())
    assert opening == "Hello, this is Sam. How can I help?"
    assert reply == "Sure."
    first, later = model.requests[0], model.requests[-1]
    assert messages_of(first, "user")[-1] == OPENING
    assert OPENING not in messages_of(later, "user")
    assert messages_of(later, "user") == ["What are your hours?"]
    assert "Hello, this is Sam. How can I help?" in messages_of(later, "assistant")


def test_the_agent_remembers_earlier_turns() -> None:
    model = ScriptedLLM(
        replies([("hours", "We're open nine to five."), ("saturday", "No, closed Saturdays.")])
    )

    async def main() -> list[str]:
        s = ChatSession(agent_config(), models(model))
        await s.start()
        first = await s.send("What are your hours?")
        second = await s.send("And on Saturday?")
        await s.close()
        return [first.text, second.text]

    assert run(main()) == ["We're open nine to five.", "No, closed Saturdays."]
    last = model.requests[-1]
    assert messages_of(last, "user")[-2:] == ["What are your hours?", "And on Saturday?"]
    assert "We're open nine to five." in messages_of(last, "assistant")


def test_end_call_marker_ends_the_chat_after_its_sentence() -> None:
    model = ScriptedLLM(
        replies([("bye", "Thanks for calling, goodbye. [END_CALL] Anything else I can do?")])
    )

    async def main() -> tuple[Any, Any, Any, ChatSession]:
        s = ChatSession(agent_config(), models(model))
        await s.start()
        reply = await s.send("That's all, bye.")
        ended = await asyncio.wait_for(s.wait_ended(), 60)
        return reply, ended, await s.close(), s

    reply, ended, closed, s = run(main())
    assert reply.text == "Thanks for calling, goodbye."
    assert reply.outcome == "completed"
    assert (closed.disposition, closed.reason) == ("completed", "agent ended the call")
    assert (ended.disposition, ended.reason) == ("completed", "agent ended the call")
    assert all("[" not in text and "Anything else" not in text for text in said(s))


def test_a_turn_typed_after_the_agent_ended_the_chat_returns_at_once() -> None:
    model = ScriptedLLM(replies([("bye", "Goodbye. [END_CALL]")]))

    async def main() -> Any:
        s = ChatSession(agent_config(), models(model))
        await s.start()
        await s.send("bye")
        await asyncio.wait_for(s.wait_ended(), 60)
        try:
            return await asyncio.wait_for(s.send("Hello? Are you still there?"), 60)
        finally:
            await s.close()

    reply = run(main())
    assert (reply.text, reply.outcome) == ("", "aborted")


def test_transfer_to_a_known_target_ends_the_chat_as_transferred() -> None:
    model = ScriptedLLM(replies([("bill", "Let me transfer you to billing. [TRANSFER:billing]")]))
    config = agent_config(transfer={"targets": {"billing": "+15550100200"}})

    async def main() -> tuple[Any, Any, ChatSession]:
        s = ChatSession(config, models(model))
        await s.start()
        reply = await s.send("I have a question about my bill.")
        await asyncio.wait_for(s.wait_ended(), 60)
        return reply, await s.close(), s

    reply, outcome, s = run(main())
    assert reply.text == "Let me transfer you to billing."
    assert outcome.disposition == "transferred"
    assert [m.target for m in of_kind(s, "call_transferred")] == ["billing"]


def test_transfer_to_an_unknown_target_keeps_the_chat_going_and_names_the_known_ones() -> None:
    model = ScriptedLLM(
        replies(
            [
                ("no transfer target", "Sorry, I can't transfer you there."),
                ("sales", "Transferring you to sales. [TRANSFER:sales]"),
                ("hours", "We're open nine to five."),
            ]
        )
    )
    config = agent_config(transfer={"targets": {"billing": "+15550100200"}})

    async def main() -> tuple[Any, Any, ChatSession]:
        s = ChatSession(config, models(model))
        await s.start()
        await s.send("Put me through to sales.")
        await until(lambda: "Sorry, I can't transfer you there." in said(s))
        later = await s.send("What are your hours?")
        return later, await s.close(), s

    later, outcome, s = run(main())
    assert later.text == "We're open nine to five."
    assert (outcome.disposition, outcome.reason) == ("completed", "callee hung up")
    assert of_kind(s, "call_transferred") == []
    told = next(
        r for r in model.requests if any("sales" in t for t in messages_of(r, "system")[1:])
    )
    note = next(t for t in messages_of(told, "system")[1:] if "sales" in t)
    assert "billing" in note


# -- questions for the guardian ---------------------------------------------------------

_GUARDIAN_REPLIES = replies(
    [
        ("could not get an answer", "Sorry, I could not reach the account holder."),
        ("refund", "Let me check. [ASK_GUARDIAN:May we refund the cleaning?]"),
    ]
)


def guardian_reply(chat_ctx: llm.ChatContext) -> str:
    """Repeats the guardian's answer from the resume instructions, when there is one."""
    text, _ = new_input(chat_ctx)
    if m := re.search(r"answered: (.*?)\. Tell", text):
        return f"The account holder said: {m.group(1)}."
    return _GUARDIAN_REPLIES(chat_ctx)


def test_ask_guardian_holds_the_caller_and_resumes_with_the_answer() -> None:
    model = ScriptedLLM(guardian_reply)
    config = agent_config(
        guardian={"numbers": [GUARDIAN_NUMBER], "hold_message": "Please hold while I check."}
    )

    async def main() -> tuple[Any, list[str], list[Any], ChatSession]:
        s = ChatSession(config, models(model))
        await s.start()
        reply = await s.send("Can I get a refund?")
        await until(lambda: "Please hold while I check." in said(s))
        pending = s.desk.pending()
        heard = said(s)
        s.desk.answer(pending[0].id, "yes, refund approved")
        await until(lambda: len(said(s)) > len(heard))
        await s.close()
        return reply, heard, pending, s

    reply, heard, pending, s = run(main())
    assert reply.text == "Let me check."
    assert heard[-2:] == ["Let me check.", "Please hold while I check."]
    assert [q.question for q in pending] == ["May we refund the cleaning?"]
    assert said(s)[-1] == "The account holder said: yes, refund approved."
    resumed = model.requests[-1]
    assert any("yes, refund approved" in t for t in messages_of(resumed, "system"))


def test_a_turn_typed_on_hold_gets_no_reply_until_the_guardian_answers() -> None:
    model = ScriptedLLM(guardian_reply)
    config = agent_config(guardian={"numbers": [GUARDIAN_NUMBER]})

    async def main() -> tuple[Any, ChatSession]:
        s = ChatSession(config, models(model))
        await s.start()
        await s.send("Can I get a refund?")
        pending = await until(s.desk.pending)
        on_hold = await s.send("Hello? Are you still there?")
        s.desk.answer(pending[0].id, "no")
        await until(lambda: said(s)[-1].startswith("The account holder"))
        await s.close()
        return on_hold, s

    on_hold, s = run(main())
    assert (on_hold.text, on_hold.outcome) == ("", "no_reply")
    assert said(s)[-1] == "The account holder said: no."
    resumed = model.requests[-1]
    assert "Hello? Are you still there?" in messages_of(resumed, "user")


def test_ask_guardian_resumes_without_an_answer_after_the_question_timeout() -> None:
    model = ScriptedLLM(guardian_reply)
    config = agent_config(guardian={"numbers": [GUARDIAN_NUMBER], "question_timeout": 5})

    async def main() -> tuple[float, float, ChatSession]:
        s = ChatSession(config, models(model))
        await s.start()
        await s.send("Can I get a refund?")
        asked = (await until(lambda: of_kind(s, "guardian_question")))[0].at
        resumed = await until(
            lambda: [m for m in of_kind(s, "agent_turn_completed") if "reach" in m.text]
        )
        await s.close()
        return asked, resumed[0].at, s

    asked, resumed_at, s = run(main())
    assert resumed_at - asked == pytest.approx(5.0, abs=0.1)
    assert said(s)[-1] == "Sorry, I could not reach the account holder."
    closed = [m.status for m in of_kind(s, "guardian_question")]
    assert closed == ["pending", "timed_out"]
    assert s.desk.pending() == []


def test_ask_guardian_without_a_guardian_asks_nobody_and_goes_on() -> None:
    model = ScriptedLLM(guardian_reply)

    async def main() -> ChatSession:
        s = ChatSession(agent_config(), models(model))
        await s.start()
        await s.send("Can I get a refund?")
        await until(lambda: "Sorry, I could not reach the account holder." in said(s))
        await s.close()
        return s

    s = run(main())
    assert of_kind(s, "guardian_question") == []
    assert "One moment please, I'm checking on that for you." not in said(s)


# -- who is typing ----------------------------------------------------------------------


@pytest.mark.parametrize("channel", ["chat", "voice"])
def test_each_turn_says_its_channel_and_the_callers_number(channel: Channel) -> None:
    async def main() -> ChatSession:
        s = ChatSession(
            agent_config(), models(ScriptedLLM()), channel=channel, caller_number=OTHER_NUMBER
        )
        await s.start()
        await s.send("Hello")
        await s.send("Are you there?")
        await s.close()
        return s

    turns = of_kind(run(main()), "user_turn_completed")
    assert [t.text for t in turns] == ["Hello", "Are you there?"]
    assert {(t.context.channel, t.context.caller_number) for t in turns} == {
        (channel, OTHER_NUMBER)
    }


def test_a_read_only_tool_runs_for_an_unverified_voice_caller() -> None:
    async def main() -> tuple[Any, ChatSession]:
        s, _ = tool_chat(guardian_config(), caller=OTHER_NUMBER)
        await s.start()
        reply = await s.send("What's my balance?")
        await s.close()
        return reply, s

    reply, s = run(main())
    assert reply.text == "Let me look that up. The balance is 42 dollars."
    assert RAN == [("look_up_balance", {})]
    assert reviews(s) == [("look_up_balance", "allow", "read_only")]


def test_an_unverified_voice_caller_is_denied_a_side_effect_at_once() -> None:
    desk_events: list[str] = []

    async def main() -> tuple[Any, RecordingScriptLLM, ChatSession]:
        s, model = tool_chat(guardian_config(question_timeout=30))
        s.desk.subscribe(lambda event, question: desk_events.append(event))
        await s.start()
        reply = await s.send("Please change my address.")
        await s.close()
        return reply, model, s

    reply, model, s = run(main())
    assert RAN == []
    assert reviews(s) == [("update_address", "deny", "unverified_caller")]
    review = of_kind(s, "tool_call_reviewed")[0]
    (call_made,) = [t for t, ctx in model.requests if "address" in new_input(ctx)[0]]
    assert review.at == pytest.approx(call_made, abs=0.01)  # not after question_timeout
    assert "cannot do that" in reply.text
    assert desk_events == []  # nobody was asked, nothing waited for an answer


def test_a_spoken_pin_verifies_the_guardian_and_is_never_kept() -> None:
    async def main() -> tuple[RecordingScriptLLM, ChatSession]:
        s, model = tool_chat(guardian_config())
        await s.start()
        await s.send(f"my pin is {SPOKEN_PIN}")
        await s.send("What's my balance?")
        await s.close()
        return model, s

    model, s = run(main())
    assert [m.method for m in of_kind(s, "caller_verified")] == ["pin"]
    pin_turn, later = of_kind(s, "user_turn_completed")
    assert SPOKEN_PIN not in pin_turn.text and "2468" not in pin_turn.text
    assert pin_turn.text.startswith("my pin is")
    assert pin_turn.context.verified and later.context.verified
    for _, ctx in model.requests:
        for text in messages_of(ctx, "user"):
            assert SPOKEN_PIN not in text and "2468" not in text


def test_no_message_of_the_call_carries_the_spoken_pin() -> None:
    async def main() -> ChatSession:
        s, _ = tool_chat(guardian_config())
        await s.start()
        await s.send(f"my pin is {SPOKEN_PIN}")
        await s.close()
        return s

    s = run(main())
    assert of_kind(s, "caller_verified")
    leaks = [m.kind for m in s.messages if SPOKEN_PIN in m.model_dump_json()]
    assert leaks == []


def test_a_verified_caller_runs_side_effects_and_confirms_aloud_first() -> None:
    async def main() -> tuple[list[str], list[Any], ChatSession]:
        s, _ = tool_chat(guardian_config())
        await s.start()
        texts = [(await s.send("Please change my address.")).text]
        ran: list[Any] = [list(RAN)]
        await s.send(f"my pin is {SPOKEN_PIN}")
        texts.append((await s.send("Please change my address.")).text)
        ran.append(list(RAN))
        texts.append((await s.send("Book me in for Tuesday.")).text)
        ran.append(list(RAN))
        texts.append((await s.send("yes please")).text)
        ran.append(list(RAN))
        await s.close()
        return texts, ran, s

    texts, ran, s = run(main())
    address = ("update_address", {"street": "1 Main St"})
    booking = ("book_appointment", {"day": "Tuesday"})
    assert ran == [[], [address], [address], [address, booking]]
    assert texts[1] == "Let me change that. Address changed to 1 Main St."
    assert "confirm" in texts[2]
    assert texts[3] == "Let me book that. Booked for Tuesday."
    assert reviews(s) == [
        ("update_address", "deny", "unverified_caller"),
        ("update_address", "allow", "allowed"),
        ("book_appointment", "ask", "confirm_aloud"),
        ("book_appointment", "allow", "confirmed"),
    ]


def test_a_confirmation_is_not_a_yes_when_the_caller_hesitates() -> None:
    async def main() -> ChatSession:
        s, _ = tool_chat(guardian_config())
        await s.start()
        s.press("2468#")
        await until(lambda: of_kind(s, "caller_verified"))
        await s.send("Book me in for Tuesday.")
        await s.send("no, wait")
        await s.close()
        return s

    s = run(main())
    assert RAN == []
    assert reviews(s) == [
        ("book_appointment", "ask", "confirm_aloud"),
        ("book_appointment", "ask", "confirm_aloud"),
    ]


def test_the_right_pin_from_the_wrong_number_never_verifies() -> None:
    async def main() -> ChatSession:
        s, _ = tool_chat(guardian_config(), caller=OTHER_NUMBER)
        await s.start()
        await s.send("my pin is 2468")
        s.press("2468#")
        await asyncio.sleep(1.0)
        await s.send("Please change my address.")
        await s.close()
        return s

    s = run(main())
    assert of_kind(s, "caller_verified") == []
    assert not any(t.context.verified for t in of_kind(s, "user_turn_completed"))
    assert "2468" not in of_kind(s, "user_turn_completed")[0].text
    assert reviews(s) == [("update_address", "deny", "unverified_caller")]
    assert RAN == []


def test_a_keyed_pin_verifies_the_guardian() -> None:
    async def main() -> ChatSession:
        s, _ = tool_chat(guardian_config())
        await s.start()
        s.press("2468#")
        await until(lambda: of_kind(s, "caller_verified"))
        await s.send("Please change my address.")
        await s.close()
        return s

    s = run(main())
    assert [m.method for m in of_kind(s, "caller_verified")] == ["dtmf"]
    assert of_kind(s, "user_turn_completed")[0].context.verified
    assert RAN == [("update_address", {"street": "1 Main St"})]


def test_the_guardian_approves_a_confirm_tool_for_an_unverified_chat_caller() -> None:
    async def main() -> tuple[Any, list[Any], ChatSession]:
        s, _ = tool_chat(guardian_config(), caller=OTHER_NUMBER, channel="chat")
        await s.start()
        typed = asyncio.ensure_future(s.send("Book me in for Tuesday."))
        pending = await until(s.desk.pending)
        ran_while_asking = list(RAN)
        s.desk.answer(pending[0].id, "yes")
        return await typed, [pending, ran_while_asking], s

    reply, (pending, ran_while_asking), s = run(main())
    assert pending[0].question.startswith("May I run book_appointment")
    assert ran_while_asking == []
    assert reply.text == "Let me book that. Booked for Tuesday."
    assert reviews(s) == [("book_appointment", "allow", "guardian_approved")]


def test_the_guardian_question_names_the_tool_arguments() -> None:
    async def main() -> list[Any]:
        s, _ = tool_chat(guardian_config(question_timeout=5), caller=OTHER_NUMBER, channel="chat")
        await s.start()
        typed = asyncio.ensure_future(s.send("Book me in for Tuesday."))
        pending = await until(s.desk.pending)
        await typed
        await s.close()
        return pending

    (question,) = run(main())
    assert "Tuesday" in question.question


def test_a_yes_confirms_only_the_call_it_was_asked_about() -> None:
    async def main() -> ChatSession:
        s, _ = tool_chat(guardian_config())
        await s.start()
        s.press("2468#")
        await until(lambda: of_kind(s, "caller_verified"))
        await s.send("Book me in for Tuesday.")  # the agent asks to confirm Tuesday
        await s.send("sure")  # ... then books Friday instead
        await s.close()
        return s

    s = run(main())
    assert RAN == []
    assert reviews(s) == [
        ("book_appointment", "ask", "confirm_aloud"),
        ("book_appointment", "ask", "confirm_aloud"),
    ]
