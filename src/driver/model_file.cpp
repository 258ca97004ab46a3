#include "driver/model_file.hpp"

#include <filesystem>
#include <sstream>

#include "kiln/onnx.hpp"
#include "kiln/serialize.hpp"
#include "kiln/tf.hpp"

namespace kiln::driver {

namespace {

std::size_t parse_extent(const std::string& text, const std::string& spec) {
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 18)
        fail("--dyn-input-dim '" + spec + "': '" + text + "' is not an extent (a non-negative integer)");
    return std::stoull(text);
}

dynamic_dimension parse_dim(const std::string& text, const std::string& spec) {
    auto dots = text.find("..");
    if (dots == std::string::npos) return dynamic_dimension(parse_extent(text, spec));
    auto at = text.find('@', dots);
    std::size_t lo = parse_extent(text.substr(0, dots), spec);
    std::size_t hi =
        parse_extent(text.substr(dots + 2, at == std::string::npos ? std::string::npos : at - dots - 2), spec);
    std::vector<std::size_t> optimals;
    if (at != std::string::npos) {
        std::string list = text.substr(at + 1);
        if (list.size() >= 2 && list.front() == '{' && list.back() == '}') list = list.substr(1, list.size() - 2);
        std::stringstream items(list);
        for (std::string item; std::getline(items, item, ',');) optimals.push_back(parse_extent(item, spec));
    }
    try {
        return dynamic_dimension(lo, hi, optimals);
    } catch (const error& e) {
        fail("--dyn-input-dim '" + spec + "': " + e.what());
    }
}

}  // namespace

std::pair<std::string, std::vector<dynamic_dimension>> parse_dyn_input_dim(const std::string& spec) {
    auto colon = spec.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size())
        fail("--dyn-input-dim expects name:dims such as x:1..64@{8},3,224,224, got '" + spec + "'");
    std::vector<dynamic_dimension> dims;
    std::string text;
    int depth = 0;  // commas inside {optimals} do not separate dims
    for (char c : spec.substr(colon + 1) + ",") {
        if (c == ' ') continue;
        if (c == ',' && depth == 0) {
            dims.push_back(parse_dim(text, spec));
            text.clear();
            continue;
        }
        depth += c == '{' ? 1 : c == '}' ? -1 : 0;
        text += c;
    }
    return {spec.substr(0, colon), dims};
}

program load_model(const std::string& path, std::size_t batch, const std::vector<std::string>& dyn_input_dims) {
    std::string ext = std::filesystem::path(path).extension().string();
    if (ext == ".onnx") {
        onnx_options options;
        options.default_dim_value = batch;
        for (const auto& spec : dyn_input_dims) {
            auto [name, dims] = parse_dyn_input_dim(spec);
            if (options.map_dyn_input_dims.contains(name)) fail("--dyn-input-dim gives '" + name + "' twice");
            options.map_dyn_input_dims[name] = dims;
        }
        return parse_onnx(path, options);
    }
    std::error_code ec;
    if (ext == ".pb" || std::filesystem::is_directory(path, ec)) {  // a directory: a TensorFlow SavedModel
        if (!dyn_input_dims.empty()) fail("--dyn-input-dim applies to .onnx models, not TensorFlow graphs: " + path);
        tf_options options;
        options.batch_size = batch;
        return parse_tf(path, options);
    }
    if (!dyn_input_dims.empty())
        fail("--dyn-input-dim applies to .onnx models; " + path + " keeps the shapes it was saved with");
    // Anything else is read as a .kiln file, whose loader recognises foreign files by their magic bytes.
    // A command loads once, so it checks the weights' checksum too: damage is reported, never run.
    return load(path, load_options{true});
}

}  // namespace kiln::driver
