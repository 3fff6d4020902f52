// DynamoRIO's drcov log format, read by Lighthouse (IDA, Binary Ninja), Cartographer (Ghidra),
// bncov and DynamoRIO's own drcov2lcov. As drcovlib writes it:
//
//   DRCOV VERSION: 2                      (3: block offsets are relative to module segments)
//   DRCOV FLAVOR: drcov
//   Module Table: version 4, count N      (version 5 with DRCOV VERSION 3)
//   Columns: id, containing_id, start, end, entry, offset, path
//     0,   0, 0x0000555555554000, 0x0000555555559000, 0x0000555555555060, 0000000000000000, /bin/prog
//   BB Table: M bbs
//   M binary records {uint32 start; uint16 size; uint16 mod_id}, little-endian, 8 bytes each
//
// Version 2 (the default: Lighthouse accepts no other) lists one entry per module and gives
// block starts relative to the module's base. Version 3 lists one entry per mapped segment
// (containing_id = the module's first segment, offset = the segment's file offset, plus the
// preferred_base column) and gives block starts relative to the segment.
#pragma once

#include <string>

#include "backend/coverage/coverage.h"

namespace backend {

// The file's bytes. Blocks outside every module are left out (`skipped` counts them); a block
// longer than 65535 bytes is written as consecutive records.
std::string format_drcov(const CoverageSnapshot& snapshot, int version = 2, size_t* skipped = nullptr);

}  // namespace backend
