// Einsum (ONNX's and TensorFlow's), decomposed into existing IR ops: repeated labels within one
// operand become a gather_elements of the diagonal, labels nobody else needs
// are summed away early, and each pair of operands is contracted with one
// batched dot after transposing and reshaping it to [batch, free, summed].
#include "onnx/einsum_lowering.hpp"

#include <algorithm>
#include <map>

#include "onnx/onnx_parser.hpp"  // int_list

namespace kiln {

namespace {

using onnx_import::int_list;

using labels_t = std::vector<int>;

// Labels of ellipsis dims sit above every character, numbered left to right.
constexpr int ellipsis_label = 1000;

struct term {
    labels_t labels;  // ellipsis_label marks where "..." stands
    bool has_ellipsis = false;
};

term parse_term(const einsum_emitter& ctx, const std::string& text) {
    term t;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '.') {
            if (t.has_ellipsis || text.compare(i, 3, "...") != 0)
                ctx.fail(error_kind::invalid_argument, "equation term '" + text + "' has a malformed ellipsis");
            t.has_ellipsis = true;
            t.labels.push_back(ellipsis_label);
            i += 2;
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            t.labels.push_back(c);
        } else {
            ctx.fail(error_kind::invalid_argument, "equation term '" + text + "' holds '" + std::string(1, c) + "'");
        }
    }
    return t;
}

// The term's labels with "..." replaced by the last `dims` of `total` ellipsis labels.
labels_t expand(const term& t, std::size_t dims, std::size_t total) {
    labels_t out;
    for (int l : t.labels) {
        if (l != ellipsis_label) {
            out.push_back(l);
            continue;
        }
        for (std::size_t k = total - dims; k < total; ++k) out.push_back(ellipsis_label + static_cast<int>(k));
    }
    return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> parts(1);
    for (char c : s) {
        if (c == sep)
            parts.emplace_back();
        else
            parts.back() += c;
    }
    return parts;
}

struct operand {
    instruction_ref value;
    labels_t labels;
};

std::vector<std::int64_t> positions(const labels_t& labels, const labels_t& order) {
    std::vector<std::int64_t> perm;
    for (int l : order)
        perm.push_back(static_cast<std::int64_t>(std::find(labels.begin(), labels.end(), l) - labels.begin()));
    return perm;
}

bool contains(const labels_t& labels, int l) {
    return std::find(labels.begin(), labels.end(), l) != labels.end();
}

class einsum_builder {
public:
    explicit einsum_builder(const einsum_emitter& ctx) : ctx_(ctx) {}

    // x[..., i (at a), ..., i (at b), ...] -> x[..., i, ...] for every repeated label.
    operand take_diagonals(operand op) const {
        for (std::size_t b = 0; b < op.labels.size(); ++b) {
            const auto a = static_cast<std::size_t>(std::find(op.labels.begin(), op.labels.end(), op.labels[b]) -
                                                    op.labels.begin());
            if (a == b) continue;
            auto lens = op.value->get_shape().lens();
            if (lens[a] != lens[b])
                ctx_.fail(error_kind::invalid_argument, "a repeated label spans dims of sizes " +
                                                            std::to_string(lens[a]) + " and " +
                                                            std::to_string(lens[b]));
            // index[..., i (at a), ..., 0 (at b), ...] = i picks the diagonal along b.
            lens[b] = 1;
            const shape index_shape{dtype::int64_type, lens};
            std::vector<std::size_t> stride_a(lens.size(), 0);
            stride_a[a] = 1;
            std::vector<std::int64_t> index(index_shape.elements());
            const auto strides = index_shape.strides();
            for (std::size_t i = 0; i < index.size(); ++i)
                index[i] = static_cast<std::int64_t>(i / strides[a] % lens[a]);
            auto picked = ctx_.add("gather_elements", {op.value, ctx_.add_literal(literal(index_shape, index))},
                                   value_map{{"axis", static_cast<std::int64_t>(b)}});
            op.value = ctx_.add("squeeze", {picked},
                                value_map{{"axes", int_list(std::vector<std::int64_t>{static_cast<std::int64_t>(b)})}});
            op.labels.erase(op.labels.begin() + static_cast<std::ptrdiff_t>(b));
            --b;
        }
        return op;
    }

    // Sums the labels `keep` does not hold.
    operand sum_unneeded(operand op, const labels_t& keep) const {
        std::vector<std::int64_t> axes;
        labels_t rest;
        for (std::size_t i = 0; i < op.labels.size(); ++i) {
            if (contains(keep, op.labels[i]))
                rest.push_back(op.labels[i]);
            else
                axes.push_back(static_cast<std::int64_t>(i));
        }
        if (axes.empty()) return op;
        op.value = ctx_.add("reduce_sum", {op.value}, value_map{{"axes", int_list(axes)}, {"keepdims", false}});
        op.labels = rest;
        return op;
    }

    // Transposes op to `order`, broadcasts it to the labels' full sizes and
    // reshapes it to `groups` (lists of labels merged into one dim each).
    instruction_ref arrange(const operand& op, const labels_t& order, const std::vector<labels_t>& groups) const {
        auto x = op.value;
        const auto perm = positions(op.labels, order);
        bool identity = true;
        for (std::size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<std::int64_t>(i);
        if (!identity) x = ctx_.add("transpose", {x}, value_map{{"permutation", int_list(perm)}});
        std::vector<std::int64_t> full;
        for (int l : order) full.push_back(static_cast<std::int64_t>(sizes_.at(l)));
        if (x->get_shape().lens() != std::vector<std::size_t>(full.begin(), full.end()))
            x = ctx_.add("broadcast", {x}, value_map{{"out_lens", int_list(full)}});
        std::vector<std::int64_t> dims;
        for (const auto& g : groups) {
            std::int64_t n = 1;
            for (int l : g) n *= static_cast<std::int64_t>(sizes_.at(l));
            dims.push_back(n);
        }
        return ctx_.add("reshape", {x}, value_map{{"dims", int_list(dims)}});
    }

    // a and b hold only labels in `keep` or shared with each other.
    operand contract(const operand& a, const operand& b, const labels_t& keep) const {
        labels_t batch, summed, free_a, free_b;
        for (int l : a.labels) {
            if (!contains(b.labels, l))
                free_a.push_back(l);
            else if (contains(keep, l))
                batch.push_back(l);
            else
                summed.push_back(l);
        }
        for (int l : b.labels)
            if (!contains(a.labels, l)) free_b.push_back(l);
        auto concat = [](std::initializer_list<labels_t> parts) {
            labels_t out;
            for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
            return out;
        };
        auto lhs = arrange(a, concat({batch, free_a, summed}), {batch, free_a, summed});
        auto rhs = arrange(b, concat({batch, summed, free_b}), {batch, summed, free_b});
        operand out{ctx_.add("dot", {lhs, rhs}), concat({batch, free_a, free_b})};
        std::vector<std::int64_t> dims;
        for (int l : out.labels) dims.push_back(static_cast<std::int64_t>(sizes_.at(l)));
        out.value = ctx_.add("reshape", {out.value}, value_map{{"dims", int_list(dims)}});
        return out;
    }

    void record_sizes(const operand& op) {
        const auto& lens = op.value->get_shape().lens();
        for (std::size_t i = 0; i < lens.size(); ++i) {
            auto [it, fresh] = sizes_.emplace(op.labels[i], lens[i]);
            if (fresh || it->second == lens[i] || lens[i] == 1) continue;
            if (it->second != 1)
                ctx_.fail(error_kind::invalid_argument, "a label spans dims of sizes " + std::to_string(it->second) +
                                                            " and " + std::to_string(lens[i]));
            it->second = lens[i];
        }
    }

    instruction_ref finish(operand op, const labels_t& output) const {
        op = sum_unneeded(op, output);
        const auto perm = positions(op.labels, output);
        bool identity = true;
        for (std::size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<std::int64_t>(i);
        if (identity) return op.value;
        return ctx_.add("transpose", {op.value}, value_map{{"permutation", int_list(perm)}});
    }

private:
    const einsum_emitter& ctx_;
    std::map<int, std::size_t> sizes_;
};

}  // namespace

instruction_ref lower_einsum(const einsum_emitter& ctx, const std::string& text,
                             const std::vector<instruction_ref>& args) {
    std::string equation;
    for (char c : text) {
        if (c != ' ') equation += c;
    }
    const auto arrow = equation.find("->");
    const auto inputs = split(equation.substr(0, arrow), ',');
    if (inputs.size() != args.size())
        ctx.fail(error_kind::invalid_argument, "equation '" + equation + "' has " + std::to_string(inputs.size()) +
                                                   " inputs but the node has " + std::to_string(args.size()));
    std::vector<term> terms;
    std::vector<std::size_t> ellipsis_dims;
    std::size_t total = 0;
    for (std::size_t i = 0; i < args.size(); ++i) {
        terms.push_back(parse_term(ctx, inputs[i]));
        const std::size_t named = terms[i].labels.size() - (terms[i].has_ellipsis ? 1 : 0);
        const std::size_t rank = args[i]->get_shape().ndim();
        if (rank < named || (!terms[i].has_ellipsis && rank != named))
            ctx.fail(error_kind::invalid_argument, "term '" + inputs[i] + "' does not fit input " + std::to_string(i) +
                                                       " of rank " + std::to_string(rank));
        ellipsis_dims.push_back(rank - named);
        total = std::max(total, rank - named);
    }

    std::vector<operand> ops;
    std::map<int, int> occurrences;  // over all input terms
    for (std::size_t i = 0; i < args.size(); ++i) {
        ops.push_back({args[i], expand(terms[i], ellipsis_dims[i], total)});
        for (int l : ops.back().labels) ++occurrences[l];
    }
    labels_t output;
    if (arrow != std::string::npos) {
        output = expand(parse_term(ctx, equation.substr(arrow + 2)), total, total);
        for (int l : output)
            if (!occurrences.count(l))
                ctx.fail(error_kind::invalid_argument, "output label '" + std::string(1, char(l)) + "' is in no input");
    } else {
        // Implicit output: the ellipsis dims, then the labels used once, alphabetically.
        output = expand(term{{ellipsis_label}, true}, total, total);
        for (const auto& [l, n] : occurrences)
            if (l < ellipsis_label && n == 1) output.push_back(l);
    }

    einsum_builder builder(ctx);
    for (auto& op : ops) {
        op = builder.take_diagonals(op);
        builder.record_sizes(op);
    }
    // Labels still needed after operand i: the output's and those of later operands.
    auto needed_after = [&](std::size_t i) {
        labels_t keep = output;
        for (std::size_t j = i + 1; j < ops.size(); ++j)
            keep.insert(keep.end(), ops[j].labels.begin(), ops[j].labels.end());
        return keep;
    };
    auto with = [](labels_t keep, const labels_t& more) {
        keep.insert(keep.end(), more.begin(), more.end());
        return keep;
    };
    operand acc = builder.sum_unneeded(ops[0], needed_after(0));
    for (std::size_t i = 1; i < ops.size(); ++i) {
        // Labels neither needed later nor shared with the other side are summed before the product.
        const labels_t keep = needed_after(i);
        acc = builder.sum_unneeded(acc, with(keep, ops[i].labels));
        acc = builder.contract(acc, builder.sum_unneeded(ops[i], with(keep, acc.labels)), keep);
    }
    return builder.finish(acc, output);
}

}  // namespace kiln
