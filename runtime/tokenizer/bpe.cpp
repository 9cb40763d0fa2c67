// Hugging Face byte-level BPE (bpe.h): tokenizer.json read and checked, added tokens
// matched, pre-tokenization on ICU's regex engine, merges applied by rank, a word cache.
#include "bpe.h"

#include <nlohmann/json.hpp>
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/utf16.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <queue>
#include <stdexcept>
#include <unordered_map>

namespace planrt::tokenizer {
namespace {

using json = nlohmann::json;

/// GPT-2's pre-tokenizer pattern, which `ByteLevel{use_regex: true}` means.
constexpr const char *kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
/// Ids past this are refused: decode keeps a table indexed by id.
constexpr int64_t kMaxId = (int64_t(1) << 24) - 1;
/// ICU's backtracking stack: `\s+(?!\S)` takes about 32 bytes for each character of a
/// run of white space, and ICU's default limit, 8 MB, ends at runs of about 300,000; so
/// 64 bytes per UTF-16 unit of the window, under the most ICU takes (it counts the limit
/// in 4-byte units and refuses a stack of 2^28 8-byte slots).
constexpr int64_t kStackPerUnit = 64, kStackMin = int64_t(8) << 20, kStackMax = int64_t(960) << 20;
/// Distinct pre-tokens remembered (then no more are added, as Hugging Face's cache).
constexpr size_t kCacheWords = size_t(1) << 19;
/// The most bytes handed to ICU at once; a longer text is pre-tokenized in windows
/// (splitIsolated). Defined smaller to test the cuts.
#ifndef PLANRT_TOKENIZER_MAX_WINDOW
#define PLANRT_TOKENIZER_MAX_WINDOW (size_t(16) << 20)
#endif
constexpr size_t kMaxWindow = PLANRT_TOKENIZER_MAX_WINDOW;

/// A malformed file; the message follows the file's name.
struct LoadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] void fail(const std::string &what) { throw LoadError(": " + what); }
[[noreturn]] void notByteLevel(const std::string &why) {
  throw LoadError(" is not a byte-level BPE tokenizer (" + why +
                  "); planc reads byte-level BPE tokenizers such as GPT-2's and Llama 3's");
}

/// GPT-2's byte ↔ letter map: the printable Latin-1 bytes stand for themselves, the other
/// 68 (controls, space, 0x7F-0xA0, 0xAD) for U+0100 onwards in byte order, so that every
/// token is printable text.
struct ByteMap {
  std::array<char32_t, 256> letter{};
  std::array<int16_t, 256 + 68> byte{};
  ByteMap() {
    byte.fill(-1);
    char32_t extra = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      letter[b] = printable ? char32_t(b) : extra++;
      byte[letter[b]] = int16_t(b);
    }
  }
  int byteOf(UChar32 c) const { return c >= 0 && size_t(c) < byte.size() ? byte[c] : -1; }
};
const ByteMap &byteMap() {
  static const ByteMap m;
  return m;
}

std::string utf8(char32_t c) {
  char buf[4];
  int32_t n = 0;
  UBool bad = false;
  U8_APPEND(buf, n, 4, c, bad);
  return std::string(buf, bad ? 0 : n);
}

/// The bytes a vocab key spells in byte-level letters; nullopt if it has another letter.
std::optional<std::string> keyBytes(const std::string &key) {
  std::string out;
  int32_t i = 0, n = int32_t(key.size());
  while (i < n) {
    UChar32 c;
    U8_NEXT(key.data(), i, n, c);
    int b = byteMap().byteOf(c);
    if (b < 0)
      return std::nullopt;
    out.push_back(char(b));
  }
  return out;
}

/// Quoted for a message, shortened past 60 bytes (at a character's start).
std::string quote(const std::string &s) {
  size_t n = s.size() > 60 ? 60 : s.size();
  while (n < s.size() && n > 0 && (uint8_t(s[n]) & 0xC0) == 0x80)
    --n;
  return "\"" + s.substr(0, n) + (n < s.size() ? "…" : "") + "\"";
}

/// A member that is present and not null, or nullptr.
const json *field(const json &o, const char *key) {
  if (!o.is_object())
    return nullptr;
  auto it = o.find(key);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}
std::string typeOf(const json &o) {
  const json *t = field(o, "type");
  return t && t->is_string() ? t->get<std::string>() : o.is_object() ? "without a type" : "that is not an object";
}
bool flag(const json &o, const char *key, bool byDefault, const std::string &where) {
  const json *f = field(o, key);
  if (!f)
    return byDefault;
  if (!f->is_boolean())
    fail(where + "." + key + " is not true or false");
  return f->get<bool>();
}
std::string text(const json &o, const char *key, const std::string &where) {
  const json *f = field(o, key);
  if (!f || !f->is_string())
    fail(where + "." + key + " is missing or not a string");
  return f->get<std::string>();
}

/// One pre-tokenizer step: Split (isolating the pattern's matches) or ByteLevel (a
/// space put before each piece without one, then GPT-2's pattern if use_regex).
struct Step {
  bool addPrefixSpace = false;
  std::unique_ptr<icu::RegexPattern> pattern; ///< null: no splitting
};

std::unique_ptr<icu::RegexPattern> compile(const std::string &pattern, bool literal, const std::string &where) {
  UErrorCode st = U_ZERO_ERROR;
  UParseError pe{};
  // MULTILINE: Oniguruma's Ruby syntax, which Hugging Face uses, anchors ^ and $ at lines.
  std::unique_ptr<icu::RegexPattern> p(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(pattern),
                                                                  literal ? UREGEX_LITERAL : UREGEX_MULTILINE, pe, st));
  if (U_FAILURE(st))
    fail(where + " " + quote(pattern) + " does not compile (" + u_errorName(st) + " at offset " +
         std::to_string(pe.offset) + ")");
  return p;
}

Step readSplit(const json &s, const std::string &where) {
  std::string behavior = text(s, "behavior", where);
  if (behavior != "Isolated")
    fail(where + ".behavior " + behavior + " is not supported (planc reads Isolated)");
  if (flag(s, "invert", false, where))
    fail(where + ".invert is not supported");
  const json *p = field(s, "pattern");
  const json *regex = p ? field(*p, "Regex") : nullptr, *literal = p ? field(*p, "String") : nullptr;
  if (!(regex && regex->is_string()) && !(literal && literal->is_string()))
    fail(where + ".pattern is not {\"Regex\": …} or {\"String\": …}");
  Step step;
  step.pattern = regex ? compile(regex->get<std::string>(), false, where + ".pattern.Regex")
                       : compile(literal->get<std::string>(), true, where + ".pattern.String");
  return step;
}

Step readByteLevel(const json &s, const std::string &where) {
  Step step;
  step.addPrefixSpace = flag(s, "add_prefix_space", true, where);
  if (flag(s, "use_regex", true, where))
    step.pattern = compile(kGpt2Pattern, false, "GPT-2's pattern");
  return step;
}

/// ByteLevel, or a Sequence of Split steps ended by one ByteLevel.
std::vector<Step> readPreTokenizer(const json *pt) {
  if (!pt)
    notByteLevel("no pre_tokenizer");
  std::string type = typeOf(*pt);
  std::vector<Step> steps;
  if (type == "ByteLevel") {
    steps.push_back(readByteLevel(*pt, "pre_tokenizer"));
    return steps;
  }
  const json *list = field(*pt, "pretokenizers");
  if (type != "Sequence" || !list || !list->is_array())
    notByteLevel("pre_tokenizer " + type);
  std::string names;
  for (const json &s : *list)
    names += (names.empty() ? "" : ", ") + typeOf(s);
  if (names.find("ByteLevel") == std::string::npos)
    notByteLevel("pre_tokenizer Sequence of " + (names.empty() ? "nothing" : names));
  for (size_t i = 0; i < list->size(); ++i) {
    std::string where = "pre_tokenizer.pretokenizers[" + std::to_string(i) + "]", t = typeOf((*list)[i]);
    bool last = i + 1 == list->size();
    if (t == "ByteLevel" && last)
      steps.push_back(readByteLevel((*list)[i], where));
    else if (t == "Split" && !last)
      steps.push_back(readSplit((*list)[i], where));
    else
      fail(where + " (" + t + ") is not supported there: planc reads a Sequence of Split steps ended by one ByteLevel");
  }
  return steps;
}

void checkNormalizerAndDecoder(const json &root) {
  if (const json *n = field(root, "normalizer")) {
    const json *list = field(*n, "normalizers");
    bool empty = typeOf(*n) == "Sequence" && list && list->is_array() && list->empty();
    if (!empty)
      fail("normalizer " + typeOf(*n) + " is not supported (a byte-level BPE tokenizer.json has normalizer null)");
  }
  if (const json *d = field(root, "decoder"); d && typeOf(*d) != "ByteLevel")
    fail("decoder " + typeOf(*d) + " is not supported (planc decodes through the byte map: ByteLevel or null)");
}

} // namespace

/// An added token and how it takes the whitespace beside it.
struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool lstrip = false, rstrip = false;
};

/// Added tokens by first byte, longest first: the first that matches at a position is
/// the longest there.
struct AddedSet {
  std::array<std::vector<AddedToken>, 256> byFirst;
  bool empty = true;
  const AddedToken *longestAt(std::string_view text, size_t i) const {
    for (const AddedToken &t : byFirst[uint8_t(text[i])])
      if (text.compare(i, t.content.size(), t.content) == 0)
        return &t;
    return nullptr;
  }
};

struct Bpe::Impl {
  std::vector<Step> steps;
  bool ignoreMerges = false;
  std::array<int32_t, 256> byteIds{};
  std::unordered_map<std::string, int32_t> wordIds;  ///< a vocab token's bytes → id
  std::unordered_map<std::string, int32_t> tokenIds; ///< a token as the file spells it → id
  struct Merge {
    int32_t rank, id;
  };
  std::unordered_map<uint64_t, Merge> merges; ///< (left id, right id) → rank, merged id
  std::vector<std::string> idBytes;           ///< what each id decodes to
  std::vector<uint8_t> idKnown;
  AddedSet raw, normalized; ///< normalized: false ones first, the others in the gaps
  mutable std::mutex cacheLock;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

  static uint64_t pairKey(int32_t a, int32_t b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }
  void setId(int32_t id, std::string bytes);
  void readModel(const json &model);
  void readVocab(const json &vocab);
  void readMerges(const json &list, const std::unordered_map<std::string, int32_t> &vocab);
  void readAddedTokens(const json *list);

  void splitAdded(const AddedSet &set, std::string_view text, const std::function<void(std::string_view)> &gap,
                  std::vector<int32_t> &out) const;
  void encodeText(std::string_view text, std::vector<int32_t> &out) const;
  void encodeWord(const std::string &word, std::vector<int32_t> &out) const;
  std::vector<int32_t> mergeWord(std::string_view word) const;
};

void Bpe::Impl::setId(int32_t id, std::string bytes) {
  if (size_t(id) >= idBytes.size()) {
    idBytes.resize(size_t(id) + 1);
    idKnown.resize(size_t(id) + 1, 0);
  }
  idBytes[id] = std::move(bytes);
  idKnown[id] = 1;
}

void Bpe::Impl::readVocab(const json &vocab) {
  if (!vocab.is_object())
    fail("model.vocab is not an object of token → id");
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const json &v = it.value();
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxId)
      fail("model.vocab[" + quote(it.key()) + "] is not an id from 0 to " + std::to_string(kMaxId));
    int32_t id = v.get<int32_t>();
    tokenIds[it.key()] = id;
    std::optional<std::string> bytes = keyBytes(it.key());
    if (bytes) {
      wordIds[*bytes] = id;
      if (bytes->size() == 1)
        byteIds[uint8_t((*bytes)[0])] = id;
    }
    // A key outside the byte-level letters decodes as its own text (Hugging Face's ByteLevel decoder).
    setId(id, bytes ? *bytes : it.key());
  }
  for (int b = 0; b < 256; ++b)
    if (!wordIds.count(std::string(1, char(b))))
      fail("model.vocab has no token for byte " + std::to_string(b) + " (" + quote(utf8(byteMap().letter[b])) +
           "), which every byte-level BPE vocab has");
}

void Bpe::Impl::readMerges(const json &list, const std::unordered_map<std::string, int32_t> &vocab) {
  if (!list.is_array())
    fail("model.merges is not an array");
  int32_t rank = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const json &m = list[i];
    std::string where = "model.merges[" + std::to_string(i) + "]", a, b;
    if (m.is_string()) {
      std::string s = m.get<std::string>();
      if (s.rfind("#version", 0) == 0)
        continue; // Hugging Face skips a merges.txt header
      size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        fail(where + " (" + quote(s) + ") is not two tokens separated by one space");
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>(), b = m[1].get<std::string>();
    } else {
      fail(where + " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    auto id = [&](const std::string &token, const char *verb) {
      auto it = vocab.find(token);
      if (it == vocab.end())
        fail(where + " (" + quote(a) + ", " + quote(b) + ") " + verb + " " + quote(token) +
             ", which is not in model.vocab");
      return it->second;
    };
    int32_t left = id(a, "names"), right = id(b, "names"), merged = id(a + b, "makes");
    merges[pairKey(left, right)] = {rank++, merged};
  }
}

void Bpe::Impl::readModel(const json &model) {
  if (!model.is_object())
    fail("model is missing or not an object");
  const json *type = field(model, "type");
  if ((type && (!type->is_string() || *type != "BPE")) || (!type && !field(model, "merges")))
    notByteLevel("model.type " + (!type               ? std::string("missing")
                                  : type->is_string() ? type->get<std::string>()
                                                      : type->dump()));
  if (const json *d = field(model, "dropout"); d && !(d->is_number() && d->get<double>() == 0))
    fail("model.dropout is not supported (it makes encoding random)");
  for (const char *key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const json *s = field(model, key); s && !(s->is_string() && s->get<std::string>().empty()))
      fail(std::string("model.") + key + " is not supported in a byte-level BPE");
  ignoreMerges = flag(model, "ignore_merges", false, "model");
  const json *vocab = field(model, "vocab"), *list = field(model, "merges");
  if (!vocab)
    fail("model.vocab is missing");
  readVocab(*vocab);
  readMerges(list ? *list : json::array(), tokenIds);
}

void Bpe::Impl::readAddedTokens(const json *list) {
  if (!list)
    return;
  if (!list->is_array())
    fail("added_tokens is not an array");
  for (size_t i = 0; i < list->size(); ++i) {
    const json &t = (*list)[i];
    std::string where = "added_tokens[" + std::to_string(i) + "]";
    const json *id = field(t, "id");
    if (!id || !id->is_number_integer() || id->get<int64_t>() < 0 || id->get<int64_t>() > kMaxId)
      fail(where + ".id is missing or not an id from 0 to " + std::to_string(kMaxId));
    AddedToken a{text(t, "content", where), id->get<int32_t>(), flag(t, "lstrip", false, where),
                 flag(t, "rstrip", false, where)};
    if (a.content.empty())
      fail(where + ".content is empty");
    if (flag(t, "single_word", false, where))
      fail(where + " (" + quote(a.content) + "): single_word is not supported");
    tokenIds[a.content] = a.id;
    setId(a.id, a.content);
    AddedSet &set = flag(t, "normalized", !flag(t, "special", false, where), where) ? normalized : raw;
    std::vector<AddedToken> &bucket = set.byFirst[uint8_t(a.content[0])];
    auto shorter = std::find_if(bucket.begin(), bucket.end(),
                                [&](const AddedToken &b) { return b.content.size() < a.content.size(); });
    bucket.insert(shorter, std::move(a)); // longest first, else in file order
    set.empty = false;
  }
}

// ---- Encoding.

namespace {

/// A piece as ICU's UTF-16, with each unit's byte offset in the piece (offset[size] is
/// the piece's length). An ill-formed UTF-8 subpart is one U+FFFD, at its first byte.
struct Utf16 {
  std::vector<char16_t> units;
  std::vector<uint32_t> offset;
  explicit Utf16(std::string_view s) {
    units.reserve(s.size());
    offset.reserve(s.size() + 1);
    int32_t i = 0, n = int32_t(s.size());
    while (i < n) {
      int32_t start = i;
      UChar32 c;
      U8_NEXT_OR_FFFD(s.data(), i, n, c);
      units.push_back(c <= 0xFFFF ? char16_t(c) : char16_t(U16_LEAD(c)));
      offset.push_back(uint32_t(start));
      if (c > 0xFFFF) {
        units.push_back(U16_TRAIL(c));
        offset.push_back(uint32_t(start));
      }
    }
    offset.push_back(uint32_t(n));
  }
};

/// Appends the pieces of piece[begin, end) that `pattern` isolates: each match, and each
/// run between matches. Should ICU give up (it bounds its backtracking), the rest goes a
/// character at a time.
void splitWindow(const icu::RegexPattern &pattern, const std::string &piece, size_t begin, size_t end,
                 std::vector<std::string> &out) {
  Utf16 u(std::string_view(piece).substr(begin, end - begin));
  auto emit = [&](uint32_t b, uint32_t e) {
    if (e > b)
      out.emplace_back(piece, begin + b, e - b);
  };
  icu::UnicodeString input(false, u.units.data(), int32_t(u.units.size())); // read-only alias
  UErrorCode st = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> m(pattern.matcher(input, st));
  if (U_SUCCESS(st))
    m->setStackLimit(int32_t(std::min(kStackMax, kStackMin + kStackPerUnit * int64_t(u.units.size()))), st);
  uint32_t prev = 0;
  while (U_SUCCESS(st) && m->find(st)) {
    int32_t b = m->start(st), e = m->end(st);
    if (U_FAILURE(st))
      break;
    emit(prev, u.offset[b]);
    emit(u.offset[b], u.offset[e]);
    prev = u.offset[e];
  }
  for (size_t k = 0; U_FAILURE(st) && k + 1 < u.offset.size(); ++k)
    if (u.offset[k] >= prev && u.offset[k + 1] != u.offset[k]) { // a character's last unit
      emit(u.offset[k], u.offset[k + 1]);
      prev = u.offset[k + 1];
    }
  emit(prev, uint32_t(end - begin));
}

bool isAsciiGraphic(char c) { return c > ' ' && c < 0x7F; }

/// Where the window of `s` that starts at `begin` ends: within kMaxWindow bytes, after
/// the last line break between two visible ASCII characters (no pre-token of GPT-2's or
/// Llama 3's pattern spans one: "a\nb" is "a", "\n", "b" and ".\nb" is ".\n", "b", cut
/// there or not), else after the last line break, else at a character's start.
size_t windowEnd(const std::string &s, size_t begin) {
  if (s.size() - begin <= kMaxWindow)
    return s.size();
  size_t anyBreak = 0;
  for (size_t i = begin + kMaxWindow - 1; i > begin; --i) {
    if (s[i] != '\n')
      continue;
    if (isAsciiGraphic(s[i - 1]) && isAsciiGraphic(s[i + 1]))
      return i + 1;
    anyBreak = anyBreak ? anyBreak : i + 1;
  }
  if (anyBreak)
    return anyBreak;
  size_t end = begin + kMaxWindow;
  while (end > begin + 1 && (uint8_t(s[end]) & 0xC0) == 0x80)
    --end;
  return end;
}

/// splitWindow over the piece window by window (ICU's indexes are 32-bit, and its stack
/// grows with the text).
void splitIsolated(const icu::RegexPattern &pattern, const std::string &piece, std::vector<std::string> &out) {
  for (size_t begin = 0, end; begin < piece.size(); begin = end) {
    end = windowEnd(piece, begin);
    splitWindow(pattern, piece, begin, end, out);
  }
}

bool isSpace(UChar32 c) { return c >= 0 && u_isUWhiteSpace(c); }

/// The character that ends at `at` (not before `floor`), moving `at` to its start if it
/// is white space; a negative value for an ill-formed byte.
UChar32 charBefore(std::string_view s, size_t floor, size_t &at) {
  size_t start = at - 1;
  while (start > floor && at - start < 4 && (uint8_t(s[start]) & 0xC0) == 0x80)
    --start;
  int32_t i = 0, n = int32_t(at - start);
  UChar32 c;
  U8_NEXT(s.data() + start, i, n, c);
  if (i != n)
    c = -1;
  if (isSpace(c))
    at = start;
  return c;
}

/// The character that starts at `at`, moving `at` past it if it is white space.
UChar32 charAfter(std::string_view s, size_t &at) {
  int32_t i = 0, n = int32_t(std::min<size_t>(4, s.size() - at));
  UChar32 c;
  U8_NEXT(s.data() + at, i, n, c);
  if (isSpace(c))
    at += size_t(i);
  return c;
}

} // namespace

void Bpe::Impl::splitAdded(const AddedSet &set, std::string_view text, const std::function<void(std::string_view)> &gap,
                           std::vector<int32_t> &out) const {
  size_t gapBegin = 0, i = 0;
  while (!set.empty && i < text.size()) {
    const AddedToken *t = set.longestAt(text, i);
    if (!t) {
      ++i;
      continue;
    }
    size_t begin = i, end = i + t->content.size();
    while (t->lstrip && begin > gapBegin && isSpace(charBefore(text, gapBegin, begin)))
      ;
    while (t->rstrip && end < text.size() && isSpace(charAfter(text, end)))
      ;
    if (begin > gapBegin)
      gap(text.substr(gapBegin, begin - gapBegin));
    out.push_back(t->id);
    gapBegin = i = end;
  }
  if (gapBegin < text.size())
    gap(text.substr(gapBegin));
}

void Bpe::Impl::encodeText(std::string_view text, std::vector<int32_t> &out) const {
  std::vector<std::string> pieces{std::string(text)}, next;
  for (const Step &step : steps) {
    next.clear();
    for (std::string &p : pieces) {
      if (step.addPrefixSpace && p[0] != ' ')
        p.insert(p.begin(), ' ');
      if (step.pattern)
        splitIsolated(*step.pattern, p, next);
      else
        next.push_back(std::move(p));
    }
    pieces.swap(next);
  }
  for (const std::string &p : pieces)
    encodeWord(p, out);
}

void Bpe::Impl::encodeWord(const std::string &word, std::vector<int32_t> &out) const {
  if (word.size() == 1) {
    out.push_back(byteIds[uint8_t(word[0])]);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(cacheLock);
    auto it = cache.find(word);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  auto whole = ignoreMerges ? wordIds.find(word) : wordIds.end();
  if (whole != wordIds.end())
    ids.push_back(whole->second);
  else
    ids = mergeWord(word);
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cacheLock);
  if (cache.size() < kCacheWords)
    cache.emplace(word, std::move(ids));
}

/// Hugging Face's Word::merge_all: the bytes as a linked list of symbols; the mergeable
/// adjacent pairs in a heap by (rank, position); the lowest merged first, and the pairs it
/// forms with its neighbours pushed. An entry whose pair has changed since is skipped.
std::vector<int32_t> Bpe::Impl::mergeWord(std::string_view word) const {
  struct Symbol {
    int32_t id, prev, next;
    bool alive;
  };
  struct Candidate {
    int32_t rank, pos, id;
    bool operator>(const Candidate &o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  int32_t n = int32_t(word.size());
  std::vector<Symbol> sym(n);
  for (int32_t i = 0; i < n; ++i)
    sym[i] = {byteIds[uint8_t(word[i])], i - 1, i + 1 < n ? i + 1 : -1, true};
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int32_t pos) {
    if (int32_t next = sym[pos].next; next >= 0) {
      auto it = merges.find(pairKey(sym[pos].id, sym[next].id));
      if (it != merges.end())
        heap.push({it->second.rank, pos, it->second.id});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i)
    push(i);
  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    Symbol &s = sym[c.pos];
    if (!s.alive || s.next < 0)
      continue;
    auto it = merges.find(pairKey(s.id, sym[s.next].id));
    if (it == merges.end() || it->second.id != c.id)
      continue;
    int32_t gone = s.next;
    s.id = c.id;
    s.next = sym[gone].next;
    sym[gone].alive = false;
    if (s.next >= 0)
      sym[s.next].prev = c.pos;
    if (s.prev >= 0)
      push(s.prev);
    push(c.pos);
  }
  std::vector<int32_t> ids;
  for (int32_t i = 0; i >= 0; i = sym[i].next)
    ids.push_back(sym[i].id);
  return ids;
}

// ---- The class.

Bpe::Bpe(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
Bpe::~Bpe() = default;

std::unique_ptr<Bpe> Bpe::parse(std::string_view jsonText, const std::string &name, std::string &error) {
  auto t = std::make_unique<Impl>();
  try {
    json root;
    try {
      root = json::parse(jsonText.begin(), jsonText.end());
    } catch (const json::parse_error &e) {
      std::string what = e.what();
      fail("not JSON (" + what.substr(what.find(']') + 2) + ")");
    }
    if (!root.is_object())
      fail("not a tokenizer.json (the top level is not an object)");
    const json *model = field(root, "model");
    t->readModel(model ? *model : json());
    t->steps = readPreTokenizer(field(root, "pre_tokenizer"));
    checkNormalizerAndDecoder(root);
    t->readAddedTokens(field(root, "added_tokens"));
  } catch (const LoadError &e) {
    error = name + e.what();
    return nullptr;
  } catch (const json::exception &e) {
    error = name + ": unexpected JSON (" + e.what() + ")";
    return nullptr;
  }
  return std::unique_ptr<Bpe>(new Bpe(std::move(t)));
}

std::unique_ptr<Bpe> Bpe::load(const std::string &path, std::string &error) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) {
    error = path + ": cannot open: " + std::strerror(errno);
    return nullptr;
  }
  std::string data;
  char buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0)
    data.append(buf, got);
  int err = std::ferror(f) ? errno : 0;
  std::fclose(f);
  if (err) {
    error = path + ": cannot read: " + std::strerror(err);
    return nullptr;
  }
  return parse(data, path, error);
}

std::vector<int32_t> Bpe::encode(std::string_view utf8) const {
  std::vector<int32_t> out;
  out.reserve(utf8.size() / 3);
  impl->splitAdded(
      impl->raw, utf8,
      [&](std::string_view gap) {
        impl->splitAdded(
            impl->normalized, gap, [&](std::string_view text) { impl->encodeText(text, out); }, out);
      },
      out);
  return out;
}

std::string Bpe::decode(const std::vector<int32_t> &ids) const {
  std::string out;
  for (int32_t id : ids)
    if (hasId(id))
      out += impl->idBytes[id];
  return out;
}

bool Bpe::hasId(int32_t id) const { return id >= 0 && size_t(id) < impl->idKnown.size() && impl->idKnown[id]; }

int64_t Bpe::vocabSize() const { return int64_t(impl->idBytes.size()); }

std::optional<int32_t> Bpe::tokenId(std::string_view token) const {
  auto it = impl->tokenIds.find(std::string(token));
  return it == impl->tokenIds.end() ? std::nullopt : std::optional<int32_t>(it->second);
}

} // namespace planrt::tokenizer
