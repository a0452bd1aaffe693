// structure_key: a KernelDef's deterministic serialisation without its name and its code.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "kernels/codegen/codegen.h"

namespace ampc::kernels::codegen {

std::string structure_key(const KernelDef& kernel) {
  KernelDef k = kernel;
  k.clear_name();
  k.clear_code();
  std::string key;
  {
    google::protobuf::io::StringOutputStream stream(&key);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    k.SerializeToCodedStream(&coded);
  }
  return key;
}

}  // namespace ampc::kernels::codegen
