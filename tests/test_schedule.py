"""The suite's file order for `make test` (tests/support/schedule.py): the longest files first."""

from __future__ import annotations

from dataclasses import dataclass

from tests.conftest import REPO
from tests.support.schedule import file_seconds, load_durations, longest_first


@dataclass
class Item:
    nodeid: str


def test_files_run_longest_first_unmeasured_first_and_each_file_keeps_its_order():
    items = [Item(n) for n in ("a.py::x", "a.py::y", "b.py::x", "c.py::x", "new.py::x", "b.py::y", "c.py::y[1]")]
    durations = {"a.py": 3.0, "b.py": 50.0, "c.py": 7.5}
    order = [i.nodeid for i in longest_first(items, durations)]
    assert order == ["new.py::x", "b.py::x", "b.py::y", "c.py::x", "c.py::y[1]", "a.py::x", "a.py::y"]


def test_the_seconds_per_file_sum_setup_call_and_teardown_of_a_durations_report():
    log = (
        "===== slowest durations =====\n"
        "12.50s call     tests/e2e/test_a.py::test_one\n"
        "3.00s setup    tests/e2e/test_a.py::test_two[p-1]\n"
        "0.40s teardown tests/ui/test_b.py::test_three\n"
        "(2 durations < 0.005s hidden.)\n"
    )
    assert file_seconds(log) == {"tests/e2e/test_a.py": 15.5, "tests/ui/test_b.py": 0.4}


def test_every_file_the_schedule_names_exists():
    gone = [path for path in load_durations() if not (REPO / path).is_file()]
    assert not gone, f"tests/durations.json names removed files {gone}: python -m tests.support.schedule <a run's log>"
