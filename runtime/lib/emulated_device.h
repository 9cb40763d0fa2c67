// Internal: cuda-host's emulated device (planrt_emu_*, planrt_abi.def), for the runtime's
// own device work: the MPI transfers that NCCL makes on the CUDA target (comm.cpp).
#ifndef PLANRT_LIB_EMULATED_DEVICE_H
#define PLANRT_LIB_EMULATED_DEVICE_H

#include <cstddef>

namespace planrt::emu {

/// Whether the emulated device is the backend (planrt_emu_start ran).
bool active();

/// What the host does after device work: waits for it (the CUDA runtime's blocking calls:
/// its NCCL calls, fills and adds), or leaves it running aside, on a stream of its own
/// (a non-blocking collective's start, and its progress: see inFlight), so that it
/// is not the compute stream's pending work.
/// Or leaves it queued on the compute stream, as a launch (Queue): the host must wait
/// before it touches device memory.
enum class Then { Wait, Aside, Queue };

/// A non-blocking collective's buffers — [a, a + aBytes) and [b, b + bBytes) — in flight
/// until landed(slot): a host access to them in between is fatal, as a race with the
/// collective. Returns the slot (-1 when the emulated device is not active).
int inFlight(const void *a, size_t aBytes, const void *b, size_t bBytes);
void landed(int slot);

/// Device work for its lifetime — nothing unless the emulated device is active.
class Work {
public:
  Work(const char *what, Then then);
  ~Work();
  Work(const Work &) = delete;
  Work &operator=(const Work &) = delete;

private:
  bool on_, pendingBefore_ = false;
  const char *lastBefore_ = nullptr;
  Then then_;
};

} // namespace planrt::emu

#endif // PLANRT_LIB_EMULATED_DEVICE_H
