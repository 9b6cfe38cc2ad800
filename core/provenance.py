"""What produced a result: memaudit's version (and git commit when run from a checkout), Python, torch and
transformers, the scorer backend and its settings, the model's fingerprint, and the nulls a verdict is judged
against. Versioned as a schema (``SCHEMA``): a reader that meets another schema knows it reads something else.

Versions come from the installed distributions' metadata (``importlib.metadata``), never from importing a
package: the API process reads torch's version without loading torch. The commit is read from ``.git`` files
(HEAD, a loose ref or packed-refs) without running git; a working tree's uncommitted changes are not seen."""

from __future__ import annotations

import platform
from collections.abc import Mapping
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

SCHEMA = "memaudit.provenance/1"
PACKAGES = ("torch", "transformers")  # besides memaudit itself
CHECKOUT = Path(__file__).resolve().parent.parent  # the repository root, when memaudit runs from a checkout
MAX_REF_BYTES = 65_536  # a .git file larger than this is not one git wrote (packed-refs aside: read line by line)


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _git_dir(root: Path) -> Path | None:
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():  # a worktree or submodule: "gitdir: <path>"
        text = dot_git.read_text(errors="replace")[:MAX_REF_BYTES].strip()
        if text.startswith("gitdir:"):
            found = (root / text.removeprefix("gitdir:").strip()).resolve()
            return found if found.is_dir() else None
    return None


def _is_sha(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def git_commit(root: Path = CHECKOUT) -> str | None:
    """The commit HEAD names in ``root``'s checkout, or None (not a checkout, or a layout this reader does not
    know). Reads files only."""
    try:
        git = _git_dir(root)
        if git is None:
            return None
        head = (git / "HEAD").read_text(errors="replace")[:MAX_REF_BYTES].strip()
        if _is_sha(head):  # detached HEAD
            return head
        if not head.startswith("ref: "):
            return None
        ref = head.removeprefix("ref: ").strip()
        common = git
        if (git / "commondir").is_file():  # a worktree keeps branch refs in the main repository
            common = (git / (git / "commondir").read_text().strip()).resolve()
        for base in (git, common):
            loose = base / ref
            if loose.is_file():
                sha = loose.read_text(errors="replace")[:MAX_REF_BYTES].strip()
                return sha if _is_sha(sha) else None
        packed = common / "packed-refs"
        if packed.is_file():
            with packed.open(errors="replace") as lines:
                for line in lines:
                    sha, _, name = line.strip().partition(" ")
                    if name == ref and _is_sha(sha):
                        return sha
    except OSError:
        return None
    return None


@lru_cache(maxsize=1)
def software() -> dict[str, Any]:
    """The software half of a provenance block (cached: it does not change while a process runs)."""
    return {
        "memaudit": {"version": package_version("memaudit-gdpr"), "commit": git_commit()},
        "python": platform.python_version(),
        **{name: package_version(name) for name in PACKAGES},
    }


def provenance(
    *,
    scorer: Mapping[str, Any] | None = None,
    model_fingerprint: str | None = None,
    nulls: list[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """A provenance block: ``scorer`` the backend and its settings, ``nulls`` one entry per property
    (``property``, ``null_audit_id``, ``config_key``) where the result is judged against a null."""
    return {
        "schema": SCHEMA,
        **software(),
        "scorer": dict(scorer) if scorer else None,
        "model_fingerprint": model_fingerprint,
        "nulls": [dict(n) for n in nulls or ()],
    }


def unrecorded(model_fingerprint: str | None = None) -> dict[str, Any]:
    """The block of a result run before provenance was recorded: the schema, with what was not recorded null
    (never this process's versions, which did not produce it)."""
    return {
        "schema": SCHEMA,
        "memaudit": None,
        "python": None,
        **dict.fromkeys(PACKAGES),
        "scorer": None,
        "model_fingerprint": model_fingerprint,
        "nulls": [],
    }
