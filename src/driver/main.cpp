// The kiln command: argument parsing and error reporting around the
// subcommands in commands.hpp. Every failure becomes "kiln: error: ..." and
// exit status 2; verify's mismatch is status 1.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <iostream>

#include "driver/commands.hpp"
#include "driver/openmp_wait_policy.hpp"
#include "kiln/errors.hpp"
#include "kiln/version.hpp"

namespace {

using kiln::driver::run_settings;

constexpr int error_status = 2;

constexpr const char* dyn_input_dim_help =
    "Range for an ONNX input's dims as name:dims, each dim N, MIN..MAX or MIN..MAX@{OPT,...} (repeatable); the "
    "program then runs every shape in the ranges";

void add_run_options(CLI::App& cmd, run_settings& s) {
    cmd.add_option("FILE", s.model, "Model file (.kiln, .onnx, a frozen TensorFlow .pb or a SavedModel directory)")->required();
    cmd.add_option("--target", s.target, "Target to run on: ref, cpu or gpu (a build with CUDA) (default: the file's, else cpu)");
    cmd.add_option("--input", s.inputs, "Input as name=path.npy (repeatable); others get random data");
    cmd.add_option("--seed", s.seed, "Seed for random inputs")->capture_default_str();
    cmd.add_option("--dyn-input-dim", s.dyn_input_dims, dyn_input_dim_help);
}

// `kiln run` and `kiln perf`. MIGraphX's driver runs without offload copy
// unless --enable-offload-copy; Kiln's default is the other way round, so
// both spellings are taken.
void add_offload_options(CLI::App& cmd, run_settings& s) {
    auto* disable = cmd.add_flag_function(
        "--disable-offload-copy", [&s](std::int64_t) { s.offload_copy = false; },
        "Keep inputs and outputs in device memory (a device target: --target gpu): inputs are copied there once "
        "before running, so runs leave out host transfers");
    cmd.add_flag_function(
           "--enable-offload-copy", [&s](std::int64_t) { s.offload_copy = true; },
           "Copy inputs to the device and outputs back in every run (the default; MIGraphX driver's spelling)")
        ->excludes(disable);
}

int report(const std::string& message) {
    std::cerr << "kiln: error: " << message << "\n";
    return error_status;
}

}  // namespace

int main(int argc, char** argv) {
    kiln::driver::reexec_with_kilns_openmp_spin(argv);
    CLI::App app{"Kiln: compile and run ML inference graphs"};
    app.name("kiln");
    app.set_version_flag("--version", kiln::version);
    app.require_subcommand(1);

    std::function<int()> action;
    std::string model, output, target = "cpu", save_dir;
    run_settings settings;
    double rtol = 1e-4, atol = 1e-5;

    auto* read = app.add_subcommand("read", "Print a model's IR");
    read->add_option("FILE", model, "Model file (.kiln, .onnx, a frozen TensorFlow .pb or a SavedModel directory)")->required();
    std::vector<std::string> dyn_input_dims;
    read->add_option("--dyn-input-dim", dyn_input_dims, dyn_input_dim_help);
    read->callback([&] { action = [&] { return kiln::driver::read_command(model, dyn_input_dims); }; });

    auto* compile = app.add_subcommand("compile", "Compile a model for a target and save it as .kiln");
    compile->add_option("FILE", model, "Model file (.kiln, .onnx, a frozen TensorFlow .pb or a SavedModel directory)")->required();
    compile->add_option("-o,--output", output, "Compiled .kiln file to write")->required();
    compile->add_option("--target", target, "Target: ref, cpu or gpu (a build with CUDA)")->capture_default_str();
    compile->add_option("--dyn-input-dim", dyn_input_dims, dyn_input_dim_help);
    kiln::driver::precision_settings precision;
    bool fp16 = false, bf16 = false, int8 = false, fp8 = false, int8_weights = false;
    auto* fp16_flag = compile->add_flag("--fp16", fp16, "Compute in float16 (kiln::quantize_fp16)");
    auto* bf16_flag = compile->add_flag("--bf16", bf16, "Compute in bfloat16 (kiln::quantize_bf16)");
    auto* int8_flag = compile->add_flag(
        "--int8", int8,
        "Quantize dot and convolution inputs to int8 with scales from --calibration (kiln::quantize_int8)");
    auto* fp8_flag = compile->add_flag(
        "--fp8", fp8, "Quantize dot and convolution inputs to float8 e4m3fn with scales from --calibration");
    auto* int8_weights_flag = compile->add_flag(
        "--int8-weights", int8_weights,
        "Store dot weights as int8, one scale per output column; activations stay float, no calibration "
        "(kiln::quantize_int8_weights)");
    for (auto* a : {fp16_flag, bf16_flag, int8_flag, fp8_flag, int8_weights_flag})
        for (auto* b : {fp16_flag, bf16_flag, int8_flag, fp8_flag, int8_weights_flag})
            if (a != b) a->excludes(b);
    compile->add_option("--calibration", precision.calibration,
                        "Calibration inputs for --int8 / --fp8 (repeatable): an .npz file with one array per model "
                        "input, holding one sample, a stack of samples along a new leading axis, or samples "
                        "concatenated along the input's first axis");
    compile->add_option("--calibration-method", precision.calibration_method, "How --int8 chooses activation ranges")
        ->check(CLI::IsMember({"max", "percentile", "entropy", "mse"}))
        ->needs(int8_flag)
        ->capture_default_str();
    compile->add_flag(
        "!--no-bias-correction", precision.bias_correction,
        "Leave the layers' biases as they are (by default --int8 / --fp8 take the mean shift that rounding "
        "the weights causes out of each output channel)");
    compile->add_option("--exclude", precision.exclude,
                        "Instruction kept in float by --int8 / --fp8, by printed name (@12) or origin (ONNX node name) "
                        "(repeatable)");
    kiln::compile_options compile_settings;
    auto* tune_flag =
        compile->add_flag("--exhaustive-tune", compile_settings.exhaustive_tune,
                          "Time every eligible kernel algorithm of each instruction on its shapes and keep the fastest "
                          "(slower compile; the choices are saved in the output)");
    compile
        ->add_option("--tuning-cache", compile_settings.tuning_cache,
                     "JSON file of tuning results read before timing and updated after")
        ->needs(tune_flag);
    compile->add_option("--cache-dir", compile_settings.cache_dir,
                        "Directory of compiled programs: one compiled before with the same model, shapes, options, "
                        "Kiln and CPU is loaded instead of compiled, and a new one is stored");
    compile->callback([&] {
        precision.precision = fp16           ? "fp16"
                              : bf16         ? "bf16"
                              : int8         ? "int8"
                              : fp8          ? "fp8"
                              : int8_weights ? "int8-weights"
                                             : "";
        action = [&] {
            return kiln::driver::compile_command(model, output, target, precision, dyn_input_dims, compile_settings);
        };
    });

    auto* run = app.add_subcommand("run", "Run a model and summarise its outputs");
    add_run_options(*run, settings);
    add_offload_options(*run, settings);
    run->add_option("--save-outputs", save_dir, "Folder to write output_<i>.npy files into");
    run->callback([&] { action = [&] { return kiln::driver::run_command(settings, save_dir); }; });

    auto* verify = app.add_subcommand(
        "verify",
        "Compare a target with the reference target: outputs, per instruction or pass by pass. A float output "
        "outside the tolerance is judged against the model evaluated in float64: an element passes when the target "
        "is no farther from that answer than ref's float32 result, within the tolerance");
    add_run_options(*verify, settings);
    verify->add_option("--rtol", rtol, "Relative tolerance")->capture_default_str()->check(CLI::NonNegativeNumber);
    verify->add_option("--atol", atol, "Absolute tolerance")->capture_default_str()->check(CLI::NonNegativeNumber);
    bool per_instruction = false, bisect = false;
    auto* per_instruction_flag = verify->add_flag(
        "--per-instruction", per_instruction,
        "Also check every instruction the target runs against its op's reference compute on the same inputs "
        "and name the first that diverges; for a quantized model (quantize / dequantize_linear), also report each "
        "quantized layer's SQNR against the float32 model and name the worst layers");
    verify
        ->add_flag("--bisect", bisect,
                   "Run the target's passes one at a time, check each result on ref against the unoptimized "
                   "model, then the lowered program, and name the first that breaks the numbers")
        ->excludes(per_instruction_flag);
    verify->callback([&] {
        action = [&] {
            using kiln::driver::verify_mode;
            verify_mode mode = bisect            ? verify_mode::bisect
                               : per_instruction ? verify_mode::per_instruction
                                                 : verify_mode::outputs;
            return kiln::driver::verify_command(settings, rtol, atol, mode);
        };
    });

    std::size_t batch = 1, runs = 20;
    auto* perf = app.add_subcommand("perf", "Profile a model: per-instruction times, op summary, rate, latency");
    add_run_options(*perf, settings);
    add_offload_options(*perf, settings);
    perf->add_option("--batch", batch, "Extent of symbolic batch dimensions (ONNX models)")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    perf->add_option("-n,--runs", runs, "Timed runs after warm-up")->capture_default_str()->check(CLI::PositiveNumber);
    perf->callback([&] { action = [&] { return kiln::driver::perf_command(settings, batch, runs); }; });

    auto* params = app.add_subcommand("params", "List a model's inputs and outputs with their shapes");
    params->add_option("FILE", model, "Model file (.kiln, .onnx, a frozen TensorFlow .pb or a SavedModel directory)")->required();
    params->add_option("--dyn-input-dim", dyn_input_dims, dyn_input_dim_help);
    params->callback([&] { action = [&] { return kiln::driver::params_command(model, dyn_input_dims); }; });

    auto* ops = app.add_subcommand("ops", "List the operators Kiln knows");
    ops->callback([&] { action = [] { return kiln::driver::ops_command(); }; });

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
        return report(std::string(e.what()) + " (see kiln --help)");
    }
    try {
        return action ? action() : report("no command given (see kiln --help)");
    } catch (const std::exception& e) {
        return report(e.what());
    } catch (...) {
        return report("unexpected failure");
    }
}
