// Per-layer quantization noise: a quantized program against the float32
// program it stands for (see verify_quantization in kiln/verify.hpp).
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <numeric>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "kiln/builtin_ops.hpp"
#include "kiln/op_registry.hpp"
#include "kiln/target.hpp"
#include "kiln/verify.hpp"
#include "ops/quant.hpp"
#include "targets/ref/ref_target.hpp"

namespace kiln {

namespace {

bool is_quantize(const instruction& ins) {
    return ins.name() == "quantize_linear";
}
bool is_dequantize(const instruction& ins) {
    return ins.name() == "dequantize_linear";
}

bool equal_literals(const literal& a, const literal& b) {
    const argument x = a.get_argument(), y = b.get_argument();
    if (x.get_shape().type() != y.get_shape().type() || x.get_shape().lens() != y.get_shape().lens()) return false;
    for (std::size_t i = 0; i < x.get_shape().elements(); ++i)
        if (x.value_at(i) != y.value_at(i)) return false;
    return true;
}

// Whether two instructions hold the same values by construction: the same
// instruction, equal literals, or the same op applied to such inputs (an
// importer converts or reshapes a shared scale once per use).
bool same_value(const instruction& a, const instruction& b, int depth = 0) {
    if (&a == &b) return true;
    if (a.is_literal() && b.is_literal()) return equal_literals(a.get_literal(), b.get_literal());
    if (depth > 8 || a.is_param() || b.is_param() || a.is_literal() || b.is_literal()) return false;
    if (a.get_operator() != b.get_operator() || a.inputs().size() != b.inputs().size() || !a.module_inputs().empty() ||
        !b.module_inputs().empty())
        return false;
    for (std::size_t i = 0; i < a.inputs().size(); ++i)
        if (!same_value(*a.inputs()[i], *b.inputs()[i], depth + 1)) return false;
    return true;
}

// dequantize_linear(quantize_linear(x, s, z), s, z): returns x, or nullptr
// when `dq` is not such a pair.
const instruction* simulated_quantization_source(const instruction& dq) {
    if (!is_dequantize(dq) || dq.inputs().empty()) return nullptr;
    const instruction& q = *dq.inputs()[0];
    if (!is_quantize(q) || q.inputs().size() != dq.inputs().size()) return nullptr;
    const bool per_tensor = q.inputs()[1]->get_shape().elements() <= 1;
    const auto* qop = q.get_operator().get_if<op::quantize_linear>();
    const auto* dqop = dq.get_operator().get_if<op::dequantize_linear>();
    if (qop == nullptr || dqop == nullptr || (!per_tensor && qop->axis != dqop->axis)) return nullptr;
    for (std::size_t i = 1; i < dq.inputs().size(); ++i)
        if (!same_value(*q.inputs()[i], *dq.inputs()[i])) return nullptr;
    return &*q.inputs()[0];
}

// Whether the pair's quantized range starts at zero (its zero point is the
// smallest value of its type): it then clamps negatives to 0 as a relu does,
// and ONNX Runtime's quantizer drops the Relu (or Clip at 0) it folds into
// such a pair, so the float32 program it stands for has max(x, 0) there.
bool clamps_at_zero(const instruction& dq) {
    const instruction& q = *dq.inputs()[0];
    if (q.inputs().size() < 3) return q.get_shape().type() == dtype::uint8_type;
    const instruction& zero_point = *q.inputs()[2];
    if (!zero_point.is_literal()) return false;
    const argument z = zero_point.get_literal().get_argument();
    const double lowest = z.get_shape().type() == dtype::uint8_type  ? 0.0
                          : z.get_shape().type() == dtype::int8_type ? -128.0
                                                                     : std::numeric_limits<double>::quiet_NaN();
    for (std::size_t i = 0; i < z.get_shape().elements(); ++i)
        if (z.value_at(i) != lowest) return false;
    return true;
}

// Instructions whose value depends on no parameter.
class constness {
public:
    bool operator()(const instruction& ins) {
        if (auto it = known_.find(&ins); it != known_.end()) return it->second;
        bool c = !ins.is_param() && ins.module_inputs().empty();
        for (const auto& in : ins.inputs())
            if (c && !(*this)(*in)) c = false;
        known_[&ins] = c;
        return c;
    }

private:
    std::unordered_map<const instruction*, bool> known_;
};

bool is_layer(const instruction& ins, constness& constant) {
    if (ins.is_param() || ins.is_literal() || ins.is_return() || is_quantize(ins) || is_dequantize(ins)) return false;
    if (!ins.module_inputs().empty() || constant(ins)) return false;
    return std::any_of(ins.inputs().begin(), ins.inputs().end(), [](const auto& in) { return is_dequantize(*in); });
}

// A layer and the instructions after it made from the same node (a
// convolution and its bias add): each the only user of the one before, with
// the same origin. The last one's value is the node's output.
std::vector<const instruction*> node_instructions(const instruction& layer) {
    std::vector<const instruction*> chain{&layer};
    if (layer.origin().empty()) return chain;
    for (;;) {
        const instruction& last = *chain.back();
        if (last.outputs().size() != 1) break;
        const instruction& next = *last.outputs().front();
        if (next.origin() != layer.origin() || next.is_return() || is_quantize(next) || is_dequantize(next) ||
            !next.module_inputs().empty())
            break;
        chain.push_back(&next);
    }
    return chain;
}

// Each instruction of `from` and its copy in `to` (a module copied from it).
std::unordered_map<const instruction*, instruction_ref> pair_instructions(const module& from, module& to) {
    std::unordered_map<const instruction*, instruction_ref> copies;
    auto it = to.begin();
    for (const auto& ins : from) copies.emplace(&ins, it++);
    return copies;
}

// Removes what the bypassed pairs leave unused: quantize / dequantize and
// the literals only they read.
void remove_unused_quantization(module& m) {
    for (bool removed = true; removed;) {
        removed = false;
        for (auto it = m.begin(); it != m.end();) {
            auto next = std::next(it);
            if (it->outputs().empty() && (is_quantize(*it) || is_dequantize(*it) || it->is_literal())) {
                m.remove_instruction(it);
                removed = true;
            }
            it = next;
        }
    }
}

std::unique_ptr<module> float_counterpart_of(const module& quantized,
                                             std::unordered_map<const instruction*, instruction_ref>& copies) {
    auto f = std::make_unique<module>(quantized);
    copies = pair_instructions(quantized, *f);
    for (const auto& ins : quantized) {
        const instruction* source = simulated_quantization_source(ins);
        if (source == nullptr) continue;
        instruction_ref dq = copies.at(&ins), x = copies.at(source);
        if (clamps_at_zero(ins) && !source->is_literal()) x = f->insert_instruction(dq, make_op("relu"), {x});
        f->replace_all_uses(dq, x);
    }
    remove_unused_quantization(*f);
    return f;
}

// Signal and noise power summed over every compared element.
struct noise_power {
    double signal = 0;
    double noise = 0;
    void add(const argument& got, const argument& expected) {
        if (got.get_shape().lens() != expected.get_shape().lens())
            fail(error_kind::runtime, "verify_quantization: a quantized value has shape " + to_string(got.get_shape()) +
                                          ", its float32 counterpart " + to_string(expected.get_shape()));
        const std::size_t n = expected.get_shape().elements();
        for (std::size_t i = 0; i < n; ++i) {
            const double f = expected.value_at(i), d = got.value_at(i) - f;
            signal += f * f;
            noise += std::isnan(d) ? std::numeric_limits<double>::infinity() : d * d;
        }
    }
    double db() const {
        if (noise == 0) return std::numeric_limits<double>::infinity();
        return 10 * std::log10(signal / noise);
    }
};

// One module evaluated on ref, or compiled for a target, keeping the values
// of chosen instructions beside its outputs.
class recording_run {
public:
    recording_run(const module& m, const std::vector<const instruction*>& kept, const target* t)
        : module_(m), kept_(kept), on_target_(t != nullptr) {
        if (!on_target_) return;
        if (std::any_of(m.begin(), m.end(), [](const auto& ins) { return !ins.module_inputs().empty(); }))
            fail(error_kind::not_implemented,
                 "verify_quantization on a target: control flow in the main module is not supported; use ref");
        module& copy = *compiled_.get_main_module();
        copy = m;
        auto copies = pair_instructions(m, copy);
        auto ret = copy.get_return();
        std::vector<instruction_ref> outputs = ret->inputs();
        outputs_ = outputs.size();
        for (const instruction* k : kept_) outputs.push_back(copies.at(k));
        copy.remove_instruction(ret);
        copy.add_return(outputs);
        compiled_.compile(*t);
    }

    // The kept values in order, then the outputs.
    std::vector<argument> operator()(const parameter_map& inputs) const {
        if (on_target_) {
            std::vector<argument> all = compiled_.eval(inputs);
            std::vector<argument> out(all.begin() + static_cast<std::ptrdiff_t>(outputs_), all.end());
            out.insert(out.end(), all.begin(), all.begin() + static_cast<std::ptrdiff_t>(outputs_));
            return out;
        }
        std::unordered_map<const instruction*, argument> seen;
        std::unordered_set<const instruction*> wanted(kept_.begin(), kept_.end());
        auto outputs =
            evaluate_module(module_, check_inputs(module_, inputs), [&](const instruction& ins, const argument& v) {
                if (wanted.count(&ins)) seen[&ins] = v.copy();
            });
        std::vector<argument> out;
        for (const instruction* k : kept_) out.push_back(seen.at(k));
        out.insert(out.end(), outputs.begin(), outputs.end());
        return out;
    }

private:
    const module& module_;
    std::vector<const instruction*> kept_;
    bool on_target_;
    program compiled_;
    std::size_t outputs_ = 0;
};

// One quantized layer on its own: its quantize / dequantize chains and
// constants copied, every other value it reads a parameter ("in0", ...)
// bound to the float32 program's value.
struct isolated_layer {
    module m{"main"};                       // the name a program's main module has: a target may compile it
    std::vector<const instruction*> bound;  // per parameter: the quantized module's instruction it stands for
};

class layer_isolator {
public:
    explicit layer_isolator(constness& constant) : constant_(constant) {}

    // `chain`: node_instructions of the layer.
    isolated_layer isolate(const std::vector<const instruction*>& chain) {
        isolated_layer out;
        copies_.clear();
        instruction_ref last;
        for (const instruction* ins : chain) {
            std::vector<instruction_ref> inputs;
            for (const auto& in : ins->inputs()) inputs.push_back(copy(*in, out));
            last = out.m.add_instruction(ins->get_operator(), inputs);
            copies_.emplace(ins, last);
        }
        out.m.add_return({last});
        return out;
    }

private:
    instruction_ref copy(const instruction& ins, isolated_layer& out) {
        if (auto it = copies_.find(&ins); it != copies_.end()) return it->second;
        instruction_ref c;
        if (ins.is_literal()) {
            c = out.m.add_literal(ins.get_literal());
        } else if (is_quantize(ins) || is_dequantize(ins) || constant_(ins)) {
            std::vector<instruction_ref> inputs;
            for (const auto& in : ins.inputs()) inputs.push_back(copy(*in, out));
            c = out.m.add_instruction(ins.get_operator(), inputs);
        } else {
            const shape& s = ins.get_shape();
            c = out.m.add_parameter("in" + std::to_string(out.bound.size()), shape(s.type(), s.lens()));
            out.bound.push_back(&ins);
        }
        copies_.emplace(&ins, c);
        return c;
    }

    constness& constant_;
    std::unordered_map<const instruction*, instruction_ref> copies_;
};

std::string format_db(double db) {
    if (std::isinf(db)) return db > 0 ? "inf" : "-inf";
    std::ostringstream os;
    os << std::fixed << std::setprecision(1) << db;
    return os.str();
}

}  // namespace

std::unique_ptr<module> float_counterpart(const module& quantized) {
    std::unordered_map<const instruction*, instruction_ref> copies;
    return float_counterpart_of(quantized, copies);
}

std::vector<std::size_t> quantization_report::worst(std::size_t n) const {
    std::vector<std::size_t> order(layers.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return layers[a].own_sqnr_db < layers[b].own_sqnr_db; });
    order.resize(std::min(n, order.size()));
    return order;
}

quantization_report verify_quantization(const program& quantized, const std::vector<parameter_map>& inputs,
                                        const target* t) {
    if (inputs.empty()) fail("verify_quantization: no inputs; give at least one set");
    const module& q = *quantized.get_main_module();
    if (std::none_of(q.begin(), q.end(), is_dequantize))
        fail("verify_quantization: the program holds no dequantize_linear, so it is not quantized");

    std::unordered_map<const instruction*, instruction_ref> to_float;
    auto f = float_counterpart_of(q, to_float);
    constness constant;
    layer_isolator isolator(constant);
    const auto names = q.instruction_names();

    quantization_report r;
    r.evaluated_on = t == nullptr ? "ref" : t->name();
    r.samples = inputs.size();
    std::vector<const instruction*> layers;
    std::vector<isolated_layer> isolated;
    // A bias add reading a dequantized int32 bias belongs to the layer before it.
    std::unordered_set<const instruction*> in_a_layer;
    for (const auto& ins : q) {
        if (in_a_layer.count(&ins) != 0 || !is_layer(ins, constant)) continue;
        const auto chain = node_instructions(ins);
        in_a_layer.insert(chain.begin(), chain.end());
        layers.push_back(chain.back());
        isolated.push_back(isolator.isolate(chain));
        r.layers.push_back(
            {names.at(&ins), ins.origin(), to_string(ins.get_operator()), chain.back()->get_shape(), 0, 0});
    }

    // The float32 run keeps each layer's value, then every value an isolated layer reads.
    std::vector<const instruction*> float_kept;
    for (const instruction* l : layers) float_kept.push_back(&*to_float.at(l));
    std::unordered_map<const instruction*, std::size_t> float_slot;
    for (const auto& iso : isolated)
        for (const instruction* b : iso.bound)
            if (float_slot.emplace(b, float_kept.size()).second) float_kept.push_back(&*to_float.at(b));

    recording_run float_run(*f, float_kept, t);
    recording_run quantized_run(q, layers, t);
    std::vector<std::unique_ptr<recording_run>> isolated_runs;
    for (const auto& iso : isolated)
        isolated_runs.push_back(std::make_unique<recording_run>(iso.m, std::vector<const instruction*>{}, t));

    std::vector<noise_power> cumulative(layers.size()), own(layers.size()), outputs;
    for (const auto& sample : inputs) {
        const auto expected = float_run(sample);
        const auto got = quantized_run(sample);
        for (std::size_t i = 0; i < layers.size(); ++i) {
            cumulative[i].add(got[i], expected[i]);
            parameter_map bound;
            for (std::size_t k = 0; k < isolated[i].bound.size(); ++k)
                bound["in" + std::to_string(k)] = expected[float_slot.at(isolated[i].bound[k])];
            own[i].add((*isolated_runs[i])(bound).at(0), expected[i]);
        }
        const std::size_t n_out = got.size() - layers.size();
        outputs.resize(n_out);
        for (std::size_t o = 0; o < n_out; ++o) outputs[o].add(got[layers.size() + o], expected[float_kept.size() + o]);
    }
    for (std::size_t i = 0; i < layers.size(); ++i) {
        r.layers[i].sqnr_db = cumulative[i].db();
        r.layers[i].own_sqnr_db = own[i].db();
    }
    for (const auto& o : outputs) r.output_sqnr_db.push_back(o.db());
    return r;
}

std::string format_quantization_report(const quantization_report& r, std::size_t worst) {
    std::ostringstream os;
    os << "Quantization noise against the float32 program (" << r.samples << " input set" << (r.samples == 1 ? "" : "s")
       << ", on " << r.evaluated_on << "), SQNR in dB:\n";
    for (std::size_t o = 0; o < r.output_sqnr_db.size(); ++o)
        os << "  output " << o << ": " << format_db(r.output_sqnr_db[o]) << "\n";
    os << "  " << std::left << std::setw(8) << "layer" << std::setw(20) << "op" << std::right << std::setw(8) << "SQNR"
       << std::setw(8) << "own"
       << "  origin\n";
    for (const auto& l : r.layers) {
        std::string op = l.op.substr(0, l.op.find('['));
        os << "  " << std::left << std::setw(8) << l.instruction << std::setw(20) << op << std::right << std::setw(8)
           << format_db(l.sqnr_db) << std::setw(8) << format_db(l.own_sqnr_db) << "  "
           << (l.origin.empty() ? "-" : l.origin) << "\n";
    }
    os << "(SQNR: the layer's output in the quantized program; own: the layer alone, its quantized inputs taken "
          "from the float32 program)\n";
    const auto order = r.worst(worst);
    if (!order.empty()) {
        os << "Worst layers (lowest own SQNR):";
        for (std::size_t k = 0; k < order.size(); ++k) {
            const auto& l = r.layers[order[k]];
            os << (k ? ", " : " ") << (l.origin.empty() ? l.instruction : l.origin + " (" + l.instruction + ")") << " "
               << format_db(l.own_sqnr_db) << " dB";
        }
        os << "\n";
    }
    return os.str();
}

}  // namespace kiln
