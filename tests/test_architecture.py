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
  (app/cli) and the worker's entry point (workers/worker.py); everything else is given its kinds;
- no private RQ name is touched in app or workers: no ``x._name`` where ``_name`` is a private attribute or method
  of RQ's source, on an RQ object or on ``self`` in a subclass of an RQ class, and no such method overridden;
- no job module (workers/jobs) imports another job module's private (``_``-prefixed) names: what jobs share is
  public (workers/jobs/scoring.py, workers/jobs/common.py);
- no import loop between feature packages. A feature package is a package directly under app/ or workers/ (a
  directory of modules: app/nulls, app/subjects, workers/jobs, workers/lm, ...); the modules at the top
  of app/ and workers/ (app/queue.py, app/settings.py, workers/embeddings.py) are shared layers, not features; and
  app/db is the data layer every feature reads. Package A imports B when any module inside A imports a module of B;
  a loop is a set of two or more packages that reach each other that way;
- docs/architecture.md's list of feature packages and their imports (the lines ``- `pkg` -> `other`, ...`` under
  "Feature packages") is the import graph of the code;
- no job waits by sleeping and re-queuing: no function of workers/jobs both sleeps and sends its job again (a job
  that waits for other audits raises ``Waiting``: workers/jobs/common.py).

Each checker is also run on planted violations, so a rule that stopped catching anything would fail here."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import rq

REPO = Path(__file__).resolve().parent.parent
CORE_MAY_IMPORT = {"numpy", "core", "faker"}  # faker: a data package (name lists), declared in pyproject.toml
# Data layers, settings, schemas, and the job lifecycle's lease operations (conditional UPDATEs on the audit row).
WORKERS_MAY_IMPORT_FROM_APP = re.compile(
    r"^app\.(db(\..*)?|settings|\w+\.repository|\w+\.schemas|\w+\.config|coverage\.formats|reliability\.(leases|waits))$"
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
    "workers/jobs/null.py": {"app.policies"},
}
AUDITS_MAY_IMPORT_FROM_APP = re.compile(r"^app\.(audits|auth|db|deps|errors|limits|queue|settings|validation)(\..*)?$")
HEAVY = ("torch", "transformers", "vllm", "sentence_transformers")
RQ_SOURCE = Path(rq.__file__).resolve().parent
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


def rq_private_names(source: Path = RQ_SOURCE) -> set[str]:
    """Every single-underscore attribute or method name RQ's own source uses or defines."""
    names = set()
    for path in source.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "name", None)
            if isinstance(name, str) and name.startswith("_") and not name.startswith("__"):
                names.add(name)
    return names


def _rq_imported(tree: ast.AST) -> set[str]:
    """The names a module binds from rq (``from rq.job import Job`` -> Job; ``import rq`` -> rq)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "rq":
            out |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.asname or a.name for a in node.names if a.name.split(".")[0] == "rq"}
    return out


def rq_private_uses(root: Path, private: set[str]) -> list[str]:
    """Private RQ names touched in app and workers: ``obj._name`` for an RQ private ``_name`` (``self._name`` only
    inside a subclass of an RQ class: a class of ours has its own), and RQ private methods overridden."""
    out = []
    for package in ("app", "workers"):
        for path in python_files(root, package):
            tree = ast.parse(path.read_text(), filename=str(path))
            rq_names = _rq_imported(tree)
            if not rq_names:
                continue
            name = path.relative_to(root).as_posix()
            ours = set()  # attribute nodes on `self` inside classes that do not subclass RQ's
            for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in cls.bases}
                if bases & rq_names:
                    out += [
                        f"{name}:{f.lineno} overrides RQ's {f.name}"
                        for f in cls.body
                        if isinstance(f, ast.FunctionDef) and f.name in private
                    ]
                    continue
                ours |= {
                    id(n)
                    for n in ast.walk(cls)
                    if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")
                }
            out += [
                f"{name}:{n.lineno} touches RQ's {n.attr}"
                for n in ast.walk(tree)
                if isinstance(n, ast.Attribute) and n.attr in private and id(n) not in ours
            ]
    return sorted(set(out))


REQUEUES = {"NextStep", "follow_up", "send", "send_many", "enqueue", "enqueue_many"}


def sleeping_requeues(root: Path) -> list[str]:
    """Functions of workers/jobs that sleep (``time.sleep`` or a bare ``sleep``) and send their audit's job again
    (raise ``NextStep``, or call ``follow_up``/``send``/``enqueue``): a job never waits by sleeping and re-queuing.
    (The lifecycle's retry of a database write while the database is away sleeps, and sends nothing.)"""
    out = []
    for path in python_files(root, "workers/jobs"):
        for fn in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            called = {
                n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", None)
                for n in ast.walk(fn)
                if isinstance(n, ast.Call)
            }
            raised = {
                getattr(n.exc, "id", None) or getattr(getattr(n.exc, "func", None), "id", None)
                for n in ast.walk(fn)
                if isinstance(n, ast.Raise) and n.exc is not None
            }
            if "sleep" in called and (called | raised) & REQUEUES:
                out.append(f"{path.relative_to(root).as_posix()}:{fn.lineno} {fn.name} sleeps and re-queues")
    return out


def private_job_imports(root: Path) -> list[str]:
    """Imports, in workers/jobs, of another job module's ``_``-prefixed names (``from workers.jobs.x import _y``,
    or ``x._y`` where ``x`` was imported from workers.jobs)."""
    out = []
    for path in python_files(root, "workers/jobs"):
        here = ".".join(path.relative_to(root).with_suffix("").parts)
        tree = ast.parse(path.read_text(), filename=str(path))
        aliases = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("workers.jobs"):
                for alias in node.names:
                    if node.module != here and alias.name.startswith("_"):
                        out.append(f"{path.relative_to(root).as_posix()} imports {node.module}.{alias.name}")
                    elif f"{node.module}.{alias.name}" != here:
                        aliases.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                aliases |= {a.asname or a.name for a in node.names if a.name.startswith("workers.jobs.")}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                base = ast.unparse(node.value)
                if base in aliases:
                    out.append(f"{path.relative_to(root).as_posix()} uses {base}.{node.attr}")
    return sorted(out)


FEATURE_ROOTS = ("app", "workers")
SHARED_PACKAGES = {"app/db"}  # the data layer: read by every feature, imports none (its own rule below)


def feature_package(module: str, root: Path) -> str | None:
    """``app/nulls`` for ``app.nulls.calibrate``; None for a module at the top of app/ or workers/ and for the data
    layer."""
    parts = module.split(".")
    if parts[0] not in FEATURE_ROOTS or len(parts) < 2 or not (root / parts[0] / parts[1]).is_dir():
        return None
    name = f"{parts[0]}/{parts[1]}"
    return None if name in SHARED_PACKAGES else name


def package_graph(root: Path) -> dict[str, set[str]]:
    """Feature package -> the feature packages its modules import."""
    graph: dict[str, set[str]] = {}
    for top in FEATURE_ROOTS:
        for path in python_files(root, top):
            source = feature_package(".".join(path.relative_to(root).with_suffix("").parts), root)
            if source is None:
                continue
            graph.setdefault(source, set())
            for module in imports(path, root):
                target = feature_package(module, root)
                if target is not None and target != source:
                    graph[source].add(target)
    return graph


def package_loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """The sets of two or more feature packages that import each other, directly or through others (strongly
    connected components, Tarjan), each sorted, in order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    loops: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                loops.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(loops)


DOC_LINE = re.compile(r"^- `(?P<pkg>[\w/]+)`(?: -> (?P<targets>.*))?$")


def documented_graph(doc: Path) -> dict[str, set[str]]:
    """The graph docs/architecture.md states: under its "Feature packages" heading, one line per package,
    ``- `app/nulls` -> `app/wikidata`, `app/forget_set` `` (no arrow: it imports no feature package)."""
    text = doc.read_text()
    section = text.split("## Feature packages", 1)[1].split("\n## ", 1)[0]
    graph = {}
    for line in section.splitlines():
        found = DOC_LINE.match(line.strip())
        if found:
            targets = found["targets"] or ""
            graph[found["pkg"]] = set(re.findall(r"`([\w/]+)`", targets))
    return graph


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


def test_no_job_imports_another_jobs_private_names() -> None:
    assert private_job_imports(REPO) == []


def test_no_import_loop_between_feature_packages() -> None:
    assert package_loops(package_graph(REPO)) == []


def test_the_documented_package_graph_is_the_code() -> None:
    assert documented_graph(REPO / "docs" / "architecture.md") == package_graph(REPO)


def test_no_private_rq_name_is_touched() -> None:
    assert rq_private_uses(REPO, rq_private_names()) == []


def test_no_job_waits_by_sleeping() -> None:
    assert sleeping_requeues(REPO) == []


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
        "workers/rq_worker.py": "from rq import SimpleWorker\n\n\nclass W(SimpleWorker):\n"
        "    def _install_signal_handlers(self):\n        self._stop_requested = True\n        self.stop = 1\n",
        "app/rq_queue.py": "from rq.job import Job\n\n\nclass Mine:\n    def f(self, job: Job):\n"
        "        self._stop_requested = 1\n        return job._status\n",
        "workers/jobs/subject.py": "def _plan():\n    pass\n",
        "workers/jobs/null.py": "from workers.jobs.subject import _plan, run\nfrom workers.jobs import subject\n\n"
        "subject._score_all()\n",
        "app/nulls/__init__.py": "",
        "app/nulls/calibrate.py": "from app.forget_set.policies import fact_rates\nfrom app.db.engine import x\n",
        "app/forget_set/__init__.py": "",
        "app/forget_set/policies.py": "from app.nulls import calibrate\n",
        "app/subjects/__init__.py": "",
        "app/subjects/service.py": "from app.nulls.calibrate import Calibrator\n",
        "app/db/__init__.py": "",
        "docs/architecture.md": "# A\n\n## Feature packages\n\n- `app/nulls` -> `app/forget_set`\n"
        "- `app/subjects`\n\n## B\n",
        "workers/jobs/waits.py": "import time\n\n\ndef run(audit_id):\n    time.sleep(0.5)\n    raise NextStep\n\n\n"
        "def retry():\n    time.sleep(0.5)\n",
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
    private = {"_install_signal_handlers", "_stop_requested", "_status"}  # what RQ's source has, for the plant
    assert rq_private_uses(planted, private) == [
        "app/rq_queue.py:7 touches RQ's _status",
        "workers/rq_worker.py:5 overrides RQ's _install_signal_handlers",
        "workers/rq_worker.py:6 touches RQ's _stop_requested",
    ]
    assert {"_install_signal_handlers", "_stop_requested", "_status", "_ordered_queues"} <= rq_private_names()
    assert private_job_imports(planted) == [
        "workers/jobs/null.py imports workers.jobs.subject._plan",
        "workers/jobs/null.py uses subject._score_all",
    ]
    graph = package_graph(planted)
    assert graph["app/subjects"] == {"app/nulls"} and "app/db" not in graph, graph
    assert package_loops(graph) == [["app/forget_set", "app/nulls"]]
    assert documented_graph(planted / "docs" / "architecture.md") == {
        "app/nulls": {"app/forget_set"},
        "app/subjects": set(),
    }
    assert sleeping_requeues(planted) == ["workers/jobs/waits.py:4 run sleeps and re-queues"]
