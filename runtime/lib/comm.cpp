// The device mesh over MPI: communicators per axis group, collectives, and the
// ring-model byte counters that `planc explain` predicts.
#include "status.h"

#include <mpi.h>

#include <climits>
#include <map>
#include <memory>
#include <vector>

using planrt::fail;

struct planrt_mesh {
  std::vector<int64_t> sizes, coords;
  int rank = 0, world = 1;
  bool ownsMpi = false;
  std::map<unsigned, MPI_Comm> comms;  ///< by axis mask
  std::map<std::pair<int, unsigned>, uint64_t> bytes;

  /// The communicator of the ranks that differ only along the axes in mask.
  MPI_Comm comm(unsigned mask) {
    auto it = comms.find(mask);
    if (it != comms.end())
      return it->second;
    // Colour: the coordinates outside the group; key: the row-major index inside it.
    int64_t color = 0, key = 0;
    for (size_t a = 0; a < sizes.size(); ++a) {
      if (mask & (1u << a))
        key = key * sizes[a] + coords[a];
      else
        color = color * sizes[a] + coords[a];
    }
    MPI_Comm c;
    MPI_Comm_split(MPI_COMM_WORLD, int(color), int(key), &c);
    comms[mask] = c;
    return c;
  }
  int64_t groupSize(unsigned mask) const {
    int64_t n = 1;
    for (size_t a = 0; a < sizes.size(); ++a)
      if (mask & (1u << a))
        n *= sizes[a];
    return n;
  }
  void count(planrt_collective kind, unsigned mask, uint64_t fullBytes) {
    uint64_t n = uint64_t(groupSize(mask));
    uint64_t sent = kind == PLANRT_SEND        ? fullBytes
                    : kind == PLANRT_ALL_REDUCE ? 2 * (n - 1) * fullBytes / n
                                                : (n - 1) * fullBytes / n;
    bytes[{int(kind), mask}] += sent;
  }
  planrt_status check(int rc, const char *what) {
    if (rc == MPI_SUCCESS)
      return PLANRT_OK;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return fail(PLANRT_ERR_IO, "%s failed: %s", what, msg);
  }
};

namespace {
bool validMask(const planrt_mesh *m, unsigned mask) {
  return m && mask && (mask >> m->sizes.size()) == 0;
}
/// MPI counts are int: larger buffers are a caller error here, not a silent truncation.
bool validCount(int64_t count, int64_t per = 1) { return count >= 0 && count * per <= INT32_MAX; }
} // namespace

extern "C" {

planrt_status planrt_mesh_init(int *argc, char ***argv, const int64_t *sizes, int axes, planrt_mesh **out) {
  if (!out || axes < 1 || axes > 16 || !sizes)
    return fail(PLANRT_ERR_ARG, "planrt_mesh_init: bad argument");
  auto m = std::make_unique<planrt_mesh>();
  int64_t product = 1;
  for (int a = 0; a < axes; ++a) {
    if (sizes[a] < 1 || __builtin_mul_overflow(product, sizes[a], &product) || product > INT32_MAX)
      return fail(PLANRT_ERR_ARG, "mesh axis %d has size %lld", a, (long long)sizes[a]);
    m->sizes.push_back(sizes[a]);
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    MPI_Init(argc, argv);
    m->ownsMpi = true;
  }
  // Failures come back as codes (named in planrt_last_error), not as aborts.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &m->world);
  planrt_set_rank(m->rank);
  if (product != m->world) {
    planrt_status s = fail(PLANRT_ERR_ARG, "the mesh has %lld devices but %d processes were launched; run with mpirun -n %lld",
                           (long long)product, m->world, (long long)product);
    if (m->ownsMpi)
      MPI_Finalize();
    return s;
  }
  // Row-major: the last axis varies fastest.
  m->coords.assign(size_t(axes), 0);
  int64_t r = m->rank;
  for (int a = axes - 1; a >= 0; --a) {
    m->coords[size_t(a)] = r % sizes[a];
    r /= sizes[a];
  }
  // Communicators are made by a collective call on every rank, so they are all made
  // here, in the same order everywhere: every group of axes (up to 6 axes: 63 groups).
  unsigned groups = axes <= 6 ? (1u << axes) - 1 : 0;
  for (unsigned mask = 1; mask <= groups; ++mask)
    m->comm(mask);
  for (int a = 0; groups == 0 && a < axes; ++a)
    m->comm(1u << a);
  *out = m.release();
  return PLANRT_OK;
}

int planrt_mesh_rank(const planrt_mesh *mesh) { return mesh ? mesh->rank : -1; }

int64_t planrt_mesh_coord(const planrt_mesh *mesh, int axis) {
  return mesh && axis >= 0 && size_t(axis) < mesh->coords.size() ? mesh->coords[size_t(axis)] : -1;
}

planrt_status planrt_all_reduce(planrt_mesh *mesh, unsigned mask, float *buf, int64_t count, planrt_reduce_op op) {
  if (!validMask(mesh, mask) || (count && !buf) || !validCount(count))
    return fail(PLANRT_ERR_ARG, "planrt_all_reduce: bad argument");
  mesh->count(PLANRT_ALL_REDUCE, mask, uint64_t(count) * 4);
  return mesh->check(MPI_Allreduce(MPI_IN_PLACE, buf, int(count), MPI_FLOAT, op == PLANRT_MAX ? MPI_MAX : MPI_SUM,
                                   mesh->comm(mask)),
                     "all_reduce");
}

planrt_status planrt_all_gather(planrt_mesh *mesh, unsigned mask, const float *send, int64_t count, float *recv) {
  if (!validMask(mesh, mask) || (count && (!send || !recv)) || !validCount(count, mesh->groupSize(mask)))
    return fail(PLANRT_ERR_ARG, "planrt_all_gather: bad argument");
  mesh->count(PLANRT_ALL_GATHER, mask, uint64_t(count) * 4 * uint64_t(mesh->groupSize(mask)));
  return mesh->check(MPI_Allgather(send, int(count), MPI_FLOAT, recv, int(count), MPI_FLOAT, mesh->comm(mask)),
                     "all_gather");
}

planrt_status planrt_reduce_scatter(planrt_mesh *mesh, unsigned mask, const float *send, int64_t count, float *recv) {
  if (!validMask(mesh, mask) || (count && (!send || !recv)) || !validCount(count, mesh->groupSize(mask)))
    return fail(PLANRT_ERR_ARG, "planrt_reduce_scatter: bad argument");
  mesh->count(PLANRT_REDUCE_SCATTER, mask, uint64_t(count) * 4 * uint64_t(mesh->groupSize(mask)));
  return mesh->check(MPI_Reduce_scatter_block(send, recv, int(count), MPI_FLOAT, MPI_SUM, mesh->comm(mask)),
                     "reduce_scatter");
}

planrt_status planrt_send(planrt_mesh *mesh, int axis, int64_t peer, const float *buf, int64_t count) {
  if (!mesh || axis < 0 || size_t(axis) >= mesh->sizes.size() || peer < 0 || peer >= mesh->sizes[size_t(axis)] ||
      (count && !buf) || !validCount(count))
    return fail(PLANRT_ERR_ARG, "planrt_send: bad argument");
  mesh->count(PLANRT_SEND, 1u << axis, uint64_t(count) * 4);
  return mesh->check(MPI_Send(buf, int(count), MPI_FLOAT, int(peer), 0, mesh->comm(1u << axis)), "send");
}

planrt_status planrt_recv(planrt_mesh *mesh, int axis, int64_t peer, float *buf, int64_t count) {
  if (!mesh || axis < 0 || size_t(axis) >= mesh->sizes.size() || peer < 0 || peer >= mesh->sizes[size_t(axis)] ||
      (count && !buf) || !validCount(count))
    return fail(PLANRT_ERR_ARG, "planrt_recv: bad argument");
  return mesh->check(MPI_Recv(buf, int(count), MPI_FLOAT, int(peer), 0, mesh->comm(1u << axis), MPI_STATUS_IGNORE),
                     "recv");
}

uint64_t planrt_comm_bytes(const planrt_mesh *mesh, planrt_collective kind, unsigned mask) {
  if (!mesh)
    return 0;
  auto it = mesh->bytes.find({int(kind), mask});
  return it == mesh->bytes.end() ? 0 : it->second;
}

void planrt_mesh_finalize(planrt_mesh *mesh) {
  if (!mesh)
    return;
  for (auto &[mask, c] : mesh->comms)
    MPI_Comm_free(&c);
  bool owns = mesh->ownsMpi;
  delete mesh;
  if (owns)
    MPI_Finalize();
}

} // extern "C"
