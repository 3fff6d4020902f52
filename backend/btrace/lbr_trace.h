// Serves `record btrace bts` from msr_helper LBR snapshots (--btrace-source=lbr): each stop of
// a recorded thread adds the branches of its snapshot to the thread's ring.
#pragma once

#include <memory>

#include "backend/btrace/lbr_source.h"
#include "backend/btrace/trace_manager.h"

namespace backend {

// A reader for TraceManager::set_lbr_reader. The first call for a thread attaches the module's
// LBR to it (so the call made when recording starts arms it); later calls return the snapshot
// taken at the thread's last stop, oldest branch first, and its sequence number.
TraceManager::LbrReader make_lbr_reader(std::shared_ptr<LbrDevice> device);

}  // namespace backend
