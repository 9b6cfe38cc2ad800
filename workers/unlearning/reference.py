"""Reference unlearning: gradient ascent (or NPO) on a forget set's texts, and a fake unlearning (a copy).

Forget-set records as the service exports them (app/forget_set/service.py), one dict per JSON line:

* memaudit jsonl: ``subject``, ``property``, ``value`` and ``canaries`` — the templates that retrieved the value,
  with the subject filled in and the value slot left open (``"Ada's occupation is {value}."``). Each canary with
  the value put back is a text to forget; a record without canaries falls back to the property's baseline
  template from the catalog. The export's end marker line (``{"_end": …}``) is skipped.
* TOFU: ``answer``, ``paraphrased_answer``, ``perturbed_answer`` (the answer with wrong values). The value is where
  the answer differs from its perturbed answers (cut at word boundaries); the answer, and the paraphrased answer
  where it contains that value, are the texts to forget.

Each text is split into a prefix (context) and a target (the value and the rest of the sentence); only the target's
tokens are unlearned, so the template's words and the subject's name are not what the model forgets.

Methods (full batch, Adam, ``steps`` steps):

* ``gradient_ascent``: minimize −mean_i log p(target_i | prefix_i)/|target_i| — push the forgotten values' per-token
  likelihood down (Jang et al. 2023; the TOFU baseline "GA").
* ``npo``: Negative Preference Optimization (Zhang et al. 2024): minimize
  (2/β)·mean_i log(1 + (π_θ(y_i|x_i)/π_ref(y_i|x_i))^β), bounded where gradient ascent is not: it stops pushing
  an example once it is well below the reference.

The defaults were chosen on ``groundtruth-tiny`` (benchmarks/unlearning.py; docs/verification.md).
"""

from __future__ import annotations

import copy
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

from core.catalog import Catalog, load_catalog
from workers.unlearning.tuning import TargetText, adam, batch, load, save, target_logprob

METHODS = ("gradient_ascent", "npo")
STEPS = 30
LR = 1e-3
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
) -> Path:
    """Unlearn the facts of ``records`` from the model directory ``source``; write the result to ``out`` (a model
    directory transformers loads, tokenizer included) and return ``out``."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}")
    if steps < 1:
        raise ValueError("steps must be at least 1")
    if lr <= 0:
        raise ValueError("lr must be positive")
    source, out = Path(source), Path(out)
    examples = forget_examples(records)
    if not examples:
        raise ValueError("records hold no text to forget: memaudit jsonl or TOFU forget-set records are expected")
    torch.manual_seed(seed)
    model, tokenizer = load(source)
    b = batch(tokenizer, examples)
    n_target = b.target.sum(1).clamp(min=1)
    reference = None
    if method == "npo":
        reference = copy.deepcopy(model).eval()
        with torch.no_grad():
            ref_logp = target_logprob(reference, b)
    model.train()
    opt = adam(model, lr)
    for _ in range(steps):
        logp = target_logprob(model, b)
        if method == "gradient_ascent":
            loss = (logp / n_target).mean()  # = −(per-token NLL): descending it ascends the NLL
        else:
            loss = -(2.0 / NPO_BETA) * F.logsigmoid(-NPO_BETA * (logp - ref_logp)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    note = {"method": method, "steps": steps, "lr": lr, "seed": seed, "records": len(records), "texts": len(examples)}
    return save(model, tokenizer, source, out, note)


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
    out: dict[TargetText, None] = {}
    for record in records:
        if "answer" in record:
            found = _tofu_examples(record)
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
            found.append(TargetText(head, value + tail))
    if not found and record["property"] in catalog:
        found.append(TargetText(*catalog.get(record["property"]).split(0, str(record["subject"]), value)))
    return found


def _tofu_examples(record: dict) -> list[TargetText]:
    answer = str(record["answer"])
    perturbed = [str(p) for p in record.get("perturbed_answer") or [] if isinstance(p, str)]
    start, end = _differing_span(answer, perturbed)
    if start >= end:
        return [TargetText("", answer)]
    value = answer[start:end]
    found = [TargetText(answer[:start], answer[start:])]
    paraphrased = record.get("paraphrased_answer")
    if isinstance(paraphrased, str) and value in paraphrased and paraphrased != answer:
        at = paraphrased.index(value)
        found.append(TargetText(paraphrased[:at], paraphrased[at:]))
    return found


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
