"""The benchmark's Markdown report, written from the raw results (the JSON
document bench/run_bench.py saves), so a report can be rebuilt from saved
data without rerunning anything (run_bench.py --report-only results.json).

Results document layout (the parts read here):
    settings: {threads, runs, warmup, rounds, models, engines, batches}
    machine:  {cpu, cores, memory_bytes, load_average_start, load_average_end, ...}
    versions: {engine: "name version"}
    sgemm:    {runs: [{library, threads, n, gflops}], peak_gflops: {threads as str: GFLOP/s}, errors}
    flops:    {model: {batch as str: FLOPs}}
    cases:    [{model, batch, engine, status, error, median_s, times_s, phases, memory, check}]
"""
import math
import statistics

KILN = "kiln"
REFERENCE_ENGINE_FOR_MEMORY = "onnxruntime"
SPEED_GOAL_MODEL, SPEED_GOAL_BATCH, SPEED_GOAL_FRACTION = "resnet50", 8, 0.70
COMPILE_GOAL_MODELS, COMPILE_GOAL_SECONDS = ("resnet50", "bert_base"), 5.0
GEOMEAN_GOAL = 1.2  # Kiln's speed-up over the fastest other engine, geometric mean over models and batches


def median_seconds(case):
    times = case.get("times_s") or []
    return statistics.median(times) if times else None


def fmt_ms(seconds):
    if seconds is None:
        return "-"
    ms = seconds * 1e3
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}"


def fmt_ratio(x):
    return "-" if x is None else f"{x:.2f}x"


def fmt_mb(n):
    return "-" if n is None else f"{n / 2**20:.0f}"


def geometric_mean(values):
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


class Results:
    """Index over a results document: case lookup and derived figures."""

    def __init__(self, doc, titles):
        self.doc, self.titles = doc, titles
        self.settings = doc["settings"]
        self.engines = self.settings["engines"]
        self.models = self.settings["models"]
        self.batches = self.settings["batches"]
        self.cases = {(c["model"], c["batch"], c["engine"]): c for c in doc["cases"]}

    def case(self, model, batch, engine):
        return self.cases.get((model, batch, engine))

    def rows(self):
        return [(m, b) for m in self.models for b in self.batches if any(self.case(m, b, e) for e in self.engines)]

    def latency(self, model, batch, engine):
        """Median seconds of a case that ran, whether or not its outputs agreed."""
        c = self.case(model, batch, engine)
        return median_seconds(c) if c else None

    def agrees(self, model, batch, engine):
        c = self.case(model, batch, engine)
        return bool(c and (c.get("check") or {}).get("agrees"))

    def fastest_other(self, model, batch, engines=None):
        """(engine, seconds) of the fastest of `engines` (by default every engine but Kiln's own, such as
        Kiln tuned) whose outputs agree, or (None, None)."""
        best = (None, None)
        for e in [e for e in self.engines if not e.startswith(KILN)] if engines is None else engines:
            t = self.latency(model, batch, e)
            if t is not None and self.agrees(model, batch, e) and (best[1] is None or t < best[1]):
                best = (e, t)
        return best

    def model_title(self, model):
        return self.titles.get(model, model)

    def engine_title(self, engine):
        return self.doc.get("engine_titles", {}).get(engine, engine)

    def flops(self, model, batch):
        return (self.doc.get("flops", {}).get(model) or {}).get(str(batch))

    def sgemm_peak(self):
        peaks = (self.doc.get("sgemm") or {}).get("peak_gflops") or {}
        return peaks.get(str(self.settings["threads"]))

    def kiln_gflops(self, model, batch):
        flops, t = self.flops(model, batch), self.latency(model, batch, KILN)
        return flops / t * 1e-9 if flops and t else None

    def kiln_compile_seconds(self, model, batch):
        c = self.case(model, batch, KILN)
        phases = (c or {}).get("phases") or {}
        if "parse" not in phases or "compile" not in phases:
            return None
        return phases["parse"] + phases["compile"]


def latency_cell(results, model, batch, engine, note=""):
    """The median in ms, (n=k) when the time budget cut the timing short, then `note`, and † when the outputs
    were not accepted; - without a case, failed for a case that did not run."""
    c = results.case(model, batch, engine)
    if c is None:
        return "-"
    t = results.latency(model, batch, engine)
    if t is None:
        return "failed"
    runs = len(c["times_s"])
    cut_short = f" (n={runs})" if runs < results.settings["runs"] else ""
    return fmt_ms(t) + cut_short + note + ("" if results.agrees(model, batch, engine) else " †")


def _table(header, aligns, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(aligns) + "|"]
    lines += ["| " + " | ".join(str(x) for x in row) + " |" for row in rows]
    return lines


def engine_table(r, cell):
    """A table with a row per model and batch and a column per engine, each cell cell(r, model, batch, engine)."""
    header = ["Model", "Batch"] + [r.engine_title(e) for e in r.engines]
    rows = [[r.model_title(m), b] + [cell(r, m, b, e) for e in r.engines] for m, b in r.rows()]
    return _table(header, ["---", "---:"] + ["---:"] * len(r.engines), rows)


def latency_table(r):
    return engine_table(r, latency_cell)


def ratio_table(r):
    others = [e for e in r.engines if e != KILN]
    header = ["Model", "Batch"] + [r.engine_title(e) for e in others] + ["Fastest other", "Kiln vs fastest"]
    rows = []
    for m, b in r.rows():
        kiln = r.latency(m, b, KILN)
        row = [r.model_title(m), b]
        for e in others:
            t = r.latency(m, b, e)
            row.append(fmt_ratio(t / kiln) if t and kiln else "-")
        best, best_t = r.fastest_other(m, b)
        row.append(r.engine_title(best) if best else "-")
        row.append(fmt_ratio(best_t / kiln) if best_t and kiln else "-")
        rows.append(row)
    return _table(header, ["---", "---:"] + ["---:"] * (len(others) + 1) + ["---:"], rows)


def kiln_table(r):
    peak = r.sgemm_peak()
    header = ["Model", "Batch", "Parse (s)", "Compile (s)", "Parse + compile (s)", "GFLOP", "Kiln GFLOP/s",
              "% of sgemm peak"]
    rows = []
    for m, b in r.rows():
        c = r.case(m, b, KILN) or {}
        phases = c.get("phases") or {}
        flops, achieved, total = r.flops(m, b), r.kiln_gflops(m, b), r.kiln_compile_seconds(m, b)
        rows.append([
            r.model_title(m), b,
            f"{phases['parse']:.2f}" if "parse" in phases else "-",
            f"{phases['compile']:.2f}" if "compile" in phases else "-",
            f"{total:.2f}" if total is not None else "-",
            f"{flops / 1e9:.2f}" if flops else "-",
            f"{achieved:.1f}" if achieved else "-",
            f"{100 * achieved / peak:.1f}%" if achieved and peak else "-",
        ])
    return _table(header, ["---", "---:"] + ["---:"] * 6, rows)


def memory_table(r):
    header = ["Model", "Batch"] + [r.engine_title(e) for e in r.engines]
    show_ratio = KILN in r.engines and REFERENCE_ENGINE_FOR_MEMORY in r.engines
    if show_ratio:
        header.append(f"Kiln / {r.engine_title(REFERENCE_ENGINE_FOR_MEMORY)}")
    rows = []
    for m, b in r.rows():
        growth = {}
        for e in r.engines:
            c = r.case(m, b, e)
            growth[e] = ((c or {}).get("memory") or {}).get("peak_growth_bytes")
        row = [r.model_title(m), b] + [fmt_mb(growth[e]) for e in r.engines]
        if show_ratio:
            k, o = growth[KILN], growth[REFERENCE_ENGINE_FOR_MEMORY]
            row.append(fmt_ratio(k / o) if k is not None and o else "-")
        rows.append(row)
    return _table(header, ["---", "---:"] + ["---:"] * (len(header) - 2), rows)


def _load_cell(r, model, batch, engine):
    phases = (r.case(model, batch, engine) or {}).get("phases") or {}
    return f"{sum(phases.values()):.1f}" if phases else "-"


def load_table(r):
    return engine_table(r, _load_cell)


def _agreement_cell(r, model, batch, engine):
    check = (r.case(model, batch, engine) or {}).get("check")
    if not check:
        return "-"
    if check.get("relative_error") is None:
        return "✗"
    return f"{check['relative_error']:.1e} " + ("✓" if check["agrees"] else "✗")


def agreement_table(r):
    return engine_table(r, _agreement_cell)


def sgemm_table(r):
    sg = r.doc.get("sgemm") or {}
    runs = sg.get("runs") or []
    libraries = sorted({x["library"] for x in runs})
    sizes = sorted({x["n"] for x in runs})
    threads = sorted({x["threads"] for x in runs})
    header = ["Library", "Threads"] + [f"n = {n}" for n in sizes]
    rows = []
    for lib in libraries:
        for t in threads:
            by_n = {x["n"]: x["gflops"] for x in runs if x["library"] == lib and x["threads"] == t}
            if by_n:
                rows.append([lib, t] + [f"{by_n[n]:.1f}" if n in by_n else "-" for n in sizes])
    return _table(header, ["---", "---:"] + ["---:"] * len(sizes), rows)


def goals(r):
    """(goal, status text) for each goal of the fast-CPU-target work that this run measured."""
    out = []
    if KILN not in r.engines:
        return out
    speed, speedups = [], []
    for m, b in r.rows():
        kiln, (best, best_t) = r.latency(m, b, KILN), r.fastest_other(m, b)
        if kiln and best_t:
            speed.append(f"{r.model_title(m)} b{b}: {'met' if kiln <= best_t else 'not met'} "
                         f"({fmt_ms(kiln)} vs {r.engine_title(best)} {fmt_ms(best_t)} ms)")
            speedups.append(best_t / kiln)
    if speed:
        out.append(("Kiln at least as fast as the fastest other engine", "; ".join(speed)))
        geomean = geometric_mean(speedups)
        out.append((f"Geometric mean of Kiln vs the fastest other engine >= {GEOMEAN_GOAL:.1f}x",
                    f"{'met' if geomean >= GEOMEAN_GOAL else 'not met'}: {fmt_ratio(geomean)} over "
                    f"{len(speedups)} model/batch pairs"))
    achieved, peak = r.kiln_gflops(SPEED_GOAL_MODEL, SPEED_GOAL_BATCH), r.sgemm_peak()
    if achieved and peak:
        frac = achieved / peak
        out.append((f"ResNet-50 batch {SPEED_GOAL_BATCH} at >= {SPEED_GOAL_FRACTION:.0%} of the sgemm peak",
                    f"{'met' if frac >= SPEED_GOAL_FRACTION else 'not met'}: {achieved:.1f} of {peak:.1f} GFLOP/s "
                    f"({frac:.1%})"))
    compile_notes = []
    for m in COMPILE_GOAL_MODELS:
        for b in r.batches:
            t = r.kiln_compile_seconds(m, b)
            if t is not None:
                compile_notes.append(f"{r.model_title(m)} b{b}: {t:.2f} s "
                                     f"({'met' if t <= COMPILE_GOAL_SECONDS else 'not met'})")
    if compile_notes:
        out.append((f"Kiln parse + compile <= {COMPILE_GOAL_SECONDS:.0f} s for ResNet-50 and BERT",
                    "; ".join(compile_notes)))
    if REFERENCE_ENGINE_FOR_MEMORY in r.engines:
        verdicts = []
        for m, b in r.rows():
            mem = {e: (((r.case(m, b, e) or {}).get("memory") or {}).get("peak_growth_bytes"))
                   for e in (KILN, REFERENCE_ENGINE_FOR_MEMORY)}
            if None not in mem.values():
                ok = mem[KILN] <= mem[REFERENCE_ENGINE_FOR_MEMORY]
                verdicts.append(ok)
        if verdicts:
            out.append(("Kiln peak memory <= ONNX Runtime's",
                        f"met on {sum(verdicts)} of {len(verdicts)} model/batch pairs"))
    return out


def problems(r, not_accepted="outputs disagree"):
    """Lines naming each case that failed or whose outputs were not accepted (`not_accepted` says how)."""
    lines = []
    for c in r.doc["cases"]:
        label = f"{r.model_title(c['model'])} batch {c['batch']}, {r.engine_title(c['engine'])}"
        if c.get("error"):
            lines.append(f"- {label}: failed ({c.get('error_phase', 'run')}): {c['error']}")
        elif c.get("check") and not c["check"].get("agrees"):
            lines.append(f"- {label}: {not_accepted}: {c['check'].get('message')}")
    return lines


def _rounds_text(rounds, idle_waits):
    if rounds <= 1:
        return ""
    idle = (", each round once the other engines' processes are idle (thread pools that spin after a run would "
            "otherwise share the cores with the next engine)") if idle_waits else ""
    return (f", taken in {rounds} rounds in which the engines of a model take turns (so that a slow spell of "
            f"the machine falls on all of them){idle}, each later round after one more untimed run")


def render(doc, titles, chart_name=None):
    """The whole report as Markdown text."""
    r = Results(doc, titles)
    s, m = r.settings, doc.get("machine", {})
    peak = r.sgemm_peak()
    rounds = _rounds_text(s.get("rounds", 1), any("idle_waits_s" in c for c in doc.get("cases", [])))
    out = ["# Kiln benchmarks", ""]
    out.append(f"Run {doc.get('started', '?')} on {m.get('cpu', '?')} ({m.get('cores', '?')} cores, "
               f"{m.get('isa', '?')}, {fmt_mb(m.get('memory_bytes'))} MiB); every engine limited to "
               f"{s['threads']} threads, in a process of its own. Median of {s['runs']} timed runs after "
               f"{s['warmup']} warm-up runs{rounds}, float32, same inputs for every "
               f"engine. Load average "
               f"{m.get('load_average_start', '?')} at the start, {m.get('load_average_end', '?')} at the end "
               f"(the machine was shared if that is above 0.5 or so; then timings are noisy). "
               f"Whole run: {doc.get('duration_s', 0) / 60:.1f} min.")
    out.append("")
    versions = list(dict.fromkeys(doc.get("versions", {}).values()))  # torch appears for two engines
    out.append("Versions: " + ", ".join(versions + doc.get("model_tools", [])) + ".")
    out.append("")
    if chart_name:
        out += [f"![latency per model and engine]({chart_name})", ""]
    out += ["## Latency (ms)", "", *latency_table(r), "",
            "† outputs disagree with the float64 reference (see Problems); the time is shown but not compared."]
    if s.get("time_budget_s"):
        out.append(f"(n=k): the case's {s['time_budget_s']:.0f} s time budget (--time-budget) ended its timing "
                   f"after k runs; the median is over those.")
    out.append("")
    if KILN in r.engines and len(r.engines) > 1:
        out += ["## Each engine's latency relative to Kiln", "",
                "Engine latency / Kiln latency: above 1x Kiln is faster, below 1x the engine is. "
                "\"Kiln vs fastest\" is that ratio for the fastest other engine whose outputs agree.", "",
                *ratio_table(r), ""]
    if KILN in r.engines:
        out += ["## Kiln compile time and achieved rate", "",
                "Parse = kiln.parse_onnx, compile = program.compile (optimization passes and code generation). "
                "GFLOP counts 2 x the multiply-accumulates of Conv, ConvTranspose, MatMul and Gemm in the ONNX "
                f"graph, as a direct computation does them; the peak is the best measured float32 GEMM rate at "
                f"{s['threads']} threads" + (f" ({peak:.1f} GFLOP/s)." if peak else " (not measured).")
                + " Kiln runs 3 x 3 stride-1 convolutions by Winograd's F(2 x 2, 3 x 3), which "
                "does 4/9 of their multiplies, so its rate in these terms can pass the peak.", "", *kiln_table(r), ""]
    out += ["## Peak memory (MiB)", "",
            "Growth of the worker process's peak resident set over its size after importing the engine: "
            "loading, compiling and running the model, inputs and outputs included.", "", *memory_table(r), "",
            "## Load time (s)", "",
            "Everything before the timed runs: reading and compiling the model plus the first run (for "
            "torch.compile the first run is where compilation happens).", "", *load_table(r), "",
            "## Output agreement", "",
            "Worst error of each engine's outputs against the torch module run in float64 on the same inputs, "
            "as a fraction of the output's largest magnitude; ✓ when every element is within rtol 1e-3 / atol "
            "1e-4 x that magnitude. Checked on the first run, before timing.", "", *agreement_table(r), ""]
    if doc.get("sgemm"):
        out += ["## sgemm peak (GFLOP/s)", "", "float32 C = A x B on n x n matrices, median of repeated calls.", "",
                *sgemm_table(r), ""]
        out += [f"- {e}" for e in doc["sgemm"].get("errors") or []]
    goal_lines = goals(r)
    if goal_lines:
        out += ["## Goals", "", *_table(["Goal", "This run"], ["---", "---"], goal_lines), ""]
    issues = problems(r)
    out += ["## Problems", ""] + (issues or ["None: every engine ran every model and its outputs agree."]) + [""]
    return "\n".join(out)
