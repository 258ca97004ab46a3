// Constant propagation: the parts of the graph computed only from literals
// are evaluated once, at compile time, with each op's reference compute.
//
// Only the frontier of a constant subgraph (the constants that feed
// non-constant instructions) becomes a literal; the interior dies with it.
// A frontier that is not worth storing stays as it is and its inputs are
// considered instead: results above max_bytes, results that are larger than
// small_bytes and than the literals they are computed from (a broadcast or
// an outer product of small constants), views that only expand a constant
// (broadcast) and views of a literal that other instructions also use
// (folding would store the same data twice). Results with non-standard
// strides stay too: a literal is standard, and users of a strided value
// may depend on its strides.
//
// A frontier computed by this pass object before, from the same literals'
// bytes by the same ops, takes that value instead of computing it again
// (passes/shared_derived_values.hpp).
//
// A constant (a literal, or a frontier) that repeats along a dimension its
// pointwise readers broadcast anyway is stored once along it
// (passes/repeated_constants.hpp), whether or not it would be worth storing
// whole.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "kiln/op_registry.hpp"
#include "kiln/passes.hpp"
#include "passes/matcher.hpp"
#include "passes/narrowed_value.hpp"
#include "passes/repeated_constants.hpp"
#include "passes/rewriter.hpp"
#include "passes/shared_derived_values.hpp"

namespace kiln {

namespace {

using instruction_set = std::unordered_set<const instruction*>;

instruction_set find_constants(const module& m, bool fold_dequantize) {
    instruction_set constant;
    for (const auto& ins : m) {
        if (ins.is_literal()) {
            constant.insert(&ins);
            continue;
        }
        if (ins.is_param() || ins.is_return() || !ins.module_inputs().empty() ||
            match::is_nondeterministic(ins.get_operator()))
            continue;
        if (!fold_dequantize && ins.name() == "dequantize_linear") continue;
        bool all = true;
        for (const auto& in : ins.inputs()) all = all && constant.count(&*in) > 0;
        if (all) constant.insert(&ins);
    }
    return constant;
}

// Bytes of the distinct literals `ins` is computed from.
std::size_t source_literal_bytes(const instruction& ins) {
    std::size_t total = 0;
    std::vector<const instruction*> stack{&ins};
    instruction_set seen{&ins};
    while (!stack.empty()) {
        const instruction* cur = stack.back();
        stack.pop_back();
        if (cur->is_literal()) total += cur->get_shape().bytes();
        for (const auto& in : cur->inputs())
            if (seen.insert(&*in).second) stack.push_back(&*in);
    }
    return total;
}

// Whether `reader` computes a result of its lengths from inputs of `shapes`.
bool keeps_its_lengths(const instruction& reader, const std::vector<shape>& shapes) {
    try {
        return reader.get_operator().compute_shape(shapes).lens() == reader.get_shape().lens();
    } catch (const error&) {
        return false;
    }
}

class folder {
public:
    folder(module& m, const constant_propagation& options)
        : m_(m), options_(options), constant_(find_constants(m, options.fold_dequantize)) {
        narrowing_.is_constant = [this](const instruction& ins) { return constant_.count(&ins) > 0; };
        narrowing_.whole_value = [this](const instruction& ins) { return whole_value(ins); };
        narrowing_.max_bytes = options_.max_bytes;
    }

    void run() {
        choose_literals();
        std::vector<const instruction*> roots;
        for (auto c : chosen_)
            if (!folded_before(*c)) roots.push_back(&*c);
        evaluate(roots);
        remember_folded();
        replace_chosen();
        replace_narrowed();
        remove_dead_instructions(m_);
    }

private:
    bool is_folding_candidate(const instruction& ins) const { return !ins.is_literal() && constant_.count(&ins); }

    bool worth_storing(const instruction& ins) const {
        const shape& s = ins.get_shape();
        if (!s.standard() || s.bytes() > options_.max_bytes) return false;
        int alias = ins.get_operator().output_alias(ins.input_shapes());
        if (alias >= 0) {
            const instruction& source = *ins.inputs().at(static_cast<std::size_t>(alias));
            if (s.elements() > source.get_shape().elements()) return false;
            if (source.is_literal() && source.outputs().size() > 1) return false;
        }
        return s.bytes() <= options_.small_bytes || s.bytes() <= source_literal_bytes(ins);
    }

    void choose_literals() {
        std::vector<instruction_ref> candidates;
        instruction_set considered;
        for (auto it = m_.begin(); it != m_.end(); ++it) {
            if (!is_folding_candidate(*it)) continue;
            bool frontier = false;
            for (const auto& user : it->outputs()) frontier = frontier || !constant_.count(&*user);
            if (frontier && considered.insert(&*it).second) candidates.push_back(it);
        }
        while (!candidates.empty()) {
            instruction_ref c = candidates.back();
            candidates.pop_back();
            if (auto once = stored_once(*c)) {
                narrowed_.emplace_back(c, std::move(*once));
                continue;
            }
            if (worth_storing(*c)) {
                chosen_.push_back(c);
                continue;
            }
            for (const auto& in : c->inputs())
                if (is_folding_candidate(*in) && considered.insert(&*in).second) candidates.push_back(in);
        }
    }

    // `c`'s value with length 1 along the dimensions its readers broadcast
    // and it repeats along, where it is worth storing so. It is computed
    // narrowed where its inputs allow (narrowed_value), so that the size
    // limit does not decide what a constant becomes: BERT's token-type
    // embeddings, gathered for [batch, seq] zeros, are one row at any batch
    // (100 MB whole at 64 x 512), and the program optimised at a range's two
    // ends is then one graph.
    std::optional<argument> stored_once(const instruction& c) {
        const auto dims = dims_its_readers_broadcast(c);
        if (dims.empty()) return std::nullopt;
        std::optional<argument> value = narrowed_value(c, dims, narrowing_);
        if (!value) {
            if (c.get_shape().bytes() > options_.max_bytes) return std::nullopt;
            evaluate({&c});
            auto v = values_.find(&c);
            if (v == values_.end()) return std::nullopt;
            value = v->second;
        }
        auto once = without_repeats(*value, dims);
        if (!once && value->get_shape() != c.get_shape()) once = value;
        if (!once) return std::nullopt;
        const std::size_t bytes = once->get_shape().bytes();
        if (bytes > options_.small_bytes && bytes > source_literal_bytes(c)) return std::nullopt;
        return once;
    }

    // The whole value of constant `ins`, within the size limit.
    std::optional<argument> whole_value(const instruction& ins) {
        if (ins.get_shape().is_tuple() || ins.get_shape().bytes() > options_.max_bytes) return std::nullopt;
        evaluate({&ins});
        auto v = values_.find(&ins);
        if (v == values_.end()) return std::nullopt;
        return v->second;
    }

    // Computes the values of `roots` and of what they are computed from
    // (those already known are kept).
    void evaluate(const std::vector<const instruction*>& roots) {
        instruction_set needed;
        std::vector<const instruction*> stack;
        for (const instruction* r : roots)
            if (!values_.count(r) && needed.insert(r).second) stack.push_back(r);
        while (!stack.empty()) {
            const instruction* cur = stack.back();
            stack.pop_back();
            for (const auto& in : cur->inputs())
                if (!values_.count(&*in) && needed.insert(&*in).second) stack.push_back(&*in);
        }
        // Module order puts inputs first. An op that fails on its constant
        // inputs (say, an index out of range) is left for run time to report.
        for (const auto& ins : m_) {
            if (!needed.count(&ins)) continue;
            if (ins.is_literal()) {
                values_.emplace(&ins, ins.get_literal().get_argument());
                continue;
            }
            std::vector<argument> args;
            bool ready = true;
            for (const auto& in : ins.inputs()) {
                auto v = values_.find(&*in);
                if (v == values_.end()) {
                    ready = false;
                    break;
                }
                args.push_back(v->second);
            }
            if (!ready) continue;
            try {
                values_.emplace(&ins, ins.get_operator().evaluate(ins.get_shape(), args));
            } catch (const error&) {
            }
        }
    }

    // What `ins` is computed from, as text: its op and attributes, its
    // shape, and its inputs' (a literal by the address and shape of its
    // bytes). Empty where a literal has no bytes to name (handed over), and
    // for a subgraph too deep to name in a bounded text.
    const std::string& source_key(const instruction& ins) {
        constexpr std::size_t longest_key = std::size_t{1} << 16;
        if (auto found = keys_.find(&ins); found != keys_.end()) return found->second;
        std::string key;
        if (ins.is_literal()) {
            const argument bytes = ins.get_literal().holds_bytes() ? ins.get_literal().get_argument() : argument{};
            constexpr std::size_t named_by_value = 256;  // bytes: a scale, a shape, an axis
            if (bytes.data() != nullptr && bytes.get_shape().bytes() <= named_by_value) {
                // Small constants (ONNX Constant nodes) are made anew by every import: named by value.
                key = "V" + to_string(ins.get_shape()) + ":";
                constexpr char hex[] = "0123456789abcdef";
                for (std::size_t b = 0; b < bytes.get_shape().bytes(); ++b) {
                    const auto v = static_cast<unsigned>(bytes.data()[b]);
                    key += hex[v >> 4];
                    key += hex[v & 15];
                }
            } else if (bytes.data() != nullptr && bytes.owns_memory()) {
                key = "L" + std::to_string(reinterpret_cast<std::uintptr_t>(bytes.data())) + to_string(ins.get_shape());
                sources_[&ins] = bytes;
            }
        } else {
            key = to_string(ins.get_operator()) + to_string(ins.get_shape()) + "(";
            for (const auto& in : ins.inputs()) {
                const std::string& input_key = source_key(*in);
                if (input_key.empty()) {
                    key.clear();
                    break;
                }
                key += input_key + ",";
            }
            if (!key.empty()) key += ")";
            if (key.size() > longest_key) key.clear();
        }
        return keys_.emplace(&ins, std::move(key)).first->second;
    }

    // The owners of the literals' bytes `ins` is computed from.
    std::vector<std::weak_ptr<void>> source_literals(const instruction& ins) const {
        std::vector<std::weak_ptr<void>> out;
        std::vector<const instruction*> stack{&ins};
        instruction_set seen{&ins};
        while (!stack.empty()) {
            const instruction* cur = stack.back();
            stack.pop_back();
            if (auto found = sources_.find(cur); found != sources_.end()) out.push_back(found->second.owner());
            for (const auto& in : cur->inputs())
                if (seen.insert(&*in).second) stack.push_back(&*in);
        }
        return out;
    }

    bool folded_before(const instruction& c) {
        auto shared = find_shared_derived_value(source_key(c));
        if (!shared) return false;
        values_.emplace(&c, std::move(*shared));
        return true;
    }

    void remember_folded() {
        for (auto c : chosen_) {
            auto v = values_.find(&*c);
            if (v != values_.end()) share_derived_value(source_key(*c), v->second, source_literals(*c));
        }
    }

    void replace_chosen() {
        for (auto c : chosen_) {
            auto v = values_.find(&*c);
            if (v == values_.end()) continue;
            // A standard value computed here is nobody else's to write: the
            // literal keeps it rather than a copy.
            const argument& value = v->second;
            literal lit =
                value.get_shape().standard() && value.owns_memory() && value.location() == memory_location::host
                    ? literal::sharing(value)
                    : literal(value);
            if (lit.get_shape() != c->get_shape()) continue;
            auto folded = m_.insert_literal(c, std::move(lit));
            m_.replace_all_uses(c, folded);
        }
    }

    // Each reader takes the narrowed literal where its result stays as it
    // is. Where another of its inputs was narrowed along the same dimension
    // (GPT-2's positions compared, both expanded over the batch), the
    // broadcast that restores the length is its input instead: a view, no
    // bytes stored.
    void replace_narrowed() {
        for (auto& [c, once] : narrowed_) {
            auto folded = m_.insert_literal(c, literal(once));
            instruction_ref expanded = m_.end();
            const auto readers = c->outputs();
            for (const auto& reader : readers) {
                std::vector<shape> shapes = reader->input_shapes();
                for (std::size_t k = 0; k < shapes.size(); ++k)
                    if (reader->inputs()[k] == c) shapes[k] = folded->get_shape();
                if (keeps_its_lengths(*reader, shapes)) {
                    m_.replace_input(reader, c, folded);
                    continue;
                }
                if (expanded == m_.end())
                    expanded = m_.insert_instruction(
                        c, make_op("broadcast", value_map{{"out_lens", lens_value(c->get_shape().lens())}}), {folded});
                m_.replace_input(reader, c, expanded);
            }
        }
    }

    module& m_;
    const constant_propagation& options_;
    instruction_set constant_;
    std::vector<instruction_ref> chosen_;
    std::vector<std::pair<instruction_ref, argument>> narrowed_;
    std::unordered_map<const instruction*, argument> values_;
    narrowing narrowing_;  // narrowed_value's view of this module's constants
    std::unordered_map<const instruction*, std::string> keys_;
    std::unordered_map<const instruction*, argument> sources_;  // literals named in keys_, by address
};

// Literals that repeat along a dimension their readers broadcast.
void store_repeated_literals_once(module& m) {
    for (auto it = m.begin(); it != m.end(); ++it) {
        if (!it->is_literal() || !it->get_literal().holds_bytes()) continue;
        const auto dims = dims_its_readers_broadcast(*it);
        if (dims.empty()) continue;
        auto once = without_repeats(it->get_literal().get_argument(), dims);
        if (!once) continue;
        auto narrowed = m.insert_literal(it, literal(*once));
        const auto readers = it->outputs();
        for (const auto& reader : readers) m.replace_input(reader, it, narrowed);
    }
}

}  // namespace

void constant_propagation::apply(module& m) const {
    store_repeated_literals_once(m);
    folder(m, *this).run();
}

}  // namespace kiln
