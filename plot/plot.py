#!/usr/bin/python3
"""plot.py: the plots of an ampscope results folder (matplotlib, Agg backend, PNG).

    python3 plot/plot.py [--ampscope PATH] RESULTS_DIR   draw every plot
    python3 plot/plot.py --series RESULTS_DIR   print the arrays the plots draw, one value a
                                                line (the tests compare them with the CSVs
                                                and the formats' table)

The number formats' limits come from `ampscope formats --json` (harness/core/format.h's table),
run from --ampscope PATH, else $AMPSCOPE, else bin/ampscope beside plot/.

Per case folder (RESULTS_DIR/<case>/):
  hist_grads.png   the log2|x| histogram (hist.csv) of the gradients of one step's backward
                   pass (tensors.csv rows with roles grad_activation, grad_cast, grad_param),
                   one series per dtype, with float16's and bfloat16's limits marked and the
                   part that rounds to zero in float16 shaded, zeros as a bar at the left; when
                   the step scaled its loss, a second panel with the same values divided by
                   the loss scale: where they would lie without the GradScaler. The step is
                   the first with such rows (harness/report/files.c picks the same one).
  memory.png       peak bytes of each memory category (memory.csv), stacked, and the bytes
                   held at the end of the run; the peak of the total marked.
  loss_scale.png   loss and loss scale over the steps (steps.csv), for cases with 2+ steps.
  fp8_hist.png     for a case with fp8.csv whose quantized copies tensors.csv counted: per
                   copy `L.<operand>@<format>` of fp8.csv's operands, the log2|x| histogram
                   (hist.csv: the values after scaling, before rounding) of every observed
                   step, against float8_e4m3fn's and float8_e5m2's ranges (largest finite,
                   smallest normal, smallest subnormal; the copy's own format shaded where
                   values saturate and where they round to zero). The float8 copies are left
                   out of hist_grads.png.
  fp8_scale.png    for a case with fp8.csv: each operand's scale and amax over the steps,
                   the steps in which it saturated marked.
Per sweep folder (RESULTS_DIR/<case>.sweep/, `ampscope run --sweep`) of scaler.init_scale:
  sweep.png        the gradients' underflow and overflow counts (sweep.csv) against log2 of
                   the initial loss scale, the skipped steps marked.
In RESULTS_DIR:
  memory.png       every case's category peaks, stacked, one bar a case.
  underflow.png    underflow % of every gradient tensor (rows) in every case (columns).

Every array drawn comes from a *_series() function that returns it; the drawing functions
only draw them.
"""

import argparse
import csv
import json
import math
import os
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.colors import LogNorm  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

GRAD_ROLES = ("grad_activation", "grad_cast", "grad_param")
SPECIAL_BINS = ("zero", "inf", "nan")
DTYPE_ORDER = ("float16", "bfloat16", "float32")
DTYPE_COLORS = {"float16": "tab:orange", "bfloat16": "tab:green", "float32": "tab:blue"}
# the formats whose limits the gradient histogram marks, with the colour and style of their
# lines; float16's rounds-to-zero band and subnormal range are shaded
MARKED = {"float16": ("black", "-"), "bfloat16": ("tab:green", "--")}
# the float8 and float4 formats (fp8.csv's format column, the copies' dtype) and their
# lines' colours
FP8_MARKED = {"float8_e4m3fn": "tab:purple", "float8_e5m2": "tab:brown",
              "float4_e2m1fn": "tab:pink"}
# memory.csv categories that add up to the total (memory.h; workspace is not in the total)
STACKED = ("params", "grads", "master_params", "optimizer_state", "activations",
           "autocast_cache", "inputs")
CATEGORY_COLORS = dict(zip(STACKED, ("tab:blue", "tab:orange", "tab:purple", "tab:red",
                                     "tab:green", "tab:olive", "tab:gray")))
MIB = 1048576.0


def short_number(v):
    """65504 as 65504, 3.3895313892515355e38 as 3.39e38 (a legend's largest finite value)."""
    if v == int(v) and v < 1e6:
        return "%d" % v
    return ("%.3g" % v).replace("e+", "e")


def read_formats(ampscope):
    """The rows of `ampscope formats --json`, by format name."""
    out = subprocess.run([ampscope, "formats", "--json"], stdout=subprocess.PIPE, check=True,
                         universal_newlines=True).stdout
    return {f["name"]: f for f in json.loads(out)}


def format_ranges(formats, names):
    """log2 of the limits of each format in names, from read_formats()' rows: {dtype:
    {'subnormal', 'normal' (smallest subnormal, normal), 'max' (largest finite), 'zero' (half
    the smallest subnormal: at and below it a value rounds to zero), 'max_text'}}."""
    return {d: {"subnormal": formats[d]["min_subnormal_exp"],
                "normal": formats[d]["min_normal_exp"],
                "max": math.log2(formats[d]["largest"]), "zero": formats[d]["zero_exp"],
                "max_text": short_number(formats[d]["largest"])} for d in names}


def read_csv(path):
    """The rows of a CSV file as dicts (header names as keys)."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def case_dirs(results_dir):
    """(name, folder) of every case folder in results_dir, sorted by name."""
    found = []
    for name in sorted(os.listdir(results_dir)):
        path = os.path.join(results_dir, name)
        if not name.startswith(".") and os.path.isfile(os.path.join(path, "tensors.csv")):
            found.append((name, path))
    return found


def is_backward_grad(row):
    return row["pass"] == "backward" and row["role"] in GRAD_ROLES and row["zeros"] != ""


def hist_step(tensor_rows):
    """The first step whose backward pass has gradient rows with counts; None when none."""
    for row in tensor_rows:
        if is_backward_grad(row):
            return int(row["step"])
    return None


def step_scale(case_dir, tensor_rows, step):
    """The loss scale of a step that scaled its loss (a loss.scaled row) and completed (a
    steps.csv row); None otherwise."""
    if not any(int(r["step"]) == step and r["pass"] == "forward" and r["tensor"] == "loss.scaled"
               for r in tensor_rows):
        return None
    for row in read_csv(os.path.join(case_dir, "steps.csv")):
        if int(row["step"]) == step and float(row["loss_scale"]) > 0:
            return float(row["loss_scale"])
    return None


def hist_series(case_dir):
    """The gradient histogram of the case's step: {'step', 'scale' (None: no scaler),
    'bins': {dtype: {k: count}}, 'special': {dtype: {'zero'|'inf'|'nan': count}}}, bin k
    counting 2^k <= |x| < 2^(k+1); None when the case has no gradient rows."""
    rows = read_csv(os.path.join(case_dir, "tensors.csv"))
    step = hist_step(rows)
    if step is None:
        return None
    dtypes = {r["tensor"]: r["dtype"] for r in rows
              if int(r["step"]) == step and is_backward_grad(r) and r["dtype"] in DTYPE_ORDER}
    bins = {d: {} for d in DTYPE_ORDER if d in dtypes.values()}
    special = {d: dict.fromkeys(SPECIAL_BINS, 0) for d in bins}
    for h in read_csv(os.path.join(case_dir, "hist.csv")):
        if int(h["step"]) != step or h["pass"] != "backward" or h["tensor"] not in dtypes:
            continue
        d, count = dtypes[h["tensor"]], int(h["count"])
        if h["bin"] in SPECIAL_BINS:
            special[d][h["bin"]] += count
        else:
            k = int(h["bin"])
            bins[d][k] = bins[d].get(k, 0) + count
    return {"step": step, "scale": step_scale(case_dir, rows, step), "bins": bins,
            "special": special}


def divided_series(series):
    """series with every bin moved by -log2(scale): the values divided by the loss scale."""
    shift = math.log2(series["scale"])
    return {"step": series["step"], "scale": series["scale"], "special": series["special"],
            "bins": {d: {k - shift: n for k, n in b.items()} for d, b in series["bins"].items()}}


def memory_series(case_dir):
    """{'categories', 'peak', 'end'} for the stacked categories, and the total's
    'total_peak' and 'total_end' (bytes, memory.csv)."""
    rows = {r["category"]: r for r in read_csv(os.path.join(case_dir, "memory.csv"))}
    cats = [c for c in STACKED if c in rows]
    return {"categories": cats, "peak": [int(rows[c]["peak_bytes"]) for c in cats],
            "end": [int(rows[c]["end_bytes"]) for c in cats],
            "total_peak": int(rows["total"]["peak_bytes"]),
            "total_end": int(rows["total"]["end_bytes"])}


def loss_scale_series(case_dir):
    """{'step', 'loss', 'scale' (None without a scaler), 'skipped'} over the steps; None for
    fewer than two steps."""
    steps = read_csv(os.path.join(case_dir, "steps.csv"))
    if len(steps) < 2:
        return None
    tensors = read_csv(os.path.join(case_dir, "tensors.csv"))
    scaled = any(r["tensor"] == "loss.scaled" for r in tensors)
    return {"step": [int(s["step"]) for s in steps], "loss": [float(s["loss"]) for s in steps],
            "scale": [float(s["loss_scale"]) for s in steps] if scaled else None,
            "skipped": [s["skipped"] == "1" for s in steps]}


def underflow_series(results_dir):
    """{'cases', 'tensors', 'underflow', 'numel', 'pct'}: per tensor (rows, in order of first
    appearance) and case (columns), the underflow count, numel and 100 * underflow / numel
    of its gradient row in the case's step (None where the case has no such tensor)."""
    cases, tensors, cells = [], [], {}
    for name, path in case_dirs(results_dir):
        rows = read_csv(os.path.join(path, "tensors.csv"))
        step = hist_step(rows)
        if step is None:
            continue
        cases.append(name)
        for r in rows:
            if int(r["step"]) == step and is_backward_grad(r):
                if r["tensor"] not in tensors:
                    tensors.append(r["tensor"])
                cells[(r["tensor"], name)] = (int(r["underflow"]), int(r["numel"]))

    def table(f):
        return [[f(*cells[(t, c)]) if (t, c) in cells else None for c in cases] for t in tensors]

    return {"cases": cases, "tensors": tensors, "underflow": table(lambda u, n: u),
            "numel": table(lambda u, n: n), "pct": table(lambda u, n: 100.0 * u / n)}


def fp8_scale_series(case_dir):
    """fp8.csv's rows by operand, in the order the operands first appear: [{'tensor',
    'format', 'step', 'scale', 'amax', 'saturated', 'underflow'}] (lists over its rows); None
    when the folder has no fp8.csv or it has no rows."""
    path = os.path.join(case_dir, "fp8.csv")
    if not os.path.isfile(path):
        return None
    ops = {}
    for r in read_csv(path):
        op = ops.setdefault((r["tensor"], r["format"]), {
            "tensor": r["tensor"], "format": r["format"], "step": [], "scale": [], "amax": [],
            "saturated": [], "underflow": []})
        op["step"].append(int(r["step"]))
        op["scale"].append(float(r["scale"]))
        op["amax"].append(float(r["amax"]))
        op["saturated"].append(int(r["saturated"]))
        op["underflow"].append(int(r["underflow"]))
    return list(ops.values()) or None


def fp8_hist_series(case_dir, scales):
    """Per quantized copy `<tensor>@<format>` of the operands of scales (fp8_scale_series()),
    with counted tensors.csv rows: {'copy', 'format', 'steps': {step: {'bins': {k: count},
    'special': {'zero'|'inf'|'nan': count}}}}, in the operands' order; None when no copy was
    counted (harness/report/fp8.c links fp8_hist.png by the same rule)."""
    copies = {"%s@%s" % (op["tensor"], op["format"]): op["format"] for op in scales}
    counted = {}
    for r in read_csv(os.path.join(case_dir, "tensors.csv")):
        if r["tensor"] in copies and r["zeros"] != "":
            counted.setdefault(r["tensor"], set()).add(int(r["step"]))
    if not counted:
        return None
    out = {c: {"copy": c, "format": copies[c],
               "steps": {s: {"bins": {}, "special": dict.fromkeys(SPECIAL_BINS, 0)}
                         for s in sorted(counted[c])}} for c in copies if c in counted}
    for h in read_csv(os.path.join(case_dir, "hist.csv")):
        entry = out.get(h["tensor"])
        step = int(h["step"])
        if entry is None or step not in entry["steps"]:
            continue
        cell = entry["steps"][step]
        if h["bin"] in SPECIAL_BINS:
            cell["special"][h["bin"]] += int(h["count"])
        else:
            k = int(h["bin"])
            cell["bins"][k] = cell["bins"].get(k, 0) + int(h["count"])
    return list(out.values())


def format_pct(count, total):
    """As report/text.c prints percentages: 0, <0.01%, >99.99% or two decimals."""
    if count == 0:
        return "0"
    text = "%.2f%%" % (100.0 * count / total)
    if text == "0.00%":
        return "<0.01%"
    return ">99.99%" if text == "100.00%" and count < total else text


# ---- drawing ----

def pow2_label(k):
    return "$2^{%d}$" % k


def draw_hist_panel(ax, series, title, ranges):
    """One histogram panel: per bin, a bar for each dtype side by side (log counts), zeros at
    the left, inf and NaN at the right, the limits of the formats in ranges (format_ranges())
    as vertical lines."""
    bins = series["bins"]
    ks = [k for b in bins.values() for k in b]
    shown = [d for d in ranges if d in bins or d == "float16"]
    limits = [v for d in shown for v in (ranges[d]["zero"] - 5, ranges[d]["max"] + 1)]
    lo = math.floor(min(ks + limits))
    hi = math.ceil(max([k + 1 for k in ks] + limits))
    zero_x = lo - 3
    special_x = {"inf": hi + 2, "nan": hi + 4}
    width = 1.0 / len(bins)
    for i, (d, b) in enumerate(bins.items()):
        color, offset = DTYPE_COLORS[d], i * width
        ax.bar([k + offset for k in b], list(b.values()), width=width, align="edge", color=color,
               label="in %s tensors" % d)
        sp = series["special"][d]
        for name, x in [("zero", zero_x)] + list(special_x.items()):
            if sp[name]:
                ax.bar(x + offset, sp[name], width=width, align="edge", color=color,
                       hatch="//", edgecolor="white")
    f16 = ranges["float16"]
    ax.axvspan(lo, f16["zero"], color="red", alpha=0.08, zorder=0,
               label="rounds to 0 in float16 ($|x| < 2^{%d}$)" % f16["zero"])
    ax.axvspan(f16["zero"], f16["normal"], color="gold", alpha=0.12,
               zorder=0, label="float16 subnormal (fewer bits)")
    for d in ranges:
        r, (color, style) = ranges[d], MARKED[d]
        text = "%s: smallest subnormal $2^{%d}$, smallest normal $2^{%d}$, largest %s" % (
            d, r["subnormal"], r["normal"], r["max_text"])
        if d in shown:
            for v in (r["subnormal"], r["normal"], r["max"]):
                ax.axvline(v, color=color, linestyle=style, linewidth=1)
            ax.plot([], [], color=color, linestyle=style, label=text)
        else:
            ax.plot([], [], color="none", label=text + " (off this axis)")
    step = 8 if hi - lo > 48 else 4
    ticks = list(range(int(math.ceil(lo / step) * step), int(hi) + 1, step))
    extra = [x for name, x in special_x.items() if any(series["special"][d][name] for d in bins)]
    ax.set_xticks([zero_x + 0.5] + ticks + [x + 0.5 for x in extra])
    ax.set_xticklabels(["0"] + [pow2_label(k) for k in ticks] +
                       [n for n, x in special_x.items() if x in extra], fontsize=8)
    ax.set_xlim(zero_x - 1, max([hi] + extra) + 2)
    ax.set_yscale("log")
    ax.set_ylim(bottom=0.5)
    ax.set_xlabel("|x| (bin $2^k \\leq |x| < 2^{k+1}$; hatched: exact zeros, inf, NaN)")
    ax.set_ylabel("values")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def draw_hist(case, case_dir, series, ranges):
    panels = 2 if series["scale"] else 1
    fig, axes = plt.subplots(panels, 1, figsize=(15, 4.5 * panels), squeeze=False)
    draw_hist_panel(axes[0][0], series, "%s: gradients of step %d's backward pass, as computed%s"
                    % (case, series["step"], " (scaled by %g)" % series["scale"]
                       if series["scale"] else ""), ranges)
    if series["scale"]:
        draw_hist_panel(axes[1][0], divided_series(series),
                        "the same values divided by the loss scale %g: where they would lie "
                        "without the GradScaler" % series["scale"], ranges)
    fig.tight_layout()
    fig.savefig(os.path.join(case_dir, "hist_grads.png"), dpi=110)
    plt.close(fig)


def draw_stacked(ax, labels, columns, cats, total=None):
    """Horizontal bars, one per label, stacked by category (columns[i][j]: bytes of
    category j in bar i); total[i] marked with a black line."""
    left = [0.0] * len(labels)
    for j, cat in enumerate(cats):
        widths = [col[j] / MIB for col in columns]
        ax.barh(labels, widths, left=left, color=CATEGORY_COLORS[cat], label=cat)
        left = [a + b for a, b in zip(left, widths)]
    if total is not None:
        for i, t in enumerate(total):
            ax.plot([t / MIB] * 2, [i - 0.45, i + 0.45], color="black", linewidth=2,
                    label="peak of the total, at one moment" if i == 0 else None)
    ax.set_xlabel("MiB (workspace excluded)")
    ax.invert_yaxis()
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def draw_memory(case, case_dir, series):
    fig, ax = plt.subplots(figsize=(11, 3))
    draw_stacked(ax, ["peak of each category", "held at the end"],
                 [series["peak"], series["end"]], series["categories"],
                 [series["total_peak"], series["total_end"]])
    ax.set_title("%s: memory by category (bars: each category's own peak, stacked)" % case,
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(case_dir, "memory.png"), dpi=110)
    plt.close(fig)


def draw_memory_all(results_dir, per_case):
    names = [n for n, _ in per_case]
    cats = [c for c in STACKED if any(c in s["categories"] for _, s in per_case)]
    columns = [[s["peak"][s["categories"].index(c)] if c in s["categories"] else 0 for c in cats]
               for _, s in per_case]
    fig, ax = plt.subplots(figsize=(12, 2.5 + 0.5 * len(names)))
    draw_stacked(ax, names, columns, cats, [s["total_peak"] for _, s in per_case])
    ax.set_title("peak memory by category, per case (bars: each category's own peak, stacked)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(results_dir, "memory.png"), dpi=110)
    plt.close(fig)


def draw_loss_scale(case, case_dir, series):
    panels = 2 if series["scale"] else 1
    fig, axes = plt.subplots(panels, 1, figsize=(9, 2.8 * panels), sharex=True, squeeze=False)
    ax = axes[0][0]
    marker = "." if len(series["step"]) <= 50 else None
    ax.plot(series["step"], series["loss"], marker=marker, label="loss")
    skipped = [i for i, s in enumerate(series["skipped"]) if s]
    ax.plot([series["step"][i] for i in skipped], [series["loss"][i] for i in skipped], "x",
            color="red", label="step skipped (inf/NaN found)")
    if min(series["loss"]) > 0:
        ax.set_yscale("log")
    ax.set_ylabel("loss")
    ax.set_title("%s: loss%s over the steps" % (case, " and loss scale" if series["scale"] else ""),
                 fontsize=10)
    ax.legend(fontsize=8)
    if series["scale"]:
        ax = axes[1][0]
        ax.step(series["step"], series["scale"], where="post", marker=marker, label="loss scale")
        ax.plot([series["step"][i] for i in skipped], [series["scale"][i] for i in skipped], "x",
                color="red", label="step skipped: scale backs off")
        ax.set_yscale("log", base=2)
        ax.set_ylabel("loss scale")
        ax.legend(fontsize=8)
    axes[-1][0].set_xlabel("step")
    fig.tight_layout()
    fig.savefig(os.path.join(case_dir, "loss_scale.png"), dpi=110)
    plt.close(fig)


def draw_fp8_hist(case, case_dir, series, fp8_ranges):
    """One panel per quantized copy, three a row: per bin a bar for each observed step side by
    side (log counts; exact zeros hatched at the left, inf and NaN at the right), the float8
    and float4 formats' limits as vertical lines, the copy's own format's saturating and rounds-to-zero
    regions shaded."""
    cols = 3
    rows = (len(series) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(16, 3.2 * rows), squeeze=False)
    for i, entry in enumerate(series):
        ax = axes[i // cols][i % cols]
        own = fp8_ranges[entry["format"]]
        ks = [k for cell in entry["steps"].values() for k in cell["bins"]]
        lo = math.floor(min(ks + [r["zero"] - 2 for r in fp8_ranges.values()]))
        hi = math.ceil(max([k + 1 for k in ks] + [r["max"] + 2 for r in fp8_ranges.values()]))
        zero_x, special_x = lo - 3, {"inf": hi + 1, "nan": hi + 3}
        width = 1.0 / len(entry["steps"])
        for j, (step, cell) in enumerate(entry["steps"].items()):
            color, offset = "C%d" % (j % 10), j * width
            ax.bar([k + offset for k in cell["bins"]], list(cell["bins"].values()), width=width,
                   align="edge", color=color, label="step %d" % step)
            for name, x in [("zero", zero_x)] + list(special_x.items()):
                if cell["special"][name]:
                    ax.bar(x + offset, cell["special"][name], width=width, align="edge",
                           color=color, hatch="//", edgecolor="white")
        ax.axvspan(own["max"], hi, color="red", alpha=0.08, zorder=0)
        ax.axvspan(lo, own["zero"], color="tab:blue", alpha=0.08, zorder=0)
        for d, r in fp8_ranges.items():
            style = "-" if d == entry["format"] else ":"
            for v in (r["subnormal"], r["normal"], r["max"]):
                ax.axvline(v, color=FP8_MARKED[d], linestyle=style, linewidth=1)
        ticks = list(range(int(math.ceil(lo / 4.0) * 4), int(hi) + 1, 4))
        ax.set_xticks([zero_x + 0.5] + ticks)
        ax.set_xticklabels(["0"] + [pow2_label(k) for k in ticks], fontsize=7)
        ax.set_xlim(zero_x - 1, hi + 5)
        ax.set_yscale("log")
        ax.set_ylim(bottom=0.5)
        ax.set_title("%s (%s)" % (entry["copy"], entry["format"]), fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
    for j in range(len(series), rows * cols):
        axes[j // cols][j % cols].axis("off")
    limits = "; ".join("%s: smallest subnormal $2^{%d}$, smallest normal $2^{%d}$, largest %s"
                       % (d, r["subnormal"], r["normal"], r["max_text"])
                       for d, r in fp8_ranges.items())
    fig.suptitle("%s: |x| of each quantized copy after scaling, before rounding (bin $2^k \\leq "
                 "|x| < 2^{k+1}$; hatched: exact zeros, inf, NaN)\nlines: %s (solid: the "
                 "copy's own format); shaded: saturates (red), rounds to zero (blue)"
                 % (case, limits), fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(case_dir, "fp8_hist.png"), dpi=100)
    plt.close(fig)


def draw_fp8_scale(case, case_dir, series):
    fig, axes = plt.subplots(2, 1, figsize=(11, 6.5), sharex=True)
    for op in series:
        label = "%s (%s)" % (op["tensor"], op["format"])
        line, = axes[0].plot(op["step"], op["scale"], marker=".", label=label)
        axes[1].plot(op["step"], op["amax"], marker=".", color=line.get_color(), label=label)
        sat = [i for i, n in enumerate(op["saturated"]) if n]
        axes[0].plot([op["step"][i] for i in sat], [op["scale"][i] for i in sat], "x",
                     color="red")
    axes[0].plot([], [], "x", color="red", label="values saturated in this step")
    axes[0].set_yscale("log", base=2)
    axes[0].set_ylabel("scale")
    axes[0].set_title("%s: each float8 operand's scale (fp8.csv) over the steps" % case,
                      fontsize=10)
    axes[0].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    if all(a > 0 for op in series for a in op["amax"]):
        axes[1].set_yscale("log", base=2)
    axes[1].set_ylabel("amax (before scaling)")
    axes[1].set_xlabel("step")
    axes[1].xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    fig.savefig(os.path.join(case_dir, "fp8_scale.png"), dpi=110)
    plt.close(fig)


def draw_underflow(results_dir, series):
    tensors, cases = series["tensors"], series["cases"]
    fig, ax = plt.subplots(figsize=(2.5 + 1.6 * len(cases), 1.5 + 0.32 * len(tensors)))
    grid = [[p if p else math.nan for p in row] for row in series["pct"]]  # 0 and absent: blank
    positive = [p for row in grid for p in row if not math.isnan(p)]
    norm = LogNorm(min(positive), max(positive)) if positive else None
    image = ax.imshow(grid, aspect="auto", cmap="Reds", norm=norm)
    for i, row in enumerate(series["underflow"]):
        for j, u in enumerate(row):
            if u is None:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, color="0.9"))
            text = "–" if u is None else format_pct(u, series["numel"][i][j])
            ax.text(j, i, text, ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels(cases, rotation=20, ha="right", fontsize=8)
    ax.set_yticks(range(len(tensors)))
    ax.set_yticklabels(tensors, fontsize=8)
    ax.set_title("underflow: % of each gradient tensor's values that rounding turned to zero\n"
                 "(backward pass of each case's step; grey –: the case has no such tensor)",
                 fontsize=10)
    if positive:
        fig.colorbar(image, ax=ax, label="underflow %")
    fig.tight_layout()
    fig.savefig(os.path.join(results_dir, "underflow.png"), dpi=110)
    plt.close(fig)


def sweep_dirs(results_dir):
    """(name, folder) of every sweep folder (with sweep.csv) in results_dir, sorted."""
    return [(n[:-len(".sweep")], os.path.join(results_dir, n))
            for n in sorted(os.listdir(results_dir))
            if n.endswith(".sweep") and os.path.isfile(os.path.join(results_dir, n, "sweep.csv"))]


def sweep_series(sweep_dir):
    """log2 init_scale, underflow, overflow, skipped of a sweep of scaler.init_scale alone,
    in the order of the scale; None for other sweeps."""
    points = []
    for r in read_csv(os.path.join(sweep_dir, "sweep.csv")):
        settings = r["settings"].split()
        if len(settings) != 1 or not settings[0].startswith("scaler.init_scale="):
            return None
        scale = float(settings[0].split("=", 1)[1])
        points.append((math.log2(scale), int(r["grad_underflow"]), int(r["grad_overflow"]),
                       int(r["steps_skipped"])))
    points.sort()
    if not points:
        return None
    return {"log2_scale": [p[0] for p in points], "underflow": [p[1] for p in points],
            "overflow": [p[2] for p in points], "skipped": [p[3] for p in points]}


def draw_sweep(case, sweep_dir, series):
    fig, ax = plt.subplots(figsize=(7, 3.6))
    x = series["log2_scale"]
    ax.plot(x, series["underflow"], "o-", color="tab:blue", label="gradient values underflowed")
    ax.plot(x, series["overflow"], "s-", color="tab:red", label="gradient values overflowed")
    skipped = [xi for xi, s in zip(x, series["skipped"]) if s]
    if skipped:
        ax.axvspan(min(skipped) - 0.5, max(skipped) + 0.5, color="tab:red", alpha=0.08,
                   label="a step skipped")
    ax.set_yscale("symlog", linthresh=1)
    ax.set_xlabel("log2 of scaler.init_scale")
    ax.set_ylabel("values (backward passes)")
    ax.set_title("%s: underflow and overflow against the loss scale" % case, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(sweep_dir, "sweep.png"), dpi=110)
    plt.close(fig)


def draw_all(results_dir, ranges, fp8_ranges):
    per_case_memory = []
    for case, path in case_dirs(results_dir):
        hist = hist_series(path)
        if hist:
            draw_hist(case, path, hist, ranges)
        scales = fp8_scale_series(path)
        if scales:
            draw_fp8_scale(case, path, scales)
            fp8_hist = fp8_hist_series(path, scales)
            if fp8_hist:
                draw_fp8_hist(case, path, fp8_hist, fp8_ranges)
        memory = memory_series(path)
        draw_memory(case, path, memory)
        per_case_memory.append((case, memory))
        steps = loss_scale_series(path)
        if steps:
            draw_loss_scale(case, path, steps)
    if per_case_memory:
        draw_memory_all(results_dir, per_case_memory)
    under = underflow_series(results_dir)
    if under["cases"]:
        draw_underflow(results_dir, under)
    for case, path in sweep_dirs(results_dir):
        sweep = sweep_series(path)
        if sweep:
            draw_sweep(case, path, sweep)


# ---- the arrays, as text ----

def num(x):
    return "%.17g" % x


def series_lines(results_dir, ranges, fp8_ranges):
    """Every array the plots draw, one value a line:
        limits DTYPE SUBNORMAL NORMAL MAX ZERO       (log2 of the marked formats' limits)
        fp8_limits DTYPE SUBNORMAL NORMAL MAX ZERO   (the same for the float8 formats)
        fp8_hist CASE COPY STEP BIN COUNT            (BIN: log2 exponent, or zero/inf/nan)
        fp8_scale CASE TENSOR FORMAT STEP SCALE AMAX SATURATED UNDERFLOW
        hist CASE computed|divided DTYPE BIN COUNT   (BIN: log2 exponent, or zero/inf/nan)
        memory CASE CATEGORY PEAK_BYTES END_BYTES    (CATEGORY total: the marked total)
        loss_scale CASE STEP LOSS SCALE|- SKIPPED
        underflow CASE TENSOR UNDERFLOW NUMEL PCT
        sweep CASE LOG2_SCALE UNDERFLOW OVERFLOW SKIPPED"""
    lines = ["limits %s %d %d %s %d" % (d, r["subnormal"], r["normal"], num(r["max"]), r["zero"])
             for d, r in ranges.items()]
    lines += ["fp8_limits %s %d %d %s %d" % (d, r["subnormal"], r["normal"], num(r["max"]),
                                             r["zero"]) for d, r in fp8_ranges.items()]
    for case, path in case_dirs(results_dir):
        scales = fp8_scale_series(path) or []
        for op in scales:
            lines += ["fp8_scale %s %s %s %d %s %s %d %d" % (
                case, op["tensor"], op["format"], op["step"][i], num(op["scale"][i]),
                num(op["amax"][i]), op["saturated"][i], op["underflow"][i])
                for i in range(len(op["step"]))]
        for entry in (fp8_hist_series(path, scales) or []) if scales else []:
            for step, cell in entry["steps"].items():
                lines += ["fp8_hist %s %s %d %d %d" % (case, entry["copy"], step, k, n)
                          for k, n in cell["bins"].items()]
                lines += ["fp8_hist %s %s %d %s %d" % (case, entry["copy"], step, name, n)
                          for name, n in cell["special"].items() if n]
        hist = hist_series(path)
        panels = [("computed", hist)] if hist else []
        if hist and hist["scale"]:
            panels.append(("divided", divided_series(hist)))
        for panel, s in panels:
            for d, b in s["bins"].items():
                lines += ["hist %s %s %s %s %d" % (case, panel, d, num(k), n) for k, n in b.items()]
                lines += ["hist %s %s %s %s %d" % (case, panel, d, name, n)
                          for name, n in s["special"][d].items() if n]
        m = memory_series(path)
        lines += ["memory %s %s %d %d" % (case, c, p, e)
                  for c, p, e in zip(m["categories"], m["peak"], m["end"])]
        lines.append("memory %s total %d %d" % (case, m["total_peak"], m["total_end"]))
        steps = loss_scale_series(path)
        for i in range(len(steps["step"]) if steps else 0):
            scale = num(steps["scale"][i]) if steps["scale"] else "-"
            lines.append("loss_scale %s %d %s %s %d" % (case, steps["step"][i],
                                                        num(steps["loss"][i]), scale,
                                                        steps["skipped"][i]))
    under = underflow_series(results_dir)
    for i, t in enumerate(under["tensors"]):
        for j, c in enumerate(under["cases"]):
            if under["pct"][i][j] is not None:
                lines.append("underflow %s %s %d %d %s" % (c, t, under["underflow"][i][j],
                                                           under["numel"][i][j],
                                                           num(under["pct"][i][j])))
    for case, path in sweep_dirs(results_dir):
        sweep = sweep_series(path)
        for i in range(len(sweep["log2_scale"]) if sweep else 0):
            lines.append("sweep %s %s %d %d %d" % (case, num(sweep["log2_scale"][i]),
                                                   sweep["underflow"][i], sweep["overflow"][i],
                                                   sweep["skipped"][i]))
    return lines


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results_dir")
    parser.add_argument("--series", action="store_true",
                        help="print the arrays the plots draw instead of drawing them")
    parser.add_argument("--ampscope", metavar="PATH",
                        default=os.environ.get("AMPSCOPE") or os.path.join(
                            os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "bin", "ampscope"),
                        help="the ampscope binary whose `formats --json` gives the number "
                             "formats' limits (default: $AMPSCOPE, else bin/ampscope)")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.results_dir):
        print("plot.py: %s is not a folder" % args.results_dir, file=sys.stderr)
        return 2
    try:
        formats = read_formats(args.ampscope)
        ranges = format_ranges(formats, MARKED)
        fp8_ranges = format_ranges(formats, FP8_MARKED)
    except (OSError, subprocess.CalledProcessError, ValueError, KeyError) as e:
        print("plot.py: cannot read the number formats from `%s formats --json`: %s"
              % (args.ampscope, e), file=sys.stderr)
        return 2
    if args.series:
        print("\n".join(series_lines(args.results_dir, ranges, fp8_ranges)))
    else:
        draw_all(args.results_dir, ranges, fp8_ranges)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
