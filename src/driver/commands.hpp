#pragma once
// The kiln subcommands. Each returns the process exit status; errors are
// thrown (kiln::error) and reported by main.
#include <string>
#include <vector>

#include "kiln/compile_options.hpp"

namespace kiln::driver {

// Options shared by the commands that run a model.
struct run_settings {
    std::string model;
    // Empty: the target a compiled file was built for, else "cpu".
    std::string target;
    // "name=path.npy"; parameters not named get generate_argument data.
    std::vector<std::string> inputs;
    unsigned long seed = 0;
    // "name:dims" ranges for ONNX inputs (model_file.hpp).
    std::vector<std::string> dyn_input_dims;
    // false (--disable-offload-copy): inputs are copied to the device once,
    // before running, and outputs stay there, so that runs (and perf's
    // times) leave out host transfers. Needs a device target.
    bool offload_copy = true;
};

int read_command(const std::string& model, const std::vector<std::string>& dyn_input_dims = {});
int params_command(const std::string& model, const std::vector<std::string>& dyn_input_dims = {});
int ops_command();
// Reduced precision applied before compiling (kiln/quantize.hpp).
struct precision_settings {
    std::string precision;                // "" (as the model is), "fp16", "bf16", "int8" or "fp8"
    std::vector<std::string> calibration;  // .npz files (calibration_inputs.hpp)
    std::string calibration_method = "max";
    bool bias_correction = true;       // --int8 / --fp8: quantize_int8_options::bias_correction
    std::vector<std::string> exclude;  // instructions kept in float
};

int compile_command(const std::string& model, const std::string& output, const std::string& target,
                    const precision_settings& precision = {}, const std::vector<std::string>& dyn_input_dims = {},
                    const compile_options& options = {});

// Prints each output's shape, min/max/mean and first values; writes
// output_<i>.npy files into `save_dir` when it is not empty.
int run_command(const run_settings& settings, const std::string& save_dir);
enum class verify_mode {
    outputs,          // the target's outputs against the unoptimized model on ref
    per_instruction,  // and every instruction against its reference compute
    bisect,           // the pipeline pass by pass, then the lowered program
};

// Compares the target with the reference interpreter on the same inputs; 0
// when everything matches within rtol/atol, 1 otherwise.
int verify_command(const run_settings& settings, double rtol, double atol, verify_mode mode);

// Times `runs` runs after warm-up and prints per-instruction times, a summary
// by op kind, rate, latency percentiles and overhead outside kernels. `batch`
// sets symbolic batch dimensions of ONNX inputs and scales the rate.
int perf_command(const run_settings& settings, std::size_t batch, std::size_t runs);

}  // namespace kiln::driver
