"""The onnx package's backend node cases for the gather/scatter, sequence,
TopK and quantization parsers, on both targets.

Kiln's shapes are static, so inputs that decide an output's shape (TopK's K,
Range's bounds, Tile's repeats, OneHot's depth, ...) are turned into
initializers holding the case's own values: the model is otherwise unchanged
and the expected outputs are the case's. Cases whose output shape depends on
runtime data are not listed here; scripts/onnx_conformance.py counts every case.
"""
import numpy as np
import onnx
import onnx.numpy_helper
import pytest
from onnx.backend.test.case import node as node_cases

import kiln

# case name -> inputs frozen into initializers
CASES = {
    "test_gather_elements_0": [], "test_gather_elements_1": [], "test_gather_elements_negative_indices": [],
    "test_gathernd_example_int32": [], "test_gathernd_example_float32": [],
    "test_gathernd_example_int32_batch_dim1": [],
    "test_scatter_with_axis": [], "test_scatter_without_axis": [],
    "test_scatter_elements_with_axis": [], "test_scatter_elements_without_axis": [],
    "test_scatter_elements_with_negative_indices": [], "test_scatter_elements_with_duplicate_indices": [],
    "test_scatter_elements_with_reduction_mul": [], "test_scatter_elements_with_reduction_max": [],
    "test_scatter_elements_with_reduction_min": [],
    "test_scatternd": [], "test_scatternd_add": [], "test_scatternd_multiply": [], "test_scatternd_max": [],
    "test_scatternd_min": [],
    "test_scatternd_max_with_element_indices": [], "test_scatternd_min_with_element_indices": [],
    "test_tile": ["y"], "test_tile_precomputed": ["y"],
    "test_top_k": ["k"], "test_top_k_uint64": ["k"], "test_top_k_same_values": ["k"],
    "test_top_k_same_values_largest": ["k"], "test_top_k_same_values_2d": ["k"], "test_top_k_smallest": ["k"],
    "test_top_k_negative_axis": ["k"],
    "test_cumsum_1d": ["axis"], "test_cumsum_1d_exclusive": ["axis"], "test_cumsum_1d_reverse": ["axis"],
    "test_cumsum_1d_reverse_exclusive": ["axis"], "test_cumsum_2d_axis_0": ["axis"],
    "test_cumsum_2d_axis_1": ["axis"], "test_cumsum_2d_negative_axis": ["axis"], "test_cumsum_2d_int32": ["axis"],
    "test_cumsum_1d_int32_exclusive": ["axis"],
    "test_onehot_without_axis": ["depth"], "test_onehot_with_axis": ["depth"],
    "test_onehot_negative_indices": ["depth"], "test_onehot_with_negative_axis": ["depth"],
    "test_onehot_out_of_range_indices": ["depth"], "test_onehot_with_bfloat16_values": ["depth"],
    "test_range_float_type_positive_delta": ["start", "limit", "delta"],
    "test_range_int32_type_negative_delta": ["start", "limit", "delta"],
    "test_range_float16_type_positive_delta": ["start", "limit", "delta"],
    "test_range_bfloat16_type_positive_delta": ["start", "limit", "delta"],
    "test_eyelike_without_dtype": [], "test_eyelike_with_dtype": [], "test_eyelike_populate_off_main_diagonal": [],
    "test_reversesequence_time": [], "test_reversesequence_batch": [], "test_reversesequence_bfloat16": [],
    "test_compress_0": ["condition"], "test_compress_1": ["condition"], "test_compress_default_axis": ["condition"],
    "test_compress_negative_axis": ["condition"], "test_compress_bfloat16": ["condition"],
    "test_nonzero_example": ["condition"],
    "test_quantizelinear": [], "test_quantizelinear_axis": [], "test_quantizelinear_uint16": [],
    "test_quantizelinear_int16": [],
    "test_dequantizelinear": [], "test_dequantizelinear_axis": [], "test_dequantizelinear_uint16": [],
    "test_dequantizelinear_int16": [],
    # float8 / float4 / int4 / int2 results and blocked scales
    "test_quantizelinear_int4": [], "test_quantizelinear_uint4": [], "test_quantizelinear_int2": [],
    "test_quantizelinear_uint2": [], "test_quantizelinear_e4m3fn": [], "test_quantizelinear_e5m2": [],
    "test_quantizelinear_float4e2m1": [], "test_quantizelinear_blocked_asymmetric": [],
    "test_quantizelinear_blocked_symmetric": [],
    "test_dequantizelinear_int4": [], "test_dequantizelinear_uint4": [], "test_dequantizelinear_int2": [],
    "test_dequantizelinear_uint2": [], "test_dequantizelinear_e4m3fn": [], "test_dequantizelinear_e4m3fn_float16": [],
    "test_dequantizelinear_e4m3fn_zero_point": [], "test_dequantizelinear_e5m2": [],
    "test_dequantizelinear_float4e2m1": [], "test_dequantizelinear_blocked": [],
    "test_dynamicquantizelinear": [], "test_dynamicquantizelinear_max_adjusted": [],
    "test_dynamicquantizelinear_min_adjusted": [],
    "test_qlinearmatmul_2D_uint8_float32": [], "test_qlinearmatmul_3D_uint8_float32": [],
    "test_qlinearmatmul_2D_int8_float32": [], "test_qlinearmatmul_3D_int8_float32": [],
    "test_qlinearmatmul_2D_uint8_float16": [], "test_qlinearmatmul_3D_uint8_float16": [],
    "test_qlinearconv": [], "test_matmulinteger": [], "test_convinteger_without_padding": [],
    "test_convinteger_with_padding": [],
}

_collected = {}


def collected():
    if not _collected:
        for case in node_cases.collect_testcases(None):
            _collected[case.name] = case
    return _collected


def trilu_cases():
    return sorted(n for n in collected() if (n.startswith("test_triu") or n.startswith("test_tril"))
                  and not n.endswith("_expanded"))


def freeze(model, inputs, names):
    """The model with the named graph inputs turned into initializers holding `inputs`' values."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    keep = []
    for value_info, value in zip(list(graph.input), inputs):
        if value_info.name in names:
            graph.initializer.append(onnx.numpy_helper.from_array(value, value_info.name))
        else:
            keep.append(value_info)
    del graph.input[:]
    graph.input.extend(keep)
    return model


def run_case(name, frozen, target):
    case = collected()[name]
    # The cases give packed 4- and 2-bit and float8 values as TensorProtos.
    as_array = lambda v: onnx.numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v
    for inputs, outputs in case.data_sets:
        inputs, outputs = [as_array(v) for v in inputs], [as_array(v) for v in outputs]
        declared = [v.name for v in case.model.graph.input]
        model = freeze(case.model, inputs, set(frozen))
        p = kiln.parse_onnx_buffer(model.SerializeToString())
        p.compile(kiln.get_target(target))
        feed = {n: x for n, x in zip(declared, inputs) if n not in frozen}
        got = [np.asarray(g) for g in p.run(feed)]
        assert len(got) == len(outputs), name
        for g, want in zip(got, outputs):
            assert g.shape == want.shape, f"{name}: shape {g.shape} vs {want.shape}"
            assert g.dtype == want.dtype, f"{name}: dtype {g.dtype} vs {want.dtype}"
            np.testing.assert_allclose(g.astype(np.float64), want.astype(np.float64), rtol=case.rtol,
                                       atol=case.atol, err_msg=name)


@pytest.mark.parametrize("target", ["ref", "cpu"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, target):
    run_case(name, CASES[name], target)


@pytest.mark.parametrize("target", ["ref", "cpu"])
@pytest.mark.parametrize("name", trilu_cases())
def test_trilu_case(name, target):
    frozen = [v.name for v in collected()[name].model.graph.input][1:]  # k, when given
    run_case(name, frozen, target)


def test_data_dependent_shapes_are_refused_clearly():
    case = collected()["test_nonzero_example"]
    with pytest.raises(kiln.KilnError, match="data-dependent output shape is not supported"):
        kiln.parse_onnx_buffer(case.model.SerializeToString())
