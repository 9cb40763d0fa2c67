// Where a launch put the ranks (runtime/lib/topology.cpp): which mesh axes stay inside a
// host, against the rule planc explain applies to the mesh's nodes.
#include "topology.h"

#include <gtest/gtest.h>

namespace {

planrt::HostMap twoHosts(std::vector<int> hostOf) {
  planrt::HostMap m;
  m.hosts = {"a", "b"};
  m.hostOf = std::move(hostOf);
  return m;
}

TEST(Topology, AxesWithinHosts) {
  // [dp: 2, tp: 2], ranks 0-1 on host a, 2-3 on b: tp inside a host, dp across.
  EXPECT_EQ(planrt::axesWithinHosts(twoHosts({0, 0, 1, 1}), {2, 2}), (std::vector<bool>{false, true}));
  // Hosts by rank parity: tp across, dp inside.
  EXPECT_EQ(planrt::axesWithinHosts(twoHosts({0, 1, 0, 1}), {2, 2}), (std::vector<bool>{true, false}));
  // A size-1 axis is inside whatever the hosts.
  EXPECT_EQ(planrt::axesWithinHosts(twoHosts({0, 1}), {1, 2}), (std::vector<bool>{true, false}));
}

TEST(Topology, AxesWithinNodesFollowsTheMeshRule) {
  // cuda(8) * 2 as [dp: 2, tp: 8]: tp fills a node; dp crosses.
  EXPECT_EQ(planrt::axesWithinNodes(8, {2, 8}), (std::vector<bool>{false, true}));
  // [tp: 2, dp: 2] on nodes of 2: dp (last) inside, tp across.
  EXPECT_EQ(planrt::axesWithinNodes(2, {2, 2}), (std::vector<bool>{false, true}));
  // [dp: 2, pp: 2, tp: 2] on nodes of 4: pp and tp inside.
  EXPECT_EQ(planrt::axesWithinNodes(4, {2, 2, 2}), (std::vector<bool>{false, true, true}));
  // A span that does not divide the node crosses it: [a: 3] on nodes of 4.
  EXPECT_EQ(planrt::axesWithinNodes(4, {3}), (std::vector<bool>{false}));
}

TEST(Topology, DescribesRunsOfRanks) {
  EXPECT_EQ(planrt::describeHosts(twoHosts({0, 0, 1, 1})), "a = ranks 0-1, b = ranks 2-3");
  EXPECT_EQ(planrt::describeHosts(twoHosts({0, 1, 0, 0})), "a = ranks 0,2-3, b = rank 1");
}

} // namespace
