"""BERT-base (scripts/model_zoo.py, random weights) exported with dynamic axes (batch and sequence) and
input_ids as its only input (the mask and token types are the model's defaults, computed from the ids'
shape), for the run-time-extent benches (bench/run_time_extents.py bert, run_time_extents_compile_time.py)."""
import os
import sys


def export_ids_only(module, path, example_ids):
    """Writes `module` (a transformers BERT) to `path` as ONNX taking input_ids only, with a dynamic batch and
    sequence (the TorchScript exporter, opset 17, dynamic_axes), traced on `example_ids` (a torch int64 tensor)."""
    import torch

    class IdsOnly(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = module

        def forward(self, input_ids):
            return self.model(input_ids=input_ids).last_hidden_state

    with torch.no_grad():
        torch.onnx.export(IdsOnly().eval(), (example_ids,), str(path), dynamo=False, opset_version=17,
                          input_names=["input_ids"], output_names=["hidden"],
                          dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}})
    return str(path)


def one_input_model(folder):
    """BERT-base exported by export_ids_only. BERT_IDS_ONLY=path: that file, exported so before, instead."""
    if os.environ.get("BERT_IDS_ONLY"):
        return os.environ["BERT_IDS_ONLY"]

    import torch

    sys.path.insert(0, "scripts")
    from export_models import build

    module, inputs = build("bert_base")
    return export_ids_only(module, os.path.join(folder, "bert_dynamic_ids_only.onnx"),
                           torch.from_numpy(inputs["input_ids"]))
