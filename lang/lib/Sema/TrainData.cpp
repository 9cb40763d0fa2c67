// The data of a train plan: its token files, the batch, micro-batch, sequence,
// step and seed counts, and the accumulation they imply.
#include "Train.h"

using namespace plan;
using namespace plan::lang;
using ast::Expr;

bool TrainCheck::tokenizerOf(const Value &v) {
  std::optional<std::string> path = sema.bpePath(v, t.baseDir);
  if (!path)
    return false;
  if (!t.tokenizer.empty() && t.tokenizer != *path) {
    diags.error(v.loc, "a plan tokenizes with one tokenizer; this one is '" + *path + "', another is '" +
                           t.tokenizer + "'");
    return false;
  }
  t.tokenizer = *path;
  return true;
}

bool TrainCheck::keyValue(const char *key, Value &v) {
  const Expr *e = sec.value(key);
  if (!e)
    return false;
  v = sema.eval(*e, nullptr);
  ok = ok && !v.isError();
  return !v.isError();
}

void TrainCheck::tokenFiles(const char *key, std::vector<std::string> &out, bool &text) {
  Value v;
  if (!keyValue(key, v))
    return;
  if (!model && v.kind == Value::Kind::Call && v.s == "images") {
    ok = false; // the model failed (already reported): whether it reads images is unknown
    return;
  }
  text = v.kind == Value::Kind::Call && v.s == "text";
  bool perClient = v.kind == Value::Kind::Call && v.s == "per_client" && std::string(key) == "data";
  if (v.kind != Value::Kind::Call || (v.s != "tokens" && !text && !perClient) || v.items.empty()) {
    sema.typeError(v, std::string("'") + key + "' of " + what,
                   "token files, as in tokens(\"data/train.bin\"), or text files, as in text(\"corpus/*.txt\", "
                   "tokenizer: bpe(\"tokenizer.json\"))" +
                       std::string(std::string(key) == "data" ? ", or a federated plan's per_client(\"clients/*/train.bin\")" : ""));
    ok = false;
    return;
  }
  if (perClient) {
    t.dataPerClient = true;
    perClientLoc = v.loc;
  }
  bool haveTokenizer = false;
  for (const Value::Item &it : v.items) {
    if (text && it.key == "tokenizer") {
      haveTokenizer = tokenizerOf(*it.value);
      ok = ok && haveTokenizer;
      continue;
    }
    if (!it.key.empty()) {
      diags.error(it.keyLoc, std::string("'") + v.s + "' takes file paths or globs" +
                                 (text ? " and 'tokenizer: bpe(…)'" : " only"));
      ok = false;
      continue;
    }
    if (auto s = sema.toString(*it.value, text ? "a text file" : "a token file"))
      out.push_back(*s);
    else
      ok = false;
  }
  if (text && !haveTokenizer && t.tokenizer.empty() && ok) {
    diags.error(v.loc, "text(…) needs a tokenizer: write text(\"…\", tokenizer: bpe(\"tokenizer.json\")) or "
                       "'tokenizer = bpe(\"tokenizer.json\")'");
    ok = false;
  }
}

void TrainCheck::checkData() {
  if (!sec.get("data") && !sec.misspelt("data")) {
    diags.error(decl.nameLoc, what + " needs 'data', as in 'data = tokens(\"data/train.bin\")'");
    ok = false;
  }
  // The plan's tokenizer first: text(…) without one of its own uses it.
  if (const Expr *e = sec.value("tokenizer")) {
    Value v = sema.eval(*e, nullptr);
    if (v.isError() || !tokenizerOf(v))
      ok = false;
  }
  if (model && model->images) {
    imageFiles("data", t.images);
    imageFiles("val", t.valImages);
    return;
  }
  tokenFiles("data", t.data, t.dataText);
  tokenFiles("val", t.val, t.valText);
}

bool TrainCheck::intKey(const char *key, int64_t &out, bool required, int64_t minimum) {
  const Expr *e = sec.value(key);
  if (!e) {
    if (required && !sec.get(key) && !sec.misspelt(key)) {
      diags.error(decl.nameLoc, what + " needs '" + key + "'");
      ok = false;
    }
    return false;
  }
  auto i = sema.toInt(sema.eval(*e, nullptr), std::string("'") + key + "' of " + what);
  if (!i) {
    ok = false;
    return false;
  }
  if (*i < minimum) {
    diags.error(e->loc, std::string("'") + key + "' of " + what + " must be at least " + std::to_string(minimum) +
                            ", not " + std::to_string(*i));
    ok = false;
    return false;
  }
  out = *i;
  return true;
}

void TrainCheck::checkSizes() {
  haveBatch = intKey("batch", t.batch, true, 1);
  haveMicro = intKey("micro", t.micro, false, 1);
  haveSeq = intKey("seq", t.seq, false, 1);
  intKey("steps", t.steps, !sec.get("federated"), 1); // a federated plan runs rounds
  intKey("seed", t.seed, false, 0);
}

void TrainCheck::checkAccumulation() {
  if (haveBatch && mesh) {
    if (!haveMicro) {
      if (t.batch % t.dataParallel == 0) {
        t.micro = t.batch / t.dataParallel;
      } else {
        diags.error(sec.get("batch")->loc, "batch " + std::to_string(t.batch) +
                                               " is not divisible by the data-parallel size " +
                                               std::to_string(t.dataParallel));
        ok = false;
      }
    }
    int64_t per;
    if (t.micro > 0 && !__builtin_mul_overflow(t.micro, t.dataParallel, &per) && per > 0 && t.batch % per == 0 &&
        t.batch >= per)
      t.accumulation = t.batch / per;
  }
}

void TrainCheck::checkSeq() {
  if (model && model->images) {
    // One position per image: the labels are [batch, 1].
    if (haveSeq) {
      diags.error(sec.get("seq")->loc, what + ": model '" + model->name + "' classifies images, which have no "
                                                                        "sequence; remove 'seq'");
      ok = false;
    }
    t.seq = 1;
  } else if (model) {
    if (!haveSeq && !sec.get("seq")) {
      if (model->maxSeq > 0) {
        t.seq = model->maxSeq;
      } else {
        diags.error(decl.nameLoc,
                    what + " needs 'seq': model '" + model->name + "' has no positional table to take it from");
        ok = false;
      }
    } else if (haveSeq && model->maxSeq > 0 && t.seq > model->maxSeq) {
      diags
          .error(sec.get("seq")->loc, "seq " + std::to_string(t.seq) + " exceeds the " + std::to_string(model->maxSeq) +
                                          " positions of model '" + model->name + "'")
          .note(model->loc, "model declared here");
      ok = false;
    }
  }
}
