#pragma once
// The exact answer a float32 evaluation approximates: a module evaluated in
// float64, and a target's output judged against it (kiln/verify.hpp).
#include <memory>

#include "kiln/module.hpp"
#include "kiln/verify.hpp"

namespace kiln {

// A copy of `m` computing in float64: every float16 / bfloat16 / float32
// result (parameters and literals included) is converted to float64 before
// its users read it, so each op computes in float64. Raises a kiln error when
// an op refuses the wider type, or for control flow (submodules stay as
// they are).
std::unique_ptr<module> widened_to_float64(const module& m);

// `got` (the target) and `ref` (ref's float32 result) against `exact`, on the
// elements where got and ref differ beyond `tol`.
float64_judgement judge_against_float64(const argument& got, const argument& ref, const argument& exact,
                                        const tolerance& tol);

}  // namespace kiln
