#pragma once
#include <string>

#include "kiln/module.hpp"

namespace kiln {

// Checks that every input is defined before use, every result shape equals
// its op's compute_shape, there is exactly one return and user lists match
// inputs. Throws a kiln::error naming the offending instruction; `context`
// (for example "after pass 'dce'") is added to the message.
void verify_module(const module& m, const std::string& context = "");

}  // namespace kiln
