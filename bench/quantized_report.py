"""The quantized suite's Markdown report (run_bench.py --suite quantized),
written from its results document like report.py's: latency with each case's
SQNR beside it, speed-ups over Kiln float32 and over the fastest other
engine's int8, the part-6 SQNR rule, peak memory, load and quantization
times, and the issue's goals.

Besides report.py's fields the document has
    settings.suite: "quantized"
    precisions:   {engine: "float32" | "int8" | "fp16" | "bf16"}
    quantization: {calibration_samples, qdq_ops, qdq_tag, torchao}
    cases[].check.sqnr_db
"""
import report
from report import (KILN, Results, _table, engine_table, fmt_mb, fmt_ms, fmt_ratio, geometric_mean, latency_cell,
                    load_table)

REFERENCE_INT8 = "onnxruntime_int8"  # the part-6 SQNR rule compares Kiln's quantizer with ONNX Runtime's
OWN_QUANTIZER = "kiln_int8"
SQNR_RULE_MODELS = ("resnet50", "mobilenet_v2", "bert_base")
SQNR_RULE_MARGIN_DB = 1.0
FASTEST_INT8_GEOMEAN_GOAL = 1.2  # Kiln int8 over the fastest other int8, geometric mean
FLOAT_SPEEDUP_MODEL, FLOAT_SPEEDUP_GOAL, FLOAT_SPEEDUP_GEOMEAN_GOAL = "resnet50", 2.0, 1.5
QUANTIZE_GOAL_MODELS, QUANTIZE_GOAL_SECONDS = ("resnet50", "bert_base"), 30.0


def fmt_db(value):
    if value is None:
        return "-"
    return "exact" if value >= 999.0 else f"{value:.1f} dB"


class QuantizedResults(Results):
    def precision(self, engine):
        return self.doc.get("precisions", {}).get(engine, "float32")

    def kiln_int8_engines(self):
        return [e for e in self.engines if e.startswith(KILN) and self.precision(e) == "int8"]

    def other_int8_engines(self):
        return [e for e in self.engines if not e.startswith(KILN) and self.precision(e) == "int8"]

    def sqnr(self, model, batch, engine):
        c = self.case(model, batch, engine)
        return ((c or {}).get("check") or {}).get("sqnr_db")

    def fastest_other_int8(self, model, batch):
        """(engine, seconds) of the fastest non-Kiln int8 engine whose SQNR clears the floor, or (None, None)."""
        return self.fastest_other(model, batch, self.other_int8_engines())

    def speedup(self, model, batch, engine, over):
        """Latency of `over` / latency of `engine` (above 1: `engine` is faster), when both agree."""
        t, base = self.latency(model, batch, engine), self.latency(model, batch, over)
        if t and base and self.agrees(model, batch, engine) and self.agrees(model, batch, over):
            return base / t
        return None


def _cell(r, model, batch, engine):
    return latency_cell(r, model, batch, engine, f" · {fmt_db(r.sqnr(model, batch, engine))}")


def latency_table(r):
    return engine_table(r, _cell)


def float_speedup_table(r):
    others = [e for e in r.engines if e != KILN]
    header = ["Model", "Batch"] + [r.engine_title(e) for e in others]
    rows = [[r.model_title(m), b] + [fmt_ratio(r.speedup(m, b, e, KILN)) for e in others] for m, b in r.rows()]
    return _table(header, ["---", "---:"] + ["---:"] * len(others), rows)


def fastest_int8_table(r):
    kilns = r.kiln_int8_engines()
    header = ["Model", "Batch", "Fastest other int8", "Its latency (ms)", "Its SQNR"] + [
        f"{r.engine_title(e)} vs it" for e in kilns]
    rows = []
    for m, b in r.rows():
        best, best_t = r.fastest_other_int8(m, b)
        row = [r.model_title(m), b, r.engine_title(best) if best else "-", fmt_ms(best_t),
               fmt_db(r.sqnr(m, b, best)) if best else "-"]
        row += [fmt_ratio(best_t / t) if best and (t := _agreeing_latency(r, m, b, e)) else "-" for e in kilns]
        rows.append(row)
    return _table(header, ["---", "---:", "---", "---:", "---:"] + ["---:"] * len(kilns), rows)


def _agreeing_latency(r, model, batch, engine):
    return r.latency(model, batch, engine) if r.agrees(model, batch, engine) else None


def sqnr_rule(r):
    """[(model, batch, Kiln quantize_int8 SQNR, ONNX Runtime int8 SQNR, met or None)] on the rule's models."""
    out = []
    for m, b in r.rows():
        if m not in SQNR_RULE_MODELS:
            continue
        kiln, ort = r.sqnr(m, b, OWN_QUANTIZER), r.sqnr(m, b, REFERENCE_INT8)
        met = None if kiln is None or ort is None else kiln >= ort - SQNR_RULE_MARGIN_DB
        out.append((m, b, kiln, ort, met))
    return out


def sqnr_rule_table(r):
    qdq = "kiln_qdq" in r.engines
    header = ["Model", "Batch", r.engine_title(OWN_QUANTIZER), r.engine_title(REFERENCE_INT8), "Difference", "Met"]
    header += [r.engine_title("kiln_qdq")] if qdq else []
    rows = []
    for m, b, kiln, ort, met in sqnr_rule(r):
        row = [r.model_title(m), b, fmt_db(kiln), fmt_db(ort),
               f"{kiln - ort:+.1f} dB" if met is not None else "-", "-" if met is None else "yes" if met else "no"]
        row += [fmt_db(r.sqnr(m, b, "kiln_qdq"))] if qdq else []
        rows.append(row)
    return _table(header, ["---", "---:"] + ["---:"] * (len(header) - 2), rows)


def quantize_seconds(r, model, batch, engine=OWN_QUANTIZER):
    """kiln.quantize_int8 (calibration included) plus compile, in seconds."""
    phases = (r.case(model, batch, engine) or {}).get("phases") or {}
    if "quantize" not in phases or "compile" not in phases:
        return None
    return phases["quantize"] + phases["compile"]


def _met(ok):
    return "met" if ok else "not met"


def goals(r):
    """(goal, status) for each of the issue's goals that this run measured, for each Kiln int8 engine."""
    out = []
    for kiln in r.kiln_int8_engines():
        title = r.engine_title(kiln)
        notes, over_fastest = [], []
        for m, b in r.rows():
            best, best_t = r.fastest_other_int8(m, b)
            t = _agreeing_latency(r, m, b, kiln)
            if best and t:
                notes.append(f"{r.model_title(m)} b{b}: {_met(t < best_t)} ({fmt_ms(t)} vs "
                             f"{r.engine_title(best)} {fmt_ms(best_t)} ms)")
                over_fastest.append(best_t / t)
        if notes:
            out.append((f"{title} faster than the fastest other int8", "; ".join(notes)))
            g = geometric_mean(over_fastest)
            out.append((f"{title}: geometric mean over the fastest other int8 >= {FASTEST_INT8_GEOMEAN_GOAL:.1f}x",
                        f"{_met(g >= FASTEST_INT8_GEOMEAN_GOAL)}: {fmt_ratio(g)} over {len(over_fastest)} "
                        f"model/batch pairs"))
        resnet = [(b, r.speedup(FLOAT_SPEEDUP_MODEL, b, kiln, KILN)) for b in r.batches]
        resnet = [(b, s) for b, s in resnet if s is not None]
        if resnet:
            out.append((f"{title} >= {FLOAT_SPEEDUP_GOAL:.0f}x Kiln float32 on {r.model_title(FLOAT_SPEEDUP_MODEL)}",
                        "; ".join(f"b{b}: {_met(s >= FLOAT_SPEEDUP_GOAL)} ({fmt_ratio(s)})" for b, s in resnet)))
        per_model = []
        for m in r.models:
            speedups = [s for b in r.batches if (s := r.speedup(m, b, kiln, KILN)) is not None]
            if speedups:
                per_model.append(geometric_mean(speedups))
        if per_model:
            g = geometric_mean(per_model)
            out.append((f"{title}: geometric mean over Kiln float32 >= {FLOAT_SPEEDUP_GEOMEAN_GOAL:.1f}x",
                        f"{_met(g >= FLOAT_SPEEDUP_GEOMEAN_GOAL)}: {fmt_ratio(g)} over {len(per_model)} models"))
        sqnr_notes = []
        for m, b in r.rows():
            mine = r.sqnr(m, b, kiln)
            theirs = [(e, r.sqnr(m, b, e)) for e in r.other_int8_engines()
                      if r.sqnr(m, b, e) is not None and r.agrees(m, b, e)]
            if mine is not None and theirs:
                worst_gap = max(s - mine for _, s in theirs)
                sqnr_notes.append(worst_gap <= SQNR_RULE_MARGIN_DB)
        if sqnr_notes:
            out.append((f"{title}: SQNR no worse than each other engine's int8 (within {SQNR_RULE_MARGIN_DB:.0f} dB)",
                        f"met on {sum(sqnr_notes)} of {len(sqnr_notes)} model/batch pairs"))
    times = []
    for m in QUANTIZE_GOAL_MODELS:
        for b in r.batches:
            t = quantize_seconds(r, m, b)
            if t is not None:
                times.append(f"{r.model_title(m)} b{b}: {t:.1f} s ({_met(t <= QUANTIZE_GOAL_SECONDS)})")
    if times:
        out.append((f"kiln.quantize_int8 ({r.doc.get('quantization', {}).get('calibration_samples', '?')} samples) "
                    f"+ compile <= {QUANTIZE_GOAL_SECONDS:.0f} s", "; ".join(times)))
    rule = [met for *_, met in sqnr_rule(r) if met is not None]
    if rule:
        out.append((f"Part 6: Kiln int8 SQNR >= ONNX Runtime int8 SQNR - {SQNR_RULE_MARGIN_DB:.0f} dB "
                    f"({', '.join(r.model_title(m).split(' (')[0] for m in SQNR_RULE_MODELS)})",
                    f"{_met(all(rule))} on {sum(rule)} of {len(rule)} model/batch pairs"))
    return out


def problems(r):
    return report.problems(r, not_accepted="outputs rejected")


def _scheme_text(doc):
    q = doc.get("quantization") or {}
    ops = "/".join(q.get("qdq_ops") or ["?"])
    return (f"Quantization: one QDQ file per model and batch written by onnxruntime.quantization.quantize_static "
            f"(per-channel symmetric int8 weights, int8 activations with zero points (S8S8), MinMax ranges, the "
            f"inputs of {ops} quantized; {q.get('qdq_tag', '?')}), calibrated on "
            f"{q.get('calibration_samples', '?')} fixed samples (synthetic photographs for the image models, "
            f"token ids for BERT). ONNX Runtime int8, OpenVINO int8 and Kiln int8 (QDQ file) run that same file. "
            f"Kiln int8 (quantize_int8) quantizes the float model itself on the same samples with the same scheme "
            f"(method max, per_channel, ins_names dot and convolution); Inductor int8 quantizes the torch module "
            f"with {q.get('torchao', 'torchao')}'s PT2E flow and X86InductorQuantizer's default recipe on the same "
            f"samples, then torch.compile with freezing. Kiln fp16 / bf16 are kiln.quantize_fp16 / quantize_bf16 of the "
            f"float model.")


def render(doc, titles, chart_name=None):
    r = QuantizedResults(doc, titles)
    s, m = r.settings, doc.get("machine", {})
    out = ["# Kiln benchmarks: int8, fp16 and bf16", ""]
    out.append(f"Run {doc.get('started', '?')} on {m.get('cpu', '?')} ({m.get('cores', '?')} cores, {m.get('isa', '?')}, "
               f"{fmt_mb(m.get('memory_bytes'))} MiB); every engine limited to {s['threads']} threads, in a process "
               f"of its own, the engines of a model timed in {s.get('rounds', 1)} interleaved rounds. Median of "
               f"{s['runs']} timed runs after {s['warmup']} warm-up runs, on held-out inputs (never calibrated on). "
               f"Load average {m.get('load_average_start', '?')} at the start, {m.get('load_average_end', '?')} at the "
               f"end. Whole run: {doc.get('duration_s', 0) / 60:.1f} min.")
    out += ["", _scheme_text(doc), ""]
    versions = list(dict.fromkeys(doc.get("versions", {}).values()))
    out += ["Versions: " + ", ".join(versions + doc.get("model_tools", [])) + ".", ""]
    if chart_name:
        out += [f"![latency per model and engine]({chart_name})", ""]
    out += ["## Latency (ms) · SQNR", "",
            "SQNR: signal-to-quantization-noise ratio of the outputs against the float model's exact (float64) "
            "outputs on the same inputs, the worst over a model's outputs (every 6 dB is a bit; float32 is "
            "above 100 dB). n/a: this Kiln build lacks the function the case needs. † below the precision's "
            "SQNR floor (see Problems): shown, not compared.", "", *latency_table(r), ""]
    if s.get("time_budget_s"):
        out += [f"(n=k): the case's {s['time_budget_s']:.0f} s time budget ended its timing after k runs.", ""]
    if KILN in r.engines and len(r.engines) > 1:
        out += ["## Speed-up over Kiln float32", "",
                "Kiln float32 latency / the engine's latency (above 1x the engine is faster than Kiln float32).", "",
                *float_speedup_table(r), ""]
    if r.kiln_int8_engines() and r.other_int8_engines():
        out += ["## Kiln int8 against the fastest other engine's int8", "",
                "The other engines' fastest int8 latency / Kiln's (above 1x Kiln is faster).", "",
                *fastest_int8_table(r), ""]
    if OWN_QUANTIZER in r.engines and REFERENCE_INT8 in r.engines and sqnr_rule(r):
        out += ["## SQNR rule (part 6)", "",
                f"kiln.quantize_int8's SQNR must be at least ONNX Runtime int8's minus {SQNR_RULE_MARGIN_DB:.0f} dB "
                "with the same calibration samples and scheme.", "", *sqnr_rule_table(r), ""]
    out += ["## Peak memory (MiB)", "",
            "Growth of the worker process's peak resident set over its size after importing the engine.", "",
            *report.memory_table(r), "",
            "## Load time (s)", "",
            "Everything before the timed runs: reading, quantizing (calibration included) and compiling, plus "
            "the first run (where torch.compile compiles).", "", *load_table(r), ""]
    goal_lines = goals(r)
    if goal_lines:
        out += ["## Goals", "", *_table(["Goal", "This run"], ["---", "---"], goal_lines), ""]
    issues = problems(r)
    out += ["## Problems", ""] + (issues or ["None: every engine ran every model above its SQNR floor."]) + [""]
    return "\n".join(out)

