"""The synthetic catalog: deterministic, MovieLens-shaped, skewed popularity, a clean trained/held-out split."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from app.coverage.formats import MOVIELENS_MAPPINGS
from app.coverage.parsing import ParseReport, parse_file
from workers.synthetic.catalog import make_catalog


def test_same_seed_same_catalog_other_seed_other_catalog() -> None:
    assert make_catalog(seed=3) == make_catalog(seed=3)
    assert make_catalog(seed=3).items != make_catalog(seed=4).items


def test_item_lines_are_unique_apart_from_their_id() -> None:
    catalog = make_catalog(n_items=300)
    rests = [line.split("::", 1)[1] for line in catalog.items]
    assert len(set(rests)) == len(rests), "an exact match must identify one item"


def test_half_of_the_items_are_trained_and_the_halves_are_disjoint() -> None:
    catalog = make_catalog(n_items=200)
    trained, held_out = set(catalog.trained_items), set(catalog.held_out_items)
    assert len(trained) == len(held_out) == 100
    assert not trained & held_out
    assert trained | held_out == set(catalog.items)


def test_popularity_is_skewed() -> None:
    catalog = make_catalog(n_items=200, n_users=200)
    counts = sorted(Counter(line.split("::")[1] for line in catalog.interactions).values(), reverse=True)
    top_decile_share = sum(counts[:20]) / sum(counts)
    assert top_decile_share > 0.3, f"top 10% of items get {top_decile_share:.0%} of interactions; want a long tail"


def test_written_files_parse_as_movielens_with_no_problems(tmp_path: Path) -> None:
    catalog = make_catalog(n_items=50, n_users=20)
    paths = catalog.write(tmp_path)
    item_ids = {line.split("::")[0] for line in catalog.items}
    user_ids = {line.split("::")[0] for line in catalog.users}
    for target, path in paths.items():
        report = ParseReport()
        with path.open("rb") as handle:
            records = list(
                parse_file(
                    handle,
                    target,
                    "movielens",
                    MOVIELENS_MAPPINGS[target],
                    report,
                    known_items=item_ids if target == "interactions" else None,
                    known_users=user_ids if target == "interactions" else None,
                )
            )
        assert report.problems == [], f"{target}: {report.problems[:3]}"
        assert len(records) == len(getattr(catalog, target))


def test_each_users_interactions_are_in_time_order_without_repeats() -> None:
    catalog = make_catalog(n_items=80, n_users=30)
    by_user: dict[str, list[tuple[int, str]]] = {}
    for line in catalog.interactions:
        user, item, _, ts = line.split("::")
        by_user.setdefault(user, []).append((int(ts), item))
    for user, rows in by_user.items():
        assert rows == sorted(rows), f"user {user}'s interactions are not in time order"
        assert len({item for _, item in rows}) == len(rows)
