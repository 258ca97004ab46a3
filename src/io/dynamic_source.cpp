#include "io/dynamic_source.hpp"

#include "onnx/dynamic_inputs.hpp"

namespace kiln::io {

namespace {

[[noreturn]] void bad(const std::string& what) { fail(error_kind::parse_error, "dynamic program: " + what); }

json options_json(const onnx_options& o) {
    json dims = json::object();
    for (const auto& [name, lens] : o.map_input_dims) dims[name] = lens;
    return {{"map_input_dims", std::move(dims)},
            {"default_dim_value", o.default_dim_value ? json(*o.default_dim_value) : json()},
            {"skip_unknown_operators", o.skip_unknown_operators}};
}

onnx_options json_options(const json& j) {
    if (!j.is_object()) bad("'options' must be an object");
    onnx_options o;
    const json& dims = member(j, "map_input_dims");
    if (!dims.is_object()) bad("'map_input_dims' must be an object");
    for (const auto& [name, lens] : dims.items()) {
        if (!lens.is_array()) bad("map_input_dims['" + name + "'] must be an array");
        std::vector<std::size_t> extents;
        for (const auto& n : lens) extents.push_back(as_uint(n, "map_input_dims['" + name + "']"));
        o.map_input_dims[name] = extents;
    }
    if (!member(j, "default_dim_value").is_null()) o.default_dim_value = get_uint(j, "default_dim_value");
    const json& skip = member(j, "skip_unknown_operators");
    if (!skip.is_boolean()) bad("'skip_unknown_operators' must be a boolean");
    o.skip_unknown_operators = skip.get<bool>();
    return o;
}

}  // namespace

source_record record_source(const program& p) {
    const specialiser* s = p.get_specialiser();
    auto image = s ? onnx_import::image_of(*s) : std::nullopt;
    if (!image)
        fail(error_kind::not_implemented, std::string("save: a dynamic program from front end '") +
                                              (s ? s->kind() : "none") + "' cannot be saved yet");
    json parameters = json::object();
    for (const auto& [name, sh] : p.get_parameter_shapes())
        if (sh.dynamic()) parameters[name] = shape_to_json(sh);
    json meta{{"kind", "onnx"},
              {"parameters", std::move(parameters)},
              {"options", options_json(image->options)},
              {"model_dir", image->model_dir.string()}};
    return {std::move(meta), std::move(image->model)};
}

void restore_source(program& p, const json& meta, std::string model) {
    if (!meta.is_object()) bad("the metadata must be an object");
    if (std::string kind = get_string(meta, "kind"); kind != "onnx")
        bad("front end '" + kind + "' is not one this Kiln can import again");
    const json& parameters = member(meta, "parameters");
    if (!parameters.is_object() || parameters.empty()) bad("'parameters' must be an object naming the ranges");
    std::map<std::string, shape> ranges;
    for (const auto& [name, sh] : parameters.items()) {
        ranges.emplace(name, json_to_shape(sh));
        if (!ranges.at(name).dynamic()) bad("parameter '" + name + "' has no range");
    }
    onnx_import::source_image image{std::move(model), json_options(member(meta, "options")),
                                    get_string(meta, "model_dir")};
    p.set_specialiser(onnx_import::specialiser_from_image(std::move(image)), std::move(ranges));
}

}  // namespace kiln::io
