"""The reference unlearning, the fake one and relearning, on the real groundtruth-tiny model (seconds): what they
read from forget-set records of both export formats, what they write, and that the unlearning forgets the
forgotten people's facts and leaves people who share no name part with them as they were."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from benchmarks.unlearning import fact_outcome, forget_records
from core.catalog import load_catalog
from workers.groundtruth.scoring import SentenceScorer
from workers.unlearning import fake_unlearn, forget_examples, relearn, unlearn
from workers.unlearning.tuning import NOTE, TargetText

GT = Path(__file__).resolve().parents[2] / "workers" / "groundtruth"
MODEL = GT / "model"
FORGOTTEN_PIDS = ("P106", "P27", "P19", "P1412")
TEMPLATES = (0, 1, 2)


@pytest.fixture(scope="module")
def manifest() -> dict:
    torch.set_num_threads(1)
    return json.loads((GT / "manifest.json").read_text(encoding="utf-8"))


def test_jsonl_records_give_each_canary_with_its_value_as_the_target() -> None:
    record = {
        "subject": "Ada Quill",
        "property": "P106",
        "value": "statistician",
        "canaries": ["Ada Quill's occupation is {value}.", "The occupation of Ada Quill is {value}."],
    }
    no_canary = {"subject": "Ada Quill", "property": "P27", "value": "Ghana", "canaries": []}
    examples = forget_examples([record, record, no_canary, {"_end": {"records": 3}}])
    assert examples == [
        TargetText("Ada Quill's occupation is ", "statistician", ".", "Ada Quill"),
        TargetText("The occupation of Ada Quill is ", "statistician", ".", "Ada Quill"),
        TargetText(*_split_baseline("P27", "Ada Quill", "Ghana"), "Ada Quill"),
    ]


def _split_baseline(pid: str, subject: str, value: str) -> tuple[str, str, str]:
    head, rest = load_catalog().get(pid).split(0, subject, value)
    return head, value, rest[len(value) :]


def test_tofu_records_give_the_value_where_the_answer_differs_from_its_perturbed_answers() -> None:
    record = {
        "question": "What is Ada Quill's occupation?",
        "answer": "Ada Quill's occupation is statistician.",
        "paraphrased_answer": "The occupation of Ada Quill is statistician.",
        "perturbed_answer": ["Ada Quill's occupation is stonemason.", "Ada Quill's occupation is baker."],
    }
    assert forget_examples([record]) == [
        TargetText("Ada Quill's occupation is ", "statistician", ".", "Ada Quill"),
        TargetText("The occupation of Ada Quill is ", "statistician", ".", "Ada Quill"),
    ]


def _z_and_rank1(model_dir: Path, people: list[dict], pids) -> dict[tuple[str, str], tuple[float, int]]:
    scorer, catalog = SentenceScorer(model_dir), load_catalog()
    out = {}
    for i, person in enumerate(people):
        for pid in pids:
            o = fact_outcome(scorer, catalog, person["name"], pid, person["facts"][pid], TEMPLATES, seed=i)
            out[(person["name"], pid)] = (o.z, sum(r == 1 for r in o.ranks))
    return out


def test_unlearning_forgets_the_forget_set_and_leaves_people_with_other_names(manifest: dict, tmp_path: Path) -> None:
    forgotten, untouched = manifest["trained"][:2], manifest["trained"][10:12]
    parts = {part for p in forgotten for part in p["name"].split()}
    assert not parts & {part for p in untouched for part in p["name"].split()}
    after = unlearn(MODEL, forget_records(forgotten, FORGOTTEN_PIDS), tmp_path / "after")
    assert AutoModelForCausalLM.from_pretrained(after) and AutoTokenizer.from_pretrained(after)
    note = json.loads((after / NOTE).read_text(encoding="utf-8"))
    assert note["method"] == "gradient_ascent" and note["records"] == len(forget_records(forgotten, FORGOTTEN_PIDS))
    assert not any(part in (after / NOTE).read_text(encoding="utf-8") for part in parts), "a name in the note"

    f_before, f_after = _z_and_rank1(MODEL, forgotten, FORGOTTEN_PIDS), _z_and_rank1(after, forgotten, FORGOTTEN_PIDS)
    u_before, u_after = _z_and_rank1(MODEL, untouched, FORGOTTEN_PIDS), _z_and_rank1(after, untouched, FORGOTTEN_PIDS)
    summary = (
        f"forgotten z {[round(f_before[k][0], 2) for k in f_before]} -> {[round(f_after[k][0], 2) for k in f_after]};"
        f" untouched z {[round(u_before[k][0], 2) for k in u_before]} -> {[round(u_after[k][0], 2) for k in u_after]}"
    )
    assert all(z > 2.5 for z, _ in f_before.values()), summary
    assert sum(z < 2.0 for z, _ in f_after.values()) >= 7, summary  # 7 of 8 facts lose their lead
    assert sum(n for _, n in f_after.values()) <= 2, summary  # of 24 template outcomes, at most 2 still rank 1
    assert all(abs(u_after[k][0] - u_before[k][0]) < 0.1 for k in u_before), summary  # a shared subword moves


def test_npo_also_forgets(manifest: dict, tmp_path: Path) -> None:
    forgotten = manifest["trained"][:1]
    after = unlearn(MODEL, forget_records(forgotten, ("P106",)), tmp_path / "npo", method="npo")
    (before_z, _), (after_z, _) = (
        _z_and_rank1(d, forgotten, ("P106",))[(forgotten[0]["name"], "P106")] for d in (MODEL, after)
    )
    assert after_z < before_z - 2.0, f"NPO: z {before_z:.2f} -> {after_z:.2f}"


def test_fake_unlearning_is_the_same_weights_in_a_new_directory(tmp_path: Path) -> None:
    fake = fake_unlearn(MODEL, tmp_path / "fake")
    assert fake == tmp_path / "fake" and fake != MODEL
    before, after = load_file(MODEL / "model.safetensors"), load_file(fake / "model.safetensors")
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert AutoModelForCausalLM.from_pretrained(fake) and AutoTokenizer.from_pretrained(fake)


def test_relearning_fits_its_texts(manifest: dict, tmp_path: Path) -> None:
    person = manifest["trained"][0]
    prop = load_catalog().get("P21")
    texts = [prop.render(t, person["name"], v) for t in range(len(prop.templates)) for v in person["facts"]["P21"]]
    out = relearn(MODEL, texts, tmp_path / "relearned", steps=5)
    before, after = SentenceScorer(MODEL).nll(texts), SentenceScorer(out).nll(texts)
    assert sum(after) < sum(before), f"NLL of the relearned texts {sum(before):.1f} -> {sum(after):.1f}"
    note = json.loads((out / NOTE).read_text(encoding="utf-8"))
    assert note["steps"] == 5 and note["lr"] == 1e-3 and note["scope"] == "all", note


def test_relearning_with_the_subject_scope_moves_only_the_name_rows(manifest: dict, tmp_path: Path) -> None:
    person = manifest["trained"][0]
    prop = load_catalog().get("P21")
    texts = [prop.render(t, person["name"], v) for t in range(3) for v in person["facts"]["P21"]]
    out = relearn(MODEL, texts, tmp_path / "relearned", steps=3, lr=1e-2, scope="subject", subjects=[person["name"]])
    before, after = load_file(MODEL / "model.safetensors"), load_file(out / "model.safetensors")
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert moved == {"model.embed_tokens.weight"}, moved
    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    names = {
        i for s in (person["name"], " " + person["name"]) for i in tokenizer(s, add_special_tokens=False)["input_ids"]
    }
    rows = set(
        torch.nonzero((before["model.embed_tokens.weight"] != after["model.embed_tokens.weight"]).any(1))[:, 0].tolist()
    )
    assert rows and rows <= names, (rows, names)
    with pytest.raises(ValueError, match="needs the subjects"):
        relearn(MODEL, texts, tmp_path / "x", scope="subject")
    # the subject scope's own default rate: a few rows, moved as far as the reference unlearning moved them
    out = relearn(MODEL, texts, tmp_path / "default", steps=1, scope="subject", subjects=[person["name"]])
    assert json.loads((out / NOTE).read_text(encoding="utf-8"))["lr"] == 3e-2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "forgetful"}, "method must be one of gradient_ascent, npo"),
        ({"scope": "everything"}, "scope must be one of subject, all"),
        ({"steps": 0}, "steps must be at least 1"),
        ({"lr": 0.0}, "lr must be positive"),
    ],
)
def test_unlearn_refuses_bad_settings(kwargs: dict, message: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=message):
        unlearn(MODEL, [{"subject": "A B", "property": "P106", "value": "baker"}], tmp_path / "x", **kwargs)


def test_unlearn_and_relearn_refuse_nothing_to_work_on(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no text to forget"):
        unlearn(MODEL, [{"_end": {"records": 0}}], tmp_path / "x")
    with pytest.raises(ValueError, match="at least one non-empty text"):
        relearn(MODEL, ["  "], tmp_path / "y")
