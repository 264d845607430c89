"""The 'Adapters in minutes' example of docs/harnesses.md: an unknown Gymnasium-style environment
wrapped in under 30 lines (examples/adapter/), through the whole conformance suite."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from harness_conformance import HarnessConformance

import polar_bench

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "adapter" / "thermostat_harness.py"


@pytest.fixture(scope="module", autouse=True)
def thermostat_family():
    sys.path.insert(0, str(EXAMPLE.parent))
    import thermostat_harness  # registers the family

    yield thermostat_harness
    sys.path.remove(str(EXAMPLE.parent))


class TestThermostatAdapter(HarnessConformance):
    task_ids = ["thermostat/mild", "thermostat/cold"]

    def test_same_trajectory_in_spawned_process(self, task_id):
        pytest.skip("the example registers its family at import, which a spawned process does not do")


def test_the_adapter_is_under_30_lines_and_is_the_one_in_the_docs():
    code = EXAMPLE.read_text()
    assert len(code.splitlines()) < 30
    doc = (ROOT / "docs" / "harnesses.md").read_text().split("## Adapters in minutes", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", doc, re.S)
    assert code in blocks, "docs/harnesses.md must show examples/adapter/thermostat_harness.py as it is"


def test_what_the_adapter_derives():
    h = polar_bench.make("thermostat/cold", text=True)
    info = h.task_info
    assert info.action_names == ("heater off", "heater low", "heater high")
    assert [c.unit for c in info.observation_components] == ["deg C", "deg C"]
    assert info.max_episode_steps == 200 and info.domain == "thermostat" and info.package == "gymnasium"
    _, step = h.reset(seed=4)
    assert re.fullmatch(r"room temperature: [-\d.]+ deg C; outside temperature: -10 deg C", step["text"])
    for _ in range(200):
        _, r, term, trunc, _ = h.step(2)
        assert r <= 0.0
    assert trunc and not term
    h.close()
