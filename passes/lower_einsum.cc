#include "passes/lower_einsum.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"

namespace ampc::passes {
namespace {

using Shape = std::vector<int64_t>;
using Letters = std::string;  // one subscript per axis

// An operand: its value and the subscript of each of its axes.
struct Operand {
  ir::Value* value;
  Letters letters;
  const Shape& shape() const { return *value->type.shape; }
};

struct Equation {
  std::vector<Letters> inputs;
  Letters output;
};

std::string strip_spaces(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c != ' ') out += c;
  }
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts(1);
  for (char c : s) {
    if (c == sep)
      parts.emplace_back();
    else
      parts.back() += c;
  }
  return parts;
}

class Lowering {
 public:
  Lowering(ir::Model& model, ir::Node& n)
      : g_(*model.graph), n_(n), opset_(model.opset_version(n.domain).value_or(0)) {
    base_ = (n.name.empty() ? std::string("einsum") : n.name) + "/";
  }

  void run() {
    const Equation eq = parse();
    std::vector<Operand> ops;
    for (size_t k = 0; k < n_.inputs.size(); ++k) ops.push_back({n_.inputs[k], eq.inputs[k]});
    record_sizes(ops, eq.output);
    const size_t first_new = g_.nodes.size();
    Operand cur = ops[0];
    for (size_t k = 1; k < ops.size(); ++k) {
      Letters keep = eq.output;
      for (size_t j = k + 1; j < ops.size(); ++j) keep += ops[j].letters;
      cur = contract(cur, ops[k], keep);
    }
    ir::Value* result = in_output_order(sum_out(cur, eq.output, ""), eq.output);
    n_.outputs[0]->type = result->type;
    ir::replace_by_appended(g_, &n_, first_new, result);  // n_ is gone from here on
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error("node " + n_.label() + ": " + why);
  }

  // The size of every subscript, a size-1 axis giving way to another operand's size.
  void record_sizes(const std::vector<Operand>& ops, const Letters& output) {
    for (const auto& op : ops) {
      for (size_t i = 0; i < op.letters.size(); ++i) {
        const int64_t size = op.shape()[i];
        auto [it, added] = size_.emplace(op.letters[i], size);
        if (added || it->second == size) continue;
        if (it->second != 1 && size != 1)
          fail("subscript '" + std::string(1, op.letters[i]) + "' has sizes " +
               std::to_string(it->second) + " and " + std::to_string(size));
        it->second = std::max(it->second, size);
      }
    }
    for (char c : output) {
      if (!size_.count(c)) fail("output subscript '" + std::string(1, c) + "' is in no operand");
    }
  }

  // The result in the output's order, as a value this lowering made (an Identity when the
  // result is an operand itself), which takes the Einsum's output value's place.
  ir::Value* in_output_order(const Operand& result, const Letters& output) {
    const Operand ordered = transpose(result, output);
    if (made_.count(ordered.value)) return ordered.value;
    ir::Value* copy = value("result", ordered.shape());
    node("Identity", {ordered.value}, copy);
    return copy;
  }

  Equation parse() const {
    const auto* a = n_.attr("equation");
    if (!a) fail("Einsum has no equation");
    const std::string eq = strip_spaces(a->s);
    const size_t arrow = eq.find("->");
    const std::vector<std::string> terms = split(eq.substr(0, arrow), ',');
    if (terms.size() != n_.inputs.size())
      fail("equation '" + eq + "' names " + std::to_string(terms.size()) + " operands for " +
           std::to_string(n_.inputs.size()) + " inputs");
    // Ellipsis axes get characters no subscript uses, the same ones right-aligned in every
    // operand (numpy's broadcasting).
    size_t ellipsis_rank = 0;
    for (size_t k = 0; k < terms.size(); ++k) {
      const ir::Value* v = n_.inputs[k];
      if (!v || !v->type.is_static()) fail("Einsum needs operands of static shape");
      const size_t named = terms[k].size() - (terms[k].find("...") != std::string::npos ? 3 : 0);
      if (terms[k].find("...") != std::string::npos) {
        if (v->type.shape->size() < named)
          fail("operand " + std::to_string(k) + " has too few axes");
        ellipsis_rank = std::max(ellipsis_rank, v->type.shape->size() - named);
      }
    }
    Letters ellipsis;
    for (char c = '0'; ellipsis.size() < ellipsis_rank; ++c) ellipsis += c;
    Equation out;
    std::map<char, int> uses;
    for (size_t k = 0; k < terms.size(); ++k) {
      std::string t = terms[k];
      if (const size_t e = t.find("..."); e != std::string::npos) {
        const size_t r = n_.inputs[k]->type.shape->size() - (t.size() - 3);
        t = t.substr(0, e) + ellipsis.substr(ellipsis_rank - r) + t.substr(e + 3);
      }
      if (t.size() != n_.inputs[k]->type.shape->size())
        fail("operand " + std::to_string(k) + " '" + terms[k] + "' does not match its rank " +
             std::to_string(n_.inputs[k]->type.shape->size()));
      for (char c : t) {
        if (!std::isalpha(static_cast<unsigned char>(c)) && ellipsis.find(c) == Letters::npos)
          fail("equation '" + eq + "' has the character '" + std::string(1, c) + "'");
        ++uses[c];
      }
      out.inputs.push_back(t);
    }
    if (arrow != std::string::npos) {
      std::string o = eq.substr(arrow + 2);
      if (const size_t e = o.find("..."); e != std::string::npos)
        o = o.substr(0, e) + ellipsis + o.substr(e + 3);
      out.output = o;
    } else {  // implicit: the ellipsis, then the subscripts used once, sorted
      out.output = ellipsis;
      for (const auto& [c, count] : uses) {
        if (count == 1 && ellipsis.find(c) == Letters::npos) out.output += c;
      }
    }
    return out;
  }

  ir::Value* value(const std::string& what, Shape shape) {
    ir::Value* v = g_.add_value(base_ + what + std::to_string(++count_),
                                {n_.inputs[0]->type.dtype, std::move(shape)});
    made_.insert(v);
    return v;
  }

  ir::Value* int64s(const std::vector<int64_t>& values) {
    ir::Tensor t = ir::tensor_of<int32_t>(DType::kInt64, DType::kInt64,
                                          {static_cast<int64_t>(values.size())}, values);
    ir::Value* v =
        g_.add_value(base_ + "const" + std::to_string(++count_), {DType::kInt64, t.dims});
    t.name = v->name;
    v->initializer = std::make_unique<ir::Tensor>(std::move(t));
    g_.initializers.push_back(v);
    return v;
  }

  ir::Node* node(const std::string& op, std::vector<ir::Value*> in, ir::Value* out) {
    return g_.add_node(op, std::move(in), {out}, base_ + op + std::to_string(++count_));
  }

  Shape shape_of(const Letters& letters) const {
    Shape s;
    for (char c : letters) s.push_back(size_.at(c));
    return s;
  }

  // `op`'s axes in the order `to` (a permutation of its letters).
  Operand transpose(const Operand& op, const Letters& to) {
    if (op.letters == to) return op;
    std::vector<int64_t> perm;
    for (char c : to) perm.push_back(static_cast<int64_t>(op.letters.find(c)));
    Shape s;
    for (int64_t p : perm) s.push_back(op.shape()[static_cast<size_t>(p)]);
    ir::Value* out = value("transposed", s);
    node("Transpose", {op.value}, out)
        ->attributes.push_back(ir::Attribute::make_ints("perm", perm));
    return {out, to};
  }

  ir::Value* reshape(ir::Value* v, const Shape& s) {
    if (*v->type.shape == s) return v;
    ir::Value* out = value("reshaped", s);
    node("Reshape", {v, int64s(s)}, out);
    return out;
  }

  // Size-1 axes of `op` widened to the size their subscript has among the operands.
  Operand expand(const Operand& op) {
    const Shape want = shape_of(op.letters);
    if (want == op.shape()) return op;
    ir::Value* out = value("expanded", want);
    node("Expand", {op.value, int64s(want)}, out);
    return {out, op.letters};
  }

  // `op` summed over its subscripts that are in neither `keep` nor `other`.
  Operand sum_out(const Operand& op, const Letters& keep, const Letters& other) {
    std::vector<int64_t> axes;
    Letters left;
    for (size_t i = 0; i < op.letters.size(); ++i) {
      const char c = op.letters[i];
      if (keep.find(c) == Letters::npos && other.find(c) == Letters::npos)
        axes.push_back(static_cast<int64_t>(i));
      else
        left += c;
    }
    if (axes.empty()) return op;
    Shape s;
    for (char c : left) s.push_back(op.shape()[op.letters.find(c)]);
    ir::Value* out = value("summed", s);
    ir::Node* r = opset_ >= 13 ? node("ReduceSum", {op.value, int64s(axes)}, out)
                               : node("ReduceSum", {op.value}, out);
    if (opset_ < 13) r->attributes.push_back(ir::Attribute::make_ints("axes", axes));
    r->attributes.push_back(ir::Attribute::make_int("keepdims", 0));
    return {out, left};
  }

  // a and b contracted into one operand holding the subscripts of `keep` they have:
  // [batch, a's own, b's own] from a MatMul of [batch, a's own, summed] by
  // [batch, summed, b's own].
  Operand contract(Operand a, Operand b, const Letters& keep) {
    a = expand(sum_out(a, keep, b.letters));
    b = expand(sum_out(b, keep, a.letters));
    Letters batch, summed, own_a, own_b;
    for (char c : a.letters) {
      if (b.letters.find(c) == Letters::npos)
        own_a += c;
      else if (keep.find(c) != Letters::npos)
        batch += c;
      else
        summed += c;
    }
    for (char c : b.letters) {
      if (a.letters.find(c) == Letters::npos) own_b += c;
    }
    auto product = [&](const Letters& l) {
      int64_t p = 1;
      for (char c : l) p *= size_.at(c);
      return p;
    };
    const int64_t nb = product(batch), m = product(own_a), k = product(summed), n = product(own_b);
    a = transpose(a, batch + own_a + summed);
    b = transpose(b, batch + summed + own_b);
    ir::Value* lhs = reshape(a.value, {nb, m, k});
    ir::Value* rhs = reshape(b.value, {nb, k, n});
    ir::Value* prod = value("matmul", {nb, m, n});
    node("MatMul", {lhs, rhs}, prod);
    const Letters letters = batch + own_a + own_b;
    return {reshape(prod, shape_of(letters)), letters};
  }

  ir::Graph& g_;
  ir::Node& n_;
  int64_t opset_;
  std::string base_;
  int count_ = 0;
  std::map<char, int64_t> size_;
  std::set<const ir::Value*> made_;  // the values this lowering created
};

// Whether a subscript repeats within one operand of the equation (a diagonal, "ii->i").
bool has_diagonal(const ir::Node& n) {
  const auto* a = n.attr("equation");
  if (!a) return false;
  const std::string eq = strip_spaces(a->s);
  for (const auto& term : split(eq.substr(0, eq.find("->")), ',')) {
    std::set<char> seen;
    for (char c : term) {
      if (std::isalpha(static_cast<unsigned char>(c)) && !seen.insert(c).second) return true;
    }
  }
  return false;
}

// Einsums with operands of static shape, but no diagonal: those stay the CPU op's (inference).
bool ready(const ir::Node& n) {
  if (n.op_type != "Einsum" || !n.domain.empty() || n.outputs.size() != 1 || n.inputs.empty() ||
      has_diagonal(n))
    return false;
  for (const ir::Value* v : n.inputs) {
    if (!v || !v->type.is_static()) return false;
  }
  return true;
}

}  // namespace

int lower_einsum(ir::Model& model) {
  std::vector<ir::Node*> todo;
  for (const auto& n : model.graph->nodes) {
    if (ready(*n)) todo.push_back(n.get());
  }
  for (ir::Node* n : todo) Lowering(model, *n).run();
  return static_cast<int>(todo.size());
}

}  // namespace ampc::passes
