"""BERT-base (scripts/model_zoo.py, random weights) exported with dynamic axes (batch and sequence) and
input_ids as its only input (the mask and token types are the model's defaults, computed from the ids'
shape), for the run-time-extent benches (bench/run_time_extents.py bert, run_time_extents_compile_time.py);
and exported as users have it, with input_ids, attention_mask and token_type_ids sharing a dynamic batch
(bench/run_time_extents.py bert_mask)."""
import os
import sys


def ids_only(module):
    """`module` (a transformers encoder or decoder) as a module taking input_ids only and returning its last
    hidden state."""
    import torch

    class IdsOnly(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = module

        def forward(self, input_ids):
            return self.model(input_ids=input_ids).last_hidden_state

    return IdsOnly().eval()


def export_ids_only(module, path, example_ids):
    """Writes `module` (a transformers BERT) to `path` as ONNX taking input_ids only, with a dynamic batch and
    sequence (the TorchScript exporter, opset 17, dynamic_axes), traced on `example_ids` (a torch int64 tensor)."""
    import torch

    with torch.no_grad():
        torch.onnx.export(ids_only(module), (example_ids,), str(path), dynamo=False, opset_version=17,
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


def masked_model(folder):
    """BERT-base taking input_ids, attention_mask and token_type_ids [batch, 128], the batch dynamic (the
    TorchScript exporter, opset 17). BERT_MASKED=path: that file, exported so before, instead."""
    if os.environ.get("BERT_MASKED"):
        return os.environ["BERT_MASKED"]

    import torch

    sys.path.insert(0, "scripts")
    from export_models import build

    module, inputs = build("bert_base")
    names = ["input_ids", "attention_mask", "token_type_ids"]

    class Masked(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = module

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    path = os.path.join(folder, "bert_dynamic_masked.onnx")
    with torch.no_grad():
        torch.onnx.export(Masked().eval(), tuple(torch.from_numpy(inputs[n]) for n in names), path, dynamo=False,
                          opset_version=17, input_names=names, output_names=["hidden"],
                          dynamic_axes={n: {0: "batch"} for n in names})
    return path
