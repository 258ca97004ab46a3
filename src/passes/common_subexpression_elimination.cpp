#include <cstring>
#include <functional>
#include <unordered_map>
#include <vector>

#include "kiln/passes.hpp"
#include "passes/matcher.hpp"

namespace kiln {

namespace {

std::size_t mix(std::size_t seed, std::size_t v) {
    return seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

// Hashes the size and the ends of the data: weights can be large, and
// equal-sized literals that differ are told apart by the full compare.
std::size_t literal_hash(const literal& lit) {
    // A handed-over literal (weights a kernel of a program optimised from the
    // same source packed) would be restored whole to read its ends: its shape
    // only; it is merged with copies of itself, found without reading it.
    if (!lit.holds_bytes()) return std::hash<std::string>{}(to_string(lit.get_shape()));
    const argument& a = lit.get_argument();
    const std::size_t bytes = a.get_shape().bytes();
    std::size_t h = std::hash<std::string>{}(to_string(a.get_shape()));
    const std::size_t sample = std::min<std::size_t>(bytes, 256);
    std::string_view head(reinterpret_cast<const char*>(a.data()), sample);
    std::string_view tail(reinterpret_cast<const char*>(a.data()) + bytes - sample, sample);
    return mix(mix(h, std::hash<std::string_view>{}(head)), std::hash<std::string_view>{}(tail));
}

bool same_literal(const instruction& a, const instruction& b) {
    if (a.get_literal().shares_storage_with(b.get_literal())) return true;
    if (!a.get_literal().holds_bytes() || !b.get_literal().holds_bytes()) return false;
    const argument& x = a.get_literal().get_argument();
    const argument& y = b.get_literal().get_argument();
    // Literals are standard, so equal shapes mean equal byte counts; bytes
    // (not values) decide, so 0.0 and -0.0 or different NaNs stay apart.
    return x.get_shape() == y.get_shape() && std::memcmp(x.data(), y.data(), x.get_shape().bytes()) == 0;
}

std::size_t instruction_hash(const instruction& ins) {
    std::size_t h = ins.get_operator().hash();
    for (const auto& in : ins.inputs()) h = mix(h, std::hash<const instruction*>{}(&*in));
    return h;
}

bool same_computation(const instruction& a, const instruction& b) {
    return a.inputs() == b.inputs() && a.get_operator() == b.get_operator();
}

bool eligible(const instruction& ins) {
    return !ins.is_param() && !ins.is_return() && ins.module_inputs().empty() &&
           !match::is_nondeterministic(ins.get_operator());
}

}  // namespace

void common_subexpression_elimination::apply(module& m) const {
    // One forward sweep suffices: inputs come first, so by the time an
    // instruction is looked up its inputs already are the survivors.
    std::unordered_map<std::size_t, std::vector<instruction_ref>> seen;
    for (auto it = m.begin(); it != m.end();) {
        auto ins = it++;
        if (!eligible(*ins)) continue;
        const bool lit = ins->is_literal();
        std::size_t h = lit ? literal_hash(ins->get_literal()) : instruction_hash(*ins);
        auto& bucket = seen[h];
        instruction_ref survivor = m.end();
        for (auto candidate : bucket) {
            if (candidate->is_literal() != lit) continue;
            if (lit ? same_literal(*candidate, *ins) : same_computation(*candidate, *ins)) {
                survivor = candidate;
                break;
            }
        }
        if (survivor == m.end()) {
            bucket.push_back(ins);
            continue;
        }
        m.replace_all_uses(ins, survivor);
        m.remove_instruction(ins);
    }
}

}  // namespace kiln
