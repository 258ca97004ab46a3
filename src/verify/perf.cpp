#include "kiln/perf.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>

namespace kiln {

namespace {

double percentile(std::vector<double> sorted, double q) {
    if (sorted.empty()) return 0;
    // Nearest rank: the smallest value with at least q of the samples at or below it.
    auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
    return sorted[std::min(sorted.size(), std::max<std::size_t>(rank, 1)) - 1];
}

// A rate scaled by a batch the program does not compute would be fiction.
void check_batch(const program& p, std::size_t batch) {
    if (batch == 0) fail("perf: the batch must be at least 1");
    if (batch == 1) return;
    std::string shapes;
    for (const auto& [name, s] : p.get_parameter_shapes()) {
        if (!s.lens().empty() && s.lens().front() == batch) return;
        shapes += (shapes.empty() ? "" : ", ") + name + " " + to_string(s.lens());
    }
    fail("perf: batch " + std::to_string(batch) + " does not match the program: no input has a leading dimension of " +
         std::to_string(batch) + " (" + (shapes.empty() ? "no inputs" : shapes) +
         "); the batch is what one run computes (an ONNX model's symbolic input dimensions take it from "
         "--batch), and the rate counts it");
}

}  // namespace

perf_report measure_performance(const program& p, const parameter_map& inputs, std::size_t runs, std::size_t warmup,
                                std::size_t batch) {
    if (!p.is_compiled()) fail("perf: the program must be compiled first");
    if (runs == 0) fail("perf: the number of runs must be at least 1");
    check_batch(p, batch);
    for (std::size_t i = 0; i < warmup; ++i) p.eval(inputs);

    perf_report r;
    r.runs = runs;
    r.batch = batch;
    std::vector<double> latencies;
    std::vector<step_timing> first;
    std::vector<double> step_sums;
    double kernel_sum = 0;
    for (std::size_t i = 0; i < runs; ++i) {
        std::vector<step_timing> timings;
        auto start = std::chrono::steady_clock::now();
        p.eval_profiled(inputs, timings);
        latencies.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        if (i == 0) {
            first = timings;
            step_sums.assign(timings.size(), 0);
        }
        for (std::size_t s = 0; s < timings.size() && s < step_sums.size(); ++s) {
            step_sums[s] += timings[s].seconds * 1e3;
            kernel_sum += timings[s].seconds * 1e3;
        }
    }

    const auto n = static_cast<double>(runs);
    r.kernel_ms = kernel_sum / n;
    std::map<std::string, std::string> precision;
    for (const auto& ip : instruction_precisions(p)) precision[ip.instruction] = ip.text();
    std::map<std::string, perf_report::op_time> by_op;
    for (std::size_t s = 0; s < first.size(); ++s) {
        double mean = step_sums[s] / n;
        auto known = precision.find(first[s].instruction);
        r.instructions.push_back({first[s].instruction, first[s].op, first[s].algorithm,
                                  known == precision.end() ? "?" : known->second, mean,
                                  r.kernel_ms > 0 ? mean / r.kernel_ms : 0});
        auto& o = by_op[first[s].op];
        o.op = first[s].op;
        o.count += 1;
        o.mean_ms += mean;
    }
    for (auto& [name, o] : by_op) {
        o.share = r.kernel_ms > 0 ? o.mean_ms / r.kernel_ms : 0;
        r.ops.push_back(o);
    }
    std::sort(r.ops.begin(), r.ops.end(), [](const auto& a, const auto& b) { return a.mean_ms > b.mean_ms; });

    std::vector<double> sorted = latencies;
    std::sort(sorted.begin(), sorted.end());
    r.min_ms = sorted.front();
    r.max_ms = sorted.back();
    r.median_ms = percentile(sorted, 0.5);
    r.p90_ms = percentile(sorted, 0.9);
    r.p99_ms = percentile(sorted, 0.99);
    for (double l : latencies) r.mean_ms += l / n;
    r.rate = r.mean_ms > 0 ? 1e3 * static_cast<double>(batch) / r.mean_ms : 0;
    r.overhead_ms = std::max(0.0, r.mean_ms - r.kernel_ms);

    std::vector<double> unprofiled;
    for (std::size_t i = 0; i < runs; ++i) {
        auto start = std::chrono::steady_clock::now();
        p.eval(inputs);
        unprofiled.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(unprofiled.begin(), unprofiled.end());
    r.unprofiled_median_ms = percentile(unprofiled, 0.5);
    r.unprofiled_min_ms = unprofiled.front();
    return r;
}

std::string format_perf_report(const perf_report& r) {
    std::string out;
    char line[256];
    out += "Instructions (mean per run; precision: arithmetic -> result type):\n";
    for (const auto& i : r.instructions) {
        std::snprintf(line, sizeof line, "  %-8s %-24s %-26s %-20s %10.4f ms %6.2f%%\n", i.instruction.c_str(),
                      i.op.c_str(), i.algorithm.c_str(), i.precision.c_str(), i.mean_ms, 100 * i.share);
        out += line;
    }
    out += "\nSummary by op kind:\n";
    for (const auto& o : r.ops) {
        std::snprintf(line, sizeof line, "  %-24s x%-4zu %10.4f ms %6.2f%%\n", o.op.c_str(), o.count, o.mean_ms,
                      100 * o.share);
        out += line;
    }
    std::snprintf(line, sizeof line,
                  "\nRuns: %zu (batch %zu)\nRate: %.2f inferences/s\n"
                  "Latency: min %.4f ms, median %.4f ms, mean %.4f ms, p90 %.4f ms, p99 %.4f ms, max %.4f ms\n",
                  r.runs, r.batch, r.rate, r.min_ms, r.median_ms, r.mean_ms, r.p90_ms, r.p99_ms, r.max_ms);
    out += line;
    std::snprintf(line, sizeof line, "Time in kernels: %.4f ms; overhead outside kernels: %.4f ms (%.2f%%)\n",
                  r.kernel_ms, r.overhead_ms, r.mean_ms > 0 ? 100 * r.overhead_ms / r.mean_ms : 0.0);
    out += line;
    std::snprintf(line, sizeof line, "Without profiling: median %.4f ms, min %.4f ms\n", r.unprofiled_median_ms,
                  r.unprofiled_min_ms);
    out += line;
    return out;
}

}  // namespace kiln
