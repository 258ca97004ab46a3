#include "targets/cpu/lowering/tuning_cache.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "kiln/version.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"

namespace kiln {

namespace {

constexpr int cache_format = 1;

void warn(const std::string& message) {
    std::cerr << "kiln: warning: " << message << '\n';
}

// Whether `e` is a well-formed entry; others are dropped.
bool valid_entry(const io::json& e) {
    return e.is_object() && e.contains("algorithm") && e["algorithm"].is_string() && e.contains("median_us") &&
           e["median_us"].is_number() && e.contains("machine") && e["machine"].is_string();
}

}  // namespace

std::string tuning_cache::machine() {
    return cpu_identity() + " | kiln " + version;
}

tuning_cache::tuning_cache(std::string path) : path_(std::move(path)) {
    if (path_.empty()) return;
    std::error_code ec;
    if (!std::filesystem::exists(path_, ec)) return;
    std::ifstream f(path_, std::ios::binary);
    std::stringstream text;
    text << f.rdbuf();
    const std::string s = text.str();
    io::json doc;
    try {
        doc = io::parse_document(s.data(), s.data() + s.size());
    } catch (const std::exception& e) {
        warn("tuning cache '" + path_ + "' is not valid JSON (" + e.what() + "); starting with an empty cache");
        return;
    }
    if (!doc.is_object() || !doc.contains("kiln_tuning_cache") || !doc["kiln_tuning_cache"].is_number_integer() ||
        doc["kiln_tuning_cache"].get<int>() != cache_format || !doc.contains("entries") ||
        !doc["entries"].is_object()) {
        warn("tuning cache '" + path_ + "' is not a Kiln tuning cache (format " + std::to_string(cache_format) +
             "); starting with an empty cache");
        return;
    }
    std::size_t foreign = 0;
    for (auto& [key, e] : doc["entries"].items()) {
        if (!valid_entry(e)) continue;
        if (e["machine"].get<std::string>() != machine()) ++foreign;
        entries_[key] = e;
    }
    // Kept in the file (another machine may use them) but they never match here.
    if (foreign > 0)
        warn("tuning cache '" + path_ + "': " + std::to_string(foreign) +
             " entries were measured on another CPU or Kiln version and do not apply here (this one: " + machine() +
             ")");
}

std::optional<tuning_result> tuning_cache::find(const std::string& key) const {
    auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    return tuning_result{(*it)["algorithm"].get<std::string>(), (*it)["median_us"].get<double>()};
}

void tuning_cache::put(const std::string& key, const tuning_result& result) {
    entries_[key] = {{"algorithm", result.algorithm}, {"median_us", result.median_us}, {"machine", machine()}};
    changed_ = true;
}

void tuning_cache::save() const {
    if (path_.empty() || !changed_) return;
    const io::json doc{{"kiln_tuning_cache", cache_format}, {"entries", entries_}};
    // Beside the file and renamed, so an interrupted write never leaves a half file.
    const std::string tmp = path_ + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        f << doc.dump(1) << '\n';
        if (!f) {
            warn("cannot write tuning cache '" + path_ + "'");
            return;
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path_, ec);
    if (ec) warn("cannot write tuning cache '" + path_ + "': " + ec.message());
}

}  // namespace kiln
