// A Hugging Face `tokenizer.json` byte-level BPE (the GPT-2 and Llama 3 kinds), for
// `tokenizer = bpe("tokenizer.json")` (docs EXTENSIONS.md §1): text to token ids and back,
// following Hugging Face's `tokenizers` (with `add_special_tokens=False`); checked id for
// id against GPT-2's own encoder and tiktoken by test/e2e/tokenizer_reference.sh.
#ifndef PLANRT_TOKENIZER_BPE_H
#define PLANRT_TOKENIZER_BPE_H

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace planrt::tokenizer {

/// A loaded tokenizer; immutable after load, so encode and decode may be called from
/// several threads at once (the word cache takes a lock).
///
/// What a file may hold, and what is refused at load with an error naming the file:
/// - `model`: `type` "BPE" with `vocab` (token → id) and `merges`, each "a b" or
///   ["a", "b"] (a merge whose parts or result is not in the vocab is an error; a
///   later duplicate outranks an earlier one, as in Hugging Face), `ignore_merges`
///   (Llama 3: a pre-token that is itself in the vocab is one token). Every byte
///   must have its byte-level token. `dropout`, `continuing_subword_prefix` and
///   `end_of_word_suffix` must be unset.
/// - `pre_tokenizer`: `ByteLevel` (GPT-2: `use_regex` splits with GPT-2's pattern,
///   `add_prefix_space` puts a space before each piece that lacks one), or a `Sequence`
///   of `Split{pattern: {Regex | String}, behavior: Isolated}` steps ended by one
///   `ByteLevel` (Llama 3: `use_regex: false`). Anything without a ByteLevel
///   (SentencePiece's Metaspace, WordPiece's BertPreTokenizer, none) is "not a
///   byte-level BPE tokenizer". Patterns run on ICU's regex engine: `\p{L}` and `\p{N}`
///   are Unicode's categories, `\s` is White_Space (with U+0085, without U+FEFF, as in
///   Oniguruma and Rust, unlike JavaScript), `(?i:…)` folds case; `^` and `$` match at
///   line ends, as in Oniguruma's default (Ruby) syntax, which Hugging Face uses.
/// - `normalizer`: null only. `decoder`: null or ByteLevel. `post_processor` is
///   ignored: encode adds no BOS/EOS (look them up with tokenId).
/// - `added_tokens`: matched literally in the text before pre-tokenization, leftmost
///   and longest first, those with `normalized: false` before the others (as Hugging
///   Face does); `lstrip`/`rstrip` take the whitespace beside a match into it;
///   `single_word` is refused.
class Bpe {
public:
  /// Reads and checks `path`. On failure returns null and sets `error` to a message
  /// that starts with the path and says what is wrong.
  static std::unique_ptr<Bpe> load(const std::string &path, std::string &error);
  /// The same from the file's text; `name` stands for the path in messages.
  static std::unique_ptr<Bpe> parse(std::string_view json, const std::string &name, std::string &error);
  ~Bpe();

  /// The ids of `utf8`. Never throws on any bytes: an ill-formed UTF-8 sequence is
  /// seen by the pre-tokenizer's pattern as U+FFFD (ICU's replacement of a maximal
  /// ill-formed subpart), but its own bytes are what get encoded, as byte-level
  /// tokens, so decode gives the input back byte for byte. (Hugging Face cannot take
  /// such input at all.) A text over 16 MiB is pre-tokenized in windows of up to
  /// 16 MiB, each ending after a line break between two visible ASCII characters,
  /// where GPT-2's and Llama 3's patterns never join pieces (else after any line break,
  /// else anywhere); should ICU give up on a pattern (its backtracking stack is bounded, at
  /// twice what a window of white space needs), the rest of that window is
  /// pre-tokenized one character at a time.
  std::vector<int32_t> encode(std::string_view utf8) const;
  /// The bytes of `ids`: each vocab token's bytes through the byte map, each added
  /// token's content. Ids that are not tokens (see hasId) add nothing. Not checked to
  /// be UTF-8: decode(encode(x)) == x for any x.
  std::string decode(const std::vector<int32_t> &ids) const;
  /// Whether `id` is a token of the vocab or an added token.
  bool hasId(int32_t id) const;
  /// One more than the largest id of the vocab and the added tokens.
  int64_t vocabSize() const;
  /// The id of a token as the file spells it: an added token's content, or a vocab
  /// key (in byte-level letters, "Ġthe" for " the").
  std::optional<int32_t> tokenId(std::string_view token) const;

  struct Impl;

private:
  explicit Bpe(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace planrt::tokenizer

#endif // PLANRT_TOKENIZER_BPE_H
