"""The scoring benchmark script runs end to end against the real peers (tiny configuration on groundtruth-tiny,
seconds): it must not rot between the long runs whose numbers docs/benchmarks.md quotes. No timing is asserted; what is
asserted holds whatever the machine's load: every method ran and was compared, every peer's NLLs equal the
engine's, and the engine computes less than the peers."""

import pytest

pytest.importorskip("lm_eval", reason="the scoring benchmark's peers are the bench extra: pip install -e '.[bench]'")
pytest.importorskip("minicons", reason="the scoring benchmark's peers are the bench extra: pip install -e '.[bench]'")

PEERS = ["one per pass", "lm-eval", "lm-eval+CachingLM", "minicons"]


@pytest.mark.slow
def test_scoring_benchmark_runs_every_method_against_the_real_peers(capsys, monkeypatch):
    # Imported here, not at collection: the script sets TQDM_DISABLE=1 in os.environ when imported, which (set at
    # collection) reached every later test's subprocesses and hid the CLI's progress bars they check.
    monkeypatch.setenv("TQDM_DISABLE", "1")
    from benchmarks import scoring

    summary = scoring.main(
        [
            "--model",
            "groundtruth-tiny",
            "--subjects",
            "2",
            "--templates",
            "2",
            "--values",
            "3",
            "--rounds",
            "2",
            "--sample",
            "4",
            "--modes",
            "packed",
            "expand",
            "--pack-tokens",
            "512",
            "16",
            "--bf16",
        ]
    )
    printed = capsys.readouterr().out
    engines = ["engine cold", "engine warm", "engine packed/16", "engine expand"]
    assert set(summary["rates"]) == {*PEERS, *engines}
    assert all(rate > 0 for rate in summary["rates"].values())
    expected = {f"engine cold / {p}" for p in PEERS if p != "lm-eval+CachingLM"}
    expected |= {f"engine warm / {p}" for p in PEERS} | {f"{e} / engine cold" for e in engines[2:]}
    assert set(summary["ratios"]) == set(summary["cpu_ratios"]) == expected
    # conditioning matches: every method scores the same tokens given the same document start
    assert set(summary["nll_max_diff"]) == {*PEERS, *engines[1:]}
    assert max(summary["nll_max_diff"].values()) < 1e-3, summary["nll_max_diff"]
    work = summary["work"]
    for peer in ("lm-eval", "minicons", "one per pass"):
        assert work["engine cold"]["positions"] < work[peer]["positions"], work
        assert work["engine cold"]["gflop"] < work[peer]["gflop"], work
    assert work["engine warm"]["gflop"] < work["engine cold"]["gflop"]
    assert work["lm-eval+CachingLM"]["gflop"] < work["lm-eval"]["gflop"]
    assert work["engine cold"]["masked"] > work["engine packed/16"]["masked"] > 0  # smaller packs: less masked
    assert "bf16 engine:" in printed and "scaling:" in printed
