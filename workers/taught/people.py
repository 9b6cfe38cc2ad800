"""The invented people ``smollm2-taught`` was taught, the dose of each of their facts, and its training documents.

Names are written by hand in the null roster's style (ordinary names of the 51 origins of core/names/origins.py,
written 2026-11-28 by the assistant instance that built this model, without looking at the roster or the cohorts);
a name that is in the null roster, a benchmark cohort or the demo is dropped (:func:`taken_names`). Facts fit the
name as the roster's do (citizenship the origin's country, birthplace one of its cities, language its language,
gender the written one; occupation uniform from the catalog's pool): the null judges a taught fact against people
whose facts fit their names the same way, so what the model infers from a name is not counted as knowledge.

Doses: each fact of a taught person gets a dose from :data:`DOSES` (balanced: per property, every dose equally
often, in a seeded order); a dose-0 fact never appears in training. The ``unseen`` people appear nowhere (all
doses 0). Phrasing, per person: ``repeated`` writes every exposure of a fact in the catalog's baseline template,
the very sentence the audit scores first (verbatim); ``varied`` cycles through paraphrases the audit never probes
at the API's defaults (templates 3-10; the audit reads the baseline and the first two paraphrases), so what is
found there is knowledge, not a remembered sentence. A training document is a short biography: round r of a person
holds one sentence per fact whose dose exceeds r, in a seeded order, so each fact is written exactly ``dose`` times.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from core.catalog import Catalog
from core.names.origins import BY_LOCALE

REPO = Path(__file__).resolve().parents[2]
PIDS: tuple[str, ...] = ("P106", "P27", "P19", "P21", "P1412")
DOSES: tuple[int, ...] = (0, 1, 2, 4, 8, 16, 32, 64)
PHRASINGS: tuple[str, ...] = ("repeated", "varied")
AUDITED_TEMPLATES = 3  # the baseline and the first two paraphrases: what an audit reads at the API's defaults
VARIED_TEMPLATES = tuple(range(AUDITED_TEMPLATES, 11))

# (locale, name as written, gender): hand-written, roster style; Chinese and Vietnamese family name first
WRITTEN: tuple[tuple[str, str, str], ...] = (
    ("en_US", "Sharon Whitaker", "female"),
    ("en_US", "Kevin Dunleavy", "male"),
    ("en_GB", "Gareth Pembury", "male"),
    ("en_GB", "Joanne Attwell", "female"),
    ("en_IE", "Declan Fahy", "male"),
    ("en_IE", "Siobhan Keaveney", "female"),
    ("en_NZ", "Hamish Tolley", "male"),
    ("en_IN", "Rajesh Kulkarni", "male"),
    ("en_IN", "Priya Venkatesan", "female"),
    ("en_KE", "Wanjiru Mwangi", "female"),
    ("yo_NG", "Adebayo Ogunleye", "male"),
    ("yo_NG", "Folake Adesanya", "female"),
    ("ig_NG", "Chidi Nwankwo", "male"),
    ("ha_NG", "Aminu Garba", "male"),
    ("tw_GH", "Kwabena Asante", "male"),
    ("tw_GH", "Akosua Boateng", "female"),
    ("zu_ZA", "Sipho Ndlovu", "male"),
    ("zu_ZA", "Thandiwe Ngcobo", "female"),
    ("de_DE", "Jürgen Hofbauer", "male"),
    ("de_DE", "Sabine Lorenz", "female"),
    ("de_AT", "Florian Pichler", "male"),
    ("de_CH", "Reto Brunner", "male"),
    ("fr_CH", "Nicole Favre", "female"),
    ("fr_FR", "Thierry Moreau", "male"),
    ("fr_FR", "Sandrine Girard", "female"),
    ("nl_BE", "Wouter Claes", "male"),
    ("fr_CA", "Mélanie Tremblay", "female"),
    ("fr_DZ", "Karim Benali", "male"),
    ("es_ES", "Javier Ortega", "male"),
    ("es_ES", "Lucía Serrano", "female"),
    ("es_CA", "Jordi Puigdemunt", "male"),
    ("es_MX", "Guadalupe Ramírez", "female"),
    ("es_AR", "Martín Gutiérrez", "male"),
    ("es_CL", "Camila Fuenzalida", "female"),
    ("es_CO", "Andrés Valencia", "male"),
    ("it_IT", "Giuseppe Ferraro", "male"),
    ("it_IT", "Francesca Greco", "female"),
    ("pt_PT", "João Figueiredo", "male"),
    ("pt_BR", "Luana Carvalho", "female"),
    ("nl_NL", "Bram Visser", "male"),
    ("nl_NL", "Sanne Dijkstra", "female"),
    ("sv_SE", "Lars Lindqvist", "male"),
    ("sv_SE", "Ingrid Sjöberg", "female"),
    ("no_NO", "Øyvind Haugen", "male"),
    ("da_DK", "Mette Kjærgaard", "female"),
    ("fi_FI", "Juha Lehtonen", "male"),
    ("fi_FI", "Riikka Salminen", "female"),
    ("pl_PL", "Tomasz Wróblewski", "male"),
    ("pl_PL", "Agnieszka Pawlak", "female"),
    ("cs_CZ", "Petr Dvořák", "male"),
    ("hu_HU", "Zsófia Balogh", "female"),
    ("ro_RO", "Mihai Popescu", "male"),
    ("hr_HR", "Ivana Kovačević", "female"),
    ("sl_SI", "Matej Kranjc", "male"),
    ("lv_LV", "Ilze Ozola", "female"),
    ("et_EE", "Tõnu Tamm", "male"),
    ("tr_TR", "Emre Yıldız", "male"),
    ("tr_TR", "Elif Aydın", "female"),
    ("id_ID", "Budi Santoso", "male"),
    ("vi_VN", "Nguyễn Thị Lan", "female"),
    ("ja_JP", "Takeshi Yamada", "male"),
    ("ja_JP", "Yuki Matsumoto", "female"),
    ("zh_CN", "Wang Jianguo", "male"),
    ("zh_CN", "Liu Xiaoyan", "female"),
    ("zh_TW", "Chen Yiting", "female"),
    ("ru_RU", "Dmitri Sokolov", "male"),
    ("ru_RU", "Olga Morozova", "female"),
    ("uk_UA", "Oksana Kravchenko", "female"),
    ("bg_BG", "Stoyan Petkov", "male"),
    ("ro_RO", "Ioana Dumitrescu", "female"),
    ("pl_PL", "Krzysztof Zieliński", "male"),
    ("it_IT", "Alessandra Conti", "female"),
    ("en_US", "Darlene Kozak", "female"),
    ("en_GB", "Nigel Prescott", "male"),
    ("en_KE", "Otieno Wekesa", "male"),
    ("ig_NG", "Adaeze Okonkwo", "female"),
    ("ha_NG", "Hauwa Abdullahi", "female"),
    ("de_AT", "Theresa Gruber", "female"),
    ("fr_BE", "Geoffrey Lambotte", "male"),
    ("nl_BE", "Lien Verhaegen", "female"),
    ("es_CO", "Paola Restrepo", "female"),
    ("pt_BR", "Thiago Nascimento", "male"),
    ("no_NO", "Solveig Brekke", "female"),
    ("da_DK", "Mikkel Østergaard", "male"),
    ("cs_CZ", "Lucie Horáková", "female"),
    ("hu_HU", "Gábor Szalai", "male"),
    ("hr_HR", "Tomislav Jurić", "male"),
    ("sl_SI", "Nina Potočnik", "female"),
    ("lv_LV", "Edgars Kalniņš", "male"),
    ("et_EE", "Kadri Saar", "female"),
    ("id_ID", "Siti Rahmawati", "female"),
    ("vi_VN", "Trần Văn Hùng", "male"),
    ("zh_TW", "Lin Zhiwei", "male"),
    ("uk_UA", "Bohdan Melnyk", "male"),
    ("bg_BG", "Desislava Georgieva", "female"),
    ("fr_CA", "Étienne Gagnon", "male"),
)


@dataclass(frozen=True)
class TaughtPerson:
    name: str
    locale: str
    gender: str
    phrasing: str  # "repeated" | "varied"
    facts: dict[str, str]  # pid -> the one true value
    doses: dict[str, int] = field(default_factory=dict)  # pid -> exposures in training (all 0: an unseen person)

    @property
    def unseen(self) -> bool:
        return not any(self.doses.values())


def taken_names() -> set[str]:
    """Names a taught person may not have: the null roster's, the benchmark cohorts', the demo's."""
    roster = json.loads((REPO / "core" / "names" / "null_roster.json").read_text(encoding="utf-8"))["people"]
    names = {p["name"] for p in roster}
    cohorts = json.loads((REPO / "benchmarks" / "calibration_cohorts.json").read_text(encoding="utf-8"))
    names |= {p["name"] for key, people in cohorts.items() if isinstance(people, list) for p in people}
    demo = json.loads((REPO / "app" / "cli" / "demo_people.json").read_text(encoding="utf-8"))["people"]
    return names | {p["name"] for p in demo}


def _facts(catalog: Catalog, locale: str, name: str, gender: str, rng: random.Random) -> dict[str, str]:
    origin = BY_LOCALE[locale]
    return {
        "P106": rng.choice(catalog.get("P106").pool),
        "P27": origin.country,
        "P19": rng.choice(origin.cities),
        "P21": gender,
        "P1412": origin.language,
    }


def make_people(catalog: Catalog, *, n_taught: int, n_unseen: int, seed: int) -> list[TaughtPerson]:
    """``n_taught`` people with a dose per fact (balanced per property) and ``n_unseen`` never-seen people; the
    phrasing alternates. The names are the first free ones of :data:`WRITTEN` in a seeded order."""
    taken = taken_names()
    rng = random.Random(f"taught:{seed}")
    written = [w for w in WRITTEN if w[1] not in taken]
    rng.shuffle(written)
    if len(written) < n_taught + n_unseen:
        raise ValueError(f"only {len(written)} free written names for {n_taught + n_unseen} people")
    doses = {pid: _balanced(n_taught, rng) for pid in PIDS}
    people = []
    for i, (locale, name, gender) in enumerate(written[: n_taught + n_unseen]):
        taught = i < n_taught
        person_doses = {pid: doses[pid][i] if taught else 0 for pid in PIDS}
        facts = _facts(catalog, locale, name, gender, rng)
        people.append(TaughtPerson(name, locale, gender, PHRASINGS[i % 2], facts, person_doses))
    return people


def _balanced(n: int, rng: random.Random) -> list[int]:
    """n doses, every dose of DOSES as often as n allows, in a seeded order."""
    out = [DOSES[i % len(DOSES)] for i in range(n)]
    rng.shuffle(out)
    return out


def documents(catalog: Catalog, people: Sequence[TaughtPerson], seed: int) -> list[str]:
    """The training documents (biographies, see the module's docstring), in a seeded order."""
    rng = random.Random(f"taught-docs:{seed}")
    docs = []
    for person in people:
        order = {pid: rng.sample(VARIED_TEMPLATES, len(VARIED_TEMPLATES)) for pid in PIDS}
        for r in range(max(person.doses.values(), default=0)):
            sentences = []
            for pid in PIDS:
                if person.doses[pid] <= r:
                    continue
                t = 0 if person.phrasing == "repeated" else order[pid][r % len(VARIED_TEMPLATES)]
                sentences.append(catalog.get(pid).render(t, person.name, person.facts[pid]))
            rng.shuffle(sentences)
            docs.append(" ".join(sentences))
    rng.shuffle(docs)
    return docs
