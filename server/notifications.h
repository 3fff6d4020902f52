// Non-stop stop notifications: the %Stop / vStopped exchange. Stop replies queue up here; the
// first one goes out as a "%Stop:" notification, and each vStopped acknowledges the one in
// flight and is answered with the next (or OK when none is left). Only one notification is in
// flight at a time: the client drains the rest with vStopped (GDB's remote protocol, "Notification
// Packets").
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace server {

class StopNotifications {
 public:
  // A new stop reply. True when it is to be sent now as a notification (nothing in flight);
  // otherwise it waits for a vStopped.
  bool push(std::string reply);
  // vStopped: the reply in flight is acknowledged; the next one to answer with (it is in
  // flight from now on), or nullopt when the queue is empty (answer OK).
  std::optional<std::string> acknowledge();
  // '?' in non-stop: what was queued is dropped and these replies take its place, the first
  // one answering '?' itself (nullopt: none, answer OK); the client drains them with vStopped.
  std::optional<std::string> restart(std::vector<std::string> replies);
  void clear() { queue_.clear(); }
  size_t size() const { return queue_.size(); }
  bool empty() const { return queue_.empty(); }
  const std::string& front() const { return queue_.front(); }  // the one in flight

 private:
  std::deque<std::string> queue_;  // front: sent (notification or reply), not acknowledged yet
};

}  // namespace server
