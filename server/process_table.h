// Every process the server debugs, by pid, in one map: the ones it launched or attached to and
// the fork children the backend reported. A reported child is held (stopped, clean of our
// breakpoints) until the client names it (Hg, vCont) or detaches it; one nobody named when
// the client resumes is let go. The primary process is the oldest one that is not held: what
// clients that cannot name processes (no multiprocess) talk to.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <vector>

#include "backend/process.h"

namespace server {

class ProcessTable {
 public:
  void add(std::unique_ptr<backend::Process> p);
  // A fork child of `parent`, held until named.
  void add_fork_child(std::unique_ptr<backend::Process> p, pid_t parent);
  // Any process, held or not; null if unknown.
  backend::Process* find(pid_t pid);
  backend::Process* primary();
  // The processes the client debugs (not held), primary first.
  std::vector<backend::Process*> debugged();
  std::vector<pid_t> held() const;
  bool is_fork_child(pid_t pid) const;
  // The client named it: it is debugged from now on (false if unknown).
  bool name(pid_t pid);
  // Held children of `parent` (it is being detached: the client follows them).
  void name_children_of(pid_t parent);
  std::unique_ptr<backend::Process> remove(pid_t pid);
  // Every process, for shutting down: held children last.
  std::vector<backend::Process*> all();
  void clear() { entries_.clear(); }
  bool empty() const { return entries_.empty(); }

 private:
  struct Entry {
    std::unique_ptr<backend::Process> process;
    bool held = false;
    pid_t parent = 0;     // a fork child's parent (0: launched or attached)
    uint64_t order = 0;   // when it was added: the primary is the oldest debugged one
  };
  std::map<pid_t, Entry> entries_;
  uint64_t next_order_ = 0;
};

}  // namespace server
