// The byte-level BPE tokenizer (runtime/tokenizer/bpe.h) on small hand-written
// tokenizer.json files: merges by rank, ignore_merges, both pre-tokenizer kinds, byte
// fallback, added tokens, round trips, and every refusal with its message.
// test/e2e/tokenizer_reference.sh checks real vocabularies against other implementations.
#include "bpe.h"

#include "TempDir.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <thread>

namespace {

using json = nlohmann::json;
using planrt::tokenizer::Bpe;
using Ids = std::vector<int32_t>;

using plan::test::TempDir;

/// GPT-2's letter for a byte: the printable Latin-1 bytes themselves, the others U+0100
/// onwards in byte order.
std::string letter(uint8_t b) {
  static std::vector<std::string> letters = [] {
    std::vector<std::string> l(256);
    int extra = 0x100;
    for (int c = 0; c < 256; ++c) {
      bool printable = (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE;
      int cp = printable ? c : extra++;
      l[c] = cp < 0x80 ? std::string(1, char(cp))
                       : std::string{char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))}; // all below U+0800
    }
    return l;
  }();
  return letters[b];
}
std::string spell(std::string_view bytes) {
  std::string s;
  for (char c : bytes)
    s += letter(uint8_t(c));
  return s;
}

/// The 256 byte tokens with id = byte, then `extra` (raw bytes) at 256, 257, ….
json vocab(const std::vector<std::string> &extra = {}) {
  json v = json::object();
  for (int b = 0; b < 256; ++b)
    v[letter(uint8_t(b))] = b;
  for (size_t i = 0; i < extra.size(); ++i)
    v[spell(extra[i])] = 256 + i;
  return v;
}
/// Merges of raw-byte pairs, as "a b" strings.
json merges(const std::vector<std::pair<std::string, std::string>> &pairs) {
  json m = json::array();
  for (auto &[a, b] : pairs)
    m.push_back(spell(a) + " " + spell(b));
  return m;
}

const char *kLlama3Pattern = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)"
                             R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

json byteLevel(bool useRegex, bool prefixSpace = false) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", prefixSpace}, {"trim_offsets", true}, {"use_regex", useRegex}};
}
json model(json v, json m, bool ignoreMerges = false) {
  return {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"ignore_merges", ignoreMerges},
          {"vocab", v},    {"merges", m}};
}
/// GPT-2's kind: ByteLevel with GPT-2's regex.
json gpt2Kind(json v, json m, bool prefixSpace = false) {
  return {{"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", byteLevel(true, prefixSpace)},
          {"decoder", byteLevel(true)},
          {"model", model(v, m)}};
}
/// Llama 3's kind: Split on its regex, then ByteLevel without one; ignore_merges.
json llama3Kind(json v, json m, bool ignoreMerges = true) {
  json split = {
      {"type", "Split"}, {"pattern", {{"Regex", kLlama3Pattern}}}, {"behavior", "Isolated"}, {"invert", false}};
  json pre = {{"type", "Sequence"}, {"pretokenizers", {split, byteLevel(false)}}};
  return {{"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre},
          {"decoder", byteLevel(true)},
          {"model", model(v, m, ignoreMerges)}};
}
json added(int id, const std::string &content, bool normalized = false, bool lstrip = false, bool rstrip = false) {
  return {{"id", id},         {"content", content},       {"single_word", false}, {"lstrip", lstrip},
          {"rstrip", rstrip}, {"normalized", normalized}, {"special", true}};
}

std::unique_ptr<Bpe> load(const json &file) {
  TempDir dir;
  std::string error;
  auto bpe = Bpe::load(dir.write("tokenizer.json", file.dump()), error);
  EXPECT_TRUE(bpe) << error;
  EXPECT_EQ(error, "");
  return bpe;
}
/// The error of loading `text` from a file named t.json.
std::string loadError(const std::string &text) {
  TempDir dir;
  std::string path = dir.write("t.json", text), error;
  EXPECT_FALSE(Bpe::load(path, error));
  EXPECT_EQ(error.rfind(path, 0), 0u) << error; // starts with the file
  return error.substr(path.size());
}
/// Ids of text bytes, for results with no merge.
Ids bytes(std::string_view s) { return Ids(s.begin(), s.end()); }
Ids bytesOf(std::string_view s) {
  Ids ids;
  for (char c : s)
    ids.push_back(uint8_t(c));
  return ids;
}

TEST(Tokenizer, MergesApplyByRank) {
  // "ab" (256) and "bc" (257) compete for the b of "abc": the lower rank wins.
  auto bcFirst = load(gpt2Kind(vocab({"ab", "bc"}), merges({{"b", "c"}, {"a", "b"}})));
  EXPECT_EQ(bcFirst->encode("abc"), (Ids{'a', 257}));
  auto abFirst = load(gpt2Kind(vocab({"ab", "bc"}), merges({{"a", "b"}, {"b", "c"}})));
  EXPECT_EQ(abFirst->encode("abc"), (Ids{256, 'c'}));
  // Merges of merges: "abc" (258) from "ab" + "c".
  auto chain = load(gpt2Kind(vocab({"ab", "bc", "abc"}), merges({{"a", "b"}, {"b", "c"}, {"ab", "c"}})));
  EXPECT_EQ(chain->encode("abcabc"), (Ids{258, 258}));
  EXPECT_EQ(chain->encode("abcb"), (Ids{258, 'b'}));
}

TEST(Tokenizer, EqualRanksMergeLeftmostFirst) {
  auto bpe = load(gpt2Kind(vocab({"aa"}), merges({{"a", "a"}})));
  EXPECT_EQ(bpe->encode("aaa"), (Ids{256, 'a'}));
  EXPECT_EQ(bpe->encode("aaaaa"), (Ids{256, 256, 'a'}));
}

TEST(Tokenizer, MergesAsPairsEqualMergesAsStrings) {
  json pairs = json::array({json::array({"a", "b"}), json::array({"b", "c"})});
  auto asPairs = load(gpt2Kind(vocab({"ab", "bc"}), pairs));
  auto asStrings = load(gpt2Kind(vocab({"ab", "bc"}), merges({{"a", "b"}, {"b", "c"}})));
  EXPECT_EQ(asPairs->encode("abc bc ab"), asStrings->encode("abc bc ab"));
  EXPECT_EQ(asPairs->encode("abc"), (Ids{256, 'c'}));
}

TEST(Tokenizer, IgnoreMergesTakesAVocabWordWhole) {
  // "hello" is in the vocab but no merge makes it.
  json v = vocab({"he", "ll", "hello"});
  json m = merges({{"h", "e"}, {"l", "l"}});
  EXPECT_EQ(load(llama3Kind(v, m, true))->encode("hello"), (Ids{258}));
  EXPECT_EQ(load(llama3Kind(v, m, false))->encode("hello"), (Ids{256, 257, 'o'}));
  // A word not in the vocab still goes through the merges.
  EXPECT_EQ(load(llama3Kind(v, m, true))->encode("hellohe"), (Ids{256, 257, 'o', 256}));
}

TEST(Tokenizer, Gpt2PreTokensKeepMergesApart) {
  // "a " is a token, but GPT-2's regex cuts "a b" into "a" and " b".
  auto bpe = load(gpt2Kind(vocab({"a ", "  ", "'s", "Su"}), merges({{"a", " "}, {" ", " "}, {"'", "s"}, {"S", "u"}})));
  EXPECT_EQ(bpe->encode("a b"), (Ids{'a', ' ', 'b'}));
  // \s+(?!\S): of three spaces before a word, the last goes with the word.
  EXPECT_EQ(bpe->encode("a   b"), (Ids{'a', 257, ' ', 'b'}));
  EXPECT_EQ(bpe->encode("it's"), (Ids{'i', 't', 258}));
  // GPT-2's contractions are lower case only: "'Sup" is "'" and "Sup".
  EXPECT_EQ(bpe->encode("'Sup"), (Ids{'\'', 259, 'p'}));
}

TEST(Tokenizer, Llama3PreTokens) {
  json v = vocab({"12", "123", "34", "1234", "'S", "Su", "up"});
  json m = merges({{"1", "2"}, {"3", "4"}, {"12", "34"}, {"12", "3"}, {"S", "u"}, {"'", "S"}, {"u", "p"}});
  auto llama = load(llama3Kind(v, m, false));
  // Numbers in groups of three (one piece would merge "12" + "34" before "12" + "3").
  EXPECT_EQ(llama->encode("1234"), (Ids{257, '4'}));
  EXPECT_EQ(load(gpt2Kind(v, m))->encode("1234"), (Ids{259}));
  // (?i:'s): "'Sup" is "'S" and "up", where one piece would merge "Su" first.
  EXPECT_EQ(llama->encode("'Sup"), (Ids{260, 262}));
  // A run of newlines is a piece of its own.
  EXPECT_EQ(llama->encode("x\n\n'Sup"), (Ids{'x', '\n', '\n', 260, 262}));
}

TEST(Tokenizer, AddPrefixSpace) {
  auto bpe = load(gpt2Kind(vocab(), json::array(), true));
  EXPECT_EQ(bpe->encode("hi"), bytes(" hi"));
  EXPECT_EQ(bpe->encode(" hi"), bytes(" hi"));
  EXPECT_EQ(bpe->decode(bpe->encode("hi")), " hi");
}

TEST(Tokenizer, NonAsciiFallsBackToByteTokens) {
  for (const json &kind : {gpt2Kind(vocab(), json::array()), llama3Kind(vocab(), json::array())}) {
    auto bpe = load(kind);
    std::string text = "é€😀 日本";
    EXPECT_EQ(bpe->encode(text), bytesOf(text));
    EXPECT_EQ(bpe->decode(bpe->encode(text)), text);
  }
}

TEST(Tokenizer, InvalidUtf8IsEncodedByteForByte) {
  // 0xFF as "a\xff" would merge if the pre-tokenizer let it: it sees U+FFFD, not a letter.
  auto bpe = load(gpt2Kind(vocab({"a\xff"}), merges({{"a", "\xff"}})));
  EXPECT_EQ(bpe->encode("a\xff"), (Ids{'a', 0xFF}));
  auto llama = load(llama3Kind(vocab({"a\xff"}), merges({{"a", "\xff"}}), false));
  for (std::string text : std::vector<std::string>{"\xff", "a\xc3", "\xed\xa0\x80 surrogate", "\xc0\xaf overlong",
                                                   "ab\x80\x80 cd", "\xf0\x9f\x98x truncated",
                                                   "\xf4\x90\x80\x80 past U+10FFFF", std::string("nul\0byte", 8)}) {
    for (Bpe *b : {bpe.get(), llama.get()}) {
      Ids ids;
      EXPECT_NO_THROW(ids = b->encode(text));
      EXPECT_EQ(b->decode(ids), text);
    }
    EXPECT_EQ(bpe->encode(text), bytesOf(text)) << text;
  }
}

TEST(Tokenizer, AddedTokensMatchBeforePreTokenization) {
  json file = gpt2Kind(vocab(), json::array());
  file["added_tokens"] = {added(300, "<|endoftext|>"), added(301, "<|end"), added(302, "ab", true)};
  auto bpe = load(file);
  EXPECT_EQ(bpe->encode("a<|endoftext|>b"), (Ids{'a', 300, 'b'}));
  EXPECT_EQ(bpe->encode("<|end<|endoftext|>"), (Ids{301, 300})); // longest at each place
  EXPECT_EQ(bpe->encode("xab y"), (Ids{'x', 302, ' ', 'y'}));
  EXPECT_EQ(bpe->decode({'a', 300, 302}), "a<|endoftext|>ab");
  EXPECT_EQ(bpe->tokenId("<|endoftext|>"), 300);
  EXPECT_EQ(bpe->tokenId(letter(' ')), ' ');
  EXPECT_EQ(bpe->tokenId("nothing"), std::nullopt);
  EXPECT_EQ(bpe->vocabSize(), 303);
}

TEST(Tokenizer, UnnormalizedAddedTokensMatchFirst) {
  // "bc" (normalized: false) is matched in the whole text before "ab" (normalized: true)
  // in what is left, as Hugging Face does.
  json file = gpt2Kind(vocab(), json::array());
  file["added_tokens"] = {added(300, "ab", true), added(301, "bc", false)};
  EXPECT_EQ(load(file)->encode("abc"), (Ids{'a', 301}));
  EXPECT_EQ(load(file)->encode("ab c"), (Ids{300, ' ', 'c'}));
}

TEST(Tokenizer, AddedTokensStripWhitespace) {
  json file = gpt2Kind(vocab(), json::array());
  file["added_tokens"] = {added(300, "<mask>", false, true, false), added(301, "<r>", false, false, true),
                          added(302, "<n>")};
  auto bpe = load(file);
  EXPECT_EQ(bpe->encode("a \u3000<mask> b"), (Ids{'a', 300, ' ', 'b'}));
  EXPECT_EQ(bpe->encode("a <r> \n b"), (Ids{'a', ' ', 301, 'b'}));
  EXPECT_EQ(bpe->encode("a <n> b"), (Ids{'a', ' ', 302, ' ', 'b'}));
}

TEST(Tokenizer, DecodeOfEncodeIsTheText) {
  std::vector<std::string> texts = {
      "",
      "Hello, world! It's 2024; we'll see.\n",
      "👩‍👩‍👧 family 🎉🎉 party",
      "日本語のテキスト。中文，한국어",
      "tabs\tand\r\nCRLF\n\n\n    indented\n \n",
      "numbers 1234567890 ٣٤٥ ½ Ⅻ",
      "combining e\u0301 नमस्ते Ελληνικά",
      "<|endoftext|> in text",
      std::string(1000, ' ') + "x" + std::string(5000, '-'),
  };
  json v = vocab({"He", "ll", "o,", " w", "or", "ld"});
  json m = merges({{"H", "e"}, {"l", "l"}, {"o", ","}, {" ", "w"}, {"o", "r"}, {"l", "d"}});
  std::vector<std::pair<json, bool>> kinds = {{gpt2Kind(v, m), false},
                                              {gpt2Kind(v, m, true), true},
                                              {llama3Kind(v, m), false},
                                              {llama3Kind(v, m, false), false}};
  for (auto &[kind, prefixSpace] : kinds) {
    auto bpe = load(kind);
    for (const std::string &text : texts)
      EXPECT_EQ(bpe->decode(bpe->encode(text)), prefixSpace && !text.empty() && text[0] != ' ' ? " " + text : text);
  }
}

TEST(Tokenizer, LongWhiteSpaceRunsStayOnePiece) {
  // ICU's default backtracking stack ends `\s+(?!\S)` at about 300,000 spaces.
  auto bpe = load(gpt2Kind(vocab({"  "}), merges({{" ", " "}})));
  Ids ids = bpe->encode(std::string(600001, ' ') + "x");
  Ids expected(300000, 256);
  expected.insert(expected.end(), {' ', 'x'});
  EXPECT_EQ(ids, expected);
}

TEST(Tokenizer, TextsPastAWindowEncodeAsTheirLines) {
  // Over 16 MiB, pre-tokenization goes by windows cut between lines.
  auto bpe = load(llama3Kind(vocab({"ab", ".\n", "cd"}), merges({{"a", "b"}, {".", "\n"}, {"c", "d"}}), false));
  std::string line = "abababababababababab.\ncdcdcdcdcdcdcdcdcdcd\n", text;
  while (text.size() <= (size_t(17) << 20))
    text += line;
  Ids ids = bpe->encode(text), lineIds = bpe->encode(line);
  ASSERT_EQ(ids.size(), lineIds.size() * (text.size() / line.size()));
  for (size_t i = 0; i < ids.size(); ++i)
    ASSERT_EQ(ids[i], lineIds[i % lineIds.size()]) << i;
}

TEST(Tokenizer, UnknownIdsDecodeToNothing) {
  json file = gpt2Kind(vocab(), json::array());
  file["added_tokens"] = {added(300, "<x>")};
  auto bpe = load(file);
  EXPECT_FALSE(bpe->hasId(-1));
  EXPECT_FALSE(bpe->hasId(299));
  EXPECT_TRUE(bpe->hasId(300));
  EXPECT_EQ(bpe->decode({-1, 'a', 299, 300, 1 << 30}), "a<x>");
}

TEST(Tokenizer, ConcurrentEncodesAgree) {
  auto bpe = load(llama3Kind(vocab({"ab", "abc"}), merges({{"a", "b"}, {"ab", "c"}}), false));
  std::string text;
  for (int i = 0; i < 2000; ++i)
    text += "abc ab" + std::to_string(i) + " abcabc\n";
  Ids expected = bpe->encode(text);
  std::vector<Ids> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] { got[t] = bpe->encode(text); });
  for (auto &t : threads)
    t.join();
  for (const Ids &ids : got)
    EXPECT_EQ(ids, expected);
}

// ---- Refused files.

TEST(Tokenizer, UnreadableFile) {
  std::string error;
  EXPECT_FALSE(Bpe::load("/nonexistent/tokenizer.json", error));
  EXPECT_EQ(error, "/nonexistent/tokenizer.json: cannot open: No such file or directory");
  TempDir dir;
  EXPECT_FALSE(Bpe::load(dir.path, error));
  EXPECT_EQ(error, dir.path + ": cannot read: Is a directory");
}

TEST(Tokenizer, NotJson) {
  EXPECT_EQ(loadError("{\"model\": "), ": not JSON (parse error at line 1, column 11: syntax error while parsing "
                                       "value - unexpected end of input; expected '[', '{', or a literal)");
  EXPECT_EQ(loadError("[1, 2]"), ": not a tokenizer.json (the top level is not an object)");
}

TEST(Tokenizer, NotByteLevelBpe) {
  std::string tail = "; planc reads byte-level BPE tokenizers such as GPT-2's and Llama 3's";
  json wordPiece = gpt2Kind(vocab(), json::array());
  wordPiece["model"] = {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"vocab", {{"[UNK]", 0}}}};
  wordPiece["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
  EXPECT_EQ(loadError(wordPiece.dump()), " is not a byte-level BPE tokenizer (model.type WordPiece)" + tail);
  // SentencePiece converted to tokenizer.json: BPE, but over Metaspace pieces.
  json sentencePiece = gpt2Kind(vocab(), json::array());
  sentencePiece["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}};
  EXPECT_EQ(loadError(sentencePiece.dump()), " is not a byte-level BPE tokenizer (pre_tokenizer Metaspace)" + tail);
  sentencePiece["pre_tokenizer"] = nullptr;
  EXPECT_EQ(loadError(sentencePiece.dump()), " is not a byte-level BPE tokenizer (no pre_tokenizer)" + tail);
  sentencePiece["pre_tokenizer"] = {{"type", "Sequence"},
                                    {"pretokenizers", json::array({json{{"type", "WhitespaceSplit"}}})}};
  EXPECT_EQ(loadError(sentencePiece.dump()),
            " is not a byte-level BPE tokenizer (pre_tokenizer Sequence of WhitespaceSplit)" + tail);
}

TEST(Tokenizer, UnsupportedPieces) {
  json nfc = gpt2Kind(vocab(), json::array());
  nfc["normalizer"] = {{"type", "NFC"}};
  EXPECT_EQ(loadError(nfc.dump()),
            ": normalizer NFC is not supported (a byte-level BPE tokenizer.json has normalizer null)");
  json removed = llama3Kind(vocab(), json::array());
  removed["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  EXPECT_EQ(loadError(removed.dump()),
            ": pre_tokenizer.pretokenizers[0].behavior Removed is not supported (planc reads Isolated)");
  json badRegex = llama3Kind(vocab(), json::array());
  badRegex["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(\\p{L}";
  EXPECT_EQ(loadError(badRegex.dump()), ": pre_tokenizer.pretokenizers[0].pattern.Regex \"(\\p{L}\" does not compile "
                                        "(U_REGEX_MISMATCHED_PAREN at offset 6)");
  json wordPieceDecoder = gpt2Kind(vocab(), json::array());
  wordPieceDecoder["decoder"] = {{"type", "WordPiece"}};
  EXPECT_EQ(loadError(wordPieceDecoder.dump()),
            ": decoder WordPiece is not supported (planc decodes through the byte map: ByteLevel or null)");
  json singleWord = gpt2Kind(vocab(), json::array());
  singleWord["added_tokens"] = {added(300, "<x>")};
  singleWord["added_tokens"][0]["single_word"] = true;
  EXPECT_EQ(loadError(singleWord.dump()), ": added_tokens[0] (\"<x>\"): single_word is not supported");
}

TEST(Tokenizer, BadVocabAndMerges) {
  EXPECT_EQ(loadError(gpt2Kind(vocab(), merges({{"a", "b"}})).dump()),
            ": model.merges[0] (\"a\", \"b\") makes \"ab\", which is not in model.vocab");
  json unknownPart = gpt2Kind(vocab({"ab"}), json::array({"a b", "a zz"}));
  EXPECT_EQ(loadError(unknownPart.dump()),
            ": model.merges[1] (\"a\", \"zz\") names \"zz\", which is not in model.vocab");
  EXPECT_EQ(loadError(gpt2Kind(vocab(), json::array({"a b c"})).dump()),
            ": model.merges[0] (\"a b c\") is not two tokens separated by one space");
  json noNewline = gpt2Kind(vocab(), json::array());
  noNewline["model"]["vocab"].erase(letter('\n'));
  EXPECT_EQ(loadError(noNewline.dump()),
            ": model.vocab has no token for byte 10 (\"Ċ\"), which every byte-level BPE vocab has");
  json negative = gpt2Kind(vocab(), json::array());
  negative["model"]["vocab"]["x y"] = -3;
  EXPECT_EQ(loadError(negative.dump()), ": model.vocab[\"x y\"] is not an id from 0 to 16777215");
}

} // namespace
