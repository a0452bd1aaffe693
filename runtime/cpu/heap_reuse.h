// Freed temporaries stay in the process's heap for the next step to reuse.
//
// A CPU step allocates temporaries outside the plan's arena: a 16-bit operand's widened fp32 copy
// and the fp32 result before its rounding (nn::run_widened, every widened op of an fp16 plan), the
// buffers the plan does not place, the ops' scratch. glibc's malloc gives a freed block above its
// mmap threshold back to the kernel and trims the heap's free top above its trim threshold, both
// thresholds moving as the process runs. When they fall below a step's temporaries, every step
// maps those pages again and faults on each: a DCGAN generator's fp16 step took 21 ms alone and 46
// ms with its fp32 plan loaded beside it in one process (`ampc bench --against`: 1752 brk calls
// and 294k page faults against 19k).
//
// So the first CPU executor of a process fixes both thresholds high (the mmap threshold at
// glibc's largest, 32 MiB; the trim threshold at 512 MiB): what a step frees is reused, and
// the heap keeps up to the steps' peak of temporaries mapped, as a caching allocator does. A
// user's own MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_ or glibc.malloc tunables stand.
#pragma once

namespace ampc::rt::cpu {

// Once per process; nothing where the C library is not glibc or the user set either threshold.
void keep_freed_memory_for_reuse();

}  // namespace ampc::rt::cpu
