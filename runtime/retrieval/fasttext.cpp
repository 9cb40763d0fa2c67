// The fastText embedder, `embed = fasttext(…)`: word and subword vectors (Bojanowski et
// al. 2017, "Enriching Word Vectors with Subword Information") trained on the store's
// own corpus at ingest with Debian's libfasttext, so that the vector side knows which
// words of this corpus mean alike, which hashed words cannot. A text's vector is the
// smooth-inverse-frequency mean of its words' unit vectors (Arora et al. 2017, "A Simple
// but Tough-to-Beat Baseline for Sentence Embeddings": weight a / (a + p(w)), p the word's
// frequency in the corpus), L2-normalised. Training runs on `threads` threads; with one
// (the default) it is deterministic, so the same corpus gives the same store.
#include "retrieval.h"
#include "status.h"

#include <fasttext/fasttext.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace planrt::rag {
namespace {

using planrt::fail;

/// SIF's a: the frequency at which a word's weight halves (the paper's range is 1e-4 to 1e-3).
constexpr double kSifA = 1e-3;
/// fastText reads at most 1024 words a line (Dictionary::MAX_LINE_SIZE): lines stay under it.
constexpr size_t kWordsPerLine = 1000;

/// fastText itself, with its model-file header check (protected) in reach.
struct FastText : fasttext::FastText {
  using fasttext::FastText::checkModel;
};

/// A stream over bytes already in memory (the store's verified file), without a copy.
struct BytesIn : std::streambuf {
  explicit BytesIn(const std::string &bytes) {
    char *p = const_cast<char *>(bytes.data());
    setg(p, p, p + bytes.size());
  }
};

/// Whether two matrices are the same, cell for cell.
bool same(const fasttext::DenseMatrix &a, const fasttext::DenseMatrix &b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), size_t(a.rows() * a.cols()) * sizeof(fasttext::real)) == 0;
}

/// A trained or loaded model and each dictionary word's SIF weight.
struct Model {
  FastText ft;
  std::vector<float> weight;

  /// Reads a model file's bytes; an error names `path`.
  planrt_status read(const std::string &bytes, const std::string &path) {
    if (bytes.size() < 8) // checkModel reads two int32s
      return fail(PLANRT_ERR_FORMAT, "%s: not a fastText model of the version this planc reads (0.9.2's)",
                  path.c_str());
    BytesIn buf(bytes);
    std::istream in(&buf);
    try {
      if (!ft.checkModel(in))
        return fail(PLANRT_ERR_FORMAT, "%s: not a fastText model of the version this planc reads (0.9.2's)",
                    path.c_str());
      ft.loadModel(in);
    } catch (const std::exception &e) {
      return fail(PLANRT_ERR_FORMAT, "%s: fastText cannot read it: %s", path.c_str(), e.what());
    }
    weigh();
    return PLANRT_OK;
  }

  void weigh() {
    std::shared_ptr<const fasttext::Dictionary> dict = ft.getDictionary();
    std::vector<int64_t> counts = dict->getCounts(fasttext::entry_type::word);
    double total = double(std::max<int64_t>(dict->ntokens(), 1));
    weight.resize(counts.size());
    for (size_t i = 0; i < counts.size(); ++i)
      weight[i] = float(kSifA / (kSifA + double(counts[i]) / total));
  }
};

class FastTextEmbedder final : public Embedder {
public:
  explicit FastTextEmbedder(const planrt_retrieval_config &cfg)
      : d(cfg.embed_dim), cbow(cfg.fasttext_model && std::strcmp(cfg.fasttext_model, "cbow") == 0),
        epoch(cfg.fasttext_epoch), minCount(cfg.fasttext_min_count), minn(cfg.fasttext_minn),
        maxn(cfg.fasttext_maxn), bucket(cfg.fasttext_bucket), threads(cfg.fasttext_threads) {}

  int64_t dim() const override { return d; }
  std::string describe() const override {
    return "fasttext(dim:" + std::to_string(d) + ",model:" + (cbow ? "cbow" : "skipgram") +
           ",epoch:" + std::to_string(epoch) + ",min_count:" + std::to_string(minCount) +
           ",minn:" + std::to_string(minn) + ",maxn:" + std::to_string(maxn) + ",bucket:" + std::to_string(bucket) +
           ",threads:" + std::to_string(threads) + ",pool:sif)";
  }
  const char *modelFile() const override { return "fasttext.bin"; }

  bool embed(std::string_view text, float *out) override {
    if (!model)
      throw std::logic_error("the fastText embedder was used before it was trained or loaded");
    std::vector<std::string> words = embedWords(text);
    std::shared_ptr<const fasttext::Dictionary> dict = model->ft.getDictionary();
    std::vector<double> acc(size_t(d), 0.0);
    fasttext::Vector v(d);
    bool any = false;
    for (const std::string &w : words) {
      model->ft.getWordVector(v, w);
      double n = v.norm();
      if (!(n > 0))
        continue; // no vector: a word shorter than minn and not in the dictionary
      int32_t id = dict->getId(w);
      double weight = id >= 0 && size_t(id) < model->weight.size() ? model->weight[size_t(id)] : 1.0;
      for (int64_t i = 0; i < d; ++i)
        acc[size_t(i)] += weight * double(v[i]) / n;
      any = true;
    }
    double norm = 0;
    for (double x : acc)
      norm += x * x;
    if (!any || !(norm > 0))
      return false;
    norm = std::sqrt(norm);
    for (int64_t i = 0; i < d; ++i)
      out[i] = float(acc[size_t(i)] / norm);
    return true;
  }

  planrt_status train(const std::vector<SourceFile> &files, const std::string &work) override {
    // fastText reads whitespace-separated words: the embedder's own words, so that
    // training and embedding see the same ones.
    std::string input = work + "/fasttext-train.txt";
    {
      std::ofstream os(input, std::ios::binary | std::ios::trunc);
      for (const SourceFile &f : files) {
        std::vector<std::string> words = embedWords(f.text);
        for (size_t i = 0; i < words.size(); ++i)
          os << words[i] << ((i + 1) % kWordsPerLine == 0 || i + 1 == words.size() ? '\n' : ' ');
      }
      if (!os.flush())
        return fail(PLANRT_ERR_IO, "%s: cannot write the fastText training text: %s", input.c_str(),
                    std::strerror(errno));
    }
    fasttext::Args a;
    a.input = input;
    a.model = cbow ? fasttext::model_name::cbow : fasttext::model_name::sg;
    a.loss = fasttext::loss_name::ns;
    a.dim = int(d);
    a.epoch = int(epoch);
    a.minCount = int(minCount);
    a.minn = int(minn);
    a.maxn = int(maxn);
    a.bucket = int(bucket);
    a.thread = int(threads);
    a.seed = 0;
    a.verbose = 0;
    auto m = std::make_shared<Model>();
    try {
      m->ft.train(a);
    } catch (const std::exception &e) {
      ::unlink(input.c_str());
      bool empty = std::strstr(e.what(), "Empty vocabulary") != nullptr;
      return fail(PLANRT_ERR_ARG, "embed = %s: training on the corpus failed: %s%s", describe().c_str(), e.what(),
                  empty ? " (no word of the corpus occurs min_count times: lower the plan's min_count)" : "");
    }
    ::unlink(input.c_str());
    m->weigh();
    model = std::move(m);
    return PLANRT_OK;
  }

  planrt_status save(const std::string &path) const override {
    if (!model)
      return fail(PLANRT_ERR_IO, "%s: no fastText model to write: it was never trained", path.c_str());
    try {
      // FastText::saveModel is not const, though it only writes the model out.
      const_cast<FastText &>(model->ft).saveModel(path);
    } catch (const std::exception &e) {
      return fail(PLANRT_ERR_IO, "%s: cannot write the fastText model: %s", path.c_str(), e.what());
    }
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    bool ok = fd >= 0 && ::fsync(fd) == 0;
    if (fd >= 0)
      ::close(fd);
    if (!ok)
      return fail(PLANRT_ERR_IO, "%s: cannot write the fastText model: %s", path.c_str(), std::strerror(errno));
    // fastText does not check its writes: read the file back, and compare its matrices
    // with the trained ones, so that a full disk is an error here, not a store whose model
    // reads back as zeros.
    std::string bytes;
    if (planrt_status s = readFile(path, bytes))
      return s;
    Model back;
    if (back.read(bytes, path) != PLANRT_OK || !same(*back.ft.getInputMatrix(), *model->ft.getInputMatrix()) ||
        !same(*back.ft.getOutputMatrix(), *model->ft.getOutputMatrix()))
      return fail(PLANRT_ERR_IO, "%s: the fastText model written does not read back whole (is the disk full?)",
                  path.c_str());
    return PLANRT_OK;
  }

  planrt_status load(const std::string &bytes, const std::string &path) override {
    auto m = std::make_shared<Model>();
    if (planrt_status s = m->read(bytes, path))
      return s;
    if (m->ft.getDimension() != d)
      return fail(PLANRT_ERR_FORMAT, "%s: a model of dimension %d, where the plan says %lld", path.c_str(),
                  m->ft.getDimension(), (long long)d);
    model = std::move(m);
    return PLANRT_OK;
  }

  std::unique_ptr<Embedder> share() const override { return std::make_unique<FastTextEmbedder>(*this); }

private:
  int64_t d;
  bool cbow;
  int64_t epoch, minCount, minn, maxn, bucket, threads;
  /// Read-only once trained or loaded: FastText::getWordVector is const.
  std::shared_ptr<const Model> model;
};

} // namespace

std::unique_ptr<Embedder> makeFastTextEmbedder(const planrt_retrieval_config &cfg) {
  return std::make_unique<FastTextEmbedder>(cfg);
}

} // namespace planrt::rag
