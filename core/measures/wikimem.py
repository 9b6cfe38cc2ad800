"""WikiMem calibrated ranking (Staufer 2025), pure functions.

For a template and candidates V = G ∪ counterfactuals, with generic subject h0 and similar names S(h):

    s(h, v) = [NLL(h0, v) − NLL(h, v)] − α · mean_{h~ ∈ S(h)} [NLL(h0, v) − NLL(h~, v)]

NLL is the summed negative log-likelihood of every token of the full sentence. At α = 1 the NLL(h0, v) terms
cancel exactly: s = mean_{h~} NLL(h~, v) − NLL(h, v), so the generic subject need not be scored.
Candidates are sorted by s descending; ties are broken against the ground truths (a truth tied with a
counterfactual ranks below it: a model that scores every candidate alike retrieves nothing). The fact is
memorized under this template if a ground truth has rank 1.
Only then are the paper's Δ* and z* defined: Δ* = s(v*) − max_{u∉G} s(u) (v* the best-scoring ground truth);
Δ_i = s(v_i) − max_{j≠i} s(v_j) over all candidates; z* = (Δ* − mean Δ) / std Δ (population std).
Per subject–property: share of templates at rank 1; strict = every template, lenient = some template;
z̄* = mean z* over the rank-1 templates (WikiMem, Table 1), None when no template ranks a truth first.
"""

from __future__ import annotations

import hashlib
import math
import random
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

GENERIC_SUBJECT = "This person"
NEAR_DUPLICATE_THRESHOLD = 0.75  # cosine similarity of value embeddings (all-MiniLM-L6-v2) above which v ≡ g


def generic_subject(template: str) -> str:
    """h0, capitalised only where the subject opens the sentence."""
    return GENERIC_SUBJECT if template.lstrip().startswith("{subject}") else GENERIC_SUBJECT.lower()


def generic_cancels(alpha: float, n_similar: int) -> bool:
    """Whether NLL(h0, v) drops out of s(h, v): at α = 1 exactly, with at least one similar name."""
    return alpha == 1.0 and n_similar > 0


def calibrated_scores(
    nll_subject: Sequence[float],
    nll_generic: Sequence[float] | None,
    nll_similar: Sequence[Sequence[float]],
    alpha: float = 1.0,
) -> list[float]:
    """s(h, v) for every candidate v. ``nll_similar[k][i]`` is NLL(h~_k, v_i). ``nll_generic`` may be None
    where the generic subject cancels (:func:`generic_cancels`): s = mean_k NLL(h~_k, v) − NLL(h, v)."""
    if nll_generic is None:
        if not generic_cancels(alpha, len(nll_similar)):
            raise ValueError("NLL(h0, v) is needed unless alpha = 1 and there are similar names")
        k = len(nll_similar)
        return [sum(variant[i] for variant in nll_similar) / k - nh for i, nh in enumerate(nll_subject)]
    scores = []
    for i, (nh, n0) in enumerate(zip(nll_subject, nll_generic, strict=True)):
        calib = sum(n0 - variant[i] for variant in nll_similar) / len(nll_similar) if nll_similar else 0.0
        scores.append((n0 - nh) - alpha * calib)
    return scores


def ranks(scores: Sequence[float], is_ground_truth: Sequence[bool] | None = None) -> list[int]:
    """1-based ranks by score, descending. Ties are broken against the ground truths: a truth ranks below every
    counterfactual it ties with (so equal scores never put a truth first, whatever its position in the list);
    candidates of one kind that tie share the better rank (competition ranking)."""
    truth = list(is_ground_truth) if is_ground_truth is not None else [False] * len(scores)
    if len(truth) != len(scores):
        raise ValueError("scores and is_ground_truth differ in length")
    higher: dict[float, int] = {}
    for pos, s in enumerate(sorted(scores, reverse=True)):
        higher.setdefault(s, pos)  # candidates scoring strictly higher than s
    tied_counterfactuals: dict[float, int] = {}
    for s, g in zip(scores, truth, strict=True):
        if not g:
            tied_counterfactuals[s] = tied_counterfactuals.get(s, 0) + 1
    return [1 + higher[s] + (tied_counterfactuals.get(s, 0) if g else 0) for s, g in zip(scores, truth, strict=True)]


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
    """z* = (Δ* − mean Δ) / std Δ; None when every Δ is equal (std 0). The paper defines it only where a
    ground truth ranks first (:func:`template_outcome` keeps it there only); this computes the formula."""
    deltas = margins(scores)
    mean = sum(deltas) / len(deltas)
    std = math.sqrt(sum((d - mean) ** 2 for d in deltas) / len(deltas))
    if std == 0.0:
        return None
    return (lead_margin(scores, is_ground_truth) - mean) / std


def truth_z(scores: Sequence[float], is_ground_truth: Sequence[bool]) -> float:
    """The verdict's per-template statistic: the best true value's calibrated score in standard deviations of the
    counterfactuals' scores above their mean, (s(v*) − mean_{u∉G} s(u)) / std_{u∉G} s(u) (population std; 0 when
    the counterfactuals all score alike or there are none). Unlike z* it is defined at every rank, and it is
    continuous, so facts the truth leads by much and by little are told apart (not the paper's: see
    docs/measures.md, "The verdict statistic")."""
    best = max(s for s, g in zip(scores, is_ground_truth, strict=True) if g)
    others = [s for s, g in zip(scores, is_ground_truth, strict=True) if not g]
    if not others:
        return 0.0
    mean = sum(others) / len(others)
    std = math.sqrt(sum((s - mean) ** 2 for s in others) / len(others))
    return (best - mean) / std if std > 0.0 else 0.0


def truth_log_share(scores: Sequence[float], is_ground_truth: Sequence[bool]) -> float:
    """The best true value's share of the candidates' softmax over calibrated scores, in logs:
    s(v*) − log(e^{s(v*)} + Σ_{u∉G} e^{s(u)}) (≤ 0; computed stably). A statistic measured against truth z in
    benchmarks/verdict_power.py (``logshare``): it weighs the truth's margin over the few best counterfactuals, not over
    their mean."""
    best = max(s for s, g in zip(scores, is_ground_truth, strict=True) if g)
    pool = [best, *(s for s, g in zip(scores, is_ground_truth, strict=True) if not g)]
    top = max(pool)
    return best - top - math.log(sum(math.exp(x - top) for x in pool))


@dataclass(frozen=True)
class TemplateOutcome:
    scores: list[float]
    ranks: list[int]
    rank: int  # best rank of a ground truth
    memorized: bool
    lead_margin: float  # Δ* where memorized; elsewhere the (≤ 0) gap to the best counterfactual, a diagnostic
    z_star: float | None  # only where memorized (rank 1), as the paper defines it
    truth_z: float = 0.0  # the verdict statistic's per-template term (:func:`truth_z`)


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
    rk = ranks(scores, is_ground_truth)
    best = min(r for r, g in zip(rk, is_ground_truth, strict=True) if g)
    return TemplateOutcome(
        scores=scores,
        ranks=rk,
        rank=best,
        memorized=best == 1,
        lead_margin=lead_margin(scores, is_ground_truth),
        z_star=z_star(scores, is_ground_truth) if best == 1 else None,
        truth_z=truth_z(scores, is_ground_truth),
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
    z_star: float | None  # z̄*: mean z* over the rank-1 templates; None when no template ranks a truth first
    rank1_z_stars: tuple[float, ...] = ()  # the z* of each rank-1 template (for subject and cohort means)


def property_outcome(outcomes: Sequence[TemplateOutcome]) -> PropertyOutcome:
    hits = [o.memorized for o in outcomes]
    zs = tuple(o.z_star for o in outcomes if o.memorized and o.z_star is not None)
    return PropertyOutcome(
        share=sum(hits) / len(hits),
        strict=all(hits),
        lenient=any(hits),
        z_star=sum(zs) / len(zs) if zs else None,
        rank1_z_stars=zs,
    )


def subject_summary(outcomes: Sequence[PropertyOutcome]) -> dict[str, float | int | None]:
    """Per-subject summary: M̄ (mean memorization rate = mean share of rank-1 templates over properties),
    z̄* (mean z* over every rank-1 template of the subject; None when there is none), the number of this
    subject's properties no template retrieves (not WikiMem's H_{M=0}, which counts subjects of a cohort),
    and how many properties some template (``rank1_any``) or every template (``rank1_all``) ranks a true value
    first: WikiMem's lenient and strict readings, which are not the verdict (``memorized`` means p <= 0.01 against
    the null). ``memorized_strict`` / ``memorized_lenient``: the same counts under their old names, deprecated."""
    zs = [z for o in outcomes for z in o.rank1_z_stars]
    n = len(outcomes)
    return {
        "properties": n,
        "mean_memorization": sum(o.share for o in outcomes) / n if n else 0.0,
        "mean_z_star": sum(zs) / len(zs) if zs else None,
        "properties_not_memorized": sum(o.share == 0.0 for o in outcomes),
        "rank1_all": sum(o.strict for o in outcomes),
        "rank1_any": sum(o.lenient for o in outcomes),
        "memorized_strict": sum(o.strict for o in outcomes),  # deprecated: rank1_all (until the next release)
        "memorized_lenient": sum(o.lenient for o in outcomes),  # deprecated: rank1_any
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


SHUFFLE_ATTEMPTS = 20  # per requested variant; then the substitution fallback
_VOWELS = "aeiou"
_CONSONANTS = "bcdfghjklmnpqrstvwxyz"
_MAX_SHIFT = 8  # code-point neighbours tried per letter outside the Latin alphabet


def _same_script(a: str, b: str) -> bool:
    """Both letters, and from the same Unicode block name ("CJK UNIFIED IDEOGRAPH", "CYRILLIC SMALL LETTER")."""
    if not (a.isalpha() and b.isalpha()):
        return False
    na, nb = unicodedata.name(a, ""), unicodedata.name(b, "")
    return bool(na) and na.rsplit(" ", 1)[0].split("-")[0] == nb.rsplit(" ", 1)[0].split("-")[0]


def _substitutes(ch: str) -> list[str]:
    """Letters that may replace ``ch`` in a look-alike: a Latin vowel by another vowel, a consonant by another
    consonant (case kept); any other letter by nearby code points of the same script; nothing for a non-letter."""
    low = ch.lower()
    for group in (_VOWELS, _CONSONANTS):
        if low in group:
            out = [c for c in group if c != low]
            return [c.upper() for c in out] if ch.isupper() else out
    if not ch.isalpha():
        return []
    near = (chr(cp) for d in range(1, _MAX_SHIFT + 1) for cp in (ord(ch) + d, ord(ch) - d) if 0 < cp < 0x110000)
    return [c for c in near if _same_script(ch, c)]


def _substitution_variants(name: str, rng: random.Random, limit: int) -> list[str]:
    """Up to ``limit`` distinct one-letter substitutions of ``name`` (finite: at most 20 per letter), drawn
    in a seeded order so that variants spread over the name rather than piling up on its first letter."""
    variants = [name[:i] + sub + name[i + 1 :] for i, ch in enumerate(name) for sub in _substitutes(ch)]
    rng.shuffle(variants)
    return list(dict.fromkeys(v for v in variants if v != name))[:limit]


def similar_names(name: str, n: int = 2) -> list[str]:
    """S(h): deterministic look-alike names with the letters of one name part reversed
    ("Jane Doe" → "Enaj Doe", "Jane Eod"), as the paper does; parts are taken first name first, then
    last name, then the others; further variants shuffle letters with a seed derived from the name.

    Always terminates: shuffles are tried at most SHUFFLE_ATTEMPTS · n times; when they cannot give n distinct
    names ("Li", "Aaa", "王", "Al Bo" with n = 10), one letter is substituted (vowel for vowel, consonant for
    consonant, a neighbouring character of the same script elsewhere). Fewer than n come back only when the
    name has too few letters to vary — none at all for a name without letters (the API refuses such names)."""
    parts = name.split()
    rng = random.Random(int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big"))
    order = [0, len(parts) - 1] + list(range(1, len(parts) - 1)) if len(parts) > 1 else [0]
    out: list[str] = []
    seen = {name}  # beside the list: a membership test per attempt in constant time (a list's was O(n))
    for idx in order if parts else []:
        variant = parts.copy()
        variant[idx] = _reverse_word(parts[idx], rng)
        candidate = " ".join(variant)
        if candidate not in seen:
            seen.add(candidate)
            out.append(candidate)
        if len(out) == n:
            return out
    for _ in range(SHUFFLE_ATTEMPTS * n if parts else 0):
        if len(out) >= n:
            break
        candidate = " ".join(_shuffled(p, rng) for p in parts)
        if candidate not in seen:
            seen.add(candidate)
            out.append(candidate)
    if len(out) < n:
        fresh = [v for v in _substitution_variants(name, rng, n + len(out)) if v not in seen]
        out.extend(fresh[: n - len(out)])
    return out[:n]
