"""The embedded runner's order (app/queue.py:EmbeddedDispatcher), with real jobs on its real thread: single audits
before batch-lane work, and a job that made way goes back in its own place, ahead of what was sent after it."""

from __future__ import annotations

import threading

from app.queue import EmbeddedDispatcher

RUNS: list[str] = []
DISPATCHER: EmbeddedDispatcher | None = None
FIRST_RUN = threading.Event()  # the null is running: the test sends the rest now
SENT = threading.Event()  # the rest is sent: the null makes way
JOB = f"{__name__}.job"


def job(audit_id: str) -> None:
    RUNS.append(audit_id)
    if audit_id == "null" and RUNS.count("null") == 1:
        FIRST_RUN.set()
        assert SENT.wait(30), "the test did not send its audits"
        assert DISPATCHER is not None
        DISPATCHER.requeue(audit_id)  # as workers/jobs/common.py:_step_aside does


def test_a_job_that_made_way_runs_again_after_the_single_audit_and_before_later_batch_work() -> None:
    global DISPATCHER
    RUNS.clear()
    DISPATCHER = dispatcher = EmbeddedDispatcher()
    dispatcher.send(JOB, "null", lane=0)
    assert FIRST_RUN.wait(30)
    dispatcher.send(JOB, "batch-later", lane=0)
    dispatcher.send(JOB, "single", lane=None)
    dispatcher.send(JOB, "null", lane=0)  # the reconciler's pass meanwhile: already held, not sent twice
    assert dispatcher.missing(["null", "single", "batch-later"]) == []
    SENT.set()
    dispatcher.join()
    assert RUNS == ["null", "single", "null", "batch-later"]
    assert dispatcher.missing(["null", "single", "batch-later"]) == ["null", "single", "batch-later"]
