#include "ir/run_time_extents.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace kiln {

namespace {

// Strides that matter: those of dimensions longer than one.
bool same_strides_where_it_matters(const shape& a, const shape& b) {
    if (a.ndim() != b.ndim()) return false;
    for (std::size_t j = 0; j < a.ndim(); ++j)
        if (a.lens()[j] > 1 && b.lens()[j] > 1 && a.strides()[j] != b.strides()[j]) return false;
    return true;
}

// Where a view (output_alias) of `ins` lies in its source at these shapes:
// the distance of compute_alias's result from the source's data.
std::optional<std::ptrdiff_t> view_offset(const instruction& ins, const std::vector<shape>& inputs, const shape& out) {
    const int alias = ins.get_operator().output_alias(inputs);
    if (alias < 0) return std::nullopt;
    std::byte* const fake_base = reinterpret_cast<std::byte*>(std::uintptr_t{1} << 40);
    std::vector<argument> fake;
    for (const auto& s : inputs) fake.emplace_back(s, fake_base);
    return ins.get_operator().compute_alias(out, fake).data() - fake_base;
}

// The strides of `at_max` `shorter` extents below the maximum, each
// stride_steps[d] shorter per unit of the extent (none: as at the maximum).
std::vector<std::size_t> strides_at(const shape& at_max, const std::vector<std::int64_t>& stride_steps,
                                    std::size_t shorter) {
    std::vector<std::size_t> out = at_max.strides();
    for (std::size_t d = 0; d < stride_steps.size(); ++d)
        out[d] = static_cast<std::size_t>(static_cast<std::int64_t>(out[d]) -
                                          stride_steps[d] * static_cast<std::int64_t>(shorter));
    return out;
}

std::string dimension_name(const input_dimension& d) {
    return "'" + d.name + "' dimension " + std::to_string(d.dim);
}

}  // namespace

std::vector<std::size_t> extent_plan::probe_extents(std::size_t min, std::size_t max) {
    std::vector<std::size_t> out{min, min + (max - min) / 2, max};
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::vector<input_dimension> one_extent_dimensions(const std::map<std::string, shape>& parameters, std::string& why) {
    std::vector<input_dimension> out;
    std::vector<dynamic_dimension> ranges;
    for (const auto& [name, s] : parameters) {
        if (!s.dynamic()) continue;
        const auto dims = s.dyn_dims();
        for (std::size_t d = 0; d < dims.size(); ++d) {
            if (dims[d].is_fixed()) continue;
            out.push_back({name, d});
            ranges.push_back(dims[d]);
        }
    }
    if (out.empty()) {
        why = "the program has no dynamic dimension";
        return {};
    }
    // Dimensions of one range are taken as one extent; a run where they
    // differ compiles on its own (extent_plan::serves), so dimensions
    // that only share a range by chance lose nothing but the single compile.
    for (std::size_t i = 1; i < out.size(); ++i)
        if (ranges[i].min != ranges[0].min || ranges[i].max != ranges[0].max) {
            why = "the program has " + std::to_string(out.size()) + " dynamic dimensions with different ranges (" +
                  dimension_name(out[0]) + " and " + dimension_name(out[i]) +
                  "; run-time extents follow one, or several of one range)";
            return {};
        }
    return out;
}

std::optional<extent_plan> extent_plan::derive(const module& compiled,
                                               const std::map<std::string, shape>& dynamic_parameters, std::string& why,
                                               const std::vector<const module*>& literals_at_probes) {
    extent_plan plan;
    plan.dims_ = one_extent_dimensions(dynamic_parameters, why);
    if (plan.dims_.empty()) return std::nullopt;
    const auto range = dynamic_parameters.at(plan.dims_[0].name).dyn_dims()[plan.dims_[0].dim];
    plan.min_ = range.min;
    plan.max_ = range.max;
    // The extent's dimensions of parameter `name`.
    auto extent_dims_of = [&](const std::string& name) {
        std::vector<std::size_t> out;
        for (const auto& d : plan.dims_)
            if (d.name == name) out.push_back(d.dim);
        return out;
    };
    const auto names = compiled.instruction_names();
    const auto probes = probe_extents(plan.min_, plan.max_);
    if (!literals_at_probes.empty() && literals_at_probes.size() != probes.size())
        fail("extent_plan::derive: " + std::to_string(literals_at_probes.size()) + " modules for " +
             std::to_string(probes.size()) + " probes");
    // shapes[k][i]: instruction i's shape at probe k.
    std::vector<std::vector<shape>> shapes(probes.size());
    // view_offsets[k][v]: view v's byte offset in its source at probe k.
    std::vector<std::unordered_map<const instruction*, std::ptrdiff_t>> view_offsets(probes.size());
    for (std::size_t k = 0; k < probes.size(); ++k) {
        std::unordered_map<const instruction*, std::size_t> index;
        const module* literals = literals_at_probes.empty() ? nullptr : literals_at_probes[k];
        if (literals != nullptr && literals->size() != compiled.size())
            fail("extent_plan::derive: the module at extent " + std::to_string(probes[k]) + " is another graph");
        auto at_probe = literals != nullptr ? literals->begin() : compiled.end();
        for (const auto& ins : compiled) {
            const auto& same_at_probe = literals != nullptr ? *at_probe++ : ins;
            shape s = ins.get_shape();
            const auto extent_dims = ins.is_param() ? extent_dims_of(ins.param_name()) : std::vector<std::size_t>{};
            if (!extent_dims.empty()) {
                auto lens = s.lens();
                for (const auto d : extent_dims) {
                    if (d >= lens.size() || lens[d] != plan.max_ || !s.standard()) {
                        why = "input '" + ins.param_name() + "' is " + to_string(s) + " in the compiled program";
                        return std::nullopt;
                    }
                    lens[d] = probes[k];
                }
                s = shape(s.type(), lens);
            } else if (ins.is_literal()) {
                s = same_at_probe.get_shape();
            } else if (!ins.is_param() && !ins.is_return()) {
                std::vector<shape> inputs;
                for (const auto& in : ins.inputs()) inputs.push_back(shapes[k][index.at(&*in)]);
                try {
                    s = ins.get_operator().compute_shape(inputs, ins.module_inputs());
                    if (auto offset = view_offset(ins, inputs, s)) view_offsets[k][&ins] = *offset;
                } catch (const error& e) {
                    why = names.at(&ins) + " = " + ins.name() + " has no shape at extent " +
                          std::to_string(probes[k]) + ": " + e.what();
                    return std::nullopt;
                }
            }
            index[&ins] = shapes[k].size();
            shapes[k].push_back(std::move(s));
        }
    }
    const std::size_t last = probes.size() - 1;
    std::size_t i = 0;
    for (const auto& ins : compiled) {
        const shape& at_max = shapes[last][i];
        if (ins.is_return()) {  // its shape (the outputs', as a tuple when several) is not a value
            plan.stride_steps_.emplace_back();
            plan.varying_.push_back(std::nullopt);
            plan.at_max_.push_back(at_max);
            ++i;
            continue;
        }
        const std::string name = names.at(&ins) + " = " + ins.name();
        auto refuse = [&](const std::string& reason) {
            why = name + " -> " + to_string(at_max) + ": " + reason;
            return std::nullopt;
        };
        if (at_max != ins.get_shape()) return refuse("compute_shape at the maximum gives another shape");
        if (at_max.is_tuple()) return refuse("several results");
        std::optional<varying_dimension> varies;
        for (std::size_t d = 0; d < at_max.ndim(); ++d) {
            if (shapes[0][i].lens()[d] == at_max.lens()[d]) continue;
            if (varies) return refuse("it varies in more than one dimension");
            const auto grow = static_cast<std::int64_t>(at_max.lens()[d]) - static_cast<std::int64_t>(shapes[0][i].lens()[d]);
            const auto span = static_cast<std::int64_t>(probes[last] - probes[0]);
            if (grow <= 0 || grow % span != 0) return refuse("its dimension " + std::to_string(d) + " does not grow in steps of the extent");
            varying_dimension v{d, grow / span, 0};
            v.offset = static_cast<std::int64_t>(at_max.lens()[d]) - v.scale * static_cast<std::int64_t>(probes[last]);
            varies = v;
        }
        for (std::size_t k = 0; k < probes.size(); ++k) {
            const shape& s = shapes[k][i];
            if (s.type() != at_max.type() || s.ndim() != at_max.ndim()) return refuse("its dtype or rank changes");
            for (std::size_t d = 0; d < s.ndim(); ++d) {
                const bool this_one = varies && varies->dim == d;
                const auto expected = this_one ? static_cast<std::size_t>(varies->scale * static_cast<std::int64_t>(probes[k]) + varies->offset)
                                               : at_max.lens()[d];
                if (s.lens()[d] != expected) return refuse("its dimension " + std::to_string(d) + " is not a * extent + b");
            }
            // The value at a smaller extent lies in the buffer planned for
            // the maximum, laid out alike; a view where the reader finds it.
            if ((at_max.standard() && !s.standard()) || s.element_space() > at_max.element_space())
                return refuse("its layout changes with the extent");
            const auto view_at = view_offsets[k].find(&ins);
            const auto view_at_max = view_offsets[last].find(&ins);
            if ((view_at == view_offsets[k].end()) != (view_at_max == view_offsets[last].end()) ||
                (view_at != view_offsets[k].end() && view_at->second != view_at_max->second))
                return refuse("its place in the value it views changes with the extent");
            if (same_strides_where_it_matters(s, at_max)) continue;
            // A constant is read where it lies at the maximum; any other
            // value is written at each extent as laid out there.
            if (!varies || ins.is_literal()) return refuse("its strides change with the extent");
            varies->moves_strides = true;
        }
        // Strides that change follow e as a * e + b too (a dense layout's
        // are products of lengths, one of which varies). A dimension of
        // length 1 has no stride that matters.
        std::vector<std::int64_t> stride_steps;
        if (varies && varies->moves_strides && !at_max.standard()) {
            for (std::size_t d = 0; d < at_max.ndim(); ++d) {
                std::vector<std::size_t> longer;  // the probes where dimension d is longer than 1
                for (std::size_t k = 0; k < probes.size(); ++k)
                    if (shapes[k][i].lens()[d] > 1) longer.push_back(k);
                std::int64_t step = 0;
                if (longer.size() >= 2) {
                    const auto span = static_cast<std::int64_t>(probes[longer.back()] - probes[longer.front()]);
                    const auto grow = static_cast<std::int64_t>(shapes[longer.back()][i].strides()[d]) -
                                      static_cast<std::int64_t>(shapes[longer.front()][i].strides()[d]);
                    if (grow % span != 0) return refuse("its stride " + std::to_string(d) + " is not a * extent + b");
                    step = grow / span;
                }
                stride_steps.push_back(step);
            }
            for (std::size_t k = 0; k < probes.size(); ++k) {
                const auto expected = strides_at(at_max, stride_steps, probes[last] - probes[k]);
                for (std::size_t d = 0; d < at_max.ndim(); ++d)
                    if (shapes[k][i].lens()[d] > 1 && expected[d] != shapes[k][i].strides()[d])
                        return refuse("its strides are not a * extent + b");
            }
        }
        plan.stride_steps_.push_back(std::move(stride_steps));
        plan.varying_.push_back(varies);
        plan.at_max_.push_back(at_max);
        ++i;
    }
    return plan;
}

std::size_t extent_plan::extent_of(const parameter_map& inputs) const {
    auto length = [&](const input_dimension& d) { return inputs.at(d.name).get_shape().lens().at(d.dim); };
    const std::size_t e = length(dims_[0]);
    for (const auto& d : dims_)
        if (length(d) != e)
            fail("input " + dimension_name(dims_[0]) + " is " + std::to_string(e) + " and input " + dimension_name(d) +
                 " is " + std::to_string(length(d)) +
                 ": the program was compiled for them being one length (one dynamic range)");
    if (e < min_ || e > max_)
        fail("input " + dimension_name(dims_[0]) + " is " + std::to_string(e) + ", outside the range " +
             std::to_string(min_) + ".." + std::to_string(max_) + " the program was compiled for");
    return e;
}

bool extent_plan::serves(const parameter_lens& lens) const {
    auto length = [&](const input_dimension& d) {
        auto it = lens.find(d.name);
        return it == lens.end() || d.dim >= it->second.size() ? std::size_t{0} : it->second[d.dim];
    };
    for (const auto& d : dims_)
        if (length(d) != length(dims_[0])) return false;
    return length(dims_[0]) >= min_ && length(dims_[0]) <= max_;
}

std::vector<shape> extent_plan::shapes_at(std::size_t e) const {
    std::vector<shape> out;
    out.reserve(at_max_.size());
    for (std::size_t i = 0; i < at_max_.size(); ++i) {
        const shape& s = at_max_[i];
        if (!varying_[i]) {
            out.push_back(s);
            continue;
        }
        auto lens = s.lens();
        lens[varying_[i]->dim] =
            static_cast<std::size_t>(varying_[i]->scale * static_cast<std::int64_t>(e) + varying_[i]->offset);
        if (s.standard()) {
            out.emplace_back(s.type(), std::move(lens));
            continue;
        }
        out.emplace_back(s.type(), std::move(lens), strides_at(s, stride_steps_[i], max_ - e));
    }
    return out;
}

run_time_extent_executable::run_time_extent_executable(std::shared_ptr<const executable> inner, extent_plan plan,
                                                       std::map<std::string, shape> parameters)
    : inner_(std::move(inner)),
      runner_(dynamic_cast<const runs_at_extents*>(inner_.get())),
      plan_(std::move(plan)),
      parameters_(std::move(parameters)) {
    if (runner_ == nullptr) fail(error_kind::runtime, "run_time_extent_executable: the executable cannot run at run-time extents");
}

std::vector<argument> run_time_extent_executable::run_at(const parameter_map& inputs, std::vector<step_timing>* timings,
                                                         const step_observer* observe) const {
    return runner_->run_with_shapes(inputs, plan_.shapes_at(plan_.extent_of(inputs)), timings, observe);
}

std::vector<argument> run_time_extent_executable::run(const parameter_map& inputs) const {
    return run_at(inputs, nullptr, nullptr);
}

std::vector<argument> run_time_extent_executable::run_profiled(const parameter_map& inputs,
                                                               std::vector<step_timing>& timings) const {
    return run_at(inputs, &timings, nullptr);
}

std::vector<argument> run_time_extent_executable::run_observed(const parameter_map& inputs,
                                                               const step_observer& observe) const {
    return run_at(inputs, nullptr, &observe);
}

}  // namespace kiln
