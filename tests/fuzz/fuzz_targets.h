// The fuzz targets' entry functions, one per file of this folder. Each is fed arbitrary
// bytes by libFuzzer (scripts/fuzz.sh, through libfuzzer_main.cc) and, in the normal build,
// by fuzz_regression_test.cc, which replays every committed input of regressions/ and
// seeds/. A refusal (ampc::Error, the one-line `ampc: error:` of the command line) is the
// right answer to a malformed input and is swallowed; anything else that escapes (another
// exception, a crash, a sanitizer report, an allocation past libFuzzer's limit) is a finding.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ampc::fuzz {

int onnx_import(const uint8_t* data, size_t size);      // model bytes -> import -> verifier
int external_data(const uint8_t* data, size_t size);    // external_data fields -> resolution
int plan_load(const uint8_t* data, size_t size);        // plan file bytes -> parse_plan
int checkpoint_load(const uint8_t* data, size_t size);  // checkpoint bytes -> read_checkpoint
int npy_read(const uint8_t* data, size_t size);         // .npy bytes -> tensor
int npz_read(const uint8_t* data, size_t size);         // .npz bytes -> data set
int policy_json(const uint8_t* data, size_t size);      // --policy file -> PrecisionPolicy
int input_shape(const uint8_t* data, size_t size);      // --input-shape spec -> shapes

}  // namespace ampc::fuzz
