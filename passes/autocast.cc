#include "passes/autocast.h"

#include <onnx/defs/schema.h>

#include <algorithm>
#include <map>
#include <set>

#include "base/error.h"
#include "ir/verifier.h"
#include "ops/ampc_forms.h"
#include "ops/op_info.h"
#include "ops/schemas/ampc_schemas.h"
#include "passes/cast_cleanup.h"
#include "passes/erf_gelu.h"
#include "passes/model_metadata.h"
#include "passes/precision_policy.h"

namespace ampc::passes {
namespace {

// The wider of two float dtypes; fp16 and bf16 meet in fp32 (neither holds the other).
DType widest(DType a, DType b) {
  if (a == b || b == DType::kUndefined) return a;
  if (a == DType::kUndefined) return b;
  if (a == DType::kFloat64 || b == DType::kFloat64) return DType::kFloat64;
  return DType::kFloat32;
}

// The type string of formal input/output `i` ("T", "T1", or a fixed "tensor(int64)"); the
// last formal parameter covers the rest when it is variadic.
std::string formal_type(const std::vector<onnx::OpSchema::FormalParameter>& params, size_t i) {
  if (params.empty()) return {};
  if (i >= params.size() && params.back().GetOption() != onnx::OpSchema::Variadic) return {};
  return params[std::min(i, params.size() - 1)].GetTypeStr();
}

const onnx::OpSchema::TypeConstraintParam* constraint(const onnx::OpSchema& s,
                                                      const std::string& type_str) {
  for (const auto& c : s.typeConstraintParams()) {
    if (c.type_param_str == type_str) return &c;
  }
  return nullptr;
}

bool allows(const onnx::OpSchema& s, const std::string& type_str, DType t) {
  const auto* c = constraint(s, type_str);
  if (!c) return type_str == ir::onnx_type_string(t);
  return std::find(c->allowed_type_strs.begin(), c->allowed_type_strs.end(),
                   ir::onnx_type_string(t)) != c->allowed_type_strs.end();
}

int64_t static_numel(const ir::TensorType& t) {
  if (!t.shape) return -1;
  int64_t n = 1;
  for (int64_t d : *t.shape) {
    if (d < 0) return -1;
    n *= d;
  }
  return n;
}

// Ops that only move elements: casting their input or their output is the same.
bool is_layout_op(const ir::Node& n) {
  return ops::op_info(n.domain, n.op_type).moves_elements;
}

// A constant of the compiler or the model's graph (not a parameter) with one element.
bool is_weak_constant(const ir::Value& v) {
  return v.is_initializer() && !v.from_model && v.initializer->numel() == 1;
}

class Autocaster {
 public:
  Autocaster(ir::Model& model, const AutocastOptions& options)
      : model_(model),
        g_(*model.graph),
        policy_(options),
        low_(precision_dtype(options.precision)) {
    for (const auto& v : g_.values) names_.insert(v->name);
    for (const auto& n : g_.nodes) names_.insert(n->name);
    report_.precision = precision_name(options.precision);
    policy_.pin_lowerings(model.fp32_lowerings);
    policy_.pin_autocast_disabled(metadata_lines(model, kAutocastDisabledKey));
    for (ErfGelu& g : find_erf_gelus(g_)) {
      for (const ir::Node* n : g.nodes) gelu_of_[n] = gelus_.size();
      gelus_.push_back({std::move(g), false});
    }
  }

  AutocastReport run() {
    std::vector<ir::Node*> original;
    for (const auto& n : g_.nodes) original.push_back(n.get());
    for (ir::Node* n : original) {
      current_ = n;
      process(*n);
      round_gelu_result(*n);
    }
    restore_outputs();
    for (const auto& [cast, producer] : after_) g_.move_node_after(cast, producer);
    // Inserted Casts were appended to the graph (so that the nodes' "#index" labels in the
    // report stay those of the model); each goes just before the node that first read it.
    for (const auto& [cast, reader] : placement_) g_.move_node_before(cast, reader);
    return std::move(report_);
  }

 private:
  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int i = 1; names_.count(name); ++i) name = base + "_" + std::to_string(i);
    names_.insert(name);
    return name;
  }

  // `v` as dtype `to`: one Cast per (value, dtype), shared by every consumer, placed before
  // its first consumer. Casting an inserted Cast's result back gives its source.
  ir::Value* cast_to(ir::Value* v, DType to) {
    if (v->type.dtype == to) return v;
    if (auto s = source_.find(v); s != source_.end() && s->second->type.dtype == to)
      return s->second;
    auto key = std::make_pair(v, to);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    const std::string suffix = "_" + std::string(dtype_name(to));
    ir::Value* out = g_.add_value(fresh(v->name + suffix), {to, v->type.shape});
    ir::Node* c = g_.add_node("Cast", {v}, {out}, fresh("autocast/" + v->name + suffix));
    c->attributes.push_back(ir::Attribute::make_int("to", static_cast<int64_t>(to)));
    placement_.emplace_back(c, current_);
    cache_[key] = out;
    source_[out] = v;
    record_cast(*c, *v, to);
    return out;
  }

  void record_cast(const ir::Node& c, const ir::Value& v, DType to) {
    const int64_t numel = static_numel(v.type);
    const int64_t bytes =
        numel < 0 ? -1 : numel * static_cast<int64_t>(dtype_size(v.type.dtype) + dtype_size(to));
    report_.casts.push_back(
        {c.name, v.name, v.type.dtype, to, numel, bytes, v.is_initializer() && v.from_model});
  }

  void set_output_dtype(ir::Value* v, DType t) {
    if (v->type.dtype == t) return;
    original_.try_emplace(v, v->type.dtype);
    v->type.dtype = t;
  }

  void decide(const ir::Node& n, DType dtype, std::string rule) {
    report_.nodes.push_back({n.label(), n.op_type, dtype, std::move(rule)});
  }

  // Whether `n` computes in the low dtype once autocast decides: an ALLOW op whose schema
  // has the low dtype for its float inputs.
  bool computes_low(const ir::Node& n) const {
    if (policy_.classify(n).op_class != OpClass::kAllow) return false;
    const auto version = model_.opset_version(n.domain);
    const onnx::OpSchema* schema =
        version ? onnx::OpSchemaRegistry::Schema(n.op_type, static_cast<int>(*version)) : nullptr;
    if (!schema) return false;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const ir::Value* v = n.inputs[i];
      if (v && is_float(v->type.dtype))
        return allows(*schema, formal_type(schema->inputs(), i), low_);
    }
    return false;
  }

  // Whether every result of the layout op `n` is read only by ops that compute in the low
  // dtype (directly or through further layout ops).
  bool only_low_readers(const ir::Node& n) const {
    for (const ir::Value* out : n.outputs) {
      if (!out) continue;
      if (out->uses.empty() || is_pinned_value(model_, out)) return false;
      for (const ir::Use& u : out->uses) {
        const bool layout =
            is_layout_op(*u.node) && policy_.classify(*u.node).op_class == OpClass::kFollow;
        if (layout ? !only_low_readers(*u.node) : !computes_low(*u.node)) return false;
      }
    }
    return true;
  }

  // Add(MatMul(x, W), b) with b a 1-D parameter: the bias of a linear layer as ONNX exports it
  // for inputs of rank > 2. torch's linear is on the ALLOW list with its bias, so the bias
  // is cast down with the weight instead of widening the sum to fp32 (which would leave
  // every linear layer's output, and what follows it, in fp32).
  bool is_linear_bias_add(const ir::Node& n) const {
    if (n.op_type != "Add" || !n.domain.empty() || n.inputs.size() != 2) return false;
    for (int k = 0; k < 2; ++k) {
      const ir::Value* mm = n.inputs[k];
      const ir::Value* b = n.inputs[1 - k];
      if (!mm || !b || !mm->producer || mm->producer->op_type != "MatMul" ||
          !mm->producer->domain.empty() || mm->type.dtype != low_)
        continue;
      if (b->is_initializer() && b->from_model && b->initializer->dims.size() == 1 &&
          mm->type.is_static() && !mm->type.shape->empty() &&
          b->initializer->dims[0] == mm->type.shape->back())
        return true;
    }
    return false;
  }

  // KEEP: the node sees its inputs in the dtypes the model gave them.
  void keep(ir::Node& n, std::string rule) {
    if (n.op_type != "Cast") {  // a Cast reads any type and its result type is its `to`
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        ir::Value* v = n.inputs[i];
        if (!v) continue;
        if (auto it = original_.find(v); it != original_.end())
          ir::set_input(&n, i, cast_to(v, it->second));
      }
    }
    const ir::Attribute* to = n.op_type == "Cast" ? n.attr("to") : nullptr;
    decide(n, to ? static_cast<DType>(to->i) : DType::kUndefined, std::move(rule));
  }

  // torch's gelu exported as five nodes (passes/erf_gelu.h) runs as PyTorch runs gelu when
  // its input is low: the five in fp32 (DENY), their result rounded once to the low dtype
  // (round_gelu_result). Under the table's FOLLOW each node would round its own result, which
  // agrees with PyTorch's gelu on about half of the elements. A user's override of any of the
  // five (--deny, --keep-fp32, ...) leaves the chain to the overrides.
  PolicyDecision classify(const ir::Node& n) {
    PolicyDecision d = policy_.classify(n);
    auto it = gelu_of_.find(&n);
    if (it == gelu_of_.end()) return d;
    Gelu& g = gelus_[it->second];
    if (&n == g.chain.nodes.front()) {
      g.fp32 = g.chain.x->type.dtype == low_;
      for (const ir::Node* m : g.chain.nodes) {
        if (policy_.classify(*m).rule != "FOLLOW (table)") g.fp32 = false;
      }
    }
    if (!g.fp32) return d;
    return {OpClass::kDeny,
            "fp32: torch's gelu (exported as Div, Erf, Add, Mul, Mul), "
            "computed in fp32 and rounded once, as PyTorch computes it"};
  }

  // After the last node of a GELU that runs in fp32: its result, rounded once to the low
  // dtype, is what every reader sees (a Cast right after the node, writing the value the
  // readers already read).
  void round_gelu_result(ir::Node& n) {
    auto it = gelu_of_.find(&n);
    if (it == gelu_of_.end() || !gelus_[it->second].fp32 || &n != gelus_[it->second].chain.last())
      return;
    ir::Value* y = n.outputs[0];
    ir::Value* wide = g_.add_value(fresh(y->name + "_fp32"), y->type);
    ir::set_output(&n, 0, wide);
    original_.try_emplace(y, y->type.dtype);
    y->type.dtype = low_;
    ir::Node* c = g_.add_node("Cast", {wide}, {y}, fresh("autocast/" + y->name + "_gelu_round"));
    c->attributes.push_back(ir::Attribute::make_int("to", static_cast<int64_t>(low_)));
    after_.emplace_back(c, &n);
    record_cast(*c, *wide, low_);
    record_low_chain(gelus_[it->second].chain);
  }

  // The chain, with the Cast up of its input, for the backward to compute again from the
  // 16-bit input (ir::Model::low_source_chains, passes/recompute_elementwise.h).
  void record_low_chain(const ErfGelu& chain) {
    ir::Model::LowSourceChain kept{chain.x->name, {}};
    if (const ir::Node* up = chain.nodes.front()->inputs[0]->producer)
      kept.nodes.push_back(up->name);
    for (const ir::Node* m : chain.nodes) kept.nodes.push_back(m->name);
    model_.low_source_chains.push_back(std::move(kept));
  }

  void process(ir::Node& n) {
    PolicyDecision d = classify(n);
    const auto version = model_.opset_version(n.domain);
    const onnx::OpSchema* schema =
        version ? onnx::OpSchemaRegistry::Schema(n.op_type, static_cast<int>(*version),
                                                 n.domain == "ai.onnx" ? "" : n.domain)
                : nullptr;
    if (d.op_class == OpClass::kKeep) return keep(n, std::move(d.rule));
    if (!schema) return keep(n, "KEEP (no schema)");

    // The type parameter of the first float input whose type is a parameter: the inputs
    // and outputs that share it are what the node computes in. Other float parameters
    // (BatchNormalization's T1/T2, Dropout's ratio) keep their dtype.
    std::string param;
    // PyTorch's promotion rule: a one-element constant (a scale, an epsilon) does not
    // widen a computation, so x_fp16 * 0.125 stays fp16; it is cast to the result instead.
    DType current = DType::kUndefined, weak = DType::kUndefined;
    const bool bias_add = is_linear_bias_add(n);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const ir::Value* v = n.inputs[i];
      if (!v || !is_float(v->type.dtype)) continue;
      const std::string t = formal_type(schema->inputs(), i);
      if (!constraint(*schema, t)) continue;
      if (param.empty()) param = t;
      if (t != param) continue;
      if (is_weak_constant(*v) || (bias_add && v->is_initializer())) {
        weak = widest(weak, v->type.dtype);
      } else {
        current = widest(current, v->type.dtype);
      }
    }
    if (param.empty()) return decide(n, DType::kUndefined, "KEEP (no float inputs)");
    if (current == DType::kUndefined) current = weak;
    if (bias_add && current == low_) d.rule += "; bias of a linear layer: cast as torch's linear";

    DType target = current;
    if (current == DType::kFloat64) {
      d.rule += "; float64 left as it is";
    } else if (d.op_class == OpClass::kAllow) {
      target = low_;
    } else if (d.op_class == OpClass::kDeny) {
      target = DType::kFloat32;
    }
    if (d.op_class == OpClass::kFollow && target == DType::kFloat32 && is_layout_op(n) &&
        only_low_readers(n)) {
      // Casting before a pure data movement is the same as after it; done before, the Cast
      // reads the parameter itself (a transposed weight): one Cast per parameter, and its
      // backward hands the fp32 master an fp32 gradient.
      target = low_;
      d.rule += "; " + std::string(dtype_name(low_)) + ": only " + std::string(dtype_name(low_)) +
                " ops read it";
    }
    if (n.op_type == "BatchNormalization" && *version < 15 && target != DType::kFloat64) {
      target = DType::kFloat32;
      d.rule = "fp32 (BatchNormalization below opset 15)";
      if (!bn_noted_) {
        report_.notes.push_back(
            "opset " + std::to_string(*version) +
            " < 15: BatchNormalization's scale/bias/mean/var must have X's type, so "
            "BatchNormalization keeps X in fp32");
        bn_noted_ = true;
      }
    }
    if (target == low_ && has_ampc_form(n) && !allows(*schema, param, target)) {
      // ONNX's Conv, ConvTranspose, pooling ops and some activations have no bfloat16 in these
      // opsets (Celu no float16 either): their ampc forms are the same ops with it.
      use_ampc_domain(n);
      d.rule += "; as ampc." + n.op_type + " (ONNX's " + n.op_type + " has no " +
                std::string(dtype_name(target)) + ")";
    } else if (!allows(*schema, param, target)) {
      d.rule += "; fp32: opset " + std::to_string(*version) + " " + n.op_type + " has no " +
                std::string(dtype_name(target));
      target = DType::kFloat32;
    }
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      ir::Value* v = n.inputs[i];
      if (!v || !is_float(v->type.dtype) || formal_type(schema->inputs(), i) != param) continue;
      if (v->type.dtype != target) ir::set_input(&n, i, cast_to(v, target));
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      ir::Value* v = n.outputs[i];
      if (v && is_float(v->type.dtype) && formal_type(schema->outputs(), i) == param)
        set_output_dtype(v, target);
    }
    decide(n, target, std::move(d.rule));
  }

  static bool has_ampc_form(const ir::Node& n) {
    return n.domain.empty() && ops::has_ampc_form(n.op_type);
  }

  void use_ampc_domain(ir::Node& n) {
    ops::register_ampc_schemas();
    n.domain = ops::kAmpcDomain;
    if (!model_.opset_version(ops::kAmpcDomain))
      model_.opsets.push_back({ops::kAmpcDomain, ops::kAmpcDomainVersion});
  }

  // Graph outputs (the loss) and state-update sources keep the dtype the model gave them:
  // the producer writes a new low value, and a Cast back up writes the original.
  void restore_outputs() {
    std::vector<ir::Value*> keep = g_.outputs;
    for (const auto& u : model_.state_updates) keep.push_back(u.source);
    for (ir::Value* v : keep) {
      auto it = original_.find(v);
      if (it == original_.end() || v->type.dtype == it->second || !v->producer) continue;
      ir::Value* low =
          g_.add_value(fresh(v->name + "_" + std::string(dtype_name(v->type.dtype))), v->type);
      ir::set_output(v->producer, static_cast<size_t>(v->producer_output), low);
      ir::replace_all_uses(v, low);
      v->type.dtype = it->second;
      original_.erase(it);
      ir::Node* c = g_.add_node("Cast", {low}, {v}, fresh("autocast/" + v->name + "_restore"));
      c->attributes.push_back(ir::Attribute::make_int("to", static_cast<int64_t>(v->type.dtype)));
      record_cast(*c, *low, v->type.dtype);
    }
  }

  ir::Model& model_;
  ir::Graph& g_;
  PrecisionPolicy policy_;
  DType low_;
  AutocastReport report_;
  std::set<std::string> names_;
  ir::Node* current_ = nullptr;  // the node being processed
  // Inserted Casts and the node each goes before (null: stays at the end).
  std::vector<std::pair<ir::Node*, const ir::Node*>> placement_;
  std::map<std::pair<ir::Value*, DType>, ir::Value*> cache_;
  std::map<ir::Value*, ir::Value*> source_;  // inserted Cast result -> the value it casts
  std::map<ir::Value*, DType> original_;     // node results whose dtype the pass changed
  struct Gelu {
    ErfGelu chain;
    bool fp32;  // decided at its first node: the chain runs as PyTorch's gelu
  };
  std::vector<Gelu> gelus_;
  std::map<const ir::Node*, size_t> gelu_of_;  // node of a GELU chain -> its index in gelus_
  // Casts that go just after a node (the rounding of a GELU's result).
  std::vector<std::pair<ir::Node*, const ir::Node*>> after_;
  bool bn_noted_ = false;
};

}  // namespace

namespace {

// Each precision's name and storage dtype; the first is what an out-of-range value reads as.
struct PrecisionInfo {
  Precision precision;
  std::string_view name;
  DType dtype;
};
constexpr PrecisionInfo kPrecisions[] = {{Precision::kFP32, "fp32", DType::kFloat32},
                                         {Precision::kFP16, "fp16", DType::kFloat16},
                                         {Precision::kBF16, "bf16", DType::kBFloat16}};

const PrecisionInfo& precision_info(Precision p) {
  for (const auto& i : kPrecisions) {
    if (i.precision == p) return i;
  }
  return kPrecisions[0];
}

}  // namespace

std::string_view precision_name(Precision p) {
  return precision_info(p).name;
}

Precision parse_precision(std::string_view name) {
  for (const auto& i : kPrecisions) {
    if (i.name == name) return i.precision;
  }
  throw Error("unknown precision '" + std::string(name) + "' (expected fp32, fp16 or bf16)");
}

DType precision_dtype(Precision p) {
  return precision_info(p).dtype;
}

int64_t AutocastReport::total_cast_bytes() const {
  int64_t total = 0;
  for (const auto& c : casts) total += std::max<int64_t>(c.bytes_moved, 0);
  return total;
}

AutocastReport apply_autocast(ir::Model& model, const AutocastOptions& options) {
  // The policy is built (and overrides checked) even for fp32, so a bad --deny is an error
  // whatever the precision.
  Autocaster pass(model, options);
  if (options.precision != Precision::kFP32 && !model.state_updates.empty()) {
    throw Error("--precision " + std::string(precision_name(options.precision)) +
                ": the model already holds its training step (ONNX training format); "
                "autocast applies to a forward graph before differentiation");
  }
  if (options.precision == Precision::kFP32) {
    AutocastReport r;
    r.precision = "fp32";
    return r;
  }
  return pass.run();
}

}  // namespace ampc::passes
