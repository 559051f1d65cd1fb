"""The ``learned`` decision backend: rule packs combined with a small classifier per pack.

:class:`LearnedDecisionModel` is a livekit ``llm.DecisionModel`` that answers
``llm.Probability`` decisions by pack name, like ``rules``. For a pack that has a
trained classifier (``guardrails/weights/<pack>.npz``: ``abusive`` and
``prompt_injection``) the value is the larger of the rules' score and the
classifier's calibrated score; other packs (``human_handoff``, ``sensitive_data``,
users' packs) answer with their rules alone. ``provider_data`` says which part
fired: ``rules`` and ``learned`` (the two scores; ``learned`` is None for a pack
without a classifier), ``fired`` (``rules``, ``learned``, ``both`` or None: which
reached the pack's anchor, the score its classifier's validation threshold maps
onto) and ``matched`` (the rule ids, as from ``rules``). Everything is local, and
weights are read from the package at start: nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from livekit.agents import llm
from livekit.agents.types import APIConnectOptions

from .learned import WEIGHTS_DIR, LearnedPack, load_learned_packs
from .rules import RulePack, RulesDecisionModel, evaluate_packs

__all__ = ["LearnedDecisionModel", "combined_score"]

#: Rule exceptions that also veto a pack's classifier: where they hold, the text is
#: not what the pack detects whatever words it shares with it (quoting abuse to reject
#: it, a slur reclaimed by the speaker, a homonym, praise, an idiom, a lawful step like
#: "I'll sue you"). The classifier, a bag of
#: n-grams, cannot tell.
VETOES: dict[str, frozenset[str]] = {
    "abusive": frozenset(
        {
            "counter_speech",
            "counter_speech_quoted",
            "reclaimed_self",
            "praise_banter",
            "surprise",
            "figure_of_speech",
            "lawful_action",
            "homonym",
        }
    ),
    "prompt_injection": frozenset({"caller_takes_back"}),
}


def combined_score(
    pack: RulePack, learned: LearnedPack | None, text: str
) -> tuple[float, dict[str, Any]]:
    """Score ``text`` with a pack's rules and, when there is one, its classifier.

    Args:
        pack: The rule pack.
        learned: The pack's trained classifier, or None.
        text: The text to check (not a transcript).

    Returns:
        The value (the larger score) and the ``provider_data`` described in the module docs.
    """
    rules_value, matched = pack.score(text)
    if learned is None:
        return rules_value, {
            "matched": list(matched),
            "rules": rules_value,
            "learned": None,
            "fired": "rules" if matched else None,
        }
    vetoed = pack.exception_holds(text, VETOES.get(pack.name, frozenset()))
    learned_value = 0.0 if vetoed else learned.score(text)
    anchor = learned.anchor
    parts = [
        name for name, v in (("rules", rules_value), ("learned", learned_value)) if v >= anchor
    ]
    fired = "both" if len(parts) == 2 else (parts[0] if parts else None)
    return max(rules_value, learned_value), {
        "matched": list(matched),
        "rules": round(rules_value, 4),
        "learned": round(learned_value, 4),
        "fired": fired,
        "vetoed": vetoed,
    }


class LearnedDecisionModel(llm.DecisionModel):
    """Rules plus a learned classifier per pack (see the module docs).

    Args:
        pack_dirs: Extra rule-pack directories merged over the built-ins.
        weights_dir: Where the trained ``<pack>.npz`` files are.

    Raises:
        PackError: A pack directory or file is invalid.
        ValueError: The weights directory holds no trained packs, or a file is malformed.
    """

    def __init__(
        self, *, pack_dirs: Sequence[str | Path] = (), weights_dir: Path = WEIGHTS_DIR
    ) -> None:
        super().__init__(capabilities=llm.DecisionCapabilities(decision_kinds=["probability"]))
        self._rules = RulesDecisionModel(pack_dirs=pack_dirs)
        self._packs: Mapping[str, RulePack] = self._rules._packs
        self._learned = load_learned_packs(weights_dir)
        if not self._learned:
            # rules alone under the name "learned" would look like success and is not
            raise ValueError(
                f"{weights_dir}: expected trained pack files (*.npz); "
                "python -m guardrails.training writes them"
            )

    @property
    def model(self) -> str:
        return "learned"

    @property
    def provider(self) -> str:
        return "local"

    @property
    def pack_names(self) -> list[str]:
        """The decision names this model answers, sorted."""
        return sorted(self._packs)

    @property
    def learned_pack_names(self) -> list[str]:
        """The packs that have a trained classifier, sorted."""
        return sorted(name for name in self._learned if name in self._packs)

    def score(self, name: str, text: str) -> tuple[float, dict[str, Any]]:
        """Score ``text`` (not a transcript) for pack ``name`` (synchronously).

        Raises:
            KeyError: There is no pack of that name.
        """
        return combined_score(self._packs[name], self._learned.get(name), text)

    def classifier_score(self, name: str, text: str) -> float | None:
        """The calibrated score of pack ``name``'s classifier alone, with no rules and no
        vetoes (None when the pack has no classifier): what the learned part does on its own."""
        learned = self._learned.get(name)
        return None if learned is None else learned.score(text)

    async def _evaluate_impl(
        self,
        *,
        input: str,
        decisions: Mapping[str, llm.Decision],
        conn_options: APIConnectOptions,
    ) -> llm.DecisionResponse:
        return evaluate_packs(self, self._packs, input, decisions, self._score)

    def _score(self, name: str, pack: RulePack, text: str) -> tuple[float, dict[str, Any]]:
        return combined_score(pack, self._learned.get(name), text)
