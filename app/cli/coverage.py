"""`memaudit datasets …`: add, list, show, delete datasets; probe one with a model (a coverage audit);
compare models on one dataset. Through the one client (app/cli/client.py): this machine's database and queue, or a
running API with --api-url/--api-key, as `memaudit audit`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from app.cli.client import DatasetUpload, add_client_arguments, make_client
from app.cli.output import failure_line, wait
from app.coverage.formats import FORMATS, TARGETS
from app.db.vocabulary import AuditStatus
from app.errors import InvalidInput


def _mapping(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    raw = Path(text[1:]).read_text() if text.startswith("@") else text
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise InvalidInput("--mapping", "--mapping must be a JSON object keyed by items, users, interactions")
    return value


def cmd_add(args: argparse.Namespace) -> int:
    client = make_client(args)
    files = [
        DatasetUpload(target, getattr(args, target), getattr(args, f"{target}_format"))
        for target in TARGETS
        if getattr(args, target) is not None
    ]
    print_dataset(client.add_dataset(args.name, files, _mapping(args.mapping)))
    return 0


def print_dataset(dataset: dict[str, Any], out: Any = None) -> None:
    out = out or sys.stdout
    print(f"dataset {dataset['id']}  {dataset['name']}  ({dataset['size_bytes']} bytes)", file=out)
    for f in dataset["files"]:
        print(
            f"  {f['target']:<13} {f['filename']:<24} {f['format']:<9} rows {f['rows']:>9}  malformed {f['malformed']}",
            file=out,
        )
        for p in f["problems"][:5]:
            print(f"      line {p['line']}: {p['reason']}", file=out)


def cmd_list(args: argparse.Namespace) -> int:
    for dataset in make_client(args).datasets():
        print_dataset(dataset)
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    deleted = make_client(args).delete_dataset(args.dataset_id)
    print(f"deleted dataset {args.dataset_id} ({deleted['records_deleted']} records)")
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    client = make_client(args)
    options = {"k": args.k, "sample": args.sample, "buckets": args.buckets}
    payload = {
        "kind": "coverage",
        "model": args.model,
        "dataset_id": args.dataset_id,
        "target": args.target,
        "options": {k: v for k, v in options.items() if v is not None},
    }
    audit_id = client.submit(payload)
    audit = wait(client, audit_id, f"coverage {args.target}", quiet=args.json)
    if args.json:
        print(json.dumps(audit, indent=1))
    elif audit["status"] != AuditStatus.SUCCEEDED:
        print(f"memaudit: {failure_line(audit, client.local)}", file=sys.stderr)
    else:
        print_coverage(audit)
    return 0 if audit["status"] == AuditStatus.SUCCEEDED else 1


def print_coverage(audit: dict[str, Any], out: Any = None) -> None:
    out = out or sys.stdout
    s = audit["summary"]
    print(f"audit {audit['id']}  model {audit['model']}  target {s['target']}  k={s['k']}", file=out)
    print(
        f"coverage {s['coverage']:.4f}  ({s['matched']}/{s['probed']} records reproduced exactly; "
        f"mean fuzzy ratio {s['mean_char_ratio']:.3f})",
        file=out,
    )
    print(f"{'bucket':>6}  {'popularity':>17}  {'probed':>7}  {'matched':>7}  {'coverage':>8}", file=out)
    for b in s["buckets"]:
        span = f"{b['low']:g}–{b['high']:g}"
        print(f"{b['bucket']:>6}  {span:>17}  {b['probed']:>7}  {b['matched']:>7}  {b['coverage']:>8.4f}", file=out)
    print(f"matched records: /audits/{audit['id']}/records?matched=true", file=out)


def cmd_compare(args: argparse.Namespace) -> int:
    rows = make_client(args).coverage_comparison(args.dataset_id, args.target)["rows"]
    width = max([5, *(len(row["model"]) for row in rows)])
    print(f"{'model':<{width}} {'target':<12} {'k':>2} {'probed':>7} {'coverage':>8}  by bucket (rare → popular)")
    for row in rows:
        cov = "-" if row["coverage"] is None else f"{row['coverage']:.4f}"
        buckets = " ".join(f"{c:.2f}" for c in row["bucket_coverage"] or [])
        k = row["k"] if row["k"] is not None else "-"
        probed = row["probed"] if row["probed"] is not None else "-"
        print(f"{row['model']:<{width}} {row['target']:<12} {k:>2} {probed:>7} {cov:>8}  {buckets or row['status']}")
    return 0


def add_dataset_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("datasets")
    ds = p.add_subparsers(dest="datasets_command", required=True)

    a = ds.add_parser("add", help="load a dataset's files (MovieLens .dat, or CSV/TSV with a column mapping)")
    a.add_argument("name")
    for target in TARGETS:
        a.add_argument(f"--{target}", type=Path, help=f"the {target} file")
        a.add_argument(
            f"--{target}-format",
            dest=f"{target}_format",
            choices=FORMATS,
            help="default: from the extension (.dat, .csv, .tsv)",
        )
    a.add_argument("--mapping", help='JSON (or @file): {"items": {"columns": [...], "roles": {"item_id": "..."}}}')
    a.set_defaults(func=cmd_add)

    ls = ds.add_parser("list", help="list datasets")
    ls.set_defaults(func=cmd_list)
    d = ds.add_parser("delete", help="delete a dataset and the coverage outcomes quoting it")
    d.add_argument("dataset_id")
    d.set_defaults(func=cmd_delete)

    pr = ds.add_parser("probe", help="run a coverage audit on one file of a dataset and print coverage by bucket")
    pr.add_argument("dataset_id")
    pr.add_argument("--model", required=True)
    pr.add_argument("--target", choices=TARGETS, default="items")
    pr.add_argument("--k", type=int, default=None, help="example records in the prompt (default 3, as the paper)")
    pr.add_argument("--sample", type=int, default=None, help="probe a seeded sample (default: the full file)")
    pr.add_argument("--buckets", type=int, default=None, help="popularity quantile buckets (default 4)")
    pr.add_argument("--json", action="store_true", help="print the audit as JSON")
    pr.set_defaults(func=cmd_probe)

    c = ds.add_parser("compare", help="coverage of one dataset across models")
    c.add_argument("dataset_id")
    c.add_argument("--target", choices=TARGETS, default=None)
    c.set_defaults(func=cmd_compare)
    for parser in (a, ls, d, pr, c):
        add_client_arguments(parser)
