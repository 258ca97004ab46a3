"""The tf suite's Markdown report (run_bench.py --suite tf): Keras applications
run by Kiln on the frozen GraphDef, TensorFlow on the SavedModel with XLA off
and on, and OpenVINO on the same SavedModel; latencies, each engine's ratio to
Kiln, Kiln's parse and compile times, load times, peak memory, and each
engine's worst error against TensorFlow's own output.

Besides report.py's fields the document has
    settings.suite: "tf"
    cases[].check.max_abs_error: worst |engine - TensorFlow| over the outputs
Issue 16's goals: Kiln at least 1.5x faster than TensorFlow (the faster of XLA
off and on) and at least as fast as OpenVINO, on every model and batch.
"""
from report import (Results, _table, engine_table, fmt_mb, fmt_ms, fmt_ratio, geometric_mean, latency_cell,
                    load_table, problems)

KILN = "kiln_tf"
TENSORFLOW = ("tensorflow", "tensorflow_xla")
OPENVINO = "openvino_tf"
TF_GOAL = 1.5  # Kiln's speed-up over the faster TensorFlow
OPENVINO_GOAL = 1.0  # Kiln at least as fast as OpenVINO


def _ratio_table(r):
    """Engine latency / Kiln latency for every other engine, then the two goals' ratios."""
    others = [e for e in r.engines if e != KILN]
    tf_engines = [e for e in TENSORFLOW if e in r.engines]
    header = (["Model", "Batch"] + [r.engine_title(e) for e in others]
              + (["Faster TensorFlow / Kiln"] if tf_engines else []))
    rows = []
    for m, b in r.rows():
        kiln = r.latency(m, b, KILN)
        row = [r.model_title(m), b]
        for e in others:
            t = r.latency(m, b, e)
            row.append(fmt_ratio(t / kiln) if t and kiln else "-")
        if tf_engines:
            best, best_t = r.fastest_other(m, b, tf_engines)
            row.append(f"{fmt_ratio(best_t / kiln)} ({r.engine_title(best)})" if best_t and kiln else "-")
        rows.append(row)
    return _table(header, ["---", "---:"] + ["---:"] * (len(header) - 2), rows)


def _kiln_table(r):
    header = ["Model", "Batch", "Parse (s)", "Compile (s)", "Parse + compile (s)", "First run (s)"]
    rows = []
    for m, b in r.rows():
        phases = (r.case(m, b, KILN) or {}).get("phases") or {}

        def cell(key):
            return f"{phases[key]:.2f}" if key in phases else "-"

        total = phases["parse"] + phases["compile"] if "parse" in phases and "compile" in phases else None
        rows.append([r.model_title(m), b, cell("parse"), cell("compile"),
                     f"{total:.2f}" if total is not None else "-", cell("first_run")])
    return _table(header, ["---", "---:"] + ["---:"] * 4, rows)


def _agreement_cell(r, model, batch, engine):
    check = (r.case(model, batch, engine) or {}).get("check")
    if not check:
        return "-"
    if check.get("relative_error") is None:
        return "✗"
    absolute = check.get("max_abs_error")
    return (f"{absolute:.1e} / {check['relative_error']:.1e} " if absolute is not None
            else f"{check['relative_error']:.1e} ") + ("✓" if check["agrees"] else "✗")


def _memory_cell(r, model, batch, engine):
    return fmt_mb(((r.case(model, batch, engine) or {}).get("memory") or {}).get("peak_growth_bytes"))


def _goals(r):
    out = []
    if KILN not in r.engines:
        return out
    for label, engines, goal in ((f"Kiln >= {TF_GOAL:.1f}x faster than TensorFlow (faster of XLA off / on)",
                                  [e for e in TENSORFLOW if e in r.engines], TF_GOAL),
                                 ("Kiln at least as fast as OpenVINO", [OPENVINO] if OPENVINO in r.engines else [],
                                  OPENVINO_GOAL)):
        if not engines:
            continue
        notes, ratios = [], []
        for m, b in r.rows():
            kiln, (best, best_t) = r.latency(m, b, KILN), r.fastest_other(m, b, engines)
            if kiln and best_t and r.agrees(m, b, KILN):
                ratio = best_t / kiln
                ratios.append(ratio)
                notes.append(f"{r.model_title(m)} b{b}: {'met' if ratio >= goal else 'not met'} "
                             f"({fmt_ms(kiln)} vs {r.engine_title(best)} {fmt_ms(best_t)} ms, {fmt_ratio(ratio)})")
        if notes:
            met = sum(x >= goal for x in ratios)
            out.append((label, f"met on {met} of {len(ratios)} (geometric mean {fmt_ratio(geometric_mean(ratios))}): "
                        + "; ".join(notes)))
    return out


def render(doc, titles, chart_name=None):
    """The whole report as Markdown text."""
    r = Results(doc, titles)
    s, m = r.settings, doc.get("machine", {})
    rounds = s.get("rounds", 1)
    out = ["# Kiln against TensorFlow and OpenVINO on Keras models", ""]
    out.append(f"Run {doc.get('started', '?')} on {m.get('cpu', '?')} ({m.get('cores', '?')} cores, "
               f"{m.get('isa', '?')}, {fmt_mb(m.get('memory_bytes'))} MiB); every engine limited to {s['threads']} "
               f"threads (TensorFlow's intra- and inter-op pools, OpenVINO's INFERENCE_NUM_THREADS, Kiln's "
               f"compile option), in a process of its own. Median of {s['runs']} timed runs after {s['warmup']} "
               f"warm-up runs" + (f", in {rounds} rounds in which the engines of a model take turns" if rounds > 1
                                  else "")
               + f", float32, same NHWC input for every engine. Load average {m.get('load_average_start', '?')} "
               f"at the start, {m.get('load_average_end', '?')} at the end (above 0.5 or so the machine was shared "
               f"and the timings are noisy). Whole run: {doc.get('duration_s', 0) / 60:.1f} min.")
    out.append("")
    out.append("Engines: Kiln cpu = kiln.parse_tf on the frozen GraphDef (convert_variables_to_constants_v2), "
               "compiled for cpu; TensorFlow = the SavedModel's serving_default function from tf.saved_model.load "
               "(graph execution, XLA off, TensorFlow's default oneDNN ops); TensorFlow XLA = the same function "
               "inside tf.function(jit_compile=True), compiled on the first run; OpenVINO = "
               "openvino.convert_model of the same SavedModel directory, compile_model(\"CPU\") with f32 "
               "inference precision.")
    out.append("")
    versions = list(dict.fromkeys(doc.get("versions", {}).values()))
    out.append("Versions: " + ", ".join(versions + doc.get("model_tools", [])) + ".")
    out.append("")
    if chart_name:
        out += [f"![latency per model and engine]({chart_name})", ""]
    out += ["## Latency (ms)", "", *engine_table(r, latency_cell), "",
            "† outputs disagree with TensorFlow's (see Problems); the time is shown but not compared.", ""]
    if KILN in r.engines and len(r.engines) > 1:
        out += ["## Each engine's latency relative to Kiln", "",
                "Engine latency / Kiln latency: above 1x Kiln is faster. The last column is the faster TensorFlow "
                "(XLA off or on) whose outputs agree.", "", *_ratio_table(r), ""]
        out += ["## Kiln parse and compile time", "",
                "Parse = kiln.parse_tf of the frozen .pb, compile = program.compile for cpu, first run = the "
                "checked run.", "", *_kiln_table(r), ""]
    out += ["## Load time (s)", "",
            "Everything before the timed runs: loading or converting and compiling the model plus the first run "
            "(for TensorFlow XLA the first run is where XLA compiles).", "", *load_table(r), "",
            "## Peak memory (MiB)", "",
            "Growth of the worker process's peak resident set over its size after importing the engine.", "",
            *engine_table(r, _memory_cell), "",
            "## Output agreement", "",
            "Worst absolute error / worst error as a fraction of the output's largest magnitude, against "
            "TensorFlow's own output for the same input (computed at export, XLA off); ✓ when every element is "
            "within rtol 1e-3 / atol 1e-4 x that magnitude. Checked on the first run, before timing.", "",
            *engine_table(r, _agreement_cell), ""]
    goal_lines = _goals(r)
    if goal_lines:
        out += ["## Goals (issue 16)", "", *_table(["Goal", "This run"], ["---", "---"], goal_lines), ""]
    issues = problems(r, not_accepted="outputs disagree with TensorFlow's")
    out += ["## Problems", ""] + (issues or ["None: every engine ran every model and its outputs agree."]) + [""]
    return "\n".join(out)
