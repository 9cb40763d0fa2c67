// planc-tokenize: a tokenizer.json's ids for files (one line of ids per file), or the
// text of ids with --decode. For checking planc's tokenizer against others
// (test/e2e/tokenizer_reference.sh) and for looking at how a text tokenizes.
#include "bpe.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

const char kUsage[] = "usage: planc-tokenize [--decode] TOKENIZER_JSON [FILE...]\n"
                      "  Encodes each FILE (standard input when none) with the byte-level BPE tokenizer.json\n"
                      "  and prints its ids as one line of space-separated integers per file.\n"
                      "  --decode  reads whitespace-separated ids from each FILE instead and prints their text\n"
                      "            (the files' texts one after another).\n";

int error(const std::string &message) {
  std::fprintf(stderr, "planc-tokenize: %s\n", message.c_str());
  return 1;
}
int usageError(const std::string &message) {
  std::fputs(kUsage, stderr);
  return error(message);
}

/// Reads a whole file ("-" or empty: standard input) in binary.
bool readAll(const std::string &path, std::string &out, std::string &err) {
  bool stdinput = path.empty() || path == "-";
  std::FILE *f = stdinput ? stdin : std::fopen(path.c_str(), "rb");
  std::string name = stdinput ? "standard input" : path;
  if (!f) {
    err = name + ": cannot open: " + std::strerror(errno);
    return false;
  }
  out.clear();
  char buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0)
    out.append(buf, got);
  int e = std::ferror(f) ? errno : 0;
  if (!stdinput)
    std::fclose(f);
  if (e)
    err = name + ": cannot read: " + std::strerror(e);
  return e == 0;
}

bool isBlank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

/// Parses whitespace-separated ids, each a token of `bpe`.
bool parseIds(const planrt::tokenizer::Bpe &bpe, const std::string &name, const std::string &text,
              std::vector<int32_t> &ids, std::string &err) {
  ids.clear();
  size_t i = 0, n = text.size();
  while (true) {
    while (i < n && isBlank(text[i]))
      ++i;
    if (i == n)
      return true;
    size_t begin = i;
    int64_t v = 0;
    while (i < n && text[i] >= '0' && text[i] <= '9' && v <= INT32_MAX)
      v = v * 10 + (text[i++] - '0');
    if (i == begin || (i < n && !isBlank(text[i])) || v > INT32_MAX || !bpe.hasId(int32_t(v))) {
      size_t end = begin;
      while (end < n && !isBlank(text[end]) && end - begin < 40)
        ++end;
      std::string word = text.substr(begin, end - begin);
      err = name + ": '" + word + "' at byte " + std::to_string(begin) + " is not a token id of the tokenizer (0 to " +
            std::to_string(bpe.vocabSize() - 1) + ")";
      return false;
    }
    ids.push_back(int32_t(v));
  }
}

void appendIds(std::string &out, const std::vector<int32_t> &ids) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i)
      out += ' ';
    out += std::to_string(ids[i]);
  }
  out += '\n';
}

} // namespace

int main(int argc, char **argv) {
  bool decode = false;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--decode")
      decode = true;
    else if (a.size() > 1 && a[0] == '-')
      return usageError("unknown option '" + a + "'");
    else
      args.push_back(a);
  }
  if (args.empty())
    return usageError("missing TOKENIZER_JSON");
  std::string err;
  auto bpe = planrt::tokenizer::Bpe::load(args[0], err);
  if (!bpe)
    return error(err);
  std::vector<std::string> files(args.begin() + 1, args.end());
  if (files.empty())
    files.push_back("-");
  std::string input, out;
  std::vector<int32_t> ids;
  for (const std::string &file : files) {
    if (!readAll(file, input, err))
      return error(err);
    if (!decode)
      appendIds(out, bpe->encode(input));
    else if (parseIds(*bpe, file == "-" ? "standard input" : file, input, ids, err))
      out += bpe->decode(ids);
    else
      return error(err);
    if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size())
      return error(std::string("cannot write the output: ") + std::strerror(errno));
    out.clear();
  }
  if (std::fflush(stdout) != 0)
    return error(std::string("cannot write the output: ") + std::strerror(errno));
  return 0;
}
