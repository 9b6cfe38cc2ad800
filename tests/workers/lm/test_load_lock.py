"""Two threads of a fresh process loading models at once — an embedded runner's job embedding values while another
thread loads groundtruth-tiny — both succeed (workers.lm.base.LOAD_LOCK). Without the lock transformers' lazy
imports raced: every try failed one of them ("backend 'hf' needs transformers, not installed", or "cannot import
name 'GenericForQuestionAnswering' from transformers.modeling_layers")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
RACE = """
import threading
from workers.embeddings import embed_values
from workers.lm.registry import get_scorer

barrier, errors = threading.Barrier(2), []

def run(load):
    barrier.wait()
    try:
        load()
    except Exception as exc:
        errors.append(repr(exc))

loads = (lambda: embed_values(["physicist", "chemist"]), lambda: get_scorer("groundtruth-tiny"))
threads = [threading.Thread(target=run, args=(load,)) for load in loads]
[t.start() for t in threads]
[t.join() for t in threads]
print(errors)
"""


def test_a_fresh_process_loads_an_embedding_model_and_a_scorer_at_once():
    run = subprocess.run([sys.executable, "-c", RACE], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == "[]", run.stdout[-3000:]
