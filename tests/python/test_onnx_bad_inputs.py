"""The corpus of malformed ONNX files (tests/data/onnx_bad, written by its
make_corpus.py): each raises the listed kiln error naming the problem, from the
Python API and from the kiln command, and nothing crashes."""
import json
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper

import kiln
from kiln_testing import CLI, REPO

CORPUS = REPO / "tests" / "data" / "onnx_bad"
EXPECTED = {k: v for k, v in json.loads((CORPUS / "expected_errors.json").read_text()).items() if not k.startswith("_")}


def test_every_corpus_file_has_an_expectation():
    files = {p.name for p in CORPUS.glob("*.onnx")}
    assert files == set(EXPECTED), "corpus and expected_errors.json disagree"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_parse_onnx_rejects_clearly(name):
    expected = EXPECTED[name]
    error_class = getattr(kiln, expected["error"])
    with pytest.raises(error_class) as info:
        kiln.parse_onnx(CORPUS / name)
    message = str(info.value)
    assert name in message, message
    for fragment in expected["contains"]:
        assert fragment in message, f"{fragment!r} missing from: {message}"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_kiln_command_rejects_without_crashing(name):
    result = subprocess.run([CLI, "read", str(CORPUS / name)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stderr.startswith("kiln: error:")
    assert name in result.stderr


def test_a_node_name_that_is_not_utf8_gives_a_kiln_error_not_unicode_decode_error():
    node = helper.make_node("Frobnicate", ["x"], ["y"], name="NODEXYZ")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    data = helper.make_model(graph).SerializeToString()
    # Same length, so every protobuf length prefix stays valid; \xff\xfe is no UTF-8.
    assert data.count(b"NODEXYZ") == 1
    data = data.replace(b"NODEXYZ", b"NODE\xff\xfeZ")
    with pytest.raises(kiln.KilnError) as info:
        kiln.parse_onnx_buffer(data)
    assert "Frobnicate" in str(info.value)
    assert "NODE\\xff\\xfeZ" in str(info.value)


def _constant_of_shape_relu(elements):
    shape = helper.make_tensor("shape", TensorProto.INT64, [1], [elements])
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["big"]), helper.make_node("Relu", ["big"], ["y"])]
    graph = helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [elements])], [shape])
    return helper.make_model(graph).SerializeToString()


@pytest.mark.parametrize("target", ["ref", "cpu"])
def test_a_tiny_model_asking_for_18_gb_is_refused_at_compile(target):
    data = _constant_of_shape_relu(18 * 10**9 // 4)
    assert len(data) < 300
    p = kiln.parse_onnx_buffer(data)
    with pytest.raises(kiln.KilnError, match="max_memory_bytes") as info:
        p.compile(target)
    assert isinstance(info.value, ValueError)
    assert "18000000000" in str(info.value) and "{4500000000}" in str(info.value)


def test_max_memory_bytes_sets_the_limit():
    data = _constant_of_shape_relu(1000)  # 4000 bytes of output
    with pytest.raises(kiln.KilnError, match="more than the limit of 3999 bytes"):
        kiln.parse_onnx_buffer(data).compile("cpu", max_memory_bytes=3999)
    p = kiln.parse_onnx_buffer(data)
    p.compile("cpu", max_memory_bytes=4000)
    np.testing.assert_array_equal(np.asarray(p.run({})[0]), np.zeros(1000, np.float32))


TRUNCATE_WHILE_PARSING = r"""
import json, os, random, sys, threading, time
import numpy as np
from onnx import TensorProto, helper, numpy_helper
import kiln

path = sys.argv[1]
weights = numpy_helper.from_array(np.ones((16, 1 << 20), np.float32), "w")  # 64 MiB of raw_data
graph = helper.make_graph(
    [helper.make_node("Add", ["x", "w"], ["y"])], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 1 << 20])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 1 << 20])], [weights])
data = helper.make_model(graph).SerializeToString()
outcomes = {"parsed": 0, "kiln error": 0}
rng = random.Random(0)
for trial in range(12):
    with open(path, "wb") as f:
        f.write(data)
    delay = rng.uniform(0, 0.03)
    cutter = threading.Timer(delay, lambda: os.truncate(path, len(data) // 3))
    cutter.start()
    try:
        kiln.parse_onnx(path)
        outcomes["parsed"] += 1
    except kiln.KilnError as e:
        outcomes["kiln error"] += 1
    cutter.join()
print(json.dumps(outcomes))
"""


def test_a_model_file_cut_short_while_parsing_gives_an_error_not_sigbus(tmp_path):
    """Another process truncating the file mid-parse used to kill this one with
    SIGBUS (a memcpy from the mapped file); every trial must now either parse
    or raise a Kiln error."""
    script = tmp_path / "cut.py"
    script.write_text(TRUNCATE_WHILE_PARSING)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "model.onnx")], capture_output=True, text=True)
    assert done.returncode == 0, f"exit {done.returncode} (negative: killed by that signal)\n{done.stderr[-2000:]}"
    outcomes = json.loads(done.stdout)
    assert outcomes["parsed"] + outcomes["kiln error"] == 12, outcomes
    assert outcomes["kiln error"] > 0, f"no trial was cut short while parsing: {outcomes}"


def test_a_compile_refused_by_the_memory_limit_leaves_the_program_as_it_was():
    p = kiln.parse_onnx_buffer(_constant_of_shape_relu(1000))
    before = str(p)
    m = p.get_main_module()
    with pytest.raises(kiln.KilnError, match="max_memory_bytes"):
        p.compile("cpu", max_memory_bytes=16)
    assert not p.is_compiled() and str(p) == before
    assert str(m) in before  # a module handle taken before still works, on the restored module
    p.compile("cpu")
    np.testing.assert_array_equal(np.asarray(p.run({})[0]), np.zeros(1000, np.float32))
