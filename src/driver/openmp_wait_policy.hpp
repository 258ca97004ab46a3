// The kiln command's OpenMP wait policy: passive unless the user chose one.
#pragma once

namespace kiln::driver {

// libgomp reads OMP_WAIT_POLICY when it loads, before main runs, and its
// default spins between parallel regions; on a machine with other work that
// costs a scheduler slice per barrier (MobileNetV2 batch 1 on a busy 2-core
// machine: ~1 s per run instead of 9 ms). When neither OMP_WAIT_POLICY nor
// GOMP_SPINCOUNT is set, this sets OMP_WAIT_POLICY=PASSIVE and executes the
// program again so the runtime sees it; it returns only when nothing needs
// doing or the exec failed (then the run goes on with the default policy).
void reexec_with_passive_openmp_wait(char** argv);

}  // namespace kiln::driver
