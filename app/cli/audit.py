"""`memaudit audit` (one subject) and `memaudit export` (the forget set), through the one client (app/cli/client.py)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from app.cli.client import add_client_arguments, make_client
from app.cli.output import NULL_WAIT_SECONDS, duration, failure_line, null_source_line, wait, wait_for_nulls
from app.db.vocabulary import AuditStatus
from app.errors import DomainError, InvalidInput
from app.policies import DEFAULT, NO_NULL, POLICIES
from app.rectification_set.service import POLICIES as RECTIFICATION_POLICIES
from app.settings import get_settings
from app.streaming import END_KEY
from app.subjects import detection
from app.subjects.schemas import SubjectAuditOptions
from core import defaults
from core.catalog import load_catalog
from core.models import with_adapter

DEFAULTS = SubjectAuditOptions()
CLI_PARAPHRASES = defaults.PARAPHRASES  # the command line's, as the API's (benchmarks/ship_null.py reads it)


def template_range() -> str:
    catalog = load_catalog()
    counts = sorted({len(catalog.get(pid).templates) for pid in catalog.pids})
    return f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"


def templates_phrase(paraphrases: int | None) -> str:
    if paraphrases is None:
        return f"every template per property ({template_range()})"
    return f"baseline + {paraphrases} paraphrase{'s' if paraphrases != 1 else ''} per property"


def plan_line(what: str, model: str, options: dict[str, Any]) -> str:
    """What an audit is about to do, with every default that shapes its cost and its shares."""
    if options.get("mode") == "generation":
        gen = options["generation"]
        return (
            f"auditing {what} on {model} by generation: the first {gen['templates']} template(s) per property asked"
            f" {gen['samples']} times each ({gen['form']} form, temperature {gen['temperature']})"
        )
    return (
        f"auditing {what} on {model}: {templates_phrase(options.get('paraphrases'))} (of {template_range()} "
        f"templates), {options.get('counterfactuals', DEFAULTS.counterfactuals)} counterfactuals each, "
        f"alpha {options.get('alpha', DEFAULTS.alpha)}"
    )


def print_table(name: str, facts: dict[str, Any], out: TextIO = sys.stdout) -> None:
    """The verdict first: memorized (the default policy, p <= 0.01 against a null of fictitious people) and the
    p-value; then how the truth ranked (the share of templates that rank it first) and its statistic beside the
    null's mean (what chance gives). Nothing is cut: a regulator reads every label and value whole."""
    rows = facts["facts"]
    width = max([len("property")] + [len(f["label"]) for f in rows])
    value_width = max([len("value")] + [len(", ".join(f["values"])) for f in rows])
    print(f"\n{name}", file=out)
    asked = any(f.get("mode") == "generation" for f in rows)  # an audit has one mode
    first, statistic = ("true answers", "share (null)") if asked else ("ranked 1st", "z (null mean)")
    print(
        f"  {'property':<{width}} {'value':<{value_width}} {'memorized':>10} {'p':>8} {first:>14} {statistic:>14}",
        file=out,
    )
    for f in rows:
        cal = f.get("calibration") or {}
        share = _share_cell(f)
        print(
            f"  {f['label']:<{width}} {', '.join(f['values']):<{value_width}} {_verdict_cell(f):>10}"
            f" {_p_cell(cal):>8} {share:>14} {_z_cell(cal):>14}",
            file=out,
        )


def _share_cell(fact: dict) -> str:
    """How often the truth came first: templates that rank it first (scoring), answers that give it (generation)."""
    if fact.get("mode") == "generation" and fact.get("answers"):
        counts = fact["answers"]["counts"]
        return f"{counts['true']}/{sum(counts.values())} answers"
    return f"{round(fact['share'] * fact['n_templates'])}/{fact['n_templates']} templates"


def _verdict_cell(fact: dict) -> str:
    """yes / not found under the default policy (not found*: ranked first, yet no more than chance and a name
    give), or why there is no verdict (pending, uncalibrated, ...)."""
    calibration = fact.get("calibration") or {}
    if calibration.get("p_value") is None:
        return calibration.get("status") or "-"
    if calibration.get("memorized"):
        return "yes"
    return "not found*" if fact.get("share") and fact.get("mode") != "generation" else "not found"


def ranked_first_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Each fact a template ranks first that the verdict does not call memorized, explained (a bare 'no' beside
    '3/3 templates' reads as a bug)."""
    out = []
    for f in rows:
        cal = f.get("calibration") or {}
        if cal.get("memorized") or cal.get("p_value") is None or not f.get("share") or f.get("mode") == "generation":
            continue
        hits = round(f["share"] * f["n_templates"])
        mean = cal.get("null_mean")
        beside = f" (z {cal['statistic']:.2f}, null mean {mean:.2f})" if mean is not None else ""
        out.append(
            f"* {f['label']} = {', '.join(f['values'])}: ranked 1st under {hits}/{f['n_templates']} templates, yet"
            f" p {_p_cell(cal)}{beside}: invented people audited the same way rank as high this often, so it is not"
            " found memorized"
        )
    return out


def verdict_notes(model: str, rows: list[dict[str, Any]]) -> list[str]:
    """What the table's verdicts are worth, said under it: the null's mean (name inference), and how many facts
    the test misses on this model (app.subjects.detection)."""
    notes = []
    if any((f.get("calibration") or {}).get("null_mean") is not None for f in rows):
        notes.append(f"z (null mean): {detection.NAME_INFERENCE}.")
    if any((f.get("calibration") or {}).get("p_value") is not None for f in rows):
        line = detection.miss_line(model, [f["property"] for f in rows])
        notes.append(f"{line[:1].upper()}{line[1:]}.")
    return notes


def _p_cell(calibration: dict | None) -> str:
    """The fact's p-value against the null of its shape, or '-' while there is none."""
    if not calibration or calibration.get("p_value") is None:
        return "-"
    p = calibration["p_value"]
    return f"{p:.3f}" if p >= 0.001 else f"{p:.0e}"


def _z_cell(calibration: dict) -> str:
    """The verdict statistic (truth z) with the null's mean beside it: a statistic is read against chance."""
    z, mean = calibration.get("statistic"), calibration.get("null_mean")
    if z is None:
        return "-"
    return f"{z:.2f} ({mean:.2f})" if mean is not None else f"{z:.2f}"


SHARE_NOTE = (
    "memorized: yes when p <= 0.01, i.e. at most 1 % of facts about fictitious people (the null: audited the same"
    " way on the same model) look at least as known, and not found otherwise (the false-alarm rate; the miss rate is"
    " below); ranked 1st: the templates (baseline and paraphrases) under which a true"
    " value ranks first; z: the true value's calibrated score in standard deviations above the counterfactuals',"
    " averaged over templates, with the null's mean beside it"
)


def typical_names_line(rows: list[dict[str, Any]]) -> str | None:
    """The API's caveat on the table's p-values (``calibration.caveat``: the properties whose null is measured to
    understate the false-positive rate for ordinary names), said once under the table with the properties it holds
    for."""
    caveats: dict[str, list[str]] = {}
    for f in rows:
        caveat = (f.get("calibration") or {}).get("caveat")
        if caveat:
            caveats.setdefault(caveat, []).append(f["label"])
    return "\n".join(f"{', '.join(dict.fromkeys(labels))}: {caveat}." for caveat, labels in caveats.items()) or None


def audit_options(args: argparse.Namespace) -> dict[str, Any]:
    options = {
        "paraphrases": None if args.all_templates else args.paraphrases,
        "counterfactuals": args.counterfactuals,
        "alpha": args.alpha,
        "context": args.context,
    }
    if getattr(args, "mode", defaults.MODE) == "generation":
        options |= {
            "mode": "generation",
            "generation": {
                "samples": args.samples,
                "templates": args.templates,
                "temperature": args.temperature,
                "max_tokens": args.max_tokens,
                "form": args.prompt_form,
            },
        }
    return options


def cmd_audit(args: argparse.Namespace) -> int:
    if not args.fact and not args.wikidata_id:
        raise InvalidInput("--fact", "give --fact PROPERTY=VALUE (repeatable), or --wikidata-id to fetch the facts")
    if not args.name and not args.wikidata_id:
        raise InvalidInput("--name", "give --name (it can only be looked up with --wikidata-id)")
    client = make_client(args)
    subject = {"name": args.name, "wikidata_id": args.wikidata_id, "facts": args.fact or []}
    options = audit_options(args)
    adapter = os.path.abspath(os.path.expanduser(args.adapter)) if args.adapter else None
    model = with_adapter(args.model or get_settings().default_model, adapter)
    payload = {
        "kind": "subject",
        "model": model,
        "subject": {k: v for k, v in subject.items() if v is not None},
        "options": options,
    }
    label = args.name or args.wikidata_id
    if not args.json:
        n = len(args.fact or [])
        what = f"{label} ({n} fact{'s' if n != 1 else ''})" if n else f"{label} (facts from Wikidata)"
        print(plan_line(what, model, options), file=sys.stderr, flush=True)
    audit_id = client.submit(payload)
    audit = wait(client, audit_id, label, quiet=args.json)
    if audit["status"] != AuditStatus.SUCCEEDED:
        print(f"memaudit: {failure_line(audit, client.local)}", file=sys.stderr)
        return 1
    facts = wait_for_nulls(client, audit_id, args.null_wait, quiet=args.json)
    if args.json:
        print(json.dumps({"audit": audit, "facts": facts["facts"]}, indent=2))
    else:
        print_table(label, facts)
        if usage := ((audit.get("summary") or {}).get("generation") or {}).get("usage"):
            print(
                f"\nmode generation: answers read per fact in `share`; the audit cost {usage['queries']} queries,"
                f" {usage['samples']} answers, {usage['completion_tokens']} generated tokens"
            )
        for line in ranked_first_lines(facts["facts"]):
            print(line)
        print(f"\n{SHARE_NOTE}.")
        for note in verdict_notes(model, facts["facts"]):
            print(note)
        if caveat := typical_names_line(facts["facts"]):
            print(caveat)
        if source := null_source_line(facts):
            print(source)
    return 0


def counted(chunks: Iterable[str], out: TextIO, fmt: str, end: dict[str, Any] | None = None) -> int:
    """Write the export's text to ``out`` and return how many records it held (CSV: rows after the header;
    a quoted value may span lines, so CSV is parsed, not line-counted). A jsonl export's end marker goes to
    ``end``."""

    def lines() -> Iterator[str]:
        pending = ""
        for chunk in chunks:
            out.write(chunk)
            pending += chunk
            *complete, pending = pending.split("\n")
            for line in complete:
                yield line + "\n"
        if pending:
            yield pending

    if fmt == "csv":
        return max(0, sum(1 for _ in csv.reader(lines())) - 1)
    records = [line for line in lines() if line.strip()]
    if fmt == "jsonl":  # a complete jsonl export ends with its marker line (app.streaming.END_KEY)
        if not records or not records[-1].startswith(f'{{"{END_KEY}"'):
            raise DomainError("the export ended before its end marker: it was cut; run it again")
        if end is not None:
            end.update(json.loads(records[-1])[END_KEY])
        return len(records) - 1
    return len(records)


def cmd_properties(args: argparse.Namespace) -> int:
    """The catalog as GET /properties serves it: what `--fact PROPERTY=VALUE` accepts, one property a line."""
    rows = make_client(args).properties()
    if args.json:
        print(json.dumps(rows))
        return 0
    widths = [max(len(str(r[k])) for r in rows) for k in ("pid", "label", "value_type")]
    print(f"{'id':<{widths[0]}}  {'label':<{widths[1]}}  {'values':<{widths[2]}}  templates  pool")
    for r in rows:
        print(
            f"{r['pid']:<{widths[0]}}  {r['label']:<{widths[1]}}  {r['value_type']:<{widths[2]}}"
            f"  {r['templates']:>9}  {r['pool_size']:>4}"
        )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    if args.rectification:
        return export_rectification(args)
    policy = POLICIES[args.policy]  # argparse took it from POLICIES' names
    lack = policy.missing(vars(args))
    if lack is not None:
        option = "--" + lack[0].replace("_", "-")
        raise InvalidInput(option, f"--policy {policy.name} needs {option} ({lack[1]})")
    client = make_client(args)
    names = ("format", "model", "subject_id", "audit_id", "property", "policy", "min_share", "min_z", "audits")
    params = {name: getattr(args, name) for name in names}  # the query parameters of GET /forget-set
    chunks = client.forget_set(params)
    end: dict[str, Any] = {}
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            n = counted(chunks, out, args.format, end)
    else:
        n = counted(chunks, sys.stdout, args.format, end)
        sys.stdout.flush()
    if args.format != "jsonl" and policy.p_values:  # csv and tofu carry no end marker: ask for it alone
        counted(client.forget_set(params | {"format": "jsonl", "end_only": True}), io.StringIO(), "jsonl", end)
    print(f"wrote {n} record{'s' if n != 1 else ''} to {args.output or 'standard output'}", file=sys.stderr)
    if end.get("pending"):
        print(pending_line(end, args.policy), file=sys.stderr)
    elif n == 0 and policy.p_values:  # every fact was judged, none selected: say so, an empty file is a verdict
        print(
            f"no fact passed --policy {policy.name} against its null: none is memorized by that test;"
            " --policy lenient exports what a template ranks first, with no error control",
            file=sys.stderr,
        )
    return 0


def export_rectification(args: argparse.Namespace) -> int:
    """`memaudit export --rectification`: GET /rectification-set, the false values models assert (issue 42)."""
    if args.policy not in RECTIFICATION_POLICIES:
        raise InvalidInput("--policy", f"--rectification takes --policy {' or '.join(RECTIFICATION_POLICIES)}")
    if args.format == "tofu":
        raise InvalidInput("--format", "--rectification writes jsonl or csv")
    names = ("format", "model", "subject_id", "audit_id", "property", "policy", "audits")
    params = {name: getattr(args, name) for name in names}
    chunks = make_client(args).forget_set(params, "/rectification-set")
    end: dict[str, Any] = {}
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            n = counted(chunks, out, args.format, end)
    else:
        n = counted(chunks, sys.stdout, args.format, end)
        sys.stdout.flush()
    print(f"wrote {n} record{'s' if n != 1 else ''} to {args.output or 'standard output'}", file=sys.stderr)
    if end.get("pending"):
        why = ", ".join(f"{k} {v}" for k, v in sorted(end["pending_by_status"].items()))
        print(f"{end['pending']} fact(s) without a misattribution verdict left out ({why})", file=sys.stderr)
    return 0


def pending_line(end: dict[str, Any], policy: str) -> str:
    """What an export left out for want of a null, from its end marker: how many facts, why, and what to do."""
    pending, by_status = end["pending"], end.get("pending_by_status") or {}
    eta = end.get("pending_eta_seconds")
    when = f", their null done in ≈ {duration(eta)}" if eta is not None else ""
    why = ", ".join(f"{k} {v}" for k, v in sorted(by_status.items()))
    todo = (
        "run `memaudit serve` (or a worker) until their null is done"
        if set(by_status) <= {"pending"}
        else "submit a null audit for their configuration (kind null), or audit them again"
    )
    return (
        f"{pending} fact{'s' if pending != 1 else ''} pending calibration ({why}{when}) left out by --policy {policy}:"
        f" {todo}, or --policy {NO_NULL} exports them uncalibrated"
    )


def _parse_fact(text: str) -> dict[str, str]:
    pid, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError("a fact is PROPERTY=VALUE, e.g. P106=physicist")
    return {"property": pid.strip(), "value": value.strip()}


def add_audit_options(p: argparse.ArgumentParser, paraphrases: int = defaults.PARAPHRASES) -> None:
    """Options shared by `audit` and `demo`; their defaults are shown by --help."""
    p.add_argument(
        "--paraphrases",
        type=int,
        default=paraphrases,
        help=f"paraphrased templates per property besides the baseline (a property has {template_range()} templates;"
        f" the API's default is also {defaults.PARAPHRASES}; --all-templates: every one)",
    )
    p.add_argument("--all-templates", action="store_true", help="probe every template (slower: ~4x the default)")
    p.add_argument(
        "--counterfactuals",
        type=int,
        default=DEFAULTS.counterfactuals,
        help="counterfactual values ranked against each true value",
    )
    p.add_argument("--alpha", type=float, default=DEFAULTS.alpha, help="weight of the similar-name calibration")
    add_generation_options(p)
    p.add_argument(
        "--null-wait",
        type=float,
        default=NULL_WAIT_SECONDS,
        help="seconds to wait for the null the p-values need (said up front; 0: do not wait). A null not done by "
        "then goes on under `memaudit serve`, a worker, or the next command, from what it has stored",
    )
    p.add_argument(
        "--model",
        default=None,
        help=f"registered model or hf:<path> (default: MEMAUDIT_DEFAULT_MODEL, now {get_settings().default_model})",
    )


def add_generation_options(p: argparse.ArgumentParser) -> None:
    """--mode and how mode generation asks (the API's options.mode and options.generation)."""
    p.add_argument(
        "--mode",
        choices=["scoring", "generation"],
        default=defaults.MODE,
        help="scoring: rank the true value by the log-probability of sentences; generation: ask the model and count"
        " the answers that give a true value (judged by a null of fictitious people asked the same way)",
    )
    p.add_argument(
        "--samples", type=int, default=defaults.GENERATION_SAMPLES, help="--mode generation: answers per prompt (K)"
    )
    p.add_argument(
        "--templates",
        type=int,
        default=defaults.GENERATION_TEMPLATES,
        help="--mode generation: templates asked, the baseline first (--paraphrases is scoring's)",
    )
    p.add_argument(
        "--temperature", type=float, default=defaults.GENERATION_TEMPERATURE, help="--mode generation: temperature"
    )
    p.add_argument(
        "--max-tokens", type=int, default=defaults.GENERATION_MAX_TOKENS, help="--mode generation: tokens per answer"
    )
    p.add_argument(
        "--prompt-form",
        choices=["completion", "chat"],
        default=defaults.GENERATION_FORM,
        help="--mode generation: completion (the templates' text before the value) or chat (the property's question)",
    )


def add_audit_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit")
    p.add_argument("--name", default=None, help="the person's name (default with --wikidata-id: Wikidata's label)")
    p.add_argument("--fact", action="append", type=_parse_fact, default=None, help="PROPERTY=VALUE, repeatable")
    p.add_argument("--wikidata-id", default=None, help="e.g. Q7186; without --fact the facts come from Wikidata")
    add_audit_options(p)
    p.add_argument(
        "--adapter",
        default=None,
        help="a PEFT (LoRA) adapter directory to audit on --model (e.g. hf:<base>): the model becomes "
        "'<model>+adapter:<absolute path>', the name the API takes too",
    )
    p.add_argument("--context", action="store_true", help="also probe contextualized canaries")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_client_arguments(p)
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("properties")
    p.add_argument("--json", action="store_true", help="print the list as JSON (GET /properties)")
    add_client_arguments(p)
    p.set_defaults(func=cmd_properties)
    _add_export_command(sub)


def _add_export_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export")
    p.add_argument(
        "--format",
        choices=["jsonl", "csv", "tofu"],
        default="jsonl",
        help="tofu: question/answer/paraphrased_answer/perturbed_answer JSON lines",
    )
    p.add_argument(
        "--policy",
        choices=list(POLICIES),
        default=DEFAULT,
        help=POLICIES.described().replace("%", "%%") + " (max_p = 0.01, q = 0.05)",
    )
    p.add_argument("--min-share", type=float, default=None, help="with --policy share: 0 to 1")
    p.add_argument(
        "--min-z",
        type=float,
        default=None,
        help=f"min z̄* over rank-1 templates ({defaults.CHANCE_Z_PHRASE})",
    )
    p.add_argument("--model", default=None)
    p.add_argument("--subject-id", type=int, default=None)
    p.add_argument("--audit-id", default=None)
    p.add_argument("--property", default=None)
    p.add_argument(
        "--audits",
        choices=["newest", "all"],
        default="newest",
        help="newest: a subject audited again is exported once, by its newest audit; all: every audit's facts",
    )
    p.add_argument(
        "--rectification",
        action="store_true",
        help="export the rectification set instead (GET /rectification-set: false values the model asserts about"
        " people, GDPR Art. 16); --policy pvalue or bh, --format jsonl or csv",
    )
    p.add_argument("--output", "-o", default=None, help="file to write (default: standard output)")
    add_client_arguments(p)
    p.set_defaults(func=cmd_export)
