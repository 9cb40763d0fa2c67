// The guard's learned detector: a fastText classifier (Joulin et al., "Bag of Tricks
// for Efficient Text Classification", 2016) over the guard's normalised sentences,
// trained at build time by planrt-guard-train on guard_data/ and built into the
// library (docs/RETRIEVAL.md "The guard").
#include "guard_classifier.h"
#include "guard_model.bin.h" // PLANRT_GUARD_MODEL_DIGEST
#include "retrieval.h"

#include <fasttext/fasttext.h>

#include <cstdio>
#include <cstdlib>
#include <istream>
#include <mutex>
#include <sstream>

// The trained model's bytes, from the file the build names in PLANRT_GUARD_MODEL.
asm(".section .rodata\n"
    ".balign 16\n"
    "planrt_guard_model_begin:\n"
    ".incbin \"" PLANRT_GUARD_MODEL "\"\n"
    "planrt_guard_model_end:\n"
    ".previous\n");
extern "C" const char planrt_guard_model_begin[], planrt_guard_model_end[];

namespace planrt::rag {
namespace {

/// fastText, with its model-file header check (protected) in reach.
struct FastText : fasttext::FastText {
  using fasttext::FastText::checkModel;
};

/// A stream over the built-in bytes, without a copy.
struct Bytes : std::streambuf {
  Bytes(const char *begin, const char *end) {
    setg(const_cast<char *>(begin), const_cast<char *>(begin), const_cast<char *>(end));
  }
};

const fasttext::FastText &model() {
  static FastText ft;
  static std::once_flag once;
  std::call_once(once, [] {
    Bytes buf(planrt_guard_model_begin, planrt_guard_model_end);
    std::istream in(&buf);
    const char *why = "not a fastText 0.9.2 model";
    try {
      if (ft.checkModel(in)) {
        ft.loadModel(in);
        return;
      }
    } catch (const std::exception &e) {
      why = e.what();
    }
    // The model is built with the library: failing to read it is a broken build.
    std::fprintf(stderr, "planrt: the guard's built-in classifier (%s) does not load (%s); rebuild planc\n",
                 PLANRT_GUARD_MODEL_DIGEST, why);
    std::abort();
  });
  return ft;
}

} // namespace

std::vector<double> guardLearned(const std::vector<std::string> &sentences) {
  const fasttext::FastText &ft = model();
  std::vector<double> out;
  out.reserve(sentences.size());
  for (const std::string &s : sentences)
    out.push_back(injectionProbability(ft, s));
  return out;
}

} // namespace planrt::rag
