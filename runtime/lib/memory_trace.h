// Internal: PLANRT_MEM_TRACE, what the executable holds at its memory peak (memory.cpp
// reports each allocation, release and commit; memory_trace.cpp keeps the blocks live at
// the peak of live + held bytes and writes them at exit).
#ifndef PLANRT_LIB_MEMORY_TRACE_H
#define PLANRT_LIB_MEMORY_TRACE_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace planrt::trace {

/// Whether PLANRT_MEM_TRACE is set (read once).
bool on();
/// A block of `size` bytes at ptr: the generated code's (`generated`) or the runtime's,
/// allocated from code at `caller` (a return address); `total` is live + held after it.
void allocated(const void *ptr, size_t size, bool generated, const void *caller, uint64_t total);
void released(const void *ptr);
/// Bytes committed (positive) or decommitted (negative) in a reserved buffer's parts.
void committed(int64_t bytes, uint64_t total);
/// The function at code address `pc` by its symbol, or as OBJECT+0xOFFSET where the
/// symbol is not exported (`addr2line -f -e OBJECT OFFSET` names it); "?" if unknown.
std::string symbolOf(const void *pc);

} // namespace planrt::trace

#endif // PLANRT_LIB_MEMORY_TRACE_H
