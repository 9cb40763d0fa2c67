// libplanrt: token data, safetensors and checkpoint directories, including bad input.
// Files are cross-checked against an independent reader/writer in Python (numpy), per
// the published formats (nanoGPT/llm.c token files; Hugging Face safetensors).
#include "planrt.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include "TempDir.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace {

using plan::test::TempDir;

void writeBytes(const std::string &path, const void *data, size_t n) {
  std::ofstream os(path, std::ios::binary);
  os.write(static_cast<const char *>(data), std::streamsize(n));
}

std::vector<uint16_t> ramp(size_t n, uint16_t mod) {
  std::vector<uint16_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = uint16_t(i % mod);
  return v;
}

/// /usr/bin/python3 with numpy, for the independent checks.
bool havePython() {
  static int ok = -1;
  if (ok < 0)
    ok = std::system("/usr/bin/python3 -c 'import numpy' > /dev/null 2>&1") == 0;
  return ok;
}

int python(const std::string &code) {
  std::string cmd = "/usr/bin/python3 -c \"" + code + "\"";
  return std::system(cmd.c_str());
}

planrt_data *open(const std::string &pattern, uint64_t seed = 1, int64_t vocab = 0) {
  const char *p = pattern.c_str();
  planrt_data *d = nullptr;
  EXPECT_EQ(planrt_data_open(&p, 1, seed, vocab, &d), PLANRT_OK) << planrt_last_error();
  return d;
}

} // namespace

TEST(RuntimeData, RawFilesSampleDeterministically) {
  TempDir dir;
  auto tokens = ramp(10000, 50000);
  writeBytes(dir / "train.bin", tokens.data(), tokens.size() * 2);
  planrt_data *d = open(dir / "train.bin", 42);
  ASSERT_TRUE(d);
  EXPECT_EQ(planrt_data_tokens(d), 10000u);
  const int64_t seq = 64;
  std::vector<int32_t> x(seq), y(seq), x2(seq), y2(seq);
  ASSERT_EQ(planrt_data_sample(d, 7, seq, x.data(), y.data()), PLANRT_OK);
  ASSERT_EQ(planrt_data_sample(d, 7, seq, x2.data(), y2.data()), PLANRT_OK);
  EXPECT_EQ(x, x2);
  // Targets are the next tokens of the same window.
  for (int64_t i = 0; i + 1 < seq; ++i)
    EXPECT_EQ(y[i], x[i + 1]);
  EXPECT_EQ(y[seq - 1], x[seq - 1] + 1);
  // Another index or another seed draws another window.
  ASSERT_EQ(planrt_data_sample(d, 8, seq, x2.data(), y2.data()), PLANRT_OK);
  EXPECT_NE(x, x2);
  planrt_data *e = open(dir / "train.bin", 43);
  ASSERT_EQ(planrt_data_sample(e, 7, seq, x2.data(), y2.data()), PLANRT_OK);
  EXPECT_NE(x, x2);
  // A batch is the samples at consecutive indices.
  std::vector<int32_t> bx(4 * seq), by(4 * seq);
  ASSERT_EQ(planrt_data_batch(d, 6, 4, seq, bx.data(), by.data()), PLANRT_OK);
  EXPECT_TRUE(std::equal(x.begin(), x.end(), bx.begin() + seq));
  planrt_data_close(d);
  planrt_data_close(e);
}

TEST(RuntimeData, LlmcFilesWrittenByNumpy) {
  if (!havePython())
    GTEST_SKIP() << "/usr/bin/python3 with numpy is needed";
  TempDir dir;
  std::string path = dir / "val.bin";
  // llm.c's format: int32 header[256] = {20240520, 1, n}, then n uint16 tokens.
  ASSERT_EQ(python("import numpy as np; n=5000; h=np.zeros(256, np.int32); h[0]=20240520; h[1]=1; h[2]=n; "
                   "f=open('" +
                   path +
                   "','wb'); f.write(h.tobytes()); f.write((np.arange(n) * 7 % 50257).astype(np.uint16).tobytes())"),
            0);
  planrt_data *d = open(path, 1, 50257);
  ASSERT_TRUE(d);
  EXPECT_EQ(planrt_data_tokens(d), 5000u);
  std::vector<int32_t> x(100), y(100);
  ASSERT_EQ(planrt_data_window(d, 2, 100, x.data(), y.data()), PLANRT_OK);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(x[i], (200 + i) * 7 % 50257);
    EXPECT_EQ(y[i], (201 + i) * 7 % 50257);
  }
  planrt_data_close(d);
}

TEST(RuntimeData, GlobsConcatenateFilesInOrder) {
  TempDir dir;
  auto a = ramp(300, 1000), b = ramp(300, 1000);
  for (auto &t : b)
    t = uint16_t(t + 1000);
  writeBytes(dir / "shard_b.bin", b.data(), b.size() * 2);
  writeBytes(dir / "shard_a.bin", a.data(), a.size() * 2);
  planrt_data *d = open(dir / "shard_*.bin");
  ASSERT_TRUE(d);
  EXPECT_EQ(planrt_data_tokens(d), 600u);
  std::vector<int32_t> x(100), y(100);
  // Windows of 101 tokens: 2 in each file, shard_a's first.
  ASSERT_EQ(planrt_data_window(d, 2, 100, x.data(), y.data()), PLANRT_OK);
  EXPECT_EQ(x[0], 1000);
  EXPECT_NE(planrt_data_window(d, 4, 100, x.data(), y.data()), PLANRT_OK);
  planrt_data_close(d);
}

TEST(RuntimeData, BadFilesAreRefusedWithTheirName) {
  TempDir dir;
  planrt_set_rank(3);
  planrt_data *d = nullptr;
  std::string missing = dir / "missing.bin";
  const char *p = missing.c_str();
  EXPECT_EQ(planrt_data_open(&p, 1, 0, 0, &d), PLANRT_ERR_IO);
  EXPECT_EQ(std::string(planrt_last_error()), "rank 3: " + missing + ": no such token file");

  std::string odd = dir / "odd.bin";
  writeBytes(odd, "abc", 3);
  p = odd.c_str();
  EXPECT_EQ(planrt_data_open(&p, 1, 0, 0, &d), PLANRT_ERR_FORMAT);
  EXPECT_NE(std::string(planrt_last_error()).find("3 bytes is not a whole number of uint16 tokens"), std::string::npos)
      << planrt_last_error();

  // An llm.c header promising more tokens than the file holds.
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = 1;
  header[2] = 1000;
  std::string cut = dir / "cut.bin";
  std::vector<char> bytes(1024 + 500 * 2);
  std::memcpy(bytes.data(), header.data(), 1024);
  writeBytes(cut, bytes.data(), bytes.size());
  p = cut.c_str();
  EXPECT_EQ(planrt_data_open(&p, 1, 0, 0, &d), PLANRT_ERR_FORMAT);
  EXPECT_NE(std::string(planrt_last_error()).find("the header promises 1000 tokens"), std::string::npos)
      << planrt_last_error();

  // Tokens outside the vocabulary are found when they are read, with their position.
  auto big = ramp(400, 300);
  writeBytes(dir / "big.bin", big.data(), big.size() * 2);
  planrt_data *v = open(dir / "big.bin", 1, 256);
  std::vector<int32_t> x(150), y(150);
  EXPECT_EQ(planrt_data_window(v, 0, 150, x.data(), y.data()), PLANRT_OK);
  EXPECT_EQ(planrt_data_window(v, 1, 150, x.data(), y.data()), PLANRT_ERR_FORMAT);
  EXPECT_NE(std::string(planrt_last_error()).find("token 256 at position 256 is outside the vocabulary of 256"),
            std::string::npos)
      << planrt_last_error();
  planrt_data_close(v);

  // Too short for one sequence.
  auto tiny = ramp(10, 10);
  writeBytes(dir / "tiny.bin", tiny.data(), tiny.size() * 2);
  planrt_data *t = open(dir / "tiny.bin");
  EXPECT_EQ(planrt_data_sample(t, 0, 64, x.data(), y.data()), PLANRT_ERR_FORMAT);
  planrt_data_close(t);
  planrt_set_rank(0);
}

namespace {
struct Tensors {
  std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -1e-3f};
  std::vector<int64_t> aShape = {2, 3};
  std::vector<float> b = {42.0f};
  std::vector<int64_t> bShape = {1};
  std::vector<planrt_tensor> views() {
    return {{"h.0.attn.c_attn.weight", PLANRT_F32, 2, aShape.data(), a.data()},
            {"ln_f.bias", PLANRT_F32, 1, bShape.data(), b.data()}};
  }
};
} // namespace

TEST(RuntimeSafetensors, RoundTripAndMismatches) {
  TempDir dir;
  Tensors t;
  auto v = t.views();
  const char *meta[] = {"format", "pt", "planc_step", "500"};
  std::string path = dir / "model.safetensors";
  ASSERT_EQ(planrt_st_save(path.c_str(), v.data(), v.size(), meta, 2), PLANRT_OK) << planrt_last_error();
  planrt_st *st = nullptr;
  ASSERT_EQ(planrt_st_open(path.c_str(), &st), PLANRT_OK) << planrt_last_error();
  EXPECT_EQ(planrt_st_count(st), 2u);
  EXPECT_STREQ(planrt_st_metadata(st, "planc_step"), "500");
  std::vector<float> a(6);
  ASSERT_EQ(planrt_st_read(st, "h.0.attn.c_attn.weight", PLANRT_F32, 2, t.aShape.data(), a.data()), PLANRT_OK);
  EXPECT_EQ(a, t.a);
  int64_t wrong[] = {3, 2};
  EXPECT_EQ(planrt_st_read(st, "h.0.attn.c_attn.weight", PLANRT_F32, 2, wrong, a.data()), PLANRT_ERR_MISMATCH);
  EXPECT_NE(std::string(planrt_last_error()).find("is F32 [2, 3] in the checkpoint but the model expects F32 [3, 2]"),
            std::string::npos)
      << planrt_last_error();
  EXPECT_EQ(planrt_st_read(st, "h.0.attn.c_attn.weight", PLANRT_BF16, 2, t.aShape.data(), a.data()),
            PLANRT_ERR_MISMATCH);
  EXPECT_EQ(planrt_st_read(st, "wte.weight", PLANRT_F32, 2, t.aShape.data(), a.data()), PLANRT_ERR_MISMATCH);
  EXPECT_NE(std::string(planrt_last_error()).find("the model's tensor 'wte.weight' is not in the checkpoint"),
            std::string::npos);
  planrt_st_close(st);
}

// An empty tensor (a ZeRO piece of an empty optimizer group: LoRA's adapters are all
// matrices) shares its offset with the next tensor; the file must still open, whatever
// the order of the names.
TEST(RuntimeSafetensors, EmptyTensorsAmongOthers) {
  TempDir dir;
  std::vector<float> x = {1, 2, 3, 4};
  std::vector<int64_t> four = {4}, none = {0};
  std::vector<planrt_tensor> v = {{"a.0", PLANRT_F32, 1, four.data(), x.data()},
                                  {"a.1", PLANRT_F32, 1, none.data(), x.data()},
                                  {"b.0", PLANRT_F32, 1, four.data(), x.data()},
                                  {"b.1", PLANRT_F32, 1, none.data(), x.data()}};
  std::string path = dir / "pieces.safetensors";
  ASSERT_EQ(planrt_st_save(path.c_str(), v.data(), v.size(), nullptr, 0), PLANRT_OK) << planrt_last_error();
  planrt_st *st = nullptr;
  ASSERT_EQ(planrt_st_open(path.c_str(), &st), PLANRT_OK) << planrt_last_error();
  std::vector<float> got(4);
  EXPECT_EQ(planrt_st_read(st, "b.0", PLANRT_F32, 1, four.data(), got.data()), PLANRT_OK);
  EXPECT_EQ(got, x);
  EXPECT_EQ(planrt_st_read(st, "b.1", PLANRT_F32, 1, none.data(), got.data()), PLANRT_OK);
  planrt_st_close(st);
}

TEST(RuntimeSafetensors, ReadByAnIndependentReader) {
  if (!havePython())
    GTEST_SKIP() << "/usr/bin/python3 with numpy is needed";
  TempDir dir;
  Tensors t;
  auto v = t.views();
  std::string path = dir / "m.safetensors";
  ASSERT_EQ(planrt_st_save(path.c_str(), v.data(), v.size(), nullptr, 0), PLANRT_OK);
  // The format per Hugging Face's spec: <u64 LE header length><JSON header><data>.
  EXPECT_EQ(python("import json,struct,numpy as np; b=open('" + path +
                   "','rb').read(); n=struct.unpack('<Q',b[:8])[0]; "
                   "h=json.loads(b[8:8+n]); e=h['h.0.attn.c_attn.weight']; s,t=e['data_offsets']; "
                   "a=np.frombuffer(b[8+n+s:8+n+t],np.float32).reshape(e['shape']); "
                   "assert e['dtype']=='F32' and e['shape']==[2,3], e; assert (8+n)%8==0; "
                   "assert np.array_equal(a, np.array([[1.5,-2,3.25],[0,7,-1e-3]],np.float32)), a"),
            0);
}

TEST(RuntimeSafetensors, WrittenByAnIndependentWriter) {
  if (!havePython())
    GTEST_SKIP() << "/usr/bin/python3 with numpy is needed";
  TempDir dir;
  std::string path = dir / "py.safetensors";
  ASSERT_EQ(
      python("import json,struct,numpy as np; w=np.arange(12,dtype=np.float32).reshape(3,4); b=np.ones(4,np.float32); "
             "h={'b':{'dtype':'F32','shape':[4],'data_offsets':[0,16]},'w':{'dtype':'F32','shape':[3,4],'data_offsets':"
             "[16,64]}}; "
             "s=json.dumps(h).encode(); f=open('" +
             path +
             "','wb'); f.write(struct.pack('<Q',len(s))); f.write(s); "
             "f.write(b.tobytes()); f.write(w.tobytes())"),
      0);
  planrt_st *st = nullptr;
  ASSERT_EQ(planrt_st_open(path.c_str(), &st), PLANRT_OK) << planrt_last_error();
  std::vector<float> w(12);
  int64_t shape[] = {3, 4};
  ASSERT_EQ(planrt_st_read(st, "w", PLANRT_F32, 2, shape, w.data()), PLANRT_OK);
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(w[i], float(i));
  planrt_st_close(st);
}

TEST(RuntimeSafetensors, CorruptFilesAreRefused) {
  TempDir dir;
  Tensors t;
  auto v = t.views();
  std::string good = dir / "good.safetensors";
  ASSERT_EQ(planrt_st_save(good.c_str(), v.data(), v.size(), nullptr, 0), PLANRT_OK);
  std::ifstream in(good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  auto refuse = [&](const std::string &content, const char *why) {
    std::string p = dir / "bad.safetensors";
    writeBytes(p, content.data(), content.size());
    planrt_st *st = nullptr;
    EXPECT_EQ(planrt_st_open(p.c_str(), &st), PLANRT_ERR_FORMAT) << why;
    EXPECT_NE(std::string(planrt_last_error()).find(p), std::string::npos) << planrt_last_error();
    planrt_st_close(st);
  };
  refuse(bytes.substr(0, bytes.size() - 4), "truncated data");
  refuse(bytes.substr(0, 5), "shorter than the length");
  std::string huge = bytes;
  huge[7] = char(0x7f);
  refuse(huge, "header length beyond the file");
  std::string badJson = bytes;
  badJson[8] = '[';
  refuse(badJson, "header is not an object");
  std::string garbage = bytes;
  garbage[12] = '\x01';
  refuse(garbage, "header is not JSON");
  refuse(bytes + "xxxxxxxx", "trailing bytes not covered by a tensor");
}

TEST(RuntimeSafetensors, AFailedWriteKeepsThePreviousFile) {
  TempDir dir;
  Tensors t;
  auto v = t.views();
  std::string path = dir / "m.safetensors";
  ASSERT_EQ(planrt_st_save(path.c_str(), v.data(), v.size(), nullptr, 0), PLANRT_OK);
  // A tensor that cannot be written (bad dtype) fails before anything is replaced.
  planrt_tensor bad = v[0];
  bad.dtype = planrt_dtype(99);
  EXPECT_EQ(planrt_st_save(path.c_str(), &bad, 1, nullptr, 0), PLANRT_ERR_ARG);
  planrt_st *st = nullptr;
  ASSERT_EQ(planrt_st_open(path.c_str(), &st), PLANRT_OK);
  EXPECT_EQ(planrt_st_count(st), 2u);
  planrt_st_close(st);
  // An unwritable directory: a clear error, and no temporary file left behind.
  std::string ro = dir / "ro";
  ::mkdir(ro.c_str(), 0555);
  std::string target = ro + "/m.safetensors";
  if (::access(ro.c_str(), W_OK) != 0) { // root can write anywhere
    EXPECT_EQ(planrt_st_save(target.c_str(), v.data(), v.size(), nullptr, 0), PLANRT_ERR_IO);
    EXPECT_NE(std::string(planrt_last_error()).find("cannot write"), std::string::npos);
  }
}

TEST(RuntimeCheckpoint, KeepsTheNewestAndFindsTheLatest) {
  TempDir dir;
  Tensors t;
  auto v = t.views();
  std::string ckpt = dir / "ckpt/tiny";
  for (uint64_t step : {100, 200, 300, 400})
    ASSERT_EQ(planrt_ckpt_save(ckpt.c_str(), step, 2, v.data(), v.size(), nullptr, 0), PLANRT_OK)
        << planrt_last_error();
  char latest[512];
  uint64_t step = 0;
  ASSERT_EQ(planrt_ckpt_latest(ckpt.c_str(), latest, sizeof latest, &step), PLANRT_OK);
  EXPECT_EQ(step, 400u);
  EXPECT_EQ(std::string(latest), ckpt + "/step-00000400.safetensors");
  struct stat st;
  EXPECT_EQ(::stat((ckpt + "/step-00000300.safetensors").c_str(), &st), 0);
  EXPECT_NE(::stat((ckpt + "/step-00000200.safetensors").c_str(), &st), 0);
  EXPECT_NE(::stat((ckpt + "/step-00000100.safetensors").c_str(), &st), 0);
  EXPECT_EQ(planrt_ckpt_latest((dir / "none").c_str(), latest, sizeof latest, &step), PLANRT_ERR_IO);
}

TEST(RuntimeInit, NormalHasTheRequestedMomentsAndShardsAgree) {
  const int64_t n = 200000;
  std::vector<float> whole(n);
  ASSERT_EQ(planrt_init_normal(whole.data(), n, 0, 0.0, 0.02, 1337, 5), PLANRT_OK);
  double sum = 0, sq = 0, fourth = 0;
  for (float v : whole) {
    sum += v;
    sq += double(v) * v;
  }
  double mean = sum / n, var = sq / n - mean * mean;
  for (float v : whole)
    fourth += std::pow((v - mean) / std::sqrt(var), 4);
  // Mean 0 and std 0.02 to within a few standard errors; kurtosis of a normal is 3.
  EXPECT_NEAR(mean, 0.0, 5 * 0.02 / std::sqrt(double(n)));
  EXPECT_NEAR(std::sqrt(var), 0.02, 0.02 * 0.01);
  EXPECT_NEAR(fourth / n, 3.0, 0.05);
  // A shard starting at element 70000 equals that slice of the whole tensor.
  std::vector<float> shard(1000);
  ASSERT_EQ(planrt_init_normal(shard.data(), 1000, 70000, 0.0, 0.02, 1337, 5), PLANRT_OK);
  EXPECT_TRUE(std::equal(shard.begin(), shard.end(), whole.begin() + 70000));
  // Another parameter or seed draws other values.
  std::vector<float> other(1000);
  ASSERT_EQ(planrt_init_normal(other.data(), 1000, 70000, 0.0, 0.02, 1337, 6), PLANRT_OK);
  EXPECT_NE(other, shard);
  ASSERT_EQ(planrt_init_normal(other.data(), 1000, 70000, 0.0, 0.02, 1338, 5), PLANRT_OK);
  EXPECT_NE(other, shard);
}

TEST(RuntimeLog, OneJsonObjectPerStep) {
  TempDir dir;
  std::string path = dir / "train.jsonl";
  planrt_log *log = nullptr;
  ASSERT_EQ(planrt_log_open(path.c_str(), &log), PLANRT_OK);
  uint64_t comm[4] = {6000, 40, 0, 128};
  ASSERT_EQ(planrt_log_step(log, 1, 5.5451774, 3e-4, 1.25, 123456.5, comm, 5000000000ull, 7000000000ull), PLANRT_OK);
  ASSERT_EQ(planrt_log_step(log, 2, std::nan(""), 3e-4, INFINITY, 0, comm, 0, 0), PLANRT_OK);
  planrt_log_close(log);
  if (!havePython())
    GTEST_SKIP() << "/usr/bin/python3 is needed to parse the log";
  EXPECT_EQ(python("import json; rows=[json.loads(l) for l in open('" + path +
                   "')]; assert len(rows)==2; "
                   "r=rows[0]; assert r['step']==1 and abs(r['loss']-5.5451774)<1e-9 and r['lr']==3e-4 and "
                   "r['grad_norm']==1.25, r; "
                   "assert r['comm_bytes']=={'all_reduce':6000,'all_gather':40,'reduce_scatter':0,'send_recv':128}, r; "
                   "assert r['mem_peak_bytes']==5000000000 and r['mem_device_peak_bytes']==7000000000, r; "
                   "assert rows[1]['loss'] is None and rows[1]['grad_norm'] is None, rows[1]"),
            0);
}

TEST(RuntimeLog, NonFiniteValuesStopWithTheStep) {
  std::vector<float> g = {0.5f, 1.0f, std::nanf(""), 2.0f};
  EXPECT_EQ(planrt_check_finite(g.data(), 2, 7, "gradients"), PLANRT_OK);
  EXPECT_EQ(planrt_check_finite(g.data(), 4, 7, "gradients"), PLANRT_ERR_ARG);
  EXPECT_NE(std::string(planrt_last_error()).find("step 7: gradients is NaN at index 2"), std::string::npos)
      << planrt_last_error();
  float inf = INFINITY;
  EXPECT_EQ(planrt_check_finite(&inf, 1, 9, "loss"), PLANRT_ERR_ARG);
  EXPECT_NE(std::string(planrt_last_error()).find("step 9: loss is infinite"), std::string::npos);
}

TEST(RuntimeCheckpoint, TheCheckpointJustWrittenIsNeverPruned) {
  // A restarted run writes step 100 into a directory that still holds steps 300 and 400.
  TempDir dir;
  Tensors t;
  auto v = t.views();
  std::string ckpt = dir / "ckpt";
  for (uint64_t step : {300, 400})
    ASSERT_EQ(planrt_ckpt_save(ckpt.c_str(), step, 2, v.data(), v.size(), nullptr, 0), PLANRT_OK);
  ASSERT_EQ(planrt_ckpt_save(ckpt.c_str(), 100, 2, v.data(), v.size(), nullptr, 0), PLANRT_OK);
  struct stat st;
  EXPECT_EQ(::stat((ckpt + "/step-00000100.safetensors").c_str(), &st), 0);
  EXPECT_EQ(::stat((ckpt + "/step-00000400.safetensors").c_str(), &st), 0);
  EXPECT_NE(::stat((ckpt + "/step-00000300.safetensors").c_str(), &st), 0);
  // Files named with fewer digits are found and pruned by their real names.
  writeBytes(ckpt + "/step-5.safetensors", "x", 1);
  ASSERT_EQ(planrt_ckpt_save(ckpt.c_str(), 500, 2, v.data(), v.size(), nullptr, 0), PLANRT_OK);
  EXPECT_NE(::stat((ckpt + "/step-5.safetensors").c_str(), &st), 0);
}

TEST(RuntimeSafetensors, NonUtf8NamesAreRefusedNotThrown) {
  TempDir dir;
  Tensors t;
  auto v = t.views();
  v[0].name = "bad\xff";
  std::string path = dir / "m.safetensors";
  EXPECT_EQ(planrt_st_save(path.c_str(), v.data(), v.size(), nullptr, 0), PLANRT_ERR_ARG);
  EXPECT_NE(std::string(planrt_last_error()).find("not valid UTF-8"), std::string::npos) << planrt_last_error();
}

// The generated code's allocation functions: aligned as asked, the bytes live and the
// peak counted, freed through the pointer handed out.
TEST(RuntimeMemory, CountsLiveBytesAndThePeak) {
  uint64_t base = planrt_mem_live();
  planrt_mem_reset_peak();
  void *a = _mlir_memref_to_llvm_alloc(1000);
  void *b = _mlir_memref_to_llvm_aligned_alloc(256, 4096);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 16, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 256, 0u);
  std::memset(a, 0xab, 1000);
  std::memset(b, 0xcd, 4096);
  EXPECT_EQ(planrt_mem_live(), base + 5096);
  _mlir_memref_to_llvm_free(a);
  EXPECT_EQ(planrt_mem_live(), base + 4096);
  EXPECT_EQ(planrt_mem_peak(), base + 5096);
  planrt_mem_reset_peak();
  EXPECT_EQ(planrt_mem_peak(), base + 4096);
  _mlir_memref_to_llvm_free(b);
  _mlir_memref_to_llvm_free(nullptr);
  EXPECT_EQ(planrt_mem_live(), base);
}

// The runtime's own buffers for the generated code: counted apart from the generated
// code's, and with them in the device peak, which only grows.
TEST(RuntimeMemory, TheDevicePeakCountsTheRuntimesBuffersToo) {
  uint64_t live = planrt_mem_live(), held = planrt_mem_held();
  void *state = planrt_mem_alloc(1 << 20);
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(state) % 256, 0u);
  std::memset(state, 0x11, 1 << 20);
  EXPECT_EQ(planrt_mem_held(), held + (1 << 20));
  EXPECT_EQ(planrt_mem_live(), live);
  void *step = _mlir_memref_to_llvm_alloc(3000);
  ASSERT_NE(step, nullptr);
  uint64_t both = live + held + (1 << 20) + 3000;
  EXPECT_GE(planrt_mem_total_peak(), both);
  _mlir_memref_to_llvm_free(step);
  planrt_mem_free(state);
  planrt_mem_free(nullptr);
  EXPECT_EQ(planrt_mem_held(), held);
  EXPECT_EQ(planrt_mem_live(), live);
  EXPECT_GE(planrt_mem_total_peak(), both); // a peak, not what is held now
  void *zero = planrt_mem_alloc(0);         // a real pointer, counted as nothing
  EXPECT_NE(zero, nullptr);
  EXPECT_EQ(planrt_mem_held(), held);
  planrt_mem_free(zero);
}

// Memory by parts (ZeRO-3's gathered parameters with buckets): reserved unseen, counted
// while committed, its pages given back on decommit (they read as zero again) except
// one shared with a range still held.
TEST(RuntimeMemory, MemoryByPartsIsCountedAndGivenBackPageByPage) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE)), bytes = 64 * page;
  uint64_t held = planrt_mem_held();
  auto *p = static_cast<unsigned char *>(planrt_mem_reserve(bytes));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(planrt_mem_held(), held);
  EXPECT_EQ(p[bytes - 1], 0); // zeroed
  // Two ranges meeting inside page 8: [0, 8.5 pages) and [8.5 pages, 20 pages).
  size_t a = 8 * page + page / 2, b = 20 * page - a;
  planrt_mem_commit(p, a);
  planrt_mem_commit(p + a, b);
  EXPECT_EQ(planrt_mem_held(), held + a + b);
  // Committed pages are mapped at once (where the kernel can populate them: 5.14), the
  // rest of the reservation not.
  void *probe = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
#ifdef MADV_POPULATE_WRITE
  bool populates = probe != MAP_FAILED && madvise(probe, page, MADV_POPULATE_WRITE) == 0;
#else
  bool populates = false;
#endif
  if (probe != MAP_FAILED)
    munmap(probe, page);
  std::vector<unsigned char> resident(64);
  ASSERT_EQ(mincore(p, bytes, resident.data()), 0);
  if (populates) {
    EXPECT_TRUE(resident[0] & 1);
    EXPECT_TRUE(resident[19] & 1);
  }
  EXPECT_FALSE(resident[21] & 1);
  EXPECT_GE(planrt_mem_total_peak(), held + a + b);
  std::memset(p, 0x5a, a + b);
  planrt_mem_decommit(p + a, b);
  EXPECT_EQ(planrt_mem_held(), held + a);
  EXPECT_EQ(p[9 * page], 0);           // a page wholly inside: given back, zero again
  EXPECT_EQ(p[20 * page - 1], 0);
  EXPECT_EQ(p[a], 0x5a);               // the page shared with [0, a) stays
  EXPECT_EQ(p[a - 1], 0x5a);
  planrt_mem_decommit(p, a);
  EXPECT_EQ(planrt_mem_held(), held);
  EXPECT_EQ(p[0], 0);
  planrt_mem_unreserve(p, bytes);
}

// The executable's arena: one reservation, its state part zeroed, the step region after
// it for every step function; more than the backend has free is refused naming both sizes,
// before anything is allocated.
namespace {
size_t tinyDevice() { return size_t(3) << 20; } // 3 MiB free
void *heapAlloc(size_t bytes) { return std::aligned_alloc(256, (bytes + 255) / 256 * 256); }
const planrt_backend kTinyDevice = {"test-device", heapAlloc, std::free, tinyDevice};
} // namespace

TEST(RuntimeMemory, TheArenaIsOneReservationWithTheStepRegionAfterTheState) {
  uint64_t held = planrt_mem_held();
  auto *base = static_cast<unsigned char *>(planrt_arena_reserve(4096, 1 << 16));
  ASSERT_NE(base, nullptr) << planrt_last_error();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % 256, 0u);
  EXPECT_EQ(planrt_mem_held(), held + 4096 + (1 << 16));
  for (int i = 0; i < 4096; ++i)
    ASSERT_EQ(base[i], 0) << "byte " << i << " of the state part";
  EXPECT_EQ(planrt_arena_reserve(1, 1), nullptr); // one per process
  EXPECT_NE(std::string(planrt_last_error()).find("reserved already"), std::string::npos);
  planrt_mem_reset_peak();
  uint64_t live = planrt_mem_live();
  EXPECT_EQ(planrt_step_arena(1000), base + 4096);
  EXPECT_EQ(planrt_step_arena(1 << 16), base + 4096);
  EXPECT_EQ(planrt_mem_peak(), live + (1 << 16)); // the step buffers' peak: the largest function's
  planrt_arena_release();
  EXPECT_EQ(planrt_mem_held(), held);
}

TEST(RuntimeMemory, AnArenaLargerThanTheDeviceIsRefusedBeforeAllocating) {
  planrt_set_backend(&kTinyDevice);
  uint64_t held = planrt_mem_held();
  EXPECT_EQ(planrt_arena_reserve(size_t(2) << 20, size_t(3) << 19), nullptr); // 2 + 1.5 MiB
  std::string e = planrt_last_error();
  EXPECT_NE(e.find("the plan needs 3.5 MiB of test-device memory (2.0 MiB of parameters, gradients and optimizer "
                   "state, 1.5 MiB for the step's buffers), but only 3.0 MiB are free"),
            std::string::npos)
      << e;
  EXPECT_EQ(planrt_mem_held(), held);
  void *fits = planrt_arena_reserve(size_t(2) << 20, size_t(1) << 20); // 3 MiB: fits exactly
  EXPECT_NE(fits, nullptr) << planrt_last_error();
  planrt_arena_release();
  planrt_set_backend(nullptr);
}

TEST(RuntimeMemoryDeathTest, AStepFunctionNeedingMoreThanTheStepRegionStops) {
  EXPECT_EXIT(planrt_step_arena(16), testing::ExitedWithCode(1),
              "planrt: error: rank 0: a step function asks for the executable's arena, which the runtime has not "
              "reserved");
  EXPECT_EXIT(
      {
        planrt_arena_reserve(256, 1024);
        planrt_step_arena(2048);
      },
      testing::ExitedWithCode(1), "a step function needs 2048 bytes of the step region, which has 1024");
}

// A device backend's counters (host synchronisations, launches) reach the training log
// as per-step differences, counted from the log's opening; the CPU backend has none and
// its lines have no such fields.
namespace {
uint64_t fakeSyncs = 0, fakeLaunches = 0;
void fakeCounters(uint64_t *syncs, uint64_t *launches) {
  *syncs = fakeSyncs;
  *launches = fakeLaunches;
}
const planrt_backend kCountingDevice = {"test-device", heapAlloc, std::free, nullptr, nullptr, fakeCounters};

std::vector<std::string> lines(const std::string &path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);)
    out.push_back(l);
  return out;
}
} // namespace

TEST(RuntimeLog, DeviceCountersArePerStep) {
  TempDir dir;
  uint64_t comm[4] = {0, 0, 0, 0};
  planrt_set_backend(&kCountingDevice);
  fakeSyncs = 100, fakeLaunches = 900; // the start-up: not in the first step
  planrt_log *log = nullptr;
  ASSERT_EQ(planrt_log_open((dir / "a.jsonl").c_str(), &log), PLANRT_OK) << planrt_last_error();
  fakeSyncs += 3, fakeLaunches += 40;
  ASSERT_EQ(planrt_log_step(log, 1, 2.5, 1e-3, 1.0, 10.0, comm, 1, 2), PLANRT_OK);
  fakeSyncs += 4, fakeLaunches += 41;
  ASSERT_EQ(planrt_log_step(log, 2, 2.4, 1e-3, 1.0, 10.0, comm, 1, 2), PLANRT_OK);
  planrt_log_close(log);
  planrt_set_backend(nullptr);
  std::vector<std::string> l = lines(dir / "a.jsonl");
  ASSERT_EQ(l.size(), 2u);
  EXPECT_NE(l[0].find("\"host_syncs\": 3, \"launches\": 40}"), std::string::npos) << l[0];
  EXPECT_NE(l[1].find("\"host_syncs\": 4, \"launches\": 41}"), std::string::npos) << l[1];
  ASSERT_EQ(planrt_log_open((dir / "b.jsonl").c_str(), &log), PLANRT_OK);
  ASSERT_EQ(planrt_log_step(log, 1, 2.5, 1e-3, 1.0, 10.0, comm, 1, 2), PLANRT_OK);
  planrt_log_close(log);
  EXPECT_EQ(lines(dir / "b.jsonl")[0].find("host_syncs"), std::string::npos);
}

// The backend's fill and add: the host's by default, a device backend's own when it has
// them (the CUDA backend's are kernels).
namespace {
int fakeFills = 0, fakeAdds = 0;
void fakeFill(void *p, float v, size_t n) {
  ++fakeFills;
  std::fill(static_cast<float *>(p), static_cast<float *>(p) + n, v);
}
void fakeAdd(float *to, const float *from, size_t n) {
  ++fakeAdds;
  for (size_t i = 0; i < n; ++i)
    to[i] += from[i];
}
const planrt_backend kFillingDevice = {"test-device", heapAlloc, std::free, nullptr, fakeFill, nullptr, fakeAdd};
} // namespace

TEST(RuntimeMemory, FillAndAddGoThroughTheBackend) {
  std::vector<float> a(5, 1.0f), b = {1, 2, 3, 4, 5};
  planrt_mem_fill(a.data(), 0.0f, 5); // the host's: memset for +0.0
  EXPECT_EQ(a, std::vector<float>(5, 0.0f));
  planrt_mem_fill(a.data(), -0.0f, 2); // -0.0 is not all zero bits
  EXPECT_TRUE(std::signbit(a[0]) && std::signbit(a[1]) && !std::signbit(a[2]));
  planrt_mem_add(a.data(), b.data(), 5);
  EXPECT_EQ(a, b);
  planrt_set_backend(&kFillingDevice);
  planrt_mem_fill(a.data(), 2.5f, 5);
  planrt_mem_add(a.data(), b.data(), 5);
  planrt_mem_fill(nullptr, 1.0f, 5); // nothing to fill: not the backend's business
  planrt_set_backend(nullptr);
  EXPECT_EQ(fakeFills, 1);
  EXPECT_EQ(fakeAdds, 1);
  EXPECT_EQ(a, (std::vector<float>{3.5f, 4.5f, 5.5f, 6.5f, 7.5f}));
}
