// Where a launch put the mesh's ranks: hosts and the axes that cross them (topology.h).
#include "topology.h"

#include "planrt_manifest.h"

namespace planrt {

HostMap hostMap(const planrt_mesh *mesh, int ranks) {
  HostMap map;
  for (int r = 0; r < ranks; ++r) {
    char name[64] = {0};
    int h = planrt_mesh_host(mesh, r, name, sizeof name);
    if (h < 0)
      h = 0;
    if (size_t(h) >= map.hosts.size())
      map.hosts.resize(size_t(h) + 1);
    if (map.hosts[size_t(h)].empty())
      map.hosts[size_t(h)] = name;
    map.hostOf.push_back(h);
  }
  return map;
}

std::vector<bool> axesWithinHosts(const HostMap &map, const std::vector<int64_t> &sizes) {
  std::vector<bool> within(sizes.size(), true);
  int64_t stride = 1;
  for (size_t a = sizes.size(); a-- > 0;) {
    // Every rank against the first of its group along axis a (coordinate a zero).
    for (size_t r = 0; r < map.hostOf.size(); ++r) {
      int64_t coord = (int64_t(r) / stride) % sizes[a];
      size_t first = r - size_t(coord * stride);
      if (map.hostOf[r] != map.hostOf[first])
        within[a] = false;
    }
    stride *= sizes[a];
  }
  return within;
}

std::vector<bool> axesWithinNodes(int64_t perNode, const std::vector<int64_t> &sizes) {
  std::vector<bool> within;
  for (size_t a = 0; a < sizes.size(); ++a)
    within.push_back(manifest::axisWithinNode(perNode, sizes.data(), sizes.size(), a));
  return within;
}

std::string describeHosts(const HostMap &map) {
  std::string out;
  for (size_t h = 0; h < map.hosts.size(); ++h) {
    out += (h ? ", " : "") + map.hosts[h] + " = rank" ;
    std::vector<int> ranks;
    for (size_t r = 0; r < map.hostOf.size(); ++r)
      if (map.hostOf[r] == int(h))
        ranks.push_back(int(r));
    out += ranks.size() == 1 ? " " : "s ";
    // Runs of consecutive ranks as first-last.
    for (size_t i = 0; i < ranks.size();) {
      size_t j = i;
      while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
        ++j;
      out += (i ? "," : "") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
      i = j + 1;
    }
  }
  return out;
}

} // namespace planrt
