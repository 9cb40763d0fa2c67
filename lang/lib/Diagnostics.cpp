// SourceFiles and Diags: the bridge from AST locations to MLIR diagnostics.
#include "plan/Lang/Diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/WithColor.h"

using namespace plan;
using namespace plan::lang;

uint32_t SourceFiles::add(std::unique_ptr<llvm::MemoryBuffer> buffer, const std::string &displayPath,
                          const std::string &identity) {
  // The parser reads the bytes as they are; diagnostics show a copy in which bytes
  // that are not UTF-8 (or NUL) read '?', so the source line and caret still print.
  llvm::StringRef raw = buffer->getBuffer();
  std::string shown;
  shown.reserve(raw.size());
  const auto *p = reinterpret_cast<const llvm::UTF8 *>(raw.data());
  const auto *end = p + raw.size();
  while (p < end) {
    unsigned len = llvm::getNumBytesForUTF8(*p);
    if (*p != 0 && p + len <= end && llvm::isLegalUTF8Sequence(p, p + len)) {
      shown.append(reinterpret_cast<const char *>(p), len);
      p += len;
    } else {
      shown += '?';
      ++p;
    }
  }
  // The SourceMgr's buffer name is what FileLineColLoc locations are matched against.
  unsigned id = mgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(shown, displayPath), llvm::SMLoc());
  files.push_back({displayPath, identity, id, raw.str()});
  return uint32_t(files.size() - 1);
}

llvm::StringRef SourceFiles::text(uint32_t id) const { return files[id].raw; }

std::optional<uint32_t> SourceFiles::find(const std::string &identity) const {
  for (size_t i = 0; i < files.size(); ++i)
    if (files[i].identity == identity)
      return uint32_t(i);
  return std::nullopt;
}

mlir::Location Diags::loc(ast::Loc l) const {
  if (!l.valid() || l.file >= files.size())
    return mlir::UnknownLoc::get(ctx);
  return mlir::FileLineColLoc::get(ctx, files.path(l.file), l.line, l.col);
}

Diag Diags::error(ast::Loc l, const llvm::Twine &message) {
  std::string text = message.str();
  if (!seen.insert({l.file, l.line, l.col, text}).second)
    return Diag(); // already reported at this spot
  ++errors;
  return Diag(mlir::emitError(loc(l), text), this,
              std::vector<std::pair<ast::Loc, std::string>>(contexts.rbegin(), contexts.rend()));
}

Diag Diags::warning(ast::Loc l, const llvm::Twine &message) {
  std::string text = message.str();
  if (!seen.insert({l.file, l.line, l.col, "warning: " + text}).second)
    return Diag();
  return Diag(mlir::emitWarning(loc(l), text), this);
}

Diag::~Diag() {
  if (diag)
    for (auto &[l, message] : context)
      diag->attachNote(owner->loc(l)) << message;
}

Diag &Diag::note(ast::Loc l, const llvm::Twine &message) {
  if (diag)
    diag->attachNote(owner->loc(l)) << message;
  return *this;
}

Diag &Diag::note(const llvm::Twine &message) {
  if (diag)
    diag->attachNote(mlir::UnknownLoc::get(owner->context())) << message;
  return *this;
}

DiagnosticPrinter::DiagnosticPrinter(mlir::MLIRContext &ctx, SourceFiles &files, llvm::raw_ostream &os)
    : files(files), os(os), handler(&ctx, [this](mlir::Diagnostic &d) {
        print(d.getLocation(), d.getSeverity(), d.str(), /*isNote=*/false);
        for (mlir::Diagnostic &n : d.getNotes())
          print(n.getLocation(), mlir::DiagnosticSeverity::Note, n.str(), /*isNote=*/true);
        this->os.flush();
        return mlir::success();
      }) {}

void DiagnosticPrinter::print(mlir::Location loc, mlir::DiagnosticSeverity severity, llvm::StringRef message,
                              bool isNote) {
  llvm::SourceMgr::DiagKind kind = severity == mlir::DiagnosticSeverity::Error     ? llvm::SourceMgr::DK_Error
                                   : severity == mlir::DiagnosticSeverity::Warning ? llvm::SourceMgr::DK_Warning
                                                                                   : llvm::SourceMgr::DK_Note;
  llvm::SourceMgr &mgr = files.sourceMgr();
  auto label = [&]() {
    llvm::HighlightColor color = kind == llvm::SourceMgr::DK_Error     ? llvm::HighlightColor::Error
                                 : kind == llvm::SourceMgr::DK_Warning ? llvm::HighlightColor::Warning
                                                                       : llvm::HighlightColor::Note;
    llvm::WithColor(os, color) << (kind == llvm::SourceMgr::DK_Error     ? "error: "
                                   : kind == llvm::SourceMgr::DK_Warning ? "warning: "
                                                                         : "note: ");
  };
  if (auto fl = loc->findInstanceOf<mlir::FileLineColLoc>()) {
    {
      llvm::WithColor bold(os, llvm::raw_ostream::SAVEDCOLOR, /*Bold=*/true);
      bold << fl.getFilename().getValue() << ":" << fl.getLine() << ":" << fl.getColumn() << ": ";
    }
    label();
    os << message << "\n";
    // The source line, and a caret under the column. LLVM's own printer drops the
    // caret on lines with non-ASCII text; this one counts code points and keeps tabs.
    for (unsigned id = 1; id <= mgr.getNumBuffers(); ++id) {
      llvm::StringRef text = mgr.getMemoryBuffer(id)->getBuffer();
      if (mgr.getMemoryBuffer(id)->getBufferIdentifier() != fl.getFilename().getValue())
        continue;
      size_t start = 0;
      for (unsigned line = 1; line < fl.getLine() && start != llvm::StringRef::npos; ++line) {
        start = text.find('\n', start);
        if (start != llvm::StringRef::npos)
          ++start;
      }
      if (start == llvm::StringRef::npos || start > text.size())
        break;
      llvm::StringRef line = text.substr(start).split('\n').first.rtrim('\r');
      os << line << "\n";
      std::string caret;
      for (size_t i = 0; i + 1 < fl.getColumn() && i < line.size(); ++i) {
        unsigned char c = line[i];
        if ((c & 0xC0) == 0x80)
          continue; // a continuation byte: same column as its lead byte
        caret += c == '\t' ? '\t' : ' ';
      }
      os << caret;
      llvm::WithColor(os, llvm::raw_ostream::GREEN, /*Bold=*/true) << "^";
      os << "\n";
      break;
    }
    return;
  }
  if (!isNote)
    os << "planc: ";
  label();
  os << message << "\n";
}

std::string plan::lang::closestMatch(llvm::StringRef name, const std::vector<std::string> &candidates,
                                     unsigned maxDistance) {
  std::string best;
  unsigned bestDist = ~0u;
  // One edit per three letters, rounded up from five letters on (a swap of two
  // letters costs two edits: widht → width).
  unsigned limit = maxDistance ? maxDistance : std::max<unsigned>(1, unsigned(name.size() + 1) / 3);
  for (const std::string &c : candidates) {
    if (c == name)
      continue;
    unsigned d = name.edit_distance(c, /*AllowReplacements=*/true, limit + 1);
    // Case-only differences are always worth suggesting.
    if (name.equals_insensitive(c))
      d = 0;
    if (d <= limit && d < bestDist) {
      bestDist = d;
      best = c;
    }
  }
  return best;
}
