"""Move a protocol's records to another protocol whose definition says what they ran.

    python -m benchmarks.relabel tuned tuned_avg1 --why "made as 'tuned' while ..." [--dry-run]

A protocol read from the estimators' defaults (``tuned``) changes meaning when a default does. Its
records are then moved to a protocol that spells out the old default (``_previous_defaults_protocol``),
and records made under a candidate protocol that the defaults have taken can become the defaults'
own. A moved record gets the new protocol's name and definition and a ``relabelled`` entry saying
from where, to where and why (an earlier entry is kept inside it); nothing it measured changes.

Every record is checked before any is moved: the estimator parameters it ran with must be those its
new protocol builds today (``stale_parameters``, the check of the report and of ``run --resume``),
and no other record may exist at its new path (one equal to the moved record, left by a move cut
short, is taken as moved), nor two records move to one path. One record that fails stops the whole
move.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from . import _common as C
from .protocols import ARMS, PROTOCOLS

#: What a relabel rewrites; everything else in a record stays as the run wrote it.
FIELDS_CHANGED = ("protocol", "protocol_base", "protocol_definition")


def relabelled_record(record: dict, to_protocol: str, why: str) -> dict:
    """``record`` under protocol ``to_protocol``: its name and definition, and a ``relabelled``
    entry (an earlier one kept as its ``earlier``)."""
    from_protocol = record["protocol"]
    entry = {"from_protocol": from_protocol, "to_protocol": to_protocol, "why": why,
             "fields_changed": list(FIELDS_CHANGED)}
    if record.get("relabelled"):
        entry["earlier"] = record["relabelled"]
    out = dict(record)
    out.update(protocol=to_protocol, protocol_base=to_protocol,
               protocol_definition=C.jsonable(PROTOCOLS[to_protocol].to_dict()), relabelled=entry)
    return out


def plan(results_dir: Path, from_protocol: str, to_protocol: str, why: str) -> List[Tuple[Path, Path, dict]]:
    """(old path, new path, new record) for every record of ``from_protocol``'s transformer arms,
    or ValueError naming each record that cannot move."""
    for name in (from_protocol, to_protocol):
        if name not in PROTOCOLS or "@" in name:
            raise ValueError(f"unknown protocol {name!r}: a relabel moves records between protocols of "
                             "benchmarks/protocols.py")
    if from_protocol == to_protocol:
        raise ValueError("the two protocols are the same")
    if not why.strip():
        raise ValueError("say why the records move (--why): the record keeps it")
    moves, problems, planned = [], [], {}
    for arm in ARMS:
        for path in sorted((Path(results_dir) / from_protocol / arm).glob("*/*.json")):
            record, defect = C.read_record(path)
            if defect or record.get("protocol") != from_protocol:
                problems.append(f"{path}: {defect or 'a record of protocol %r' % record.get('protocol')}")
                continue
            if not record.get("hyperparameters"):
                problems.append(f"{path}: holds no estimator parameters, so nothing shows what it ran")
                continue
            new = relabelled_record(record, to_protocol, why)
            differ = C.stale_parameters(new)
            if differ:
                problems.append(f"{path}: ran other parameters than {to_protocol!r} builds: {differ}")
                continue
            target = C.result_path(results_dir, to_protocol, arm, record["endpoint"], record["seed"],
                                   record.get("k"), record.get("L"))
            if target in planned:
                problems.append(f"{path}: {planned[target]} moves to {target} too (two records of one run)")
                continue
            planned[target] = path
            if target.exists() and C.read_record(target)[0] != C.jsonable(new):  # (the same: an interrupted move's)
                problems.append(f"{path}: {target} exists")
                continue
            moves.append((path, target, new))
    if problems:
        raise ValueError(f"{len(problems)} record(s) cannot move, so none is moved:\n  " + "\n  ".join(problems))
    if not moves:
        raise ValueError(f"no records of protocol {from_protocol!r} under {Path(results_dir) / from_protocol}")
    return moves


def relabel(results_dir: Path, from_protocol: str, to_protocol: str, why: str) -> List[Path]:
    """Move every record (``plan`` checks all of them first); the new paths."""
    moves = plan(results_dir, from_protocol, to_protocol, why)
    for old, new, record in moves:  # (written before the old one goes: a move cut short is finished by a rerun)
        C.write_json_atomic(new, record)
        old.unlink()
    top = Path(results_dir) / from_protocol
    for folder in sorted({parent for old, _, _ in moves for parent in old.parents if top in (parent, *parent.parents)},
                         key=lambda p: -len(p.parts)):  # the emptied folders, deepest first, up to the protocol's
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    return [new for _, new, _ in moves]


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.relabel", description=__doc__.split("\n\n")[0])
    p.add_argument("from_protocol")
    p.add_argument("to_protocol")
    p.add_argument("--why", required=True, help="why the records move (kept in each record)")
    p.add_argument("--results-dir", default=str(C.DEFAULT_RESULTS_DIR))
    p.add_argument("--dry-run", action="store_true", help="check every record and list the moves, move nothing")
    args = p.parse_args(argv)
    try:
        moves = plan(Path(args.results_dir), args.from_protocol, args.to_protocol, args.why)
        if not args.dry_run:
            relabel(Path(args.results_dir), args.from_protocol, args.to_protocol, args.why)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for old, new, _ in moves:
        print(f"{'would move' if args.dry_run else 'moved'} {old} -> {new}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
