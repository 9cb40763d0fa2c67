// planc run's launcher (Launch.h): hostfiles, Slurm allocations, the mesh's nodes.
#include "Launch.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

namespace plan {

namespace {

struct Host {
  std::string name;
  int64_t slots = 1;
  int line = 0;
};

/// "host[:slots]" lines (MPICH hydra's hostfile), `#` comments and blank lines skipped.
std::optional<std::vector<Host>> readHostfile(const std::string &path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buf) {
    llvm::errs() << "planc: error: cannot read the hostfile '" << path << "': " << buf.getError().message() << "\n";
    return std::nullopt;
  }
  std::vector<Host> hosts;
  llvm::SmallVector<llvm::StringRef> lines;
  (*buf)->getBuffer().split(lines, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    llvm::StringRef l = lines[i].split('#').first.trim();
    if (l.empty())
      continue;
    auto [name, rest] = l.split(':');
    Host h{name.trim().str(), 1, int(i + 1)};
    llvm::StringRef slots = rest.split(':').first.trim();
    if (h.name.empty() || (!rest.empty() && (slots.getAsInteger(10, h.slots) || h.slots < 1))) {
      llvm::errs() << path << ":" << i + 1 << ": error: a hostfile line is 'host' or 'host:slots' (slots a positive "
                   << "integer), not '" << l << "'\n";
      return std::nullopt;
    }
    hosts.push_back(h);
  }
  if (hosts.empty()) {
    llvm::errs() << "planc: error: the hostfile '" << path << "' names no host\n";
    return std::nullopt;
  }
  return hosts;
}

std::string meshShape(const sema::Mesh &m) {
  std::string kind = sema::deviceKindName(m.kind);
  return kind + "(" + std::to_string(m.perNode) + ")" + (m.nodes > 1 ? " * " + std::to_string(m.nodes) : "");
}

/// Each host one node of the mesh: `perNode` slots, `nodes` hosts.
bool checkHosts(const sema::Mesh &mesh, const std::vector<Host> &hosts, const std::string &path) {
  int64_t slots = 0;
  for (const Host &h : hosts)
    slots += h.slots;
  if (slots != mesh.devices()) {
    llvm::errs() << "planc: error: the hostfile '" << path << "' gives " << slots << " slots on " << hosts.size()
                 << " host" << (hosts.size() == 1 ? "" : "s") << ", but mesh '" << mesh.name << "' has "
                 << mesh.devices() << " devices (" << meshShape(mesh) << "): one process per device\n";
    return false;
  }
  for (const Host &h : hosts)
    if (h.slots != mesh.perNode) {
      llvm::errs() << path << ":" << h.line << ": error: host '" << h.name << "' has " << h.slots
                   << " slots, but mesh '" << mesh.name << "' holds " << mesh.perNode << " devices a node ("
                   << meshShape(mesh) << ")\n"
                   << "note: ranks are placed node-major, a host's slots at a time; planc explain assumed each node's "
                      "devices on one host: give every host "
                   << mesh.perNode << " slots, or declare the mesh as the hosts are\n";
      return false;
    }
  return true;
}

/// A Slurm allocation's nodes and tasks per node against the mesh (its environment).
bool checkSlurm(const sema::Mesh &mesh) {
  auto env = [](const char *name) -> std::optional<int64_t> {
    const char *v = std::getenv(name);
    int64_t n = 0;
    if (!v || llvm::StringRef(v).getAsInteger(10, n))
      return std::nullopt;
    return n;
  };
  std::optional<int64_t> nodes = env("SLURM_JOB_NUM_NODES"), perNode = env("SLURM_NTASKS_PER_NODE");
  if (nodes && *nodes != mesh.nodes) {
    llvm::errs() << "planc: error: the Slurm allocation has " << *nodes << " node" << (*nodes == 1 ? "" : "s")
                 << ", but mesh '" << mesh.name << "' has " << mesh.nodes << " (" << meshShape(mesh) << ")\n";
    return false;
  }
  if (perNode && *perNode != mesh.perNode) {
    llvm::errs() << "planc: error: the Slurm allocation runs " << *perNode << " tasks a node, but mesh '" << mesh.name
                 << "' holds " << mesh.perNode << " devices a node (" << meshShape(mesh)
                 << "): allocate with --ntasks-per-node=" << mesh.perNode << "\n";
    return false;
  }
  return true;
}

} // namespace

std::optional<std::vector<std::string>> launchCommand(const sema::Mesh &mesh, const std::string &exe,
                                                      const std::string &hostsFile) {
  if (mesh.devices() == 1 && hostsFile.empty())
    return std::vector<std::string>{exe};
  auto mpirun = llvm::sys::findProgramByName("mpirun");
  if (!mpirun) {
    llvm::errs() << "planc: error: the plan's mesh has " << mesh.devices()
                 << " devices, which run as MPI processes, but mpirun is not on PATH (install mpich)\n";
    return std::nullopt;
  }
  std::vector<std::string> argv{*mpirun};
  if (!hostsFile.empty()) {
    std::optional<std::vector<Host>> hosts = readHostfile(hostsFile);
    if (!hosts || !checkHosts(mesh, *hosts, hostsFile))
      return std::nullopt;
    argv.insert(argv.end(), {"-f", hostsFile});
  } else if (std::getenv("SLURM_JOB_ID")) {
    if (!checkSlurm(mesh))
      return std::nullopt;
    // Slurm starts the ranks itself, handing them MPICH's PMI-2 (SLURM_MPI_TYPE, if set,
    // names another); without srun, mpirun launches through the allocation.
    if (auto srun = llvm::sys::findProgramByName("srun")) {
      argv = {*srun};
      if (!std::getenv("SLURM_MPI_TYPE"))
        argv.push_back("--mpi=pmi2");
    }
  }
  argv.insert(argv.end(), {"-n", std::to_string(mesh.devices()), exe});
  return argv;
}

} // namespace plan
