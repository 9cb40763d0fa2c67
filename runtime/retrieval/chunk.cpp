// Chunkers: a text is cut into units (tokens, sentences or paragraphs), and
// chunks are runs of units with an overlap. Byte ranges index the file exactly.
#include "retrieval.h"

namespace planrt::rag {
namespace {

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Is there a blank line (only whitespace) starting at the newline at i?
bool blankLineAfter(std::string_view t, size_t i) {
  for (size_t k = i + 1; k < t.size(); ++k) {
    if (t[k] == '\n')
      return true;
    if (!isSpace(t[k]))
      return false;
  }
  return false;
}

std::vector<Span> tokens(std::string_view t) {
  std::vector<Span> out;
  size_t i = 0, n = t.size();
  while (i < n) {
    while (i < n && isSpace(t[i]))
      ++i;
    if (i == n)
      break;
    size_t b = i;
    while (i < n && !isSpace(t[i]))
      ++i;
    out.push_back({b, i});
  }
  return out;
}

// A sentence ends after '.', '!' or '?' (and any closing quotes or brackets) that
// is followed by whitespace or the end, or at a blank line; leading and trailing
// whitespace is not part of it.
std::vector<Span> sentences(std::string_view t) {
  std::vector<Span> out;
  size_t i = 0, n = t.size();
  while (i < n) {
    while (i < n && isSpace(t[i]))
      ++i;
    if (i == n)
      break;
    size_t b = i, end = n;
    for (; i < n; ++i) {
      char c = t[i];
      if (c == '.' || c == '!' || c == '?') {
        size_t k = i + 1;
        while (k < n && (t[k] == '"' || t[k] == '\'' || t[k] == ')' || t[k] == ']'))
          ++k;
        if (k == n || isSpace(t[k])) {
          end = k;
          i = k;
          break;
        }
      } else if (c == '\n' && blankLineAfter(t, i)) {
        end = i;
        break;
      }
    }
    if (i >= n)
      i = n;
    while (end > b && isSpace(t[end - 1]))
      --end;
    out.push_back({b, end});
  }
  return out;
}

// Paragraphs are separated by blank lines.
std::vector<Span> paragraphs(std::string_view t) {
  std::vector<Span> out;
  size_t i = 0, n = t.size();
  while (i < n) {
    while (i < n && isSpace(t[i]))
      ++i;
    if (i == n)
      break;
    size_t b = i;
    while (i < n && !(t[i] == '\n' && blankLineAfter(t, i)))
      ++i;
    size_t end = i;
    while (end > b && isSpace(t[end - 1]))
      --end;
    out.push_back({b, end});
  }
  return out;
}

} // namespace

std::vector<Span> chunkUnits(planrt_chunk_kind kind, std::string_view text) {
  switch (kind) {
  case PLANRT_CHUNK_SENTENCES:
    return sentences(text);
  case PLANRT_CHUNK_PARAGRAPHS:
    return paragraphs(text);
  default:
    return tokens(text);
  }
}

std::vector<Span> chunkText(planrt_chunk_kind kind, std::string_view text, int64_t size, int64_t overlap) {
  std::vector<Span> units = chunkUnits(kind, text), out;
  if (size <= 0 || overlap < 0 || overlap >= size)
    return out; // checkConfig refuses these
  size_t step = size_t(size - overlap);
  for (size_t i = 0; i < units.size(); i += step) {
    size_t j = std::min(units.size(), i + size_t(size));
    out.push_back({units[i].begin, units[j - 1].end});
    if (j == units.size())
      break;
  }
  return out;
}

} // namespace planrt::rag
