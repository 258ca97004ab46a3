"""MIGraphX-style zero-copy execution: compile with offload_copy=False, get
the output buffers' names ("main:#output_0", ...) and shapes from
get_parameter_shapes, wrap caller-owned tensors with argument_from_pointer,
run, and read the results from those tensors. Checked against ONNX Runtime.

Written against the MIGraphX Python API; only the import line names Kiln.
(A GPU script would allocate the tensors on the device; Kiln's targets are
host targets, so the tensors live in host memory.)
"""
import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper, numpy_helper

import kiln.compat.migraphx as migraphx

mgx_to_torch_dtype = {
    "bool_type": torch.bool,
    "int64_type": torch.int64,
    "int32_type": torch.int32,
    "float_type": torch.float32,
    "half_type": torch.float16,
}
torch_to_mgx_dtype = {v: k for k, v in mgx_to_torch_dtype.items()}


def tensor_to_arg(tensor):
    return migraphx.argument_from_pointer(
        migraphx.shape(
            **{
                "type": torch_to_mgx_dtype[tensor.dtype],
                "lens": list(tensor.size()),
                "strides": list(tensor.stride()),
            }
        ),
        tensor.data_ptr(),
    )


def allocate_tensors(model):
    return {
        name: torch.zeros(shape.lens(), dtype=mgx_to_torch_dtype[shape.type_string()])
        for name, shape in model.get_parameter_shapes().items()
    }


def make_model(path):
    table = numpy_helper.from_array(np.random.default_rng(5).standard_normal((50, 8)).astype(np.float32), "table")
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["table", "ids"], ["emb"]),
            helper.make_node("ReduceSum", ["emb"], ["pooled"], axes=[1], keepdims=0),
            helper.make_node("Sigmoid", ["pooled"], ["score"]),
        ],
        "bag",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 6])],
        [
            helper.make_tensor_value_info("score", TensorProto.FLOAT, [2, 8]),
            helper.make_tensor_value_info("emb", TensorProto.FLOAT, [2, 6, 8]),
        ],
        [table],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=8), path)


def main():
    make_model("bag.onnx")
    model = migraphx.parse_onnx("bag.onnx")
    model.compile(migraphx.get_target("cpu"), offload_copy=False)

    names = model.get_parameter_names()
    assert "main:#output_0" in names and "main:#output_1" in names, names
    tensors = allocate_tensors(model)
    args = {name: tensor_to_arg(t) for name, t in tensors.items()}

    session = ort.InferenceSession("bag.onnx", providers=["CPUExecutionProvider"])
    for step in range(3):
        ids = torch.randint(0, 50, (2, 6), generator=torch.Generator().manual_seed(step))
        tensors["ids"].copy_(ids)
        model.run(args)
        migraphx.gpu_sync()
        score, emb = session.run(None, {"ids": ids.numpy()})
        np.testing.assert_allclose(tensors["main:#output_0"].numpy(), score, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(tensors["main:#output_1"].numpy(), emb, rtol=1e-6)
    print("PASS")


if __name__ == "__main__":
    main()
