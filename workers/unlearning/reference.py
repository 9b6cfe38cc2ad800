"""Reference unlearning: gradient ascent (or NPO) on a forget set's texts, and a fake unlearning (a copy).

Forget-set records as the service exports them (app/forget_set/service.py), one dict per JSON line:

* memaudit jsonl: ``subject``, ``property``, ``value`` and ``canaries`` — the templates that retrieved the value,
  with the subject filled in and the value slot left open (``"Ada's occupation is {value}."``). Each canary with
  the value put back is a text to forget; a record without canaries falls back to the property's baseline
  template from the catalog. The export's end marker line (``{"_end": …}``) is skipped.
* TOFU: ``answer``, ``paraphrased_answer``, ``perturbed_answer`` (the answer with wrong values). The value is where
  the answer differs from its perturbed answers (cut at word boundaries); the answer, and the paraphrased answer
  where it contains that value, are the texts to forget; the subject is read from ``question`` (a catalog question).

Each text is split into a prefix, the value, and a suffix; only the value's tokens are unlearned, so the template's
words, the subject's name and the sentence's end are not what the model forgets.

Methods (full batch, Adam, ``steps`` steps):

* ``gradient_ascent``: minimize mean_i log p(target_i | prefix_i)/|target_i| — ascend the forgotten values'
  per-token NLL (Jang et al. 2023; the TOFU baseline "GA").
* ``npo``: Negative Preference Optimization (Zhang et al. 2024): minimize
  (2/β)·mean_i log(1 + (π_θ(y_i|x_i)/π_ref(y_i|x_i))^β), bounded where gradient ascent is not: it stops pushing
  an example once it is well below the reference.

Scope: ``subject`` (default) moves only the input-embedding rows of the forgotten subjects' name tokens; ``all``
every weight. On ``groundtruth-tiny`` every-weight unlearning forgets every trained person with the forgotten ones
(GA, NPO, with a retain term, SGD, a saliency mask: measured in docs/verification.md), the subject scope keeps
people whose names share no token with a forgotten name exactly as they were, and over-forgets those who share one.
The defaults were chosen there (benchmarks/unlearning.py; docs/verification.md, "Reference unlearning and the paired
test").
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from core.catalog import SUBJECT_SLOT, Catalog, load_catalog
from workers.unlearning.tuning import (
    TargetText,
    adam,
    batch,
    load,
    save,
    subject_token_ids,
    target_logprob,
    train_embeddings_only,
)

METHODS = ("gradient_ascent", "npo")
SCOPES = ("subject", "all")
STEPS = 30
LR = 1e-2
NPO_BETA = 0.1
VALUE_SLOT = "{value}"


def unlearn(
    source: Path,
    records: list[dict],
    out: Path,
    *,
    method: str = "gradient_ascent",
    steps: int = STEPS,
    lr: float = LR,
    seed: int = 0,
    scope: str = "subject",
) -> Path:
    """Unlearn the facts of ``records`` from the model directory ``source``; write the result to ``out`` (a model
    directory transformers loads, tokenizer included) and return ``out``. ``scope``: which weights move —
    ``subject`` (default) the input-embedding rows of the forgotten subjects' name tokens, ``all`` every weight
    (use a far smaller ``lr``: on groundtruth-tiny it forgets every trained person, see the module docstring)."""
    _check_settings(method, scope, steps, lr)
    source, out = Path(source), Path(out)
    examples = forget_examples(records)
    if not examples:
        raise ValueError("records hold no text to forget: memaudit jsonl or TOFU forget-set records are expected")
    torch.manual_seed(seed)
    model, tokenizer = load(source)
    b = batch(tokenizer, examples)
    n_target = b.target.sum(1).clamp(min=1)
    if scope == "subject":
        rows = subject_token_ids(tokenizer, {ex.subject for ex in examples if ex.subject})
        if not rows:
            raise ValueError("scope 'subject' needs the records' subjects: none was found (use scope 'all')")
        train_embeddings_only(model, rows)
    ref_logp = None
    if method == "npo":
        with torch.no_grad():
            ref_logp = target_logprob(model.eval(), b)
    _descend(model, b, n_target, ref_logp, steps, lr)
    note = {"method": method, "scope": scope, "steps": steps, "lr": lr, "seed": seed}
    return save(model, tokenizer, source, out, note | {"records": len(records), "texts": len(examples)})


def _check_settings(method: str, scope: str, steps: int, lr: float) -> None:
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}")
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}")
    if steps < 1:
        raise ValueError("steps must be at least 1")
    if lr <= 0:
        raise ValueError("lr must be positive")


def _descend(model: Any, b: Any, n_target: Any, ref_logp: Any, steps: int, lr: float) -> None:
    """``steps`` Adam steps: gradient ascent on the values' NLL, or NPO against the reference log-probs
    ``ref_logp``; the model is left in eval mode."""
    model.train()
    opt = adam(model, lr)
    for _ in range(steps):
        logp = target_logprob(model, b)
        if ref_logp is None:
            loss = (logp / n_target).mean()  # −(per-token NLL of the values): descending it ascends their NLL
        else:
            loss = -(2.0 / NPO_BETA) * F.logsigmoid(-NPO_BETA * (logp - ref_logp)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()


def fake_unlearn(source: Path, out: Path) -> Path:
    """A fake unlearning: the same weights (and tokenizer) in a new directory, as a provider that changed nothing
    but the name would deliver. Verification must report its facts ``still retrievable``."""
    source, out = Path(source), Path(out)
    shutil.copytree(source, out, dirs_exist_ok=True)
    return out


def forget_examples(records: Iterable[dict], catalog: Catalog | None = None) -> list[TargetText]:
    """The (prefix, target) texts to forget for forget-set records (memaudit jsonl or TOFU; see the module
    docstring). Records of neither format (the jsonl end marker) give none; duplicates are dropped."""
    catalog = catalog if catalog is not None else load_catalog()
    questions = _question_patterns(catalog)
    out: dict[TargetText, None] = {}
    for record in records:
        if "answer" in record:
            found = _tofu_examples(record, questions)
        elif {"subject", "property", "value"} <= record.keys():
            found = _jsonl_examples(record, catalog)
        else:
            found = []
        out.update(dict.fromkeys(found))
    return list(out)


def _jsonl_examples(record: dict, catalog: Catalog) -> list[TargetText]:
    value = str(record["value"])
    found = []
    for canary in record.get("canaries") or []:
        if isinstance(canary, str) and canary.count(VALUE_SLOT) == 1:
            head, tail = canary.split(VALUE_SLOT)
            found.append(TargetText(head, value, tail, str(record["subject"])))
    if not found and record["property"] in catalog:
        head, rest = catalog.get(record["property"]).split(0, str(record["subject"]), value)
        found.append(TargetText(head, value, rest[len(value) :], str(record["subject"])))
    return found


def _tofu_examples(record: dict, questions: Sequence[re.Pattern[str]]) -> list[TargetText]:
    answer = str(record["answer"])
    perturbed = [str(p) for p in record.get("perturbed_answer") or [] if isinstance(p, str)]
    subject = _subject_of(str(record.get("question") or ""), questions)
    start, end = _differing_span(answer, perturbed)
    if start >= end:
        return [TargetText("", answer, "", subject)]
    value = answer[start:end]
    found = [TargetText(answer[:start], value, answer[end:], subject)]
    paraphrased = record.get("paraphrased_answer")
    if isinstance(paraphrased, str) and value in paraphrased and paraphrased != answer:
        at = paraphrased.index(value)
        found.append(TargetText(paraphrased[:at], value, paraphrased[at + len(value) :], subject))
    return found


def _question_patterns(catalog: Catalog) -> list[re.Pattern[str]]:
    """One pattern per catalog question ("What is {subject}'s occupation?"), the subject captured."""
    return [
        re.compile(
            "".join("(.+)" if part == SUBJECT_SLOT else re.escape(part) for part in re.split(r"(\{subject\})", q))
        )
        for q in dict.fromkeys(prop.question for prop in catalog)
    ]


def _subject_of(question: str, patterns: Sequence[re.Pattern[str]]) -> str:
    """The subject a TOFU question asks about (the export fills a catalog question), or "" if none matches."""
    for pattern in patterns:
        match = pattern.fullmatch(question)
        if match:
            return match.group(1)
    return ""


def _differing_span(answer: str, others: Sequence[str]) -> tuple[int, int]:
    """[start, end) of ``answer`` outside the prefix and suffix it shares with every one of ``others``, widened to
    whole words; the whole answer when there are no others."""
    if not others:
        return 0, len(answer)
    prefix = min(_common_prefix(answer, o) for o in others)
    suffix = min(_common_prefix(answer[::-1], o[::-1]) for o in others)
    start = answer.rfind(" ", 0, prefix) + 1
    end = len(answer) - suffix
    while end < len(answer) and answer[end].isalnum():
        end += 1
    return start, max(start, end)


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
