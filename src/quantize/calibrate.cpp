#include "quantize/calibrate.hpp"

#include <iterator>
#include <unordered_map>

namespace kiln {

namespace {

// The instructions of `copy` at the positions `observed` have in `original`
// (a program copy keeps every module's instruction order).
std::vector<instruction_ref> same_positions(const module& original, module& copy,
                                            const std::vector<instruction_ref>& observed) {
    std::unordered_map<const instruction*, std::size_t> position;
    std::size_t index = 0;
    for (const auto& ins : original) position.emplace(&ins, index++);
    std::vector<instruction_ref> by_index;
    by_index.reserve(copy.size());
    for (auto it = copy.begin(); it != copy.end(); ++it) by_index.push_back(it);
    std::vector<instruction_ref> out;
    for (const auto& ins : observed) out.push_back(by_index.at(position.at(&*ins)));
    return out;
}

// Returns the observed values after the program's own outputs.
void return_observed(module& m, const std::vector<instruction_ref>& observed) {
    instruction_ref ret = m.get_return();
    if (ret == m.end()) fail("calibration: the program's main module has no return");
    std::vector<instruction_ref> outputs = ret->inputs();
    outputs.insert(outputs.end(), observed.begin(), observed.end());
    m.replace_instruction(ret, ret->get_operator(), outputs);
}

}  // namespace

void check_calibration_set(const program& p, const std::vector<parameter_map>& calibration, const std::string& caller) {
    if (calibration.empty())
        fail(caller +
             ": the calibration set is empty; give at least one sample ({parameter name: value}) so that "
             "scales come from real activations");
    for (std::size_t i = 0; i < calibration.size(); ++i) {
        try {
            check_inputs(*p.get_main_module(), calibration[i]);
        } catch (const error& e) {
            fail(e.kind(), caller + ": calibration sample " + std::to_string(i) + ": " + e.what());
        }
    }
}

std::vector<activation_statistics> calibrate(const program& p, const target& t,
                                             const std::vector<instruction_ref>& observed,
                                             const std::vector<parameter_map>& calibration,
                                             const calibration_progress& progress, const std::string& caller,
                                             const std::vector<std::int64_t>& channel_axes) {
    std::vector<activation_statistics> stats(observed.size());
    for (std::size_t k = 0; k < channel_axes.size() && k < stats.size(); ++k)
        if (channel_axes[k] >= 0) stats[k].track_channel_means(static_cast<std::size_t>(channel_axes[k]));
    if (observed.empty()) {
        if (progress) progress(calibration.size(), calibration.size());
        return stats;
    }
    program copy(p);
    const module& original = *p.get_main_module();
    module& observing = *copy.get_main_module();
    const std::size_t own_outputs = observing.get_return()->inputs().size();
    return_observed(observing, same_positions(original, observing, observed));
    copy.compile(t);

    const auto names = original.instruction_names();
    for (std::size_t i = 0; i < calibration.size(); ++i) {
        std::vector<argument> outputs = copy.eval(calibration[i]);
        for (std::size_t k = 0; k < observed.size(); ++k) {
            try {
                stats[k].add(t.copy_from(outputs.at(own_outputs + k)));
            } catch (const error& e) {
                fail(e.kind(), caller + ": calibration sample " + std::to_string(i) + ", instruction " +
                                   names.at(&*observed[k]) + ": " + e.what());
            }
        }
        if (progress) progress(i + 1, calibration.size());
    }
    return stats;
}

}  // namespace kiln
