"""`memaudit datasets …` on the embedded default: add, list, probe (a coverage audit on the in-process
worker), compare, delete; bad input exits with a message naming the field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.cli import main
from scripts.train_items_model import MODEL_DIR, default_catalog
from workers.synthetic.catalog import make_catalog


@pytest.fixture
def catalog_paths(sqlite_env, tmp_path: Path) -> dict[str, Path]:
    return default_catalog().write(tmp_path / "catalog")


def add(paths: dict[str, Path], capsys, *extra: str) -> str:
    code = main(
        [
            "datasets",
            "add",
            "synthetic",
            "--items",
            str(paths["items"]),
            "--users",
            str(paths["users"]),
            "--interactions",
            str(paths["interactions"]),
            *extra,
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    return re.search(r"dataset ([0-9a-f]{32})", out).group(1)


def test_add_probe_compare_delete(catalog_paths, capsys):
    dataset_id = add(catalog_paths, capsys)
    assert main(["datasets", "list"]) == 0
    listed = capsys.readouterr().out
    assert dataset_id in listed and re.search(r"interactions\s+ratings\.dat\s+movielens rows\s+\d+", listed)

    assert main(["datasets", "probe", dataset_id, "--model", f"hf:{MODEL_DIR}", "--sample", "12"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"coverage \d\.\d{4} +\(\d+/12 records reproduced exactly", out), out
    assert "bucket" in out and "records?matched=true" in out

    assert main(["datasets", "compare", dataset_id]) == 0
    table = capsys.readouterr().out
    assert "items_model" in table and "items" in table

    assert main(["datasets", "delete", dataset_id]) == 0
    assert "deleted dataset" in capsys.readouterr().out


def test_malformed_lines_are_listed_and_bad_mappings_exit_2(sqlite_env, tmp_path: Path, capsys):
    paths = make_catalog(n_items=10, n_users=5).write(tmp_path)
    paths["items"].write_text(paths["items"].read_text() + "11::Only a title\n")
    dataset_id = add(paths, capsys)
    assert dataset_id

    bad = tmp_path / "items.csv"
    bad.write_text("id,title\n1,Heat\n")
    code = main(
        [
            "datasets",
            "add",
            "x",
            "--items",
            str(bad),
            "--mapping",
            '{"items": {"columns": ["title", "id"], "roles": {"item_id": "id"}}}',
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "mapping.columns" in err and "must come first" in err, err


def test_probe_of_a_missing_target_file_exits_2(sqlite_env, tmp_path: Path, capsys):
    paths = make_catalog(n_items=10, n_users=5).write(tmp_path)
    assert main(["datasets", "add", "only-items", "--items", str(paths["items"])]) == 0
    dataset_id = re.search(r"dataset ([0-9a-f]{32})", capsys.readouterr().out).group(1)
    code = main(["datasets", "probe", dataset_id, "--model", f"hf:{MODEL_DIR}", "--target", "users"])
    err = capsys.readouterr().err
    assert code == 2 and "target" in err and "no users file" in err, err
