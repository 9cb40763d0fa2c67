// The runtime's MPI mesh, run as 4 processes on a [2, 2] mesh (ctest: mpirun -n 4):
// coordinates, every collective over each axis group, point to point, and the
// ring-model byte counters that planc explain predicts.
#include "planrt.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

namespace {
planrt_mesh *mesh = nullptr;
int rank() { return planrt_mesh_rank(mesh); }
int64_t c0() { return planrt_mesh_coord(mesh, 0); }
int64_t c1() { return planrt_mesh_coord(mesh, 1); }
} // namespace

TEST(Comm, RowMajorCoordinates) {
  EXPECT_EQ(c0(), rank() / 2);
  EXPECT_EQ(c1(), rank() % 2);
}

TEST(Comm, AllReducePerAxisGroup) {
  float v = float(rank());
  ASSERT_EQ(planrt_all_reduce(mesh, 0b10, &v, 1, PLANRT_SUM), PLANRT_OK); // over axis 1
  EXPECT_EQ(v, float(4 * c0() + 1));                                      // ranks 2i and 2i+1
  v = float(rank());
  ASSERT_EQ(planrt_all_reduce(mesh, 0b01, &v, 1, PLANRT_SUM), PLANRT_OK); // over axis 0
  EXPECT_EQ(v, float(2 * c1() + 2));                                      // ranks j and 2+j
  v = float(rank());
  ASSERT_EQ(planrt_all_reduce(mesh, 0b11, &v, 1, PLANRT_MAX), PLANRT_OK);
  EXPECT_EQ(v, 3.0f);
}

TEST(Comm, AllGatherInCoordinateOrder) {
  float mine[2] = {float(rank()), float(10 * rank())};
  std::vector<float> all(4);
  ASSERT_EQ(planrt_all_gather(mesh, 0b01, mine, 2, all.data()), PLANRT_OK);
  EXPECT_EQ(all, (std::vector<float>{float(c1()), float(10 * c1()), float(2 + c1()), float(10 * (2 + c1()))}));
}

TEST(Comm, ReduceScatterSumsEachBlock) {
  float send[2] = {float(10 * rank()), float(10 * rank() + 1)};
  float got = -1;
  ASSERT_EQ(planrt_reduce_scatter(mesh, 0b10, send, 1, &got), PLANRT_OK);
  // The group is {2i, 2i+1}; coordinate c1 receives block c1 summed over both.
  float expect = float(10 * (2 * c0()) + c1() + 10 * (2 * c0() + 1) + c1());
  EXPECT_EQ(got, expect);
}

TEST(Comm, SendAlongAnAxis) {
  float buf[3] = {1, 2, 3};
  if (c0() == 0) {
    for (float &x : buf)
      x += float(rank());
    ASSERT_EQ(planrt_send(mesh, 0, 1, buf, 3), PLANRT_OK);
  } else {
    float got[3];
    ASSERT_EQ(planrt_recv(mesh, 0, 0, got, 3), PLANRT_OK);
    EXPECT_EQ(got[0], 1.0f + float(c1()));
    EXPECT_EQ(got[2], 3.0f + float(c1()));
  }
}

TEST(Comm, ByteCountersFollowTheRingModel) {
  uint64_t before = planrt_comm_bytes(mesh, PLANRT_ALL_REDUCE, 0b11);
  std::vector<float> buf(1000, 1.0f);
  ASSERT_EQ(planrt_all_reduce(mesh, 0b11, buf.data(), 1000, PLANRT_SUM), PLANRT_OK);
  EXPECT_EQ(buf[0], 4.0f);
  // 2(n−1)/n · S with n = 4, S = 4000 bytes.
  EXPECT_EQ(planrt_comm_bytes(mesh, PLANRT_ALL_REDUCE, 0b11) - before, 6000u);
  uint64_t ag = planrt_comm_bytes(mesh, PLANRT_ALL_GATHER, 0b01);
  std::vector<float> all(20);
  ASSERT_EQ(planrt_all_gather(mesh, 0b01, buf.data(), 10, all.data()), PLANRT_OK);
  // (n−1)/n · S with n = 2, S = 2 × 40 bytes gathered.
  EXPECT_EQ(planrt_comm_bytes(mesh, PLANRT_ALL_GATHER, 0b01) - ag, 40u);
}

// Device collectives (planrt_set_collectives, as libplanrt_cuda installs NCCL): a member
// that does the transfer replaces MPI's, one that declines leaves it to MPI, and the bytes
// are counted either way. The fake "device" all-reduce writes the group's size times 100,
// which MPI's sum of the ranks cannot be; its send/recv decline.
namespace {
int deviceCalls = 0;
int fakeAllReduce(const void *comm, float *buf, int64_t count, int) {
  ++deviceCalls;
  int size = 0;
  MPI_Comm_size(*static_cast<const MPI_Comm *>(comm), &size);
  for (int64_t i = 0; i < count; ++i)
    buf[i] = float(100 * size);
  return 0;
}
int declineSend(const void *, int64_t, const float *, int64_t) {
  ++deviceCalls;
  return 1;
}
int declineRecv(const void *, int64_t, float *, int64_t) {
  ++deviceCalls;
  return 1;
}
const planrt_collectives kFake = {"fake", fakeAllReduce, nullptr, nullptr, declineSend, declineRecv, nullptr};
} // namespace

TEST(Comm, DeviceCollectivesReplaceOrDecline) {
  planrt_set_collectives(&kFake);
  uint64_t before = planrt_comm_bytes(mesh, PLANRT_ALL_REDUCE, 0b10);
  float v = float(rank());
  ASSERT_EQ(planrt_all_reduce(mesh, 0b10, &v, 1, PLANRT_SUM), PLANRT_OK);
  EXPECT_EQ(v, 200.0f); // the group of axis 1 has 2 ranks; MPI would give 4 c0 + 1
  EXPECT_EQ(planrt_comm_bytes(mesh, PLANRT_ALL_REDUCE, 0b10) - before, 4u);
  float mine[1] = {float(rank())}, all[2] = {-1, -1};
  ASSERT_EQ(planrt_all_gather(mesh, 0b01, mine, 1, all), PLANRT_OK); // no member: MPI
  EXPECT_EQ(all[1], float(2 + c1()));
  float buf = float(rank());
  if (c0() == 0)
    ASSERT_EQ(planrt_send(mesh, 0, 1, &buf, 1), PLANRT_OK); // declined: MPI
  else
    ASSERT_EQ(planrt_recv(mesh, 0, 0, &buf, 1), PLANRT_OK);
  EXPECT_EQ(buf, float(c1())); // the sender's rank on the axis-0 group is its c1
  EXPECT_EQ(deviceCalls, 2);
  planrt_set_collectives(nullptr);
  v = float(rank());
  ASSERT_EQ(planrt_all_reduce(mesh, 0b10, &v, 1, PLANRT_SUM), PLANRT_OK);
  EXPECT_EQ(v, float(4 * c0() + 1));
}

// Non-blocking all-reduces (DDP buckets): two in flight at once on one group, completed in
// the order they started, each with the blocking all-reduce's sum and byte count; a device
// table with a start member does them, one without leaves them to MPI.
namespace {
int deviceStarts = 0, deviceWaits = 0;
int fakeStart(const void *comm, float *buf, int64_t count, int max, void **handle) {
  fakeAllReduce(comm, buf, count, max);
  ++deviceStarts;
  *handle = buf;
  return 0;
}
void fakeWait(void *handle) {
  ++deviceWaits;
  static_cast<float *>(handle)[0] += 1; // the wait ran on this request
}
const planrt_collectives kFakeAsync = {"fake",  nullptr, nullptr,   nullptr, nullptr,
                                       nullptr, nullptr, fakeStart, fakeWait};
} // namespace

TEST(Comm, NonBlockingAllReduce) {
  uint64_t before = planrt_comm_bytes(mesh, PLANRT_ALL_REDUCE, 0b11);
  std::vector<float> a(1000, float(rank())), b(10, 1.0f);
  planrt_request *ra = nullptr, *rb = nullptr;
  ASSERT_EQ(planrt_all_reduce_start(mesh, 0b11, a.data(), 1000, PLANRT_SUM, &ra), PLANRT_OK);
  ASSERT_EQ(planrt_all_reduce_start(mesh, 0b11, b.data(), 10, PLANRT_MAX, &rb), PLANRT_OK);
  planrt_test(ra);
  ASSERT_EQ(planrt_wait(ra), PLANRT_OK);
  ASSERT_EQ(planrt_wait(rb), PLANRT_OK);
  EXPECT_EQ(a[0], 6.0f); // 0 + 1 + 2 + 3
  EXPECT_EQ(a[999], 6.0f);
  EXPECT_EQ(b[9], 1.0f);
  EXPECT_EQ(planrt_comm_bytes(mesh, PLANRT_ALL_REDUCE, 0b11) - before, 6000u + 60u);
  planrt_request *bad = nullptr;
  EXPECT_EQ(planrt_all_reduce_start(mesh, 0b100, a.data(), 1, PLANRT_SUM, &bad), PLANRT_ERR_ARG);
  EXPECT_EQ(bad, nullptr);

  planrt_set_collectives(&kFakeAsync);
  float v = float(rank());
  planrt_request *rv = nullptr;
  ASSERT_EQ(planrt_all_reduce_start(mesh, 0b10, &v, 1, PLANRT_SUM, &rv), PLANRT_OK);
  ASSERT_EQ(planrt_wait(rv), PLANRT_OK);
  EXPECT_EQ(v, 201.0f); // the device's 100 × 2, and its wait
  EXPECT_EQ(deviceStarts, 1);
  EXPECT_EQ(deviceWaits, 1);
  planrt_set_collectives(&kFake); // no start member: MPI
  v = float(rank());
  ASSERT_EQ(planrt_all_reduce_start(mesh, 0b10, &v, 1, PLANRT_SUM, &rv), PLANRT_OK);
  ASSERT_EQ(planrt_wait(rv), PLANRT_OK);
  EXPECT_EQ(v, float(4 * c0() + 1));
  planrt_set_collectives(nullptr);
}

namespace {

// The slices both non-blocking slice tests cut the 20 floats into: [3, 15) cuts ranks 0
// and 2's blocks and holds rank 1's; [15, 17) is rank 3's alone; [0, 3) and [17, 20) close it.
constexpr int64_t kSlices[][2] = {{3, 12}, {15, 2}, {0, 3}, {17, 3}};

/// Starts every slice with `start(begin, size, &request)`, waiting for the first alone and
/// calling `checkFirst` after it; the other requests, in order, go to `requests`.
template <class Start, class Check>
void startSlices(Start start, Check checkFirst, std::vector<planrt_request *> &requests) {
  for (const auto &sl : kSlices) {
    requests.push_back(nullptr);
    ASSERT_EQ(start(sl[0], sl[1], &requests.back()), PLANRT_OK);
    if (&sl == &kSlices[0]) {
      ASSERT_EQ(planrt_wait(requests.back()), PLANRT_OK);
      requests.pop_back();
      checkFirst();
    }
  }
}

} // namespace

// Slices of a non-blocking all-gather (ZeRO-3's parameter buckets): each writes exactly
// its floats of what the blocking all-gather writes, whichever ranks' blocks it cuts,
// and leaves the rest alone; slices covering the result count the bytes it counts.
TEST(Comm, NonBlockingAllGatherSlices) {
  const int64_t count = 5, n = 4;
  std::vector<float> mine(count), whole(count * n, -1);
  for (int64_t i = 0; i < count; ++i)
    mine[size_t(i)] = float(rank() * 10 + i);
  uint64_t before = planrt_comm_bytes(mesh, PLANRT_ALL_GATHER, 0b11);
  ASSERT_EQ(planrt_all_gather(mesh, 0b11, mine.data(), count, whole.data()), PLANRT_OK);
  uint64_t wholeBytes = planrt_comm_bytes(mesh, PLANRT_ALL_GATHER, 0b11) - before;
  // Started together, waited in another order.
  std::vector<float> got(count * n, -1);
  std::vector<planrt_request *> requests;
  before = planrt_comm_bytes(mesh, PLANRT_ALL_GATHER, 0b11);
  ASSERT_NO_FATAL_FAILURE(startSlices(
      [&](int64_t begin, int64_t size, planrt_request **r) {
        return planrt_all_gather_start(mesh, 0b11, mine.data(), count, got.data(), begin, size, r);
      },
      [&] { // the first slice alone: nothing outside it written
        for (int64_t i = 0; i < count * n; ++i)
          EXPECT_EQ(got[size_t(i)], i >= 3 && i < 15 ? whole[size_t(i)] : -1.0f) << "float " << i;
      },
      requests));
  planrt_test(requests[0]);
  for (size_t k = requests.size(); k-- > 0;)
    ASSERT_EQ(planrt_wait(requests[k]), PLANRT_OK);
  EXPECT_EQ(got, whole);
  EXPECT_EQ(planrt_comm_bytes(mesh, PLANRT_ALL_GATHER, 0b11) - before, wholeBytes);
  planrt_request *bad = nullptr;
  EXPECT_EQ(planrt_all_gather_start(mesh, 0b11, mine.data(), count, got.data(), 18, 3, &bad), PLANRT_ERR_ARG);
  EXPECT_EQ(bad, nullptr);
}

// Slices of a non-blocking reduce-scatter (ZeRO-1's gradient buckets): each delivers to
// every rank the sums of exactly the part of its block in the slice, at its place, and
// slices covering the source give what the blocking reduce-scatter gives, and count its bytes.
TEST(Comm, NonBlockingReduceScatterSlices) {
  const int64_t count = 5, n = 4;
  std::vector<float> all(count * n), whole(count, -1);
  for (int64_t i = 0; i < count * n; ++i)
    all[size_t(i)] = float(rank() * 100 + i);
  uint64_t before = planrt_comm_bytes(mesh, PLANRT_REDUCE_SCATTER, 0b11);
  ASSERT_EQ(planrt_reduce_scatter(mesh, 0b11, all.data(), count, whole.data()), PLANRT_OK);
  uint64_t wholeBytes = planrt_comm_bytes(mesh, PLANRT_REDUCE_SCATTER, 0b11) - before;
  std::vector<float> got(count, -1);
  std::vector<planrt_request *> requests;
  before = planrt_comm_bytes(mesh, PLANRT_REDUCE_SCATTER, 0b11);
  ASSERT_NO_FATAL_FAILURE(startSlices(
      [&](int64_t begin, int64_t size, planrt_request **r) {
        return planrt_reduce_scatter_start(mesh, 0b11, all.data(), count, got.data(), begin, size, r);
      },
      [&] { // [3, 15) alone: this rank's floats of it, nothing else
        for (int64_t i = 0; i < count; ++i) {
          int64_t at = rank() * count + i;
          EXPECT_EQ(got[size_t(i)], at >= 3 && at < 15 ? whole[size_t(i)] : -1.0f) << "float " << i;
        }
      },
      requests));
  for (planrt_request *r : requests)
    ASSERT_EQ(planrt_wait(r), PLANRT_OK);
  EXPECT_EQ(got, whole);
  EXPECT_EQ(whole[0], float(600 + 4 * rank() * count)); // 0 + 100 + 200 + 300, four times the index
  EXPECT_EQ(planrt_comm_bytes(mesh, PLANRT_REDUCE_SCATTER, 0b11) - before, wholeBytes);
}

TEST(Comm, BadGroupsAreRefused) {
  float v = 0;
  EXPECT_EQ(planrt_all_reduce(mesh, 0b100, &v, 1, PLANRT_SUM), PLANRT_ERR_ARG);
  EXPECT_EQ(planrt_all_reduce(mesh, 0, &v, 1, PLANRT_SUM), PLANRT_ERR_ARG);
}

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int64_t sizes[] = {2, 2};
  if (planrt_mesh_init(&argc, &argv, sizes, 2, &mesh) != PLANRT_OK) {
    std::fprintf(stderr, "%s\n", planrt_last_error());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  // Only rank 0 prints the test listing; every rank's failures still fail the run.
  if (rank() != 0) {
    auto &listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  planrt_mesh_finalize(mesh);
  return worst;
}
