"""A synthetic recommendation catalog in MovieLens-1M's layout, with a fixed seed.

Items have made-up titles and made-up genres, users have MovieLens-style demographics, and interactions
follow a Zipf-like item popularity so that popularity buckets differ. No line of it exists anywhere
else, so a model reproduces it only if it was trained on it: the ground truth for coverage probes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

_ONSETS = (
    "b",
    "br",
    "d",
    "dr",
    "f",
    "g",
    "gl",
    "k",
    "kr",
    "l",
    "m",
    "n",
    "p",
    "pl",
    "qu",
    "r",
    "s",
    "st",
    "t",
    "tr",
    "v",
    "vr",
    "z",
    "zh",
)
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ou", "y")
_CODAS = ("", "", "n", "r", "l", "s", "th", "x", "m", "nd")
GENRES = (
    "Quorble",
    "Fennish",
    "Drabwave",
    "Mirthic",
    "Zelotine",
    "Plunder-Noir",
    "Vesperine",
    "Gloaming",
    "Snickerpunk",
    "Brackish",
    "Tumblecore",
    "Oxbow",
)
AGES = (1, 18, 25, 35, 45, 50, 56)  # MovieLens-1M's age groups


@dataclass(frozen=True)
class SyntheticCatalog:
    """Lines in MovieLens ``::`` form, without newlines, and which item ids the tiny model is trained on."""

    items: list[str]
    users: list[str]
    interactions: list[str]
    trained_item_ids: frozenset[str]

    def item_id(self, line: str) -> str:
        return line.split("::", 1)[0]

    @property
    def trained_items(self) -> list[str]:
        return [line for line in self.items if self.item_id(line) in self.trained_item_ids]

    @property
    def held_out_items(self) -> list[str]:
        return [line for line in self.items if self.item_id(line) not in self.trained_item_ids]

    def write(self, directory: Path) -> dict[str, Path]:
        """Write movies.dat, users.dat and ratings.dat (MovieLens-1M names) and return their paths."""
        directory.mkdir(parents=True, exist_ok=True)
        paths = {
            "items": directory / "movies.dat",
            "users": directory / "users.dat",
            "interactions": directory / "ratings.dat",
        }
        contents = {"items": self.items, "users": self.users, "interactions": self.interactions}
        for target, lines in contents.items():
            paths[target].write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        return paths


def made_up_word(rng: random.Random) -> str:
    syllables = rng.choice((2, 2, 3))
    word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables)) + rng.choice(_CODAS)
    return word.capitalize()


def item_line(rng: random.Random, item_id: int) -> str:
    title = " ".join(made_up_word(rng) for _ in range(rng.choice((1, 2, 2, 3))))
    year = rng.randint(1921, 2000)
    genres = "|".join(sorted(rng.sample(GENRES, rng.choice((1, 1, 2, 3))), key=GENRES.index))
    return f"{item_id}::{title} ({year})::{genres}"


def user_line(rng: random.Random, user_id: int) -> str:
    zip_code = f"{rng.randint(0, 99999):05d}"
    return f"{user_id}::{rng.choice('MF')}::{rng.choice(AGES)}::{rng.randint(0, 20)}::{zip_code}"


def interaction_lines(
    rng: random.Random, n_users: int, n_items: int, per_user: tuple[int, int], zipf_s: float
) -> list[str]:
    """Each user rates a few distinct items drawn with P(item of rank r) ∝ r^-s, in time order."""
    ranks = list(range(1, n_items + 1))
    popularity_order = rng.sample(ranks, n_items)  # which item id has which popularity rank
    weights = [rank**-zipf_s for rank in ranks]
    lines: list[str] = []
    for user_id in range(1, n_users + 1):
        wanted = min(rng.randint(*per_user), n_items)
        chosen: dict[int, None] = {}
        while len(chosen) < wanted:
            chosen[popularity_order[rng.choices(ranks, weights)[0] - 1]] = None
        timestamp = rng.randint(956_703_932, 1_046_454_590)  # MovieLens-1M's time span
        for item_id in chosen:
            timestamp += rng.randint(1, 5_000)
            lines.append(f"{user_id}::{item_id}::{rng.randint(1, 5)}::{timestamp}")
    return lines


def make_catalog(
    n_items: int = 200,
    n_users: int = 60,
    per_user: tuple[int, int] = (5, 30),
    zipf_s: float = 1.1,
    trained_share: float = 0.5,
    seed: int = 0,
) -> SyntheticCatalog:
    """The synthetic catalog: deterministic for a seed; ``trained_share`` of the items are 'trained'."""
    rng = random.Random(seed)
    items = _unique_items(rng, n_items)
    users = [user_line(rng, user_id) for user_id in range(1, n_users + 1)]
    interactions = interaction_lines(rng, n_users, n_items, per_user, zipf_s)
    ids = [str(i) for i in range(1, n_items + 1)]
    trained = frozenset(rng.sample(ids, round(n_items * trained_share)))
    return SyntheticCatalog(items, users, interactions, trained)


def _unique_items(rng: random.Random, n_items: int) -> list[str]:
    """Titles are unique so that an exact match cannot come from another item's line."""
    seen: set[str] = set()
    lines: list[str] = []
    item_id = 1
    while len(lines) < n_items:
        line = item_line(rng, item_id)
        rest = line.split("::", 1)[1]
        if rest not in seen:
            seen.add(rest)
            lines.append(line)
            item_id += 1
    return lines


# The catalog the shipped items model (items_model/, trained by scripts/train_items_model.py) was trained on.
ITEMS_MODEL_DIR = Path(__file__).resolve().parent / "items_model"
SEED = 0
CATALOG_SETTINGS: dict = {"n_items": 200, "n_users": 60, "per_user": (5, 30), "zipf_s": 1.1, "seed": SEED}


def default_catalog() -> SyntheticCatalog:
    return make_catalog(**CATALOG_SETTINGS)
