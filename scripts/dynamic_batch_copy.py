"""A copy of one of the suite's batch-1 CNN exports (scripts/export_models.py) with a symbolic batch, as an
export with a dynamic batch axis writes it: the input's and output's first dimension named "batch", and the
flatten's Reshape target [1, C] made [-1, C]. Used by the tests and benches of run-time extents."""
import pathlib

import onnx
from onnx import numpy_helper

import export_models


def dynamic_batch_copy(name, build_dir, directory):
    """(path of the copy written under `directory`, the model's input name)."""
    path, _ = export_models.export(name, pathlib.Path(build_dir))
    model = onnx.load(str(path))
    for value in list(model.graph.input) + list(model.graph.output):
        value.type.tensor_type.shape.dim[0].dim_param = "batch"
    del model.graph.value_info[:]  # shapes inferred at batch 1
    inits = {i.name: i for i in model.graph.initializer}
    patched = 0
    for node in model.graph.node:
        if node.op_type == "Reshape" and node.input[1] in inits:
            target = numpy_helper.to_array(inits[node.input[1]]).copy()
            if target[0] != 1:
                raise ValueError(f"{name}: Reshape {node.name} target {target} does not start with the batch 1")
            target[0] = -1
            inits[node.input[1]].CopyFrom(numpy_helper.from_array(target, node.input[1]))
            patched += 1
    if patched != 1:
        raise ValueError(f"{name}: expected one flatten Reshape with a constant target, found {patched}")
    out = pathlib.Path(directory) / f"{name}-dynamic-batch.onnx"
    onnx.save(model, str(out))
    return str(out), model.graph.input[0].name
