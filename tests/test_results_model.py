"""The typed episode record (`polar_bench.results.model`) and the results JSON Schema say the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polar_bench.errors import ResultsError
from polar_bench.results import read_results, results_schema
from polar_bench.results.model import EPISODE_FIELDS, EPISODE_REQUIRED, Episode, Status

ROOT = Path(__file__).resolve().parents[1]


def test_the_schema_lists_the_models_fields_statuses_and_required_ones():
    item = results_schema()["properties"]["episodes"]["items"]
    assert set(item["properties"]) == set(EPISODE_FIELDS)
    assert item["properties"]["status"]["enum"] == [s.value for s in Status]
    assert item["required"] == list(EPISODE_REQUIRED)


def test_every_committed_record_reads_and_writes_back_unchanged():
    """The random v1 entry's 1,770 records and a v2 file with harness records and digests: from_json then
    to_json gives the same record (the same keys and values)."""
    for path in ("baselines/random/results-v1.json", "baselines/random/results-v2.json"):
        episodes = read_results(ROOT / path).episodes
        assert episodes
        for i, rec in enumerate(episodes):
            assert Episode.from_json(rec, f"{path} episode {i}").to_json() == rec


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
