"""Run as a child by tests/app/test_null_intake_child.py: reports, before importing anything of the project, the
CPU priority it runs at and whether the web stack or SQLAlchemy are already imported."""

import json
import os
import sys

heavy = sorted(m for m in ("sqlalchemy", "fastapi", "pydantic") if m in sys.modules)
print(json.dumps({"nice": os.nice(0), "already_imported": heavy, "argv": sys.argv[1:]}))
