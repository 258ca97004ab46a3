"""BERT-base (scripts/model_zoo.py, random weights) exported with dynamic axes (batch and sequence) and
input_ids as its only input (the mask and token types are the model's defaults, computed from the ids'
shape), for the run-time-extent benches (bench/run_time_extents.py bert, run_time_extents_compile_time.py)."""
import os
import sys


def one_input_model(folder):
    """BERT-base exported with a dynamic sequence (the TorchScript exporter, opset 17, dynamic_axes), taking
    input_ids only. BERT_IDS_ONLY=path: that file, exported so before, instead."""
    import io

    if os.environ.get("BERT_IDS_ONLY"):
        return os.environ["BERT_IDS_ONLY"]

    import torch

    sys.path.insert(0, "scripts")
    from export_models import build

    module, inputs = build("bert_base")

    class IdsOnly(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = module

        def forward(self, input_ids):
            return self.model(input_ids=input_ids).last_hidden_state

    buffer = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(IdsOnly().eval(), (torch.from_numpy(inputs["input_ids"]),), buffer, dynamo=False,
                          opset_version=17, input_names=["input_ids"], output_names=["hidden"],
                          dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}})
    path = os.path.join(folder, "bert_dynamic_ids_only.onnx")
    with open(path, "wb") as f:
        f.write(buffer.getvalue())
    return path
