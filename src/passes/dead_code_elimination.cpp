#include "kiln/passes.hpp"
#include "passes/rewriter.hpp"

namespace kiln {

void dead_code_elimination::apply(module& m) const {
    remove_dead_instructions(m);
}

}  // namespace kiln
