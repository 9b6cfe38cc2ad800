"""Embedded mode (no Redis): the API process runs the reconciler over its in-process runner, so audits that
were queued or running when the process stopped are run again after a restart (a running one once its lease
has expired), and nothing the API acknowledged is left behind."""

from __future__ import annotations

import logging
import threading

from app.audits.kinds import KindRegistry
from app.queue import get_dispatcher
from app.reliability.reconciler import Reconciler
from app.settings import get_settings

log = logging.getLogger("memaudit.embedded")
_started: dict[tuple[str, str | None], Reconciler] = {}
_lock = threading.Lock()


def resume_pending(kinds: KindRegistry) -> Reconciler:
    """Start this process's reconciler (once per database); its first pass runs at once."""
    settings = get_settings()
    key = (settings.database_url, settings.redis_url)
    with _lock:
        running = _started.get(key)
        if running is None or not running._thread.is_alive():
            _started[key] = Reconciler(settings, get_dispatcher(), kinds).start()
            log.info("embedded reconciler started (every %.0f s)", settings.reconcile_interval_seconds)
        return _started[key]
