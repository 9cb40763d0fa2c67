// Internal: where a launch put the mesh's ranks (docs/EXECUTABLES.md, Many ranks): the
// hosts, which ranks each runs, and which mesh axes stay inside a host. planc explain
// assumes node-major placement of the mesh's `devices_per_node`; the executable logs
// what the launcher did and warns where an axis crosses hosts that explain kept in a node.
#ifndef PLANRT_LIB_TOPOLOGY_H
#define PLANRT_LIB_TOPOLOGY_H

#include "planrt.h"

#include <cstdint>
#include <string>
#include <vector>

namespace planrt {

struct HostMap {
  std::vector<std::string> hosts; ///< in the order of their first ranks
  std::vector<int> hostOf;        ///< per rank
};

/// The hosts of every rank (planrt_mesh_host).
HostMap hostMap(const planrt_mesh *mesh, int ranks);

/// Per mesh axis (row-major coordinates, the last axis fastest): whether every group of
/// ranks that differ only in that coordinate runs on one host.
std::vector<bool> axesWithinHosts(const HostMap &map, const std::vector<int64_t> &sizes);

/// Per mesh axis: whether node-major placement of `perNode` ranks a node keeps it inside
/// a node (planrt::manifest::axisWithinNode, the rule planc explain uses).
std::vector<bool> axesWithinNodes(int64_t perNode, const std::vector<int64_t> &sizes);

/// `plh1 = ranks 0-1, plh2 = ranks 2-3`.
std::string describeHosts(const HostMap &map);

} // namespace planrt

#endif // PLANRT_LIB_TOPOLOGY_H
