"""The generation benchmark's runner (bench/generation.py) on tiny models: it
writes its table, and every engine that ran generated eager PyTorch's greedy
tokens (the runner compares them itself; these tests read its verdict). Times
are not looked at."""
import json
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import generation  # noqa: E402


def _run(tmp_path, *extra):
    cmd = [sys.executable, str(REPO / "bench" / "generation.py"), "--quick", "--quiet", "--out", str(tmp_path),
           *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((tmp_path / "generation.json").read_text())
    table = (tmp_path / "generation.md").read_text()
    return doc, table


def _check(doc, table, engines, models, batches):
    assert "| Model | Batch | Engine | Time to first token (ms)" in table
    takes = {e: generation.ENGINE_CLASSES[e].models for e in engines}  # None: every model
    assert {(c["model"], c["batch"], c["engine"]) for c in doc["cases"]} == {
        (m, b, e) for m in models for b in batches for e in engines if takes[e] is None or m in takes[e]}
    assert doc["bandwidth_bytes_per_s"] > 0
    for case in doc["cases"]:
        if case["status"] != "ok":
            assert case["status"].startswith("failed: ") and case["engine"] != "eager", case["status"]
            continue
        assert len(case["tokens"]) == case["batch"] and all(len(row) == 6 for row in case["tokens"])
        assert len(case["ttft_s"]) == 1 and len(case["step_s"]) == 1
        if case["engine"] != "eager" and case["check"]["required"]:
            assert case["check"]["match"], (case["model"], case["batch"], case["engine"], case["check"])


def test_quick_run_eager_and_kiln(tmp_path):
    engines, models = ["eager", "eager_static", "kiln"], ["gpt2_small"]
    doc, table = _run(tmp_path, "--engines", ",".join(engines), "--models", ",".join(models), "--batches", "1")
    _check(doc, table, engines, models, [1])


def test_quick_run_exported_decoder_engines(tmp_path):
    """ONNX Runtime and OpenVINO run GPT-2 exported with past/present inputs, and generate eager's tokens."""
    engines, models = ["eager", "ort", "openvino"], ["gpt2_small"]
    doc, table = _run(tmp_path, "--engines", ",".join(engines), "--models", ",".join(models), "--batches", "1")
    _check(doc, table, engines, models, [1])
    assert all(c["status"] == "ok" and c.get("check", {"match": True})["match"] for c in doc["cases"]), doc["cases"]


@pytest.mark.slow
def test_quick_run_every_engine(tmp_path):
    doc, table = _run(tmp_path)
    _check(doc, table, list(generation.ENGINE_TITLES), list(generation.MODEL_TITLES), [1, 4])
    assert "## Not run" in table and "ONNX Runtime" in table


def test_tokens_compared_with_eager():
    assert generation.compare_tokens([[1, 2, 3]], [[1, 2, 3]]) == {"match": True, "first_mismatch": None,
                                                                  "agreeing": 1.0}
    check = generation.compare_tokens([[1, 2, 3], [4, 9, 9]], [[1, 2, 3], [4, 5, 6]])
    assert not check["match"] and check["first_mismatch"] == 1 and check["agreeing"] == pytest.approx(4 / 6)


@pytest.mark.parametrize("argv, message", [
    (["--engines", "eager,tensorrt"], "--engines: unknown tensorrt"),
    (["--models", "gpt5"], "--models: unknown gpt5"),
    (["--batches", "1,x"], "--batches: expected comma-separated integers"),
    (["--new-tokens", "gpt2_small:many"], "--new-tokens: expected a count or name:count pairs"),
    (["--new-tokens", "bert:3"], "--new-tokens: unknown model 'bert'"),
    (["--new-tokens", "1"], "--new-tokens at least 2"),
])
def test_bad_arguments_are_named(argv, message, capsys):
    with pytest.raises(SystemExit):
        generation.parse_args(argv)
    assert message in capsys.readouterr().err


def test_weight_bytes_count_the_tied_lm_head_once():
    gpt2 = generation.build_model("gpt2_small", quick=True)
    cfg = gpt2.config
    # wte is the LM head (tied): read every step; wpe only has rows gathered.
    expected = sum(p.numel() for n, p in gpt2.named_parameters() if "wpe" not in n) * 4
    assert generation.streamed_weight_bytes(gpt2) == expected
    assert gpt2.transformer.wte.weight.numel() == cfg.vocab_size * cfg.n_embd


def test_decode_ratios_pair_the_engines_round_by_round():
    """The ratio is the median of each round's ratio (1.25, 2.5, 1.25: the other engine alone hit a slow spell in
    round 2), not the ratio of the medians (2.5 / 1.0)."""
    import generation_report

    kiln_case = {"step_s": [1.0, 1.0, 2.0]}
    other = {"step_s": [1.25, 2.5, 2.5]}
    assert generation_report.paired_speed_ratio(kiln_case, other) == pytest.approx(1.25)
    assert generation_report.paired_speed_ratio({"step_s": []}, other) is None


@pytest.mark.parametrize("architecture", ["gpt2", "llama"])
def test_exported_decoder_engines_generate_eager_tokens(architecture):
    """The exported decoder's positions and cache are the run's, not the trace's: ONNX Runtime and OpenVINO give
    eager generate()'s 20 greedy tokens for a batch of 3 (a model initialized widely enough that its tokens vary)."""
    import torch
    import transformers

    from generation_ort_decoder import OpenVinoDecoderEngine, OrtDecoderEngine

    torch.manual_seed(0)
    if architecture == "gpt2":
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000,
                                                                     initializer_range=0.1))
    else:
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
            hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=1000, initializer_range=0.1))
    model.eval()
    ids = torch.randint(0, 1000, (3, 8), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=20, min_new_tokens=20,
                                  do_sample=False, pad_token_id=0)[:, 8:]
    assert len(set(expected[0].tolist())) > 3  # tokens that vary say more
    for engine_class in (OrtDecoderEngine, OpenVinoDecoderEngine):
        engine = engine_class(engine_class.__name__)
        engine.prepare(model)
        tokens, start, times = engine.generate(ids, 20)
        assert tokens.tolist() == expected.tolist(), engine_class.__name__
        assert len(times) == 20 and start <= times[0]
