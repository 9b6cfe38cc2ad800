"""docs/configuration.md, written from the Settings class: every field's environment variable, type, default and
description, then the keys of a model registry entry.

    python -m app.settings_doc                        # print it
    python -m app.settings_doc docs/configuration.md  # write it (tests/test_repository_artifacts.py checks it)

Defaults that depend on the machine are shown as a reader would write them: the working directory as ``.``, the home
directory as ``~``."""

from __future__ import annotations

import os
import sys
import tempfile
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from app.settings import ModelSpec, Settings

PREFIX = Settings.model_config["env_prefix"]
HEADER = f"""# Configuration

<!-- Written by `python -m app.settings_doc docs/configuration.md` from the Settings class (app/settings.py): change
the class, then run it; tests/test_repository_artifacts.py fails while they differ. -->

Every setting is an environment variable with the `{PREFIX}` prefix, read only by `app/settings.py` (nothing else in
memaudit reads the environment). Lists and objects are JSON; a nested value can also be set on its own with `__`
between the levels, e.g. a served model's key in `{PREFIX}MODELS__<name>__API_KEY`.

| variable | type | default | meaning |
|---|---|---|---|
"""
MODEL_ENTRY = f"""
## A model entry (`{PREFIX}MODELS`)

`{PREFIX}MODELS` maps a name to an entry with these keys (it replaces the built-in registry: list the built-in models
you still want).

| key | type | default | meaning |
|---|---|---|---|
"""


def type_name(annotation: Any) -> str:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        shown = " or ".join(type_name(a) for a in rest)
        return f"{shown}, optional" if len(rest) < len(args) else shown
    if origin is list:
        return f"JSON list of {type_name(args[0])}s"
    if origin is dict:
        return f"JSON object: {type_name(args[0])} → {type_name(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "model entry (below)"
    if annotation is SecretStr:
        return "string (a secret)"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(annotation, str(annotation))


def bounds(field: FieldInfo) -> str:
    marks = {Ge: "≥", Gt: ">", Le: "≤", Lt: "<"}
    shown = []
    for item in field.metadata:
        for kind, mark in marks.items():
            if isinstance(item, kind):
                shown.append(f"{mark} {getattr(item, kind.__name__.lower())}")
    return f" ({', '.join(shown)})" if shown else ""


def default_of(field: FieldInfo, workdir: str) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    if isinstance(value, dict) and value and all(isinstance(v, BaseModel) for v in value.values()):
        return ", ".join(f"`{name}`" for name in value)
    if isinstance(value, str):
        value = value.replace(workdir, ".").replace(str(Path.home()), "~")
        return f"`{value}`" if value else '`""` (empty)'
    if isinstance(value, bool | int | float | dict | list):
        return f"`{value}`"
    return f"`{value}`"


def row(name: str, field: FieldInfo, workdir: str) -> str:
    if not field.description:
        raise ValueError(f"{name} has no description: give it Field(description=...) in app/settings.py")
    cells = [name, type_name(field.annotation) + bounds(field), default_of(field, workdir), field.description]
    return "| " + " | ".join(cell.replace("|", "\\|") if i > 1 else cell for i, cell in enumerate(cells)) + " |\n"


def render() -> str:
    """The whole page. Factories that read the working directory run in an empty temporary one, shown as ``.``."""
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as workdir:
        os.chdir(workdir)
        try:
            workdir = os.getcwd()  # resolved (a temporary directory may sit behind a link)
            rows = [row(f"`{PREFIX}{n.upper()}`", f, workdir) for n, f in Settings.model_fields.items()]
            keys = [row(f"`{n}`", f, workdir) for n, f in ModelSpec.model_fields.items()]
        finally:
            os.chdir(here)
    return HEADER + "".join(rows) + MODEL_ENTRY + "".join(keys)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(render())
    else:
        sys.stdout.write(render())
