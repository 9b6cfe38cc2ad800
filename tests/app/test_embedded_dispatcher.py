"""The embedded runner's order (app/queue.py:EmbeddedDispatcher), with real jobs on its real thread: single audits
before batch-lane work, and a job's follow-up (a null's next chunk) goes to the tail of its lane, behind what was
sent while it ran."""

from __future__ import annotations

import threading

from app.queue import EmbeddedDispatcher

RUNS: list[str] = []
DISPATCHER: EmbeddedDispatcher | None = None
FIRST_RUN = threading.Event()  # the null is running: the test sends the rest now
SENT = threading.Event()  # the rest is sent: the null's first chunk ends
JOB = f"{__name__}.job"


def job(audit_id: str) -> None:
    RUNS.append(audit_id)
    if audit_id == "null" and RUNS.count("null") == 1:
        FIRST_RUN.set()
        assert SENT.wait(30), "the test did not send its audits"
        assert DISPATCHER is not None
        DISPATCHER.follow_up(audit_id)  # as workers/jobs/common.py:_run_again does after a chunk


def test_a_follow_up_runs_after_the_single_audit_and_the_batch_work_sent_while_its_job_ran() -> None:
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
    assert RUNS == ["null", "single", "batch-later", "null"]
    assert dispatcher.missing(["null", "single", "batch-later"]) == ["null", "single", "batch-later"]
