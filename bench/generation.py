"""Text generation: Hugging Face generate() on GPT-2 small and a ~0.5B-parameter
Llama-architecture model (grouped-query attention, rotary embeddings), random
weights, through eager PyTorch (dynamic and static cache), Inductor and
torch.compile(backend="kiln") (static cache, HF's recipe
`model.forward = torch.compile(model.forward, ...)`), all in this process,
limited to the same number of threads.

Each case (model, batch) builds one model from a fixed seed; every engine
shares its weights (a shallow copy of the module whose forward is replaced),
gets a prompt of --prompt random tokens and generates --new-tokens greedily.
A logits processor stamps the time of every generated token, so one
generate() call gives the time to first token (prompt to first token: the
prefill) and the decode time per step (first to last token). Engines warm up
(compile) first, then take turns in --repeats interleaved rounds; the report
gives medians. Every engine's tokens are compared with eager PyTorch's
(dynamic cache) and a mismatch is reported. The achieved weight bandwidth is
the bytes of the weights read per decode step over the median step time,
against a STREAM-like triad measured once on --threads threads.

An engine that raises is recorded as "failed: <error>" and the run goes on;
engines that cannot run in this environment are listed with the reason.

    make bench-generation                                    # bench/results/generation.{md,json}
    .venv/bin/python bench/generation.py --quick             # tiny models, seconds; build/bench/results/
    .venv/bin/python bench/generation.py --models gpt2_small --batches 1 --new-tokens 32
    .venv/bin/python bench/generation.py --report-only bench/results/generation.json
"""
import argparse
import copy
import datetime
import gc
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import generation_report  # noqa: E402
from generation_ort_decoder import OpenVinoDecoderEngine, OrtDecoderEngine  # noqa: E402

ENGINE_TITLES = {
    "eager": "PyTorch eager (dynamic cache)",
    "eager_static": "PyTorch eager (static cache)",
    "inductor": "Inductor (static cache)",
    "kiln": 'backend="kiln" (static cache)',
    "kiln_dynamic": 'backend="kiln" (dynamic cache)',
    "kiln_fp16": 'backend="kiln" fp16 (static cache)',
    "kiln_int8w": 'backend="kiln" int8 weights (static cache)',
    "ort_genai": "ONNX Runtime GenAI (shared past/present buffer)",
    "ort": "ONNX Runtime (exported decoder, past/present inputs, Python loop)",
    "openvino": "OpenVINO (the same exported decoder and loop)",
}
REFERENCE_ENGINE = "eager"
MODEL_TITLES = {"gpt2_small": "GPT-2 small", "llama_0p5b": "Llama-arch 0.5B"}
# What the issue asks for that this runner does not run, and why (listed in the report).
NOT_RUN = {
    "ONNX Runtime GenAI on GPT-2": "onnxruntime-genai's model builder does not take GPT-2 (NotImplementedError); "
                                   "it runs the Llama-architecture model",
    "OpenVINO GenAI": "openvino-genai installs, but its LLMPipeline reads a stateful OpenVINO model that optimum-intel "
                "converts, and optimum-intel pins transformers 5.5 and a CUDA build of torch 2.14",
}
FULL = {"prompt": 128, "new_tokens": 128, "batches": [1, 4], "repeats": 3}


def model_config(name, quick):
    """A transformers config: the benchmark's sizes, or tiny ones for --quick."""
    from transformers import GPT2Config, LlamaConfig

    if name == "gpt2_small":
        if quick:
            return GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=128)
        return GPT2Config()  # 124M parameters
    if name == "llama_0p5b":
        if quick:
            return LlamaConfig(hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
                               num_key_value_heads=2, vocab_size=512, max_position_embeddings=128)
        # 28 layers of hidden 1024 (16 query heads, 4 key/value heads: GQA), untied 32000-token embeddings:
        # 0.49B parameters.
        return LlamaConfig(hidden_size=1024, intermediate_size=4096, num_hidden_layers=28, num_attention_heads=16,
                           num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048,
                           tie_word_embeddings=False)
    raise ValueError(f"unknown model '{name}'; choose from {', '.join(MODEL_TITLES)}")


def build_model(name, quick, seed=0):
    import torch
    from transformers import GPT2LMHeadModel, LlamaForCausalLM

    torch.manual_seed(seed)
    config = model_config(name, quick)
    cls = GPT2LMHeadModel if name == "gpt2_small" else LlamaForCausalLM
    return cls(config).eval()


def streamed_weight_bytes(model):
    """Bytes of the weights one decode step reads: every parameter once (shared ones once), except input
    embedding tables that are not also the LM head, of which a step only gathers a few rows."""
    gathered = set()
    for module in model.modules():
        if type(module).__name__ == "Embedding":
            gathered.add(id(module.weight))
    head = model.get_output_embeddings()
    if head is not None:
        gathered.discard(id(head.weight))
    seen, total = set(), 0
    for p in model.parameters():
        if id(p) in seen or id(p) in gathered:
            continue
        seen.add(id(p))
        total += p.numel() * p.element_size()
    return total


def parameter_count(model):
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def measure_bandwidth(threads, mib=256, reps=5):
    """STREAM-like triad a = b + s * c on float32 arrays of `mib` MiB each (far larger than the caches), best
    of `reps`, counting 3 arrays of traffic per pass as STREAM does. Bytes per second."""
    import torch

    torch.set_num_threads(threads)
    n = mib * (1 << 20) // 4
    a, b, c = torch.empty(n), torch.rand(n), torch.rand(n)
    best = float("inf")
    for _ in range(reps + 1):  # the first pass faults the pages in
        t = time.perf_counter()
        torch.add(b, c, alpha=3.0, out=a)
        best = min(best, time.perf_counter() - t)
    return 3 * n * 4 / best


class StepClock:
    """A logits processor that notes when each token is chosen (it runs once per generated token, after the
    forward pass that produced its logits)."""

    def __init__(self):
        self.times = []

    def __call__(self, input_ids, scores):
        self.times.append(time.perf_counter())
        return scores


class StopAfter:
    """A stopping criterion: stop after `count` new tokens (warm-up runs keep the full run's cache size, so the
    static cache's shapes, hence the compiled graphs, are the timed runs' ones)."""

    def __init__(self, prompt_len, count):
        self.limit = prompt_len + count

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        return torch.full((input_ids.shape[0],), input_ids.shape[1] >= self.limit, dtype=torch.bool)


class Engine:
    """One way of running generate(): a shallow copy of the model (weights shared) whose forward may be
    compiled, and the cache implementation it generates with."""

    cache = None  # transformers' default (dynamic) cache
    stored_weight_fraction = 1.0  # of the model's weight bytes, as this engine holds them
    models = None  # the models it runs (None: all); the others are listed under "Not run"

    def __init__(self, name):
        self.name = name
        self.graphs = []

    def prepare(self, model):
        self.model = copy.copy(model)  # own __dict__ (forward, generation state), shared submodules and weights
        return self.model

    def info(self):
        return {}

    def generate(self, input_ids, new_tokens, stop_after=None):
        import torch
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

        clock = StepClock()
        config = GenerationConfig(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                                  eos_token_id=None, pad_token_id=0, cache_implementation=self.cache)
        stopping = StoppingCriteriaList([StopAfter(input_ids.shape[1], stop_after)] if stop_after else [])
        start = time.perf_counter()
        with torch.no_grad():
            out = self.model.generate(input_ids, attention_mask=torch.ones_like(input_ids), generation_config=config,
                                      logits_processor=LogitsProcessorList([clock]), stopping_criteria=stopping)
        return out[:, input_ids.shape[1]:], start, clock.times


class StaticCacheEngine(Engine):
    cache = "static"


class InductorEngine(StaticCacheEngine):
    def prepare(self, model):
        import torch

        clone = super().prepare(model)
        clone.forward = torch.compile(model.forward)
        return clone


class KilnEngine(StaticCacheEngine):
    """torch.compile(model.forward, backend="kiln"); the backend is wrapped only to keep the graphs it returns,
    for the count of Kiln compilations and of graphs that ran eagerly."""

    precision = "fp32"

    def prepare(self, model):
        import torch
        from torch._dynamo import lookup_backend

        import kiln.torch  # noqa: F401  (registers backend="kiln")

        kiln_backend = lookup_backend("kiln")
        options = {"precision": self.precision}

        def backend(gm, example_inputs, **kwargs):
            compiled = kiln_backend(gm, example_inputs, options=options)
            self.graphs.append(compiled)
            return compiled

        clone = super().prepare(model)
        clone.forward = torch.compile(model.forward, backend=backend)
        return clone

    def info(self):
        """Dynamo graphs, Kiln compilations (a program serving several shape signatures, one compiled for a
        range of sizes, counts once), and shape signatures that ran eagerly instead."""
        reports = [rep for g in self.graphs for rep in getattr(g, "reports", {}).values()]
        eager = sum(1 for rep in reports if rep is None)
        compiled = list({id(rep): rep for rep in reports if rep is not None}.values())
        fallback_ops = sum(len(rep.fallback_nodes) for rep in compiled)
        return {"graphs": len(self.graphs), "kiln_compilations": len(compiled), "eager_graphs": eager,
                "fallback_ops": fallback_ops}


class KilnDynamicCacheEngine(KilnEngine):
    """The same backend with transformers' default (dynamic) cache: a cache that grows by one position per
    token, run on one program per power-of-two bucket of lengths (issue 15)."""

    cache = None


class KilnFp16Engine(KilnEngine):
    precision = "fp16"
    # The backend's fp16 keeps the products' weights (all but a few kilobytes of norms) in 16 bits.
    stored_weight_fraction = 0.5


class KilnInt8WeightsEngine(KilnEngine):
    precision = "int8_weights"
    # The products' weights as int8 codes; their per-column scales (4 bytes per output column) are left out.
    stored_weight_fraction = 0.25


class OrtGenAIEngine(Engine):
    """onnxruntime-genai: the model (with a word-level tokenizer of its vocabulary, which the builder wants)
    saved as a Hugging Face checkpoint, converted by onnxruntime-genai's model builder (float32, CPU: an ONNX
    decoder with GroupQueryAttention whose past and present key/value buffers are shared), and generated
    greedily with its Generator, on the same threads. A token's time is stamped after generate_next_token,
    which picks it and runs the decoder on it: the time to first token includes one decode step."""

    models = {"llama_0p5b"}

    def prepare(self, model):
        import json
        import subprocess
        import tempfile

        from tokenizers import Tokenizer, models, pre_tokenizers
        from transformers import PreTrainedTokenizerFast

        import onnxruntime_genai as og

        self.workdir = tempfile.TemporaryDirectory(prefix="kiln_ort_genai_")
        checkpoint, converted = Path(self.workdir.name) / "hf", Path(self.workdir.name) / "onnx"
        model.save_pretrained(checkpoint)
        vocab = model.config.vocab_size
        tokenizer = Tokenizer(models.WordLevel({f"t{i}": i for i in range(vocab)}, unk_token="t0"))
        tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
        PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="t0").save_pretrained(checkpoint)
        builder = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(checkpoint),
                   "-o", str(converted), "-p", "fp32", "-e", "cpu", "-c", str(Path(self.workdir.name) / "cache")]
        built = subprocess.run(builder, capture_output=True, text=True)
        if built.returncode != 0:
            raise RuntimeError(f"onnxruntime-genai's model builder: {built.stderr.strip().splitlines()[-1]}")
        config_path = converted / "genai_config.json"
        config = json.loads(config_path.read_text())
        config["model"]["decoder"]["session_options"]["intra_op_num_threads"] = torch_threads()
        config_path.write_text(json.dumps(config))
        self.og = og
        self.model = og.Model(str(converted))
        return self.model

    def generate(self, input_ids, new_tokens, stop_after=None):
        import numpy as np
        import torch

        batch, prompt = input_ids.shape
        steps = min(new_tokens, stop_after) if stop_after else new_tokens
        params = self.og.GeneratorParams(self.model)
        params.set_search_options(max_length=prompt + steps, min_length=prompt + steps, do_sample=False,
                                  batch_size=batch)
        generator = self.og.Generator(self.model, params)
        times = []
        start = time.perf_counter()
        generator.append_tokens(input_ids.numpy().astype(np.int32))
        while not generator.is_done():
            generator.generate_next_token()
            times.append(time.perf_counter())
        tokens = [list(generator.get_sequence(b))[prompt:] for b in range(batch)]
        return torch.tensor(tokens, dtype=torch.long), start, times


def torch_threads():
    import torch

    return torch.get_num_threads()


ENGINE_CLASSES = {"eager": Engine, "eager_static": StaticCacheEngine, "inductor": InductorEngine,
                  "kiln": KilnEngine, "kiln_dynamic": KilnDynamicCacheEngine, "kiln_fp16": KilnFp16Engine,
                  "kiln_int8w": KilnInt8WeightsEngine,
                  "ort_genai": OrtGenAIEngine,
                  "ort": OrtDecoderEngine, "openvino": OpenVinoDecoderEngine}
REDUCED_PRECISION = {"kiln_fp16", "kiln_int8w"}  # tokens compared with eager's but not required to match


def _error_text(e):
    text = f"{type(e).__name__}: {e}".strip()
    return " ".join(text.split())[:500]


def compare_tokens(tokens, reference):
    """{match, first_mismatch (step or None), agreeing (fraction of tokens)} of two [batch][steps] lists."""
    total = sum(len(row) for row in reference)
    same = sum(a == b for row, ref in zip(tokens, reference) for a, b in zip(row, ref))
    first = None
    for row, ref in zip(tokens, reference):
        for step, (a, b) in enumerate(zip(row, ref)):
            if a != b:
                first = step if first is None else min(first, step)
                break
    return {"match": tokens == reference, "first_mismatch": first, "agreeing": same / total if total else 1.0}


def run_case(model_name, batch, args, progress):
    """Every engine on one model and batch: warm-up, then interleaved timed repeats. A list of case dicts."""
    import torch

    # Every model's forward is one code object to dynamo: forget the last case's compiled graphs so that they
    # neither count towards its recompile limit nor keep their frozen weights alive.
    torch._dynamo.reset()
    model = build_model(model_name, args.quick)
    vocab = model.config.vocab_size
    generator = torch.Generator().manual_seed(1000 + batch)
    prompt = torch.randint(0, vocab, (batch, args.prompt), generator=generator)
    new_tokens = args.new_tokens_for[model_name]
    weight_bytes = streamed_weight_bytes(model)
    engines = [n for n in args.engines if ENGINE_CLASSES[n].models is None or model_name in ENGINE_CLASSES[n].models]
    cases = {}
    for name in engines:
        case = {"model": model_name, "batch": batch, "engine": name, "prompt": args.prompt, "new_tokens": new_tokens,
                "parameters": parameter_count(model),
                "weight_bytes": int(weight_bytes * ENGINE_CLASSES[name].stored_weight_fraction),
                "ttft_s": [], "step_s": [], "status": "ok"}
        engine = ENGINE_CLASSES[name](name)
        progress(f"{model_name} batch {batch}: {name} warm-up")
        t = time.perf_counter()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                engine.prepare(model)
                # Two steps past the first decode one: dynamo may recompile once a size proves to vary.
                engine.generate(prompt, new_tokens, stop_after=min(new_tokens, 4))
            case["warnings"] = sorted({str(w.message)[:300] for w in caught if "kiln" in str(w.message)})
        except Exception as e:  # noqa: BLE001  (any engine error is a result, not the end of the run)
            case["status"] = f"failed: {_error_text(e)}"
        case["warmup_s"] = time.perf_counter() - t
        case["engine_obj"] = engine
        cases[name] = case
        if case["status"] != "ok":
            progress(f"  {name} {case['status']}")
    for r in range(args.repeats):
        for name in engines:
            case = cases[name]
            if case["status"] != "ok":
                continue
            progress(f"{model_name} batch {batch}: {name} run {r + 1}/{args.repeats}")
            try:
                tokens, start, times = case["engine_obj"].generate(prompt, new_tokens)
            except Exception as e:  # noqa: BLE001
                case["status"] = f"failed: {_error_text(e)}"
                progress(f"  {name} {case['status']}")
                continue
            case["ttft_s"].append(times[0] - start)
            if len(times) > 1:
                case["step_s"].append((times[-1] - times[0]) / (len(times) - 1))
            if r == 0:
                case["tokens"] = tokens.tolist()
    reference = cases.get(REFERENCE_ENGINE, {}).get("tokens")
    for case in cases.values():
        case["info"] = case.pop("engine_obj").info()
        if reference is not None and case.get("tokens") is not None and case["engine"] != REFERENCE_ENGINE:
            case["check"] = compare_tokens(case["tokens"], reference)
            case["check"]["required"] = case["engine"] not in REDUCED_PRECISION
    del model
    gc.collect()
    return list(cases.values())


def machine_info():
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                cpu = value.strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_bytes": os.sysconf("SC_PAGE_SIZE") *
            os.sysconf("SC_PHYS_PAGES"), "python": platform.python_version(),
            "load_average_start": round(os.getloadavg()[0], 2)}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--models", default=",".join(MODEL_TITLES), help=f"comma-separated (default {','.join(MODEL_TITLES)})")
    p.add_argument("--engines", default=",".join(ENGINE_TITLES),
                   help=f"comma-separated (default all: {','.join(ENGINE_TITLES)}); eager is the token reference")
    p.add_argument("--batches", default=",".join(map(str, FULL["batches"])), help="comma-separated (default 1,4)")
    p.add_argument("--prompt", type=int, default=FULL["prompt"], help="prompt tokens (default 128)")
    p.add_argument("--new-tokens", default=str(FULL["new_tokens"]),
                   help="new tokens per generate() (default 128); per model as name:count,... e.g.\n"
                        "gpt2_small:128,llama_0p5b:32")
    p.add_argument("--repeats", type=int, default=FULL["repeats"], help="timed generate() calls per engine (default 3)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--quick", action="store_true",
                   help="tiny models (2 layers, hidden 64), prompt 16, 6 new tokens, 1 repeat: checks the runner")
    p.add_argument("--out", type=Path, help="folder for generation.{md,json} (default: bench/results/ for a full\n"
                                            "run, build/bench/results/ otherwise)")
    p.add_argument("--report-only", type=Path, metavar="JSON", help="rewrite the .md from a saved .json")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    args = p.parse_args(argv)
    if args.report_only:
        return args
    args.models = _choices(p, "--models", args.models, list(MODEL_TITLES))
    args.engines = _choices(p, "--engines", args.engines, list(ENGINE_TITLES))
    try:
        args.batches = [int(b) for b in args.batches.split(",") if b]
    except ValueError:
        p.error(f"--batches: expected comma-separated integers, got '{args.batches}'")
    if args.quick:
        args.prompt, args.new_tokens, args.repeats = 16, "6", 1
    args.new_tokens_for = _new_tokens(p, args.new_tokens, args.models)
    if not args.batches or min(args.batches) < 1:
        p.error("--batches: batch sizes must be at least 1")
    if min(args.prompt, args.repeats, args.threads) < 1 or min(args.new_tokens_for.values()) < 2:
        p.error("--prompt, --repeats and --threads must be at least 1, --new-tokens at least 2")
    return args


def _choices(parser, flag, text, allowed):
    chosen = [x for x in text.split(",") if x]
    unknown = [x for x in chosen if x not in allowed]
    if unknown or not chosen:
        parser.error(f"{flag}: unknown {', '.join(unknown) or '(empty)'}; choose from {', '.join(allowed)}")
    return [x for x in allowed if x in chosen]


def _new_tokens(parser, text, models):
    """'128' for every model, or 'name:count,...' (models not named get the default)."""
    counts = {m: FULL["new_tokens"] for m in models}
    try:
        if ":" not in text:
            return {m: int(text) for m in models}
        for item in filter(None, text.split(",")):
            name, _, count = item.partition(":")
            if name not in MODEL_TITLES:
                parser.error(f"--new-tokens: unknown model '{name}'; choose from {', '.join(MODEL_TITLES)}")
            counts[name] = int(count)
    except ValueError:
        parser.error(f"--new-tokens: expected a count or name:count pairs, got '{text}'")
    return {m: counts[m] for m in models}


def is_full_run(args):
    return (not args.quick and args.models == list(MODEL_TITLES) and args.engines == list(ENGINE_TITLES)
            and args.batches == FULL["batches"] and args.prompt == FULL["prompt"] and args.repeats >= FULL["repeats"])


def write(doc, out):
    out.mkdir(parents=True, exist_ok=True)
    (out / "generation.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / "generation.md").write_text(generation_report.render(doc, ENGINE_TITLES, MODEL_TITLES))
    return out / "generation.md"


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.report_only:
        doc = json.loads(args.report_only.read_text())
        print(write(doc, args.out or args.report_only.parent))
        return 0
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(args.threads))
    import torch
    import transformers

    torch.set_num_threads(args.threads)
    # A case compiles the same forward for several engines (each a graph for prefill and one for decode, maybe
    # a recompile once a size varies); past dynamo's default limit of 8 it would silently run eagerly.
    torch._dynamo.config.recompile_limit = 64
    started = time.time()
    machine = machine_info()  # the load average before the run
    progress = (lambda text: None) if args.quiet else (
        lambda text: print(f"[{time.time() - started:6.0f} s] {text}", file=sys.stderr, flush=True))
    progress("measuring memory bandwidth (triad)")
    bandwidth = measure_bandwidth(args.threads, mib=16 if args.quick else 256)
    cases = []
    for model_name in args.models:
        for batch in args.batches:
            cases += run_case(model_name, batch, args, progress)
    versions = [f"torch {torch.__version__}", f"transformers {transformers.__version__}"]
    try:
        import kiln

        versions.append(f"kiln {kiln.__version__}")
    except ImportError:
        pass
    machine["load_average_end"] = round(os.getloadavg()[0], 2)
    doc = {"started": datetime.datetime.fromtimestamp(started).isoformat(timespec="seconds"),
           "duration_s": round(time.time() - started, 1), "machine": machine, "versions": versions,
           "settings": {"threads": args.threads, "prompt": args.prompt, "new_tokens": args.new_tokens_for,
                        "repeats": args.repeats, "batches": args.batches, "quick": args.quick},
           "bandwidth_bytes_per_s": bandwidth, "engines": args.engines, "models": args.models,
           "not_run": NOT_RUN, "cases": cases}
    out = args.out or (HERE / "results" if is_full_run(args) else REPO / "build" / "bench" / "results")
    path = write(doc, out)
    print(path)
    for line in generation_report.problems(doc, ENGINE_TITLES, MODEL_TITLES):
        print(line, file=sys.stderr)  # failures and token mismatches are results: the run still succeeds
    return 0


if __name__ == "__main__":
    sys.exit(main())
