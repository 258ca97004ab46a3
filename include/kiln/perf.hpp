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
};

// Runs `p` (compiled) `warmup` times untimed, then `runs` times timed.
// `batch` is the number of inferences one run computes and scales the rate;
// above 1 it must be the leading dimension of some input.
perf_report measure_performance(const program& p, const parameter_map& inputs, std::size_t runs,
                                std::size_t warmup = 3, std::size_t batch = 1);

// The report as text: per-instruction table, summary by op, latency figures.
std::string format_perf_report(const perf_report& r);

}  // namespace kiln
