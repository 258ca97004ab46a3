"""int8 accuracy on real data: a small CNN trained with PyTorch on scikit-learn's bundled handwritten
digits (8x8 images, no download), exported to ONNX and quantized on 100 training images, classifies
the held-out images within 1 percentage point of its float32 accuracy. Once by kiln.quantize_int8,
once as ONNX Runtime's quantize_static QDQ file run through Kiln."""
import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

import kiln
from quantization_testing import quantize_qdq

# The TorchScript exporter (dynamo=False) is the one that writes a batch-1 graph without extra ops.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CALIBRATION_IMAGES = 100


class DigitsCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = torch.relu(self.c1(x))
        x = torch.nn.functional.max_pool2d(torch.relu(self.c2(x)), 2)
        return self.fc(x.flatten(1))


def split_digits():
    """(train images, train labels, held-out images, held-out labels): a fixed 70 / 30 split,
    images N x 1 x 8 x 8 float32 in [0, 1]."""
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]
    order = np.random.RandomState(0).permutation(len(images))
    cut = int(0.7 * len(images))
    train, held_out = order[:cut], order[cut:]
    return images[train], digits.target[train], images[held_out], digits.target[held_out]


def train(images, labels):
    """A few epochs of Adam, deterministic: fixed seeds, one thread."""
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = DigitsCnn()
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        x, y = torch.from_numpy(images), torch.from_numpy(labels).long()
        generator = torch.Generator().manual_seed(0)
        for _ in range(5):
            for batch in torch.randperm(len(x), generator=generator).split(32):
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
                optimizer.step()
    finally:
        torch.set_num_threads(threads)
    return model.eval()


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """(float32 ONNX file with batch 1, calibration inputs, held-out images, held-out labels)."""
    train_x, train_y, test_x, test_y = split_digits()
    model = train(train_x, train_y)
    path = tmp_path_factory.mktemp("digits") / "digits.onnx"
    with torch.no_grad():
        torch.onnx.export(model, (torch.from_numpy(train_x[:1]),), str(path), input_names=["x"],
                          output_names=["logits"], dynamo=False)
    calibration = [{"x": train_x[i:i + 1]} for i in range(CALIBRATION_IMAGES)]
    return path, calibration, test_x, test_y


def accuracy(program, images, labels):
    program.compile(kiln.get_target("cpu"))
    predictions = [int(np.argmax(np.asarray(program.run({"x": images[i:i + 1]})[0]))) for i in range(len(images))]
    return float(np.mean(np.array(predictions) == labels))


@pytest.fixture(scope="module")
def float_accuracy(digits):
    path, _, test_x, test_y = digits
    result = accuracy(kiln.parse_onnx(str(path)), test_x, test_y)
    assert result > 0.9, f"the float32 model should have learned the digits, accuracy {result:.3f}"
    return result


def test_kiln_quantize_int8_keeps_accuracy_within_one_point(digits, float_accuracy):
    path, calibration, test_x, test_y = digits
    p = kiln.parse_onnx(str(path))
    kiln.quantize_int8(p, kiln.get_target("cpu"), calibration=calibration)
    assert "quantize_linear" in str(p) and "dequantize_linear" in str(p)
    int8_accuracy = accuracy(p, test_x, test_y)
    assert abs(int8_accuracy - float_accuracy) <= 0.01, (int8_accuracy, float_accuracy)


def test_onnx_runtime_qdq_file_keeps_accuracy_within_one_point(digits, float_accuracy, tmp_path):
    path, calibration, test_x, test_y = digits
    quantize_qdq(path, tmp_path / "qdq.onnx", calibration)
    p = kiln.parse_onnx(str(tmp_path / "qdq.onnx"))
    assert "quantize_linear" in str(p)
    int8_accuracy = accuracy(p, test_x, test_y)
    assert abs(int8_accuracy - float_accuracy) <= 0.01, (int8_accuracy, float_accuracy)
