// The kiln command's OpenMP wait policy: a short spin unless the user chose one.
#pragma once

namespace kiln::driver {

// libgomp reads OMP_WAIT_POLICY / GOMP_SPINCOUNT when it loads, before main
// runs. Its default spins 300000 times between parallel regions, which on a
// machine with other work costs a scheduler slice per barrier (MobileNetV2
// batch 1 on a busy 2-core machine: ~1 s per run instead of 9 ms passive);
// passive waiting costs a futex wake-up per barrier on a quiet one (7.4 ms
// instead of 4.5). When neither variable is set, this sets GOMP_SPINCOUNT
// to a short spin (the Python package's figure, kiln/_openmp_wait_policy.py)
// and executes the program again so the runtime sees it; it returns only when
// nothing needs doing or the exec failed (then the run goes on with the
// default policy).
void reexec_with_short_openmp_spin(char** argv);

}  // namespace kiln::driver
