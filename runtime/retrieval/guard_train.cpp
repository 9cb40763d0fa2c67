// planrt-guard-train: trains the guard's learned detector (guard_learned.cpp) at build
// time. Each labelled line of guard_data/ is split into sentences as the guard reads
// them (guardSentences) and labelled; fastText trains a linear classifier over their
// words and word pairs, deterministically (one thread, a fixed seed and order).
//
//   planrt-guard-train MODEL_OUT INJECTIONS BENIGN [INJECTIONS BENIGN ...] [--holdout]
//   planrt-guard-train --score MODEL < TEXT
//
// Beside MODEL_OUT it writes MODEL_OUT.h, the model's digest as a macro that
// guard_learned.cpp compiles in: the object that embeds the model changes with it, so
// that no compiler cache returns one built around an older model.
//
// With --holdout every tenth line of each file is kept out of training and the
// classifier's precision and recall on them are printed (the model is still written).
// --score prints, for each sentence of each line of TEXT, the probability that the
// model gives it and the words it read.
#include "guard_classifier.h"
#include "retrieval.h"

#include <fasttext/fasttext.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace planrt::rag {
// The trainer has no model yet: the guard it links scans with its rules alone.
std::vector<double> guardLearned(const std::vector<std::string> &) { return {}; }
} // namespace planrt::rag

namespace {

struct Example {
  bool injection;
  std::string tokens;
};

bool readLines(const char *path, bool injection, bool holdout, std::vector<Example> &train,
               std::vector<Example> &held) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "planrt-guard-train: cannot read %s\n", path);
    return false;
  }
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line.rfind("# ", 0) == 0) // a section's comment
      continue;
    std::vector<Example> &to = holdout && n++ % 10 == 9 ? held : train;
    for (std::string &s : planrt::rag::guardSentences(line))
      to.push_back({injection, std::move(s)});
  }
  return true;
}

std::string labelled(const Example &e) {
  return std::string(e.injection ? planrt::rag::kInjectionLabel : planrt::rag::kBenignLabel) + " " + e.tokens + "\n";
}

void evaluate(const fasttext::FastText &ft, const std::vector<Example> &held) {
  for (double floor : {0.5, 0.6, 0.7, 0.8, 0.9}) {
    size_t tp = 0, fp = 0, fn = 0, tn = 0;
    for (const Example &e : held) {
      bool hit = planrt::rag::injectionProbability(ft, e.tokens) >= floor;
      (e.injection ? (hit ? tp : fn) : (hit ? fp : tn))++;
    }
    std::printf("held-out sentences, p >= %.1f: precision %.3f recall %.3f (tp %zu fp %zu fn %zu tn %zu)\n", floor,
                tp + fp ? double(tp) / double(tp + fp) : 0.0, tp + fn ? double(tp) / double(tp + fn) : 0.0, tp, fp, fn,
                tn);
  }
}

// MODEL.h: the FNV-1a digest of the model's bytes, written atomically.
bool writeDigest(const std::string &model) {
  std::ifstream in(model, std::ios::binary);
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c; in.get(c);)
    h = (h ^ uint8_t(c)) * 0x100000001b3ull;
  std::string tmp = model + ".h.tmp";
  {
    std::ofstream out(tmp);
    char line[96];
    std::snprintf(line, sizeof line, "#define PLANRT_GUARD_MODEL_DIGEST \"fnv1a64:%016llx\"\n", (unsigned long long)h);
    out << "// Written by planrt-guard-train: the digest of the guard's built-in model.\n" << line;
    if (!out)
      return false;
  }
  return std::rename(tmp.c_str(), (model + ".h").c_str()) == 0;
}

int score(const char *model) {
  fasttext::FastText ft; // loadModel(path) checks the file's header itself
  try {
    ft.loadModel(std::string(model));
  } catch (const std::exception &e) {
    std::fprintf(stderr, "planrt-guard-train: %s: %s\n", model, e.what());
    return 1;
  }
  std::string line;
  while (std::getline(std::cin, line))
    for (const std::string &s : planrt::rag::guardSentences(line))
      std::printf("%.3f\t%s\n", planrt::rag::injectionProbability(ft, s), s.c_str());
  return 0;
}

/// Trains on `train` (shuffled) and writes the model and its digest atomically.
bool trainModel(const std::vector<Example> &train, const std::string &model, fasttext::FastText &ft) {
  std::string input = model + ".train.txt";
  {
    std::ofstream out(input);
    for (const Example &e : train)
      out << labelled(e);
    if (!out) {
      std::fprintf(stderr, "planrt-guard-train: cannot write %s\n", input.c_str());
      return false;
    }
  }
  fasttext::Args a;
  a.input = input;
  a.model = fasttext::model_name::sup;
  a.loss = fasttext::loss_name::softmax;
  a.dim = 16;
  a.epoch = 15;
  a.lr = 0.3;
  a.wordNgrams = 2;
  a.minCount = 1;
  a.minn = 0;
  a.maxn = 0;
  a.bucket = 50000;
  a.thread = 1;
  a.seed = 1;
  a.verbose = 0;
  try {
    ft.train(a);
    std::string tmp = model + ".tmp";
    ft.saveModel(tmp);
    if (std::rename(tmp.c_str(), model.c_str()) != 0 || !writeDigest(model.c_str())) {
      std::perror("planrt-guard-train: writing the model");
      return false;
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "planrt-guard-train: %s\n", e.what());
    ::unlink(input.c_str());
    return false;
  }
  ::unlink(input.c_str());
  return true;
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 3 && std::string(argv[1]) == "--score")
    return score(argv[2]);
  std::vector<std::string> args(argv + 1, argv + argc);
  bool holdout = !args.empty() && args.back() == "--holdout";
  if (holdout)
    args.pop_back();
  if (args.size() < 3 || args.size() % 2 == 0) {
    std::fprintf(stderr, "usage: planrt-guard-train MODEL_OUT INJECTIONS BENIGN [INJECTIONS BENIGN ...] [--holdout]\n"
                         "       planrt-guard-train --score MODEL < TEXT\n");
    return 2;
  }
  const std::string &model = args[0];
  std::vector<Example> train, held;
  for (size_t k = 1; k + 1 < args.size(); k += 2)
    if (!readLines(args[k].c_str(), true, holdout, train, held) ||
        !readLines(args[k + 1].c_str(), false, holdout, train, held))
      return 1;
  std::shuffle(train.begin(), train.end(), std::mt19937(1));
  fasttext::FastText ft;
  if (!trainModel(train, model, ft))
    return 1;
  size_t pos = std::count_if(train.begin(), train.end(), [](const Example &e) { return e.injection; });
  std::printf("planrt-guard-train: %zu sentences (%zu injection, %zu benign) -> %s\n", train.size(), pos,
              train.size() - pos, model.c_str());
  if (holdout)
    evaluate(ft, held);
  return 0;
}
