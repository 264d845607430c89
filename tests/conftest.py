import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False, help="run the slow tests too")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long tests, run with --slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow test: run with --slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def ray_local():
    """A private Ray of 2 CPUs for one test module (address='local': it never joins a cluster that
    another test run or `ray start` left on the machine)."""
    ray = pytest.importorskip("ray")
    ray.shutdown()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(autouse=True)
def _private_artifact_store(tmp_path_factory, monkeypatch):
    """Each test gets an empty artifact store and verification work folder of its own: none reads or fills
    the user's cache."""
    monkeypatch.setenv("POLAR_BENCH_ARTIFACT_STORE", str(tmp_path_factory.mktemp("artifact_store")))
    # and unfinished verifications keep their work in a folder of their own, not in the user's cache
    monkeypatch.setenv("POLAR_BENCH_VERIFY_DIR", str(tmp_path_factory.mktemp("verify_work")))
