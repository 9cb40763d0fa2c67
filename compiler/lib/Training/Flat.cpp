// Entry points on flat buffers (plan/Training/Flat.h).
#include "plan/Training/Flat.h"

#include "mlir/IR/IRMapping.h"

using namespace mlir;

namespace plan::training {

SmallVector<Value> inlineBody(OpBuilder &b, func::FuncOp callee, ValueRange args) {
  Block &body = callee.getBody().front();
  IRMapping map;
  map.map(body.getArguments(), args);
  for (Operation &op : body.without_terminator())
    b.clone(op, map);
  SmallVector<Value> out;
  for (Value v : body.getTerminator()->getOperands())
    out.push_back(map.lookup(v));
  return out;
}

Value Flat::subview(const FlatTensor &p) {
  return memref::SubViewOp::create(b, loc, buffer, ArrayRef<OpFoldResult>{b.getIndexAttr(p.offset)},
                                   ArrayRef<OpFoldResult>{b.getIndexAttr(p.count)},
                                   ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
}

Value Flat::readFlat(const FlatTensor &p, bool writable) {
  auto t = RankedTensorType::get({p.count}, p.type.getElementType());
  return bufferization::ToTensorOp::create(b, loc, t, subview(p), /*restrict=*/true, writable);
}

Value Flat::read(const FlatTensor &p, bool writable) {
  Value t = readFlat(p, writable);
  return p.type.getRank() == 1 ? t : Value(tensor::ExpandShapeOp::create(b, loc, p.type, t, reassociation(p)));
}

void Flat::writeFlat(Value value, const FlatTensor &p) {
  auto m = bufferization::MaterializeInDestinationOp::create(b, loc, value, subview(p));
  m.setRestrict(true);
  m.setWritable(true);
}

void Flat::write(Value value, const FlatTensor &p) { writeFlat(flatten(value, p), p); }

Value Flat::flatten(Value v, const FlatTensor &p) {
  return p.type.getRank() == 1 ? v : Value(tensor::CollapseShapeOp::create(b, loc, v, reassociation(p)));
}

SmallVector<ReassociationIndices> Flat::reassociation(const FlatTensor &p) {
  ReassociationIndices all;
  for (int64_t i = 0; i < p.type.getRank(); ++i)
    all.push_back(i);
  return {all};
}

} // namespace plan::training
