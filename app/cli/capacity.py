"""`memaudit capacity …`: plot an audit's series (PNG or SVG), print its grid, predict MIA F1 from the law.

memaudit capacity plot AUDIT_ID --out capacity.svg            # local database
memaudit capacity plot AUDIT_ID --out capacity.png --api-url http://host:8000 --api-key KEY
memaudit capacity predict --params 124e6 --samples 6.1e6
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from app.capacity.service import predict
from app.cli.client import add_client_arguments, make_client
from app.errors import DomainError, InvalidInput

PLOTS_INSTALL = "pip install 'matplotlib>=3.8'  (or: pip install 'memaudit[plots]')"


def plot_series(data: dict[str, Any], out: Path) -> Path:
    """Draw memorized bits vs N (with each architecture's capacity plateau), bits/param vs parameters,
    and the training curves. The format follows the file suffix (.png or .svg)."""
    if out.suffix.lower() not in (".png", ".svg"):
        raise InvalidInput("--out", f"--out must end in .png or .svg, not {out.suffix or 'nothing'}")
    try:  # optional: only plots need it
        import matplotlib
    except ImportError:
        raise DomainError(f"plots need matplotlib, which is not installed: {PLOTS_INSTALL}") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_n, ax_p, ax_t) = plt.subplots(1, 3, figsize=(16, 4.6))
    for line in data["memorized_vs_n"]:
        xs = [p["n"] for p in line["points"]]
        label = f"{line['architecture']} {line['precision']} ({line['params']:,} params)"
        (drawn,) = ax_n.plot(xs, [p["memorized_bits"] for p in line["points"]], "o-", label=label)
        ax_n.axhline(line["capacity_bits"], color=drawn.get_color(), ls="--", lw=0.8)
        ax_n.plot(xs, [p["entropy_bits"] for p in line["points"]], ":", color=drawn.get_color(), lw=0.8)
    ax_n.set(
        xscale="log",
        xlabel="dataset size N (sequences)",
        ylabel="memorized bits",
        title="memorized bits vs N (dotted: H(D), dashed: capacity)",
    )
    ax_n.legend(fontsize=7)
    for precision in sorted({p["precision"] for p in data["bits_per_param"]}):
        pts = [p for p in data["bits_per_param"] if p["precision"] == precision]
        ax_p.plot([p["params"] for p in pts], [p["bits_per_param"] for p in pts], "o-", label=precision)
    ax_p.set(xscale="log", xlabel="parameters", ylabel="bits / parameter", title="capacity per parameter")
    ax_p.legend(fontsize=7)
    for curve in data["training_curves"]:
        ax_t.plot(curve["seconds"], curve["bits_per_param"], lw=1, label=curve["label"])
    ax_t.set(xlabel="training time (s)", ylabel="memorized bits / parameter", title="training curves")
    if len(data["training_curves"]) <= 8:
        ax_t.legend(fontsize=6)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


def cmd_plot(args: argparse.Namespace) -> int:
    out = plot_series(make_client(args).capacity(args.audit_id, "series"), Path(args.out))
    print(f"wrote {out}")
    return 0


def cmd_grid(args: argparse.Namespace) -> int:
    grid = make_client(args).capacity(args.audit_id, "grid")
    if args.json:
        print(json.dumps(grid, indent=1))
        return 0
    fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    print(
        f"{'arch':14} {'prec':5} {'N':>8} {'seed':>4} {'status':8} {'mem bits':>10} {'share':>6} "
        f"{'bits/param':>10} {'MIA F1':>6} {'AUC':>5} {'law F1':>6}"
    )
    for c in grid["cells"]:
        arch = f"L{c['n_layer']}-d{c['d_model']}-h{c['n_head']}"
        print(
            f"{arch:14} {c['precision']:5} {c['n_samples']:8d} {c['seed']:4d} {c['status']:8} "
            f"{fmt(c['memorized_bits'], '10.0f')} {fmt(c['share_memorized'], '6.3f')} "
            f"{fmt(c['bits_per_param'], '10.3f')} {fmt(c['mia_f1'], '6.3f')} {fmt(c['mia_auc'], '5.3f')} "
            f"{c['predicted_mia_f1']:6.3f}"
        )
    for a in grid["capacity"]:  # capacity = max over N of the seed-mean memorization; each seed's max beside it
        per_seed = ", ".join(f"seed {s['seed']}: {s['capacity_bits']:.0f} at N={s['at_n']}" for s in a["seeds"])
        print(
            f"capacity {a['architecture']} {a['precision']}: {fmt(a['capacity_bits'], '.0f')} "
            f"± {fmt(a['capacity_sd_bits'], '.0f')} bits at N={a['at_n']} (mean over seeds), "
            f"{fmt(a['bits_per_param'], '.3f')} bits/param; {per_seed or 'no cell done'}"
        )
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    print(json.dumps(predict(args.params, args.samples).model_dump(), indent=1))
    return 0


def add_capacity_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("capacity")
    cs = p.add_subparsers(dest="capacity_command", required=True)
    for name, func, help_ in (
        ("plot", cmd_plot, "write the audit's plots as PNG or SVG"),
        ("grid", cmd_grid, "print every cell of the audit's grid"),
    ):
        c = cs.add_parser(name, help=help_)
        c.add_argument("audit_id")
        if name == "plot":
            c.add_argument("--out", "-o", required=True, help="file ending in .png or .svg")
        else:
            c.add_argument("--json", action="store_true")
        add_client_arguments(c)
        c.set_defaults(func=func)
    c = cs.add_parser("predict", help="loss-based MIA F1 from Morris et al.'s scaling law")
    c.add_argument("--params", type=float, required=True)
    c.add_argument("--samples", type=float, required=True)
    c.set_defaults(func=cmd_predict)
