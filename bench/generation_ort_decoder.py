"""The generation bench's plain ONNX Runtime engine: the Hugging Face model
exported to ONNX (torch.onnx, TorchScript exporter) as one decoder step whose
key/value cache comes in as past_* inputs and goes out as present_* outputs
(each present the past with the new positions appended, as exporters such as
optimum write it), run by an InferenceSession in a greedy Python loop: the
prompt in one run, then one run per new token with the last run's presents
as the next pasts. This is ONNX Runtime as a user of optimum's
ORTModelForCausalLM meets it; onnxruntime-genai (bench/generation.py's
ort_genai engine) is its own generation loop and does not take GPT-2.
OpenVINO runs the same file the same way (OpenVinoDecoderEngine).
"""
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np


def decoder_step(model):
    """A module for the exporter: (input_ids, attention_mask, position_ids, past...) -> (last position's logits,
    present...). The positions are an input, not worked out from the past's length, which the exporter's trace
    could keep as the constant it had when traced."""
    import torch
    import transformers

    class DecoderStep(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, *past):
            cache = transformers.DynamicCache(config=model.config)
            for layer in range(len(past) // 2):
                cache.update(past[2 * layer], past[2 * layer + 1], layer)
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                             cache=cache, use_cache=True)
            present = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
            return (out.logits[:, -1, :], *present)

    return DecoderStep().eval()


def cache_geometry(config):
    """(layers, key/value heads, head size) of a GPT-2 or Llama config."""
    layers = getattr(config, "num_hidden_layers", None) or config.n_layer
    heads = getattr(config, "num_attention_heads", None) or config.n_head
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    width = getattr(config, "hidden_size", None) or config.n_embd
    return layers, kv_heads, getattr(config, "head_dim", None) or width // heads


class OrtDecoderEngine:
    """bench/generation.py's engine interface: prepare(model), generate(input_ids, new_tokens, stop_after) ->
    (new tokens, start time, time of each token), info()."""

    models = None  # every model: Llama-arch 0.5B's float32 weights (1.96 GB) fit protobuf's 2 GiB, just
    stored_weight_fraction = 1.0

    def __init__(self, name):
        self.name = name

    def prepare(self, model):
        import torch

        self.layers, self.kv_heads, self.head_size = cache_geometry(model.config)
        self.workdir = tempfile.TemporaryDirectory(prefix="kiln_ort_decoder_")
        path = Path(self.workdir.name) / "decoder.onnx"
        pasts = [f"past_{i}" for i in range(2 * self.layers)]
        presents = [f"present_{i}" for i in range(2 * self.layers)]
        axes = {"input_ids": {0: "batch", 1: "new"}, "attention_mask": {0: "batch", 1: "total"},
                "position_ids": {0: "batch", 1: "new"}}
        axes.update({p: {0: "batch", 2: "past"} for p in pasts})
        axes.update({p: {0: "batch", 2: "total"} for p in presents})
        example = (torch.zeros(1, 2, dtype=torch.long), torch.ones(1, 2, dtype=torch.long),
                   torch.arange(2).reshape(1, 2), *map(torch.from_numpy, self._empty_cache(1)))
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(decoder_step(model), example, str(path), input_names=["input_ids", "attention_mask",
                              "position_ids", *pasts], output_names=["logits", *presents], dynamic_axes=axes, opset_version=17,
                              dynamo=False)
        self.run = self.load(path, torch.get_num_threads())
        return self.run

    def load(self, path, threads):
        """The exported decoder ready to run: feeds -> [logits, present...]."""
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return lambda feeds: session.run(None, feeds)

    def _empty_cache(self, batch):
        return [np.zeros((batch, self.kv_heads, 0, self.head_size), np.float32) for _ in range(2 * self.layers)]

    def info(self):
        return {}

    def generate(self, input_ids, new_tokens, stop_after=None):
        import torch

        batch, prompt = input_ids.shape
        steps = min(new_tokens, stop_after) if stop_after else new_tokens
        feeds = {"input_ids": input_ids.numpy(), "attention_mask": np.ones((batch, prompt), np.int64),
                 "position_ids": np.tile(np.arange(prompt, dtype=np.int64), (batch, 1))}
        feeds.update({f"past_{i}": t for i, t in enumerate(self._empty_cache(batch))})
        tokens, times = [], []
        start = time.perf_counter()
        for _ in range(steps):
            logits, *present = self.run(feeds)
            token = logits.argmax(-1).astype(np.int64)
            times.append(time.perf_counter())
            tokens.append(token)
            total = feeds["attention_mask"].shape[1] + 1
            feeds = {"input_ids": token.reshape(batch, 1), "attention_mask": np.ones((batch, total), np.int64),
                     "position_ids": np.full((batch, 1), total - 1, np.int64)}
            feeds.update({f"past_{i}": t for i, t in enumerate(present)})
        return torch.from_numpy(np.stack(tokens, axis=1)), start, times


class OpenVinoDecoderEngine(OrtDecoderEngine):
    """The same exported decoder compiled by OpenVINO (read from the ONNX file, dynamic batch and lengths) with
    every bench's OpenVINO latency settings (bench/engines.py: float32, one stream, the threads given)."""

    def load(self, path, threads):
        import openvino

        from engines import openvino_latency_config

        compiled = openvino.Core().compile_model(str(path), "CPU", openvino_latency_config(threads))
        request = compiled.create_infer_request()
        outputs = list(compiled.outputs)

        def run(feeds):
            results = request.infer(feeds)
            # The request's output tensors are its own, rewritten by the next infer that reads them as pasts.
            return [results[port].copy() for port in outputs]

        return run
