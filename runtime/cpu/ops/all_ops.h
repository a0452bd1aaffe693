// One registration function per operator family; register_all_cpu_ops calls them all.
#pragma once

namespace ampc::rt::cpu {

class OpRegistry;

void register_all_cpu_ops(OpRegistry& r);

}  // namespace ampc::rt::cpu
