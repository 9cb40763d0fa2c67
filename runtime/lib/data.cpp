// Token data: nanoGPT raw uint16 files and llm.c headered files, memory-mapped,
// sampled deterministically from (seed, global sample index).
#include "bpe.h"
#include "files.h"
#include "random.h"
#include "status.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <glob.h>
#include <memory>
#include <string>
#include <sys/mman.h>
#include <vector>

using planrt::fail;
using planrt::below;
using planrt::mix;

namespace {

constexpr int32_t kLlmcMagic = 20240520;
constexpr size_t kLlmcHeaderInts = 256;

struct TokenFile {
  std::string path;
  const uint16_t *tokens = nullptr;
  /// A text file tokenized at open (text(…, tokenizer: bpe(…))): its ids, held here.
  std::shared_ptr<const std::vector<uint32_t>> text;
  uint64_t count = 0;
  void *map = nullptr;
  size_t mapSize = 0;
  uint64_t headerBytes = 0;
  uint32_t at(uint64_t i) const { return text ? (*text)[i] : tokens[i]; }
};

/// Whether a file that lacks the llm.c magic still starts like an llm.c header: a
/// date-like magic (2024-01-01 … 2029-12-31, as llm.c's formats use) and a small
/// version. Raw uint16 tokens start like this only if tokens 1, 2 and 3 are 308 or
/// 309, 1–255 and 0 (and token 0 is in a matching range): not a plausible text.
bool looksLikeLlmcHeader(const unsigned char *bytes, size_t size) {
  if (size < kLlmcHeaderInts * 4)
    return false;
  int32_t header[2];
  std::memcpy(header, bytes, sizeof header);
  return header[0] >= 20240101 && header[0] <= 20291231 && header[1] >= 1 && header[1] <= 255;
}

} // namespace

struct planrt_data {
  std::vector<TokenFile> files;
  uint64_t seed = 0;
  int64_t vocab = 0;
  uint64_t total = 0;

  ~planrt_data() {
    for (TokenFile &f : files)
      if (f.map)
        munmap(f.map, f.mapSize);
  }

  planrt_status openFile(const std::string &path) {
    TokenFile f;
    f.path = path;
    void *map = nullptr;
    size_t size = 0;
    if (planrt_status s = planrt::mapFile(path, "token", map, size))
      return s;
    f.map = map;
    f.mapSize = size;
    const auto *bytes = static_cast<const unsigned char *>(map);
    int32_t magic = 0;
    if (size >= sizeof magic)
      std::memcpy(&magic, bytes, sizeof magic);
    if (magic == kLlmcMagic) {
      // llm.c: int32 header[256] = {magic, version, tokens, …}, then uint16 tokens.
      if (size < kLlmcHeaderInts * 4) {
        munmap(map, size);
        return fail(PLANRT_ERR_FORMAT, "%s: truncated llm.c header (%zu bytes of 1024)", path.c_str(), size);
      }
      int32_t header[3];
      std::memcpy(header, bytes, sizeof header);
      if (header[1] != 1) {
        munmap(map, size);
        return fail(PLANRT_ERR_FORMAT, "%s: llm.c token file version %d; planc reads version 1 (uint16 tokens)",
                    path.c_str(), header[1]);
      }
      uint64_t expect = kLlmcHeaderInts * 4 + uint64_t(uint32_t(header[2])) * 2;
      if (header[2] < 0 || expect != size) {
        munmap(map, size);
        return fail(PLANRT_ERR_FORMAT,
                    "%s: truncated or corrupt: the header promises %d tokens (%llu bytes) but the file has %zu bytes",
                    path.c_str(), header[2], (unsigned long long)expect, size);
      }
      f.headerBytes = kLlmcHeaderInts * 4;
      f.count = uint64_t(header[2]);
    } else if (looksLikeLlmcHeader(bytes, size)) {
      // Another llm.c format (e.g. 20240801, uint32 tokens) or a corrupt magic: read
      // as raw uint16 it would silently train on the header and on half-tokens.
      int32_t version = 0;
      std::memcpy(&version, bytes + 4, sizeof version);
      munmap(map, size);
      return fail(PLANRT_ERR_FORMAT,
                  "%s: an llm.c-style header with magic %d (version %d); planc reads llm.c token files with magic %d "
                  "(version 1, uint16 tokens) and raw uint16 files",
                  path.c_str(), magic, version, kLlmcMagic);
    } else {
      // nanoGPT: raw little-endian uint16 tokens.
      if (size % 2 != 0) {
        munmap(map, size);
        return fail(PLANRT_ERR_FORMAT,
                    "%s: %zu bytes is not a whole number of uint16 tokens: truncated, or not a token file",
                    path.c_str(), size);
      }
      f.count = size / 2;
    }
    f.tokens = reinterpret_cast<const uint16_t *>(bytes + f.headerBytes);
    total += f.count;
    files.push_back(f);
    return PLANRT_OK;
  }

  /// A text file, tokenized with `bpe` into ids held in memory.
  planrt_status openText(const std::string &path, const planrt::tokenizer::Bpe &bpe) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
      return fail(PLANRT_ERR_IO, "%s: cannot open: %s", path.c_str(), std::strerror(errno));
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad())
      return fail(PLANRT_ERR_IO, "%s: cannot read: %s", path.c_str(), std::strerror(errno));
    if (bytes.empty())
      return fail(PLANRT_ERR_FORMAT, "%s: empty text file", path.c_str());
    std::vector<int32_t> ids = bpe.encode(bytes);
    auto held = std::make_shared<std::vector<uint32_t>>(ids.begin(), ids.end());
    TokenFile f;
    f.path = path;
    f.count = held->size();
    f.text = std::move(held);
    total += f.count;
    files.push_back(std::move(f));
    return PLANRT_OK;
  }

  /// Copies window [offset, offset + seq + 1) of file f into tokens/targets, checking ids.
  planrt_status copy(const TokenFile &f, uint64_t offset, int64_t seq, int32_t *tokens, int32_t *targets) const {
    // Validate the whole window first: a failed call writes nothing.
    for (int64_t i = 0; vocab > 0 && i <= seq; ++i) {
      uint32_t t = f.at(offset + uint64_t(i));
      if (t >= uint64_t(vocab))
        return fail(PLANRT_ERR_FORMAT, "%s: token %u at position %llu is outside the vocabulary of %lld",
                    f.path.c_str(), unsigned(t), (unsigned long long)(offset + uint64_t(i)), (long long)vocab);
    }
    for (int64_t i = 0; i <= seq; ++i) {
      int32_t t = int32_t(f.at(offset + uint64_t(i)));
      if (i < seq)
        tokens[i] = t;
      if (i > 0)
        targets[i - 1] = t;
    }
    return PLANRT_OK;
  }
};

extern "C" {

planrt_status planrt_data_open(const char *const *patterns, size_t count, uint64_t seed, int64_t vocab,
                               planrt_data **out) {
  return planrt_data_open_text(patterns, count, nullptr, seed, vocab, out);
}

planrt_status planrt_data_open_text(const char *const *patterns, size_t count, const char *tokenizer, uint64_t seed,
                                    int64_t vocab, planrt_data **out) {
  if (!out || (count && !patterns))
    return fail(PLANRT_ERR_ARG, "planrt_data_open: null argument");
  std::unique_ptr<planrt::tokenizer::Bpe> bpe;
  if (tokenizer) {
    std::string error;
    if (!(bpe = planrt::tokenizer::Bpe::load(tokenizer, error)))
      return fail(PLANRT_ERR_FORMAT, "%s", error.c_str());
    if (vocab > 0 && bpe->vocabSize() > vocab)
      return fail(PLANRT_ERR_FORMAT, "%s: the tokenizer has %lld ids but the model's vocabulary has %lld", tokenizer,
                  (long long)bpe->vocabSize(), (long long)vocab);
  }
  auto data = std::make_unique<planrt_data>();
  data->seed = seed;
  data->vocab = vocab;
  for (size_t i = 0; i < count; ++i) {
    std::vector<std::string> paths;
    if (planrt_status s = planrt::expandPattern(patterns[i], bpe ? "text" : "token", paths))
      return s;
    for (const std::string &p : paths)
      if (planrt_status s = bpe ? data->openText(p, *bpe) : data->openFile(p))
        return s;
  }
  if (data->files.empty())
    return fail(PLANRT_ERR_ARG, "planrt_data_open: no token files given");
  *out = data.release();
  return PLANRT_OK;
}

uint64_t planrt_data_tokens(const planrt_data *data) { return data ? data->total : 0; }

planrt_status planrt_data_sample(const planrt_data *data, uint64_t index, int64_t seq, int32_t *tokens,
                                 int32_t *targets) {
  if (!data || !tokens || !targets || seq < 1)
    return fail(PLANRT_ERR_ARG, "planrt_data_sample: bad argument");
  // Windows start anywhere a whole window of seq + 1 tokens fits.
  uint64_t starts = 0;
  for (const TokenFile &f : data->files)
    if (f.count > uint64_t(seq))
      starts += f.count - uint64_t(seq);
  if (starts == 0)
    return fail(PLANRT_ERR_FORMAT, "%s: fewer than %lld tokens: too short for one sequence",
                data->files.front().path.c_str(), (long long)seq + 1);
  uint64_t pick = below(mix(data->seed ^ mix(index)), starts);
  for (const TokenFile &f : data->files) {
    if (f.count <= uint64_t(seq))
      continue;
    uint64_t here = f.count - uint64_t(seq);
    if (pick < here)
      return data->copy(f, pick, seq, tokens, targets);
    pick -= here;
  }
  return fail(PLANRT_ERR_ARG, "planrt_data_sample: internal error");
}

planrt_status planrt_data_batch(const planrt_data *data, uint64_t first, int64_t count, int64_t seq, int32_t *tokens,
                                int32_t *targets) {
  for (int64_t i = 0; i < count; ++i)
    if (planrt_status s = planrt_data_sample(data, first + uint64_t(i), seq, tokens + i * seq, targets + i * seq))
      return s;
  return PLANRT_OK;
}

planrt_status planrt_data_window(const planrt_data *data, uint64_t window, int64_t seq, int32_t *tokens,
                                 int32_t *targets) {
  if (!data || !tokens || !targets || seq < 1)
    return fail(PLANRT_ERR_ARG, "planrt_data_window: bad argument");
  uint64_t w = window;
  for (const TokenFile &f : data->files) {
    uint64_t here = f.count > uint64_t(seq) ? (f.count - 1) / uint64_t(seq) : 0;
    if (w < here)
      return data->copy(f, w * uint64_t(seq), seq, tokens, targets);
    w -= here;
  }
  return fail(PLANRT_ERR_ARG, "evaluation window %llu is past the end of the data", (unsigned long long)window);
}

void planrt_data_close(planrt_data *data) { delete data; }

} // extern "C"
