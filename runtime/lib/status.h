// Internal: recording a failure with its message.
#ifndef PLANRT_LIB_STATUS_H
#define PLANRT_LIB_STATUS_H

#include "planrt.h"

#include <string>

namespace planrt {
/// Records "rank R: message" as the last error and returns `status`.
planrt_status fail(planrt_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/// Records `message`, a failure's whole message (another thread's planrt_last_error),
/// as this thread's last error and returns `status`.
planrt_status restore(planrt_status status, const std::string &message);
/// The rank planrt_set_rank set (0 before).
int rank();
} // namespace planrt

#endif // PLANRT_LIB_STATUS_H
