// One process's coverage recording (monitor coverage ..., branchstub --coverage): the recorder
// fed by the process's tracer, the function index for names, an optional call tree for the
// flame graph, and the writers (drcov, lcov, SVG pictures). It outlives the process, so a file
// can still be saved after the program exited.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>

#include "backend/coverage/call_tree.h"
#include "backend/coverage/coverage.h"
#include "backend/coverage/functions.h"
#include "backend/process.h"

namespace server {

enum class CoverageFormat { Drcov2, Drcov3, Lcov };
// `forced` (drcov, drcov3, lcov) wins; else the file name: *.info -> lcov, anything else drcov.
std::optional<CoverageFormat> coverage_format(const std::string& path, const std::string& forced);

class CoverageRun {
 public:
  explicit CoverageRun(backend::Process& p);
  ~CoverageRun();
  CoverageRun(const CoverageRun&) = delete;
  CoverageRun& operator=(const CoverageRun&) = delete;

  pid_t pid() const { return pid_; }
  bool recording() const { return recording_; }
  bool attached() const { return process_ != nullptr; }
  // Also build the call tree (flame graph); only before start().
  void keep_call_tree();
  // Traces every thread of the process from where it stands (and new ones where the engine
  // reports them).
  backend::Result<void> start();
  void stop();                 // every thread's block ends at its pc
  void process_gone();         // the process exited or is about to be destroyed
  void exec_happened();        // a new image: the old code is gone

  // Writes the coverage so far; returns what to tell the user.
  backend::Result<std::string> save(const std::string& path, CoverageFormat format);
  backend::Result<std::string> save_flame_graph(const std::string& path, const std::string& title);
  // The control-flow graph of `function` with the executed blocks and the edge counts.
  backend::Result<std::string> save_cfg(const std::string& function, const std::string& path);
  std::string status() const;

 private:
  std::vector<std::pair<pid_t, uint64_t>> open_threads() const;  // live threads and their pcs
  void make_recorder();

  pid_t pid_ = 0;
  backend::Process* process_ = nullptr;
  std::unique_ptr<backend::CoverageRecorder> recorder_;
  std::unique_ptr<backend::FunctionIndex> functions_;
  std::unique_ptr<backend::CallTree> tree_;
  bool recording_ = false;
};

// `monitor btrace graph FILE.svg`: a flame graph of tid's recorded branch history.
backend::Result<std::string> save_history_flame_graph(backend::Process& p, pid_t tid, const std::string& path);

}  // namespace server
