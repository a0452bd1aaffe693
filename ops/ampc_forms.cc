#include "ops/ampc_forms.h"

#include <algorithm>

namespace ampc::ops {

const std::vector<std::string_view>& ampc_activation_forms() {
  // HardSigmoid and HardSwish: MobileNet v3, LR-ASPP. The others: torch.nn.ELU, CELU, SELU,
  // Softsign and the thresholded ReLU. Each one's `T` in opset 17 lacks bfloat16.
  static const std::vector<std::string_view> kOps = {
      "HardSigmoid", "HardSwish", "Elu", "Celu", "Selu", "Softsign", "ThresholdedRelu"};
  return kOps;
}

bool has_ampc_form(std::string_view op) {
  static const std::vector<std::string_view> kWindowOps = {"Conv", "ConvTranspose", "MaxPool",
                                                           "AveragePool", "GlobalAveragePool"};
  const auto& activations = ampc_activation_forms();
  return std::find(kWindowOps.begin(), kWindowOps.end(), op) != kWindowOps.end() ||
         std::find(activations.begin(), activations.end(), op) != activations.end();
}

}  // namespace ampc::ops
