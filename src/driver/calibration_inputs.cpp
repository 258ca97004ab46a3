#include "driver/calibration_inputs.hpp"

#include <algorithm>

#include "driver/npz.hpp"

namespace kiln::driver {

namespace {

std::string joined_names(const std::map<std::string, shape>& shapes) {
    std::string out;
    for (const auto& [name, s] : shapes) out += (out.empty() ? "" : ", ") + name;
    return out;
}

// How `a` holds the samples of an input of shape `expected`.
struct sample_layout {
    std::size_t count = 1;
    std::size_t bytes_apart = 0;  // between consecutive samples
};

sample_layout layout_of(const argument& a, const shape& expected, const std::string& where) {
    const shape& got = a.get_shape();
    if (got.type() != expected.type())
        fail(error_kind::type_error,
             where + " has dtype " + to_string(got.type()) + " but the model expects " + to_string(expected.type()));
    const auto& lens = got.lens();
    const auto& want = expected.lens();
    const std::size_t sample_bytes = shape{expected.type(), want}.bytes();
    if (lens == want) return {1, 0};
    // A stack: a new leading axis of samples.
    if (lens.size() == want.size() + 1 && std::equal(lens.begin() + 1, lens.end(), want.begin()))
        return {lens[0], sample_bytes};
    // Samples concatenated along the first axis (np.concatenate of batches).
    if (lens.size() == want.size() && !want.empty() && want[0] > 0 && lens[0] % want[0] == 0 &&
        std::equal(lens.begin() + 1, lens.end(), want.begin() + 1))
        return {lens[0] / want[0], sample_bytes};
    auto dims_from = [&](std::size_t first) {
        std::string out;
        for (std::size_t d = first; d < want.size(); ++d) out += ", " + std::to_string(want[d]);
        return out;
    };
    std::string expected_forms = to_string(want) + " (one sample) or {samples" + dims_from(0) + "} (a stack)";
    if (!want.empty())
        expected_forms += " or {samples x " + std::to_string(want[0]) + dims_from(1) +
                          "} (samples concatenated along the first axis)";
    fail(where + " has shape " + to_string(lens) + " but the model expects " + expected_forms);
}

void add_file(const program& p, const std::string& path, std::vector<parameter_map>& samples) {
    const auto shapes = p.get_parameter_shapes();
    std::map<std::string, argument> arrays = read_npz(path);
    for (const auto& [key, a] : arrays)
        if (!shapes.count(key))
            fail(path + ": the array '" + key + "' is no input of the model; its inputs are: " + joined_names(shapes));
    std::map<std::string, sample_layout> layouts;
    std::string first;
    for (const auto& [name, expected] : shapes) {
        auto it = arrays.find(name);
        if (it == arrays.end()) fail(path + ": no array for the model's input '" + name + "'");
        const sample_layout layout = layout_of(it->second, expected, path + ": input '" + name + "'");
        if (!first.empty() && layouts.at(first).count != layout.count)
            fail(path + ": input '" + name + "' holds " + std::to_string(layout.count) + " samples but input '" +
                 first + "' holds " + std::to_string(layouts.at(first).count));
        layouts.emplace(name, layout);
        if (first.empty()) first = name;
    }
    const std::size_t count = first.empty() ? 1 : layouts.at(first).count;
    for (std::size_t i = 0; i < count; ++i) {
        parameter_map sample;
        for (const auto& [name, expected] : shapes) {
            const shape one{expected.type(), expected.lens()};
            sample.emplace(name, arrays.at(name).reshaped(one, i * layouts.at(name).bytes_apart));  // a view
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
