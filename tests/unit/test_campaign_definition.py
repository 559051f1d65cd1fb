"""Campaign YAML files and contacts CSVs: what loads, and errors that point at the mistake."""

from __future__ import annotations

import json
from datetime import time
from pathlib import Path

import pytest

from agent.campaigns.definition import (
    DEFAULT_WINDOWS,
    CampaignDefinitionError,
    CampaignSpec,
    load_campaign,
    load_contacts,
)
from agent.campaigns.policy import DEFAULT_RETRY_AFTER, Window

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "configs" / "campaigns"

FULL = """\
agent: ../agents/front-desk.yaml
caller_id: +1 555 010 0000
timezone: America/New_York
windows:
  - days: mon-fri
    start: "09:00"
    end: 20:00
  - days: [sat]
    start: "10:00"
    end: "24:00"
pacing:
  max_concurrent: 4
  max_per_second: 2
retry:
  max_attempts: 3
  backoff: 2
  after: {busy: 10m, no-answer: 1h, voicemail-left: never}
dnc:
  numbers: ["+15551230000"]
  prefixes: ["+1900"]
  file: dnc.txt
priority: 5
lease_seconds: 1m
max_call_seconds: 300
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def campaign_error(path: Path) -> str:
    with pytest.raises(CampaignDefinitionError) as info:
        load_campaign(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def contacts_error(path: Path, **kwargs: str) -> str:
    with pytest.raises(CampaignDefinitionError) as info:
        load_contacts(path, **kwargs)  # type: ignore[arg-type]
    message = str(info.value)
    assert "\n" not in message
    return message


# ----------------------------------------------------------------------------- campaign YAML


def test_full_campaign_loads(tmp_path: Path) -> None:
    agent = write(tmp_path, "agents/front-desk.yaml", "instructions: hi\n")
    write(tmp_path, "campaigns/dnc.txt", "# opted out\n+15551239999  # asked twice\n\n+1976*\n")
    spec = load_campaign(write(tmp_path, "campaigns/spring.yaml", FULL))
    assert spec.agent == str(agent.resolve())
    assert spec.caller_id == "+15550100000"
    assert spec.timezone == "America/New_York"
    assert spec.windows == (
        Window(frozenset(range(5)), time(9), time(20)),
        Window(frozenset({5}), time(10), None),
    )
    assert (spec.max_concurrent, spec.max_per_second) == (4, 2.0)
    assert spec.retry.max_attempts == 3 and spec.retry.backoff == 2
    assert spec.retry.decide("busy", 2).delay == 1200
    assert spec.retry.decide("voicemail-left", 1).result == "voicemail-left"
    assert spec.retry.decide("failed", 1).delay == DEFAULT_RETRY_AFTER["failed"]
    for blocked in ("+15551230000", "+19005550100", "+15551239999", "+19765550100"):
        assert spec.dnc.blocks(blocked)
    assert not spec.dnc.blocks("+15551230001")
    assert (spec.priority, spec.lease_seconds, spec.max_call_seconds) == (5, 60.0, 300.0)


def test_defaults(tmp_path: Path) -> None:
    spec = load_campaign(write(tmp_path, "c.yaml", "{}\n"))
    assert spec == CampaignSpec()
    assert spec.windows == DEFAULT_WINDOWS
    assert (spec.agent, spec.max_concurrent, spec.max_per_second) == (None, 2, 1.0)
    assert (spec.lease_seconds, spec.max_call_seconds, len(spec.dnc)) == (30.0, None, 0)
    # a key left empty means its default
    assert load_campaign(write(tmp_path, "d.yaml", "windows:\nretry:\npriority:\n")) == spec


def test_spec_round_trips_through_json(tmp_path: Path) -> None:
    write(tmp_path, "agents/front-desk.yaml", "instructions: hi\n")
    write(tmp_path, "campaigns/dnc.txt", "+1976*\n")
    spec = load_campaign(write(tmp_path, "campaigns/spring.yaml", FULL))
    data = json.loads(json.dumps(spec.to_json()))
    assert CampaignSpec.from_json(data) == spec
    assert (
        CampaignSpec.from_json(json.loads(json.dumps(CampaignSpec().to_json()))) == CampaignSpec()
    )


def test_nested_value_error_points_at_line_and_column(tmp_path: Path) -> None:
    text = "retry:\n  max_attempts: 3\n  after:\n    no-answer: 1h\n    busy:   soon\n"
    path = write(tmp_path, "c.yaml", text)
    message = campaign_error(path)
    assert message.startswith(f"{path}:5:13: retry.after.busy: expected a duration like 90s")
    assert message.endswith("got 'soon'")


def test_flow_mapping_value_error_points_at_the_value(tmp_path: Path) -> None:
    path = write(tmp_path, "c.yaml", "retry:\n  after: {busy: 10m, no-answer: later}\n")
    assert campaign_error(path).startswith(f"{path}:2:33: retry.after.no-answer: expected")


def test_unknown_keys_are_named(tmp_path: Path) -> None:
    path = write(tmp_path, "c.yaml", "pacing:\n  max_concurent: 4\n")
    message = campaign_error(path)
    assert message.startswith(f"{path}:2:3: pacing.max_concurent: unknown key")
    assert "did you mean max_concurrent?" in message
    path = write(tmp_path, "d.yaml", "retry:\n  after:\n    hangup: 1h\n")
    assert campaign_error(path).startswith(f"{path}:3:5: retry.after.hangup: unknown key")
    path = write(tmp_path, "e.yaml", "name: spring\n")
    assert campaign_error(path).startswith(f"{path}:1:1: name: unknown key")


def test_duplicate_key(tmp_path: Path) -> None:
    path = write(tmp_path, "c.yaml", "priority: 1\npriority: 2\n")
    assert campaign_error(path) == f"{path}:2:1: priority: duplicate key"


def test_invalid_yaml_and_missing_file(tmp_path: Path) -> None:
    path = write(tmp_path, "c.yaml", "windows: [\n  {days: mon\n")
    assert campaign_error(path).startswith(f"{path}:3:1: invalid YAML:")
    missing = tmp_path / "nope.yaml"
    assert campaign_error(missing) == f"{missing}: file not found (expected a campaign YAML file)"
    path = write(tmp_path, "empty.yaml", "")
    assert campaign_error(path).startswith(f"{path}:1:1: empty file")
    path = write(tmp_path, "list.yaml", "- a\n")
    assert campaign_error(path) == f"{path}:1:1: expected a mapping of keys, got a list"


@pytest.mark.parametrize(
    ("text", "where", "expected"),
    [
        ("agent: missing.yaml\n", "1:8: agent", "file not found: 'missing.yaml'"),
        ("caller_id: 5550100\n", "1:12: caller_id", "expected an E.164 number"),
        ("timezone: Mars/Olympus\n", "1:11: timezone", "expected an IANA time zone"),
        ("windows: []\n", "1:10: windows", "expected a list of windows"),
        ("windows:\n  - {days: mon, start: '09:00'}\n", "2:5: windows[0]", "missing key end"),
        (
            "windows:\n  - days: someday\n    start: '09:00'\n    end: '10:00'\n",
            "2:11: windows[0].days",
            "expected weekdays",
        ),
        (
            "windows:\n  - days: [mon, 3]\n    start: '09:00'\n    end: '10:00'\n",
            "2:11: windows[0].days",
            "expected weekdays",
        ),
        (
            "windows:\n  - days: mon\n    start: '9'\n    end: '10:00'\n",
            "3:12: windows[0].start",
            "expected a time HH:MM",
        ),
        (
            "windows:\n  - days: mon\n    start: '10:00'\n    end: 09:30\n",
            "4:10: windows[0].end",
            "expected a time after the start",
        ),
        (
            "pacing:\n  max_concurrent: 0\n",
            "2:19: pacing.max_concurrent",
            "expected an integer >= 1, got '0'",
        ),
        (
            "pacing:\n  max_concurrent: true\n",
            "2:19: pacing.max_concurrent",
            "expected an integer >= 1",
        ),
        (
            "pacing:\n  max_per_second: fast\n",
            "2:19: pacing.max_per_second",
            "expected a number above 0",
        ),
        ("pacing: 4\n", "1:9: pacing", "expected a mapping of keys, got '4'"),
        ("retry:\n  max_attempts: 1.5\n", "2:17: retry.max_attempts", "expected an integer >= 1"),
        ("retry:\n  backoff: 0\n", "2:12: retry.backoff", "expected a number above 0"),
        ("dnc:\n  numbers: +15550100199\n", "2:12: dnc.numbers", "expected a list"),
        ("dnc:\n  numbers: [+15550100199, '123']\n", "2:27: dnc.numbers[1]", "expected an E.164"),
        ("dnc:\n  prefixes: ['1900']\n", "2:14: dnc.prefixes[0]", "expected a number prefix"),
        ("dnc:\n  file: none.txt\n", "2:9: dnc.file", "cannot read 'none.txt'"),
        ("priority: high\n", "1:11: priority", "expected an integer, got 'high'"),
        ("lease_seconds: 2\n", "1:16: lease_seconds", "at least 5 seconds"),
        ("lease_seconds: never\n", "1:16: lease_seconds", "expected a duration"),
        ("max_call_seconds: 0\n", "1:19: max_call_seconds", "at least 1 seconds or never"),
    ],
)
def test_bad_values_name_key_and_position(
    tmp_path: Path, text: str, where: str, expected: str
) -> None:
    path = write(tmp_path, "c.yaml", text)
    message = campaign_error(path)
    assert message.startswith(f"{path}:{where}: ")
    assert expected in message


def test_yaml_11_traps_read_as_written(tmp_path: Path) -> None:
    # unquoted 20:00 is a base-60 integer and +1555... an integer in YAML 1.1
    text = "caller_id: +15550100000\nwindows:\n  - {days: daily, start: 8:30, end: 20:00}\n"
    spec = load_campaign(write(tmp_path, "c.yaml", text))
    assert spec.caller_id == "+15550100000"
    assert spec.windows == (Window(frozenset(range(7)), time(8, 30), time(20)),)


def test_dnc_file_errors_name_its_line(tmp_path: Path) -> None:
    dnc = write(tmp_path, "dnc.txt", "+15550100199\n# comment\n1900*\n")
    message = campaign_error(write(tmp_path, "c.yaml", "dnc:\n  file: dnc.txt\n"))
    assert message.startswith(f"{dnc}:3: expected a number, or a prefix ending in '*'")


def test_max_call_seconds_never(tmp_path: Path) -> None:
    spec = load_campaign(write(tmp_path, "c.yaml", "max_call_seconds: never\n"))
    assert spec.max_call_seconds is None


# ----------------------------------------------------------------------------- contacts CSV


def test_contacts_load_with_variables_and_zones(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "c.csv",
        "number,first_name,company,timezone,priority\n"
        "+1 212 555 0101,Ada,Acme,,2\n"
        "+442079460101,Oliver,,,\n"
        "+15550100101,Grace,,America/Chicago,-1\n",
    )
    loaded = load_contacts(path, default_priority=7)
    assert loaded.warnings == []
    ada, oliver, grace = loaded.contacts
    assert (ada.line, ada.number, ada.zones, ada.priority) == (
        2,
        "+12125550101",
        ("America/New_York",),
        2,
    )
    assert ada.variables == {"first_name": "Ada", "company": "Acme"}
    assert (oliver.zones, oliver.priority, oliver.variables) == (
        ("Europe/London",),
        7,
        {"first_name": "Oliver"},
    )
    assert (grace.zones, grace.priority) == (("America/Chicago",), -1)
    assert "555" not in repr(ada)


def test_contacts_bom_header_alias_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_bytes(
        "\ufeffPhone,Name\r\n\r\n+442079460101,Zoë\r\n\r\n+442079460102,Åsa\r\n".encode()
    )
    loaded = load_contacts(path)
    assert [c.line for c in loaded.contacts] == [3, 5]
    assert loaded.contacts[1].variables == {"Name": "Åsa"}
    path = write(tmp_path, "d.csv", "PHONE_NUMBER\n+442079460101\n")
    assert load_contacts(path).contacts[0].number == "+442079460101"


def test_quoted_multiline_field_keeps_line_numbers(tmp_path: Path) -> None:
    path = write(
        tmp_path, "c.csv", 'number,note\n+442079460101,"two\nlines"\n+442079460102,x\n+44,y\n'
    )
    message = contacts_error(path)
    assert message.startswith(f"{path}:5:1: number: expected an E.164 number")


def test_unknown_zone_uses_the_default_or_fails(tmp_path: Path) -> None:
    path = write(tmp_path, "c.csv", "first_name,number\nAda,+15550100101\n")
    message = contacts_error(path)
    assert message == (
        f"{path}:2:2: number: cannot tell the callee's time zone from the number; "
        "add a timezone column or set timezone in the campaign"
    )
    loaded = load_contacts(path, default_timezone="America/Denver")
    assert loaded.contacts[0].zones == ("America/Denver",)
    with pytest.raises(ValueError, match="IANA"):
        load_contacts(path, default_timezone="Nowhere/Special")


def test_duplicates_merge_into_the_first_with_a_warning(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "c.csv",
        "number,first_name,last_name,priority\n"
        "+442079460101,Oliver,,1\n"
        "+442079460102,Amelia,,\n"
        "+44 20 7946 0101,Ollie,Twist,4\n",
    )
    loaded = load_contacts(path)
    assert len(loaded.contacts) == 2
    oliver = loaded.contacts[0]
    assert (oliver.line, oliver.priority) == (2, 4)
    assert oliver.variables == {"first_name": "Oliver", "last_name": "Twist"}
    assert loaded.warnings == [f"{path}:4: repeats the number of line 2; merged"]
    assert "7946" not in loaded.warnings[0]


@pytest.mark.parametrize(
    ("text", "where", "expected"),
    [
        ("number,tz\n+4420,x\n", "2:1: number", "expected an E.164 number"),
        ("name,number\nA,\n", "2:2: number", "got ''"),
        (
            "number,timezone\n+442079460101,Mars/Olympus\n",
            "2:2: timezone",
            "expected an IANA time zone",
        ),
        (
            "number,priority\n+442079460101,high\n",
            "2:2: priority",
            "expected an integer, got 'high'",
        ),
        ("number,priority\n+442079460101,1.5\n", "2:2: priority", "expected an integer"),
        ("number,name\n+442079460101,A,extra\n", "2", "expected 2 fields like the header, got 3"),
        ("number,name\n+442079460101\n", "2", "expected 2 fields like the header, got 1"),
        (
            "name,city\nA,B\n",
            "1",
            "expected a number column (named one of number, phone, phone_number)",
        ),
        ("number,first name\n", "1:2", "expected a column name of letters, digits and underscores"),
        ("number,name,Name\n", "1:3: Name", "duplicate column (the same as column 2)"),
        ("number,phone\n", "1:2: phone", "duplicate column (the same as column 1)"),
        ("number,name\n\n\n", "1", "no contacts"),
    ],
)
def test_contact_errors_name_line_and_column(
    tmp_path: Path, text: str, where: str, expected: str
) -> None:
    path = write(tmp_path, "c.csv", text)
    message = contacts_error(path, default_timezone="UTC")
    assert message.startswith(f"{path}:{where}: ")
    assert expected in message


def test_contacts_file_problems(tmp_path: Path) -> None:
    missing = tmp_path / "none.csv"
    assert contacts_error(missing) == f"{missing}: file not found (expected a contacts CSV file)"
    empty = write(tmp_path, "empty.csv", "\n\n")
    assert contacts_error(empty).startswith(f"{empty}: empty file")
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"number,name\n+442079460101,Jos\xe9\n")
    assert contacts_error(latin) == f"{latin}:2: not UTF-8 text (save the CSV as UTF-8)"


# ----------------------------------------------------------------------------- demo files


def test_demo_campaign_and_contacts_load() -> None:
    spec = load_campaign(DEMO / "demo.yaml")
    assert spec.agent == str((DEMO.parent / "agents" / "reminder.yaml").resolve())
    assert spec.timezone == "America/New_York"
    assert spec.windows == (Window(frozenset(range(7)), time(0), None),)
    assert (spec.max_concurrent, spec.max_per_second, spec.retry.max_attempts) == (2, 5.0, 2)
    assert spec.retry.decide("busy", 1).delay == 600
    assert spec.retry.decide("no-answer", 1).delay == 1800
    assert spec.retry.decide("no-answer", 2).result == "max-attempts"
    loaded = load_contacts(
        DEMO / "demo-contacts.csv", default_timezone=spec.timezone, default_priority=spec.priority
    )
    assert 6 <= len(loaded.contacts) <= 10
    assert len(loaded.warnings) == 1 and "merged" in loaded.warnings[0]
    assert sum(spec.dnc.blocks(c.number) for c in loaded.contacts) == 1
    zones = {zone for contact in loaded.contacts for zone in contact.zones}
    assert {"America/New_York", "Europe/London", "Europe/Berlin"} <= zones
    assert all(contact.variables.get("first_name") for contact in loaded.contacts)
