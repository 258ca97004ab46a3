#include "targets/cpu/lowering/kernel_tuner.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <vector>

#include "targets/cpu/kernels/convolution/convolution_algorithms.hpp"

namespace kiln {

namespace {

std::atomic<std::size_t> timed_total{0};

constexpr int rounds = 5;
// A round runs a kernel this long at least, so that microsecond kernels are
// not timed at the clock's resolution.
constexpr double round_min_us = 2000;
constexpr int max_runs_per_round = 64;

// How much faster than the default rule's pick another candidate must be to
// replace it. On AMD Zen 4, two fresh tunes of ResNet-50 (batch 1, 2 threads)
// disagreed on 3 to 5 of its 15 timed instructions (Winograd or oneDNN on 3 x 3
// layers that time within a few percent of each other), and the whole tuned
// programs ran 0.98x to 1.02x the untuned one in one process: a win inside
// the noise changes nothing but makes the choice differ from run to run.
constexpr double replace_margin = 0.03;

using clock_type = std::chrono::steady_clock;

// Random values laid out with the request's strides: kernels are built for them (a
// slice of a fused buffer, a broadcast operand), so a stand-in packed to its
// element count would let the timed kernel read past its end.
argument random_stand_in(const shape& s, unsigned long seed) {
    if (s.standard()) return generate_argument(s, seed);
    const argument space = generate_argument(shape(s.type(), {s.element_space()}), seed);
    return argument(s, space.owner(), space.data());
}

// The key: everything a kernel's speed depends on, and where it was measured.
std::string tuning_key(const kernel_request& r) {
    io::json inputs = io::json::array();
    for (std::size_t i = 0; i < r.input_shapes.size(); ++i) {
        io::json in = io::shape_to_json(r.input_shapes[i]);
        in["constant"] = i < r.constant_inputs.size() && !r.constant_inputs[i].empty();
        inputs.push_back(std::move(in));
    }
    io::json key{{"op", r.op.name()},           {"attributes", io::value_to_json(r.op.attributes())},
                 {"inputs", std::move(inputs)}, {"output", io::shape_to_json(r.output_shape)},
                 {"threads", r.threads},        {"machine", tuning_cache::machine()}};
    return key.dump();
}

struct candidate {
    std::string_view algorithm;
    std::shared_ptr<const cpu_kernel> kernel;
    int runs = 1;            // per round
    std::vector<double> us;  // per run, one per round
};

std::vector<candidate> build_eligible(std::span<const kernel_algorithm> algorithms, const kernel_request& r) {
    // Wrapped instructions (im2col's 1 x 1 convolution) take the default rule: tuning is per instruction.
    const kernel_builder inner = [algorithms](const kernel_request& q) { return choose_kernel(algorithms, q).kernel; };
    std::vector<candidate> built;
    for (const auto& algorithm : algorithms)
        if (algorithm.eligible(r))
            if (auto kernel = algorithm.build(r, inner)) built.push_back({algorithm.name, std::move(kernel), 1, {}});
    return built;
}

double time_runs(const candidate& c, const argument& out, const std::vector<argument>& inputs, std::byte* scratch,
                 int runs) {
    const auto t0 = clock_type::now();
    for (int i = 0; i < runs; ++i) c.kernel->run(out, inputs, scratch);
    return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / runs;
}

// Whether a cached `algorithm` keeps the accuracy the default rule would
// (the first eligible algorithm stands for the rule's pick; no building).
bool allowed(std::span<const kernel_algorithm> algorithms, const kernel_request& r, std::string_view algorithm) {
    for (const auto& a : algorithms)
        if (a.eligible(r)) return !sums_for_accuracy(a.name) || sums_for_accuracy(algorithm);
    return true;
}

}  // namespace

std::size_t kept_candidate(std::span<const double> medians, double margin) {
    if (medians.empty()) fail(error_kind::runtime, "kept_candidate: no candidate was timed");
    std::size_t fastest = 0;
    for (std::size_t i = 1; i < medians.size(); ++i)
        if (medians[i] < medians[fastest]) fastest = i;
    return medians[fastest] < medians[0] * (1 - margin) ? fastest : 0;
}

kernel_tuner::kernel_tuner(const std::string& cache_path)
    : cache_(cache_path), start_(clock_type::now()), progress_(isatty(STDERR_FILENO) != 0) {}

std::size_t kernel_tuner::timed_instructions() {
    return timed_total.load();
}

chosen_kernel kernel_tuner::choose(std::span<const kernel_algorithm> algorithms, const kernel_request& r) {
    const std::string key = tuning_key(r);
    if (auto hit = cache_.find(key); hit && allowed(algorithms, r, hit->algorithm)) {
        for (const auto& algorithm : algorithms)
            if (algorithm.name == hit->algorithm && algorithm.eligible(r)) {
                const kernel_builder inner = [algorithms](const kernel_request& q) {
                    return choose_kernel(algorithms, q).kernel;
                };
                if (auto kernel = algorithm.build(r, inner)) {
                    ++cached_;
                    return {std::move(kernel), algorithm.name};
                }
            }
        // A cached algorithm that no longer builds here: time again.
    }
    std::vector<candidate> built = build_eligible(algorithms, r);
    if (built.empty()) return {};
    // The default rule's pick (the first built) may be there for accuracy: then only
    // algorithms as careful compete, so that tuning never trades accuracy for speed.
    if (sums_for_accuracy(built[0].algorithm))
        std::erase_if(built, [](const candidate& c) { return !sums_for_accuracy(c.algorithm); });
    if (built.size() == 1) return {std::move(built[0].kernel), built[0].algorithm};

    // The instruction's own buffers: weights as they are, other inputs random.
    std::vector<argument> inputs;
    for (std::size_t i = 0; i < r.input_shapes.size(); ++i) {
        const bool constant = i < r.constant_inputs.size() && !r.constant_inputs[i].empty();
        inputs.push_back(constant ? r.constant_inputs[i] : random_stand_in(r.input_shapes[i], 17 + i));
    }
    const argument out(r.output_shape);
    std::size_t scratch_bytes = 0;
    for (const auto& c : built) scratch_bytes = std::max(scratch_bytes, c.kernel->scratch_bytes());
    const auto scratch = allocate_aligned(scratch_bytes);

    // Warm-up, which also sizes each candidate's round.
    for (auto& c : built) {
        const double us = time_runs(c, out, inputs, scratch.get(), 1);
        c.runs = std::clamp(static_cast<int>(round_min_us / std::max(us, 1.0)), 1, max_runs_per_round);
    }
    for (int round = 0; round < rounds; ++round)
        for (auto& c : built) c.us.push_back(time_runs(c, out, inputs, scratch.get(), c.runs));
    for (auto& c : built) std::sort(c.us.begin(), c.us.end());
    std::vector<double> medians;
    for (const auto& c : built) medians.push_back(c.us[rounds / 2]);
    const auto best = built.begin() + static_cast<std::ptrdiff_t>(kept_candidate(medians, replace_margin));
    ++timed_;
    ++timed_total;
    cache_.put(key, {std::string(best->algorithm), best->us[rounds / 2]});
    if (progress_) {
        std::string line = "kiln: tuned " + r.op.name() + ":";
        char median[64];
        for (const auto& c : built) {
            std::snprintf(median, sizeof median, " %.1f us%s", c.us[rounds / 2], &c == &*best ? " (kept)" : "");
            line += " " + std::string(c.algorithm) + median;
        }
        std::fprintf(stderr, "%s\n", line.c_str());
    }
    return {std::move(best->kernel), best->algorithm};
}

void kernel_tuner::finish() {
    cache_.save();
    const double s = std::chrono::duration<double>(clock_type::now() - start_).count();
    std::fprintf(stderr,
                 "kiln: exhaustive tuning: %zu instructions timed, %zu reused (an identical layer or the tuning "
                 "cache), %.1f s\n",
                 timed_, cached_, s);
}

}  // namespace kiln
