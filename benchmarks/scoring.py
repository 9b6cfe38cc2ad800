"""Scoring benchmark: memaudit's engine against the real peers, side by side in one process.

    pip install -e '.[bench]'               # the peers: lm-evaluation-harness 0.4.13 and minicons 0.3.39
    python -m benchmarks.scoring            # 4 subject audits x 2 templates, 8 interleaved rounds (~25 min)
    python -m benchmarks.scoring --quick    # 1 subject audit x 1 template, 4 rounds (~5 min)
    python -m benchmarks.scoring --modes packed expand --pack-tokens 256 512 128   # engine variants too (cold)

Workload (WikiMem-shaped, generated here): templates "{subject}'s occupation is {value}." and "{subject} was born in
{value}.", each with subject variants (the real name, two letter-scrambled look-alikes, the generic "This person")
and 101 candidate values; one subject audit = 808 sentences, 202 of them generic (the same in every audit).
Methods -- one trial = one whole subject audit, the same sentences for every method (round r: audit r mod n):
  one per pass       one sentence per forward pass, full log-softmax; timed on a fixed random sample of the audit;
  lm-eval            lm-evaluation-harness HFLM.loglikelihood, ("", sentence) requests, prefix_token_id = the
                     engine's document start, batch --peer-batch (its own length sorting, full-vocabulary softmax);
  lm-eval+CachingLM  the same behind lm-eval's CachingLM, its SQLite file pre-filled with the generic sentences;
  minicons           IncrementalLMScorer.sequence_score (summed), document start's text + sentence, --peer-batch;
  engine cold        memaudit's engine (workers.lm), one score() call per audit as the subject job makes it;
  engine warm        the same behind an NLL cache pre-filled with the generic sentences (an in-memory dict keyed
                     like the service's NLL table: model fingerprint, exact sentence).
Every method returns -sum log p(token) over all tokens of the sentence given the document-start token; each peer
checks that it feeds the model the engine's token ids. Methods take turns within a round, so they share the
machine's load; per-round ratios are printed, then their median and range, in wall time and in the process's CPU
time (one torch thread: the method's own work, which other jobs on the machine stretch less than the wall time).
NLL agreement: max |NLL - NLL(engine cold)| over every sentence both scored. Counted work per sentence (token
positions, LM-head rows, GFLOP, attention, masked-out attention) from one more, untimed trial per method. One torch
thread by default: on a CPU shared with other work two threads made single timings swing by 10x (a thread
descheduled mid-matmul stalls the other).
"""

from __future__ import annotations

import os

os.environ.setdefault("TQDM_DISABLE", "1")  # before tqdm is imported: lm-eval's CachingLM shows a bar per call

import argparse
import copy
import logging
import random
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from benchmarks.scoring_methods import (
    CachedLmEval,
    LmEval,
    Minicons,
    NllCache,
    Tally,
    counting,
    engine_variants,
    one_per_pass,
    timed,
)
from workers.lm.engine import Engine
from workers.lm.hf import CPU_PACK_TOKENS, HFScorer

SUBJECTS = [
    "Barack Obama",
    "Marie Curie",
    "Albert Einstein",
    "Angela Merkel",
    "Nelson Mandela",
    "Frida Kahlo",
    "Ada Lovelace",
    "Pablo Picasso",
    "Serena Williams",
    "Wolfgang Amadeus Mozart",
    "Greta Thunberg",
    "Haruki Murakami",
    "Simone de Beauvoir",
    "Kofi Annan",
    "Lionel Messi",
    "Malala Yousafzai",
]
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


def workload(n_subjects: int, n_templates: int, n_values: int = 101) -> tuple[list[Audit], set[str]]:
    """One subject audit per subject (its (prefix, continuation) pairs: real name, two look-alikes and the generic
    subject, x 101 values (or the first n_values), per template), and the set of generic-subject sentences."""
    audits: list[Audit] = []
    generic: set[str] = set()
    for name in SUBJECTS[:n_subjects]:
        audit: Audit = []
        for prefix_t, tail_t, all_values in TEMPLATES[:n_templates]:
            assert len(all_values) == 101, f"{len(all_values)} values"
            values = all_values[:n_values]
            for subject in (name, scrambled(name, 1), scrambled(name, 2), GENERIC_SUBJECT):
                audit += [(prefix_t.format(subject=subject), tail_t.format(value=value)) for value in values]
                if subject == GENERIC_SUBJECT:
                    generic.update(p + c for p, c in audit[-len(values) :])
        audits.append(audit)
    return audits, generic


# -- methods -----------------------------------------------------------------------------------------------------
Run = Callable[[int], tuple[list[int], list[float]]]  # round -> (sentence indexes scored, their NLLs)


@dataclass
class Method:
    name: str
    run: Run
    prepare: Callable[[int], None] = lambda _: None  # untimed, before each trial


def build_methods(
    scorer: HFScorer, args: argparse.Namespace, audits: list[Audit], generic: set[str], tmp: Path
) -> list[Method]:
    pairs = [pair for audit in audits for pair in audit]
    texts = [p + c for p, c in pairs]
    seqs = scorer.sentence_ids(texts)
    starts = [sum(len(a) for a in audits[:i]) for i in range(len(audits))]
    spans = [list(range(start, start + len(audit))) for start, audit in zip(starts, audits, strict=True)]
    rng = random.Random(0)
    samples = [sorted(rng.sample(span, min(args.sample, len(span)))) for span in spans]

    def span(round_: int) -> list[int]:
        return spans[round_ % len(spans)]

    lm_eval, minicons = LmEval(scorer, args.peer_batch), Minicons(scorer, args.peer_batch)
    cached = CachedLmEval(scorer, args.peer_batch, tmp)
    cached.prefill(sorted(generic))
    engines = engine_variants(scorer, args.modes, args.pack_tokens)
    default = next(iter(engines.values()))
    scorer.engine = default
    generic_pairs = sorted({(p, c) for p, c in pairs if p + c in generic})
    prefilled = dict(
        zip([(scorer.fingerprint, p + c) for p, c in generic_pairs], scorer.score(generic_pairs), strict=True)
    )
    sqlite: dict[str, Path] = {}

    def texts_of(round_: int) -> list[str]:
        return [texts[i] for i in span(round_)]

    def sampled(round_: int) -> tuple[list[int], list[float]]:
        sample = samples[round_ % len(samples)]
        return sample, one_per_pass(scorer.model, [seqs[i] for i in sample])

    def engine_run(engine: Engine, warm: bool) -> Run:
        def run(round_: int) -> tuple[list[int], list[float]]:
            scorer.engine = engine
            audit = [pairs[i] for i in span(round_)]
            return span(round_), (NllCache(scorer, prefilled) if warm else scorer).score(audit)

        return run

    methods = [
        Method("one per pass", sampled),
        Method("lm-eval", lambda r: (span(r), lm_eval.score(texts_of(r)))),
        Method(
            "lm-eval+CachingLM",
            lambda r: (span(r), cached.score(sqlite["path"], texts_of(r))),
            prepare=lambda _: sqlite.update(path=cached.fresh()),
        ),
        Method("minicons", lambda r: (span(r), minicons.score(texts_of(r)))),
        Method("engine cold", engine_run(default, warm=False)),
        Method("engine warm", engine_run(default, warm=True)),
    ]
    methods += [Method(name, engine_run(engine, warm=False)) for name, engine in list(engines.items())[1:]]
    return methods


COLD_PEERS = ["one per pass", "lm-eval", "minicons"]


def comparisons(methods: list[Method]) -> list[tuple[str, str]]:
    """(faster, slower) pairs whose per-round ratio is reported."""
    result = [("engine cold", peer) for peer in COLD_PEERS]
    result += [("engine warm", peer) for peer in [*COLD_PEERS, "lm-eval+CachingLM"]]
    return result + [(m.name, "engine cold") for m in methods[6:]]


# -- measurement -------------------------------------------------------------------------------------------------
def run_rounds(methods: list[Method], rounds: int) -> dict[str, Tally]:
    tallies = {m.name: Tally() for m in methods}
    pairs = comparisons(methods)
    for round_ in range(rounds):
        for method in methods:
            method.prepare(round_)
            (indexes, values), seconds, cpu, peak = timed(lambda m=method, r=round_: m.run(r))
            tallies[method.name].add(indexes, values, seconds, cpu, peak)
        rates = " | ".join(f"{name} {t.rates[-1]:.1f} ({t.cpu_rates[-1]:.1f})" for name, t in tallies.items())
        ratios = ", ".join(
            f"{a} / {b} {tallies[a].rates[-1] / tallies[b].rates[-1]:.2f}x "
            f"({tallies[a].cpu_rates[-1] / tallies[b].cpu_rates[-1]:.2f}x)"
            for a, b in pairs
        )
        load = os.getloadavg()[0]
        print(
            f"round {round_ + 1}/{rounds}, load {load:.1f}, sentences/s wall (CPU): {rates}\n  ratios: {ratios}",
            flush=True,
        )
    return tallies


def report(methods: list[Method], tallies: dict[str, Tally]) -> dict[str, Any]:
    """Prints rates, per-round ratios and NLL agreement; returns them (medians, ratio medians, max |NLL diff|)."""
    print(
        f"\n{'sentences/s':24} {'per trial':>9} {'median':>7} {'min':>7} {'max':>7} {'CPU median':>10} {'peak RSS':>9}"
    )
    for name, t in tallies.items():
        print(
            f"{name:24} {t.sentences:9d} {statistics.median(t.rates):7.1f} {min(t.rates):7.1f} {max(t.rates):7.1f} "
            f"{statistics.median(t.cpu_rates):10.1f} {t.peak_rss_mb:7.0f}MB"
        )
    summary: dict[str, Any] = {"rates": {n: statistics.median(t.rates) for n, t in tallies.items()}}
    summary |= {"ratios": {}, "cpu_ratios": {}}
    print(f"\n{'ratio per round':40} {'median':>7} {'min':>7} {'max':>7} | CPU time: median, min, max")
    for a, b in comparisons(methods):
        wall = [x / y for x, y in zip(tallies[a].rates, tallies[b].rates, strict=True)]
        cpu = [x / y for x, y in zip(tallies[a].cpu_rates, tallies[b].cpu_rates, strict=True)]
        summary["ratios"][f"{a} / {b}"] = statistics.median(wall)
        summary["cpu_ratios"][f"{a} / {b}"] = statistics.median(cpu)
        print(
            f"{a + ' / ' + b:40} {statistics.median(wall):6.2f}x {min(wall):6.2f}x {max(wall):6.2f}x | "
            f"{statistics.median(cpu):.2f}x {min(cpu):.2f}x {max(cpu):.2f}x"
        )
    reference = tallies["engine cold"].nll
    summary["nll_max_diff"] = {}
    print("\nNLL agreement with the engine (cold), fp32:")
    for name, t in tallies.items():
        shared = [i for i in t.nll if i in reference]
        if name != "engine cold" and shared:
            diff = max(abs(t.nll[i] - reference[i]) for i in shared)
            summary["nll_max_diff"][name] = diff
            print(f"  max |NLL {name} - NLL engine| = {diff:.1e} nats over {len(shared)} sentences")
    return summary


def count_work(scorer: HFScorer, methods: list[Method]) -> dict[str, dict[str, float]]:
    """One more, untimed trial per method (round 0's audit) under torch's FLOP counter; per-sentence figures."""
    print(
        f"\ncounted work per sentence (one trial each):\n{'method':24} {'positions':>9} {'LM-head':>8} {'GFLOP':>7} "
        f"{'attention':>9} {'masked-out':>10}"
    )
    result = {}
    for method in methods:
        method.prepare(0)
        with counting(scorer.model) as work:
            indexes, _ = method.run(0)
        n, flops = len(indexes), max(1, work.flops)
        result[method.name] = {
            "positions": work.positions / n,
            "head_rows": work.head_rows / n,
            "gflop": work.flops / n / 1e9,
            "attention": work.attention / flops,
            "masked": work.masked / flops,
        }
        row = result[method.name]
        print(
            f"{method.name:24} {row['positions']:9.2f} {row['head_rows']:8.2f} {row['gflop']:7.3f} "
            f"{row['attention']:9.1%} {row['masked']:10.1%}",
            flush=True,
        )
    return result


def bf16_error(scorer: HFScorer, audit: Audit, fp32_nll: list[float], fp32_rate: float) -> None:
    """The documented CPU option: the engine in bf16 (fp32 normaliser). NOT exact: report its NLL error."""
    fp32_engine = scorer.engine
    model = copy.deepcopy(scorer.model).to(torch.bfloat16)
    scorer.engine = Engine(model, scorer.device, scorer.batch_tokens)
    scorer.score(list(audit[:8]))
    values, seconds, _, _ = timed(lambda: scorer.score(audit))
    scorer.engine = fp32_engine
    errors = sorted(abs(x - y) for x, y in zip(values, fp32_nll, strict=True))
    median, p95 = errors[len(errors) // 2], errors[int(len(errors) * 0.95)]
    print(
        f"\nbf16 engine: {len(audit) / seconds:.1f} sent./s = {len(audit) / seconds / fp32_rate:.2f}x the fp32 engine; "
        f"|NLL error| median {median:.3f}, p95 {p95:.3f}, max {errors[-1]:.3f} nats ({len(audit)} sentences)"
    )


def scaling(scorer: HFScorer, args: argparse.Namespace, engine: Engine) -> None:
    """Subject audits one after another through one NLL cache, as the service runs them: the first audit pays for
    the generic-subject sentences, the others reuse them."""
    scorer.engine = engine
    print(f"\nscaling: n subject audits in a row through one NLL cache ({args.templates} template(s)), engine")
    print(f"{'subjects':>8} {'sentences':>10} {'scored':>7} {'seconds':>8} {'sent./s':>8} {'s/subject':>10}")
    for n in (1, 2, 4) if args.quick else (1, 4, 16):
        audits, _ = workload(n, args.templates, args.values)
        cache = NllCache(scorer, {})
        start = time.perf_counter()
        for audit in audits:
            cache.score(audit)
        seconds = time.perf_counter() - start
        total = sum(len(audit) for audit in audits)
        print(
            f"{n:8d} {total:10d} {len(cache.store):7d} {seconds:8.1f} {total / seconds:8.1f} {seconds / n:10.1f}",
            flush=True,
        )


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1 subject, 1 template, 4 rounds")
    parser.add_argument("--model", default="smollm2-135m", help="registry name or hf:<path>")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    parser.add_argument("--subjects", type=int, help="subject audits (default 4, quick 1)")
    parser.add_argument("--templates", type=int, help="templates per audit, 1 or 2 (default 2, quick 1)")
    parser.add_argument("--values", type=int, default=101, help="candidate values per template (at most 101)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 8, quick 4)")
    parser.add_argument("--sample", type=int, default=32, help="sentences per one-per-pass trial")
    parser.add_argument("--peer-batch", type=int, default=32, help="batch size of lm-eval and minicons")
    parser.add_argument("--modes", nargs="+", default=["packed"], choices=["expand", "packed"])
    parser.add_argument(
        "--pack-tokens",
        nargs="+",
        type=int,
        default=[CPU_PACK_TOKENS],
        help=f"packed engine's pack sizes (default: the service's on a CPU, {CPU_PACK_TOKENS})",
    )
    parser.add_argument("--bf16", action="store_true", help="also measure the bf16 engine's speed and NLL error")
    parser.add_argument("--no-count", action="store_true", help="skip the counted-work trials")
    parser.add_argument("--no-scaling", action="store_true")
    args = parser.parse_args(argv)
    args.subjects = args.subjects or (1 if args.quick else 4)
    args.templates = args.templates or (1 if args.quick else 2)
    args.rounds = args.rounds or (4 if args.quick else 8)
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Runs the benchmark; returns the summary it printed (medians, ratios, NLL agreement, counted work)."""
    args = parse(argv)
    from workers.lm import load_scorer

    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    scorer = load_scorer(args.model)
    assert isinstance(scorer, HFScorer), "the benchmark compares transformers-based methods"
    print(
        f"model {args.model} loaded in {time.perf_counter() - start:.0f} s; torch threads {torch.get_num_threads()}; "
        f"engine batch budget {scorer.batch_tokens} tokens, {scorer.engine.max_rows if scorer.engine else 0} rows; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    audits, generic = workload(args.subjects, args.templates, args.values)
    n_pairs = sum(len(audit) for audit in audits)
    n_tokens = sum(len(s) for audit in audits for s in scorer.sentence_ids([p + c for p, c in audit]))
    print(
        f"workload: {args.subjects} subject audit(s) x {args.templates} template(s) x 4 variants x {args.values} "
        f"values = {n_pairs} sentences ({len(generic)} generic-subject ones in every audit), "
        f"{n_tokens / n_pairs:.1f} tokens on average with the document start"
    )
    with tempfile.TemporaryDirectory(prefix="memaudit-bench-") as tmp:
        methods = build_methods(scorer, args, audits, generic, Path(tmp))
        default_engine = scorer.engine
        tallies = run_rounds(methods, args.rounds)
        summary = report(methods, tallies)
        if not args.no_count:
            summary["work"] = count_work(scorer, methods)
    if args.bf16:
        cold = tallies["engine cold"]
        bf16_error(scorer, audits[0], [cold.nll[i] for i in range(len(audits[0]))], statistics.median(cold.rates))
    if not args.no_scaling:
        assert default_engine is not None
        scaling(scorer, args, default_engine)
    print(
        f"\nprocess peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    return summary


if __name__ == "__main__":
    main()
