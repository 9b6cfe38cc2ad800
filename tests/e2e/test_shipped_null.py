"""The shipped null cannot drift from the code: its key is the one the CLI's default configuration has today, and a
sample of its fictitious people, recomputed now on the default model through the service (a `null` audit of the
same properties, options and seed, on a fresh database: every sentence scored again), gives the stored statistics
of every column of every null fact (floats to TOLERANCE; docs/nulls.md, "Shipped nulls and null artifacts")."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.conftest import Api, make_key, wait_for

# fictitious people recomputed: the cohort's first (a null's people are a prefix of its cohort). One person holds null
# facts of every shape the file has (one, two and three values, in and out of the pool: 30-68 per property), so a
# code change that moves what a null computes moves them; a second person doubled smollm2-135m's recomputation.
SAMPLE = 1
# Float columns (statistic, z_star) agree to this absolute difference; every other column exactly. Not float
# equality: the engine scores sentences in float32 packs of whatever sentences a job holds, so a sentence's NLL moves
# in its last bits with its pack companions (measured: 3 people shipped vs 2 recomputed, same machine and threads,
# at most 2.4e-5 on z_star and 1.6e-5 on the statistic, z-scores of order 1; the hand-written null of 2026-11-27:
# 1.5e-4 on one z_star, 3.6e-5 on its statistic — z* divides NLL differences by the spread of the leads). A change
# of the code moves them by far more; a p-value moves only where a null fact's statistic lies within this of the
# audited fact's.
TOLERANCE = 1e-3


def shipped_file(model: str) -> Path:
    from app.nulls.artifact import SUFFIX
    from app.nulls.shipped import SHIPPED_DIR

    return SHIPPED_DIR / f"{model}{SUFFIX}"


def expected_keys(pids: list[str]) -> dict[str, str]:
    """The configuration key of each property under the CLI's default options today."""
    from app.cli.nulls import default_options
    from app.db.engine import session_scope
    from app.nulls.config import config_key, effective_pool, null_config, resolve_method

    options = default_options()
    with session_scope() as s:
        keys = {}
        for pid in pids:
            pool = effective_pool(s, pid, options)
            config = null_config(pid, options, options["lookalikes"], pool, resolve_method("auto", pid, options))
            keys[pid] = config_key(config)
    return keys


def recompute(api: Api, document: dict, people: int) -> tuple[str, dict[str, list[list]]]:
    """A null audit of the file's properties (in its order: the cohort depends on it), options and seed, for its
    first ``people`` people; returns its fingerprint and its stored rows per property in the file's columns."""
    from app.db.engine import session_scope
    from app.db.models import NullDistribution, NullFact

    body = {
        "kind": "null",
        "model": document["model"]["name"],
        "properties": [d["property"] for d in document["distributions"]],
        "options": document["options"],
        "facts_per_property": people,
        "min_people": people,
    }
    r = api.post("/audits", json=body)
    assert r.status_code == 202, r.text
    assert wait_for(api, r.json()["id"], timeout=1800)["status"] == "succeeded"
    columns = document["distributions"][0]["columns"]
    rows: dict[str, list[list]] = {}
    with session_scope() as s:
        dists = s.scalars(select(NullDistribution).where(NullDistribution.audit_id == r.json()["id"]))
        fingerprints = set()
        for d in dists:
            fingerprints.add(d.fingerprint)
            stmt = select(*(getattr(NullFact, c) for c in columns)).where(NullFact.distribution_id == d.id)
            rows[d.property_id] = [list(x) for x in s.execute(stmt.order_by(NullFact.id))]
    assert len(fingerprints) == 1
    return fingerprints.pop(), rows


def same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=0.0, abs_tol=TOLERANCE)
    return a == b


def check_sample(path: Path, api: Api, people: int = SAMPLE) -> int:
    """Recompute ``people`` people of the artifact at ``path`` and compare; returns the null facts compared."""
    from app.nulls.artifact import parse, validate

    artifact = validate(parse(path.read_bytes()))
    document = artifact.document
    fingerprint, rows = recompute(api, document, people)
    assert fingerprint == artifact.fingerprint, (
        "the default model's weights or loading changed: run memaudit nulls ship"
    )
    compared = 0
    for d in document["distributions"]:
        at = d["columns"].index("person")
        stored = [r for r in d["rows"] if r[at] < people]
        now = rows[d["property"]]
        assert len(now) == len(stored), f"{d['property']}: null facts per person changed: run memaudit nulls ship"
        for i, (x, y) in enumerate(zip(stored, now, strict=True)):
            diff = [c for c, a, b in zip(d["columns"], x, y, strict=True) if not same(a, b)]
            assert not diff, (
                f"{d['property']} null fact {i}: {diff} differ from the code's (stored {x}, now {y}):"
                " run memaudit nulls ship"
            )
        compared += len(stored)
    return compared


@pytest.mark.parametrize("model", ["smollm2-135m", "groundtruth-tiny"])
def test_shipped_null_is_what_the_code_computes(sqlite_env, model):
    """The default model's null and groundtruth-tiny's: the demo's properties and the five measured ones."""
    from app.cli.nulls import demo_properties, shipped_properties
    from app.nulls.artifact import parse, validate

    path = shipped_file(model)
    assert path.is_file(), f"no shipped null for {model}: memaudit nulls ship writes it"
    artifact = validate(parse(path.read_bytes()))
    assert set(demo_properties()) <= set(artifact.keys()), "the demo's properties are not all shipped"
    assert sorted(artifact.keys()) == sorted(shipped_properties()), "run memaudit nulls ship"
    assert artifact.keys() == expected_keys(list(artifact.keys())), (
        "the null's key changed (configuration, statistic, generator or out-of-pool reservoir): the shipped null no"
        " longer matches the CLI's default configuration; run memaudit nulls ship"
    )
    assert check_sample(path, Api(make_key("admin"))) > 0


def test_a_one_shot_audit_prints_p_values_from_the_shipped_null(cli_env, tmp_path):
    """`memaudit audit` on groundtruth-tiny, no `serve` running, a fresh database: p-values at once from the shipped
    null, an export after it that says what it wrote (never a silent 0), no audit left running."""
    import sqlite3

    from tests.support.cli import memaudit

    facts = ["--fact", "P106=statistician", "--fact", "P27=Ghana", "--fact", "P19=Naples"]
    run = memaudit(cli_env, "audit", "--model", "groundtruth-tiny", "--name", "Yselda Calderwick", *facts)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "p-values against the null shipped with memaudit" in run.stdout, run.stdout
    rows = [line for line in run.stdout.splitlines() if "Ghana" in line or "Naples" in line or "statistician" in line]
    assert len(rows) == 3 and not any("pending" in r for r in rows), run.stdout
    assert all(" yes " in r or " no " in r for r in rows), run.stdout  # a verdict in every row
    # citizenship and birthplace are shown: the caveat measured for ordinary names is said under the table
    caveat = next(line for line in run.stdout.splitlines() if "ordinary names of their country" in line)
    assert caveat.startswith(("place of birth, country of citizenship: ", "country of citizenship, place of birth: "))
    again = memaudit(cli_env, "audit", "--json", "--model", "groundtruth-tiny", "--name", "Yselda Calderwick", *facts)
    assert again.returncode == 0, again.stderr[-3000:]
    for fact in json.loads(again.stdout)["facts"]:  # every calibrated fact carries its misattribution verdict
        block = fact["misattribution"]
        assert block["p_value"] is not None and isinstance(block["misattributed"], bool), block
        assert block["value"] not in fact["values"], block  # a false value, never a true one
    rectification = memaudit(cli_env, "export", "--rectification", "--format", "csv")  # GET /rectification-set
    assert rectification.returncode == 0 and rectification.stdout.startswith("subject_id,"), rectification.stderr
    assert rectification.stderr.startswith("wrote "), rectification.stderr
    refused = memaudit(cli_env, "export", "--rectification", "--policy", "lenient")
    assert refused.returncode != 0 and "--policy" in refused.stderr, refused.stderr
    exported = memaudit(cli_env, "export", "--model", "groundtruth-tiny", "-o", str(tmp_path / "forget.jsonl"))
    assert exported.returncode == 0, exported.stderr
    n = len((tmp_path / "forget.jsonl").read_text().splitlines()) - 1  # the end marker
    said = exported.stderr.strip().splitlines()
    assert said[0] == f"wrote {n} record{'' if n == 1 else 's'} to {tmp_path / 'forget.jsonl'}", said
    assert n > 0 or "no fact passed --policy pvalue" in said[1], said  # Yselda is a trained person: n > 0 expected
    with sqlite3.connect(tmp_path / "cli.sqlite3") as db:
        statuses = dict(db.execute("SELECT kind || ':' || status, count(*) FROM audits GROUP BY 1").fetchall())
        sources = {r[0] for r in db.execute("SELECT source FROM null_distributions")}
    assert statuses == {"subject:succeeded": 2, "null:succeeded": 1}, statuses  # both done, none left
    assert sources == {"shipped"}


@pytest.mark.slow
def test_nulls_ship_rebuilds_the_shipped_null_byte_for_byte(tmp_path):
    """`memaudit nulls ship` for groundtruth-tiny (151,380 sentences; 82 s alone on 2 cores, 100-130 s in the suite),
    on its own fresh database, writes exactly the package's file: the same code on the same machine writes the same
    bytes. Its environment is the shell's without any MEMAUDIT_ setting, as a maintainer runs it (the command pins
    the rest); forked from the suite's zygote like the other commands (tests/support/cli.py: the imports shared, ~9
    of its CPU-s; from ``app.cli.main`` on it is the command's own process)."""
    import os

    from tests.support.cli import memaudit

    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMAUDIT_")}
    run = memaudit(env, "nulls", "ship", "--model", "groundtruth-tiny", "--out", str(tmp_path), timeout=1800)
    assert run.returncode == 0, run.stderr[-3000:]
    built = (tmp_path / "groundtruth-tiny.null.json.gz").read_bytes()
    assert built == shipped_file("groundtruth-tiny").read_bytes(), (
        "memaudit nulls ship no longer rebuilds the shipped file: the code changed what a null computes (run it and"
        " commit the file) or the command no longer reproduces its own output"
    )
    assert not (tmp_path / "groundtruth-tiny.measured.json").exists(), "no measurements of groundtruth-tiny ship"
