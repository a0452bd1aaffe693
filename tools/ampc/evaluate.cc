#include "tools/ampc/evaluate.h"

#include <cstdio>

#include "base/error.h"
#include "base/half.h"
#include "base/number_format.h"
#include "driver/pipeline.h"
#include "frontend/onnx/import.h"
#include "ops/schemas/ampc_schemas.h"
#include "passes/inference_mode.h"
#include "runtime/cpu/executor.h"
#include "runtime/io/checkpoint.h"
#include "tools/ampc/data_parallel.h"
#include "tools/ampc/plan_inputs.h"

namespace ampc::cli {
namespace {

constexpr const char* kScoresOutput = "ampc.eval.scores";
constexpr const char* kLabelsOutput = "ampc.eval.labels";

// The classification loss node behind the loss output, if any: ONNX's losses, or the cross-
// entropy of a mixed-precision plan that reads its 16-bit scores widened (ampc's).
const ir::Node* classification_loss(const ir::Value* loss) {
  const ir::Node* n = loss->producer;
  while (n && n->domain.empty() && (n->op_type == "Identity" || n->op_type == "Cast")) {
    n = n->inputs.empty() || !n->inputs[0] ? nullptr : n->inputs[0]->producer;
  }
  if (!n) return nullptr;
  const bool onnx_loss = n->domain.empty() && (n->op_type == "SoftmaxCrossEntropyLoss" ||
                                               n->op_type == "NegativeLogLikelihoodLoss");
  const bool widened = n->domain == ops::kAmpcDomain && n->op_type == "SoftmaxCrossEntropyLoss";
  if (!onnx_loss && !widened) return nullptr;
  return n->inputs.size() >= 2 && n->inputs[0] && n->inputs[1] ? n : nullptr;
}

// Exposes `v` as an extra graph output named `name` (through an Identity, so the value
// keeps its name and may also be a graph input).
void add_output(ir::Graph& g, ir::Value* v, const std::string& name) {
  ir::Value* out = g.add_value(name, v->type);
  g.add_node("Identity", {v}, {out}, name);
  g.outputs.push_back(out);
}

template <typename T>
double at(const rt::Tensor& t, int64_t i) {
  return static_cast<double>(t.data<T>()[i]);
}

double score_at(const rt::Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat64:
      return at<double>(t, i);
    case DType::kFloat16:
      return half_to_float(t.data<Half>()[i]);
    case DType::kBFloat16:
      return bf16_to_float(t.data<BFloat16>()[i]);
    default:
      return at<float>(t, i);
  }
}

int64_t label_at(const rt::Tensor& t, int64_t i) {
  return t.dtype() == DType::kInt32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i];
}

// Counts positions whose arg-max over axis 1 of `scores` [N, C, d...] equals `labels`
// [N, d...], skipping labels equal to ignore_index.
void count_correct(const rt::Tensor& scores, const rt::Tensor& labels,
                   std::optional<int64_t> ignore_index, int64_t& correct, int64_t& labelled) {
  if (scores.rank() < 2 || labels.rank() != scores.rank() - 1 || !is_float(scores.dtype()) ||
      (labels.dtype() != DType::kInt64 && labels.dtype() != DType::kInt32)) {
    throw Error("accuracy: scores " + scores.type_str() + " and labels " + labels.type_str() +
                " are not a classification's [N,C,...] and [N,...]");
  }
  const int64_t n = scores.dim(0), c = scores.dim(1), inner = scores.numel() / (n * c);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t k = 0; k < inner; ++k) {
      const int64_t label = label_at(labels, b * inner + k);
      if (ignore_index && label == *ignore_index) continue;
      int64_t best = 0;
      for (int64_t j = 1; j < c; ++j) {
        if (score_at(scores, (b * c + j) * inner + k) >
            score_at(scores, (b * c + best) * inner + k))
          best = j;
      }
      ++labelled;
      correct += best == label;
    }
  }
}

double scalar(const rt::Tensor& t) {
  if (t.numel() != 1) throw Error("the loss is " + t.type_str() + ", not a scalar");
  return score_at(t, 0);
}

// The label a padded position gets when the loss has no ignore_index (PyTorch's default;
// no class index is negative).
constexpr int64_t kPaddingLabel = -100;

// The last partial batch of a classification loss with mean reduction whose labels are a
// graph input can run through the same static plan: the batch of the last B samples, the
// labels of the samples already evaluated set to ignore_index, so that the mean and the
// accuracy count only the remainder. Returns the labels input, or nothing.
std::optional<std::string> maskable_labels(ir::Node* classifier) {
  if (!classifier || !classifier->inputs[1]->is_graph_input) return std::nullopt;
  const auto* reduction = classifier->attr("reduction");
  if (reduction && reduction->s != "mean") return std::nullopt;
  if (!classifier->attr("ignore_index"))
    classifier->attributes.push_back(ir::Attribute::make_int("ignore_index", kPaddingLabel));
  return classifier->inputs[1]->name;
}

// Sets the labels of the first `samples` samples of `labels` [B, ...] to `value`.
void mask_labels(rt::Tensor& labels, int64_t samples, int64_t value) {
  const int64_t per_sample = labels.numel() / labels.dim(0);
  for (int64_t i = 0; i < samples * per_sample; ++i) {
    if (labels.dtype() == DType::kInt32)
      labels.data<int32_t>()[i] = static_cast<int32_t>(value);
    else
      labels.data<int64_t>()[i] = value;
  }
}

}  // namespace

EvalResult evaluate(const plan::Plan& training_plan, const std::map<std::string, rt::Tensor>& state,
                    const std::string& loss_name, const rt::data::Dataset& data,
                    DataParallelRun* dp) {
  onnx::ModelProto proto = rt::io::model_with_state(training_plan, state);
  proto.clear_training_info();  // the inference graph only
  auto model = onnx_io::import_model(proto);
  passes::set_inference_mode(*model);
  ir::Graph& g = *model->graph;

  ir::Value* loss = nullptr;
  for (ir::Value* v : g.outputs) loss = v->name == loss_name ? v : loss;
  if (!loss) throw Error("evaluation: the model has no output '" + loss_name + "'");
  std::optional<int64_t> ignore_index;
  auto* classifier = const_cast<ir::Node*>(classification_loss(loss));
  const std::optional<std::string> labels_input = maskable_labels(classifier);
  if (classifier) {
    if (const auto* a = classifier->attr("ignore_index")) ignore_index = a->i;
    add_output(g, classifier->inputs[0], kScoresOutput);
    add_output(g, classifier->inputs[1], kLabelsOutput);
  }
  compiler::CompileOptions options;
  options.lowering.target = "cpu";
  rt::cpu::Executor exec(compiler::compile_model(*model, options, training_plan.model_name()));

  const PlanInputs inputs = plan_inputs(exec.plan());
  rt::data::Batcher batcher(data, inputs.specs, {.batch_size = inputs.batch});
  EvalResult r;
  int64_t correct = 0;
  const int64_t batches = batcher.batches_per_epoch();
  // The loss is the mean over batches weighted by the positions each labels (a classifier;
  // whole batches otherwise weigh the same), so a partial batch weighs what it holds.
  double weighted = 0, weights = 0;
  auto add_batch = [&](const std::map<std::string, rt::Tensor>& feeds) {
    const auto out = exec.run(feeds);
    double weight = 1;
    if (classifier) {
      const int64_t before = r.labelled;
      count_correct(out.at(kScoresOutput), out.at(kLabelsOutput), ignore_index, correct,
                    r.labelled);
      weight = static_cast<double>(r.labelled - before);
    }
    if (weight > 0) weighted += scalar(out.at(loss_name)) * weight;
    weights += weight;
  };
  const int rank = dp ? dp->rank() : 0, world = dp ? dp->world() : 1;
  for (int64_t k = rank; k < batches; k += world) add_batch(batcher.batch(k));
  r.samples = batches * inputs.batch;
  const int64_t rest = data.samples() - r.samples;
  if (rest > 0 && labels_input && rank == batches % world) {
    // The last B samples as one batch, the ones evaluated already masked out.
    rt::data::Batcher last(rt::data::split(data, data.samples() - inputs.batch).second,
                           inputs.specs, {.batch_size = inputs.batch});
    auto feeds = last.batch(0);
    mask_labels(feeds.at(*labels_input), inputs.batch - rest, ignore_index.value_or(kPaddingLabel));
    add_batch(feeds);
  }
  if (rest > 0 && labels_input) r.samples += rest;
  if (world > 1) {
    std::vector<double> v = {weighted, weights, static_cast<double>(correct),
                             static_cast<double>(r.labelled)};
    dp->sum(v, "the held-out evaluation");
    weighted = v[0];
    weights = v[1];
    correct = static_cast<int64_t>(v[2]);
    r.labelled = static_cast<int64_t>(v[3]);
  }
  r.loss = weights > 0 ? weighted / weights : 0;
  r.unused_samples = data.samples() - r.samples;
  if (classifier && r.labelled > 0)
    r.accuracy = static_cast<double>(correct) / static_cast<double>(r.labelled);
  return r;
}

std::string describe(const EvalResult& r) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%lld samples: loss %s", static_cast<long long>(r.samples),
                format_number(r.loss, "%.4f").c_str());
  std::string s = buf;
  if (r.accuracy) {
    std::snprintf(buf, sizeof buf, ", accuracy %.2f%%", 100.0 * *r.accuracy);
    s += buf;
  }
  if (r.unused_samples > 0) {
    s += " (" + std::to_string(r.unused_samples) +
         " samples after the last whole batch not evaluated: only a classification loss with "
         "mean reduction and labels from the data can mask a padded batch)";
  }
  return s;
}

}  // namespace ampc::cli
