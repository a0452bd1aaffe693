// OpenMP's default wait policy lets idle threads spin. On a machine whose cores are busy with
// other work (shared build machines, CI runners) a spinning thread holds a core that the
// thread it waits for needs, and a parallel region takes milliseconds instead of
// microseconds: the gpt's training step measured 10x slower (docs/benchmarks.md). ampc
// therefore runs with OMP_WAIT_POLICY=passive unless the user chose a policy. libgomp reads
// the variable when it is loaded, before main, so setting it means running ampc again.
#pragma once

namespace ampc::cli {

// When OMP_WAIT_POLICY is unset and the command runs training or inference steps (`train`,
// `run`, `bench`): sets it to "passive" and re-executes this program with the same arguments
// (it returns only if that fails, and then ampc runs on unchanged). Other commands (compile,
// inspect, report, --version) start once: the re-execution would double their start-up time
// and they spend no time in parallel regions worth the difference.
void ensure_passive_omp_wait(int argc, char** argv);

}  // namespace ampc::cli
