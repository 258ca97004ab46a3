#include "onnx/dynamic_inputs.hpp"

#include <fstream>
#include <iterator>
#include <set>
#include <system_error>

#include "onnx/onnx_parser.hpp"
#include "onnx/onnx_tensor.hpp"

namespace kiln::onnx_import {

std::map<std::string, shape> dynamic_input_shapes(const onnx::GraphProto& graph, const onnx_options& options,
                                                  const std::string& source) {
    std::set<std::string> weights;
    for (const auto& init : graph.initializer()) weights.insert(init.name());
    std::set<std::string> inputs;
    std::map<std::string, shape> out;
    for (const auto& input : graph.input()) {
        if (weights.contains(input.name())) continue;
        inputs.insert(input.name());
        if (!input.type().has_tensor_type() || options.map_input_dims.contains(input.name())) continue;
        const std::string where = source + ": graph input '" + input.name() + "'";
        std::vector<dynamic_dimension> dims;
        if (auto it = options.map_dyn_input_dims.find(input.name()); it != options.map_dyn_input_dims.end()) {
            dims = it->second;
        } else {
            for (const auto& dim : input.type().tensor_type().shape().dim()) {
                if (dim.has_dim_value() && dim.dim_value() >= 0)
                    dims.emplace_back(static_cast<std::size_t>(dim.dim_value()));
                else if (options.default_dyn_dim_value)
                    dims.push_back(*options.default_dyn_dim_value);
                else  // the static import names it when default_dim_value is unset too
                    dims.emplace_back(options.default_dim_value.value_or(1));
            }
        }
        shape s = shape::from_dyn_dims(to_dtype(input.type().tensor_type().elem_type(), where), dims);
        if (s.dynamic()) out.emplace(input.name(), s);
    }
    for (const auto& [name, dims] : options.map_dyn_input_dims) {
        if (!inputs.contains(name))
            fail(error_kind::invalid_argument,
                 source + ": map_dyn_input_dims names '" + name + "', which is not an input of the graph");
        if (options.map_input_dims.contains(name))
            fail(error_kind::invalid_argument,
                 source + ": input '" + name + "' is in both map_input_dims and map_dyn_input_dims; give one");
    }
    return out;
}

onnx_options without_ranges(const onnx_options& options) {
    onnx_options out = options;
    out.map_dyn_input_dims.clear();
    out.default_dyn_dim_value.reset();
    for (const auto& [name, dims] : options.map_dyn_input_dims) {
        bool fixed = true;
        std::vector<std::size_t> lens;
        for (const auto& d : dims) {
            fixed = fixed && d.is_fixed();
            lens.push_back(d.min);
        }
        if (fixed) out.map_input_dims[name] = lens;
    }
    if (options.default_dyn_dim_value && options.default_dyn_dim_value->is_fixed())
        out.default_dim_value = options.default_dyn_dim_value->min;
    return out;
}

onnx_options at_extents(const onnx_options& options, const parameter_lens& lens) {
    onnx_options out = options;
    for (const auto& [name, l] : lens) out.map_input_dims[name] = l;
    return out;
}

namespace {

class file_source : public specialiser {
public:
    file_source(std::string path, onnx_options options, std::shared_ptr<initializer_cache> initializers)
        : path_(std::move(path)), options_(std::move(options)), initializers_(std::move(initializers)) {
        std::error_code ec;
        size_ = std::filesystem::file_size(path_, ec);
        modified_ = std::filesystem::last_write_time(path_, ec);
    }
    std::string kind() const override { return "onnx"; }
    program specialise(const parameter_lens& lens) const override {
        check_unchanged();
        return parse_onnx_file(path_, at_extents(options_, lens), initializers_);
    }
    source_image image() const {
        check_unchanged();
        std::ifstream f(path_, std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        if (bytes.size() != size_) fail(error_kind::runtime, path_ + ": cannot read the model file again");
        return {std::move(bytes), options_, std::filesystem::absolute(path_).parent_path()};
    }

private:
    void check_unchanged() const {
        std::error_code ec;
        if (std::filesystem::file_size(path_, ec) != size_ || std::filesystem::last_write_time(path_, ec) != modified_)
            fail(error_kind::runtime, path_ + ": the model file changed since it was imported, so its dynamic program "
                                              "cannot import it again for new extents; import it again");
    }

    std::string path_;
    onnx_options options_;
    std::shared_ptr<initializer_cache> initializers_;
    std::uintmax_t size_ = 0;
    std::filesystem::file_time_type modified_;
};

class buffer_source : public specialiser {
public:
    buffer_source(source_image image, std::shared_ptr<initializer_cache> initializers)
        : image_(std::move(image)), initializers_(std::move(initializers)) {}
    std::string kind() const override { return "onnx"; }
    program specialise(const parameter_lens& lens) const override {
        return parse_model_bytes(image_.model.data(), image_.model.size(), at_extents(image_.options, lens),
                                 image_.model_dir, "ONNX model kept by a dynamic program", initializers_);
    }
    const source_image& image() const { return image_; }

private:
    source_image image_;
    std::shared_ptr<initializer_cache> initializers_;
};

}  // namespace

std::shared_ptr<const specialiser> file_specialiser(const std::string& path, const onnx_options& options,
                                                    std::shared_ptr<initializer_cache> initializers) {
    if (initializers == nullptr) initializers = std::make_shared<initializer_cache>();
    return std::make_shared<file_source>(path, options, std::move(initializers));
}

std::shared_ptr<const specialiser> buffer_specialiser(const void* data, std::size_t size, const onnx_options& options,
                                                      const std::filesystem::path& model_dir,
                                                      std::shared_ptr<initializer_cache> initializers) {
    return specialiser_from_image({std::string(static_cast<const char*>(data), size), options, model_dir},
                                  std::move(initializers));
}

std::optional<source_image> image_of(const specialiser& s) {
    if (const auto* file = dynamic_cast<const file_source*>(&s)) return file->image();
    if (const auto* buffer = dynamic_cast<const buffer_source*>(&s)) return buffer->image();
    return std::nullopt;
}

std::shared_ptr<const specialiser> specialiser_from_image(source_image image,
                                                          std::shared_ptr<initializer_cache> initializers) {
    if (initializers == nullptr) initializers = std::make_shared<initializer_cache>();
    return std::make_shared<buffer_source>(std::move(image), std::move(initializers));
}

}  // namespace kiln::onnx_import
