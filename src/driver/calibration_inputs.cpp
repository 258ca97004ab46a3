#include "driver/calibration_inputs.hpp"

#include <algorithm>
#include <optional>

#include "driver/npz.hpp"

namespace kiln::driver {

namespace {

std::string joined_names(const std::map<std::string, shape>& shapes) {
    std::string out;
    for (const auto& [name, s] : shapes) out += (out.empty() ? "" : ", ") + name;
    return out;
}

// How many samples `a` holds for an input of shape `expected`: 0 for one
// unstacked sample, n for a stack of n.
std::size_t stacked_count(const argument& a, const shape& expected, const std::string& where) {
    const shape& got = a.get_shape();
    if (got.type() != expected.type())
        fail(error_kind::type_error, where + " has dtype " + to_string(got.type()) + " but the model expects " +
                                         to_string(expected.type()));
    const auto& lens = got.lens();
    if (lens == expected.lens()) return 0;
    if (lens.size() == expected.lens().size() + 1 && std::equal(lens.begin() + 1, lens.end(), expected.lens().begin()))
        return lens[0];
    fail(where + " has shape " + to_string(lens) + " but the model expects " + to_string(expected.lens()) +
         " (one sample) or {samples, " + to_string(expected.lens()).substr(1) + " (a stack of samples)");
}

void add_file(const program& p, const std::string& path, std::vector<parameter_map>& samples) {
    const auto shapes = p.get_parameter_shapes();
    std::map<std::string, argument> arrays = read_npz(path);
    for (const auto& [key, a] : arrays)
        if (!shapes.count(key))
            fail(path + ": the array '" + key + "' is no input of the model; its inputs are: " + joined_names(shapes));
    std::optional<std::size_t> count;
    std::string first;
    for (const auto& [name, expected] : shapes) {
        auto it = arrays.find(name);
        if (it == arrays.end()) fail(path + ": no array for the model's input '" + name + "'");
        const std::size_t n = stacked_count(it->second, expected, path + ": input '" + name + "'");
        if (count && *count != n)
            fail(path + ": input '" + name + "' holds " + (n ? std::to_string(n) + " stacked samples" : "one sample") +
                 " but input '" + first + "' " + (*count ? std::to_string(*count) + " stacked samples" : "one sample"));
        count = n;
        first = name;
    }
    const std::size_t n = count.value_or(0);
    if (n == 0) {
        parameter_map sample;
        for (const auto& [name, expected] : shapes) sample.emplace(name, arrays.at(name));
        samples.push_back(std::move(sample));
        return;
    }
    for (std::size_t i = 0; i < n; ++i) {
        parameter_map sample;
        for (const auto& [name, expected] : shapes) {
            const argument& stack = arrays.at(name);
            const shape one{expected.type(), expected.lens()};
            sample.emplace(name, stack.reshaped(one, i * one.bytes()));  // a view into the stack
        }
        samples.push_back(std::move(sample));
    }
}

}  // namespace

std::vector<parameter_map> read_calibration_set(const program& p, const std::vector<std::string>& files) {
    std::vector<parameter_map> samples;
    for (const auto& path : files) add_file(p, path, samples);
    return samples;
}

}  // namespace kiln::driver
