// Instantiation: parameter lists, shapes, logical dims, init and published counts.
#include "Harness.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace plan;
using plan::test::analyze;

TEST(Models, PublishedParameterCounts) {
  auto gpt = analyze("import \"models/gpt.plan\"\n");
  ASSERT_TRUE(gpt.ok()) << gpt.all();
  // GPT-2 (HF GPT2LMHeadModel.num_parameters(), tied head).
  EXPECT_EQ(gpt.program->findModel("gpt2_small")->numParameters(), 124439808);
  EXPECT_EQ(gpt.program->findModel("gpt2_medium")->numParameters(), 354823168);
  EXPECT_EQ(gpt.program->findModel("gpt2_large")->numParameters(), 774030080);
  EXPECT_EQ(gpt.program->findModel("gpt2_xl")->numParameters(), 1557611200);
  auto llama = analyze("import \"models/llama.plan\"\n");
  ASSERT_TRUE(llama.ok()) << llama.all();
  // Llama 3.2 1B (tied), Llama 3 8B and 70B (untied), as published by Meta.
  EXPECT_EQ(llama.program->findModel("llama_1b")->numParameters(), 1235814400);
  EXPECT_EQ(llama.program->findModel("llama_8b")->numParameters(), 8030261248);
  EXPECT_EQ(llama.program->findModel("llama_70b")->numParameters(), 70553706496);
}

TEST(Models, Gpt2NamesShapesAndDims) {
  auto r = analyze("import \"models/gpt.plan\"\n");
  ASSERT_TRUE(r.ok()) << r.all();
  const sema::Model &m = *r.program->findModel("gpt2_small");
  auto find = [&](const std::string &path) -> const sema::Parameter * {
    for (const auto &p : m.params)
      if (p.path == path)
        return &p;
    return nullptr;
  };
  // Hugging Face GPT-2 names; Conv1D weights are [in, out].
  const sema::Parameter *cattn = find("h.11.attn.c_attn.weight");
  ASSERT_TRUE(cattn);
  EXPECT_EQ(cattn->shape, (std::vector<int64_t>{768, 2304}));
  EXPECT_EQ(cattn->dims, (std::vector<std::string>{"embed", "qkv"}));
  ASSERT_TRUE(find("h.0.mlp.c_fc.weight"));
  EXPECT_EQ(find("h.0.mlp.c_fc.weight")->shape, (std::vector<int64_t>{768, 3072}));
  EXPECT_EQ(find("wte.weight")->shape, (std::vector<int64_t>{50257, 768}));
  EXPECT_EQ(find("wpe.weight")->shape, (std::vector<int64_t>{1024, 768}));
  EXPECT_TRUE(find("ln_f.bias"));
  EXPECT_FALSE(find("lm_head.weight")); // tied to wte
  // GPT-2 init: N(0, 0.02), residual projections N(0, 0.02/sqrt(2·12)), LN ones/zeros.
  EXPECT_EQ(find("h.0.attn.c_attn.weight")->initStd, 0.02);
  EXPECT_DOUBLE_EQ(find("h.3.attn.c_proj.weight")->initStd, 0.02 / std::sqrt(24.0));
  EXPECT_DOUBLE_EQ(find("h.3.mlp.c_proj.weight")->initStd, 0.02 / std::sqrt(24.0));
  EXPECT_EQ(find("h.0.ln_1.weight")->init, sema::Init::Ones);
  EXPECT_EQ(find("h.0.attn.c_attn.bias")->init, sema::Init::Zeros);
  EXPECT_EQ(m.layers, 12);
  EXPECT_EQ(m.vocab, 50257);
  EXPECT_EQ(m.maxSeq, 1024);
}

TEST(Models, GroupedQueryAttentionShapes) {
  auto r = analyze("import \"models/llama.plan\"\n");
  ASSERT_TRUE(r.ok()) << r.all();
  const sema::Model &m = *r.program->findModel("llama_8b");
  // q: 32 heads, k and v: 8 heads, head_dim 128 → (32 + 16) × 128 = 6144.
  EXPECT_EQ(m.params[1].path, "layers.0.attention_norm.weight");
  const sema::Parameter *qkv = nullptr;
  for (const auto &p : m.params)
    if (p.path == "layers.0.attention.c_attn.weight")
      qkv = &p;
  ASSERT_TRUE(qkv);
  EXPECT_EQ(qkv->shape, (std::vector<int64_t>{4096, 6144}));
  auto attn = m.attentions();
  ASSERT_EQ(attn.size(), 32u);
  EXPECT_EQ(attn[0]->heads, 32);
  EXPECT_EQ(attn[0]->kvHeads, 8);
  EXPECT_TRUE(attn[0]->rope);
}

TEST(Models, TensorShapesAreChecked) {
  auto r = analyze("model m() (tokens, targets) {\n  e = embedding(16, 8)\n  p = linear(4, 8)\n"
                   "  return cross_entropy(e.attend(p(e(tokens))), targets)\n}\n");
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.errors.size(), 1u) << r.all();
  EXPECT_EQ(r.errors[0], "4:33: linear 'p' expects activations [batch, seq, 4], but its input "
                         "is activations [batch, seq, 8]");
}

TEST(Models, DidYouMeanInsideBodies) {
  auto r = analyze("model m() (tokens, targets) {\n  emb = embedding(16, 8)\n"
                   "  return cross_entropy(emb.attend(emd(tokens)), targets)\n}\n");
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.errors.size(), 1u) << r.all();
  EXPECT_EQ(r.errors[0], "3:35: unknown name 'emd'; did you mean 'emb'?");
}

#include "plan/Dialect/Plan/IR/Plan.h"

// Sema's enums reach the plan dialect by name: every name must exist on both sides.
TEST(Models, SemaEnumNamesMatchThePlanDialect) {
  using namespace plan;
  for (int k = 0; k <= int(sema::OpKind::Mul); ++k)
    EXPECT_TRUE(pl::symbolizeLayerKind(sema::opKindName(sema::OpKind(k)))) << sema::opKindName(sema::OpKind(k));
  for (sema::Init i : {sema::Init::Normal, sema::Init::Zeros, sema::Init::Ones})
    EXPECT_TRUE(pl::symbolizeInit(sema::initName(i)));
  for (sema::Precision p : {sema::Precision::FP32, sema::Precision::BF16, sema::Precision::FP16})
    EXPECT_TRUE(pl::symbolizePrecision(sema::precisionName(p)));
  for (sema::Recompute r : {sema::Recompute::None, sema::Recompute::Full, sema::Recompute::Selective})
    EXPECT_TRUE(pl::symbolizeRecompute(sema::recomputeName(r)));
  for (sema::LRSchedule s : {sema::LRSchedule::Constant, sema::LRSchedule::Linear, sema::LRSchedule::Cosine})
    EXPECT_TRUE(pl::symbolizeLRSchedule(sema::lrScheduleName(s)));
}
