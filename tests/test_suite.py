"""Suite files: loading, validation, seeds, hashing and the suites/describe/validate commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from polar_bench.cli import main
from polar_bench.errors import SuiteError
from polar_bench.suite import episode_seed, load_suite, parse_suite

TINY = Path(__file__).parent / "data" / "suites" / "tiny.toml"


def test_tiny_suite_loads_with_derived_seeds():
    s = load_suite(TINY)
    assert s.name == "tiny" and s.runs == 2 and [t.id for t in s.tasks] == ["gym/CartPole-v1", "gym/Pendulum-v1"]
    cart = s.task("gym/CartPole-v1")
    assert cart.episodes == 3 and len(cart.seeds) == 3
    assert list(cart.seeds) == [episode_seed(7, "gym/CartPole-v1", k) for k in range(3)]
    assert s.task("gym/Pendulum-v1").episodes == 2
    assert cart.normalize(22.0) == 0.0 and cart.normalize(500.0) == 1.0


def test_episode_seed_rule_is_stable():
    # The documented rule: int(sha256("{suite_seed}/{task}/{index}")[:8], 16) % 2**30.
    import hashlib

    expected = int(hashlib.sha256(b"7/gym/CartPole-v1/0").hexdigest()[:8], 16) % 2**30
    assert episode_seed(7, "gym/CartPole-v1", 0) == expected
    assert len({episode_seed(7, "t", k) for k in range(1000)}) == 1000


def test_hash_depends_on_content_not_formatting(tmp_path):
    text = TINY.read_text()
    a = tmp_path / "a.toml"
    a.write_text("# a comment\n\n" + text)
    assert load_suite(a).hash == load_suite(TINY).hash
    b = tmp_path / "b.toml"
    b.write_text(text.replace("episodes = 3", "episodes = 4"))
    assert load_suite(b).hash != load_suite(TINY).hash


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d["tasks"][0].update(domain="nope"), "is not declared in [[domains]]"),
    (lambda d: d["tasks"][0].update(seeds=[1, 1, 2]), "distinct integers"),
    (lambda d: d["tasks"][0]["low"].update(source=""), "must say where the value comes from"),
    (lambda d: d["tasks"][0]["low"].update(value="x"), "must be a finite number"),
    (lambda d: d["tasks"].append(dict(d["tasks"][0])), "listed twice"),
    (lambda d: d["suite"].pop("seed"), "missing required field 'seed'"),
    (lambda d: d["tasks"][0].update(id="CartPole"), "family/name"),
    (lambda d: d["tasks"][0].update(episodes=0), "positive integer"),
    (lambda d: d["tasks"][0].update(metric="wins"), "metric must be one of return, success, depth"),
])
def test_invalid_suites_are_rejected_with_the_reason(mutate, needle):
    import copy

    import tomllib

    data = copy.deepcopy(tomllib.loads(TINY.read_text()))
    mutate(data)
    with pytest.raises(SuiteError) as err:
        parse_suite(data, "x.toml")
    assert needle in str(err.value)


def test_unknown_suite_name_suggests(capsys):
    with pytest.raises(SuiteError, match="available: v1, v2. Did you mean: v2"):
        load_suite("v22")


def test_describe_and_validate_commands(capsys):
    assert main(["describe", str(TINY)]) == 0
    out = capsys.readouterr().out
    assert "gym/CartPole-v1" in out and "22" in out and "test" in out
    assert main(["validate", str(TINY)]) == 0
    assert "ok: suite tiny" in capsys.readouterr().out


def test_validate_rejects_unknown_tasks(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(TINY.read_text().replace("gym/Pendulum-v1", "gym/Pendulum-v9"))
    assert main(["validate", str(bad)]) == 2
    assert "gym/Pendulum-v9: unknown task" in capsys.readouterr().err


def test_validate_rejects_bad_task_options_with_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    text = TINY.read_text()
    pendulum = 'id = "gym/Pendulum-v1"\n'
    cartpole = 'id = "gym/CartPole-v1"\n'
    bad.write_text(text.replace(cartpole, cartpole + "options = { max_episode_steps = 0 }\n")
                   .replace(pendulum, pendulum + 'options = { g = 9.8, colour = "red" }\n'))
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "gym/CartPole-v1: max_episode_steps must be a positive integer" in err
    assert "gym/Pendulum-v1: unknown option 'colour'; the gym family accepts: g, max_episode_steps, render_mode, " \
           "text" in err  # g, Pendulum's own constructor argument, is accepted
    assert len(err.strip().splitlines()) == 1


def test_metric_defaults_to_return_and_travels_into_the_results_summary():
    import copy

    import tomllib

    data = copy.deepcopy(tomllib.loads(TINY.read_text()))
    plain = parse_suite(data, "x.toml")
    assert {t.metric for t in plain.tasks} == {"return"}
    assert all("metric" not in t for t in plain.summary_json()["tasks"])  # suite v1's summaries unchanged
    data["tasks"][0]["metric"] = "success"
    scored = parse_suite(data, "x.toml")
    assert scored.tasks[0].metric == "success" and scored.hash != plain.hash
    assert scored.summary_json()["tasks"][0]["metric"] == "success"
