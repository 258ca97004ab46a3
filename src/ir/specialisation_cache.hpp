#pragma once
// The compiled static programs of one dynamic program, one per set of
// extents. Each holds its own prepacked weights and arena plan, so only the
// optimal profiles stay for good; the others are evicted least recently used
// first beyond a small capacity. A program whose kernels all take their
// extents at run time has one generic compiled program instead.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/program.hpp"

namespace kiln {

class specialisation_cache {
public:
    using factory = std::function<std::shared_ptr<const program>(const parameter_lens&)>;
    specialisation_cache(factory make, std::size_t capacity) : make_(std::move(make)), capacity_(capacity) {}

    // Compiles `lens` now and keeps it for good.
    void pin(const parameter_lens& lens);
    // Pins `compiled`, the program already compiled for `lens`.
    void pin(const parameter_lens& lens, std::shared_ptr<const program> compiled);
    // The compiled program for `lens`, compiled on first use. Threads running
    // other extents are not held up while one compiles.
    std::shared_ptr<const program> get(const parameter_lens& lens);
    // Compiled programs held now (each generic one counts once).
    std::size_t size() const;
    // A program compiled once that runs every extent of a range
    // (ir/run_time_extents.hpp): get() returns the first added that
    // `accepts` the extents (all of them when it is empty) where none is
    // pinned, compiling nothing more; others compile on their own.
    using extents_test = std::function<bool(const parameter_lens&)>;
    void add_generic(std::shared_ptr<const program> compiled, extents_test accepts = {}) {
        generics_.push_back({std::move(compiled), std::move(accepts)});
    }
    // Why there is no generic program (each set of extents compiles on its
    // own), naming the instruction or property that forced it; empty with one.
    void set_per_shape_reason(std::string why) { per_shape_reason_ = std::move(why); }
    const std::string& per_shape_reason() const { return per_shape_reason_; }

private:
    struct entry {
        std::shared_ptr<const program> compiled;
        bool pinned = false;
        std::uint64_t last_use = 0;
    };
    void evict_beyond_capacity();

    factory make_;
    std::size_t capacity_;
    mutable std::mutex mutex_;
    std::map<parameter_lens, entry> entries_;
    std::uint64_t clock_ = 0;
    struct generic {
        std::shared_ptr<const program> compiled;
        extents_test accepts;
    };
    std::vector<generic> generics_;
    std::string per_shape_reason_;
};

}  // namespace kiln
