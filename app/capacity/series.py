"""Plot-ready series of a capacity audit: memorized bits against N per architecture (with its capacity
plateau), bits/parameter against parameters, and each cell's training curve (bits/param against time)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.capacity import repository
from app.capacity.schemas import BitsPerParamPoint, CapacitySeries, MemorizedSeries, SeriesPoint, TrainingCurve
from app.capacity.service import arch_label, capacities
from app.db.models import Audit
from app.db.models.capacity import CapacityCell


def memorized_vs_n(cells: list[CapacityCell]) -> list[MemorizedSeries]:
    groups: dict[tuple[str, str, int], list[CapacityCell]] = {}
    for c in cells:
        if c.memorized_bits is not None:
            groups.setdefault((arch_label(c), c.precision, c.seed), []).append(c)
    out = []
    for (label, precision, seed), members in sorted(groups.items(), key=lambda kv: (kv[1][0].params, kv[0])):
        members.sort(key=lambda c: c.n_samples)
        points = [
            SeriesPoint(n=c.n_samples, memorized_bits=c.memorized_bits or 0.0, entropy_bits=c.entropy_bits)
            for c in members
        ]
        out.append(
            MemorizedSeries(
                architecture=label,
                precision=precision,
                params=members[0].params,
                seed=seed,
                points=points,
                capacity_bits=max(p.memorized_bits for p in points),
            )
        )
    return out


def training_curves(cells: list[CapacityCell]) -> list[TrainingCurve]:
    out = []
    for c in cells:
        curve = c.curve or []
        out.append(
            TrainingCurve(
                position=c.position,
                label=f"{arch_label(c)} {c.precision} N={c.n_samples} seed={c.seed}",
                steps=[int(p[0]) for p in curve],
                seconds=[float(p[1]) for p in curve],
                bits_per_param=[float(p[2]) / c.params for p in curve],
            )
        )
    return out


def series(session: Session, audit: Audit) -> CapacitySeries:
    cells = repository.cells(session, audit.id)
    per_param = [
        BitsPerParamPoint(
            architecture=a.architecture, precision=a.precision, params=a.params, bits_per_param=a.bits_per_param
        )
        for a in sorted(capacities(cells), key=lambda a: a.params)
        if a.bits_per_param is not None
    ]
    return CapacitySeries(
        memorized_vs_n=memorized_vs_n(cells), bits_per_param=per_param, training_curves=training_curves(cells)
    )
