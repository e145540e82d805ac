"""Throughput, kernel-op counts and fast-path accuracy records (``benchmarks/throughput.py``,
``op_count.py``, ``fast_vs_reference.py``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Optional

from ..protocols import ARM_LABELS
from ._format import rel
from ._records import read_json


def _failure_line(message: str) -> str:
    """A failed arm's message in one line: its first line, and where that only wraps another
    exception (a compiler's subprocess error carries a whole traceback), the first raised error's own line."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()] or [""]
    cause = next((ln for ln in lines[1:] if re.match(r"^[A-Za-z_][\w.]*(Error|Exception): ", ln)), None)
    return lines[0] if cause is None else f"{lines[0]} ... {cause}"


def _throughput_table(data: dict) -> str:
    """One row per (dataset, mode): molecules/s of the models, their ratio, peak memory.

    Newer files also time Chem-GMNet on its eager path ("gmnet_eager"), next to the default path
    (named in ``gmnet_path``: the fused kernel of that device when it was available).
    """
    hw = data.get("hardware", {})
    where = hw.get("gpu") or hw.get("cpu", "?")
    eager = any("gmnet_eager" in e.get("train", {}).get("molecules_per_second", {}) for e in data.get("datasets", {}).values())
    # every arm with a figure in some dataset and mode: the optional arms' tables show only these
    measured = {a for e in data.get("datasets", {}).values() for m in ("train", "inference")
                for a in e.get(m, {}).get("molecules_per_second", {})}
    path = data.get("gmnet_path", "eager zonal forms")
    load = hw.get("load_average_1_5_15min")
    device = (f"Device `{data.get('device')}` ({where}; {hw.get('cpu_count', '?')} cores, torch threads "
              f"{hw.get('torch_threads', '?')}, torch {hw.get('torch', '?')}"
              f"{'' if load is None else f'; load average {load[0]:.2f} when it started'}"
              f"{'' if data.get('matmul_precision', 'highest') == 'highest' else '; float32 matmuls and the fused kernels on TF32'})")
    steps = (f", batch {data.get('batch_size')} ({data.get('batching', 'bucketed')} batches: "
             f"{'shuffled, padded to their longest SMILES' if data.get('batching') == 'plain' else 'length-bucketed'}), "
             f"median of {data.get('rounds')} interleaved rounds of {data.get('steps_per_round')} batches")
    lines = [
        f"{device}{steps if data.get('datasets') else ''}, {data.get('timestamp')}. "
        f"Chem-GMNet ran its default path: {path}. Command: `{data.get('command')}`.",
        "",
    ]
    seeds = data.get("esol_seed") or {}
    if "gmnet_graphs" in measured:
        lines += ["The first table's Chem-GMNet is the model called directly (a launch per kernel); the estimators "
                  "run it on CUDA graphs (`cuda_graphs=True`, their default on CUDA): that is the second table's "
                  "\"Chem-GMNet graphs\".", ""]
    if not data.get("datasets"):
        pass  # the ESOL seed timing alone
    elif eager:
        lines += [
            "| data | mean tokens | mode | Chem-GMNet mol/s | Chem-GMNet eager mol/s | ChemBERTa mol/s | ratio (GMNet / ChemBERTa) | ratio, eager | peak memory GMNet / ChemBERTa |",
            "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
    else:
        lines += [
            "| data | mean tokens | mode | Chem-GMNet mol/s | ChemBERTa mol/s | ratio (GMNet / ChemBERTa) | peak memory GMNet / ChemBERTa |",
            "| --- | ---: | --- | ---: | ---: | ---: | --- |",
        ]
    for name, entry in data.get("datasets", {}).items():
        mem = entry.get("peak_memory", {})

        def mib(arm):
            m = mem.get(arm, {})
            v = m.get("peak_gpu_bytes", m.get("rss_growth_during_training_bytes"))
            return "—" if v is None else f"{v / 2**20:.0f} MiB"

        for mode in ("train", "inference"):
            e = entry.get(mode)
            if not e:
                continue
            mps = e["molecules_per_second"]
            tokens = f"{entry.get('batches', {}).get('mean_tokens', float('nan')):.1f}"
            if eager:
                lines.append(
                    f"| {name} | {tokens} | {mode} | {mps['gmnet']:.1f} | {mps['gmnet_eager']:.1f} | {mps['chemberta']:.1f} | "
                    f"{e['ratio_gmnet_over_chemberta']:.2f} | {e['ratio_gmnet_eager_over_chemberta']:.2f} | "
                    f"{mib('gmnet')} / {mib('chemberta')} |"
                )
            else:
                lines.append(
                    f"| {name} | {tokens} | {mode} | {mps['gmnet']:.1f} | "
                    f"{mps['chemberta']:.1f} | {e['ratio_gmnet_over_chemberta']:.2f} | {mib('gmnet')} / {mib('chemberta')} |"
                )
    graph_labels = {"gmnet_graphs": "Chem-GMNet graphs", "gmnet_graphs_bf16": "Chem-GMNet graphs bf16",
                    "gmnet_graphs_triton_readout": "Chem-GMNet graphs, Triton read-outs",
                    "gmnet_graphs_gemm_readout": "Chem-GMNet graphs, Triton read-outs (gemm form)",
                    "chemberta_graphs": "ChemBERTa graphs"}
    graph_arms = [a for a in graph_labels if a in measured]
    if graph_arms:
        lines += ["", "The CUDA-graph arms (`gm/cuda_graphs.py`: each batch shape's forward and backward replayed "
                  "from graphs; `_bf16`: under bf16 autocast), in the same interleaved rounds, against the baseline "
                  "as it ships (eager) and against the baseline on CUDA graphs too:", "",
                  "| data | mode | " + " | ".join(f"{graph_labels[a]} mol/s" for a in graph_arms)
                  + " | " + " | ".join(f"{graph_labels[a]} / ChemBERTa eager | {graph_labels[a]} / ChemBERTa graphs"
                                       for a in graph_arms if a.startswith("gmnet")) + " |",
                  "| --- | --- |" + " ---: |" * (len(graph_arms) + 2 * sum(a.startswith("gmnet") for a in graph_arms))]
        for name, entry in data.get("datasets", {}).items():
            for mode in ("train", "inference"):
                e = entry.get(mode)
                if not e:
                    continue
                mps = e["molecules_per_second"]
                vs_eager, vs_graphs = e.get("ratio_over_chemberta", {}), e.get("ratio_over_chemberta_graphs", {})
                cells = [f"{mps[a]:.0f}" if a in mps else "failed" for a in graph_arms]
                for a in graph_arms:
                    if a.startswith("gmnet"):
                        cells += [f"{vs_eager[a]:.2f}" if a in vs_eager else "—", f"{vs_graphs[a]:.2f}" if a in vs_graphs else "—"]
                lines.append(f"| {name} | {mode} | " + " | ".join(cells) + " |")
    compiled = [a for a in ("gmnet_compiled", "chemberta_compiled") if a in measured]
    if compiled:
        lines += ["", "Under `torch.compile` (`--arms gmnet_compiled chemberta_compiled`: inductor, dynamic shapes, "
                  "compilation in the untimed warm-up), in the same interleaved rounds: does compiling pay, and the "
                  "ratio when both models are compiled:", "",
                  "| data | mode | Chem-GMNet compiled mol/s | ChemBERTa compiled mol/s | Chem-GMNet compiled / as it ships "
                  "| ChemBERTa compiled / as it ships | Chem-GMNet compiled / ChemBERTa compiled |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for name, entry in data.get("datasets", {}).items():
            for mode in ("train", "inference"):
                mps = entry.get(mode, {}).get("molecules_per_second")
                if not mps:
                    continue
                g, c = mps.get("gmnet_compiled"), mps.get("chemberta_compiled")
                cell = lambda v: "failed" if v is None else f"{v:.0f}"  # noqa: E731
                ratio = lambda a, b: "—" if a is None or b is None else f"{a / b:.2f}"  # noqa: E731
                lines.append(f"| {name} | {mode} | {cell(g)} | {cell(c)} | {ratio(g, mps['gmnet'])} | "
                             f"{ratio(c, mps['chemberta'])} | {ratio(g, c)} |")
    if (graph_arms or compiled) and data.get("failed_arms"):
        lines += ["", "Failed arms (the whole message is in the JSON): "
                  + "; ".join(f"`{a}`: {_failure_line(err)}" for a, err in data["failed_arms"].items())]
    if data.get("complete") is False:
        lines += ["", "**Incomplete**: the run was stopped before its end; the rows above are what it had measured."]
    if data.get("datasets"):
        lines.append("")
        lines.append("Train = forward + backward + Adam step. CPU memory is the growth of peak RSS while training "
                     "(measured in a fresh process per model); GPU memory is `torch.cuda.max_memory_allocated`.")
    if seeds:
        lines += ([""] if lines[-1] else []) + ["One ESOL seed under the chemberta3 protocol (100 epochs, plain shuffled batches, best "
                  "validation epoch restored, test scored), the arms one after the other with the same threads:", "",
                  "| arm | seed | wall time | s / epoch | best epoch | test RMSE |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for arm, r in seeds.items():
            label = ARM_LABELS.get(arm.removesuffix("_bf16"), arm) + (", bf16" if arm.endswith("_bf16") else "")
            lines.append(f"| {label} | {r['seed']} | {r['seconds'] / 60:.1f} min ({r['seconds']:.0f} s) | "
                         f"{r['seconds_per_epoch']:.2f} | {r['best_epoch']}/{r['epochs']} | {r['test_rmse']:.3f} |")
        if {"gmnet", "chemberta"} <= seeds.keys():
            lines += ["", f"Wall-time ratio ChemBERTa / Chem-GMNet: "
                          f"{seeds['chemberta']['seconds'] / seeds['gmnet']['seconds']:.2f}."]
    if "packed tokens" in path:
        lines.append("")
        lines.append("On CPU Chem-GMNet runs its position-wise work on the real tokens only (`gm/packing.py`); the "
                     "baseline pads every row to the batch's longest, as Hugging Face's RoBERTa does. On plain "
                     "shuffled batches, where about half the positions are padding, much of the gap is that.")
    return "\n".join(lines)


def fast_vs_reference_section(results_dir: Path, out_dir: Path) -> Optional[str]:
    """Validation curves of the same seeded run on the fast and the reference attention forms."""
    parts = []
    for f in sorted(results_dir.glob("fast_vs_reference*.json")):
        d = read_json(f)
        if d is None:
            continue
        impl = d.get("fast_impl", "parallel")
        fast, ref = d["runs"][impl], d["runs"]["reference"]
        label = {"parallel": "eager zonal forms"}.get(impl, d.get("gmnet_path", impl))
        hw = d.get("hardware", {})
        parts += [
            f"[{f.name}]({rel(f, out_dir)}): {d['dataset']} seed {d['seed']}, Chem-GMNet k=8 L=3, Adam lr 3e-5, "
            f"batch 32, {d['epochs']} epochs, {d.get('dtype', 'float32')}, on `{d['device']}` ({hw.get('gpu') or hw.get('cpu', '?')}); same batches, "
            f"batch layout ({d.get('layout', 'padded')}) and dropout masks for both. Command: `{d['command']}`.",
            "",
            f"| epoch | valid RMSE, fast (`{impl}`: {label}) | valid RMSE, reference (scan + explicit Phi) |",
            "| ---: | ---: | ---: |",
            *[f"| {e} | {a:.6f} | {b:.6f} |" for e, (a, b) in enumerate(zip(fast["valid_rmse"], ref["valid_rmse"]), 1)],
            "",
            f"Largest difference {d['max_abs_diff_valid_rmse']:.1e}; wall time fast {fast['seconds']:.0f} s, "
            f"reference {ref['seconds']:.0f} s.",
            "",
        ]
        steps = d.get("abs_diff_train_loss_per_step")
        if steps:
            picks = sorted({0, 1, 3, 7, 15, len(steps) - 1} & set(range(len(steps))))
            parts += [
                "|training-loss difference| by step: " + ", ".join(f"step {i + 1}: {steps[i]:.1e}" for i in picks)
                + ". Each step's forward and backward agree to rounding (see `tests/test_model.py::"
                "test_training_trajectory_fast_equals_reference_float64`), but the gap between the two runs grows "
                "geometrically with the steps, in float64 too: the training trajectory itself amplifies rounding "
                "(likely through Adam's lr / (sqrt(v) + eps) rescaling of near-zero gradients; not isolated further).",
                "",
            ]
    return "\n".join(parts) if parts else None


def readout_tiles_section(results_dir: Path, out_dir: Path) -> Optional[str]:
    """The Triton read-out's tile settings timed at a step's calls (benchmarks/readout_tiles.py)."""
    parts = []
    for f in sorted(results_dir.glob("readout_tiles*.json")):
        d = read_json(f)
        if d is None:
            continue
        shipped = next((r for r in d["rows"] if r["settings"] == d["shipped"]), None)
        gpu = (d.get("hardware") or {}).get("gpu_name") or "?"
        parts += [f"[{f.name}]({rel(f, out_dir)}): {gpu}, {d.get('date', '?')}, {d.get('note', '')}. "
                  f"Command: `{d['command']}`.",
                  "", "| tiles | forward + backward, ms a step | vs the tiles shipped then |", "| --- | ---: | ---: |"]
        for r in d["rows"]:
            settings = ", ".join(f"{k}={v}" for k, v in r["settings"].items() if v != d["shipped"].get(k)) or "shipped then"
            total = r.get("total_ms")
            ratio = f"{shipped['total_ms'] / total:.2f}x" if total and shipped and shipped.get("total_ms") else "—"
            parts.append(f"| {settings} | {f'{total:.1f}' if total else r.get('error', '—')} | {ratio} |")
        parts.append("")
    return "\n".join(parts) if parts else None


def throughput_section(results_dir: Path, out_dir: Path) -> Optional[str]:
    files = sorted(results_dir.glob("throughput*.json"))
    if not files:
        return None
    parts = []
    for f in files:
        parts.append(f"[{f.name}]({rel(f, out_dir)})")
        try:
            data = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("benchmark") == "throughput":
            parts += ["", _throughput_table(data), ""]
            git = data.get("git") or {}
            if git.get("commit"):
                parts += [f"Code: commit {git['commit'][:12]}{' (with uncommitted changes)' if git.get('dirty') else ''}"
                          + (f"; {git['from']}" if git.get("from") else "") + ".", ""]
            if data.get("note"):
                parts += [f"Note: {data['note']}", ""]
    return "\n".join(parts)


def op_count_section(results_dir: Path, out_dir: Path) -> Optional[str]:
    f = results_dir / "op_count.json"
    if not f.is_file():
        return None
    d = read_json(f)
    if d is None:
        return None
    lines = [f"[{f.name}]({rel(f, out_dir)}): ATen ops one training step dispatches (forward + backward, batch "
             f"{d['batch']['B']} x {d['batch']['T']} tokens, padded as on CUDA; Chem-GMNet's fused DualSKA kernel "
             f"counted as one op per output). On a GPU at batch 32 each kernel op is a launch of a few "
             f"microseconds and their number, not arithmetic, sets the step time. Command: `{d['command']}`.", "",
             "| model | kernel ops | all ops (views included) |", "| --- | ---: | ---: |"]
    for label, c in d["counts"].items():
        lines.append(f"| {label} | {c['non_view_ops']:,} | {c['ops']:,} |")
    return "\n".join(lines)
