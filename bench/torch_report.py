"""The torch suite's Markdown report (run_bench.py --suite torch): latencies of
PyTorch users' paths, backend="kiln" against kiln.torch.compile, each Kiln path
against the faster of eager PyTorch and Inductor (the int8 ones against
Inductor int8 too), geometric means over the models and batches, and how many
ops of each Kiln case fell back to PyTorch (its LoweringReport).

Besides report.py's fields the document has
    settings.suite: "torch"
    precisions: {engine: "float32" | "int8"}
    cases[].info: {graphs, eager_graphs, subgraphs, compiled_ops, fallback_ops, fallback_by_op}
    cases[].unsupported: true where the path does not exist in the build
"""
from report import Results, _table, fmt_mb, fmt_ms, fmt_ratio, geometric_mean, latency_cell, load_table, problems
from quantized_report import fmt_db

DYNAMO, EXPORT = "kiln_dynamo", "kiln_torch"
PAIRS = [("kiln_dynamo", "kiln_torch"), ("kiln_dynamo_pt2e", "kiln_torch_pt2e")]
FLOAT_PEERS = ("torch", "inductor")
INT8_PEER = "inductor_int8"
PARITY_GOAL = 0.05  # backend="kiln" within 5% of kiln.torch.compile
GEOMEAN_GOAL = 1.2  # both Kiln paths over the faster of eager and Inductor


class TorchResults(Results):
    def precision(self, engine):
        return self.doc.get("precisions", {}).get(engine, "float32")

    def kiln_engines(self):
        return [e for e in self.engines if e.startswith("kiln")]

    def usable(self, model, batch, engine):
        t = self.latency(model, batch, engine)
        return t if t is not None and self.agrees(model, batch, engine) else None


def _cell(r, model, batch, engine):
    c = r.case(model, batch, engine)
    if c and c.get("unsupported"):
        return "unsupported"
    cell = latency_cell(r, model, batch, engine)
    fallback = (c or {}).get("info", {}).get("fallback_ops") if c else None
    if fallback:
        cell += f" ({fallback} fb)"
    if c and r.precision(engine) != "float32" and (c.get("check") or {}).get("sqnr_db") is not None:
        cell += f" [{fmt_db(c['check']['sqnr_db'])}]"
    return cell


def latency_table(r):
    header = ["Model", "Batch"] + [r.engine_title(e) for e in r.engines]
    rows = [[r.model_title(m), b] + [_cell(r, m, b, e) for e in r.engines] for m, b in r.rows()]
    return _table(header, ["---", "---:"] + ["---:"] * len(r.engines), rows)


def _ratio_rows(r, columns):
    """columns: [(title, fn(model, batch) -> ratio or None)]; a row per case and a geometric-mean row."""
    rows, per_col = [], [[] for _ in columns]
    for m, b in r.rows():
        row = [r.model_title(m), b]
        for i, (_, fn, engine) in enumerate(columns):
            x = fn(m, b)
            if x is not None:
                per_col[i].append(x)
            fallback = ((r.case(m, b, engine) or {}).get("info") or {}).get("fallback_ops")
            row.append(fmt_ratio(x) + (" *" if x is not None and fallback else ""))
        rows.append(row)
    rows.append(["**geometric mean**", ""] + [f"**{fmt_ratio(geometric_mean(v))}**" if v else "-" for v in per_col])
    return _table(["Model", "Batch"] + [t for t, _, _ in columns], ["---", "---:"] + ["---:"] * len(columns), rows), \
        [geometric_mean(v) for v in per_col]


def _ratio(r, slower, faster_engines):
    def fn(m, b):
        t = r.usable(m, b, slower)
        peers = [r.usable(m, b, e) for e in faster_engines]
        peers = [p for p in peers if p is not None]
        return min(peers) / t if t and peers else None
    return fn


def parity_columns(r):
    cols = []
    for dyn, exp in PAIRS:
        if dyn in r.engines and exp in r.engines:
            cols.append((f"{r.engine_title(dyn)} / {r.engine_title(exp)}",
                         lambda m, b, d=dyn, x=exp: (r.usable(m, b, d) / r.usable(m, b, x)
                                                     if r.usable(m, b, d) and r.usable(m, b, x) else None), dyn))
    return cols


def speedup_columns(r):
    float_peers = [e for e in FLOAT_PEERS if e in r.engines]
    cols = []
    for e in r.kiln_engines():
        if float_peers:
            cols.append((f"{r.engine_title(e)} vs faster of eager, Inductor", _ratio(r, e, float_peers), e))
        if r.precision(e) == "int8" and INT8_PEER in r.engines:
            cols.append((f"{r.engine_title(e)} vs Inductor int8", _ratio(r, e, [INT8_PEER]), e))
    return cols


def fallback_table(r):
    rows = []
    for m, b in r.rows():
        for e in r.kiln_engines():
            c = r.case(m, b, e)
            info = (c or {}).get("info")
            if not info:
                continue
            ops = ", ".join(f"{op} x{n}" for op, n in sorted(info["fallback_by_op"].items(), key=lambda kv: -kv[1]))
            rows.append([r.model_title(m), b, r.engine_title(e), info["graphs"], info["eager_graphs"],
                         info["subgraphs"], info["compiled_ops"], info["fallback_ops"], ops[:300] or "-"])
    return _table(["Model", "Batch", "Engine", "Graphs", "Eager graphs", "Kiln subgraphs", "Ops compiled",
                   "Ops in PyTorch", "Which"], ["---", "---:", "---", "---:", "---:", "---:", "---:", "---:", "---"],
                  rows)


def render(doc, titles, chart_name=None):
    r = TorchResults(doc, titles)
    s, m = r.settings, doc.get("machine", {})
    out = ["# Kiln for PyTorch users", ""]
    out.append(f"Run {doc.get('started', '?')} on {m.get('cpu', '?')} ({m.get('cores', '?')} cores, "
               f"{m.get('isa', '?')}, {fmt_mb(m.get('memory_bytes'))} MiB); every engine limited to "
               f"{s['threads']} threads, in a process of its own, its outputs checked against the float model's "
               f"float64 outputs before timing (float32 engines within rtol 1e-3, int8 ones by their SQNR). "
               f"Median of {s['runs']} timed runs after {s['warmup']} warm-up runs in "
               f"{max(1, min(s.get('rounds', 1), s['runs']))} "
               f"interleaved rounds. Load average {m.get('load_average_start', '?')} at the start, "
               f"{m.get('load_average_end', '?')} at the end. Whole run: {doc.get('duration_s', 0) / 60:.1f} min.")
    out.append("")
    versions = list(dict.fromkeys(v for text in doc.get("versions", {}).values() for v in text.split(", ")))
    q = doc.get("quantization") or {}
    out.append("Versions: " + ", ".join(versions + doc.get("model_tools", []) + ([q["torchao"]] if q.get("torchao")
                                                                                 else [])) + ".")
    out += ["", "int8: PT2E = torchao's prepare_pt2e / convert_pt2e with X86InductorQuantizer's default recipe, "
            f"calibrated on {q.get('calibration_samples', '?')} samples; the same converted model goes to Inductor "
            "and to both Kiln paths. kiln.torch.compile(precision=\"int8\") calibrates on the same samples.", ""]
    if chart_name:
        out += [f"![latency per model and engine]({chart_name})", ""]
    out += ["## Latency (ms)", "", *latency_table(r), "",
            "(k fb): k ops of the case ran in PyTorch, not Kiln (see Fallbacks); [x dB]: an int8 case's SQNR "
            "against the float model; † outputs not accepted (see Problems); unsupported: the path does not "
            "exist in this build.", ""]
    parity = parity_columns(r)
    if parity:
        lines, means = _ratio_rows(r, parity)
        out += ["## backend=\"kiln\" against kiln.torch.compile", "",
                "Latency of torch.compile(backend=\"kiln\") / latency of kiln.torch.compile on the same model: "
                f"1.00x is parity, the goal is within {PARITY_GOAL:.0%} (0.95x to 1.05x). * the case had ops "
                "fall back to PyTorch (see Fallbacks).", "", *lines, ""]
    speed = speedup_columns(r)
    if speed:
        lines, means = _ratio_rows(r, speed)
        out += ["## Kiln against PyTorch", "",
                "Latency of the faster of eager PyTorch and Inductor (float32; for int8 also Inductor int8) / "
                f"the Kiln path's latency: above 1x Kiln is faster. The goal for the float paths is "
                f"{GEOMEAN_GOAL}x in geometric mean, and int8 Kiln above 1x Inductor int8 on every model. * the "
                "Kiln case had ops fall back to PyTorch (see Fallbacks).", "",
                *lines, ""]
    out += ["## Fallbacks", "",
            "From each Kiln case's LoweringReport(s) after its first run: dynamo graphs (backend=\"kiln\"), graphs "
            "that ran eagerly, Kiln subgraphs, ops compiled and ops left to PyTorch.", "", *fallback_table(r), "",
            "## Load time (s)", "", "Loading, quantizing and compiling, plus the first run (where torch.compile "
            "compiles).", "", *load_table(r), ""]
    unsupported = [c for c in doc["cases"] if c.get("unsupported")]
    issues = [line for line in problems(TorchResults({**doc, "cases": [c for c in doc["cases"]
                                                                        if not c.get("unsupported")]}, titles),
                                       not_accepted="outputs not accepted")]
    issues += [f"- {r.model_title(c['model'])} batch {c['batch']}, {r.engine_title(c['engine'])}: unsupported: "
               f"{c['error']}" for c in unsupported]
    out += ["## Problems", ""] + (issues or ["None."]) + [""]
    return "\n".join(out)
