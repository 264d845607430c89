"""Published analyses whose per-run data is public, shipped with the package so they can be reproduced.

`ATARI100K`: the Atari 100k per-run scores analysed in "Deep Reinforcement Learning at the Edge of the
Statistical Precipice" (Agarwal et al., NeurIPS 2021), with the values the paper publishes for them.
Provenance of the files: ``polar_bench/data/atari100k/README.md``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import UserError

__all__ = ["PublishedTable", "ATARI100K", "TABLES", "get_table"]

DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class PublishedTable:
    """A published table of aggregate metrics and the per-run data it was computed from.

    ``published[algorithm][metric]`` holds the paper's point estimates, rounded as printed
    (``digits`` decimals); ``folder`` (under ``polar_bench/data``) the per-run files.
    """

    name: str
    title: str
    source: str
    folder: str
    published: dict[str, dict[str, float]]
    digits: int = 3
    files: dict[str, str] = field(default_factory=dict)

    def path(self, file: str) -> Path:
        return DATA / self.folder / file

    def _load(self, file: str) -> Any:
        return json.loads(self.path(file).read_text(encoding="utf-8"))

    def references(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Games in alphabetical order, and their random and human reference scores."""
        human, rand = self._load("HUMAN.json"), self._load("RANDOM.json")
        games = sorted(human)
        return games, np.array([rand[g][0] for g in games]), np.array([human[g][0] for g in games])

    def normalized_scores(self) -> dict[str, np.ndarray]:
        """Human-normalized scores ``(runs, games)`` per algorithm, in the order of ``published``:
        ``(score - random) / (human - random)``; CURL's file holds them already normalized."""
        games, low, high = self.references()
        out: dict[str, np.ndarray] = {}
        for label, file in self.files.items():
            if file == "CURL_10_evals.json":
                by_game: dict[str, dict[int, float]] = defaultdict(dict)
                for rec in self._load(file):
                    by_game[rec["game"]][rec["seed"]] = rec["HNS"]
                out[label] = np.array([[by_game[g][s] for s in sorted(by_game[g])] for g in games]).T
            else:
                data = self._load(file)
                out[label] = (np.array([data[g] for g in games], dtype=float).T - low) / (high - low)
        return {k: out[k] for k in self.published}


ATARI100K = PublishedTable(
    name="atari100k",
    title="Atari 100k, human-normalized scores (Agarwal et al. 2021)",
    source="Agarwal et al., Deep Reinforcement Learning at the Edge of the Statistical Precipice, NeurIPS 2021: "
           "Figure A.17 and the rliable colab",
    folder="atari100k",
    published={
        "SPR": {"iqm": 0.337, "median": 0.396, "mean": 0.616},
        "DrQ(ε)": {"iqm": 0.280},
        "DrQ": {"iqm": 0.224},
        "DER": {"iqm": 0.183},
        "OTRainbow": {"iqm": 0.117},
        "CURL": {"iqm": 0.113},
        "SimPLe": {"iqm": 0.130},
    },
    files={"SPR": "SPR.json", "DrQ(ε)": "DrQ_eps.json", "DrQ": "DrQ.json", "DER": "DER.json",
           "OTRainbow": "OTRainbow.json", "CURL": "CURL_10_evals.json", "SimPLe": "SimPLe.json"},
)

TABLES = {t.name: t for t in (ATARI100K,)}
"""The published tables that `python -m polar_bench reproduce NAME` knows."""


def get_table(name: str) -> PublishedTable:
    if name not in TABLES:
        raise UserError(f"no published table {name!r}; choose from {', '.join(TABLES)}")
    return TABLES[name]
