# lit configuration for planc: FileCheck tests of the front end, the dialects,
# their passes and the planc driver.
import os
import sys
import lit.formats

config.name = "planc"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".plan", ".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "README.md", "lit.cfg.py", "unit", "fuzz", "bench",
                   "gpu", "e2e"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.planc_obj_root, "test")

config.environment["PATH"] = os.pathsep.join(
    [config.planc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])
# Diagnostics without colour, the same on a terminal and in CI.
config.environment["TERM"] = "dumb"
config.environment.pop("PLANC_STDLIB", None)
config.substitutions.append(("%stdlib", config.planc_stdlib_dir))
config.substitutions.append(("%examples", os.path.join(config.planc_src_root, "examples")))
# MLIR's runner support library, for the tests that execute lowered IR with mlir-runner.
config.substitutions.append(("%mlir_c_runner_utils",
                             os.path.join(os.path.dirname(config.llvm_tools_dir), "lib", "libmlir_c_runner_utils.so")))
# The Python that runs lit, for the tests' checker scripts.
config.substitutions.append(("%python", sys.executable))
