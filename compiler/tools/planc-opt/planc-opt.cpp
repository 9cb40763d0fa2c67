// planc-opt: mlir-opt with every planc dialect and pass registered.
#include "plan/Compiler/Pipeline.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  plan::registerDialects(registry);
  plan::registerPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "planc optimizer driver\n", registry));
}
