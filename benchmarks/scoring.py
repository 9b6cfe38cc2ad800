"""Scoring benchmark: the engine against the two usual ways of scoring sentences, side by side in one run.

    python benchmarks/scoring.py            # full: 4 subject audits x 2 templates (~10 min; more on a busy CPU)
    python benchmarks/scoring.py --quick    # 1 subject audit, 1 template (~3 min)
    python benchmarks/scoring.py --threads 2 --bf16   # both cores (an idle machine only); bf16 speed and error

Workload (WikiMem-shaped, generated here): templates "{subject}'s occupation is {value}." and "{subject} was born in
{value}.", each with subject variants (the real name, two letter-scrambled look-alikes, the generic "This person")
and 101 candidate values; one subject audit = 808 sentences, 202 of them generic (the same in every audit).
Methods:
  (a) one sentence per forward pass, full log-softmax (as minicons is commonly used); timed on a random sample;
  (b) lm-evaluation-harness style: all sentences sorted by length, right-padded batches, log-softmax over the full
      vocabulary at every position, no prefix reuse;
  (c) the engine (workers.lm), cold cache, and warm cache: the NLLs of the generic-subject sentences and of repeated
      sentences already known, as the service's NLL table (keyed by model fingerprint and exact text) provides.
      Here the cache is an in-memory dict keyed the same way.
Prints sentences/s, ratios, peak RSS per method, max |NLL(c) - NLL(a)|, a scaling table over 1/4/16 subjects,
and optionally (--bf16) the speed and NLL error of running the engine in bf16 on the CPU.
Methods run as short trials interleaved in rounds; each method's best round is kept. One torch thread by default:
on a CPU shared with other work, two threads made single timings swing by 10x (threads descheduled mid-matmul).
"""

from __future__ import annotations

import argparse
import copy
import random
import resource
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from workers.lm import load_scorer
from workers.lm.engine import Engine
from workers.lm.hf import HFScorer

SUBJECTS = [
    "Barack Obama", "Marie Curie", "Albert Einstein", "Angela Merkel", "Nelson Mandela", "Frida Kahlo",
    "Ada Lovelace", "Pablo Picasso", "Serena Williams", "Wolfgang Amadeus Mozart", "Greta Thunberg",
    "Haruki Murakami", "Simone de Beauvoir", "Kofi Annan", "Lionel Messi", "Malala Yousafzai",
]  # fmt: skip
GENERIC_SUBJECT = "This person"
OCCUPATIONS = """lawyer|politician|teacher|nurse|farmer|engineer|software engineer|actor|actress|singer|painter|writer
|novelist|poet|journalist|physician|surgeon|dentist|pharmacist|chemist|physicist|mathematician|biologist|economist
|historian|philosopher|sociologist|psychologist|architect|civil engineer|accountant|banker|entrepreneur|businessperson
|chef|baker|butcher|carpenter|electrician|plumber|mechanic|pilot|flight attendant|sailor|soldier|police officer
|firefighter|judge|diplomat|civil servant|librarian|translator|interpreter|photographer|film director|film producer
|screenwriter|composer|conductor|pianist|violinist|guitarist|drummer|dancer|choreographer|sculptor|fashion designer
|model|footballer|tennis player|basketball player|swimmer|cyclist|boxer|chess player|racing driver|astronaut
|astronomer|geologist|veterinarian|zoologist|botanist|priest|monk|rabbi|imam|missionary|trade unionist|activist
|comedian|television presenter|radio host|blogger|game designer|programmer|statistician|linguist|archaeologist
|anthropologist|curator|publisher""".replace("\n", "").split("|")
CITIES = """Honolulu|Warsaw|Ulm|Hamburg|Mvezo|Coyoacán|London|Málaga|Saginaw|Salzburg|Stockholm|Kyoto|Paris|Kumasi
|Rosario|Mingora|Berlin|Madrid|Rome|Vienna|Prague|Budapest|Lisbon|Dublin|Oslo|Helsinki|Copenhagen|Amsterdam|Brussels
|Zurich|Geneva|Munich|Milan|Naples|Barcelona|Seville|Porto|Athens|Istanbul|Cairo|Lagos|Nairobi|Accra|Dakar
|Casablanca|Tunis|Johannesburg|Cape Town|Addis Ababa|Kinshasa|Mumbai|Delhi|Kolkata|Chennai|Karachi|Lahore|Dhaka
|Kathmandu|Colombo|Bangkok|Hanoi|Manila|Jakarta|Singapore|Kuala Lumpur|Seoul|Busan|Tokyo|Osaka|Beijing|Shanghai
|Hong Kong|Taipei|Sydney|Melbourne|Auckland|Toronto|Montreal|Vancouver|New York City|Chicago|Los Angeles|Boston
|San Francisco|Houston|Mexico City|Havana|Bogotá|Lima|Santiago|Buenos Aires|Montevideo|São Paulo|Rio de Janeiro
|Caracas|Quito|Reykjavik|Tbilisi|Yerevan|Ouagadougou|Ulaanbaatar""".replace("\n", "").split("|")
TEMPLATES = [("{subject}'s occupation is", " {value}.", OCCUPATIONS), ("{subject} was born in", " {value}.", CITIES)]


def scrambled(name: str, seed: int) -> str:
    """A look-alike name: the letters of each word shuffled (same letters, same lengths), as WikiMem's variants."""
    rng = random.Random(f"{name}|{seed}")
    words = []
    for word in name.split():
        letters = list(word.lower())
        for _ in range(10):
            rng.shuffle(letters)
            if "".join(letters) != word.lower() or len(set(letters)) < 2:
                break
        words.append("".join(letters).capitalize())
    return " ".join(words)


Audit = list[tuple[str, str]]


def workload(n_subjects: int, n_templates: int) -> tuple[list[Audit], set[str]]:
    """One subject audit per subject (its (prefix, continuation) pairs: real name, two look-alikes and the generic
    subject, x 101 values, per template), and the set of generic-subject sentences (the same in every audit)."""
    audits: list[Audit] = []
    generic: set[str] = set()
    for name in SUBJECTS[:n_subjects]:
        audit: Audit = []
        for prefix_t, tail_t, values in TEMPLATES[:n_templates]:
            assert len(values) == 101, f"{len(values)} values"
            for subject in (name, scrambled(name, 1), scrambled(name, 2), GENERIC_SUBJECT):
                audit += [(prefix_t.format(subject=subject), tail_t.format(value=value)) for value in values]
                if subject == GENERIC_SUBJECT:
                    generic.update(p + c for p, c in audit[-len(values) :])
        audits.append(audit)
    return audits, generic


# -- baselines ---------------------------------------------------------------------------------------------------
@torch.inference_mode()
def one_per_pass(model: torch.nn.Module, seqs: Sequence[Sequence[int]]) -> list[float]:
    """(a) one sentence per forward pass, log-softmax over the vocabulary at every position."""
    result = []
    for seq in seqs:
        ids = torch.tensor([seq])
        logp = torch.log_softmax(model(ids).logits.float(), dim=-1)
        result.append(float(-logp[0, :-1].gather(1, ids[0, 1:, None]).sum()))
    return result


@torch.inference_mode()
def harness_style(model: torch.nn.Module, seqs: Sequence[Sequence[int]], batch_size: int) -> list[float]:
    """(b) lm-evaluation-harness loglikelihood: sorted by length (longest first), right-padded batches, full
    log-softmax at every position, no prefix reuse."""
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
    result = [0.0] * len(seqs)
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        width = max(len(seqs[i]) for i in batch)
        ids = torch.zeros((len(batch), width), dtype=torch.long)
        for row, i in enumerate(batch):
            ids[row, : len(seqs[i])] = torch.tensor(seqs[i])
        logp = torch.log_softmax(model(ids).logits.float(), dim=-1)  # padding at the end cannot leak backwards
        picked = logp[:, :-1].gather(2, ids[:, 1:, None]).squeeze(2)
        for row, i in enumerate(batch):
            result[i] = float(-picked[row, : len(seqs[i]) - 1].sum())
    return result


class InMemoryNllCache:
    """Emulates the service's NLL table: (fingerprint, exact sentence) -> NLL; only misses reach the model."""

    def __init__(self, scorer: HFScorer) -> None:
        self.scorer = scorer
        self.store: dict[tuple[str, str], float] = {}

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        keys = [(self.scorer.fingerprint, p + c) for p, c in pairs]
        missing: dict[tuple[str, str], tuple[str, str]] = {}
        for key, pair in zip(keys, pairs, strict=True):
            if key not in self.store and key not in missing:
                missing[key] = pair
        if missing:
            self.store.update(zip(missing, self.scorer.score(list(missing.values())), strict=True))
        return [self.store[key] for key in keys]


# -- measurement -------------------------------------------------------------------------------------------------
def rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize() / 2**20


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """fn's result, its wall time, and the peak RSS (MB) sampled every 20 ms on a thread while it ran."""
    peak, done = [rss_mb()], threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            peak.append(rss_mb())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    return result, seconds, max(peak)


def set_mode(scorer: HFScorer, mode: str) -> None:
    scorer.engine = Engine(scorer.model, scorer.device, scorer.batch_tokens, mode)  # type: ignore[arg-type]


Trial = Callable[[int], tuple[list[int], list[float]]]  # round -> (sentence indexes scored, their NLLs)


def methods(scorer: HFScorer, args: argparse.Namespace, audits: list[Audit], generic: set[str]) -> dict[str, Trial]:
    """Short trials, one per method per round. Baselines score fixed random samples (every sentence costs them the
    same, so a sample gives their rate); the engine scores one whole subject audit per round, as the subject job
    does, cycling through the audits."""
    pairs = [pair for audit in audits for pair in audit]
    seqs = scorer.sentence_ids([p + c for p, c in pairs])
    rng = random.Random(0)
    sample_a = sorted(rng.sample(range(len(pairs)), min(args.sample_a, len(pairs))))
    sample_b = sorted(rng.sample(range(len(pairs)), min(args.sample_b, len(pairs))))
    starts = [sum(len(a) for a in audits[:i]) for i in range(len(audits))]

    def audit_of(round_: int) -> tuple[list[int], Audit]:
        i = round_ % len(audits)
        return list(range(starts[i], starts[i] + len(audits[i]))), audits[i]

    def engine(mode: str) -> Trial:
        def run(round_: int) -> tuple[list[int], list[float]]:
            set_mode(scorer, mode)
            indexes, audit = audit_of(round_)
            return indexes, scorer.score(audit)

        return run

    def warm(round_: int) -> tuple[list[int], list[float]]:
        set_mode(scorer, args.modes[0])
        cache = InMemoryNllCache(scorer)
        cache.store.update(prefilled_generic)  # a previous audit scored the generic-subject sentences
        indexes, audit = audit_of(round_)
        return indexes, cache.score(audit)

    set_mode(scorer, args.modes[0])
    generic_pairs = sorted({(p, c) for p, c in pairs if p + c in generic})
    generic_keys = [(scorer.fingerprint, p + c) for p, c in generic_pairs]
    prefilled_generic = dict(zip(generic_keys, scorer.score(generic_pairs), strict=True))
    table: dict[str, Trial] = {
        f"(a) one per pass [{len(sample_a)} sampled]": lambda _: (
            sample_a,
            one_per_pass(scorer.model, [seqs[i] for i in sample_a]),
        ),
        f"(b) harness, batch {args.harness_batch} [{len(sample_b)} sampled]": lambda _: (
            sample_b,
            harness_style(scorer.model, [seqs[i] for i in sample_b], args.harness_batch),
        ),
    }
    for mode in args.modes:
        table[f"(c) engine [{mode}], cold cache"] = engine(mode)
    table[f"(c) engine [{args.modes[0]}], warm cache"] = warm
    return table


@dataclass
class Tally:
    """Best rate over the rounds (noise on a shared CPU only ever slows a trial down), peak RSS, NLLs by index."""

    best_rate: float = 0.0
    best_seconds: float = 0.0
    best_sentences: int = 0
    peak_rss_mb: float = 0.0
    nll: dict[int, float] = field(default_factory=dict)
    rates: list[float] = field(default_factory=list)

    @property
    def median_rate(self) -> float:
        return statistics.median(self.rates)

    def add(self, indexes: list[int], values: list[float], seconds: float, peak: float) -> None:
        if len(indexes) / seconds > self.best_rate:
            self.best_rate, self.best_seconds, self.best_sentences = len(indexes) / seconds, seconds, len(indexes)
        self.peak_rss_mb = max(self.peak_rss_mb, peak)
        self.rates.append(len(indexes) / seconds)
        self.nll.update(zip(indexes, values, strict=True))


def compare(scorer: HFScorer, args: argparse.Namespace) -> None:
    n_subjects, n_templates = (1, 1) if args.quick else (4, 2)
    audits, generic = workload(n_subjects, n_templates)
    n_pairs = sum(len(audit) for audit in audits)
    n_tokens = sum(len(s) for audit in audits for s in scorer.sentence_ids([p + c for p, c in audit]))
    print(
        f"workload: {n_subjects} subject audit(s) x {n_templates} template(s) x 4 variants x 101 values = {n_pairs} "
        f"sentences ({len(generic)} generic-subject ones in every audit), {n_tokens / n_pairs:.1f} tokens on average"
    )
    table = methods(scorer, args, audits, generic)
    tallies = {name: Tally() for name in table}
    for round_ in range(args.rounds):  # short interleaved trials: every method sees the same quiet moments
        line = []
        for name, trial in table.items():
            (indexes, values), seconds, peak = timed(lambda trial=trial, r=round_: trial(r))
            tallies[name].add(indexes, values, seconds, peak)
            line.append(f"{len(indexes) / seconds:.1f}")
        print(f"round {round_ + 1}/{args.rounds} sentences/s: {' | '.join(line)}", flush=True)
    report(tallies)
    if args.bf16:
        name = f"(c) engine [{args.modes[0]}], cold cache"
        bf16_error(scorer, audits[0], [tallies[name].nll[i] for i in range(len(audits[0]))], tallies[name].best_rate)


def report(tallies: dict[str, Tally]) -> None:
    names = list(tallies)
    a, b = tallies[names[0]], tallies[names[1]]
    print(
        f"\n{'method (best round)':46} {'sent.':>6} {'seconds':>8} {'sent./s':>8} {'vs (a)':>7} {'vs (b)':>7} "
        f"{'RSS':>8}  median-round: vs (a), vs (b)"
    )
    for name, t in tallies.items():
        print(
            f"{name:46} {t.best_sentences:6d} {t.best_seconds:8.1f} {t.best_rate:8.1f} "
            f"{t.best_rate / a.best_rate:6.1f}x {t.best_rate / b.best_rate:6.1f}x {t.peak_rss_mb:6.0f}MB  "
            f"{t.median_rate / a.median_rate:.1f}x {t.median_rate / b.median_rate:.1f}x"
        )
    for name in names[2:]:
        nll = tallies[name].nll
        for base_name, base in ((names[0], a), (names[1], b)):
            shared = [i for i in base.nll if i in nll]
            if shared:
                diff = max(abs(nll[i] - base.nll[i]) for i in shared)
                print(f"max |NLL {name} - {base_name[:3]}| = {diff:.2e} nats over {len(shared)} sentences")


def bf16_error(scorer: HFScorer, audit: Audit, fp32_nll: list[float], fp32_rate: float) -> None:
    """The documented CPU option: the engine in bf16 (fp32 normaliser). NOT exact: report its NLL error."""
    fp32_engine = scorer.engine
    model = copy.deepcopy(scorer.model).to(torch.bfloat16)
    scorer.engine = Engine(model, scorer.device, scorer.batch_tokens)
    scorer.score(list(audit[:8]))
    values, seconds, _ = timed(lambda: scorer.score(audit))
    scorer.engine = fp32_engine
    errors = sorted(abs(x - y) for x, y in zip(values, fp32_nll, strict=True))
    median, p95 = errors[len(errors) // 2], errors[int(len(errors) * 0.95)]
    print(
        f"\nbf16 engine: {len(audit) / seconds:.1f} sent./s = {len(audit) / seconds / fp32_rate:.2f}x the fp32 engine; "
        f"|NLL error| median {median:.3f}, p95 {p95:.3f}, max {errors[-1]:.3f} nats ({len(audit)} sentences)"
    )


def scaling(scorer: HFScorer, args: argparse.Namespace) -> None:
    """Subject audits one after another through one NLL cache, as the service runs them: the first audit pays for
    the generic-subject sentences, the others reuse them."""
    n_templates = 1 if args.quick else 2
    set_mode(scorer, args.modes[0])
    print(f"\nscaling: n subject audits in a row through one NLL cache ({n_templates} template(s)), engine")
    print(f"{'subjects':>8} {'sentences':>10} {'scored':>7} {'seconds':>8} {'sent./s':>8} {'s/subject':>10}")
    for n in (1, 2, 4) if args.quick else (1, 4, 16):
        audits, _ = workload(n, n_templates)
        cache = InMemoryNllCache(scorer)
        start = time.perf_counter()
        for audit in audits:
            cache.score(audit)
        seconds = time.perf_counter() - start
        total = sum(len(audit) for audit in audits)
        print(
            f"{n:8d} {total:10d} {len(cache.store):7d} {seconds:8.1f} {total / seconds:8.1f} {seconds / n:10.1f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1 subject, 1 template: a few minutes")
    parser.add_argument("--model", default="smollm2-135m", help="registry name or hf:<path>")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    parser.add_argument("--sample-a", type=int, default=24, help="sentences per trial of method (a)")
    parser.add_argument("--sample-b", type=int, default=128, help="sentences per trial of method (b)")
    parser.add_argument(
        "--rounds", type=int, help="interleaved rounds, best of each reported (default 4 quick, 8 full)"
    )
    parser.add_argument("--harness-batch", type=int, default=32, help="batch size of method (b)")
    parser.add_argument("--modes", nargs="+", default=["packed", "expand"], choices=["expand", "packed"])
    parser.add_argument("--bf16", action="store_true", help="also measure the bf16 engine's speed and NLL error")
    parser.add_argument("--no-scaling", action="store_true")
    args = parser.parse_args()
    args.rounds = args.rounds or (4 if args.quick else 8)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    scorer = load_scorer(args.model)
    assert isinstance(scorer, HFScorer), "the benchmark compares transformers-based methods"
    print(
        f"model {args.model} loaded in {time.perf_counter() - start:.0f} s; torch threads {torch.get_num_threads()}; "
        f"engine batch budget {scorer.batch_tokens} tokens, {scorer.engine.max_rows if scorer.engine else 0} rows"
    )
    compare(scorer, args)
    if not args.no_scaling:
        scaling(scorer, args)
    print(f"\nprocess peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
