// Entry points on flat buffers (plan/Training/Flat.h).
#include "plan/Training/Flat.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
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

void Flat::addInPlace(Value delta, const FlatTensor &p, double scale) {
  Value range = readFlat(p, /*writable=*/true);
  AffineMap id = b.getMultiDimIdentityMap(1);
  auto sum = linalg::GenericOp::create(
      b, loc, TypeRange{range.getType()}, ValueRange{delta}, ValueRange{range}, ArrayRef<AffineMap>{id, id},
      ArrayRef<utils::IteratorType>{utils::IteratorType::parallel}, [&](OpBuilder &nb, Location l, ValueRange args) {
        Value d = args[0];
        if (scale != 1.0)
          d = arith::MulFOp::create(nb, l, d, arith::ConstantOp::create(nb, l, nb.getFloatAttr(d.getType(), scale)));
        linalg::YieldOp::create(nb, l, ValueRange{arith::AddFOp::create(nb, l, args[1], d)});
      });
  writeFlat(sum.getResult(0), p);
}

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
