#pragma once
// Exhaustive tuning (compile option exhaustive_tune): for an instruction
// whose family has two or more eligible algorithms that build, each is built
// and timed on the instruction's real shapes (its own random inputs, output
// and scratch; constant inputs are the real weights), in interleaved rounds
// so that a burst of noise hits every candidate alike, and the fastest by
// median is kept if it beats the default rule's pick by more than the
// noise (kept_candidate). When the default rule's pick sums for accuracy
// (convolution_algorithms.hpp), only algorithms that do too compete.
// Results go to and come from the tuning cache.
#include <chrono>
#include <cstddef>
#include <span>
#include <string>

#include "targets/cpu/kernels/kernel_algorithm.hpp"
#include "targets/cpu/lowering/tuning_cache.hpp"

namespace kiln {

// The candidate tuning keeps, given each one's median time, the first being
// the default rule's pick: the fastest, unless it is within `margin` (a
// fraction) of the first, which then stays.
std::size_t kept_candidate(std::span<const double> medians, double margin);

class kernel_tuner {
public:
    explicit kernel_tuner(const std::string& cache_path);

    // The fastest of the eligible algorithms that build (the first one,
    // untimed, when fewer than two do); null kernel when none builds.
    chosen_kernel choose(std::span<const kernel_algorithm> algorithms, const kernel_request& r);

    // Writes the cache and prints the total line on stderr.
    void finish();

    // Instructions timed (not answered by the cache) by every tuner of this
    // process: what tests read to see that a cached or loaded compile times nothing.
    static std::size_t timed_instructions();

private:
    tuning_cache cache_;
    std::size_t timed_ = 0;
    std::size_t cached_ = 0;
    std::chrono::steady_clock::time_point start_;
    bool progress_;  // stderr is a terminal
};

}  // namespace kiln
