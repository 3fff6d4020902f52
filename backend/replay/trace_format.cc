#include "backend/replay/trace_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace backend::replay {

namespace {

constexpr uint32_t kEventMagic = 0x45565442;  // "BTVE": every record starts with it

// One header value per line: backslash and newline escaped.
std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      ++i;
      out += s[i] == 'n' ? '\n' : s[i];
    } else {
      out += s[i];
    }
  }
  return out;
}

void put(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

bool get(const std::vector<uint8_t>& in, size_t& at, uint64_t& v, int bytes) {
  if (at + bytes > in.size()) return false;
  v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{in[at + i]} << (8 * i);
  at += bytes;
  return true;
}

Result<std::vector<uint8_t>> read_whole(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return errno_error("Cannot open " + path);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::string base_name(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

uint64_t fnv1a64(const void* data, size_t size, uint64_t seed) {
  uint64_t h = seed;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

Result<uint64_t> hash_file(const std::string& path, uint64_t* size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_error("Cannot open " + path);
  uint64_t h = 0xcbf29ce484222325ULL, total = 0;
  std::vector<uint8_t> buf(1 << 16);
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      auto e = errno_error("Cannot read " + path);
      ::close(fd);
      return e;
    }
    if (n == 0) break;
    h = fnv1a64(buf.data(), static_cast<size_t>(n), h);
    total += static_cast<uint64_t>(n);
  }
  ::close(fd);
  if (size) *size = total;
  return h;
}

std::string to_hex(const std::vector<uint8_t>& bytes) {
  std::string out;
  for (uint8_t b : bytes) out += fmt::format("{:02x}", b);
  return out;
}

std::optional<std::vector<uint8_t>> from_hex(const std::string& text) {
  if (text.size() % 2) return std::nullopt;
  std::vector<uint8_t> out;
  for (size_t i = 0; i < text.size(); i += 2) {
    auto nibble = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    int hi = nibble(text[i]), lo = nibble(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<uint8_t>(hi * 16 + lo));
  }
  return out;
}

std::string format_header(const TraceHeader& h) {
  std::string out = fmt::format("branchstub-trace {}\n", h.version);
  for (const auto& a : h.argv) out += "arg " + escape(a) + "\n";
  for (const auto& e : h.env) out += "env " + escape(e) + "\n";
  out += "cwd " + escape(h.cwd) + "\n";
  out += "exe " + escape(h.exe) + "\n";
  out += fmt::format("exe-hash {:016x}\n", h.exe_hash);
  out += "auxv " + to_hex(h.auxv) + "\n";
  out += "at-random " + to_hex(h.at_random) + "\n";
  out += fmt::format("pid {}\n", h.pid);
  out += fmt::format("events {}\n", h.event_count);
  out += fmt::format("complete {}\n", h.complete ? 1 : 0);
  out += fmt::format("exit {}\n", h.exit_status);
  if (h.syscall_buffer) out += "syscall-buffer 1\n";
  for (const auto& f : h.files)
    out += fmt::format("file {:016x} {} {} {}\n", f.hash, f.size, escape(f.copy), escape(f.path));
  if (h.fds) {
    out += "fds";
    for (int fd : *h.fds) out += fmt::format(" {}", fd);
    out += "\n";
  }
  if (h.sig_ignored) out += fmt::format("sig-ignored {:x}\n", *h.sig_ignored);
  if (h.sig_blocked) out += fmt::format("sig-blocked {:x}\n", *h.sig_blocked);
  if (!h.cpu.empty()) out += "cpu " + escape(h.cpu) + "\n";
  if (!h.cpu_features.empty()) {
    out += "cpu-features";
    for (uint32_t w : h.cpu_features) out += fmt::format(" {:08x}", w);
    out += "\n";
  }
  out += fmt::format("xcr0 {:x}\n", h.xcr0);
  return out;
}

Result<TraceHeader> parse_header(const std::string& text) {
  TraceHeader h;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  auto bad = [&](const std::string& why) {
    return Error{EINVAL, fmt::format("trace header line {}: {}", n, why)};
  };
  while (std::getline(in, line)) {
    ++n;
    auto space = line.find(' ');
    std::string key = line.substr(0, space), value = space == std::string::npos ? "" : line.substr(space + 1);
    try {
      if (n == 1) {
        if (key != "branchstub-trace") return bad("not a branchstub trace");
        h.version = std::stoi(value);
        if (h.version != kTraceVersion)
          return bad(fmt::format("version {}, this branchstub reads version {}", h.version, kTraceVersion));
      } else if (key == "arg") {
        h.argv.push_back(unescape(value));
      } else if (key == "env") {
        h.env.push_back(unescape(value));
      } else if (key == "cwd") {
        h.cwd = unescape(value);
      } else if (key == "exe") {
        h.exe = unescape(value);
      } else if (key == "exe-hash") {
        h.exe_hash = std::stoull(value, nullptr, 16);
      } else if (key == "auxv" || key == "at-random") {
        auto bytes = from_hex(value);
        if (!bytes) return bad("bad hex");
        (key == "auxv" ? h.auxv : h.at_random) = *bytes;
      } else if (key == "pid") {
        h.pid = std::stoi(value);
      } else if (key == "events") {
        h.event_count = std::stoull(value);
      } else if (key == "complete") {
        h.complete = value == "1";
      } else if (key == "exit") {
        h.exit_status = std::stoi(value);
      } else if (key == "syscall-buffer") {
        h.syscall_buffer = value == "1";
      } else if (key == "file") {
        std::istringstream f(value);
        MappedFile m;
        std::string hash, copy;
        f >> hash >> m.size >> copy;
        m.hash = std::stoull(hash, nullptr, 16);
        m.copy = unescape(copy);
        std::string rest;
        std::getline(f, rest);
        if (rest.empty() || rest.front() != ' ') return bad("file without a path");
        m.path = unescape(rest.substr(1));
        h.files.push_back(m);
      } else if (key == "fds") {
        std::istringstream words(value);
        h.fds.emplace();
        for (std::string w; words >> w;) h.fds->push_back(std::stoi(w));
      } else if (key == "sig-ignored") {
        h.sig_ignored = std::stoull(value, nullptr, 16);
      } else if (key == "sig-blocked") {
        h.sig_blocked = std::stoull(value, nullptr, 16);
      } else if (key == "cpu") {
        h.cpu = unescape(value);
      } else if (key == "cpu-features") {
        std::istringstream words(value);
        for (std::string w; words >> w;) h.cpu_features.push_back(static_cast<uint32_t>(std::stoul(w, nullptr, 16)));
      } else if (key == "xcr0") {
        h.xcr0 = std::stoull(value, nullptr, 16);
      } else if (!key.empty()) {
        return bad("unknown key '" + key + "'");
      }
    } catch (const std::exception&) {
      return bad("bad number");
    }
  }
  if (n == 0) return Error{EINVAL, "trace header is empty"};
  if (h.argv.empty()) return Error{EINVAL, "trace header names no program"};
  return h;
}

std::vector<uint8_t> encode_event(const TraceEvent& e) {
  std::vector<uint8_t> body;
  put(body, e.position, 8);
  put(body, e.branches, 8);
  put(body, e.pc, 8);
  put(body, static_cast<uint64_t>(e.nr), 8);
  for (uint64_t a : e.args) put(body, a, 8);
  put(body, static_cast<uint64_t>(e.result), 8);
  put(body, static_cast<uint32_t>(e.mapped_file), 4);
  put(body, e.writes.size(), 4);
  for (const auto& w : e.writes) {
    put(body, w.addr, 8);
    put(body, w.data_offset, 8);
    put(body, w.length, 8);
  }
  std::vector<uint8_t> out;
  put(out, kEventMagic, 4);
  put(out, static_cast<uint32_t>(e.kind), 4);
  put(out, body.size(), 4);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

Result<TraceEvent> decode_event(const std::vector<uint8_t>& bytes, size_t& at) {
  size_t start = at;
  auto bad = [&](const char* why) { return Error{EINVAL, fmt::format("trace events at byte {}: {}", start, why)}; };
  uint64_t magic = 0, kind = 0, size = 0;
  if (!get(bytes, at, magic, 4) || !get(bytes, at, kind, 4) || !get(bytes, at, size, 4)) return bad("truncated record");
  if (magic != kEventMagic) return bad("not an event record");
  if (kind < 1 || kind > 5) return bad("unknown event kind");
  if (at + size > bytes.size()) return bad("truncated record");
  size_t end = at + size;
  TraceEvent e;
  e.kind = static_cast<EventKind>(kind);
  uint64_t v = 0, count = 0;
  bool ok = get(bytes, at, e.position, 8) && get(bytes, at, e.branches, 8) && get(bytes, at, e.pc, 8) &&
            get(bytes, at, v, 8);
  e.nr = static_cast<int64_t>(v);
  for (auto& a : e.args) ok = ok && get(bytes, at, a, 8);
  ok = ok && get(bytes, at, v, 8);
  e.result = static_cast<int64_t>(v);
  ok = ok && get(bytes, at, v, 4);
  e.mapped_file = static_cast<int32_t>(static_cast<uint32_t>(v));
  ok = ok && get(bytes, at, count, 4);
  if (!ok || at + count * 24 > end) return bad("truncated event");
  for (uint64_t i = 0; i < count; ++i) {
    MemoryWrite w;
    get(bytes, at, w.addr, 8);
    get(bytes, at, w.data_offset, 8);
    get(bytes, at, w.length, 8);
    e.writes.push_back(w);
  }
  at = end;  // later versions may append fields: skipped
  return e;
}

Result<std::unique_ptr<TraceWriter>> TraceWriter::create(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return errno_error("Cannot create " + dir);
  struct stat st;
  if (::stat((dir + "/events").c_str(), &st) == 0 || ::stat((dir + "/header").c_str(), &st) == 0)
    return Error{EEXIST, dir + " already holds a trace."};
  if (::mkdir((dir + "/files").c_str(), 0755) != 0 && errno != EEXIST) return errno_error("Cannot create " + dir + "/files");
  std::unique_ptr<TraceWriter> w(new TraceWriter(dir));
  w->events_ = std::fopen((dir + "/events").c_str(), "wbe");
  w->data_ = std::fopen((dir + "/data").c_str(), "wbe");
  if (!w->events_ || !w->data_) return errno_error("Cannot write in " + dir);
  return w;
}

TraceWriter::~TraceWriter() {
  if (events_) std::fclose(events_);
  if (data_) std::fclose(data_);
}

MemoryWrite TraceWriter::add_data(uint64_t addr, const std::vector<uint8_t>& bytes) {
  MemoryWrite w{addr, data_size_, bytes.size()};
  if (!bytes.empty()) std::fwrite(bytes.data(), 1, bytes.size(), data_);
  data_size_ += bytes.size();
  return w;
}

Result<void> TraceWriter::add_event(TraceEvent e) {
  e.position = position_++;
  auto bytes = encode_event(e);
  if (std::fwrite(bytes.data(), 1, bytes.size(), events_) != bytes.size()) return errno_error("Cannot write events");
  return {};
}

Result<int> TraceWriter::add_file(const std::string& path, TraceHeader& header) {
  for (size_t i = 0; i < header.files.size(); ++i)
    if (header.files[i].path == path) return static_cast<int>(i);
  MappedFile m;
  m.path = path;
  std::string name = base_name(path);
  for (char& c : name)
    if (c == ' ' || c == '\\' || c == '\n') c = '_';  // one word in the header
  m.copy = fmt::format("{}-{}", header.files.size(), name);
  auto hash = hash_file(path, &m.size);
  if (!hash) return hash.error();
  m.hash = *hash;
  std::string dest = dir_ + "/files/" + m.copy;
  // A hard link costs nothing but shares later changes of the file; a copy keeps what was
  // mapped. Hash mismatches tell the replay either way.
  if (::link(path.c_str(), dest.c_str()) != 0) {
    std::ifstream in(path, std::ios::binary);
    std::ofstream out(dest, std::ios::binary);
    out << in.rdbuf();
    if (!out) return errno_error("Cannot copy " + path + " into the trace");
  }
  header.files.push_back(m);
  return static_cast<int>(header.files.size() - 1);
}

Result<void> TraceWriter::finish(TraceHeader& header) {
  header.event_count = position_;
  std::fflush(events_);
  std::fflush(data_);
  std::string tmp = dir_ + "/header.tmp";
  {
    std::ofstream out(tmp);
    out << format_header(header);
    if (!out) return errno_error("Cannot write the trace header");
  }
  if (::rename(tmp.c_str(), (dir_ + "/header").c_str()) != 0) return errno_error("Cannot write the trace header");
  return {};
}

Result<TraceReader> TraceReader::open(const std::string& dir) {
  TraceReader r;
  r.dir_ = dir;
  auto text = read_whole(dir + "/header");
  if (!text) return Error{ENOENT, dir + " holds no finished trace (no header)."};
  auto header = parse_header(std::string(text->begin(), text->end()));
  if (!header) return header.error();
  r.header_ = *header;
  auto events = read_whole(dir + "/events");
  if (!events) return events.error();
  size_t at = 0;
  while (at < events->size()) {
    auto e = decode_event(*events, at);
    if (!e) return e.error();
    r.events_.push_back(std::move(*e));
  }
  if (r.events_.size() != r.header_.event_count)
    return Error{EINVAL, fmt::format("trace has {} events, its header says {}", r.events_.size(), r.header_.event_count)};
  auto data = read_whole(dir + "/data");
  if (!data) return data.error();
  r.data_ = std::move(*data);
  return r;
}

Result<std::vector<uint8_t>> TraceReader::bytes(const MemoryWrite& w) const {
  if (w.data_offset + w.length > data_.size())
    return Error{EINVAL, fmt::format("trace data ends before offset {}+{}", w.data_offset, w.length)};
  return std::vector<uint8_t>(data_.begin() + static_cast<long>(w.data_offset),
                              data_.begin() + static_cast<long>(w.data_offset + w.length));
}

std::string TraceReader::file_copy_path(int index) const {
  if (index < 0 || static_cast<size_t>(index) >= header_.files.size()) return {};
  return dir_ + "/files/" + header_.files[index].copy;
}

}  // namespace backend::replay
