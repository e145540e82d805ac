"""How long a default fit takes (``benchmarks/fit_time.py``) against its target."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from .._common import cpu_label
from ..protocols import ARM_LABELS, ENDPOINTS
from ._format import DASH, md_table
from ._records import read_json


def fit_time_section(results_dir: Path, out_dir: Path) -> Tuple[Optional[str], dict]:
    """The default fit's wall time per endpoint (``benchmarks/fit_time.py``) against its target."""
    recs = []
    for path in sorted((Path(results_dir) / "fit_time").glob("*/*/*.json")):
        rec = read_json(path)
        if rec is not None and rec.get("schema") == "gmnet-fit-time/1":
            recs.append(rec)
    if not recs:
        return None, {}
    # One row per host too: the same fit differs between hosts more than between the variants; and
    # per thread count and member count, which the row shows once; and apart where some of one
    # host's records ran today's defaults and others not (a re-timing cut short)
    groups: Dict[Tuple, List[dict]] = defaultdict(list)
    for rec in recs:
        groups[rec["arm"], rec["endpoint"], rec.get("variant") or "", host(rec["hardware"]), rec["torch_threads"],
               rec["n_estimators"], other_defaults(rec["arm"], rec["endpoint"], [rec]) or "",
               rec["hardware"].get("gmnet_path") or ""].append(rec)  # (the C++ kernels, or `--eager`)
    rows, summary = [], {}
    for (arm, name, variant, where, _, _, stale, path), group in sorted(groups.items(), key=lambda kv: (
            kv[0][0], ENDPOINT_ORDER.get(kv[0][1], 99), kv[0][2], -min(r["fit_seconds"] for r in kv[1]))):
        secs = [r["fit_seconds"] for r in group]
        # a variant (e.g. the network alone, timed beside the defaults) is for comparison: no target;
        # nor a default fit of defaults that have changed since. (A variant's own change shows in
        # what differs from today's defaults too, beside any default changed since.)
        stale = stale or None  # (the group's key: what its records ran otherwise than today's defaults)
        target = None if variant or stale else group[0].get("target_seconds")
        worst = max(secs)
        within = (f"— (ran, against today's defaults: {stale})" if variant and stale
                  else f"— (ran other defaults than today's: {stale})" if stale else DASH if target is None
                  else "yes" if worst <= target else f"**no** (+{worst - target:.0f} s)")
        load = max(r["load_average_before"][0] for r in group)
        hw = group[0]["hardware"]
        rows.append([ARM_LABELS.get(arm, arm) + (f", {variant}" if variant else ""), ENDPOINTS[name].label,
                     str(group[0]["n_train"]),
                     ", ".join(f"{s:.0f}" for s in secs), DASH if target is None else str(target), within,
                     str(group[0]["n_estimators"]), str(group[0]["torch_threads"]), f"{load:.2f}",
                     cpu_label(hw), platform(hw), path or DASH])
        summary[f"{arm}:{name}" + (f":{variant}" if variant else "") + f"@{where}" + (f" [ran {stale}]" if stale else "")
                + (f" [{path}]" if path and not path.startswith("fused") else "")] = {
            "fit_seconds": secs, "target_seconds": target, "within": worst <= target if target else None}
    text = md_table(["Arm", "Endpoint", "train molecules", "fit s (per seed)", "target s", "within target",
                     "members", "threads", "load avg (1 min) before", "CPU", "host (platform)", "Chem-GMNet path"], rows)
    return text, summary


ENDPOINT_ORDER = {name: i for i, name in enumerate(ENDPOINTS)}


def other_defaults(arm: str, endpoint: str, group: List[dict]) -> Optional[str]:
    """How the default fits of ``group`` ran with other parameters than the estimators' defaults
    today (where it ran and its seed aside), or None: a default changed since makes them stale."""
    from .. import _common as C

    from .._common import HOW_A_FIT_RUNS

    left_out = ("callbacks", "random_state", *HOW_A_FIT_RUNS)  # its seed, and how (not what) a fit runs
    defaults = {k: v for k, v in C.estimator_class(arm, ENDPOINTS[endpoint])().get_params(deep=False).items()
                if k not in left_out}
    for rec in group:
        if not rec.get("hyperparameters"):  # (not recorded: not checked)
            continue
        differ = C.params_differ({k: v for k, v in rec["hyperparameters"].items() if k not in left_out}, defaults)
        if differ:
            return differ
    return None


def host(hw: dict) -> str:
    """The platform string without its common tail, and the CPU where it differs: machines that
    share a CPU model name (e.g. "AMD EPYC") can be different hosts, and so can machines that share
    a platform string (an AMD and an Intel host both said "fc-v657"); times from two hosts are not
    comparable."""
    cpu = hw.get("cpu_model") or hw.get("cpu")
    if cpu is not None and hw.get("cpu_isa"):  # (one model name, other vector units: other hosts)
        cpu += f" ({hw['cpu_isa']})"
    return platform(hw) if cpu is None else f"{platform(hw)}; {cpu}"


def platform(hw: dict) -> str:
    return str(hw.get("platform") or "?").replace("-x86_64-with-", ", ").replace("Linux-", "")


FIT_TIME_INTRO = """\
Wall time of `fit` for the estimators with their defaults, called as a user would
(`GMNetRegressor(random_state=s).fit(X_train, y_train)`: the internal scaffold split picks the
epochs kept), on the training part of the DeepChem scaffold split, written by
`python -m benchmarks.fit_time --threads 2` run alone on the machine (the load average before
each fit shows whether anything else ran: the previous fit's two threads account for about 2).
The C++ kernels are built before the clock starts; since 2026-12-01 the descriptors' worker pool
and the scaffold cache are reset before each fit, as a user's fresh process has them (earlier
records' seeds after the first found them warm, a few seconds). Rows "network alone" are the same fit with
`forest=False` (`--without-forest`), timed on the same machine to show the forest's share; rows
"max_epochs=30" are the defaults before recipe round eight (30 epochs). Times compare only
within one host (one row per CPU and platform): several hosts of this project share the CPU name
"AMD EPYC", an Intel and an AMD host share a platform string, and they differ in speed."""
