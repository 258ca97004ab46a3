#pragma once
// The tuning cache (compile option tuning_cache): a JSON file of earlier
// tuning results, so that a second model with the same layers times nothing.
// Each entry's key names the instruction (op, attributes, shapes, strides,
// dtypes, which inputs are constant, threads) and where it was measured
// (CPU model and ISA, Kiln version); its value is the fastest algorithm and
// its median time. Entries from another CPU or version never match.
#include <optional>
#include <string>

#include "io/json_codec.hpp"

namespace kiln {

struct tuning_result {
    std::string algorithm;
    double median_us = 0;
};

class tuning_cache {
public:
    // Reads `path`; empty means no file. A missing file is an empty cache; a
    // corrupt one warns on stderr and starts empty (it is rewritten on save).
    explicit tuning_cache(std::string path);

    std::optional<tuning_result> find(const std::string& key) const;
    void put(const std::string& key, const tuning_result& result);
    // Writes the file when entries were added; a failure warns, as the
    // compile itself succeeded.
    void save() const;

    // What this CPU and Kiln version add to every key.
    static std::string machine();

private:
    std::string path_;
    io::json entries_ = io::json::object();
    bool changed_ = false;
};

}  // namespace kiln
