#pragma once
// Profiling a compiled program: per-instruction kernel times, a summary by op
// kind, latency percentiles and the overhead outside kernels.
#include <cstddef>
#include <string>
#include <vector>

#include "kiln/program.hpp"

namespace kiln {

struct perf_report {
    struct instruction_time {
        std::string instruction;  // "@12"
        std::string op;
        std::string algorithm;  // the target's kernel for it ("reference" on ref)
        std::string precision;  // "int8 -> float32": its arithmetic, then its result's dtype (instruction_precision)
        double mean_ms = 0;
        double share = 0;  // of all kernel time
    };
    struct op_time {
        std::string op;
        std::size_t count = 0;  // instructions of this kind
        double mean_ms = 0;     // per run, all instructions of this kind together
        double share = 0;
    };
    std::vector<instruction_time> instructions;  // program order
    std::vector<op_time> ops;                    // most time first
    std::size_t runs = 0;
    std::size_t batch = 1;
    double min_ms = 0, median_ms = 0, max_ms = 0, p90_ms = 0, p99_ms = 0, mean_ms = 0;
    double rate = 0;         // inferences per second: batch / mean latency
    double kernel_ms = 0;    // mean time inside kernels per run
    double overhead_ms = 0;  // mean time outside kernels per run
    // The same number of runs without profiling, timed after the profiled
    // ones: on a device target profiling waits for each kernel and replays no
    // graph, so these are the figures to compare with other engines.
    double unprofiled_median_ms = 0, unprofiled_min_ms = 0;
};

// What one instruction of a compiled program computes in.
struct instruction_precision {
    std::string instruction;  // printed name in the compiled main module, "@12"
    std::string op;
    // The type its kernel computes in: what the kernel says (kernel_choice),
    // else read from the instruction: the integer type when its data inputs
    // are all integers and either several (data and weights) or the result
    // is an integer too ("int8"); otherwise the widest float type of its
    // non-constant inputs and result, with "(float16 weights)" when a
    // constant input is narrower (a half float or 8-bit integer).
    std::string arithmetic;
    std::string result_type;  // "float32"
    std::string text() const { return arithmetic + " -> " + result_type; }
};

// Each computing instruction of the compiled main module (not parameters,
// literals or the return), in order.
std::vector<instruction_precision> instruction_precisions(const program& p);

// "float32", "float16", "bfloat16", "int8", ... (numpy's names).
std::string precision_name(dtype t);

// Runs `p` (compiled) `warmup` times untimed, then `runs` times timed.
// `batch` is the number of inferences one run computes and scales the rate;
// above 1 it must be the leading dimension of some input.
perf_report measure_performance(const program& p, const parameter_map& inputs, std::size_t runs,
                                std::size_t warmup = 3, std::size_t batch = 1);

// The report as text: per-instruction table, summary by op, latency figures.
std::string format_perf_report(const perf_report& r);

}  // namespace kiln
