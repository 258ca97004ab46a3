#pragma once
// Checking a target against the reference target: its outputs, every
// instruction on its own (which one diverges first), and every pass of its
// pipeline (which one first breaks the numbers).
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kiln/program.hpp"

namespace kiln {

// allclose-style: |got - expected| <= atol + rtol * |expected|; NaN matches
// NaN and equal infinities match.
struct tolerance {
    double rtol = 1e-4;
    double atol = 1e-5;
};

// How one value differs from the value expected of it.
struct value_comparison {
    shape got_shape;
    shape expected_shape;
    bool same_shape = true;  // dtype and lens agree; when not, no element is compared
    std::size_t elements = 0;
    std::size_t mismatches = 0;      // elements outside the tolerance
    std::size_t first_mismatch = 0;  // row-major index
    double got_at_first = 0;
    double expected_at_first = 0;
    double max_abs_error = 0;
    double max_rel_error = 0;
    bool ok() const { return same_shape && mismatches == 0; }
};

value_comparison compare_values(const argument& got, const argument& expected, const tolerance& tol = {});

// "max abs error 2e-07, max rel error 1e-06: ok", or the mismatch count and
// the first bad element, or the two shapes when they differ.
std::string describe(const value_comparison& c);

// ---- outputs -------------------------------------------------------------

// ref evaluates in float32 too (each op's result rounds), so on a deep
// network ref and a correct target can differ by more than the tolerance
// through rounding alone. A float output that differs is then judged
// against the exact answer: the reference module evaluated in float64
// (float literals, parameters and float results widened), element by element.
// An element outside the tolerance is accepted when the target is no
// farther from that answer than ref's float32 result, within the tolerance:
// |got - exact| <= |ref - exact| + atol + rtol * |exact|.
struct float64_judgement {
    bool evaluated = false;   // the float64 evaluation ran
    std::string unavailable;  // why it could not, when it could not
    std::size_t judged = 0;   // elements outside the tolerance of ref
    std::size_t rejected = 0; // of those, farther from the float64 answer than ref
    std::size_t first_rejected = 0;  // row-major index
    double worst_target_error = 0;   // from the float64 answer, over the judged elements
    double worst_ref_error = 0;
    bool accepts() const { return evaluated && rejected == 0; }
};

struct output_report {
    std::string target;
    tolerance tol;
    std::vector<value_comparison> outputs;
    // One per output; judged only for float outputs that differ from ref.
    std::vector<float64_judgement> float64;
    bool passed() const;
};

// Runs `compiled` and the reference interpreter on `reference` (normally the
// main module before optimization) with the same inputs and compares every
// output; a float output outside the tolerance is then judged against the
// float64 evaluation of `reference` (float64_judgement).
output_report verify_outputs(const program& compiled, const module& reference, const parameter_map& inputs,
                             const tolerance& tol = {});
std::string format_output_report(const output_report& r);

// ---- per instruction -----------------------------------------------------

struct instruction_divergence {
    std::string instruction;               // printed name in the compiled module, "@12"
    std::string op;                        // the op with its attributes
    std::vector<std::string> input_names;  // the instructions it reads (empty when not in the module)
    std::vector<shape> input_shapes;
    shape output_shape;
    // -1: the result differs from the op's reference compute on the very
    // inputs the target gave it (a wrong kernel). i >= 0: input i differs
    // from the value its producer had when it was computed (memory
    // overwritten in between, or a view placed wrongly); `difference`, `got`
    // and `expected` then describe that input.
    int changed_input = -1;
    value_comparison difference;
    // Only for the first divergence of a report: copies of what the target
    // gave the instruction, what it produced and what ref expects.
    std::vector<argument> inputs;
    argument got;
    argument expected;
};

struct per_instruction_report {
    std::string target;
    tolerance tol;
    std::size_t checked = 0;                          // instructions the target ran
    std::vector<instruction_divergence> divergences;  // in execution order
    // Each returned output against the value its instruction had in the run.
    std::vector<value_comparison> outputs;
    bool passed() const;
};

// Runs `compiled` once, and checks each instruction it executes against its
// op's reference compute applied to the inputs the target gave it, so a
// divergence is pinned to the instruction that introduced it instead of
// every instruction after it. Also checks that each instruction received
// the values its producers computed.
per_instruction_report verify_per_instruction(const program& compiled, const parameter_map& inputs,
                                              const tolerance& tol = {});
std::string format_per_instruction_report(const per_instruction_report& r);

// ---- pass bisection ------------------------------------------------------

struct bisect_stage {
    std::size_t position = 0;               // 1-based place in the pipeline; pipeline size + 1 for the lowering
    std::string pass;                       // pass name; empty for the lowering
    bool lowering = false;                  // the target's compiled program rather than a pass
    bool disabled = false;                  // skipped by disabled_passes / KILN_DISABLE_PASSES
    std::string failure;                    // error from the pass, the verifier or the run; empty when none
    std::vector<value_comparison> outputs;  // against the unoptimized module on ref
    bool ok() const;
};

struct bisect_report {
    std::string target;
    tolerance tol;
    std::vector<std::string> pipeline;  // the target's passes in order
    // In order, ending at the first stage that breaks the numbers; when none
    // does, every pass and then the lowering.
    std::vector<bisect_stage> stages;
    bool passed() const;
    // The first stage that breaks the numbers, or nullptr.
    const bisect_stage* first_failure() const;
};

// Runs `t`'s pipeline on a copy of the main module of `uncompiled` one pass
// at a time (verifying the module after each), evaluates each result on ref
// and compares it with the unoptimized module on ref; then lowers the
// optimized module with `t` and compares its run too. Stops at the first
// stage whose outputs leave the tolerance.
bisect_report bisect_passes(const program& uncompiled, const target& t, const parameter_map& inputs,
                            const tolerance& tol = {}, const compile_options& options = {});
std::string format_bisect_report(const bisect_report& r);

// ---- quantization --------------------------------------------------------

// The float32 program a quantized one stands for: a copy of `quantized` in
// which every dequantize_linear(quantize_linear(x, s, z), s, z) (the QDQ form
// around an activation, or around a float weight literal as quantize_int8
// writes it) is x, or max(x, 0) for an activation when the pair's range
// starts at 0 (zero point = the type's lowest value): such a pair clamps as a
// relu does, and ONNX Runtime's quantizer removes the Relu it folds into one.
// Weights held only as dequantize_linear(int8 literal) (an ONNX QDQ file)
// stay dequantized: their float values are gone.
std::unique_ptr<module> float_counterpart(const module& quantized);

// How much precision one quantized layer (an instruction that reads a
// dequantize_linear: a convolution, a dot, an add fed by QDQ pairs...)
// loses, as signal-to-quantization-noise ratios in dB, 10 log10(sum f^2 /
// sum (q - f)^2) over every element of every sample; +inf when equal. The
// value compared is the output of the node the layer came from: the layer
// and the instructions after it with its origin (a bias add), up to the
// next quantize_linear.
struct quantized_layer {
    std::string instruction;  // printed name in the quantized module, "@12"
    std::string origin;       // the ONNX node it came from (instruction::origin), may be empty
    std::string op;           // the op with its attributes
    shape output_shape;       // of the node's output
    // Its output in the quantized program against the float32 program's:
    // the noise of every layer up to here.
    double sqnr_db = 0;
    // The layer alone: its quantized inputs and weights computed from the
    // float32 program's values, against its float32 output. The layer that
    // loses the most here is where the noise comes from.
    double own_sqnr_db = 0;
};

struct quantization_report {
    std::string evaluated_on;  // "ref" (the interpreter) or a target's name
    std::size_t samples = 0;
    std::vector<quantized_layer> layers;  // in program order
    std::vector<double> output_sqnr_db;   // each output of the program, same definition
    // Indices into `layers` of the `n` lowest own_sqnr_db, worst first.
    std::vector<std::size_t> worst(std::size_t n) const;
};

// Evaluates the main module of `quantized` (uncompiled, holding quantize /
// dequantize_linear) and its float_counterpart on each input set, on the
// reference interpreter or, when `t` is given, compiled for `t`, and
// reports every quantized layer. Raises an error when the program holds no
// dequantize_linear or `inputs` is empty.
quantization_report verify_quantization(const program& quantized, const std::vector<parameter_map>& inputs,
                                        const target* t = nullptr);
// A table of the layers and the `worst` lowest own SQNRs, named by origin.
std::string format_quantization_report(const quantization_report& r, std::size_t worst = 5);

}  // namespace kiln
