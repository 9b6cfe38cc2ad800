"""Capacity audit use cases: validate and prepare an audit (cells or text samples), read the grid, the
plot-ready series and the text results, and the scaling-law prediction. Services never commit.

The math comes from `core.measures.capacity`, which is pure (numpy only, no torch), so the API process
can import it without loading any model code.
"""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

from sqlalchemy.orm import Session

from app.audits.service import check_model
from app.capacity import repository
from app.capacity.schemas import (
    ArchitectureCapacity,
    CapacityAuditCreate,
    CapacityCellRead,
    CapacityGrid,
    CapacityGridRead,
    Prediction,
    TextResultsRead,
    TextSampleRead,
)
from app.db.models import Audit
from app.db.models.audit import AuditStatus
from app.db.models.capacity import CapacityCell, CapacityText
from app.db.vocabulary import CellStatus
from app.errors import InvalidInput
from app.settings import Settings
from core.measures import capacity as cap
from core.models import parse_model_name

DEFAULT_LIMITS: dict[str, int] = {
    "max_cells": 64,
    "max_params": 20_000_000,
    "max_dataset_size": 1_000_000,
    "max_vocab_size": 65_536,
    "max_seq_len": 4096,
    "max_steps": 1_000_000,
    "max_train_tokens": 10**13,  # Σ over cells of N · S · steps: the work a grid asks for
    "max_texts": 5000,
    "max_text_chars": 20_000,
}


def limits(settings: Settings) -> dict[str, int]:
    return {**DEFAULT_LIMITS, **settings.capacity_limits}


def _over(field: str, what: str, value: int, limit: int, key: str) -> InvalidInput:
    return InvalidInput(field, f"{what} is {value:,}, over the limit of {limit:,} (setting capacity_limits.{key})")


def check_grid(grid: CapacityGrid, steps: int, settings: Settings) -> None:
    """Grid limits from settings, checked before anything is queued; each message says how large and the limit."""
    lim = limits(settings)
    checks = [
        ("grid", "the grid's cell count", grid.cell_count(), "max_cells"),
        ("grid.vocab_size", "vocab_size", grid.vocab_size, "max_vocab_size"),
        ("grid.seq_len", "seq_len", grid.seq_len, "max_seq_len"),
        ("grid.dataset_sizes", "the largest dataset size", max(grid.dataset_sizes), "max_dataset_size"),
        ("options.steps", "steps per cell", steps, "max_steps"),
    ]
    for field, what, value, key in checks:
        if value > lim[key]:
            raise _over(field, what, value, lim[key], key)
    context = grid.context or grid.seq_len + 1
    for i, arch in enumerate(grid.architectures):
        params = cap.gpt2_param_count(arch.n_layer, arch.d_model, grid.vocab_size, context)
        if params > lim["max_params"]:
            raise _over(
                f"grid.architectures[{i}]",
                "this architecture's parameter count",
                params,
                lim["max_params"],
                "max_params",
            )
    work = sum(grid.dataset_sizes) * grid.seq_len * steps * len(grid.architectures) * len(grid.seeds)
    work *= len(grid.precisions)
    if work > lim["max_train_tokens"]:
        raise _over(
            "grid", "the training work (Σ N·S·steps over cells)", work, lim["max_train_tokens"], "max_train_tokens"
        )


def prepare_capacity_audit(session: Session, body: CapacityAuditCreate, audit: Audit, settings: Settings) -> None:
    """Create the audit's cells (uniform mode) or samples (text mode)."""
    if body.mode == "uniform":
        assert body.grid is not None
        check_grid(body.grid, body.options.steps, settings)
        session.add_all(_cells(audit.id, body.grid, body.options.steps))
        return
    assert body.text is not None
    _check_texts(body.text.texts, settings)
    check_model(settings, body.text.reference, "text.reference")
    if tokenizer_identity(body.model, settings) != tokenizer_identity(body.text.reference, settings):
        raise InvalidInput(
            "text.reference",
            "the reference model uses another tokenizer than the audited model; "
            "mem_U compares code lengths of the same tokens: pick a reference with the same tokenizer",
        )
    session.add_all(CapacityText(audit_id=audit.id, position=i, text=t) for i, t in enumerate(body.text.texts))


def _check_texts(texts: list[str], settings: Settings) -> None:
    lim = limits(settings)
    if len(texts) > lim["max_texts"]:
        raise _over("text.texts", "the number of texts", len(texts), lim["max_texts"], "max_texts")
    for i, text in enumerate(texts):
        if not text.strip():
            raise InvalidInput(f"text.texts[{i}]", "text is empty")
        if len(text) > lim["max_text_chars"]:
            raise _over(
                f"text.texts[{i}]",
                "the text's length in characters",
                len(text),
                lim["max_text_chars"],
                "max_text_chars",
            )


def _cells(audit_id: str, grid: CapacityGrid, steps: int) -> list[CapacityCell]:
    context = grid.context or grid.seq_len + 1
    combos = itertools.product(grid.architectures, grid.precisions, grid.seeds, sorted(set(grid.dataset_sizes)))
    out = []
    for position, (arch, precision, seed, n) in enumerate(combos):
        out.append(
            CapacityCell(
                audit_id=audit_id,
                position=position,
                n_layer=arch.n_layer,
                d_model=arch.d_model,
                n_head=arch.n_head,
                vocab_size=grid.vocab_size,
                seq_len=grid.seq_len,
                n_samples=n,
                seed=seed,
                precision=precision,
                params=cap.gpt2_param_count(arch.n_layer, arch.d_model, grid.vocab_size, context),
                entropy_bits=cap.dataset_entropy_bits(n, grid.seq_len, grid.vocab_size),
                steps_total=steps,
                status=CellStatus.PENDING,
                steps_done=0,
                seconds=0.0,
                curve=[],
            )
        )
    return out


def tokenizer_identity(name: str, settings: Settings) -> str:
    """What decides whether two models tokenize alike, without loading either (the API has no torch):
    the SHA-256 of tokenizer.json when the weights are a local directory, else the weights' own identity
    (a GGUF file carries its tokenizer). Conservative: distinct GGUF files count as distinct tokenizers."""
    parsed = parse_model_name(name, settings.models)
    if parsed.registered:
        spec = settings.models[parsed.base]
        path, package, gguf = spec.path, spec.package, spec.gguf_file
    else:
        path, package, gguf = parsed.hf_target, None, None
    if path and gguf is None and (Path(path) / "tokenizer.json").is_file():
        return hashlib.sha256((Path(path) / "tokenizer.json").read_bytes()).hexdigest()
    return f"{package or ''}:{path or ''}:{gguf or ''}"


def arch_label(c: CapacityCell) -> str:
    return cap.architecture_label(c.n_layer, c.d_model, c.n_head)


def cell_read(c: CapacityCell) -> CapacityCellRead:
    share = None if c.memorized_bits is None else c.memorized_bits / c.entropy_bits
    return CapacityCellRead(
        position=c.position,
        n_layer=c.n_layer,
        d_model=c.d_model,
        n_head=c.n_head,
        vocab_size=c.vocab_size,
        seq_len=c.seq_len,
        n_samples=c.n_samples,
        seed=c.seed,
        precision=c.precision,
        params=c.params,
        entropy_bits=c.entropy_bits,
        status=c.status,
        steps_done=c.steps_done,
        steps_total=c.steps_total,
        seconds=c.seconds,
        memorized_bits=c.memorized_bits,
        share_memorized=share,
        bits_per_param=c.bits_per_param,
        train_bits_per_token=c.train_bits_per_token,
        heldout_bits_per_token=c.heldout_bits_per_token,
        mia_f1=c.mia_f1,
        mia_auc=c.mia_auc,
        extraction_rate=c.extraction_rate,
        predicted_mia_f1=cap.predicted_mia_f1(c.params, c.n_samples),
    )


def capacities(cells: list[CapacityCell]) -> list[ArchitectureCapacity]:
    """Per architecture and precision: see core.measures.capacity.capacity_by_architecture (seeds kept)."""
    return [ArchitectureCapacity(**a) for a in cap.capacity_by_architecture(cells)]


def grid_read(session: Session, audit: Audit) -> CapacityGridRead:
    cells = repository.cells(session, audit.id)
    return CapacityGridRead(
        audit_id=audit.id, status=audit.status, cells=[cell_read(c) for c in cells], capacity=capacities(cells)
    )


def text_results(session: Session, audit: Audit, limit: int) -> TextResultsRead:
    rows = repository.texts_by_memorization(session, audit.id, limit)
    done = audit.status == AuditStatus.SUCCEEDED
    total = sum(t.memorized_bits or 0.0 for t in repository.texts(session, audit.id)) if done else None
    samples = [
        TextSampleRead(
            position=t.position,
            text=t.text,
            nll_model_bits=t.nll_target_bits,
            nll_reference_bits=t.nll_reference_bits,
            memorized_bits=t.memorized_bits,
            rarity=t.rarity,
        )
        for t in rows
    ]
    return TextResultsRead(audit_id=audit.id, status=audit.status, total_memorized_bits=total, samples=samples)


def predict(params: float, samples: float) -> Prediction:
    return Prediction(
        params=params,
        samples=samples,
        x=cap.MIA_X_SCALE * samples / params,
        predicted_f1=cap.predicted_mia_f1(params, samples),
        constants={"c1": cap.MIA_C1, "c2": cap.MIA_C2, "c3": cap.MIA_C3, "x_scale": cap.MIA_X_SCALE},
    )
