"""A subject audit's defaults, stated once. The API's options (``SubjectAuditOptions``), the command line's help and
defaults, the dashboard's hints and the forget set's descriptions read them from here; tests/test_defaults.py checks
that they do, and that README.md and docs/ state the same numbers (measured choices: docs/measures.md, "Choosing the
defaults")."""

from __future__ import annotations

PARAPHRASES = 2  # paraphrased templates besides the baseline
TEMPLATES = PARAPHRASES + 1  # templates probed per property: the baseline and its paraphrases
COUNTERFACTUALS = 20  # counterfactual values ranked against each true value
CANDIDATES = COUNTERFACTUALS + 1  # the candidates of a fact with one true value
ALPHA = 1.0  # weight of the look-alike calibration term
SIMILAR_NAMES = 2  # look-alike names in S(h)
LOOKALIKES = "same_origin"
MAX_P = 0.01  # the default verdict: memorized when p <= this against the null

# Mean z* of a truth that ranks first by chance among CANDIDATES independent normal scores (docs/measures.md, "z* at
# chance is about 3, not 0", for 101 candidates): tests/test_defaults.py draws it again with core.measures.wikimem.
CHANCE_Z_STAR = 2.3

CHANCE_Z_PHRASE = f"a chance rank 1 among {CANDIDATES} candidates (the default) already gives z* ≈ {CHANCE_Z_STAR}"

# Generation mode (options.mode "generation": ask the model, read its answers; docs/measures.md, "Generation mode")
MODE = "scoring"  # scoring: log-probabilities of whole sentences; generation: sampled answers
GENERATION_SAMPLES = 10  # K: answers sampled per prompt (each template's prefix, or the property's question)
# templates asked (the baseline first): 3 let the held-out false-positive rate on groundtruth-tiny reach 9/200 at
# p <= 0.01 (the baseline alone: 3/200; docs/lab/2026-11-28-generation-mode.md)
GENERATION_TEMPLATES = 1
GENERATION_TEMPERATURE = 1.0  # the model's own distribution
GENERATION_MAX_TOKENS = 16  # per answer; an answer ends at its first newline
GENERATION_FORM = "completion"  # completion: the templates' text before the value; chat: the property's question
