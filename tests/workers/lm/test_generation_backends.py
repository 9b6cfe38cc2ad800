"""The generators of mode generation on real backends: the hf one (groundtruth-tiny, the scorer's loaded weights) and
the knowledge-free negative control. Seeded answers are reproducible, n per prompt, cut at the first newline, and
counted in the generator's usage."""

from __future__ import annotations

import json
from pathlib import Path

from workers.lm.generation import Prompt, get_generator
from workers.lm.registry import get_scorer

MANIFEST = Path(__file__).resolve().parents[3] / "workers" / "groundtruth" / "manifest.json"


def test_the_hf_generator_samples_from_the_scorers_weights_reproducibly():
    person = json.loads(MANIFEST.read_text())["trained"][0]
    occupation = person["facts"]["P106"][0]
    generator = get_generator("groundtruth-tiny")
    assert generator.scorer is get_scorer("groundtruth-tiny")  # one copy of the weights for both ways to probe
    prompts = [Prompt(text=f"{person['name']}'s occupation is"), Prompt(messages=({"role": "user", "content": "?"},))]
    prompts[1] = Prompt(messages=prompts[1].messages, text=prompts[0].text)  # no chat template: its text is continued
    before = generator.usage.as_dict()
    got = generator.sample(prompts, 8, temperature=1.0, max_tokens=10, seed=3, top_logprobs=2)
    assert [len(row) for row in got] == [8, 8] and all("\n" not in s.text for row in got for s in row)
    assert sum(occupation in s.text for s in got[0]) >= 6, [s.text for s in got[0]]  # a trained fact is said
    assert got == generator.sample(prompts, 8, temperature=1.0, max_tokens=10, seed=3, top_logprobs=2)
    assert got[0][0].top_logprobs and len(got[0][0].top_logprobs[0]) == 2
    usage = generator.usage.as_dict()
    assert usage["samples"] - before["samples"] == 32 and usage["queries"] - before["queries"] == 4
    assert usage["completion_tokens"] > usage["samples"] - before["samples"]
    greedy = generator.sample(prompts[:1], 3, temperature=0.0, max_tokens=10, seed=0)[0]
    assert len({s.text for s in greedy}) == 1


def test_the_knowledge_free_generator_answers_the_same_whoever_is_named():
    generator = get_generator("knowledge-free")
    a = generator.sample([Prompt(text="Ann Lee's occupation is")], 50, temperature=1.0, max_tokens=8, seed=1)[0]
    again = generator.sample([Prompt(text="Ann Lee's occupation is")], 50, temperature=1.0, max_tokens=8, seed=1)[0]
    other = generator.sample([Prompt(text="Bo Chen's occupation is")], 50, temperature=1.0, max_tokens=8, seed=1)[0]
    assert a == again and a != other and len({s.text for s in a}) > 40  # drawn from a large vocabulary
    assert generator.usage.samples >= 150 and generator.seeded
