"""The capacity benchmark script runs end to end (tiny configuration, seconds): it must not rot between the
30-minute runs whose numbers docs/benchmarks.md quotes. No timing is asserted."""

import json

from benchmarks import capacity_table


def test_capacity_table_runs_and_reports_every_cell(tmp_path, capsys):
    out = tmp_path / "capacity.json"
    capacity_table.main(
        [
            "--minutes",
            "0.2",
            "--vocab",
            "16",
            "--seq",
            "8",
            "--width",
            "8",
            "--heads",
            "2",
            "--ns",
            "8,16",
            "--bf16-ns",
            "8",
            "--batch-size",
            "4",
            "--json",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    cells = result["cells"]
    assert [(c["precision"], c["n"]) for c in cells] == [("fp32", 8), ("fp32", 16), ("bf16", 8)]
    for c in cells:
        assert 0 <= c["memorized_bits"] <= c["entropy_bits"] == c["n"] * 8 * 4.0, c
        assert c["steps"] > 0 and c["curve"], c
        assert c["bits_per_param"] == c["memorized_bits"] / result["params"]
    assert set(result["capacity_bits_per_param"]) == {"fp32", "bf16"}
    assert "speed-up" in printed and "paper: 4.23" in printed
