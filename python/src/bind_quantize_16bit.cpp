// kiln.quantize_fp16 and kiln.quantize_bf16 (include/kiln/quantize.hpp).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"

namespace kiln::python {

void bind_quantize_16bit(nb::module_& m) {
    m.def(
        "quantize_fp16", [](program& p, const std::vector<std::string>& ins_names) { quantize_fp16(p, ins_names); },
        nb::arg("program"), nb::arg("ins_names") = std::vector<std::string>{"all"},
        "Rewrites the (uncompiled) program in place to compute in float16: float32 weights become float16 "
        "literals, activations are converted to float16 between the chosen ops (`ins_names`: op names, or "
        "[\"all\"]). Sums, means, softmax, normalization and attention stay float32; the program's inputs and "
        "outputs keep their float32 types. The cpu target keeps the weights in float16 and computes in float32.");
    m.def(
        "quantize_bf16", [](program& p, const std::vector<std::string>& ins_names) { quantize_bf16(p, ins_names); },
        nb::arg("program"), nb::arg("ins_names") = std::vector<std::string>{"all"}, "As quantize_fp16, with bfloat16.");
}

}  // namespace kiln::python
