"""The typed results model (`polar_bench.results.model`) and the results JSON Schema say the same, and the
model reads every committed results file and writes it back unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polar_bench.errors import ResultsError
from polar_bench.results import load_json, read_results, results_schema
from polar_bench.results.model import (
    EPISODE_FIELDS,
    EPISODE_REQUIRED,
    RESULTS_FIELDS,
    SUITE_FIELDS,
    SUITE_TASK_FIELDS,
    Episode,
    ResultsFile,
    Status,
)

ROOT = Path(__file__).resolve().parents[1]


def test_the_schema_lists_the_models_fields_statuses_and_required_ones():
    item = results_schema()["properties"]["episodes"]["items"]
    assert set(item["properties"]) == set(EPISODE_FIELDS)
    assert item["properties"]["status"]["enum"] == [s.value for s in Status]
    assert item["required"] == list(EPISODE_REQUIRED)


def test_the_schema_lists_the_results_files_and_suites_fields():
    schema = results_schema()
    assert set(schema["properties"]) == set(RESULTS_FIELDS)
    assert set(schema["properties"]["suite"]["properties"]) == set(SUITE_FIELDS)
    assert set(schema["properties"]["suite"]["properties"]["tasks"]["items"]["properties"]) == set(SUITE_TASK_FIELDS)
    assert all(key in RESULTS_FIELDS for key in schema["required"])


COMMITTED = ["baselines/random/results-v1.json", "baselines/random/results-v2.json",
             *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "leaderboard" / "entries").glob("*/results.json"))]


@pytest.mark.parametrize("path", COMMITTED)
def test_every_committed_results_file_reads_and_writes_back_unchanged(path):
    """Every leaderboard entry and the random baselines' files (harness records, digests, LLM counts):
    from_json then to_json gives the same object (the top level in the same key order), and each record
    on its own too (an older file may order an agent's own keys before ``llm``)."""
    data = load_json(ROOT / path)
    results = read_results(ROOT / path)
    assert results.episodes and results.path == str(ROOT / path)
    assert results.to_json() == data and list(results.to_json()) == list(data)
    assert ResultsFile.from_json(results.to_json()) == results
    for i, rec in enumerate(data["episodes"]):
        assert Episode.from_json(rec, f"{path} episode {i}").to_json() == rec
    assert sum(results.status_counts().values()) == len(data["episodes"])


@pytest.mark.parametrize("change,message", [
    (lambda d: d["suite"]["tasks"][0].update(high=d["suite"]["tasks"][0]["low"]), "unusable normalization references"),
    (lambda d: d["suite"]["tasks"].append(dict(d["suite"]["tasks"][0])), "lists task gym/CartPole-v1 twice"),
    (lambda d: d["episodes"][0].update(task="gym/Nope-v0"), "which the results' suite does not list"),
    (lambda d: d["episodes"][0].update(run=7), "has run 7, outside 0..2"),
    (lambda d: d["episodes"][1].update(index=0), "has episode 0 twice"),
    (lambda d: d.update(format_version=9), "format version 9 is newer than this polar_bench reads"),
    (lambda d: d.update(started=5), "does not match the results schema: started"),
])
def test_a_results_files_structure_is_checked_in_from_json(change, message):
    data = load_json(ROOT / "baselines/random/results-v1.json")
    change(data)
    with pytest.raises(ResultsError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        ResultsFile.from_json(data, "the file")


@pytest.mark.parametrize("change,message", [
    ({"status": "won"}, "has unknown status 'won'"),
    ({"status": "ok", "return": float("nan")}, "a successful episode needs a finite return"),
    ({"status": "ok", "return": None}, "a successful episode needs a finite return"),
    ({"run": "0"}, "'run' must be an integer"),
    ({"seed": True}, "'seed' must be an integer"),
    ({"task": 3}, "'task' must be a string"),
])
def test_structural_checks_happen_in_from_json(change, message):
    rec = {"task": "gym/CartPole-v1", "run": 0, "index": 0, "seed": 5, "return": 12.0, "length": 12,
           "status": "ok", "error": None}
    with pytest.raises(ResultsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Episode.from_json({**rec, **change}, "here")


def test_the_agents_own_keys_are_kept_after_the_measured_ones():
    rec = {"task": "t", "run": 1, "index": 2, "seed": 3, "return": 1.0, "length": 4, "status": "ok", "error": None,
           "wall_seconds": 0.1, "agent_seconds": 0.05, "digest": "sha256:ab", "plan": ["left", "up"]}
    episode = Episode.from_json(rec)
    assert episode.extra == {"plan": ["left", "up"]} and episode.status is Status.OK
    assert list(episode.to_json()) == list(rec)
    failed = Episode.failed("t", 0, 1, 9, "env_error", "the harness crashed").to_json()
    assert failed == {"task": "t", "run": 0, "index": 1, "seed": 9, "return": None, "length": 0,
                      "status": "env_error", "error": "the harness crashed", "wall_seconds": 0.0, "agent_seconds": 0.0}
    assert json.loads(json.dumps(failed)) == failed


def test_scripts_written_against_the_json_records_still_read_them():
    """`polar_bench.read_results` is a stable public name: code that indexed its records as dicts (and
    read ``.data``) keeps working beside the typed attributes."""
    results = read_results(ROOT / "baselines/random/results-v1.json")
    first = results.episodes[0]
    assert first["return"] == first.ret and first["status"] == "ok" and first.get("digest") is None
    assert first.get("no such key", 7) == 7
    with pytest.raises(KeyError):
        first["no such key"]
    assert results.data["agent"]["info"] == results.agent_info and results.data == results.to_json()
    failed = Episode.failed("t", 0, 1, 9, "env_error", "the harness crashed")
    extra = Episode.from_json({**results.data["episodes"][0], "plan": ["left"]})
    for episode in (*results.episodes[:50], failed, extra):   # each key reads as the record holds it
        rec = episode.to_json()
        assert {k: episode[k] for k in rec} == rec and {k: episode.get(k) for k in rec} == rec
        for absent in {"index", "digest", "llm", "attempts", "harness", "plan"} - set(rec):
            assert episode.get(absent, "none") == "none"
            with pytest.raises(KeyError):
                episode[absent]
