// One connected client: framing, acks, the negotiated dialect, per-connection state, and the
// dispatch of typed requests to the handlers (server/handlers/*.cc).
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/process.h"
#include "protocol/framing.h"
#include "protocol/packets.h"
#include "protocol/replies.h"
#include "server/hostio.h"
#include "server/notifications.h"
#include "server/read_ahead.h"
#include "server/transport.h"

namespace server {

class Server;

// Why the session is waiting for the inferior to stop.
enum class Waiting { Nothing, StopReply, StepBranch, MonitorStepBranch };

class Session {
 public:
  Session(Server& server, std::unique_ptr<Transport> transport);
  ~Session();
  void start();
  void close();
  bool closed() const { return closed_; }

  // The inferior stopped (or exited) while this session waited for it; in non-stop, any
  // event (it becomes a %Stop notification, or waits for the client's vStopped).
  void on_stop(const backend::StopEvent& event);

  // ---- non-stop (QNonStop:1) ----
  bool non_stop() const { return non_stop_; }
  void set_non_stop(bool on) {
    non_stop_ = on;
    notifications_.clear();
  }
  // '?': `stops` take the place of the queued notifications; the first answers '?' itself
  // (none: OK), the client drains the others with vStopped.
  protocol::Reply restart_notifications(std::vector<protocol::Reply> stops);
  // vStopped: the notification in flight is acknowledged; the answer is the next queued stop
  // (none left: OK).
  protocol::Reply acknowledge_notification();
  // QThreadEvents: what every process (new ones too) reports about threads.
  bool thread_events() const { return thread_events_; }
  void set_thread_events(bool on) { thread_events_ = on; }

  // ---- used by handlers ----
  Server& server() { return server_; }
  backend::Process* process();
  protocol::Dialect& dialect() { return dialect_; }
  void send(const protocol::Reply& reply);        // one packet, in this client's dialect
  void send_console(std::string_view text);       // "O<hex>" packet (qRcmd output)
  void note_lldb();                               // an LLDB-only packet was seen
  // During a long synchronous request: the client sent Ctrl-C or hung up since.
  bool client_cancels();
  // Signal numbers on the wire: GDB's numbering for GDB; Linux's for LLDB, which reads them
  // as the platform's (lldb-server sends those and says native-signals+).
  int wire_signal(int host_signal) const;
  int host_signal(int wire_signal) const;
  void set_no_ack() { no_ack_pending_ = true; }
  void set_extended(bool on) { extended_ = on; }
  bool extended() const { return extended_; }
  void expect_stop(Waiting why = Waiting::StopReply) { waiting_ = why; }
  Waiting waiting() const { return waiting_; }

  // Thread selection (Hg/Hc and the implicit Hg after a stop reply).
  pid_t general_thread() const;   // resolves "any" to a live thread; 0 if no process
  void set_general_thread(pid_t tid) { general_thread_ = tid; }
  void set_continue_thread(pid_t tid) { continue_thread_ = tid; }
  // The process that Hg p<pid>.<tid> last named (a fork child the client debugs beside the
  // main process); 0 for the main process. process() is that process.
  void select_process(pid_t pid) { selected_pid_ = pid; }
  pid_t continue_thread() const { return continue_thread_; }
  // Which thread a request addressed: LLDB's ";thread:" suffix wins over Hg.
  pid_t thread_for(std::optional<int> suffix) const;

  // ---- resuming ----
  // Qbranchstub:stepbranch-next: the client's next single step of `tid` (in process `pid`)
  // runs it to its `count`-th next taken branch. Kept here, not in the backend: it is a
  // promise about the next resume request, which begin_resume hands to that resume (or lets
  // expire).
  // `lifted_breakpoint`: the client's breakpoint it takes out for that step (0: none).
  struct StepBranchRequest { pid_t pid = 0; pid_t tid = 0; uint32_t count = 1; uint64_t lifted_breakpoint = 0; };
  void arm_step_branch(StepBranchRequest r) { step_branch_next_ = r; }
  // What a resume runs: a plan per process (vCont, c/s/C/S).
  using ResumePlans = std::vector<std::pair<backend::Process*, backend::ResumePlan>>;
  // The one-shot requests a resume fulfils (see begin_resume).
  struct ResumeRequests {
    // The stepbranch-next request, when the resume single-steps its thread (with no signal to
    // deliver) in `step_branch_process`: that step becomes the stepbranch.
    std::optional<StepBranchRequest> step_branch;
    backend::Process* step_branch_process = nullptr;
  };
  // Every resume of the inferior passes through here first: vCont and c/s/C/S with their
  // `plans`, the stepbranch packet and `monitor stepbranch` with none (they run one thread
  // their own way). The one-shot requests armed for "the next resume" are taken: those this
  // resume fulfils are handed back, the others expire, so none outlives the resume after it.
  ResumeRequests begin_resume(const ResumePlans& plans = {});
  // A breakpoint the server put back (in process `pid`) for a converted step's run, in place of
  // the one the client lifted for that step; taken out again at the run's stop.
  void hold_breakpoint_for_run(pid_t pid, uint64_t addr) { run_breakpoint_ = std::make_pair(pid, addr); }
  // The stop that ended a stepbranch, while it is the last stop (qbranchstub:stepbranch-last).
  const std::optional<backend::StopEvent>& last_step_branch() const { return last_step_branch_; }

  // qXfer snapshots: created at offset 0, later chunks served from the snapshot.
  std::string& xfer_snapshot(const std::string& key) { return xfer_cache_[key]; }

  HostIo& hostio() { return hostio_; }
  // qTfP/qTfV: the definition lines still to upload (qTsP/qTsV take the next).
  std::vector<std::string>& trace_upload() { return trace_upload_; }

  // Builds the stop reply (registers expedited, dialect applied) for an event.
  // `stepbranch` replies always name the mechanism, so scripts can tell us from gdbserver.
  // A stop, an exit, a thread's exit, or 'N' (an error for a client without no-resumed+).
  protocol::Reply stop_reply_for(const backend::StopEvent& event, bool stepbranch = false);
  // The stop as the wire describes it (reason, GDB signal, expedited registers, LLDB extras).
  protocol::StopReply describe_stop(const backend::StopEvent& event, bool stepbranch = false);

 private:
  void on_bytes(std::string_view bytes);
  void on_packet(const std::string& payload);
  protocol::Reply dispatch(const protocol::Request& request);
  void write_packet(std::string_view payload);
  void write_notification(std::string_view payload);  // "%Stop:..." (never acked, never resent)
  void write_framed(std::string_view payload, std::string framed);
  // After a bulk memory read was answered: prepare the next block while the client decodes.
  void read_ahead_after(const protocol::ReadMemory& answered);

  Server& server_;
  std::unique_ptr<Transport> transport_;
  protocol::Framer framer_;
  protocol::Dialect dialect_;
  bool no_ack_ = false;
  bool no_ack_pending_ = false;
  bool extended_ = false;
  bool closed_ = false;
  bool non_stop_ = false;
  bool thread_events_ = false;
  // A request is being answered: a notification due now goes out after its reply (as
  // gdbserver's do), never between the request and its reply.
  bool answering_ = false;
  bool notification_due_ = false;
  StopNotifications notifications_;  // payloads, encoded when their stop happened
  Waiting waiting_ = Waiting::Nothing;
  pid_t general_thread_ = 0;
  pid_t continue_thread_ = 0;
  pid_t selected_pid_ = 0;
  std::optional<StepBranchRequest> step_branch_next_;
  std::optional<backend::StopEvent> last_step_branch_;
  std::optional<std::pair<pid_t, uint64_t>> run_breakpoint_;  // hold_breakpoint_for_run
  std::string last_sent_;   // for '-' retransmission in ack mode
  std::map<std::string, std::string> xfer_cache_;
  HostIo hostio_;
  std::vector<std::string> trace_upload_;
  ReadAhead read_ahead_;
  uint64_t packets_seen_ = 0;  // a read-ahead is prepared only if no packet came in between
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for work posted to the loop
};

}  // namespace server
