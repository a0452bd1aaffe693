// The entry functions of a KernelDef around its per-element body (ir_body.h): the host's rows
// of a vectorisable loop, the NVPTX grid-stride loop.
#include "kernels/codegen/ir_builder.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <vector>

#include "kernels/codegen/instr_set.h"
#include "kernels/codegen/ir_body.h"

namespace ampc::kernels::codegen {
namespace {

// Iteration-space element count, or -1 for a flat kernel.
int64_t element_count(const KernelDef& k) {
  if (k.flat()) return -1;
  int64_t n = 1;
  for (int64_t d : k.shape()) n *= d;
  return n;
}

// Offset of a strided operand for the row-major element index `rest` over dimensions
// [0, ndims): sum of coordinate * stride, with the shape as constants, in the integer type of
// `rest` (i64, or i32 where every index fits: vector division by a constant has no 64-bit form).
Value* strided_offset(llvm::IRBuilder<>& b, const KernelDef& k, const Operand& op, Value* rest,
                      int ndims) {
  llvm::Type* t = rest->getType();
  auto constant = [t](int64_t v) { return llvm::ConstantInt::get(t, static_cast<uint64_t>(v)); };
  Value* offset = constant(0);
  for (int d = ndims - 1; d >= 0; --d) {
    Value* dim = constant(k.shape(d));
    if (op.strides(d) != 0) {
      Value* coord = d == 0 ? rest : b.CreateURem(rest, dim);
      offset = b.CreateAdd(offset, b.CreateMul(coord, constant(op.strides(d))));
    }
    if (d > 0) rest = b.CreateUDiv(rest, dim);
  }
  return offset;
}

// Per input, its offset at element i: 0 for a scalar, i for a full operand, and for a strided
// one (input j) what `strided_at(j)` computes, as i64. Every loop of the host and the device
// reads its operands through this.
std::vector<Value*> element_offsets(llvm::IRBuilder<>& b, const KernelDef& k, Value* i,
                                    const std::function<Value*(int)>& strided_at) {
  std::vector<Value*> offsets;
  for (int j = 0; j < k.inputs_size(); ++j) {
    const Operand& op = k.inputs(j);
    if (op.scalar()) {
      offsets.push_back(b.getInt64(0));
    } else if (!strided(op)) {
      offsets.push_back(i);
    } else {
      offsets.push_back(b.CreateZExtOrTrunc(strided_at(j), b.getInt64Ty()));
    }
  }
  return offsets;
}

// strided_offset of input j over every dimension for the element index `index`.
std::function<Value*(int)> offsets_over_all_dims(llvm::IRBuilder<>& b, const KernelDef& k,
                                                 Value* index) {
  return
      [&b, &k, index](int j) { return strided_offset(b, k, k.inputs(j), index, k.shape_size()); };
}

// Rows shorter than this (small feature maps: a 2x2 map under a per-channel operand) are not
// worth a row loop each: the vector body never runs and the per-row set-up dominates. Their
// kernels run one flat loop with every strided offset computed per element in 32 bits, which
// vectorises (gathers).
constexpr int64_t kShortRow = 16;

bool flat_strided_loop(const KernelDef& k) {
  const int64_t n = element_count(k);
  return k.shape_size() > 0 && k.shape(k.shape_size() - 1) < kShortRow && n > 0 &&
         n <= (int64_t{1} << 31) - 1;
}

// Branches to body_bb when first < end, else to exit, and opens body_bb with the loop's
// counter: a phi that starts at first (the caller adds the latch's value).
llvm::PHINode* enter_loop(llvm::IRBuilder<>& b, llvm::BasicBlock* body_bb, Value* first, Value* end,
                          llvm::BasicBlock* exit, const char* counter) {
  llvm::BasicBlock* pre = b.GetInsertBlock();
  b.CreateCondBr(b.CreateICmpSLT(first, end), body_bb, exit);
  b.SetInsertPoint(body_bb);
  llvm::PHINode* phi = b.CreatePHI(b.getInt64Ty(), 2, counter);
  phi->addIncoming(first, pre);
  return phi;
}

// for (i = from; i < to; ++i) body(i), as a rotated loop; `loop_md` tags its latch.
void emit_loop(llvm::IRBuilder<>& b, Value* from, Value* to, llvm::MDNode* loop_md,
               const std::function<void(Value*)>& body) {
  llvm::Function* f = b.GetInsertBlock()->getParent();
  llvm::BasicBlock* loop = llvm::BasicBlock::Create(b.getContext(), "loop", f);
  llvm::BasicBlock* exit = llvm::BasicBlock::Create(b.getContext(), "loop.exit", f);
  llvm::PHINode* i = enter_loop(b, loop, from, to, exit, "i");
  body(i);
  Value* next = b.CreateAdd(i, b.getInt64(1), "", /*HasNUW=*/true, /*HasNSW=*/true);
  i->addIncoming(next, b.GetInsertBlock());
  llvm::BranchInst* br = b.CreateCondBr(b.CreateICmpSLT(next, to), loop, exit);
  if (loop_md) br->setMetadata(llvm::LLVMContext::MD_loop, loop_md);
  b.SetInsertPoint(exit);
}

// Returns early (to `done`) when the guard input is true.
void emit_guard(llvm::IRBuilder<>& b, const KernelDef& k, Value* guard_ptr,
                llvm::BasicBlock* done) {
  if (k.guard() == 0) return;
  Value* g = b.CreateLoad(b.getInt8Ty(), guard_ptr);
  llvm::BasicBlock* run =
      llvm::BasicBlock::Create(b.getContext(), "run", b.GetInsertBlock()->getParent());
  b.CreateCondBr(b.CreateICmpNE(g, b.getInt8(0)), done, run);
  b.SetInsertPoint(run);
}

// How many vectors the host loop of k computes per iteration: 4 where the body computes exp,
// erf, tanh or sigmoid in fp32 (float_math.h's polynomials, inline: dozens of dependent
// operations an element, so the loop waits on their latency rather than on memory), LLVM's
// own choice (0) otherwise, which was one or two there. Measured on gpt_wide's bf16 GELU
// kernels (batch 8 x 128 x 2048, `ampc bench --profile`, old and new alternated three times):
// forward 1.21-1.30 -> 0.80-0.84 ms, backward 1.63-1.69 -> 1.15-1.25 ms; 8 was slower than 4.
int host_interleave(const KernelDef& k) {
  for (const auto& in : k.body()) {
    const bool polynomial =
        in.op() == "exp" || in.op() == "erf" || in.op() == "tanh" || in.op() == "sigmoid";
    if (polynomial && in.dtype() != kF64) return 4;
  }
  return 0;
}

// A distinct access group, and loop metadata declaring its accesses free of loop-carried
// dependences: an output aliases an input only element for element (in-place updates), so
// the vectoriser needs no run-time overlap checks; with `interleave` > 0, that many vectors
// per iteration.
std::pair<llvm::MDNode*, llvm::MDNode*> parallel_loop_md(llvm::LLVMContext& c, int interleave) {
  llvm::MDNode* group = llvm::MDNode::getDistinct(c, {});
  llvm::Metadata* parallel[] = {llvm::MDString::get(c, "llvm.loop.parallel_accesses"), group};
  std::vector<llvm::Metadata*> ops = {nullptr, llvm::MDNode::get(c, parallel)};
  if (interleave > 0) {
    llvm::Metadata* count[] = {llvm::MDString::get(c, "llvm.loop.interleave.count"),
                               llvm::ConstantAsMetadata::get(
                                   llvm::ConstantInt::get(llvm::Type::getInt32Ty(c), interleave))};
    ops.push_back(llvm::MDNode::get(c, count));
  }
  llvm::MDNode* loop = llvm::MDNode::getDistinct(c, ops);
  loop->replaceOperandWith(0, loop);
  return {group, loop};
}

void build_host(llvm::Function* f, const KernelDef& k) {
  llvm::LLVMContext& c = f->getContext();
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", f));
  llvm::BasicBlock* done = llvm::BasicBlock::Create(c, "done", f);
  Value* ops = f->getArg(0);
  Value* begin = f->getArg(1);
  Value* end = f->getArg(2);
  auto operand = [&](int j) {
    return b.CreateLoad(b.getPtrTy(), b.CreateConstInBoundsGEP1_64(b.getPtrTy(), ops, j));
  };
  if (k.guard() != 0) emit_guard(b, k, operand(k.guard() - 1), done);
  std::vector<Value*> inputs, outputs;
  for (int j = 0; j < k.inputs_size(); ++j) inputs.push_back(operand(j));
  for (int o = 0; o < k.outputs_size(); ++o) outputs.push_back(operand(k.inputs_size() + o));
  const auto [group, loop_md] = parallel_loop_md(c, host_interleave(k));
  BodyBuilder body(b, *f->getParent(), k, Target::kHost);
  bool any_strided = false;
  for (const Operand& op : k.inputs()) any_strided = any_strided || strided(op);
  if (element_count(k) == 0) {
    b.CreateBr(done);
  } else if (!any_strided) {
    emit_loop(b, begin, end, loop_md, [&](Value* i) {
      // No strided operand: the callback is never called.
      const auto offsets = element_offsets(b, k, i, offsets_over_all_dims(b, k, i));
      body.emit(inputs, offsets, outputs, i, group);
    });
    b.CreateBr(done);
  } else if (flat_strided_loop(k)) {
    emit_loop(b, begin, end, loop_md, [&](Value* i) {
      const auto offsets =
          element_offsets(b, k, i, offsets_over_all_dims(b, k, b.CreateTrunc(i, b.getInt32Ty())));
      body.emit(inputs, offsets, outputs, i, group);
    });
    b.CreateBr(done);
  } else {
    // Rows of the innermost dimension: per row the strided operands' base offsets (constant
    // div/mod over the outer dimensions), then a vectorisable loop along the row.
    const int ndims = k.shape_size();
    Value* last = b.getInt64(k.shape(ndims - 1));
    llvm::BasicBlock* row_bb = llvm::BasicBlock::Create(c, "row", f);
    llvm::PHINode* start = enter_loop(b, row_bb, begin, end, done, "row.start");
    Value* row = b.CreateUDiv(start, last);
    Value* row_first = b.CreateMul(row, last);
    Value* row_end = b.CreateAdd(row_first, last);
    row_end = b.CreateSelect(b.CreateICmpSLT(row_end, end), row_end, end);
    std::vector<Value*> bases;
    for (const Operand& op : k.inputs()) {
      bases.push_back(strided(op) ? strided_offset(b, k, op, row, ndims - 1) : nullptr);
    }
    emit_loop(b, start, row_end, loop_md, [&](Value* i) {
      Value* col = b.CreateSub(i, row_first);
      const auto offsets = element_offsets(b, k, i, [&](int j) {
        return b.CreateAdd(bases[j], b.CreateMul(col, b.getInt64(k.inputs(j).strides(ndims - 1))));
      });
      body.emit(inputs, offsets, outputs, i, group);
    });
    start->addIncoming(row_end, b.GetInsertBlock());
    b.CreateCondBr(b.CreateICmpSLT(row_end, end), row_bb, done);
  }
  b.SetInsertPoint(done);
  b.CreateRetVoid();
}

void build_nvptx(llvm::Function* f, const KernelDef& k) {
  llvm::LLVMContext& c = f->getContext();
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", f));
  llvm::BasicBlock* done = llvm::BasicBlock::Create(c, "done", f);
  const int n_ops = k.inputs_size() + k.outputs_size();
  Value* count = f->getArg(n_ops);
  if (k.guard() != 0) emit_guard(b, k, f->getArg(k.guard() - 1), done);
  std::vector<Value*> inputs, outputs;
  for (int j = 0; j < k.inputs_size(); ++j) inputs.push_back(f->getArg(j));
  for (int o = 0; o < k.outputs_size(); ++o) outputs.push_back(f->getArg(k.inputs_size() + o));
  auto sreg = [&](llvm::Intrinsic::ID id) {
    return b.CreateZExt(b.CreateIntrinsic(b.getInt32Ty(), id, {}), b.getInt64Ty());
  };
  Value* block_size = sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x);
  Value* first =
      b.CreateAdd(b.CreateMul(sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x), block_size),
                  sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x));
  Value* stride = b.CreateMul(sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x), block_size);
  llvm::BasicBlock* loop = llvm::BasicBlock::Create(c, "loop", f);
  llvm::PHINode* i = enter_loop(b, loop, first, count, done, "i");
  const std::vector<Value*> offsets = element_offsets(b, k, i, offsets_over_all_dims(b, k, i));
  BodyBuilder(b, *f->getParent(), k, Target::kNvptx).emit(inputs, offsets, outputs, i, nullptr);
  Value* next = b.CreateAdd(i, stride);
  i->addIncoming(next, b.GetInsertBlock());
  b.CreateCondBr(b.CreateICmpSLT(next, count), loop, done);
  b.SetInsertPoint(done);
  b.CreateRetVoid();
}

}  // namespace

llvm::Function* add_kernel(llvm::Module& m, const KernelDef& k, const std::string& symbol,
                           Target target) {
  validate_kernel(k);
  llvm::LLVMContext& c = m.getContext();
  llvm::Type* ptr = llvm::PointerType::get(c, 0);
  llvm::Type* i64 = llvm::Type::getInt64Ty(c);
  std::vector<llvm::Type*> params;
  if (target == Target::kHost) {
    params = {ptr, i64, i64};
  } else {
    params.assign(k.inputs_size() + k.outputs_size(), ptr);
    params.push_back(i64);
  }
  auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(c), params, false);
  auto* f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, symbol, m);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  if (target == Target::kHost) {
    build_host(f, k);
  } else {
    f->setCallingConv(llvm::CallingConv::PTX_Kernel);
    // LLVM 19's NVPTX back end also reads the kernel flag from !nvvm.annotations.
    llvm::Metadata* md[] = {
        llvm::ValueAsMetadata::get(f), llvm::MDString::get(c, "kernel"),
        llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(c), 1))};
    m.getOrInsertNamedMetadata("nvvm.annotations")->addOperand(llvm::MDNode::get(c, md));
    build_nvptx(f, k);
  }
  return f;
}

}  // namespace ampc::kernels::codegen
