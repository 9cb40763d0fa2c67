// Internal: the seeded draws of a federated round (federated.cpp), which its tests and
// the PyTorch reference (test/e2e/fedavg_ref.py) reproduce.
#ifndef PLANRT_LIB_FEDERATED_H
#define PLANRT_LIB_FEDERATED_H

#include <cstdint>
#include <vector>

namespace planrt::fed {

/// The `sampled` clients of round `round`, ascending: the first `sampled` of a partial
/// Fisher–Yates shuffle of 0 … clients − 1 whose i-th swap draws
/// mix(mix(seed ^ "fedsampl") ^ mix(round · clients + i)).
std::vector<int64_t> sampleClients(uint64_t seed, int64_t round, int64_t clients, int64_t sampled);

/// The key clients a and b share (either order): a stand-in, derived from the plan's
/// seed, for the key agreement of Bonawitz et al.
uint64_t pairKey(uint64_t seed, int64_t clients, int64_t a, int64_t b);

/// Word t of a pair's mask in round `round`.
uint64_t maskWord(uint64_t key, int64_t round, int64_t t);

/// A standard normal draw for element i of round `round`'s noise (DP-FedAvg).
double noise(uint64_t seed, int64_t round, int64_t i);

} // namespace planrt::fed

#endif // PLANRT_LIB_FEDERATED_H
