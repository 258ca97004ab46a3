// Preparing a model and its inputs for the commands that run it.
#include "driver/run_inputs.hpp"

#include "driver/npy.hpp"

namespace kiln::driver {

namespace {

std::string known_parameters(const program& p) {
    std::string out;
    for (const auto& n : p.get_parameter_names()) out += (out.empty() ? "" : ", ") + n;
    return out.empty() ? "(none)" : out;
}

}  // namespace

parameter_map make_inputs(const program& p, const run_settings& s) {
    parameter_map inputs;
    auto shapes = p.get_parameter_shapes();
    for (const auto& spec : s.inputs) {
        auto eq = spec.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
            fail("--input expects name=path.npy, got '" + spec + "'");
        std::string name = spec.substr(0, eq);
        if (!shapes.count(name))
            fail("--input names '" + name + "', which is not a parameter; the parameters are: " + known_parameters(p));
        if (inputs.count(name)) fail("--input gives '" + name + "' twice");
        inputs.emplace(name, read_npy(spec.substr(eq + 1)));
    }
    // A dynamic program gets random inputs at its first optimal profile.
    const parameter_lens profile = optimal_profiles(shapes).front();
    unsigned long index = 0;
    for (const auto& [name, sh] : shapes) {
        auto lens = profile.find(name);
        if (!inputs.count(name))
            inputs.emplace(name, generate_argument(lens == profile.end() ? sh : sh.specialised(lens->second),
                                                   s.seed + index));
        ++index;
    }
    return inputs;
}

program prepare(program p, const run_settings& s) {
    if (p.is_compiled()) {
        if (!s.target.empty() && s.target != p.target_name())
            fail(s.model + " is compiled for target '" + p.target_name() + "', not '" + s.target +
                 "'; drop --target or use the uncompiled model");
        return p;
    }
    p.compile(get_target(s.target.empty() ? "cpu" : s.target));
    return p;
}

}  // namespace kiln::driver
