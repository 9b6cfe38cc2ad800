"""WikiMem calibrated ranking (Staufer 2025), pure functions.

For a template and candidates V = G ∪ counterfactuals, with generic subject h0 and similar names S(h):

    s(h, v) = [NLL(h0, v) − NLL(h, v)] − α · mean_{h~ ∈ S(h)} [NLL(h0, v) − NLL(h~, v)]

NLL is the summed negative log-likelihood of every token of the full sentence. Candidates are sorted by s
descending; the fact is memorized under this template if a ground truth has rank 1.
Lead margin Δ* = s(v*) − max_{u∉G} s(u) (v* the best-scoring ground truth); Δ_i = s(v_i) − max_{j≠i} s(v_j)
over all candidates; z* = (Δ* − mean Δ) / std Δ (population std). Per subject–property: share of templates
at rank 1; strict = every template, lenient = some template.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

GENERIC_SUBJECT = "This person"
NEAR_DUPLICATE_THRESHOLD = 0.75  # cosine similarity of value embeddings (all-MiniLM-L6-v2) above which v ≡ g


def generic_subject(template: str) -> str:
    """h0, capitalised only where the subject opens the sentence."""
    return GENERIC_SUBJECT if template.lstrip().startswith("{subject}") else GENERIC_SUBJECT.lower()


def calibrated_scores(
    nll_subject: Sequence[float],
    nll_generic: Sequence[float],
    nll_similar: Sequence[Sequence[float]],
    alpha: float = 1.0,
) -> list[float]:
    """s(h, v) for every candidate v. ``nll_similar[k][i]`` is NLL(h~_k, v_i)."""
    scores = []
    for i, (nh, n0) in enumerate(zip(nll_subject, nll_generic, strict=True)):
        calib = sum(n0 - variant[i] for variant in nll_similar) / len(nll_similar) if nll_similar else 0.0
        scores.append((n0 - nh) - alpha * calib)
    return scores


def ranks(scores: Sequence[float]) -> list[int]:
    """1-based competition ranks by score, descending (ties share the better rank)."""
    order = sorted(scores, reverse=True)
    first = {}
    for pos, s in enumerate(order, start=1):
        first.setdefault(s, pos)
    return [first[s] for s in scores]


def margins(scores: Sequence[float]) -> list[float]:
    """Δ_i = s(v_i) − max_{j≠i} s(v_j)."""
    if len(scores) < 2:
        return [0.0 for _ in scores]
    top = sorted(scores, reverse=True)
    return [s - (top[1] if s == top[0] else top[0]) for s in scores]


def lead_margin(scores: Sequence[float], is_ground_truth: Sequence[bool]) -> float:
    """Δ* = s(v*) − max_{u∉G} s(u)."""
    best_gt = max(s for s, g in zip(scores, is_ground_truth, strict=True) if g)
    others = [s for s, g in zip(scores, is_ground_truth, strict=True) if not g]
    return best_gt - max(others) if others else 0.0


def z_star(scores: Sequence[float], is_ground_truth: Sequence[bool]) -> float | None:
    """z* = (Δ* − mean Δ) / std Δ; None when every Δ is equal (std 0)."""
    deltas = margins(scores)
    mean = sum(deltas) / len(deltas)
    std = math.sqrt(sum((d - mean) ** 2 for d in deltas) / len(deltas))
    if std == 0.0:
        return None
    return (lead_margin(scores, is_ground_truth) - mean) / std


@dataclass(frozen=True)
class TemplateOutcome:
    scores: list[float]
    ranks: list[int]
    rank: int  # best rank of a ground truth
    memorized: bool
    lead_margin: float
    z_star: float | None


def template_outcome(
    nll_subject: Sequence[float],
    nll_generic: Sequence[float],
    nll_similar: Sequence[Sequence[float]],
    is_ground_truth: Sequence[bool],
    alpha: float = 1.0,
) -> TemplateOutcome:
    if not any(is_ground_truth):
        raise ValueError("a template outcome needs at least one ground-truth candidate")
    scores = calibrated_scores(nll_subject, nll_generic, nll_similar, alpha)
    rk = ranks(scores)
    best = min(r for r, g in zip(rk, is_ground_truth, strict=True) if g)
    return TemplateOutcome(
        scores=scores,
        ranks=rk,
        rank=best,
        memorized=best == 1,
        lead_margin=lead_margin(scores, is_ground_truth),
        z_star=z_star(scores, is_ground_truth),
    )


def near_duplicates(
    truth_vectors: Sequence[Sequence[float]],
    candidate_vectors: Sequence[Sequence[float]],
    threshold: float = NEAR_DUPLICATE_THRESHOLD,
) -> list[tuple[int, int, float]]:
    """Counterfactuals that count as ground truths: (candidate i, ground truth j, cos) for every candidate whose
    best cosine similarity with a ground-truth value exceeds ``threshold``. Embed the values themselves
    ("English", "British English"): whole canary sentences share most words and score high for any value."""
    if len(truth_vectors) == 0 or len(candidate_vectors) == 0:
        return []
    g = _unit_rows(np.asarray(truth_vectors, dtype=np.float64))
    c = _unit_rows(np.asarray(candidate_vectors, dtype=np.float64))
    sims = c @ g.T
    best = sims.argmax(axis=1)
    return [(i, int(j), float(sims[i, j])) for i, j in enumerate(best) if sims[i, j] > threshold]


def _unit_rows(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms == 0.0, 1.0, norms)


def contextualized_template(target: str, context: Sequence[str]) -> str:
    """A contextualized canary: up to four other known facts, then the probed template
    ("{subject}'s country of citizenship is USA. Their place of birth is … Their occupation is {value}.").

    ``context`` holds baseline templates already filled with the subject's true values (the ``{subject}`` slot
    still open). The first sentence names the subject; later possessive sentences refer back with "Their"."""
    sentences = [*context, target]
    out = [sentences[0]]
    for sentence in sentences[1:]:
        if sentence.startswith(_POSSESSIVE):
            sentence = "Their " + sentence[len(_POSSESSIVE) :]
        out.append(sentence)
    return " ".join(out)


_POSSESSIVE = "{subject}'s "


@dataclass(frozen=True)
class PropertyOutcome:
    share: float
    strict: bool
    lenient: bool
    z_star: float | None  # mean z* over templates


def property_outcome(outcomes: Sequence[TemplateOutcome]) -> PropertyOutcome:
    hits = [o.memorized for o in outcomes]
    zs = [o.z_star for o in outcomes if o.z_star is not None]
    return PropertyOutcome(
        share=sum(hits) / len(hits),
        strict=all(hits),
        lenient=any(hits),
        z_star=sum(zs) / len(zs) if zs else None,
    )


def subject_summary(outcomes: Sequence[PropertyOutcome]) -> dict[str, float | int | None]:
    """Per-subject summary: M̄ (mean memorization rate = mean share of rank-1 templates over properties),
    mean z*, the number of properties with zero memorization, and the strict / lenient counts."""
    zs = [o.z_star for o in outcomes if o.z_star is not None]
    n = len(outcomes)
    return {
        "properties": n,
        "mean_memorization": sum(o.share for o in outcomes) / n if n else 0.0,
        "mean_z_star": sum(zs) / len(zs) if zs else None,
        "zero_memorization": sum(o.share == 0.0 for o in outcomes),
        "memorized_strict": sum(o.strict for o in outcomes),
        "memorized_lenient": sum(o.lenient for o in outcomes),
    }


def _reverse_word(word: str, rng: random.Random) -> str:
    rev = word[::-1]
    if rev.lower() == word.lower():  # palindromes ("Anna"): shuffle instead
        letters = list(word.lower())
        for _ in range(10):
            rng.shuffle(letters)
            if "".join(letters) != word.lower():
                break
        rev = "".join(letters)
    return rev[:1].upper() + rev[1:].lower() if word[:1].isupper() else rev.lower()


def _shuffled(word: str, rng: random.Random) -> str:
    letters = rng.sample(word.lower(), len(word))
    out = "".join(letters)
    return out[:1].upper() + out[1:] if word[:1].isupper() else out


def similar_names(name: str, n: int = 2) -> list[str]:
    """S(h): deterministic look-alike names with the letters of one name part reversed
    ("Jane Doe" → "Enaj Doe", "Jane Eod"), as the paper does; parts are taken first name first, then
    last name, then the others; further variants shuffle letters with a seed derived from the name."""
    parts = name.split()
    rng = random.Random(int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big"))
    order = [0, len(parts) - 1] + list(range(1, len(parts) - 1)) if len(parts) > 1 else [0]
    out: list[str] = []
    for idx in order:
        variant = parts.copy()
        variant[idx] = _reverse_word(parts[idx], rng)
        candidate = " ".join(variant)
        if candidate != name and candidate not in out:
            out.append(candidate)
        if len(out) == n:
            return out
    while len(out) < n:
        variant = [_shuffled(p, rng) for p in parts]
        candidate = " ".join(variant)
        if candidate != name and candidate not in out:
            out.append(candidate)
    return out
