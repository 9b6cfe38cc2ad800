"""The dependency rules of docs/architecture.md, read from the source with `ast` (every import, function-level
ones included) and, for the API process, from a fresh interpreter's sys.modules:

- core imports the standard library, numpy, the declared data package Faker (name lists) and core only (never app,
  workers, the database, the web, torch), and never by name (``importlib.import_module``: an import must be in
  sight of this test);
- app imports no workers module, except the CLI's `worker` command (app/cli may import workers.worker);
- workers import app's db, settings, repositories and schemas (and the pure coverage file formats), never app
  services or routers; the worker process's entry point (workers/worker.py) may also use the queue and the
  composition root of kinds, and the jobs' shared runner (workers/jobs/common.py) the queue;
- the generic audits package (app/audits) imports no kind: only the app's shared layers;
- importing app.main loads no torch, transformers, vllm or sentence-transformers.
- a public class name is defined once in app, workers and core (one name, one meaning);
- only the composition roots import the list of kinds (app.kinds): the API (app/main.py), the command line
  (app/cli) and the worker's entry point (workers/worker.py); everything else is given its kinds.

Each checker is also run on planted violations, so a rule that stopped catching anything would fail here."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CORE_MAY_IMPORT = {"numpy", "core", "faker"}  # faker: a data package (name lists), declared in pyproject.toml
# Data layers, settings, schemas, and the job lifecycle's lease operations (conditional UPDATEs on the audit row).
WORKERS_MAY_IMPORT_FROM_APP = re.compile(
    r"^app\.(db(\..*)?|settings|\w+\.repository|\w+\.schemas|\w+\.config|coverage\.formats|reliability\.leases)$"
)
# beyond the data layers: the worker's entry point, and the jobs' shared runner (a job that works in steps, or timed
# out, hands its audit back and sends its next job: workers/jobs/common.py)
MAY_ALSO_IMPORT = {
    "workers/worker.py": {"app.kinds", "app.queue", "app.reliability.reconciler"},
    "workers/jobs/common.py": {"app.queue"},
    # a verification judges its facts once, when it ends, against the nulls it waited for (its evidence entries
    # record those verdicts): the one calibration there is, read-only
    "workers/jobs/verification.py": {"app.nulls.calibrate"},
    # a null's summary stores each per-fact policy's rate, read from the one policy registry (no web or database
    # import there)
    "workers/jobs/null.py": {"app.forget_set.policies"},
}
AUDITS_MAY_IMPORT_FROM_APP = re.compile(r"^app\.(audits|auth|db|deps|errors|limits|queue|settings|validation)(\..*)?$")
HEAVY = ("torch", "transformers", "vllm", "sentence_transformers")
# the processes' entry points, which choose the kinds they offer (app/cli/ too); the rest is given them
COMPOSITION_ROOTS = {"app/kinds.py", "app/main.py", "workers/worker.py"}


def imports(path: Path, root: Path) -> Iterator[str]:
    """Every absolute module a file imports: ``from a.b import c`` yields ``a.b.c`` when that is a module of the
    tree, else ``a.b``."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                candidate = root / f"{node.module}.{alias.name}".replace(".", "/")
                is_module = candidate.with_suffix(".py").is_file() or candidate.is_dir()
                yield f"{node.module}.{alias.name}" if is_module else node.module


def python_files(root: Path, package: str) -> list[Path]:
    return sorted((root / package).rglob("*.py"))


def core_violations(root: Path) -> list[str]:
    allowed = set(sys.stdlib_module_names) | CORE_MAY_IMPORT
    out = []
    for path in python_files(root, "core"):
        out += [f"{path.relative_to(root)} imports {m}" for m in imports(path, root) if m.split(".")[0] not in allowed]
        out += [f"{path.relative_to(root)} imports a module by name" for _ in dynamic_imports(path)]
    return out


def dynamic_imports(path: Path) -> Iterator[ast.Call]:
    """Calls of ``importlib.import_module`` or ``__import__``: an import this test could not see."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ("import_module", "__import__"):
                yield node


def app_violations(root: Path) -> list[str]:
    out = []
    for path in python_files(root, "app"):
        cli = path.relative_to(root).parts[:2] == ("app", "cli")
        for module in imports(path, root):
            if module.split(".")[0] == "workers" and not (cli and module == "workers.worker"):
                out.append(f"{path.relative_to(root)} imports {module}")
    return out


def workers_violations(root: Path) -> list[str]:
    out = []
    for path in python_files(root, "workers"):
        also = MAY_ALSO_IMPORT.get(path.relative_to(root).as_posix(), set())
        for module in imports(path, root):
            if module.split(".")[0] != "app" or WORKERS_MAY_IMPORT_FROM_APP.match(module):
                continue
            if module not in also:
                out.append(f"{path.relative_to(root)} imports {module}")
    return out


def audits_violations(root: Path) -> list[str]:
    return [
        f"{path.relative_to(root)} imports {module}"
        for path in sorted((root / "app" / "audits").rglob("*.py"))
        for module in imports(path, root)
        if module.split(".")[0] == "app" and not AUDITS_MAY_IMPORT_FROM_APP.match(module)
    ]


def kinds_importers(root: Path) -> list[str]:
    """Modules of app, workers and core, other than the composition roots, that import app.kinds."""
    out = []
    for package in ("app", "workers", "core"):
        for path in python_files(root, package):
            name = path.relative_to(root).as_posix()
            if name in COMPOSITION_ROOTS or name.startswith("app/cli/"):
                continue
            out += [f"{name} imports {m}" for m in imports(path, root) if m.split(".")[:2] == ["app", "kinds"]]
    return out


def class_name_clashes(root: Path) -> list[str]:
    """Public class names defined in more than one module of app, workers and core: one name, one meaning."""
    where: dict[str, list[str]] = {}
    for package in ("app", "workers", "core"):
        for path in python_files(root, package):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    where.setdefault(node.name, []).append(path.relative_to(root).as_posix())
    return [f"{name}: {', '.join(paths)}" for name, paths in sorted(where.items()) if len(paths) > 1]


def heavy_modules_after_importing(module: str, root: Path) -> list[str]:
    code = f"import sys, {module}; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_core_imports_only_the_standard_library_numpy_faker_and_itself() -> None:
    assert core_violations(REPO) == []


def test_app_never_imports_workers_outside_the_cli_worker_command() -> None:
    assert app_violations(REPO) == []


def test_workers_use_app_data_layers_only() -> None:
    assert workers_violations(REPO) == []


def test_the_generic_audits_package_names_no_kind() -> None:
    assert audits_violations(REPO) == []


def test_only_the_composition_roots_import_the_kinds() -> None:
    assert kinds_importers(REPO) == []


def test_each_class_name_has_one_meaning() -> None:
    assert class_name_clashes(REPO) == []


def test_the_api_process_loads_no_model_code() -> None:
    assert heavy_modules_after_importing("app.main", REPO) == []


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A copy of the layout with one violation of each rule."""
    files = {
        "core/__init__.py": "",
        "core/models.py": "import math\nimport numpy\nfrom core import models\n",
        "core/bad.py": "def f():\n    from sqlalchemy import select\n",
        "core/names.py": "def f():\n    from faker.providers.person import en_US\n",
        "core/hidden.py": "import importlib\nfrom importlib import metadata\n\nimportlib.import_module('sqlalchemy')\n",
        "app/__init__.py": "",
        "app/main.py": "from core.models import math\nimport torch\n",  # torch in the API's import graph
        "app/kinds.py": "",
        "app/reliability/reconciler.py": "from app.kinds import KINDS\n",
        "app/cli/serve.py": "from app.kinds import KINDS\n",
        "app/db/engine.py": "",
        "app/capacity/repository.py": "",
        "app/capacity/service.py": "from app.capacity import repository\n",
        "app/subjects/schemas.py": "",
        "app/cli/worker_command.py": "from workers.worker import run_worker\n",
        "app/bad.py": "import workers.jobs.subject\n",
        "app/audits/service.py": "from app.db import engine\nfrom app.capacity.schemas import SCRATCH\n",
        "workers/ok.py": "from app.capacity import repository\nfrom app.capacity.repository import cells\n"
        "from app.subjects.schemas import SubjectAuditOptions\nfrom app.db.engine import session_scope\n",
        "workers/worker.py": "from app.kinds import KINDS\n",
        "workers/jobs/bad.py": "from app.capacity import service\nfrom app.kinds import KINDS\nimport app.queue\n",
        "workers/jobs/common.py": "from app.queue import get_dispatcher\n",
        "workers/lm/engine.py": "class Progress:\n    pass\n\n\nclass _Row:\n    pass\n",
        "app/audits/schemas.py": "class Progress:\n    pass\n\n\nclass _Row:\n    pass\n",
        "torch.py": "",  # a stand-in for torch, importable from the planted root
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_each_rule_catches_a_planted_violation(planted: Path) -> None:
    assert core_violations(planted) == ["core/bad.py imports sqlalchemy", "core/hidden.py imports a module by name"]
    assert app_violations(planted) == ["app/bad.py imports workers.jobs.subject"]
    assert audits_violations(planted) == ["app/audits/service.py imports app.capacity.schemas"]
    assert workers_violations(planted) == [
        "workers/jobs/bad.py imports app.capacity.service",
        "workers/jobs/bad.py imports app.kinds",
        "workers/jobs/bad.py imports app.queue",
    ]
    assert kinds_importers(planted) == [
        "app/reliability/reconciler.py imports app.kinds",
        "workers/jobs/bad.py imports app.kinds",
    ]
    assert class_name_clashes(planted) == ["Progress: app/audits/schemas.py, workers/lm/engine.py"]
    assert heavy_modules_after_importing("app.main", planted) == ["torch"]
