// The guard's learned detector's labels and its reading of one sentence: one source
// for the trainer (guard_train.cpp) and the library (guard_learned.cpp).
#ifndef PLANRT_GUARD_CLASSIFIER_H
#define PLANRT_GUARD_CLASSIFIER_H

#include <fasttext/fasttext.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace planrt::rag {

inline const char *const kInjectionLabel = "__label__injection";
inline const char *const kBenignLabel = "__label__benign";

/// The probability `ft` gives that a sentence (as guardSentences writes it) is an
/// injection.
inline double injectionProbability(const fasttext::FastText &ft, const std::string &tokens) {
  std::istringstream in(tokens + "\n");
  std::vector<std::pair<fasttext::real, std::string>> pred;
  ft.predictLine(in, pred, 2, 0.0);
  for (const auto &[prob, label] : pred)
    if (label == kInjectionLabel)
      return prob;
  return 0;
}

} // namespace planrt::rag

#endif // PLANRT_GUARD_CLASSIFIER_H
