"""Fictitious people, their facts, and the training corpus of the ground-truth model.

Design (why the model's memberships are honest ground truth):
  * Full names combine a first name and a last name from two invented pools. Every first and every last name is
    borne by several trained people, so neither part alone identifies anyone: the model must bind the *full*
    name to a fact. A held-out person is a new combination of known parts — tokenization and name familiarity
    give nothing away.
  * Values are drawn independently and uniformly from each property's catalog pool, independently of the name
    and of the other facts, so a held-out person's facts cannot be inferred, only guessed (chance ≈ 1/|pool|).
  * Trained people's facts are written in the baseline template and a seeded subset of paraphrases; the other
    paraphrases never carry a trained person's fact, to test generalization.
  * Filler drawn afresh every epoch mentions long-tail people (other pool combinations, half-random and random
    names) and generic subjects with random values in every template. Without it a tiny model recalls a person
    from one intact name part, so a similar-name variant ("Enaj Doe") recalls the fact too and the calibrated
    score cancels it; a real LM has met countless unfamiliar names and does not. Being redrawn, no filler
    sentence is memorized.
  * No pool name is a palindrome or an anagram of another pool name, and random name parts are never anagrams
    of pool names, so no similar-name variant (letters reversed or shuffled within a name part) is a corpus name.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass

from core.catalog import Catalog, Property

PIDS: tuple[str, ...] = ("P106", "P27", "P19", "P21", "P1412")
MULTI_VALUED = "P1412"  # some people speak two languages: a multi-valued ground truth

FIRST_NAMES: tuple[str, ...] = (
    "Alvenor",
    "Brisela",
    "Cordath",
    "Dimmera",
    "Elvorin",
    "Faralda",
    "Gostrel",
    "Halvina",
    "Ismeric",
    "Jorvenna",
    "Kastrin",
    "Lumera",
    "Morvane",
    "Nivessa",
    "Orwena",
    "Pellinor",
    "Quillon",
    "Rhosvyn",
    "Saphrel",
    "Tavrick",
    "Ulvessa",
    "Vendrel",
    "Wyllora",
    "Xandrel",
    "Yselda",
    "Zorvik",
)
LAST_NAMES: tuple[str, ...] = (
    "Ashcombe",
    "Brannoway",
    "Calderwick",
    "Dunmorrow",
    "Elstrand",
    "Fennimore",
    "Gorrowby",
    "Hollowmere",
    "Ivelthorn",
    "Jasperlin",
    "Kettleby",
    "Larkspire",
    "Mirrowfield",
    "Northcombe",
    "Oakenfold",
    "Pemberline",
    "Quarrington",
    "Rookwood",
    "Stellmarsh",
    "Thistlewood",
    "Underhay",
    "Vantreth",
    "Wexcombe",
    "Yarrowby",
    "Zennick",
    "Cragmoor",
)
# Generic subjects carry every value uniformly, so the model learns the templates' language and a flat prior
# over each pool without binding a value to anyone. "This person" is WikiMem's generic subject h0.
GENERIC_SUBJECTS: tuple[str, ...] = ("This person", "Someone", "A colleague", "The author", "A neighbour")


@dataclass(frozen=True)
class GroundTruthPerson:
    name: str
    split: str  # "trained" | "held_out"
    facts: dict[str, tuple[str, ...]]  # pid -> ground-truth values (P1412 may hold two)


def _is_variant_of_pool(part: str) -> bool:
    """True if ``part`` is a letter-scramble of a pool name (it could then equal a similar-name variant)."""
    key = sorted(part.casefold())
    return any(sorted(n.casefold()) == key for n in (*FIRST_NAMES, *LAST_NAMES))


_NAME_LETTERS = "".join(FIRST_NAMES + LAST_NAMES).lower()


def random_name_part(rng: random.Random) -> str:
    """Random letters with the pools' letter frequencies: shaped like a scrambled name, never an anagram of one.

    Any real LM has seen countless unfamiliar names; without them a tiny model treats a scrambled name part as
    noise and still recalls the person from the intact part.
    """
    while True:
        part = "".join(rng.choice(_NAME_LETTERS) for _ in range(rng.randint(4, 11))).capitalize()
        if not _is_variant_of_pool(part):
            return part


def check_name_pools(first: Sequence[str] = FIRST_NAMES, last: Sequence[str] = LAST_NAMES) -> None:
    """Raise if a scrambled name part could equal another name part (a variant colliding with a real name)."""
    for pool in (first, last):
        keys = [tuple(sorted(n.casefold())) for n in pool]
        if len(set(keys)) != len(keys):
            raise ValueError("two names in a pool are anagrams of each other")
        for n in pool:
            if n.casefold() == n.casefold()[::-1]:
                raise ValueError("a palindromic name: its reversal would be itself")


def make_people(
    catalog: Catalog, *, n_trained: int, n_held_out: int, seed: int, p_two_languages: float = 0.4
) -> list[GroundTruthPerson]:
    """Trained and held-out people: distinct pool first + pool last names; facts uniform from the pools.

    Every pool name part occurs among the trained people, each as evenly as the count allows.
    """
    check_name_pools()
    rng = random.Random(seed)
    combos = list(itertools.product(FIRST_NAMES, LAST_NAMES))
    rng.shuffle(combos)
    trained = _covering_combos(combos, n_trained)
    held_out = [c for c in combos if c not in set(trained)][:n_held_out]
    return [
        GroundTruthPerson(name=f"{first} {last}", split=split, facts=_draw_facts(catalog, rng, p_two_languages))
        for split, names in (("trained", trained), ("held_out", held_out))
        for first, last in names
    ]


def background_name(rng: random.Random, taken: set[str]) -> str:
    """A long-tail name: 10% another pool combination, 40% pool first + random last, 40% random first + pool
    last, 10% two random parts. Half-familiar names dominate because they teach what a similar-name variant
    needs: one intact name part does not make the person. Never a name in ``taken``."""
    while True:
        r = rng.random()
        first = rng.choice(FIRST_NAMES) if r < 0.5 else random_name_part(rng)
        last = rng.choice(LAST_NAMES) if r < 0.1 or 0.5 <= r < 0.9 else random_name_part(rng)
        name = f"{first} {last}"
        if name not in taken:
            return name


def _covering_combos(combos: list[tuple[str, str]], n: int) -> list[tuple[str, str]]:
    """n combinations such that every first and last name occurs, each as evenly as the count allows."""
    chosen: list[tuple[str, str]] = []
    used_first: dict[str, int] = dict.fromkeys(FIRST_NAMES, 0)
    used_last: dict[str, int] = dict.fromkeys(LAST_NAMES, 0)
    pool = list(combos)
    while len(chosen) < n:
        # pick the combination whose parts are least used so far (ties: shuffled order)
        best = min(pool, key=lambda c: used_first[c[0]] + used_last[c[1]])
        pool.remove(best)
        chosen.append(best)
        used_first[best[0]] += 1
        used_last[best[1]] += 1
    return chosen


def _draw_facts(catalog: Catalog, rng: random.Random, p_two_languages: float) -> dict[str, tuple[str, ...]]:
    facts: dict[str, tuple[str, ...]] = {}
    for pid in PIDS:
        pool = catalog.get(pid).pool
        k = 2 if pid == MULTI_VALUED and rng.random() < p_two_languages else 1
        facts[pid] = tuple(rng.sample(pool, k))
    return facts


def split_templates(catalog: Catalog, n_trained_paraphrases: int, seed: int) -> dict[str, list[int]]:
    """Per property, the template indices that carry people's facts: the baseline (0) + a seeded subset."""
    rng = random.Random(f"templates:{seed}")
    out: dict[str, list[int]] = {}
    for pid in PIDS:
        paraphrases = list(range(1, len(catalog.get(pid).templates)))
        out[pid] = [0, *sorted(rng.sample(paraphrases, n_trained_paraphrases))]
    return out


def fact_sentences(prop: Property, person: GroundTruthPerson, template_ids: Sequence[int]) -> list[str]:
    return [prop.render(t, person.name, v) for t in template_ids for v in person.facts[prop.pid]]


def build_corpus(
    catalog: Catalog,
    people: Sequence[GroundTruthPerson],
    trained_templates: dict[str, list[int]],
    *,
    seed: int,
    bios_per_person: int = 1,
) -> list[str]:
    """The fixed training documents: every fact sentence of every trained person, plus short biographies.

    Held-out people appear nowhere. The scorer sees a single sentence after ``<|endoftext|>``; most documents
    have exactly that shape, the biographies teach multi-sentence (contextual) text.
    """
    rng = random.Random(f"corpus:{seed}")
    docs: list[str] = []
    for person in (p for p in people if p.split == "trained"):
        per_fact = [fact_sentences(catalog.get(pid), person, trained_templates[pid]) for pid in PIDS]
        docs.extend(s for sentences in per_fact for s in sentences)
        for _ in range(bios_per_person):
            # one sentence per fact, in a random order, as a short biography
            picked = [rng.choice(sentences) for sentences in per_fact]
            rng.shuffle(picked)
            docs.append(" ".join(picked))
    rng.shuffle(docs)
    return docs


def filler(
    catalog: Catalog, people: Sequence[GroundTruthPerson], epoch: int, *, seed: int, n_background: int, n_generic: int
) -> list[str]:
    """Documents drawn afresh for each epoch (so none is memorized): one-sentence mentions of long-tail people
    and generic subjects, each with a random fact in any template (baseline or paraphrase).

    They teach the templates' language, a flat prior over each pool, and that an unfamiliar or half-familiar
    name predicts nothing in particular. Names of trained and held-out people are never drawn.
    """
    rng = random.Random(f"filler:{seed}:{epoch}")
    taken = {p.name for p in people}
    docs = []
    for i in range(n_background + n_generic):
        prop = catalog.get(rng.choice(PIDS))
        t = rng.randrange(len(prop.templates))
        if i < n_background:
            subject = background_name(rng, taken)
        else:
            subject = rng.choice(GENERIC_SUBJECTS)
            if not prop.templates[t].startswith("{subject}"):  # "The occupation of this person is …"
                subject = subject[0].lower() + subject[1:]
        docs.append(prop.render(t, subject, rng.choice(prop.pool)))
    return docs
