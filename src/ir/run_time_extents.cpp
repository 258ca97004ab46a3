#include "ir/run_time_extents.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "ir/view_offset.hpp"

namespace kiln {

namespace {

// Strides that matter: those of dimensions longer than one.
bool same_strides_where_it_matters(const shape& a, const shape& b) {
    if (a.ndim() != b.ndim()) return false;
    for (std::size_t j = 0; j < a.ndim(); ++j)
        if (a.lens()[j] > 1 && b.lens()[j] > 1 && a.strides()[j] != b.strides()[j]) return false;
    return true;
}

// The strides of `at_max` at `extents`, each stride stride_steps[d][j]
// shorter per unit extent j is below its maximum (none: as at the maximum).
std::vector<std::size_t> strides_at(const shape& at_max, const std::vector<std::vector<std::int64_t>>& stride_steps,
                                    const extent_lengths& extents, const std::vector<extent_range>& ranges) {
    std::vector<std::size_t> out = at_max.strides();
    for (std::size_t d = 0; d < stride_steps.size(); ++d) {
        auto stride = static_cast<std::int64_t>(out[d]);
        for (std::size_t j = 0; j < stride_steps[d].size(); ++j)
            stride -= stride_steps[d][j] * static_cast<std::int64_t>(ranges[j].max - extents[j]);
        out[d] = static_cast<std::size_t>(stride);
    }
    return out;
}

std::string dimension_name(const input_dimension& d) {
    return "'" + d.name + "' dimension " + std::to_string(d.dim);
}

std::string extents_text(const extent_lengths& e) {
    return e.size() == 1 ? std::to_string(e[0]) : to_string(e);
}

// The one extent `probe` sets below its maximum, if exactly one.
std::optional<std::size_t> the_extent_below_max(const extent_lengths& probe, const std::vector<extent_range>& ranges) {
    std::optional<std::size_t> below;
    for (std::size_t j = 0; j < probe.size(); ++j) {
        if (probe[j] == ranges[j].max) continue;
        if (below) return std::nullopt;
        below = j;
    }
    return below;
}

}  // namespace

std::vector<extent_lengths> extent_plan::probe_extents(const std::vector<extent_range>& ranges) {
    extent_lengths all_min, all_max;
    for (const auto& r : ranges) {
        all_min.push_back(r.min);
        all_max.push_back(r.max);
    }
    std::vector<extent_lengths> out{all_min};
    for (std::size_t j = 0; j < ranges.size(); ++j)
        for (const std::size_t e : {ranges[j].min, ranges[j].min + (ranges[j].max - ranges[j].min) / 2}) {
            extent_lengths probe = all_max;
            probe[j] = e;
            if (std::find(out.begin(), out.end(), probe) == out.end() && probe != all_max) out.push_back(probe);
        }
    out.push_back(all_max);
    if (out.front() == out.back()) out.pop_back();
    return out;
}

std::vector<input_dimension> extent_dimensions(const std::map<std::string, shape>& parameters,
                                               std::vector<extent_range>& ranges, std::string& why) {
    struct found {
        input_dimension dim;
        dynamic_dimension range;
    };
    std::vector<found> all;
    for (const auto& [name, s] : parameters) {
        if (!s.dynamic()) continue;
        const auto dims = s.dyn_dims();
        for (std::size_t d = 0; d < dims.size(); ++d)
            if (!dims[d].is_fixed()) {
                found f;
                f.dim.name = name;
                f.dim.dim = d;
                f.range = dims[d];
                all.push_back(std::move(f));
            }
    }
    if (all.empty()) {
        why = "the program has no dynamic dimension";
        return {};
    }
    // Dimensions of one range are one extent; a run where they differ
    // compiles on its own (extent_plan::serves), so dimensions that only
    // share a range by chance lose nothing but the single compile. Two of
    // one input are two extents, told apart (in every input) by position.
    auto same_range = [](const dynamic_dimension& a, const dynamic_dimension& b) {
        return a.min == b.min && a.max == b.max;
    };
    auto by_position = [&](const dynamic_dimension& range) {
        for (const auto& a : all)
            for (const auto& b : all)
                if (&a != &b && a.dim.name == b.dim.name && same_range(a.range, range) && same_range(b.range, range))
                    return true;
        return false;
    };
    std::vector<found> extents;  // each extent's first dimension
    std::vector<input_dimension> out;
    ranges.clear();
    for (auto f : all) {
        const bool positional = by_position(f.range);
        std::size_t e = 0;
        while (e < extents.size() &&
               !(same_range(extents[e].range, f.range) && (!positional || extents[e].dim.dim == f.dim.dim)))
            ++e;
        if (e == extents.size()) {
            extents.push_back(f);
            ranges.push_back({f.range.min, f.range.max});
        }
        f.dim.extent = e;
        out.push_back(f.dim);
    }
    return out;
}

std::optional<extent_plan> extent_plan::derive(const module& compiled,
                                               const std::map<std::string, shape>& dynamic_parameters, std::string& why,
                                               const std::vector<const module*>& literals_at_probes) {
    extent_plan plan;
    plan.dims_ = extent_dimensions(dynamic_parameters, plan.ranges_, why);
    if (plan.dims_.empty()) return std::nullopt;
    const auto& ranges = plan.ranges_;
    // The extent dimensions of parameter `name`.
    auto extent_dims_of = [&](const std::string& name) {
        std::vector<input_dimension> out;
        for (const auto& d : plan.dims_)
            if (d.name == name) out.push_back(d);
        return out;
    };
    const auto names = compiled.instruction_names();
    const auto probes = probe_extents(ranges);
    const std::size_t last = probes.size() - 1;  // every extent at its maximum
    if (!literals_at_probes.empty() && literals_at_probes.size() != probes.size())
        fail("extent_plan::derive: " + std::to_string(literals_at_probes.size()) + " modules for " +
             std::to_string(probes.size()) + " probes");
    // Each instruction's shape, by position, in the module optimised at all
    // minima and at each extent's middle (the others at their maxima), where given.
    auto shapes_in = [](const module* m) {
        std::vector<shape> out;
        if (m != nullptr)
            for (const auto& ins : *m) out.push_back(ins.get_shape());
        return out;
    };
    const auto at_all_min = shapes_in(literals_at_probes.empty() ? nullptr : literals_at_probes.front());
    std::vector<std::vector<shape>> at_middle(ranges.size());
    for (std::size_t k = 0; k < probes.size() && !literals_at_probes.empty(); ++k)
        if (const auto j = the_extent_below_max(probes[k], ranges); j && probes[k][*j] != ranges[*j].min)
            at_middle[*j] = shapes_in(literals_at_probes[k]);
    // A literal's lengths at probe k where no module was optimised there:
    // each length that varies follows the one extent whose middle module
    // shows it, and is the all-minimum module's where the probe sets that
    // extent to its minimum.
    auto literal_lens_at = [&](std::size_t k, std::size_t position, const instruction& literal) {
        const auto& largest = literal.get_shape().lens();
        auto lens = largest;
        if (at_all_min.empty()) return lens;
        const auto& smallest = at_all_min[position].lens();
        for (std::size_t d = 0; d < lens.size(); ++d) {
            if (smallest[d] == largest[d]) continue;
            for (std::size_t j = 0; j < ranges.size(); ++j)
                if (!at_middle[j].empty() && probes[k][j] == ranges[j].min &&
                    at_middle[j][position].lens()[d] != largest[d])
                    lens[d] = smallest[d];
        }
        return lens;
    };
    // shapes[k][i]: instruction i's shape at probe k.
    std::vector<std::vector<shape>> shapes(probes.size());
    // view_offsets[k][v]: view v's byte offset in its source at probe k.
    std::vector<std::unordered_map<const instruction*, std::ptrdiff_t>> view_offsets(probes.size());
    for (std::size_t k = 0; k < probes.size(); ++k) {
        std::unordered_map<const instruction*, std::size_t> index;
        const module* literals = literals_at_probes.empty() ? nullptr : literals_at_probes[k];
        if (literals != nullptr && literals->size() != compiled.size())
            fail("extent_plan::derive: the module at extents " + extents_text(probes[k]) + " is another graph");
        auto at_probe = literals != nullptr ? literals->begin() : compiled.end();
        std::size_t position = 0;
        for (const auto& ins : compiled) {
            const auto* same_at_probe = literals != nullptr ? &*at_probe++ : nullptr;
            shape s = ins.get_shape();
            const auto extent_dims = ins.is_param() ? extent_dims_of(ins.param_name()) : std::vector<input_dimension>{};
            if (!extent_dims.empty()) {
                auto lens = s.lens();
                for (const auto& d : extent_dims) {
                    if (d.dim >= lens.size() || lens[d.dim] != ranges[d.extent].max || !s.standard()) {
                        why = "input '" + ins.param_name() + "' is " + to_string(s) + " in the compiled program";
                        return std::nullopt;
                    }
                    lens[d.dim] = probes[k][d.extent];
                }
                s = shape(s.type(), lens);
            } else if (ins.is_literal()) {
                s = same_at_probe != nullptr ? same_at_probe->get_shape()
                                             : shape(s.type(), literal_lens_at(k, position, ins));
            } else if (!ins.is_param() && !ins.is_return()) {
                std::vector<shape> inputs;
                for (const auto& in : ins.inputs()) inputs.push_back(shapes[k][index.at(&*in)]);
                try {
                    s = ins.get_operator().compute_shape(inputs, ins.module_inputs());
                    if (auto offset = view_byte_offset(ins.get_operator(), inputs, s)) view_offsets[k][&ins] = *offset;
                } catch (const error& e) {
                    why = names.at(&ins) + " = " + ins.name() + " has no shape at extents " + extents_text(probes[k]) +
                          ": " + e.what();
                    return std::nullopt;
                }
            }
            index[&ins] = shapes[k].size();
            shapes[k].push_back(std::move(s));
            ++position;
        }
    }
    std::size_t i = 0;
    for (const auto& ins : compiled) {
        const shape& at_max = shapes[last][i];
        if (ins.is_return()) {  // its shape (the outputs', as a tuple when several) is not a value
            plan.stride_steps_.emplace_back();
            plan.varying_.emplace_back();
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
        for (std::size_t k = 0; k < probes.size(); ++k)
            if (shapes[k][i].type() != at_max.type() || shapes[k][i].ndim() != at_max.ndim())
                return refuse("its dtype or rank changes");
        // Each length is fixed or follows one extent: the probes that set
        // one extent below its maximum say which, and every probe checks a * e + b.
        std::vector<varying_dimension> varies;
        for (std::size_t d = 0; d < at_max.ndim(); ++d) {
            std::optional<std::size_t> follows;
            for (std::size_t k = 0; k < last; ++k) {
                const auto j = the_extent_below_max(probes[k], ranges);
                if (!j || shapes[k][i].lens()[d] == at_max.lens()[d]) continue;
                if (follows && *follows != *j)
                    return refuse("its dimension " + std::to_string(d) + " follows two extents");
                follows = j;
            }
            if (!follows) continue;
            const std::size_t j = *follows;
            std::size_t lowest = 0;  // the probe that sets extent j to its minimum, the others at their maxima
            while (the_extent_below_max(probes[lowest], ranges) != j || probes[lowest][j] != ranges[j].min) ++lowest;
            const auto grow =
                static_cast<std::int64_t>(at_max.lens()[d]) - static_cast<std::int64_t>(shapes[lowest][i].lens()[d]);
            const auto span = static_cast<std::int64_t>(ranges[j].max - ranges[j].min);
            if (grow <= 0 || grow % span != 0)
                return refuse("its dimension " + std::to_string(d) + " does not grow in steps of the extent");
            varying_dimension v{d, grow / span, 0, j, false};
            v.offset = static_cast<std::int64_t>(at_max.lens()[d]) - v.scale * static_cast<std::int64_t>(ranges[j].max);
            varies.push_back(v);
        }
        for (std::size_t k = 0; k < probes.size(); ++k) {
            const shape& s = shapes[k][i];
            auto expected = at_max.lens();
            for (const auto& v : varies)
                expected[v.dim] =
                    static_cast<std::size_t>(v.scale * static_cast<std::int64_t>(probes[k][v.extent]) + v.offset);
            if (s.lens() != expected)
                return refuse("its lengths are not a * extent + b at extents " + extents_text(probes[k]));
            // The value at smaller extents lies in the buffer planned for the
            // maximum, laid out alike; a view where the reader finds it.
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
            if (varies.empty() || ins.is_literal()) return refuse("its strides change with the extent");
            for (auto& v : varies) v.moves_strides = true;
        }
        // Strides that change follow each extent as a * e + b too (a dense
        // layout's are products of lengths). A dimension of length 1 has no
        // stride that matters.
        std::vector<std::vector<std::int64_t>> stride_steps;
        if (!varies.empty() && varies.front().moves_strides && !at_max.standard()) {
            stride_steps.assign(at_max.ndim(), std::vector<std::int64_t>(ranges.size(), 0));
            for (std::size_t d = 0; d < at_max.ndim(); ++d) {
                if (at_max.lens()[d] <= 1) continue;
                for (std::size_t k = 0; k < last; ++k) {
                    const auto j = the_extent_below_max(probes[k], ranges);
                    if (!j || shapes[k][i].lens()[d] <= 1) continue;
                    const auto span = static_cast<std::int64_t>(ranges[*j].max - probes[k][*j]);
                    const auto grow = static_cast<std::int64_t>(at_max.strides()[d]) -
                                      static_cast<std::int64_t>(shapes[k][i].strides()[d]);
                    if (grow % span != 0) return refuse("its stride " + std::to_string(d) + " is not a * extent + b");
                    stride_steps[d][*j] = grow / span;
                }
            }
            for (std::size_t k = 0; k < probes.size(); ++k) {
                const auto expected = strides_at(at_max, stride_steps, probes[k], ranges);
                for (std::size_t d = 0; d < at_max.ndim(); ++d)
                    if (shapes[k][i].lens()[d] > 1 && expected[d] != shapes[k][i].strides()[d])
                        return refuse("its strides are not a * extent + b");
            }
        }
        plan.stride_steps_.push_back(std::move(stride_steps));
        plan.varying_.push_back(std::move(varies));
        plan.at_max_.push_back(at_max);
        ++i;
    }
    return plan;
}

std::vector<std::optional<varying_dimension>> extent_plan::varying_by_value() const {
    std::vector<std::optional<varying_dimension>> out;
    for (const auto& v : varying_) {
        if (v.empty()) {
            out.emplace_back();
            continue;
        }
        varying_dimension first = v.front();
        if (v.size() > 1 || ranges_.size() > 1) first.moves_strides = true;
        out.push_back(first);
    }
    return out;
}

extent_lengths extent_plan::extents_of(const parameter_map& inputs) const {
    auto length = [&](const input_dimension& d) { return inputs.at(d.name).get_shape().lens().at(d.dim); };
    extent_lengths out(ranges_.size(), 0);
    std::vector<const input_dimension*> first(ranges_.size(), nullptr);
    for (const auto& d : dims_) {
        const std::size_t e = length(d);
        if (first[d.extent] == nullptr) {
            first[d.extent] = &d;
            out[d.extent] = e;
            const auto& range = ranges_[d.extent];
            if (e < range.min || e > range.max)
                fail("input " + dimension_name(d) + " is " + std::to_string(e) + ", outside the range " +
                     std::to_string(range.min) + ".." + std::to_string(range.max) + " the program was compiled for");
        } else if (e != out[d.extent]) {
            fail("input " + dimension_name(*first[d.extent]) + " is " + std::to_string(out[d.extent]) + " and input " +
                 dimension_name(d) + " is " + std::to_string(e) +
                 ": the program was compiled for them being one length (one dynamic range)");
        }
    }
    return out;
}

bool extent_plan::serves(const parameter_lens& lens) const {
    auto length = [&](const input_dimension& d) {
        auto it = lens.find(d.name);
        return it == lens.end() || d.dim >= it->second.size() ? std::size_t{0} : it->second[d.dim];
    };
    std::vector<std::optional<std::size_t>> seen(ranges_.size());
    for (const auto& d : dims_) {
        const std::size_t e = length(d);
        if (seen[d.extent] && *seen[d.extent] != e) return false;
        seen[d.extent] = e;
        if (e < ranges_[d.extent].min || e > ranges_[d.extent].max) return false;
    }
    return true;
}

std::vector<shape> extent_plan::shapes_at(const extent_lengths& extents) const {
    std::vector<shape> out;
    out.reserve(at_max_.size());
    for (std::size_t i = 0; i < at_max_.size(); ++i) {
        const shape& s = at_max_[i];
        if (varying_[i].empty()) {
            out.push_back(s);
            continue;
        }
        auto lens = s.lens();
        for (const auto& v : varying_[i])
            lens[v.dim] = static_cast<std::size_t>(v.scale * static_cast<std::int64_t>(extents[v.extent]) + v.offset);
        if (s.standard()) {
            out.emplace_back(s.type(), std::move(lens));
            continue;
        }
        out.emplace_back(s.type(), std::move(lens), strides_at(s, stride_steps_[i], extents, ranges_));
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
    return runner_->run_with_shapes(inputs, plan_.shapes_at(plan_.extents_of(inputs)), timings, observe);
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
