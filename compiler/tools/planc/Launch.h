// planc run's launcher: the command that starts a built executable on its mesh's
// devices, on this machine, across the hosts of a hostfile, or in a Slurm allocation.
#ifndef PLANC_TOOLS_PLANC_LAUNCH_H
#define PLANC_TOOLS_PLANC_LAUNCH_H

#include "plan/Lang/Program.h"

#include <optional>
#include <string>
#include <vector>

namespace plan {

/// The argv that runs `exe` (an absolute path) for `mesh`: the executable itself on one
/// device; else MPI's `mpirun -n DEVICES` (MPICH's hydra), with `-f HOSTS` when a
/// hostfile is given, or inside a Slurm allocation `srun --mpi=pmi2 -n DEVICES`. Ranks
/// go to hosts in order, a host's slots at a time (node-major), so each host must hold
/// one node of the mesh: a hostfile's slots, or the allocation's nodes and tasks per node
/// (read from its environment), must match the mesh's nodes and devices a node. A mismatch, an unreadable or malformed hostfile, or a missing mpirun
/// is reported on stderr, and nothing returned.
std::optional<std::vector<std::string>> launchCommand(const sema::Mesh &mesh, const std::string &exe,
                                                      const std::string &hostsFile);

} // namespace plan

#endif // PLANC_TOOLS_PLANC_LAUNCH_H
