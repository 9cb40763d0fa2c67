// Internal: the pieces of planrt_retrieval, in C++, shared by its files and its unit tests.
#ifndef PLANRT_RETRIEVAL_INTERNAL_H
#define PLANRT_RETRIEVAL_INTERNAL_H

#include "planrt_retrieval.h"

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace planrt::rag {

// ---- util.cpp: hashing, files, paths.
/// sha256 of `data` as 64 lowercase hex digits (OpenSSL).
std::string sha256Hex(std::string_view data);
/// `path` joined to `base` if relative, then lexically normalised ("." and ".." folded).
std::string resolvePath(const std::string &base, const std::string &path);
/// The directory part of a normalised path ("." for a bare name).
std::string dirName(const std::string &path);
/// Reads a whole file; PLANRT_ERR_IO naming it on failure, with the errno in *err.
planrt_status readFile(const std::string &path, std::string &out, int *err = nullptr);
/// Writes a file and fsyncs it.
planrt_status writeFileDurable(const std::string &path, std::string_view data);
/// fsyncs a directory (so renames and creations in it are durable).
void syncDir(const std::string &dir);
/// Removes a directory tree (best effort).
void removeTree(const std::string &path);
/// Creates a directory and its parents.
planrt_status makeDirs(const std::string &path);
/// Byte offset of the first invalid UTF-8 sequence, or npos if `text` is valid UTF-8
/// (no overlong forms, no surrogates, nothing above U+10FFFF).
size_t invalidUtf8(std::string_view text);

// ---- corpus.cpp: globs, the manifest, reading and refusing files.
/// Expands glob(3)-style patterns (relative ones against `base`); a `**` segment
/// matches zero or more directories. Sorted, without duplicates; paths as written
/// (relative patterns give relative paths).
planrt_status expandGlobs(const std::vector<std::string> &patterns, const std::string &base,
                          std::vector<std::string> &files);
/// A sha256sum-format manifest: absolute normalised path → hex digest. Paths in it
/// are relative to the manifest's directory.
planrt_status readManifest(const std::string &path, std::map<std::string, std::string> &entries);

struct SourceFile {
  std::string name; ///< as the pattern produced it: the provenance shown to users
  std::string path; ///< resolved against the base directory
  std::string sha256;
  std::string text;
};
/// Reads every file and checks it: size limit, readable, manifest entry and hash,
/// no NUL byte, valid UTF-8. Every refused file is listed in one error.
planrt_status loadCorpus(const planrt_retrieval_config &cfg, std::vector<SourceFile> &files, int progress);

// ---- chunk.cpp.
struct Span {
  uint64_t begin, end; ///< byte range [begin, end)
  bool operator==(const Span &o) const { return begin == o.begin && end == o.end; }
};
/// The units a chunker counts: tokens (maximal runs of non-whitespace bytes),
/// sentences, or paragraphs, as byte ranges with no surrounding whitespace.
std::vector<Span> chunkUnits(planrt_chunk_kind kind, std::string_view text);
/// Chunks of `size` units, consecutive chunks sharing `overlap` units; each chunk
/// spans from its first unit's begin to its last unit's end.
std::vector<Span> chunkText(planrt_chunk_kind kind, std::string_view text, int64_t size, int64_t overlap);
class Embedder;
/// Whole sentences in chunks of at most `size` tokens (a longer sentence alone), cut
/// where the cosine between the mean embedding of the two sentences before a boundary
/// and of the two after it is below `threshold`, once the chunk holds a quarter of
/// `size`; a chunk about to outgrow `size` is cut at its least similar boundary past
/// that quarter. The embedder is the store's.
std::vector<Span> chunkSemantic(std::string_view text, int64_t size, double threshold, Embedder &embedder);

// ---- embed.cpp.
/// The words the hashing embedder sees: maximal runs of ASCII letters and digits
/// and non-ASCII bytes, ASCII-lowercased.
std::vector<std::string> embedWords(std::string_view text);
/// Signed feature hashing of word unigrams and bigrams into `dim` floats,
/// L2-normalised (all zero when the text has no word).
void embedHashing(std::string_view text, int64_t dim, float *out);

/// What turns text into the store's vectors.
class Embedder {
public:
  virtual ~Embedder() = default;
  virtual int64_t dim() const = 0;
  /// What a store's fingerprint records of it ("hashing(384)", "model(tiny,…,params:…)"):
  /// a store embedded by another embedder is rebuilt by ingest, refused by query.
  virtual std::string describe() const = 0;
  /// Writes dim() floats, L2-normalised; false (nothing written) when the text has
  /// nothing to embed (no word for hashing, no byte for a model).
  virtual bool embed(std::string_view text, float *out) = 0;

  /// A store-trained embedder (fasttext(…)): the name of its model's file in the store;
  /// null for the others. Its model is trained on the whole corpus whenever the corpus
  /// changes, so such a store reuses no vector across a changed corpus.
  virtual const char *modelFile() const { return nullptr; }
  /// Trains the model on the corpus (ingest); `work` is a scratch directory.
  virtual planrt_status train(const std::vector<SourceFile> &, const std::string &) { return PLANRT_OK; }
  /// Writes the trained model to `path`, durably.
  virtual planrt_status save(const std::string &) const { return PLANRT_OK; }
  /// Loads the model from the store file's verified bytes (`path` names it in errors).
  virtual planrt_status load(const std::string &, const std::string &) { return PLANRT_OK; }
  /// Another handle on the same embedder for another thread (serve's searchers),
  /// sharing what it loaded read-only; null when each thread must open its own.
  virtual std::unique_ptr<Embedder> share() const { return nullptr; }
};
/// The configuration's embedder: hashing(dim), model(...) with its checkpoint loaded
/// (model.cpp), or fasttext(...) untrained, to be trained or loaded from the store
/// (fasttext.cpp).
planrt_status openEmbedder(const planrt_retrieval_config &cfg, std::unique_ptr<Embedder> &out);

// ---- fasttext.cpp: word and subword vectors trained on the corpus.
/// A fasttext(…) embedder, untrained (cfg.embed == PLANRT_EMBED_FASTTEXT).
std::unique_ptr<Embedder> makeFastTextEmbedder(const planrt_retrieval_config &cfg);

// ---- model.cpp: a compiled model as embedder and re-ranker.
/// A model embedder (cfg.embed == PLANRT_EMBED_MODEL).
planrt_status openModelEmbedder(const planrt_retrieval_config &cfg, std::unique_ptr<Embedder> &out);
class Reranker {
public:
  virtual ~Reranker() = default;
  /// The mean log-probability of the query's bytes following the chunk's
  /// (docs/RETRIEVAL.md "Models"): larger is more relevant.
  virtual double score(std::string_view chunk, std::string_view query) = 0;
};
/// The model re-ranker with its checkpoint loaded; null for rerank = none.
planrt_status openReranker(const planrt_retrieval_config &cfg, std::unique_ptr<Reranker> &out);

// ---- fusion (query.cpp).
struct Scored {
  int64_t id;
  double score; ///< larger is better
};
struct Fused {
  int64_t id;
  double score;
  int vectorRank = 0, keywordRank = 0; ///< 1-based, 0 = absent from that side
  double vectorScore = 0, keywordScore = 0;
};
/// Fuses two ranked lists (each best first). Weighted: each side's scores min-max
/// normalised to [0, 1] (all 1 when they are equal), then wv·v + wk·k, an absent
/// side contributing 0. RRF: Σ 1/(k + rank) over the sides that hold the chunk.
/// Ties are broken by chunk id. One-sided searches pass an empty other list.
constexpr double kRrfK = 60;
std::vector<Fused> fuse(const std::vector<Scored> &vec, const std::vector<Scored> &kw, planrt_fusion fusion, double wv,
                        double wk, double rrfK = kRrfK);

// ---- guard.cpp.
struct Flag {
  uint32_t begin, end;
  const char *kind;
  double score;
};
/// The instruction-like spans of `text` (docs/RETRIEVAL.md "The guard").
std::vector<Flag> guardScan(std::string_view text);
/// `text` as quoted data: every line prefixed "> ", invisible and control
/// characters shown as <U+XXXX>, flagged spans marked ⟦flagged:kind⟧…⟦/flagged⟧.
std::string guardQuote(std::string_view text, const std::vector<Flag> &flags);
/// A hit's flags, as guardQuote takes them.
std::vector<Flag> hitFlags(const planrt_hit &hit);
/// The sentences (and table cells, and lines) of `text` as the learned detector reads
/// them: normalised words (obfuscation undone, lowercase), spaces between, " ?" after a
/// question. The trainer (guard_train.cpp) reads its labelled lines through it too.
std::vector<std::string> guardSentences(std::string_view text);

// ---- guard_learned.cpp.
/// The learned detector: for each sentence (as guardSentences writes them), the
/// probability that it is an instruction planted for an AI reader. A fastText classifier
/// trained at build time on guard_data/ and built into the library; empty where no
/// model is built in (the trainer itself).
std::vector<double> guardLearned(const std::vector<std::string> &sentences);

// ---- manifest.cpp: a planc-built executable's retrieval manifest.
/// A configuration and the strings it borrows.
struct Config {
  planrt_retrieval_config cfg{};
  std::deque<std::string> strings; // push_back keeps earlier elements in place
  std::vector<const char *> corpus;
};
/// Reads a planc-retrieval-1 manifest; false (the message in planrt_last_error()) if malformed.
bool parseConfig(const char *manifest, const planrt_retrieval_models *models, Config &config);
/// A grounded prompt from a query's hits (planrt_retrieval_ground): the instruction
/// section, and the hits as quoted data with provenance (guard = quarantine) or as
/// plain text (off); `report` is the JSON of the documents and their flags.
planrt_status groundPrompt(const planrt_retrieval_config &cfg, const planrt_hit *hits, size_t count,
                           const char *question, const char *instructions, std::string &prompt, std::string &report);

// ---- serve.cpp.
/// `EXE serve [options]` (argv[first..] are the options): the exit status.
int serveRetrieval(const planrt_retrieval_config &cfg, int argc, char **argv, int first);

// ---- store.cpp.
/// What the configuration contributes to a store's contents (chunker, embedder,
/// index): stores built under another fingerprint are not reused or queried.
std::string configText(const planrt_retrieval_config &cfg, const Embedder &embedder);
/// Checks the configuration's values (sizes, kinds, strings) before any work.
planrt_status checkConfig(const planrt_retrieval_config &cfg);
/// The store directory, resolved against the base directory.
std::string storePath(const planrt_retrieval_config &cfg);

} // namespace planrt::rag

#endif // PLANRT_RETRIEVAL_INTERNAL_H
