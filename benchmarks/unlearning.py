"""Reference unlearning on groundtruth-tiny: removed / kept / fake / relearned rates, the paired test's false-positive
rate on the null, and seconds — measured with the project's own WikiMem scoring directly on the model directories.

    python -m benchmarks.unlearning [--forget 10] [--keep 10] [--null 40] [--steps N] [--lr X] [--method M]
    python -m benchmarks.unlearning --variant '{"kind": "rmu", "steps": 60}'   # one row of the variants table

Cohorts (from workers/groundtruth/manifest.json): the first ``--forget`` trained people are unlearned, the next
``--keep`` trained people are untouched (none of them shares a first or last name with a forgotten person), up to
``--keep`` later trained people who do share one are the *name neighbours*, the first ``--null`` held-out people
are people the model never saw, and ``--null`` fictitious people of real origins (core.names.fictitious, as the
service's nulls) are the null.
The forget set holds every fact of the forgotten people but sex or gender (``KEPT_PROPERTY``), as memaudit jsonl
records whose canaries are the audit's default templates (baseline + 2 paraphrases); the kept property is the
forgotten people's non-forgotten fact (locality inside a person) and the relearning text.

Each fact is scored like a subject audit: templates ``AUDIT_TEMPLATES``, the true values and 20 counterfactuals
(seeded), two look-alike names (α = 1); the statistic is truth z (mean over templates), its p-value empirical
against the *same model's* null facts, so the after model is judged by its own null, as a verification does. A
fact is **retrievable** at p <= 0.01. Rates:

* removed: forgotten facts retrievable before and not after the unlearning;
* kept: the untouched people's facts retrievable after (of those retrievable before); the same for the name
  neighbours (over-forgetting: the reference unlearning moves the forgotten names' token embeddings, which the
  neighbours' names share) and for the forgotten people's kept property;
* fake: forgotten facts still retrievable on the fake unlearning (a copy of the weights);
* relearned: forgotten facts of 2 of the unlearned people retrievable again after 20 steps of fine-tuning
  (workers.unlearning.relearn defaults) on ``other_facts`` (their kept property in every template) or on
  ``reworded_facts`` (their forgotten facts in the 8 templates the audit and the forget set did not use) or on
  ``forget_set_facts`` (their forgotten facts in the audited templates: an adversary holding part of the forget set);
* held out: people the model never saw, retrievable before and after (the method's chance rate);
* paired test (core.measures.paired, exact McNemar at p <= 0.05 on every catalog template's rank-1 outcome):
  its false-positive rate on the held-out people (never in the model: any "removal" is chance) and on the
  untouched people, and its power on the forgotten facts.

Results: benchmarks/results/results_unlearning.json. Prints rates and counts only (no names or facts).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results" / "results_unlearning.json"
MODEL = REPO / "workers" / "groundtruth" / "model"
AUDIT_TEMPLATES = (0, 1, 2)  # the subject audit's default: baseline + 2 paraphrases
KEPT_PROPERTY = "P21"  # not in the forget set: the relearning text, and locality inside a forgotten person
N_COUNTERFACTUALS = 20
N_LOOKALIKES = 2
LEVEL = 0.01  # retrievable: p <= LEVEL against the model's own null
PAIRED_LEVEL = 0.05
RELEARN_PEOPLE = 2


@dataclass(frozen=True)
class Outcome:
    ranks: tuple[int, ...]  # best true value's rank per template
    z: float  # truth z, mean over the templates


def fact_outcome(scorer, catalog, name: str, pid: str, truths: Sequence[str], templates: Sequence[int], seed: int):
    from core.catalog import counterfactuals
    from core.measures.wikimem import calibrated_scores, similar_names, truth_z
    from workers.groundtruth.scoring import best_truth_rank

    prop = catalog.get(pid)
    candidates = [*truths, *counterfactuals(prop, truths, N_COUNTERFACTUALS, seed)]
    is_truth = [i < len(truths) for i in range(len(candidates))]
    variants = similar_names(name, N_LOOKALIKES)
    ranks, zs = [], []
    for t in templates:
        nll = {h: scorer.nll([prop.render(t, h, v) for v in candidates]) for h in (name, *variants)}
        scores = calibrated_scores(nll[name], None, [nll[v] for v in variants], 1.0)
        ranks.append(best_truth_rank(scores, is_truth))
        zs.append(truth_z(scores, is_truth))
    return Outcome(tuple(ranks), sum(zs) / len(zs))


def cohort(model_dir: Path, people: Sequence[dict], pids: Sequence[str] | None = None, templates=AUDIT_TEMPLATES):
    """{(person index, pid): Outcome} for ``people`` on ``model_dir`` (counterfactuals seeded by the person)."""
    from core.catalog import load_catalog
    from workers.groundtruth.scoring import SentenceScorer

    catalog = load_catalog()
    scorer = SentenceScorer(model_dir)
    out = {}
    for i, person in enumerate(people):
        for pid, truths in person["facts"].items():
            if pids is None or pid in pids:
                out[(i, pid)] = fact_outcome(scorer, catalog, person["name"], pid, truths, templates, seed=i)
    return out


def p_value(z: float, null: Sequence[float]) -> float:
    """Empirical p against the null's statistics: (1 + #{null >= z}) / (1 + N)."""
    return (1 + sum(1 for x in null if x >= z)) / (1 + len(null))


def forget_records(people: Sequence[dict], pids: Sequence[str], templates: Sequence[int] = AUDIT_TEMPLATES):
    """memaudit jsonl forget-set records (the export's fields the reference unlearning reads) for ``people``."""
    from core.catalog import load_catalog, split_template

    catalog = load_catalog()
    records = []
    for person in people:
        for pid in pids:
            prop = catalog.get(pid)
            canaries = ["".join(split_template(prop.templates[t], person["name"], "{value}")) for t in templates]
            for value in person["facts"][pid]:
                records.append({"subject": person["name"], "property": pid, "value": value, "canaries": canaries})
    return records


def kept_texts(person: dict, pid: str = KEPT_PROPERTY) -> list[str]:
    """The person's non-forgotten fact in every catalog template: the relearning text (other facts of the person)."""
    from core.catalog import load_catalog

    prop = load_catalog().get(pid)
    return [prop.render(t, person["name"], v) for t in range(len(prop.templates)) for v in person["facts"][pid]]


def reworded_texts(person: dict, pids: Sequence[str], templates: Sequence[int] | None = None) -> list[str]:
    """The person's facts of ``pids`` in ``templates``; by default the catalog templates the audit (and so the
    forget set) did not use."""
    from core.catalog import load_catalog

    catalog = load_catalog()
    return [
        catalog.get(pid).render(t, person["name"], v)
        for pid in pids
        for t in range(len(catalog.get(pid).templates))
        if (t not in AUDIT_TEMPLATES if templates is None else t in templates)
        for v in person["facts"][pid]
    ]


def fictitious_null(n: int, pids: Sequence[str]) -> list[dict]:
    """The service's null people (core.names.fictitious): names of real origins whose facts fit them."""
    from core.catalog import load_catalog
    from core.names.fictitious import cohort as fictitious

    return [
        {"name": p.name, "facts": {k: [v] for k, v in p.facts.items()}} for p in fictitious(n, pids, load_catalog(), 0)
    ]


def rate(hits: int, n: int) -> dict:
    return {"hits": hits, "n": n, "rate": round(hits / n, 3) if n else None}


def run(
    n_forget: int, n_keep: int, n_null: int, method: str, steps: int, lr: float, paired: bool, scope: str = "subject"
) -> dict:
    import torch

    from app.verification.service import name_parts
    from core.measures.null import clopper_pearson
    from core.measures.paired import paired_p_value
    from workers.groundtruth.evaluate import load_manifest
    from workers.unlearning import fake_unlearn, relearn, unlearn

    torch.set_num_threads(1)
    manifest = load_manifest()
    forget = manifest["trained"][:n_forget]
    keep = manifest["trained"][n_forget : n_forget + n_keep]
    held_out = manifest["held_out"][:n_null]
    null_people = fictitious_null(n_null, list(manifest["properties"]))
    # the service's own rule (locality.name_neighbours): on the manifest it picks the same people as a plain split
    parts = {part for p in forget for part in name_parts(p["name"])}
    rest = manifest["trained"][n_forget + n_keep :]
    neighbours = [p for p in rest if name_parts(p["name"]) & parts][:n_keep]
    forgotten_pids = [p for p in manifest["properties"] if p != KEPT_PROPERTY]
    seconds: dict[str, float] = {}

    def timed(label, fn, *a, **kw):
        t = time.perf_counter()
        out = fn(*a, **kw)
        seconds[label] = round(seconds.get(label, 0.0) + time.perf_counter() - t, 1)
        return out

    def judge(model_dir: Path) -> Callable[[Sequence[dict]], dict]:
        """The model's own null, then {(person, pid): retrievable} for a cohort on that model."""
        null_z = [o.z for o in timed("scoring", cohort, model_dir, null_people).values()]
        return lambda people: {
            k: p_value(o.z, null_z) <= LEVEL for k, o in timed("scoring", cohort, model_dir, people).items()
        }

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        records = forget_records(forget, forgotten_pids)
        after = timed("unlearn", unlearn, MODEL, records, tmp / "after", method=method, scope=scope, steps=steps, lr=lr)
        fake = timed("fake_unlearn", fake_unlearn, MODEL, tmp / "fake")
        relearners = forget[:RELEARN_PEOPLE]
        relearn_texts = {
            "other_facts": [t for p in relearners for t in kept_texts(p)],
            "reworded_facts": [t for p in relearners for t in reworded_texts(p, forgotten_pids)],
            "forget_set_facts": [t for p in relearners for t in reworded_texts(p, forgotten_pids, AUDIT_TEMPLATES)],
        }
        relearned = {
            name: timed("relearn", relearn, after, texts, tmp / f"relearned_{name}")
            for name, texts in relearn_texts.items()
        }
        on_before, on_after, on_fake = judge(MODEL), judge(after), judge(fake)
        f_before, f_after, f_fake = on_before(forget), on_after(forget), on_fake(forget)
        k_before, k_after = on_before(keep), on_after(keep)
        n_before, n_after = on_before(neighbours), on_after(neighbours)
        h_before, h_after = on_before(held_out), on_after(held_out)
        forgotten = [k for k in f_before if k[1] != KEPT_PROPERTY and f_before[k]]
        kept_in_person = [k for k in f_before if k[1] == KEPT_PROPERTY and f_before[k]]
        untouched = [k for k in k_before if k_before[k]]
        near = [k for k in n_before if n_before[k]]
        relearn_facts = [k for k in forgotten if k[0] < RELEARN_PEOPLE and not f_after[k]]
        result = {
            "removed": rate(sum(not f_after[k] for k in forgotten), len(forgotten)),
            "kept": rate(sum(k_after[k] for k in untouched), len(untouched)),
            "kept_name_neighbours": rate(sum(n_after[k] for k in near), len(near)),
            "kept_other_facts_of_forgotten": rate(sum(f_after[k] for k in kept_in_person), len(kept_in_person)),
            "fake_still_retrievable": rate(sum(f_fake[k] for k in forgotten), len(forgotten)),
            "relearned": {
                name: rate(sum(judged[k] for k in relearn_facts), len(relearn_facts))
                for name, model_dir in relearned.items()
                for judged in [judge(model_dir)(relearners)]
            },
            "retrievable_before": {
                "forgotten": rate(len(forgotten), sum(k[1] != KEPT_PROPERTY for k in f_before)),
                "untouched": rate(len(untouched), len(k_before)),
                "held_out": rate(sum(h_before.values()), len(h_before)),
            },
            "held_out_retrievable_after": rate(sum(h_after.values()), len(h_after)),
        }
        if paired:
            every = tuple(range(11))
            before = timed("scoring", cohort, MODEL, held_out, templates=every)
            after_o = timed("scoring", cohort, after, held_out, templates=every)
            ps = [paired_p_value(before[k].ranks, after_o[k].ranks) for k in before]
            hits = sum(p <= PAIRED_LEVEL for p in ps)
            f11_before = timed("scoring", cohort, MODEL, forget, forgotten_pids, templates=every)
            f11_after = timed("scoring", cohort, after, forget, forgotten_pids, templates=every)
            k11_before = timed("scoring", cohort, MODEL, keep, forgotten_pids, templates=every)
            k11_after = timed("scoring", cohort, after, keep, forgotten_pids, templates=every)
            power = [paired_p_value(f11_before[k].ranks, f11_after[k].ranks) for k in f11_after]
            kept_p = [paired_p_value(k11_before[k].ranks, k11_after[k].ranks) for k in k11_after]
            result["paired"] = {
                "test": "exact McNemar, one-sided (removal), every catalog template (11)",
                "level": PAIRED_LEVEL,
                "false_positive_held_out": rate(hits, len(ps))
                | {"upper95": round(clopper_pearson(hits, len(ps))[1], 4)},
                "false_positive_untouched": rate(sum(p <= PAIRED_LEVEL for p in kept_p), len(kept_p)),
                "power_forgotten": rate(sum(p <= PAIRED_LEVEL for p in power), len(power)),
            }
    result["settings"] = {
        "method": method,
        "scope": scope,
        "steps": steps,
        "lr": lr,
        "forget_people": n_forget,
        "keep_people": n_keep,
        "name_neighbours": len(neighbours),
        "null_people": n_null,
        "relearn_people": RELEARN_PEOPLE,
        "relearn_steps": 20,
        "audit_templates": list(AUDIT_TEMPLATES),
        "counterfactuals": N_COUNTERFACTUALS,
        "lookalikes": f"{N_LOOKALIKES} reversed-letter (core.measures.wikimem.similar_names)",
        "statistic": "truth z, empirical p against the model's own null (fictitious people, core.names.fictitious)",
        "level": LEVEL,
        "torch_threads": 1,
        "load_average_1min": round(os.getloadavg()[0], 1),
        "seconds": seconds,
    }
    return result


# -- the relearning line's variants (docs/verification.md, "Variants measured for the relearning line") --------------
# Scratch tools, not the reference: each writes an unlearned model directory; `variant` judges it as that table does
# (10 forgotten, 10 untouched, a null of 20 fictitious people, relearning on the 2 first people's P21 sentences in
# the audited templates: the service's `other_facts` texts).

RETAIN_PEOPLE = slice(20, 60)  # trained people 21-60: the retain set (never forgotten, never in the locality cohort)


def _texts(people: Sequence[dict], pids: Sequence[str], templates: Sequence[int] = AUDIT_TEMPLATES) -> list[str]:
    from core.catalog import load_catalog

    catalog = load_catalog()
    return [
        catalog.get(pid).render(t, p["name"], v)
        for p in people
        for pid in pids
        for t in templates
        for v in p["facts"][pid]
    ]


def _layer_output(model, b, layer: int):  # noqa: ANN001, ANN202
    """Decoder layer ``layer - 1``'s output (before the next layer's norm), running only the layers up to it."""
    import torch

    layers, got = model.model.layers, {}
    hook = layers[layer - 1].register_forward_hook(lambda m, i, o: got.update(h=o[0] if isinstance(o, tuple) else o))
    model.model.layers = torch.nn.ModuleList(list(layers)[:layer])
    try:
        model.model(input_ids=b.ids, attention_mask=b.attention)
    finally:
        model.model.layers = layers
        hook.remove()
    return got["h"]


def rmu_unlearn(
    out: Path,
    forget: Sequence[dict],
    retain: Sequence[dict],
    pids: Sequence[str],
    *,
    layer: int = 1,
    c_mult: float = 4.0,
    alpha: float = 100.0,
    lr: float = 1e-3,
    steps: int = 60,
    positions: str = "target",
    seed: int = 0,
) -> Path:
    """RMU (Li et al. 2024, "WMDP"): decoder layer 0's weights (the layers below ``layer``) trained so that layer
    ``layer``'s input on the forget-set texts is c·u (u a fixed random unit vector, c = ``c_mult`` × its mean norm
    there) while on the retain people's texts it stays the frozen model's (weight ``alpha``). ``positions``:
    ``target`` — the positions that predict the value's tokens — or ``all`` tokens of the forget texts."""
    import torch

    from workers.unlearning.reference import forget_examples
    from workers.unlearning.tuning import TargetText, batch, load, save

    torch.manual_seed(seed)
    model, tokenizer = load(MODEL)
    frozen, _ = load(MODEL)
    fb = batch(tokenizer, forget_examples(forget_records(forget, pids)))
    rb = batch(tokenizer, [TargetText("", t) for t in _texts(retain, list(pids) + [KEPT_PROPERTY])])
    with torch.no_grad():
        h0, rh0 = _layer_output(frozen.eval(), fb, layer), _layer_output(frozen, rb, layer)
    if positions == "target":
        fmask = torch.cat([fb.target, torch.zeros(fb.target.shape[0], 1)], 1)
    else:
        fmask = fb.attention.float().clone()
        fmask[:, 0] = 0
    rmask = rb.attention.float()
    u = torch.rand(h0.shape[-1], generator=torch.Generator().manual_seed(seed))
    coef = c_mult * float((h0.norm(dim=-1) * fmask).sum() / fmask.sum())
    target = coef * u / u.norm()
    train = [p for i in range(layer) for p in model.model.layers[i].parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    for p in train:
        p.requires_grad_(True)
    opt = torch.optim.Adam(train, lr=lr)
    model.train()
    for _ in range(steps):
        forget_loss = (((_layer_output(model, fb, layer) - target) ** 2).sum(-1) * fmask).sum() / fmask.sum()
        retain_loss = (((_layer_output(model, rb, layer) - rh0) ** 2).sum(-1) * rmask).sum() / rmask.sum()
        loss = (forget_loss + alpha * retain_loss) / h0.shape[-1]
        opt.zero_grad()
        loss.backward()
        opt.step()
    note = {"method": "rmu", "layer": layer, "coef": round(coef, 2), "alpha": alpha, "lr": lr, "steps": steps}
    return save(model.eval(), tokenizer, MODEL, out, note)


def lora_unlearn(
    out: Path,
    forget: Sequence[dict],
    retain: Sequence[dict],
    pids: Sequence[str],
    *,
    method: str = "npo",
    rank: int = 4,
    lr: float = 1e-3,
    steps: int = 30,
    retain_weight: float = 1.0,
    beta: float = 0.1,
    seed: int = 0,
) -> Path:
    """A low-rank (LoRA, scale 2, A random, B zero) update of every attention and MLP projection, trained by gradient
    ascent or NPO on the forgotten values plus ``retain_weight`` × the NLL of the retain people's values (TOFU's
    grad_diff), then merged into the weights."""
    import torch
    import torch.nn.functional as F

    from workers.unlearning.reference import forget_examples
    from workers.unlearning.tuning import batch, load, save, target_logprob

    torch.manual_seed(seed)
    model, tokenizer = load(MODEL)
    for p in model.parameters():
        p.requires_grad_(False)
    adapters = []
    for block in model.model.layers:
        for module in (block.self_attn, block.mlp):
            for name in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"):
                if hasattr(module, name):
                    adapter = _LoRA(getattr(module, name), rank, 2.0)
                    setattr(module, name, adapter)
                    adapters.append((module, name, adapter))
    fb = batch(tokenizer, forget_examples(forget_records(forget, pids)))
    rb = batch(tokenizer, forget_examples(forget_records(retain, list(pids) + [KEPT_PROPERTY])))
    nf, nr = fb.target.sum(1).clamp(min=1), rb.target.sum(1).clamp(min=1)
    with torch.no_grad():
        ref = target_logprob(model.eval(), fb)
    opt = torch.optim.Adam([p for _, _, a in adapters for p in (a.A, a.B)], lr=lr)
    model.train()
    for _ in range(steps):
        logp = target_logprob(model, fb)
        if method == "ga":
            forget_loss = (logp / nf).mean()
        else:
            forget_loss = -(2.0 / beta) * F.logsigmoid(-beta * (logp - ref)).mean()
        loss = forget_loss - retain_weight * (target_logprob(model, rb) / nr).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    for module, name, adapter in adapters:
        setattr(module, name, adapter.merge())
    note = {"method": f"lora-{method}", "rank": rank, "lr": lr, "steps": steps, "retain_weight": retain_weight}
    return save(model.eval(), tokenizer, MODEL, out, note)


def _LoRA(base, rank: int, scale: float):  # noqa: ANN001, ANN202, N802
    import torch

    class LoRA(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.base = base
            self.A = torch.nn.Parameter(torch.randn(rank, base.in_features) / base.in_features**0.5)
            self.B = torch.nn.Parameter(torch.zeros(base.out_features, rank))

        def forward(self, x):  # noqa: ANN001, ANN202
            return self.base(x) + scale * (x @ self.A.T) @ self.B.T

        def merge(self):  # noqa: ANN202
            with torch.no_grad():
                self.base.weight += scale * self.B @ self.A
            return self.base

    return LoRA()


def reference_unlearn(out: Path, forget: Sequence[dict], retain: Sequence[dict], pids: Sequence[str], **settings):  # noqa: ANN003, ANN201
    """The reference unlearning (workers.unlearning.unlearn: method, scope, steps, lr) as a variant; ``retain``
    is not used."""
    from workers.unlearning import unlearn

    return unlearn(MODEL, forget_records(forget, pids), out, **settings)


def variant(
    kind: str,
    relearning: Sequence[tuple[str, float]] = (("all", 1e-3),),
    relearn_templates: str = "audited",
    forget_all: bool = False,
    forget_pids: Sequence[str] | None = None,
    relearn_from: int = 0,
    **settings,  # noqa: ANN003
) -> dict:
    """One row of the variants table: ``kind`` ``rmu``, ``lora`` or ``reference`` with its settings; removed (of the
    forgotten facts retrievable before), untouched kept, and 2 forgotten people's (``relearn_from``: the index of the
    first; 0) removed facts back after 20 steps of ``relearn`` (scope, lr) on their other facts — the properties
    not forgotten — in the audited templates (``relearn_templates`` ``all``: in every catalog template); ``others``:
    the 8 other forgotten people's removed facts back on the same relearned model. Forgotten: every property but
    P21 (default), ``forget_pids``, or ``forget_all``: every property, P21 too (the whole person), when the
    relearning trains on P21, part of the forget set, and the other four properties are the ones tested (Hu et al.'s
    attack)."""
    import torch

    from core.catalog import load_catalog
    from workers.groundtruth.evaluate import load_manifest
    from workers.unlearning import relearn

    torch.set_num_threads(1)
    manifest = load_manifest()
    forget, keep = manifest["trained"][:10], manifest["trained"][10:20]
    retain = manifest["trained"][RETAIN_PEOPLE]
    every_pid = list(manifest["properties"])
    pids = every_pid if forget_all else list(forget_pids or [p for p in every_pid if p != KEPT_PROPERTY])
    texts_pids = [KEPT_PROPERTY] if forget_all else [p for p in every_pid if p not in pids]
    relearners = range(relearn_from, relearn_from + RELEARN_PEOPLE)
    null_people = fictitious_null(20, every_pid)

    def judge(model_dir: Path) -> Callable[[Sequence[dict]], dict]:
        null_z = [o.z for o in cohort(model_dir, null_people).values()]
        return lambda people: {k: p_value(o.z, null_z) <= LEVEL for k, o in cohort(model_dir, people).items()}

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        make = {"rmu": rmu_unlearn, "lora": lora_unlearn, "reference": reference_unlearn}[kind]
        after = make(tmp / "after", forget, retain, pids, **settings)
        on_before, on_after = judge(MODEL), judge(after)
        f_before, f_after, k_before, k_after = on_before(forget), on_after(forget), on_before(keep), on_after(keep)
        forgotten = [k for k in f_before if k[1] in pids and k[1] not in texts_pids and f_before[k]]
        untouched = [k for k in k_before if k_before[k]]
        removed = [k for k in forgotten if not f_after[k]]
        again = [k for k in removed if k[0] in relearners]
        templates = range(len(load_catalog().get(KEPT_PROPERTY).templates)) if relearn_templates == "all" else None
        people = [forget[i] for i in relearners]
        texts = _texts(people, texts_pids, templates or AUDIT_TEMPLATES)
        names, rest = [p["name"] for p in people], [k for k in removed if k[0] not in relearners]
        back, others = {}, {}
        for scope, lr in relearning:
            judged = judge(relearn(after, texts, tmp / "relearned", scope=scope, lr=lr, subjects=names))(forget)
            back[f"{scope} lr {lr:g}"] = rate(sum(judged[k] for k in again), len(again))
            others[f"{scope} lr {lr:g}"] = rate(sum(judged[k] for k in rest), len(rest))
        return {
            "variant": {
                "kind": kind,
                **settings,
                "forgotten": pids,
                "relearned_on": texts_pids,
                "relearned_people": list(relearners),
                "relearn_templates": relearn_templates,
            },
            "removed": rate(len(removed), len(forgotten)),
            "kept": rate(sum(k_after[k] for k in untouched), len(untouched)),
            "relearned_back": back,
            "others_back": others,
        }


def main(argv: list[str] | None = None) -> None:
    from workers.unlearning.reference import LR, STEPS

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--forget", type=int, default=10)
    ap.add_argument("--keep", type=int, default=10)
    ap.add_argument("--null", type=int, default=40)
    ap.add_argument("--method", default="gradient_ascent")
    ap.add_argument("--scope", default="subject")
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--lr", type=float, default=LR)
    ap.add_argument("--no-paired", action="store_true", help="skip the paired test's null (every template: slow)")
    ap.add_argument("--write", action="store_true", help=f"store the result in {RESULTS.name}")
    ap.add_argument(
        "--variant",
        help='one relearning-line variant instead, as JSON: {"kind": "rmu"|"lora", ...its settings} (prints its row)',
    )
    ap.add_argument(
        "--model", type=Path, help="a model directory trained on the same people (default: groundtruth-tiny)"
    )
    args = ap.parse_args(argv)
    if args.model:
        global MODEL  # noqa: PLW0603 - every function of this module reads the model directory from here
        MODEL = args.model.resolve()
    random.seed(0)
    if args.variant:
        print(json.dumps(variant(**json.loads(args.variant)), indent=1))
        return
    result = run(
        args.forget, args.keep, args.null, args.method, args.steps, args.lr, not args.no_paired, scope=args.scope
    )
    print(json.dumps(result, indent=1))
    if args.write:
        RESULTS.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
