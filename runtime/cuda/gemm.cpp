// planrt_cuda_gemm: cblas_sgemm's row-major C = alpha op(A) op(B) + beta C on the
// device through cuBLASLt, in the precision the compiler chose for this GEMM
// (planrt_gemm_compute, planrt_cuda.h): fp32 (CUBLAS_COMPUTE_32F: no TF32, so the
// products match the CPU target's within fp32 rounding); tensor cores on operands that
// are already bf16 or fp16 values (CUBLAS_COMPUTE_32F_FAST_16BF / _16F: cuBLASLt's
// down-conversion of the float32 operands loses nothing, the products are summed in
// fp32); or TF32 (CUBLAS_COMPUTE_32F_FAST_TF32). cuBLASLt is column-major: the
// row-major C [m, n] is the column-major Cᵀ [n, m] = op(B)ᵀ op(A)ᵀ, so B is passed as
// cuBLASLt's A and A as its B, each with its own transpose flag.
//
// A bf16 or fp16 GEMM's operands may be staged (PLANRT_CUDA_GEMM_STAGE, below): copied
// to 16-bit buffers whose leading dimensions and inner dimension k are padded to a
// multiple of 64 with zeros (gemm_stage.cu), so that cuBLASLt runs its native 16-bit
// kernels on aligned rows; the values, already bf16 (fp16) ones, are the same, the
// padding adds zero products, and the sums are fp32 as before. By default that is done
// for every such GEMM but one whose operands are aligned and whose result's rows are not
// (on an H100, cuBLASLt's 16-bit kernels beat its float32-input ones on each of
// gpt2_small's GEMMs but its output head's logits, 8,192 x 50,257: 6.7 ms staged, 4.8
// not): the head's two backward GEMMs then read copies whose rows of the vocabulary of
// 50,257 are padded to 50,304, with zeros where it is the inner dimension (docs/CUDA.md).
//
// A GEMM whose result the compiler wants rounded to bf16 (fp16) values
// (PLANRT_GEMM_ROUND_RESULT, plan-cuda-round-results) has its operands staged whatever the
// policy but never, n padded as k is, and cuBLASLt writes its result in 16 bits to a
// scratch buffer of rows padded to a multiple of 64, which one pass widens into C: half
// the bytes of a float32 result and its separate rounding, and aligned rows where C's are
// not (the logits' 50,257). Under the policy never, or PLANRT_CUDA_GEMM_ROUND=inplace, the
// float32 result is rounded in place.
//
// Operands the compiler stored in 16 bits (PLANRT_GEMM_HALF_A / _B / _C,
// plan-cuda-half-storage) are read and written as they are where their rows are 16-byte
// aligned and need no padding — no staging, no widening — and are copied (padded) or
// their result copied out of the padded scratch otherwise; a GEMM with one takes the
// 16-bit path whatever the staging policy.
//
// A step calls the same few shapes every step: the descriptor, the layouts and the
// algorithm cuBLASLt's heuristic picks are made on a shape's first call and kept.
#include "device.h"

#include "planrt_cuda.h"

#include <cublasLt.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

namespace {

using planrt::cuda::check;

void checkLt(cublasStatus_t s, const char *what) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return;
  std::string detail = std::string(what) + ": cuBLASLt status " + std::to_string(int(s));
  check(cudaErrorUnknown, detail.c_str());
}

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

// CBLAS constants (cblas.h).
enum { kRowMajor = 101, kNoTrans = 111, kTrans = 112 };

/// cuBLASLt's compute type and the name of each planrt_gemm_compute, by its value.
struct Compute {
  const char *name;
  cublasComputeType_t type;
};
constexpr Compute kComputes[] = {{"fp32", CUBLAS_COMPUTE_32F},
                                 {"bf16", CUBLAS_COMPUTE_32F_FAST_16BF},
                                 {"fp16", CUBLAS_COMPUTE_32F_FAST_16F},
                                 {"tf32", CUBLAS_COMPUTE_32F_FAST_TF32}};
static_assert(PLANRT_GEMM_F32 == 0 && PLANRT_GEMM_BF16 == 1 && PLANRT_GEMM_F16 == 2 && PLANRT_GEMM_TF32 == 3,
              "kComputes is indexed by planrt_gemm_compute");

/// The largest power of two up to 256 that divides the address: cuBLASLt assumes
/// 256-byte aligned operands unless told, and a parameter inside the flat buffer or a
/// view of an activation may be aligned to as little as 4 bytes.
uint32_t alignment(const void *p) {
  uint32_t a = 256;
  while (a > 4 && reinterpret_cast<uintptr_t>(p) % a != 0)
    a /= 2;
  return a;
}

/// What cuBLASLt needs for one GEMM shape, made once.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t x = nullptr, y = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

/// transA, transB, m, n, k, lda, ldb, ldc, the alignments of B, A and D (what cuBLASLt writes), compute,
/// whether A and B are 16-bit copies and whether C is (the leading dimensions and
/// alignments are those of the buffers cuBLASLt reads and writes).
using Shape = std::tuple<int32_t, int32_t, int32_t, int32_t, int32_t, int32_t, int32_t, int32_t, uint32_t, uint32_t,
                         uint32_t, int32_t, bool, bool>;

/// PLANRT_CUDA_GEMM_ROUND: how a rounded result (PLANRT_GEMM_ROUND_RESULT) is made: half,
/// the default (16-bit operands and result, widened), or inplace (the float32 result
/// rounded in place). Read on each call (tests switch it).
enum class Round { Half, InPlace };
Round roundPolicy() {
  const char *v = std::getenv("PLANRT_CUDA_GEMM_ROUND");
  if (!v || !*v || std::strcmp(v, "half") == 0)
    return Round::Half;
  if (std::strcmp(v, "inplace") != 0) {
    std::string what = std::string("PLANRT_CUDA_GEMM_ROUND=") + v + ": not one of half, inplace";
    check(cudaErrorInvalidValue, what.c_str());
  }
  return Round::InPlace;
}

/// PLANRT_CUDA_GEMM_STAGE: which bf16 and fp16 GEMMs get 16-bit copies of their operands
/// (never; auto, the default: all but those whose operands' rows are 16-byte aligned
/// and whose result's are not; operands: every one). Read on each call (tests switch it).
enum class Stage { Never, Auto, Operands };
Stage stagePolicy() {
  const char *v = std::getenv("PLANRT_CUDA_GEMM_STAGE");
  if (!v || !*v || std::strcmp(v, "auto") == 0)
    return Stage::Auto;
  for (auto [name, stage] : {std::pair{"never", Stage::Never}, std::pair{"operands", Stage::Operands}})
    if (std::strcmp(v, name) == 0)
      return stage;
  std::string what = std::string("PLANRT_CUDA_GEMM_STAGE=") + v + ": not one of never, auto, operands";
  check(cudaErrorInvalidValue, what.c_str());
  return Stage::Auto;
}

bool rowsAligned(const void *p, int32_t ld) { return reinterpret_cast<uintptr_t>(p) % 16 == 0 && ld % 4 == 0; }
int32_t padded(int32_t cols) { return (cols + 63) / 64 * 64; }

class Lt {
public:
  Lt() {
    checkLt(cublasLtCreate(&handle), "cublasLtCreate");
    check(cudaMalloc(&workspace, kWorkspaceBytes), "cudaMalloc of the cuBLASLt workspace");
  }
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;

  /// The plan of `s`, made on its first use.
  const Plan &plan(const Shape &s) {
    std::lock_guard<std::mutex> lock(mutex);
    auto [it, inserted] = plans.try_emplace(s);
    if (inserted)
      make(s, it->second);
    return it->second;
  }

private:
  std::mutex mutex;
  std::map<Shape, Plan> plans;

  void make(const Shape &s, Plan &p) {
    auto [transA, transB, m, n, k, lda, ldb, ldc, alignX, alignY, alignD, compute, staged, halfResult] = s;
    bool tb = transB == kTrans, ta = transA == kTrans;
    // 16-bit copies are multiplied in cuBLASLt's plain fp32 compute (their products are
    // exact, the sums fp32), float32 operands in the compute the compiler chose.
    cudaDataType_t in = !staged ? CUDA_R_32F : compute == PLANRT_GEMM_F16 ? CUDA_R_16F : CUDA_R_16BF;
    cublasComputeType_t type = staged ? CUBLAS_COMPUTE_32F : kComputes[compute].type;
    // Column-major views: X = B (op → n × k), Y = A (op → k × m), D = C (n × m).
    checkLt(cublasLtMatmulDescCreate(&p.desc, type, CUDA_R_32F), "cublasLtMatmulDescCreate");
    cublasOperation_t opX = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opY = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    checkLt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opX, sizeof opX), "TRANSA");
    checkLt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opY, sizeof opY), "TRANSB");
    checkLt(cublasLtMatrixLayoutCreate(&p.x, in, tb ? k : n, tb ? n : k, ldb), "layout of B");
    checkLt(cublasLtMatrixLayoutCreate(&p.y, in, ta ? m : k, ta ? k : m, lda), "layout of A");
    checkLt(cublasLtMatrixLayoutCreate(&p.d, halfResult ? in : CUDA_R_32F, n, m, ldc), "layout of C");
    cublasLtMatmulPreference_t pref;
    checkLt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    size_t ws = kWorkspaceBytes;
    checkLt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
            "workspace preference");
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t *> aligns[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignX},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignY},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignD},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignD}};
    for (auto [attr, value] : aligns)
      checkLt(cublasLtMatmulPreferenceSetAttribute(pref, attr, value, sizeof *value), "alignment preference");
    // A 16-bit result is rounded once, from fp32 sums: no split-K reduction in the output type.
    if (halfResult) {
      uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      checkLt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                                   sizeof schemes),
              "reduction scheme preference");
    }
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    cublasStatus_t heuristic =
        cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.x, p.y, p.d, p.d, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (heuristic != CUBLAS_STATUS_SUCCESS && heuristic != CUBLAS_STATUS_NOT_SUPPORTED)
      checkLt(heuristic, "cublasLtMatmulAlgoGetHeuristic");
    if (heuristic == CUBLAS_STATUS_NOT_SUPPORTED || found == 0) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "planrt_cuda_gemm: cuBLASLt has no algorithm for m=%d n=%d k=%d in %s%s", m, n,
                    k, kComputes[compute].name,
                    halfResult ? " (16-bit operands and result)" : staged ? " (16-bit copies of the operands)" : "");
      check(cudaErrorNotSupported, buf);
    }
    p.algo = result.algo;
  }
};

Lt &lt() {
  static Lt instance;
  return instance;
}

/// The operands cuBLASLt reads for one call: the caller's, or 16-bit copies (k, and n for a
/// 16-bit result, then padded), which release() frees once the stream is past the GEMM.
struct Operands {
  const void *a, *b;
  int32_t lda, ldb, k;
  int32_t n;               // the result's columns cuBLASLt computes (padded for a 16-bit result)
  bool staged = false;     // cuBLASLt reads 16-bit operands: copies, or the caller's 16-bit buffers
  bool ownA = false, ownB = false; // which are copies
  bool halfResult = false; // a rounded result written in 16 bits (then widened, unless C is 16-bit)

  void release() const {
    if (ownA)
      planrt::cuda::releaseStaged(const_cast<void *>(a));
    if (ownB)
      planrt::cuda::releaseStaged(const_cast<void *>(b));
  }
};

/// Whether 16-bit rows at p, ld elements apart, are 16-byte aligned.
bool halfRowsAligned(const void *p, int32_t ld) { return reinterpret_cast<uintptr_t>(p) % 16 == 0 && ld % 8 == 0; }

/// One operand as cuBLASLt reads it on the 16-bit path: a 16-bit buffer of the caller's
/// as it is when its rows are aligned and it needs no padding (rows × cols already
/// dstRows × dstCols), or a padded 16-bit copy (owned) of it or of a float32 one.
const void *sixteen(const void *p, bool half, int32_t rows, int32_t cols, int32_t ld, int32_t dstRows,
                    int32_t dstCols, int32_t &ldOut, bool fp16, bool &owned) {
  if (half && rows == dstRows && cols == dstCols && halfRowsAligned(p, ld)) {
    ldOut = ld;
    owned = false;
    return p;
  }
  owned = true;
  ldOut = padded(dstCols);
  if (half)
    return planrt::cuda::stageHalves(static_cast<const uint16_t *>(p), rows, cols, ld, dstRows, dstCols, ldOut);
  return planrt::cuda::stageHalves(static_cast<const float *>(p), rows, cols, ld, dstRows, dstCols, ldOut, fp16);
}

/// What planrt_cuda_gemm hands cuBLASLt under the staging policy (above); `half` its
/// PLANRT_GEMM_HALF_* bits.
Operands stage(int32_t transA, int32_t transB, int32_t m, int32_t n, int32_t k, const void *A, int32_t lda,
               const void *B, int32_t ldb, const void *C, int32_t ldc, int32_t compute, bool round, int32_t half) {
  Operands o{A, B, lda, ldb, k, n};
  if (compute != PLANRT_GEMM_BF16 && compute != PLANRT_GEMM_F16)
    return o;
  Stage policy = stagePolicy();
  bool halfC = half & PLANRT_GEMM_HALF_C;
  o.halfResult = halfC || (round && roundPolicy() == Round::Half && policy != Stage::Never);
  bool operandsAligned = rowsAligned(A, lda) && rowsAligned(B, ldb);
  if (half == 0 && (policy == Stage::Never ||
                    (!o.halfResult && policy == Stage::Auto && operandsAligned && !rowsAligned(C, ldc))))
    return o;
  bool fp16 = compute == PLANRT_GEMM_F16, ta = transA == kTrans, tb = transB == kTrans;
  // A is (ta ? k × m : m × k) row-major, B (tb ? n × k : k × n); k padded with zeros, and
  // n too for a 16-bit result (B's extra rows or columns zeros, C's extra columns dropped).
  o.k = padded(k);
  if (o.halfResult)
    o.n = padded(n);
  int32_t rowsA = ta ? k : m, colsA = ta ? m : k, rowsB = tb ? n : k, colsB = tb ? k : n;
  o.a = sixteen(A, half & PLANRT_GEMM_HALF_A, rowsA, colsA, lda, ta ? o.k : m, ta ? m : o.k, o.lda, fp16, o.ownA);
  o.b = sixteen(B, half & PLANRT_GEMM_HALF_B, rowsB, colsB, ldb, tb ? o.n : o.k, tb ? o.k : o.n, o.ldb, fp16,
                o.ownB);
  o.staged = true;
  return o;
}

} // namespace

extern "C" void planrt_cuda_gemm(int32_t order, int32_t transA, int32_t transB, int32_t m, int32_t n, int32_t k,
                                 float alpha, const float *A, int32_t lda, const float *B, int32_t ldb, float beta,
                                 float *C, int32_t ldc, int32_t compute) {
  if (order != kRowMajor)
    check(cudaErrorInvalidValue, "planrt_cuda_gemm: only row-major (CblasRowMajor) is implemented");
  bool round = (compute & PLANRT_GEMM_ROUND_RESULT) != 0;
  int32_t half = compute & (PLANRT_GEMM_HALF_A | PLANRT_GEMM_HALF_B | PLANRT_GEMM_HALF_C);
  compute &= ~(PLANRT_GEMM_ROUND_RESULT | half);
  if (compute < 0 || compute >= int32_t(std::size(kComputes))) {
    std::string what = "planrt_cuda_gemm: unknown compute precision " + std::to_string(compute) +
                       " (planrt_gemm_compute: 0 fp32, 1 bf16, 2 fp16, 3 tf32; + 16: the result rounded; + 32, 64, "
                       "128: A, B, C 16-bit)";
    check(cudaErrorInvalidValue, what.c_str());
  }
  bool sixteenBit = compute == PLANRT_GEMM_BF16 || compute == PLANRT_GEMM_F16;
  if (round && (!sixteenBit || beta != 0.0f))
    check(cudaErrorInvalidValue, "planrt_cuda_gemm: a rounded result (PLANRT_GEMM_ROUND_RESULT) needs a bf16 or "
                                 "fp16 compute and beta = 0");
  if (half && (!sixteenBit || ((half & PLANRT_GEMM_HALF_C) && !round)))
    check(cudaErrorInvalidValue, "planrt_cuda_gemm: 16-bit operands (PLANRT_GEMM_HALF_*) need a bf16 or fp16 "
                                 "compute, and a 16-bit C a rounded result");
  if (m == 0 || n == 0)
    return;
  bool halfC = half & PLANRT_GEMM_HALF_C;
  if (k == 0) { // C = beta C: what the generated code asks (beta = 0) is a zeroed C
    if (beta != 0.0f)
      check(cudaErrorNotSupported, "planrt_cuda_gemm: k = 0 with beta != 0 is not implemented");
    size_t element = halfC ? sizeof(uint16_t) : sizeof(float);
    check(cudaMemset2DAsync(C, size_t(ldc) * element, 0, size_t(n) * element, size_t(m), planrt::cuda::stream()),
          "planrt_cuda_gemm (k = 0)");
    return planrt::cuda::finish("planrt_cuda_gemm (k = 0)");
  }
  Lt &l = lt();
  Operands o = stage(transA, transB, m, n, k, A, lda, B, ldb, C, ldc, compute, round, half);
  // A rounded result on 16-bit operands: cuBLASLt writes 16 bits, rows padded, widened below
  // — or straight into a 16-bit C whose rows are aligned and need no padding.
  bool halfResult = o.halfResult, fp16 = compute == PLANRT_GEMM_F16;
  bool direct = halfC && o.n == n && halfRowsAligned(C, ldc);
  int32_t ldd = halfResult && !direct ? o.n : ldc;
  void *D = halfResult && !direct ? planrt::cuda::halvesScratch(int64_t(m) * ldd) : C;
  const Plan &p = l.plan(Shape{transA, transB, m, o.n, o.k, o.lda, o.ldb, ldd, alignment(o.b), alignment(o.a),
                               alignment(D), compute, o.staged, halfResult});
  checkLt(cublasLtMatmul(l.handle, p.desc, &alpha, o.b, p.x, o.a, p.y, &beta, D, p.d, D, p.d, &p.algo, l.workspace,
                         kWorkspaceBytes, planrt::cuda::stream()),
          "cublasLtMatmul");
  if (halfResult && !direct) {
    if (halfC)
      planrt::cuda::copyHalves(D, m, n, ldd, C, ldc);
    else
      planrt::cuda::widenHalves(D, m, n, ldd, C, ldc, fp16);
    planrt::cuda::releaseStaged(D);
  } else if (round && !halfResult) {
    planrt::cuda::roundToHalves(C, m, n, ldc, fp16);
  }
  o.release();
  if (!planrt::cuda::profiling())
    return planrt::cuda::finish("planrt_cuda_gemm (cublasLtMatmul)");
  // Profiled by shape and precision: "planrt_cuda_gemm bf16 m=… n=… k=… NT" (kept past
  // the call: the runtime names the last work queued with it).
  static thread_local char name[160];
  std::snprintf(name, sizeof name, "planrt_cuda_gemm %s m=%d n=%d k=%d %c%c%s%s%s", kComputes[compute].name, m, n, k,
                transA == kTrans ? 'T' : 'N', transB == kTrans ? 'T' : 'N',
                o.ownA || o.ownB ? " staged" : "", half ? " 16-bit storage" : "",
                !round ? "" : halfResult ? " rounded (16-bit result)" : " rounded in place");
  planrt::cuda::finish(name);
}
