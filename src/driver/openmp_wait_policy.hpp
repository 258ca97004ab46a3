// The kiln command's OpenMP wait policy: Kiln's spin unless the user chose one.
#pragma once

namespace kiln::driver {

// libgomp reads OMP_WAIT_POLICY / GOMP_SPINCOUNT when it loads, before main
// runs. A thread that stops spinning at a barrier before its partner arrives
// sleeps, and a run then pays a vCPU wake-up per kernel (MobileNetV2 batch 1
// among other engines' idle processes: 25-40 ms runs with 10000 spins, 4-5
// ms with 300000; the measurements are in kiln/_openmp_wait_policy.py).
// When neither variable is set, this sets GOMP_SPINCOUNT to the Python
// package's figure and executes the program again so the runtime sees it; it
// returns only when nothing needs doing or the exec failed (then the run goes
// on with libgomp's own policy).
void reexec_with_kilns_openmp_spin(char** argv);

}  // namespace kiln::driver
