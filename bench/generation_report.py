"""The generation benchmark's Markdown report (bench/generation.py): per model,
batch and engine the time to first token, decode tokens per second, the
achieved weight bandwidth against the measured triad, each engine's speed
against eager PyTorch and against the fastest non-Kiln engine, whether its
greedy tokens equal eager's, and the engines that failed or were not run.

The results document:
    settings: {threads, prompt, new_tokens: {model: count}, repeats, batches, quick}
    bandwidth_bytes_per_s, engines, models, not_run: {what: why}
    cases[]: {model, batch, engine, status ("ok" | "failed: ..."), ttft_s[], step_s[], warmup_s, weight_bytes,
              parameters, tokens, check: {match, first_mismatch, agreeing, required}, info, warnings}
"""
import statistics

from report import _table, fmt_ms, fmt_ratio

REFERENCE = "eager"


def median(values):
    return statistics.median(values) if values else None


def decode_tokens_per_s(case):
    """Tokens generated per second in the decode phase, all sequences of the batch counted."""
    step = median(case.get("step_s"))
    return case["batch"] / step if step else None


def bandwidth_gb_s(case):
    """Weight bytes per decode step / median step time, GB/s (10^9)."""
    step = median(case.get("step_s"))
    return case["weight_bytes"] / step / 1e9 if step else None


def paired_speed_ratio(case, other):
    """Decode speed of `case` over `other`'s: the median over rounds of their step times' ratio. The timed calls
    interleave the engines round by round, so the two times of a round share the machine's spell (its memory
    bandwidth drifts by 30% over minutes), which the ratio of two medians would not."""
    pairs = list(zip(case.get("step_s") or [], other.get("step_s") or []))
    return median([theirs / ours for ours, theirs in pairs if ours and theirs])


def _ok(case):
    return case is not None and case["status"] == "ok" and median(case.get("step_s")) is not None


def ran_eagerly(case):
    """A Kiln case none of whose graphs Kiln compiled: its times are eager PyTorch's, not Kiln's."""
    info = case.get("info") or {}
    return "kiln_compilations" in info and info["kiln_compilations"] == 0


def _find(doc, model, batch, engine):
    for c in doc["cases"]:
        if (c["model"], c["batch"], c["engine"]) == (model, batch, engine):
            return c
    return None


def _tokens_cell(case):
    if case["engine"] == REFERENCE:
        return "reference"
    check = case.get("check")
    if not check:
        return "-"
    if check["match"]:
        return "yes"
    return f"no (step {check['first_mismatch']}, {check['agreeing']:.0%} agree)"


def _status_cell(case):
    info = case.get("info") or {}
    if case["status"] != "ok":
        return case["status"][:160]
    if "kiln_compilations" in info:
        text = f"{info['kiln_compilations']} Kiln compilations, {info['graphs']} graphs"
        if ran_eagerly(case):
            text = f"**not Kiln: none of {info['graphs']} graphs compiled by Kiln** (times are PyTorch's)"
        elif info["eager_graphs"]:
            text += f", **{info['eager_graphs']} ran eagerly**"
        if info["fallback_ops"]:
            text += f", {info['fallback_ops']} ops in PyTorch"
        return text
    return "ok"


def results_table(doc, engine_titles, model_titles):
    bandwidth = doc["bandwidth_bytes_per_s"] / 1e9
    header = ["Model", "Batch", "Engine", "Time to first token (ms)", "Decode tokens/s", "ms / step",
              "Weight GB/s", "% of measured", "Decode vs eager", "Decode vs fastest non-Kiln", "Tokens = eager",
              "Warm-up (s)", "Status"]
    rows = []
    for model in doc["models"]:
        for batch in doc["settings"]["batches"]:
            cases = [c for e in doc["engines"] for c in [_find(doc, model, batch, e)] if c]
            eager = _find(doc, model, batch, REFERENCE)
            others = [c for c in cases if _ok(c) and not c["engine"].startswith("kiln")]
            fastest_other = max(others, key=decode_tokens_per_s, default=None)
            for c in cases:
                speed = decode_tokens_per_s(c) if _ok(c) else None
                gbs = bandwidth_gb_s(c) if _ok(c) else None
                vs_eager = paired_speed_ratio(c, eager) if speed and _ok(eager) else None
                vs_fastest = paired_speed_ratio(c, fastest_other) if speed and fastest_other else None
                if ran_eagerly(c):  # no ratio for Kiln that was not Kiln
                    vs_eager = vs_fastest = None
                rows.append([model_titles.get(model, model), batch, engine_titles.get(c["engine"], c["engine"]),
                             fmt_ms(median(c.get("ttft_s"))), f"{speed:.1f}" if speed else "-",
                             fmt_ms(median(c.get("step_s"))), f"{gbs:.1f}" if gbs else "-",
                             f"{gbs / bandwidth:.0%}" if gbs else "-", fmt_ratio(vs_eager), fmt_ratio(vs_fastest),
                             _tokens_cell(c), f"{c.get('warmup_s', 0):.1f}", _status_cell(c)])
    return _table(header, ["---", "---:", "---"] + ["---:"] * 9 + ["---"], rows)


def problems(doc, engine_titles, model_titles):
    """Lines naming each failed engine and each engine whose tokens differ from eager's where they must not."""
    lines = []
    for c in doc["cases"]:
        where = (f"{model_titles.get(c['model'], c['model'])} batch {c['batch']}, "
                 f"{engine_titles.get(c['engine'], c['engine'])}")
        if c["status"] != "ok":
            lines.append(f"- {where}: {c['status']}")
        check = c.get("check")
        if check and not check["match"]:
            kind = "tokens differ from eager" if check.get("required", True) else "(reduced precision) tokens differ"
            lines.append(f"- {where}: {kind} from step {check['first_mismatch']} "
                         f"({check['agreeing']:.0%} of tokens agree)")
        for w in c.get("warnings") or []:
            lines.append(f"- {where}: warning: {w}")
    return lines


def required_mismatches(doc):
    return [c for c in doc["cases"] if (c.get("check") or {}).get("required") and not c["check"]["match"]]


def render(doc, engine_titles, model_titles):
    s, m = doc["settings"], doc.get("machine", {})
    bandwidth = doc["bandwidth_bytes_per_s"] / 1e9
    weights = {}
    for c in doc["cases"]:
        # The float32 bytes: the largest any engine reads (an fp16 engine's are half).
        if c["weight_bytes"] > weights.get(c["model"], (0, 0))[1]:
            weights[c["model"]] = (c["parameters"], c["weight_bytes"])
    out = ["# Text generation", ""]
    out.append(f"Run {doc.get('started', '?')} on {m.get('cpu', '?')} ({m.get('cores', '?')} cores), torch limited "
               f"to {s['threads']} threads, every engine in one process, {s['repeats']} timed generate() calls per "
               f"engine in interleaved rounds after a warm-up (compiling) call; medians. Load average "
               f"{m.get('load_average_start', '?')} at the start, {m.get('load_average_end', '?')} at the end. "
               f"Whole run: {doc.get('duration_s', 0) / 60:.1f} min." + (" **--quick: tiny models.**"
                                                                         if s.get("quick") else ""))
    out += ["", "Versions: " + ", ".join(doc.get("versions", [])) + ".", ""]
    out.append(f"Greedy decoding of a {s['prompt']}-token random prompt; new tokens per generate(): "
               + ", ".join(f"{model_titles.get(k, k)} {v}" for k, v in s["new_tokens"].items())
               + ". Random float32 weights from a fixed seed: "
               + "; ".join(f"{model_titles.get(k, k)} {p / 1e6:.0f}M parameters, {b / 2**20:.0f} MiB read per "
                           f"decode step" for k, (p, b) in weights.items())
               + " (every weight once, input embedding tables not tied to the LM head left out: a step gathers "
                 "only a few of their rows).")
    out += ["", f"Measured memory bandwidth: **{bandwidth:.1f} GB/s** (STREAM-like triad a = b + s*c on 256 MiB "
                f"float32 arrays, {s['threads']} threads, best of 5, 3 arrays counted).", ""]
    out += ["Time to first token: from the generate() call to the first token (prefill of the prompt). Decode "
            "tokens/s: batch / median time per step between the first and last token. Weight GB/s: weight bytes per "
            "step / time per step (an fp16 engine's weights counted at 2 bytes, an int8-weight engine's at 1); % of measured: of the triad bandwidth. Decode vs eager and vs fastest non-Kiln (the "
            "fastest by median of the engines that are not Kiln's): the median over the interleaved rounds of the "
            "ratio of the two engines' step times in that round (the machine's bandwidth drifts between rounds). Tokens = eager: every generated token equal to eager PyTorch's "
            "(dynamic cache). Warm-up: the first generate() call (4 tokens), compilation included.", ""]
    out += ["## Results", "", *results_table(doc, engine_titles, model_titles), ""]
    out += ["## Not run", ""] + [f"- {k}: {v}." for k, v in doc.get("not_run", {}).items()] + [""]
    out += ["## Problems", ""] + (problems(doc, engine_titles, model_titles) or ["None."]) + [""]
    return "\n".join(out)
