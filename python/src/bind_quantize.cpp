// kiln.quantize_int8 / kiln.quantize_fp8: post-training quantization with
// calibration, and kiln.quantize_int8_weights (weights only), rewriting the
// program in place (see kiln/quantize.hpp).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <string>

#include "bindings.hpp"

namespace kiln::python {

namespace {

std::vector<parameter_map> to_calibration_set(nb::handle calibration, const std::string& caller) {
    std::vector<parameter_map> samples;
    if (calibration.is_none()) return samples;
    if (nb::isinstance<nb::dict>(calibration) || nb::isinstance<nb::str>(calibration))
        fail(error_kind::type_error, caller + ": calibration must be a list of dicts ({parameter name: array}), got " +
                                         python_type_name(calibration));
    std::size_t index = 0;
    for (nb::handle sample : nb::iter(calibration)) {
        samples.push_back(to_parameter_map(sample, caller + ": calibration sample " + std::to_string(index)));
        ++index;
    }
    return samples;
}

std::vector<std::string> to_names(nb::handle names, const std::string& caller, const char* what) {
    if (nb::isinstance<nb::str>(names))
        fail(error_kind::type_error, caller + ": " + what + " must be a list of names, got a str");
    std::vector<std::string> out;
    for (nb::handle n : nb::iter(names)) {
        if (!nb::isinstance<nb::str>(n))
            fail(error_kind::type_error, caller + ": " + what + " must hold strings, got " + python_type_name(n));
        out.push_back(nb::cast<std::string>(n));
    }
    return out;
}

// A bar on stderr when it is a terminal ("calibrating [#####     ] 16/32"); nothing otherwise.
calibration_progress terminal_progress() {
    nb::object stream = nb::module_::import_("sys").attr("stderr");
    if (stream.is_none() || !nb::hasattr(stream, "isatty") || !nb::cast<bool>(stream.attr("isatty")())) return {};
    return [stream](std::size_t done, std::size_t total) {
        nb::gil_scoped_acquire gil;
        constexpr std::size_t width = 30;
        const std::size_t filled = total == 0 ? width : std::min(width, done * width / total);
        std::string line = "\rcalibrating [" + std::string(filled, '#') + std::string(width - filled, ' ') + "] " +
                           std::to_string(done) + "/" + std::to_string(total);
        if (done >= total) line += "\n";
        stream.attr("write")(line);
        stream.attr("flush")();
    };
}

void quantize_int8_program(program& p, nb::handle t, nb::handle calibration, nb::handle ins_names,
                           const std::string& method, bool per_channel, nb::handle exclude, double percentile,
                           bool unsigned_activations, bool bias_correction) {
    const std::string caller = "quantize_int8";
    const target& tgt = to_target(t);
    quantize_int8_options options;
    options.ins_names = to_names(ins_names, caller, "ins_names");
    try {
        options.method = to_calibration_method(method);
    } catch (const error& e) {
        fail(e.kind(), caller + ": " + e.what());
    }
    options.per_channel = per_channel;
    options.exclude = to_names(exclude, caller, "exclude");
    options.percentile = percentile;
    options.unsigned_activations = unsigned_activations;
    options.bias_correction = bias_correction;
    options.progress = terminal_progress();
    std::vector<parameter_map> samples = to_calibration_set(calibration, caller);
    nb::gil_scoped_release release;
    quantize_int8(p, tgt, samples, options);
}

void quantize_fp8_program(program& p, nb::handle t, nb::handle calibration, nb::handle ins_names, nb::handle exclude,
                          bool bias_correction) {
    const std::string caller = "quantize_fp8";
    const target& tgt = to_target(t);
    quantize_fp8_options options;
    options.ins_names = to_names(ins_names, caller, "ins_names");
    options.exclude = to_names(exclude, caller, "exclude");
    options.bias_correction = bias_correction;
    options.progress = terminal_progress();
    std::vector<parameter_map> samples = to_calibration_set(calibration, caller);
    nb::gil_scoped_release release;
    quantize_fp8(p, tgt, samples, options);
}

void quantize_int8_weights_program(program& p, nb::handle ins_names, nb::handle exclude) {
    const std::string caller = "quantize_int8_weights";
    quantize_int8_weights_options options;
    options.ins_names = to_names(ins_names, caller, "ins_names");
    options.exclude = to_names(exclude, caller, "exclude");
    nb::gil_scoped_release release;
    quantize_int8_weights(p, options);
}

nb::list default_ins_names() {
    nb::list names;
    names.append("dot");
    names.append("convolution");
    return names;
}

}  // namespace

void bind_quantize(nb::module_& m) {
    m.def("quantize_int8", quantize_int8_program, nb::arg("program"), nb::arg("target"),
          nb::arg("calibration") = nb::none(), nb::arg("ins_names") = default_ins_names(), nb::kw_only(),
          nb::arg("method") = "max", nb::arg("per_channel") = true, nb::arg("exclude") = nb::list(),
          nb::arg("percentile") = 99.99, nb::arg("unsigned_activations") = true, nb::arg("bias_correction") = true,
          "Quantizes the float inputs of the ops named in ins_names (\"dot\", \"convolution\" or \"all\") to "
          "int8, in place: runs every calibration sample ({parameter name: array}) through a copy of the "
          "program compiled for `target`, chooses each activation's range by `method` (\"max\", "
          "\"percentile\" (keeps `percentile` percent of the values), \"entropy\" (TensorRT's KL "
          "divergence search) or \"mse\" (the range of least squared round-trip error)) and inserts "
          "dequantize_linear(quantize_linear(x, scale, zero_point)) before "
          "those ops: int8 with a zero point per tensor for activations, int8 symmetric per output channel "
          "(per tensor with per_channel=False) for constant weights. With unsigned_activations (the default), an "
          "activation never seen below 0 (after a ReLU) is uint8 with zero point 0 instead (U8S8), where "
          "every use takes uint8, and one read only as a dot's first input is uint8 whatever its range (int8's "
          "zero point plus 128: the same levels, on oneDNN's faster u8 x s8 kernels); False keeps every "
          "activation int8 (S8S8). With bias_correction (the default), each quantized convolution's and dot's "
          "output is shifted by -(W_q - W) E[x], E[x] its input's per-channel mean over the calibration set, so "
          "that rounding the weights moves no output channel's mean. `exclude` lists instructions kept in "
          "float, by printed name (\"@12\") or origin (an ONNX node's name). An empty calibration set is an error. "
          "Shows a progress bar on stderr when it is a terminal.");
    nb::list dot_only;
    dot_only.append("dot");
    m.def("quantize_int8_weights", quantize_int8_weights_program, nb::arg("program"), nb::arg("ins_names") = dot_only,
          nb::kw_only(), nb::arg("exclude") = nb::list(),
          "Weight-only int8, in place: the constant weights of the ops named in ins_names (\"dot\", the only "
          "one) become int8 symmetric with one scale per output column (max |w| / 127), as "
          "dequantize_linear(codes, scale) of an int8 literal; activations stay float, so no calibration "
          "is needed. The cpu target's products then read the weights at 1 byte each: a decoder's "
          "one-token steps, bounded by reading the weights, run up to 4x faster than float32 and 2x "
          "faster than quantize_fp16. `exclude` as in quantize_int8.");
    m.def("quantize_fp8", quantize_fp8_program, nb::arg("program"), nb::arg("target"),
          nb::arg("calibration") = nb::none(), nb::arg("ins_names") = default_ins_names(), nb::kw_only(),
          nb::arg("exclude") = nb::list(), nb::arg("bias_correction") = true,
          "Like quantize_int8 with float8 e4m3fn: one scale per tensor (max |x| / 448) and no zero point, for "
          "activations and weights; bias_correction as there.");
}

}  // namespace kiln::python
